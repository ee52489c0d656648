#pragma once
// lookup-scale results for people and their tools: will-it-scale's CSV
// (the one runtest.py prints and plot.js reads), and a before/after
// comparison of two runs, point by point, with Welch's t-test.

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

// One point of `after` against the same test, mode and task count in `before`.
struct PointChange {
  std::string test;
  std::string mode;
  uint32_t tasks = 0;
  stats::Change change;
};
// Every point present in both, in `after`'s order; only `test` unless empty.
// A point without samples counts as its mean alone (too few samples). A
// point either side measured beside more than kLoadedCpus of other work
// (its other_load, or in a VM its host_load) is "loaded: not judged": the
// interval is shown, but other work makes both the change and the noise.
constexpr double kLoadedCpus = 0.5;
bool loaded(const ScalePoint& p);
std::vector<PointChange> compare_points(const std::vector<ScalePoint>& before,
                                        const std::vector<ScalePoint>& after,
                                        const std::string& test = "");

// LKP-style lines: "test mode tasks  before ±%  after ±%  %change [ci]  verdict".
std::string to_text(const std::vector<PointChange>& changes, const std::string& before_label,
                    const std::string& after_label);

}  // namespace leapfrog
