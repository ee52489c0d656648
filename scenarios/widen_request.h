#pragma once
// The syntax of a run's widening request: what `leapfrog-agent run --widen`
// takes, a job's ScenarioSpec.widen carries and the coordinator checks before
// it stores a campaign (agent/widen.h applies it to a kernel).

#include <string>
#include <vector>

#include "scenarios/outcome.h"

namespace leapfrog::widen {

// What `--widen` asked for: "seed" (default), "off", or an explicit list
// "POINT:PROBABILITY_PPM:DELAY_NS:UID[,...]" (UID a number or "any").
struct Request {
  enum class Mode { Seed, Off, Explicit } mode = Mode::Seed;
  std::vector<WidenPoint> points;  // Explicit only, values passed to the kernel as given
  std::string text;                // as written, for the outcome
};

// Parses a --widen value. Throws UsageError naming what is wanted; the
// values themselves are checked by the kernel.
Request parse_request(const std::string& text);

// The request that sets exactly `points` (as an outcome recorded them), in
// parse_request()'s syntax; "off" when there are none.
std::string format_request(const std::vector<WidenPoint>& points);

}  // namespace leapfrog::widen
