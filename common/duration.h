#pragma once
// Durations as people type them on the command line (`--duration 5s`,
// `--timeout 2m`), for the agent's runs and the CLI's campaigns and waits.

#include <string>

#include "scenarios/scenario.h"

namespace leapfrog {

// "5s", "250ms", "2m", "1.5" (seconds) -> nanoseconds; throws UsageError.
TimeNs parse_duration(const std::string& text);

}  // namespace leapfrog
