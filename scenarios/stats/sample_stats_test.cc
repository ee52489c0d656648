#include "scenarios/stats/sample_stats.h"

#include <gtest/gtest.h>

#include <cmath>

namespace leapfrog::stats {
namespace {

// Welch's example data set (two samples of 15 with unequal variances); the
// reference t, degrees of freedom and p were computed independently from the
// formulas and a numerical integral of the t density.
const std::vector<double> kA = {27.5, 21.0, 19.0, 23.6, 17.0, 17.9, 16.9, 20.1,
                                21.9, 22.6, 23.1, 19.6, 19.0, 21.7, 21.4};
const std::vector<double> kB = {27.1, 22.0, 20.8, 23.4, 23.4, 23.5, 25.8, 22.0,
                                24.8, 20.2, 21.9, 22.1, 22.9, 20.5, 24.4};

// Throughput-like samples: a base rate with a fixed, deterministic jitter
// of about 2 %.
std::vector<double> jittered(double base) {
  const double jitter[] = {0.013, -0.021, 0.004, 0.018, -0.009, -0.016, 0.022, -0.002};
  std::vector<double> out;
  for (double j : jitter) out.push_back(base * (1 + j));
  return out;
}

TEST(Summarize, MeanStddevAndStudentInterval) {
  const Summary s = summarize({1, 2, 3, 4, 5});
  EXPECT_EQ(s.n, 5u);
  EXPECT_DOUBLE_EQ(s.mean, 3);
  EXPECT_NEAR(s.stddev, std::sqrt(2.5), 1e-12);
  // t(0.975, 4) = 2.776445 (tables).
  const double half = 2.776445 * std::sqrt(2.5) / std::sqrt(5.0);
  EXPECT_NEAR(s.ci_low, 3 - half, 1e-5);
  EXPECT_NEAR(s.ci_high, 3 + half, 1e-5);
}

TEST(Summarize, OneSampleHasNoSpread) {
  const Summary s = summarize({42});
  EXPECT_EQ(s.n, 1u);
  EXPECT_DOUBLE_EQ(s.mean, 42);
  EXPECT_DOUBLE_EQ(s.stddev, 0);
  EXPECT_DOUBLE_EQ(s.ci_low, 42);
  EXPECT_DOUBLE_EQ(s.ci_high, 42);
  EXPECT_EQ(summarize({}).n, 0u);
}

TEST(Compare, WelchReferenceDataSet) {
  const Change c = compare(kA, kB);
  EXPECT_NEAR(c.t, 2.455356, 1e-5);
  EXPECT_NEAR(c.dof, 24.988529, 1e-5);
  EXPECT_NEAR(c.p_value, 0.021378, 1e-5);
  EXPECT_EQ(c.significance, Significance::Significant);
  EXPECT_NEAR(c.change_pct, 100 * (22.986667 - 20.82) / 20.82, 1e-3);
  EXPECT_LT(c.ci_low_pct, c.change_pct);
  EXPECT_GT(c.ci_high_pct, c.change_pct);
  EXPECT_GT(c.ci_low_pct, 0);  // significant at 5 %: the interval excludes 0
  // At 1 % the same data are within noise.
  EXPECT_EQ(compare(kA, kB, 0.01).significance, Significance::WithinNoise);
}

TEST(Compare, IdenticalSamplesAreWithinNoise) {
  const Change c = compare(jittered(1e6), jittered(1e6));
  EXPECT_EQ(c.significance, Significance::WithinNoise);
  EXPECT_DOUBLE_EQ(c.change_pct, 0);
  EXPECT_DOUBLE_EQ(c.p_value, 1);
  EXPECT_STREQ(to_string(c.significance), "within noise");
}

TEST(Compare, ShiftedDistributionIsSignificant) {
  const Change up = compare(jittered(1e6), jittered(1.1e6));
  EXPECT_EQ(up.significance, Significance::Significant);
  EXPECT_NEAR(up.change_pct, 10, 1e-9);
  EXPECT_LT(up.p_value, 1e-6);
  EXPECT_STREQ(to_string(up.significance), "significant");
  const Change down = compare(jittered(1e6), jittered(0.95e6));
  EXPECT_EQ(down.significance, Significance::Significant);
  EXPECT_LT(down.ci_high_pct, 0);
}

TEST(Compare, ShiftSmallerThanTheJitterIsWithinNoise) {
  const Change c = compare(jittered(1e6), jittered(1.003e6));
  EXPECT_EQ(c.significance, Significance::WithinNoise);
  EXPECT_LT(c.ci_low_pct, 0);
  EXPECT_GT(c.ci_high_pct, 0);
}

TEST(Compare, TwoWildSamplesAreWithinNoise) {
  // The shared-machine case: a -33 % or +81 % "change" from two noisy samples.
  const Change c = compare({1.0e6, 0.4e6}, {1.3e6, 0.6e6});
  EXPECT_EQ(c.significance, Significance::WithinNoise);
  EXPECT_GT(c.change_pct, 20);
}

TEST(Compare, OneSampleEachCannotBeTested) {
  const Change c = compare({1e6}, {2e6});
  EXPECT_EQ(c.significance, Significance::TooFewSamples);
  EXPECT_NEAR(c.change_pct, 100, 1e-9);
}

TEST(Compare, ConstantSamplesThatDifferAreSignificant) {
  EXPECT_EQ(compare({5, 5, 5}, {6, 6, 6}).significance, Significance::Significant);
  EXPECT_EQ(compare({5, 5, 5}, {5, 5, 5}).significance, Significance::WithinNoise);
}

// Benjamini-Hochberg by hand: sorted 0.005, 0.01, 0.03, 0.04 times 4/rank give
// 0.02, 0.02, 0.04, 0.04 (already monotone), returned in the given order.
TEST(BhAdjust, KnownValues) {
  const auto a = bh_adjust({0.01, 0.04, 0.03, 0.005});
  ASSERT_EQ(a.size(), 4u);
  EXPECT_NEAR(a[0], 0.02, 1e-12);
  EXPECT_NEAR(a[1], 0.04, 1e-12);
  EXPECT_NEAR(a[2], 0.04, 1e-12);
  EXPECT_NEAR(a[3], 0.02, 1e-12);
  // Monotone from the top: 0.04 at rank 2 of 3 gives 0.06, above rank 3's 0.05.
  const auto b = bh_adjust({0.04, 0.05, 0.001});
  EXPECT_NEAR(b[0], 0.05, 1e-12);
  EXPECT_NEAR(b[1], 0.05, 1e-12);
  EXPECT_NEAR(b[2], 0.003, 1e-12);
  EXPECT_NEAR(bh_adjust({0.9, 0.8})[0], 0.9, 1e-12);  // never above 1 here, never below p
  EXPECT_TRUE(bh_adjust({}).empty());
}

// The positive control of the table rule: one point in twenty at p = 0.03 is
// "significant" alone and "within noise" in its table; a table where every
// point moved stays significant; points not judged stay as they were.
TEST(AdjustForTable, OneChancePointInTwentyIsWithinNoise) {
  Change chance = compare({1000, 1030, 985}, {1060, 1090, 1045});
  ASSERT_EQ(chance.significance, Significance::Significant);
  ASSERT_LT(chance.p_value, 0.05);
  EXPECT_EQ(chance.p_adjusted, chance.p_value);
  std::vector<Change> table(19, compare({1000, 1030, 985}, {1001, 1029, 986}));
  table.push_back(chance);
  table.push_back(compare({1000}, {1500}));  // too few samples: not in the family
  std::vector<Change*> family;
  for (auto& c : table) family.push_back(&c);
  adjust_for_table(family);
  EXPECT_EQ(table[19].significance, Significance::WithinNoise);
  EXPECT_NEAR(table[19].p_adjusted, std::min(1.0, chance.p_value * 20), 1e-9);
  EXPECT_EQ(table[20].significance, Significance::TooFewSamples);

  std::vector<Change> moved(20, compare({1000, 1030, 985}, {1200, 1236, 1182}));
  family.clear();
  for (auto& c : moved) family.push_back(&c);
  adjust_for_table(family);
  for (const auto& c : moved) EXPECT_EQ(c.significance, Significance::Significant);
}

}  // namespace
}  // namespace leapfrog::stats
