#include "scenarios/scale_report.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <sstream>

namespace leapfrog {
namespace {

ScalePoint point(const std::string& test, const std::string& mode, uint32_t tasks, double mean,
                 double idle, std::vector<double> samples = {}) {
  ScalePoint p;
  p.test = test;
  p.mode = mode;
  p.tasks = tasks;
  p.ops_per_sec = mean;
  p.idle_pct = idle;
  p.samples = std::move(samples);
  return p;
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::stringstream in(s);
  std::string part;
  while (std::getline(in, part, sep)) out.push_back(part);
  return out;
}

TEST(WisCsv, MatchesWillItScalesHeaderAndColumns) {
  const std::vector<ScalePoint> points = {
      point("lseek1", "processes", 1, 1000.7, 50.123), point("lseek1", "threads", 1, 1200.2, 49.5),
      point("lseek1", "processes", 2, 1900.0, 0.0),    point("lseek1", "threads", 2, 2100.9, 1.25),
      point("open1", "processes", 1, 5.0, 50),  // another test: not in lseek1's CSV
  };
  const std::string csv = wis_csv(points, "lseek1");
  EXPECT_EQ(csv,
            "tasks,processes,processes_idle,threads,threads_idle,linear\n"
            "0,0,100,0,100,0\n"
            "1,1000,50.12,1200,49.50,1200\n"
            "2,1900,0.00,2100,1.25,2400\n");
  const auto lines = split(csv, '\n');
  ASSERT_EQ(lines.size(), 4u);
  const auto header = split(lines[0], ',');
  EXPECT_EQ(header, (std::vector<std::string>{"tasks", "processes", "processes_idle", "threads",
                                              "threads_idle", "linear"}));
  for (const auto& l : lines) EXPECT_EQ(split(l, ',').size(), 6u) << l;
}

TEST(WisCsv, AModeNotRunIsMinusOne) {
  const std::string csv = wis_csv(
      {point("pread2", "processes", 1, 10, 40), point("pread2", "processes", 2, 19, 0)}, "pread2");
  EXPECT_EQ(csv,
            "tasks,processes,processes_idle,threads,threads_idle,linear\n"
            "0,0,100,0,100,0\n"
            "1,10,40.00,-1,-1.00,10\n"
            "2,19,0.00,-1,-1.00,20\n");
}

TEST(ComparePoints, IdenticalRunsAreWithinNoiseAndAShiftIsSignificant) {
  const std::vector<double> base = {1000, 1020, 985, 1010, 995};
  std::vector<double> up;
  for (double x : base) up.push_back(x * 1.2);
  const std::vector<ScalePoint> before = {point("lseek1", "processes", 1, 1002, 50, base),
                                          point("lseek1", "processes", 2, 1002, 0, base),
                                          point("open1", "processes", 1, 1002, 50, base)};
  const std::vector<ScalePoint> after = {point("lseek1", "processes", 1, 1002, 50, base),
                                         point("lseek1", "processes", 2, 1202, 0, up),
                                         point("lseek1", "threads", 1, 1002, 50, base),
                                         point("open1", "processes", 1, 1002, 50, base)};
  const auto changes = compare_points(before, after, "lseek1");
  ASSERT_EQ(changes.size(), 2u);  // threads has no "before"; open1 is another test
  EXPECT_EQ(changes[0].tasks, 1u);
  EXPECT_EQ(changes[0].change.significance, stats::Significance::WithinNoise);
  EXPECT_EQ(changes[1].tasks, 2u);
  EXPECT_EQ(changes[1].change.significance, stats::Significance::Significant);
  EXPECT_NEAR(changes[1].change.change_pct, 20, 1e-9);
  const std::string text = to_text(changes, "6.1", "6.1-widen");
  EXPECT_NE(text.find("within noise"), std::string::npos) << text;
  EXPECT_NE(text.find("significant"), std::string::npos) << text;
  EXPECT_NE(text.find("+20.0%"), std::string::npos) << text;
  EXPECT_EQ(compare_points(before, after).size(), 3u);
}

// A point measured beside other work is not judged, however far apart the
// samples are: the load makes both the change and the noise. Either side's
// own other_load or, in a VM, its host's load counts; -1 (unknown) does not.
TEST(ComparePoints, ALoadedPointIsNotJudged) {
  const std::vector<double> base = {1000, 1012, 991, 1006, 995};
  std::vector<double> fast;
  for (double x : base) fast.push_back(1.3 * x);
  const ScalePoint quiet_before = point("lseek1", "processes", 1, 1000, 0, base);
  const ScalePoint quiet_after = point("lseek1", "processes", 1, 1300, 0, fast);
  ASSERT_EQ(compare_points({quiet_before}, {quiet_after})[0].change.significance,
            stats::Significance::Significant);  // the control: judged when quiet

  ScalePoint busy = quiet_after;
  busy.other_load = 0.9;
  EXPECT_EQ(compare_points({quiet_before}, {busy})[0].change.significance,
            stats::Significance::Loaded);
  ScalePoint busy_host = quiet_before;
  busy_host.host_load = 1.4;
  const auto c = compare_points({busy_host}, {quiet_after})[0];
  EXPECT_EQ(c.change.significance, stats::Significance::Loaded);
  EXPECT_NEAR(c.change.change_pct, 30, 1);  // the figures are still shown
  EXPECT_STREQ(stats::to_string(c.change.significance), "loaded: not judged");
  EXPECT_NE(to_text({c}, "a", "b").find("loaded: not judged"), std::string::npos);

  ScalePoint unknown = quiet_after;
  unknown.other_load = -1;
  unknown.host_load = -1;
  EXPECT_EQ(compare_points({quiet_before}, {unknown})[0].change.significance,
            stats::Significance::Significant);
}

TEST(ComparePoints, OldPointsWithoutSamplesCannotBeTested) {
  const auto changes = compare_points({point("stat-same", "threads", 1, 100, 50)},
                                      {point("stat-same", "threads", 1, 181, 50)});
  ASSERT_EQ(changes.size(), 1u);
  EXPECT_EQ(changes[0].change.significance, stats::Significance::TooFewSamples);
  EXPECT_NEAR(changes[0].change.change_pct, 81, 1e-9);
}

// One run of a kernel: lseek1 processes at 1 task, five samples 1 % apart
// around `mean`, in boot `boot`.
RunPoints run(int64_t job, const std::string& boot, double mean) {
  std::vector<double> samples;
  for (double f : {0.99, 0.995, 1.0, 1.005, 1.01}) samples.push_back(mean * f);
  return RunPoints{job, boot, {point("lseek1", "processes", 1, mean, 0, samples)}};
}

TEST(CompareRuns, IdenticalSetsAreWithinNoiseAndAShiftedSetIsSignificant) {
  const std::vector<RunPoints> before = {run(1, "b1", 1000), run(2, "b2", 1030), run(3, "b3", 985)};
  const auto same =
      compare_runs(before, {run(4, "b4", 1000), run(5, "b5", 1030), run(6, "b6", 985)});
  ASSERT_EQ(same.size(), 1u);
  EXPECT_EQ(same[0].change.significance, stats::Significance::WithinNoise);
  EXPECT_EQ(same[0].change.before.n, 3u);
  EXPECT_EQ(same[0].change.after.n, 3u);
  EXPECT_NEAR(same[0].change.change_pct, 0, 1e-9);
  ASSERT_EQ(same[0].before_runs.size(), 3u);
  EXPECT_EQ(same[0].before_runs[1].job_id, 2);
  EXPECT_EQ(same[0].before_runs[1].samples.n, 5u);  // each run's own samples stay
  EXPECT_NEAR(same[0].before_runs[1].samples.mean, 1030, 1e-9);

  const auto up =
      compare_runs(before, {run(4, "b4", 1200), run(5, "b5", 1236), run(6, "b6", 1182)});
  ASSERT_EQ(up.size(), 1u);
  EXPECT_EQ(up[0].change.significance, stats::Significance::Significant);
  EXPECT_NEAR(up[0].change.change_pct, 20, 1e-9);
  const std::string text = to_text(up, "6.1", "6.1-widen");
  EXPECT_NE(text.find(" 3/3 "), std::string::npos) << text;
  EXPECT_NE(text.find("significant"), std::string::npos) << text;
}

// Welch's test over run means, against figures worked by hand: means 10, 12,
// 14 against 20, 22, 24: t = 10 / sqrt(4/3 + 4/3) = 6.124, 4 degrees of
// freedom, p = 0.0036, interval 10 ± 2.776 × 1.633 = [5.47, 14.53], in % of 12.
TEST(CompareRuns, TheTestIsOverTheRunMeans) {
  const auto c = compare_runs({run(1, "a", 10), run(2, "b", 12), run(3, "c", 14)},
                              {run(4, "d", 20), run(5, "e", 22), run(6, "f", 24)})
                     .at(0)
                     .change;
  EXPECT_NEAR(c.t, 6.1237, 1e-3);
  EXPECT_NEAR(c.dof, 4, 1e-9);
  EXPECT_NEAR(c.p_value, 0.00363, 1e-4);
  EXPECT_NEAR(c.change_pct, 83.333, 1e-3);
  EXPECT_NEAR(c.ci_low_pct, 100 * (10 - 2.7764 * 1.63299) / 12, 1e-2);
  EXPECT_NEAR(c.ci_high_pct, 100 * (10 + 2.7764 * 1.63299) / 12, 1e-2);
  EXPECT_EQ(c.significance, stats::Significance::Significant);
}

// The positive control of the rule: one run per kernel whose samples differ
// hugely (+30 %, 1 % apart) is significant by its samples alone
// (compare_points), and not judged as runs: the noise between boots is unknown.
TEST(CompareRuns, OneRunPerKernelIsNotJudged) {
  const RunPoints a = run(1, "boot-a", 1000), b = run(2, "boot-b", 1300);
  ASSERT_EQ(compare_points(a.points, b.points).at(0).change.significance,
            stats::Significance::Significant);
  const auto c = compare_runs({a}, {b}).at(0);
  EXPECT_EQ(c.change.significance, stats::Significance::TooFewRuns);
  EXPECT_STREQ(stats::to_string(c.change.significance), "one run: not judged");
  EXPECT_NEAR(c.change.change_pct, 30, 1e-9);  // the figures are still shown
  ASSERT_EQ(c.after_runs.size(), 1u);
  EXPECT_GT(c.after_runs[0].samples.ci_high, c.after_runs[0].samples.mean);
  const std::string text = to_text({c}, "a", "b");
  EXPECT_NE(text.find(" 1/1 "), std::string::npos) << text;
  EXPECT_NE(text.find("one run: not judged"), std::string::npos) << text;
  // Its own samples' interval is shown as its ±% (1.0 % here, not 0), and
  // no interval of the change.
  EXPECT_NE(text.find("    1.0%           1300    1.0%   +30.0%                   -  one run"),
            std::string::npos)
      << text;
  // Three runs against one: still not judged.
  EXPECT_EQ(compare_runs({a, run(3, "boot-c", 1000), run(4, "boot-d", 1001)}, {b})
                .at(0)
                .change.significance,
            stats::Significance::TooFewRuns);
}

// Runs in one boot are one replicate: their means are averaged first. Runs
// that did not record their boot count as a boot each.
TEST(CompareRuns, RunsOfOneBootCountOnce) {
  const auto same_boot = compare_runs({run(1, "x", 1000), run(2, "x", 1010), run(3, "x", 990)},
                                      {run(4, "y", 1300), run(5, "y", 1310), run(6, "y", 1290)})
                             .at(0);
  EXPECT_EQ(same_boot.change.significance, stats::Significance::TooFewRuns);
  EXPECT_EQ(same_boot.change.before.n, 1u);
  EXPECT_EQ(same_boot.before_runs.size(), 3u);
  EXPECT_NEAR(same_boot.change.before.mean, 1000, 1e-9);
  const auto two_boots = compare_runs({run(1, "x", 1000), run(2, "x", 1020), run(3, "z", 990)},
                                      {run(4, "", 1300), run(5, "", 1290)})
                             .at(0);
  EXPECT_EQ(two_boots.change.before.n, 2u);  // x (mean 1010) and z
  EXPECT_NEAR(two_boots.change.before.mean, 1000, 1e-9);
  EXPECT_EQ(two_boots.change.after.n, 2u);
  EXPECT_EQ(two_boots.change.significance, stats::Significance::Significant);
}

// A loaded run's point makes the set's point not judged; the rule on runs
// comes first. Points only one side has are left out.
TEST(CompareRuns, LoadedAndMissingPoints) {
  std::vector<RunPoints> before = {run(1, "a", 1000), run(2, "b", 1010)};
  std::vector<RunPoints> after = {run(3, "c", 1300), run(4, "d", 1310)};
  ASSERT_EQ(compare_runs(before, after).at(0).change.significance,
            stats::Significance::Significant);
  after[1].points[0].other_load = 0.9;
  const auto c = compare_runs(before, after).at(0);
  EXPECT_EQ(c.change.significance, stats::Significance::Loaded);
  EXPECT_TRUE(c.after_runs[1].loaded);
  EXPECT_EQ(compare_runs({before[0]}, after).at(0).change.significance,
            stats::Significance::TooFewRuns);
  after[0].points.push_back(point("open1", "threads", 1, 5, 0));
  EXPECT_EQ(compare_runs(before, after).size(), 1u);
  EXPECT_TRUE(compare_runs(before, after, "open1").empty());
}

TEST(ScalePointJson, RoundTripsAndReadsOldPoints) {
  ScalePoint p = point("readseek3", "threads", 2, 1234.5, 12.5, {1200, 1269});
  p.stddev = 48.8;
  p.ci_low = 796;
  p.ci_high = 1673;
  p.other_load = 0.25;
  p.host_load = 1.75;
  const ScalePoint q = scale_point_from_json(to_json(p));
  EXPECT_EQ(q.test, p.test);
  EXPECT_EQ(q.mode, p.mode);
  EXPECT_EQ(q.tasks, p.tasks);
  EXPECT_EQ(q.samples, p.samples);
  EXPECT_DOUBLE_EQ(q.ci_high, p.ci_high);
  EXPECT_DOUBLE_EQ(q.other_load, p.other_load);
  EXPECT_DOUBLE_EQ(q.host_load, p.host_load);
  // Before samples were kept, a point was its mean alone.
  const ScalePoint old = scale_point_from_json(
      nlohmann::json{{"test", "lseek"}, {"mode", "processes"}, {"tasks", 1}, {"ops_per_sec", 7.0}});
  EXPECT_TRUE(old.samples.empty());
  EXPECT_DOUBLE_EQ(old.ci_low, 7);
  EXPECT_DOUBLE_EQ(old.idle_pct, -1);
  EXPECT_DOUBLE_EQ(old.host_load, -1);  // not known, never "idle"
  EXPECT_THROW(scale_point_from_json(nlohmann::json{{"test", "x"}}), nlohmann::json::exception);
}

// A comparison's points are one family: twenty null points and one that
// moved +6 % by chance (p = 0.03 alone) say "within noise" together, and the
// text says how significance was judged. The same +6 % on every point is
// significant everywhere.
TEST(CompareRuns, AChancePointAmongManyIsWithinNoise) {
  auto runs = [](int64_t job, const std::string& boot, double base, double moved, int points) {
    RunPoints r{job, boot, {}};
    for (int k = 1; k <= points; ++k)
      r.points.push_back(point("lseek1", "processes", static_cast<uint32_t>(k),
                               k == points ? moved : base, 0, {}));
    return r;
  };
  const std::vector<RunPoints> before = {
      runs(1, "b1", 1000, 1000, 20), runs(2, "b2", 1030, 1030, 20), runs(3, "b3", 985, 985, 20)};
  const std::vector<RunPoints> after = {
      runs(4, "a1", 1000, 1060, 20), runs(5, "a2", 1030, 1090, 20), runs(6, "a3", 985, 1045, 20)};
  const auto alone = compare_runs(
      {runs(1, "b1", 1000, 1000, 1), runs(2, "b2", 1030, 1030, 1), runs(3, "b3", 985, 985, 1)},
      {runs(4, "a1", 1060, 1060, 1), runs(5, "a2", 1090, 1090, 1), runs(6, "a3", 1045, 1045, 1)});
  ASSERT_EQ(alone.at(0).change.significance, stats::Significance::Significant);
  const auto table = compare_runs(before, after);
  ASSERT_EQ(table.size(), 20u);
  EXPECT_EQ(table.back().change.significance, stats::Significance::WithinNoise);
  EXPECT_NEAR(table.back().change.p_value, alone.at(0).change.p_value, 1e-12);
  EXPECT_GT(table.back().change.p_adjusted, 0.05);
  EXPECT_NE(to_text(table, "a", "b").find("Benjamini-Hochberg) over the 20 judged points"),
            std::string::npos);

  const auto all_moved =
      compare_runs(before, {runs(4, "a1", 1060, 1060, 20), runs(5, "a2", 1090, 1090, 20),
                            runs(6, "a3", 1045, 1045, 20)});
  for (const auto& c : all_moved)
    EXPECT_EQ(c.change.significance, stats::Significance::Significant);
}

}  // namespace
}  // namespace leapfrog
