#pragma once
// lookup-scale results for people and their tools: will-it-scale's CSV
// (the one runtest.py prints and plot.js reads), and a before/after
// comparison of two kernels, point by point, with Welch's t-test over their
// runs (boots), each run's mean one observation.

#include <string>
#include <vector>

#include "scenarios/outcome.h"
#include "scenarios/stats/sample_stats.h"

namespace leapfrog {

// will-it-scale's CSV of one test:
//   tasks,processes,processes_idle,threads,threads_idle,linear
// with its leading "0,0,100,0,100,0" row, then one row per task count:
// mean ops/s per mode (-1 where that mode was not run), idle %, and `linear`,
// the larger 1-task mean times the task count.
std::string wis_csv(const std::vector<ScalePoint>& points, const std::string& test);

// One run's own samples of a point: they describe that run, not the noise
// between runs.
struct RunSummary {
  int64_t job_id = 0;
  std::string boot_id;     // "" when the run did not record it
  stats::Summary samples;  // of its samples (its mean alone when it kept none)
  bool loaded = false;     // measured beside other work (loaded())
};

// One point of `after` against the same test, mode and task count in `before`.
struct PointChange {
  std::string test;
  std::string mode;
  uint32_t tasks = 0;
  // compare_points: over the samples of one run per side. compare_runs: over
  // the boots, one mean each (change.before.n = boots before).
  stats::Change change;
  // compare_runs only: every run of each side that has the point, newest
  // first, with its own sample statistics.
  std::vector<RunSummary> before_runs, after_runs;
};
// Every point present in both, in `after`'s order; only `test` unless empty.
// Within one run per side, by its samples: that is no verdict on two kernels,
// since the noise between runs is left out (compare_runs is).
// A point without samples counts as its mean alone (too few samples). A
// point either side measured beside more than kLoadedCpus of other work
// (its other_load, or in a VM its host_load) is "loaded: not judged": the
// interval is shown, but other work makes both the change and the noise.
constexpr double kLoadedCpus = 0.5;
bool loaded(const ScalePoint& p);
std::vector<PointChange> compare_points(const std::vector<ScalePoint>& before,
                                        const std::vector<ScalePoint>& after,
                                        const std::string& test = "");

// One passing run of a kernel as a set comparison takes it.
struct RunPoints {
  int64_t job_id = 0;
  std::string boot_id;  // its scale_host.boot_id; "" (not recorded): a boot of its own
  std::vector<ScalePoint> points;
};
// Two kernels, each by a set of runs: for every point in both sets (in the
// order of `after`'s runs; only `test` unless empty), Welch's t-test over the
// boots' means. Runs of one boot count once (the mean of their means). The
// verdict is "one run: not judged" when a side has fewer than two boots;
// else "loaded: not judged" when any run's point was loaded; else
// significant or within noise at 5 %, once the p-values of the points judged
// are adjusted over all of them (stats::adjust_for_table; compare_points too).
std::vector<PointChange> compare_runs(const std::vector<RunPoints>& before,
                                      const std::vector<RunPoints>& after,
                                      const std::string& test = "");

// LKP-style lines: "test mode tasks runs  before ±%  after ±%  %change [ci]
// verdict", runs being "boots before/boots after" ("-" from compare_points),
// then a line on the adjustment when more than one point was judged.
// A side of one boot shows its run's own ±% (its samples' interval).
std::string to_text(const std::vector<PointChange>& changes, const std::string& before_label,
                    const std::string& after_label);

}  // namespace leapfrog
