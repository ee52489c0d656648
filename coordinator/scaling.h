#pragma once
// lookup-scale results as the HTTP API, the gRPC GetScaling call and the CLI
// read them: the latest passing run of each kernel, its points, and a
// before/after comparison of two runs (scenarios/scale_report.h).

#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

#include "coordinator/store/store.h"
#include "scenarios/scale_report.h"

namespace leapfrog::coord {

// A kernel asked for has no passing lookup-scale run.
class NoScalingRun : public std::runtime_error {
 public:
  explicit NoScalingRun(const std::string& kernel)
      : std::runtime_error("no passing lookup-scale run on kernel \"" + kernel + "\""),
        kernel_(kernel) {}
  const std::string& kernel() const { return kernel_; }

 private:
  std::string kernel_;
};

struct ScalingRuns {
  std::vector<std::string> available;   // every kernel with a passing run, sorted
  std::vector<v1::OutcomeRecord> runs;  // one per kernel asked for, in that order
};

// The latest passing run of each of `kernels` (of every kernel, by label, when
// empty), whatever its age: the store keeps each run as rows (Store::
// scale_runs). Throws NoScalingRun for the first kernel without one, StoreError.
ScalingRuns latest_scaling_runs(Store& store, const std::vector<std::string>& kernels);

// The points of a run, from its typed Outcome.scale (or, stored before it,
// its outcome JSON: scale_run_of); empty when it has none.
std::vector<ScalePoint> scale_points(const v1::OutcomeRecord& run);
// The points of a run as the store keeps them.
std::vector<ScalePoint> scale_points(const ScaleRun& run);
// Its host as the outcome JSON's "scale_host" object (null when the run has none).
nlohmann::json scale_host(const v1::OutcomeRecord& run);

// A kernel whose latest passing run fell significantly below its previous
// one (a nightly scaling run per kernel): the points that dropped.
struct ScalingRegression {
  std::string kernel;
  v1::OutcomeRecord before, after;
  std::vector<PointChange> drops;  // significant, change_pct < 0
};
// Every such kernel, by label, whatever the age of its runs. Reads the points
// of the last two passing runs of each kernel when those runs changed, and
// answers from a cache otherwise, so the overview can ask on every poll.
std::vector<ScalingRegression> scaling_regressions(Store& store);

// One compared point: {test, mode, tasks, before, after (each {n, mean,
// stddev, ci95_low, ci95_high}), change_pct, ci95_low_pct, ci95_high_pct,
// p_value, verdict ("significant" | "within noise" | "too few samples")}.
nlohmann::json to_json(const PointChange& c);

}  // namespace leapfrog::coord
