#include "coordinator/triage/stats.h"

#include <gtest/gtest.h>

#include <cmath>

namespace leapfrog::coord::triage {
namespace {

TEST(WilsonInterval, MatchesPublishedValues) {
  // Reference values of the 95% Wilson score interval (z = 1.96).
  Interval half = wilson_interval(5, 10);
  EXPECT_DOUBLE_EQ(half.rate, 0.5);
  EXPECT_NEAR(half.lower, 0.2366, 1e-4);
  EXPECT_NEAR(half.upper, 0.7634, 1e-4);
  Interval none = wilson_interval(0, 10);
  EXPECT_DOUBLE_EQ(none.rate, 0);
  EXPECT_DOUBLE_EQ(none.lower, 0);
  EXPECT_NEAR(none.upper, 0.2775, 1e-4);
  Interval all = wilson_interval(10, 10);
  EXPECT_NEAR(all.lower, 0.7225, 1e-4);
  EXPECT_DOUBLE_EQ(all.upper, 1);
  Interval one = wilson_interval(1, 20);
  EXPECT_NEAR(one.lower, 0.0089, 1e-4);
  EXPECT_NEAR(one.upper, 0.2361, 1e-4);
}

TEST(WilsonInterval, NoRunsKnowsNothing) {
  Interval i = wilson_interval(0, 0);
  EXPECT_EQ(i.lower, 0);
  EXPECT_EQ(i.upper, 1);
}

TEST(WilsonInterval, NarrowsWithMoreRuns) {
  const Interval few = wilson_interval(3, 10), many = wilson_interval(300, 1000);
  EXPECT_LT(many.upper - many.lower, few.upper - few.lower);
  EXPECT_LT(many.lower, 0.3);
  EXPECT_GT(many.upper, 0.3);
}

TEST(RunsForConfidence, SmallestNWithMissChanceAtMostFivePercent) {
  EXPECT_EQ(runs_for_confidence(0.5, 0.95, 1000), 5u);   // 0.5^5 = 0.031, 0.5^4 = 0.0625
  EXPECT_EQ(runs_for_confidence(0.1, 0.95, 1000), 29u);  // ln 0.05 / ln 0.9 = 28.4
  EXPECT_EQ(runs_for_confidence(0.05, 0.95, 1000), 59u);
  for (double p : {0.01, 0.07, 0.3, 0.77}) {
    const uint32_t n = runs_for_confidence(p, 0.95, 100000);
    EXPECT_LE(std::pow(1 - p, n), 0.05) << p;
    EXPECT_GT(std::pow(1 - p, n - 1), 0.05) << p;
  }
}

TEST(RunsForConfidence, EdgesAndCap) {
  EXPECT_EQ(runs_for_confidence(1.0, 0.95, 60), 1u);
  EXPECT_EQ(runs_for_confidence(0.0, 0.95, 60), 60u);
  EXPECT_EQ(runs_for_confidence(0.01, 0.95, 60), 60u);  // would need 299
  EXPECT_EQ(runs_for_confidence(0.9, 0.95, 60), 2u);
}

}  // namespace
}  // namespace leapfrog::coord::triage
