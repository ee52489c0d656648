#pragma once
// lookup-scale results as the HTTP API, the gRPC GetScaling call and the CLI
// read them: the latest passing run of each kernel, its points, and a
// before/after comparison of two kernels' run sets (scenarios/scale_report.h).
// A kernel's run set is every passing run of its latest campaign (the
// campaign of its newest run), or with `last` N its newest N runs.

#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

#include "coordinator/store/store.h"
#include "leapfrog/v1/http.pb.h"
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

// The run set of each of `kernels` (in that order; each newest first): every
// passing run of the kernel's latest campaign, or with last > 0 its newest
// `last` runs, whatever their campaigns. Throws NoScalingRun for the first
// kernel without a run, StoreError.
std::vector<std::vector<v1::OutcomeRecord>> scaling_sets(Store& store,
                                                         const std::vector<std::string>& kernels,
                                                         uint32_t last = 0);

// A run as compare_runs takes it: its points and its boot (scale_host.boot_id).
RunPoints run_points(const v1::OutcomeRecord& run);
RunPoints run_points(const ScaleRun& run);

// The points of a run, from its typed Outcome.scale (or, stored before it,
// its outcome JSON: scale_run_of); empty when it has none.
std::vector<ScalePoint> scale_points(const v1::OutcomeRecord& run);
// The points of a run as the store keeps them.
std::vector<ScalePoint> scale_points(const ScaleRun& run);
// Its host as the outcome JSON's "scale_host" object (null when the run has none).
nlohmann::json scale_host(const v1::OutcomeRecord& run);

// A kernel whose latest run set (its latest campaign's runs) fell
// significantly below its previous one (the campaign before): the points
// that dropped. A set of one boot never counts as significant.
struct ScalingRegression {
  std::string kernel;
  v1::OutcomeRecord before, after;  // the newest run of each set
  uint32_t before_runs = 0, after_runs = 0;
  std::vector<PointChange> drops;  // significant, change_pct < 0
};
// Every such kernel, by label, whatever the age of its runs. Reads the points
// of the runs of the last two campaigns of each kernel when those runs
// changed, and answers from a cache otherwise, so the overview can ask on
// every poll.
std::vector<ScalingRegression> scaling_regressions(Store& store);

// One compared point: {test, mode, tasks, before, after (each {n, mean,
// stddev, ci95_low, ci95_high}: over the boots' means, n boots),
// before_runs, after_runs (each run's {job_id, boot_id, n, mean, stddev,
// ci95_low, ci95_high, loaded} of its own samples), change_pct, ci95_low_pct,
// ci95_high_pct, p_value, p_adjusted (over the points compared), verdict ("significant" | "within
// noise" | "one run: not judged" | "loaded: not judged" | "too few samples")}.
nlohmann::json to_json(const PointChange& c);
// The same as the HTTP API's message (a number that is not finite unset).
v1::PointChange to_proto(const PointChange& c);

}  // namespace leapfrog::coord
