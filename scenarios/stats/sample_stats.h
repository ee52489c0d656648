#pragma once
// Repeats and significance for throughput samples: a point's mean with its
// 95 % interval, and a before/after comparison by Welch's t-test. Pure
// arithmetic over the samples; the t distribution is Boost.Math's.

#include <cstddef>
#include <vector>

namespace leapfrog::stats {

// The samples of one point.
struct Summary {
  size_t n = 0;
  double mean = 0;
  double stddev = 0;  // sample standard deviation (n - 1); 0 when n < 2
  // Two-sided Student-t interval of the mean at `confidence`; [mean, mean]
  // when n < 2.
  double ci_low = 0;
  double ci_high = 0;
};
Summary summarize(const std::vector<double>& samples, double confidence = 0.95);

enum class Significance {
  Significant,    // the t-test rejects "no change" at alpha
  WithinNoise,    // it does not
  TooFewSamples,  // a side has fewer than two samples: no test is possible
  Loaded,         // a side ran beside other work (scale_report.h): not judged
  // Comparing sets of runs (scale_report.h): a side has fewer than two runs
  // in distinct boots, so the boot-to-boot noise is unknown: not judged.
  TooFewRuns,
};
// "significant", "within noise", "too few samples", "loaded: not judged",
// "one run: not judged".
const char* to_string(Significance s);
// Whether the test was made: Significant or WithinNoise (the family a table's
// adjustment covers).
bool judged(Significance s);

// after against before.
struct Change {
  Summary before, after;
  double change_pct = 0;  // (after - before) / before, in %
  // Welch interval of after - before at the test's confidence, in % of
  // before's mean.
  double ci_low_pct = 0;
  double ci_high_pct = 0;
  double t = 0;        // Welch's t statistic
  double dof = 0;      // Welch-Satterthwaite degrees of freedom
  double p_value = 1;  // two-sided
  // p_value adjusted for the other points of its table (adjust_for_table);
  // p_value itself until then.
  double p_adjusted = 1;
  Significance significance = Significance::TooFewSamples;
};
// Welch's two-sample t-test of the means at `alpha` (two-sided).
Change compare(const std::vector<double>& before, const std::vector<double>& after,
               double alpha = 0.05);

// Benjamini-Hochberg adjusted p-values, in the order given: p_(i) m / i for
// the i-th smallest of m, made monotone from the largest down, at most 1.
// Rejecting where the adjusted value is below q keeps the expected share of
// false "significant" points among all "significant" ones at most q.
std::vector<double> bh_adjust(const std::vector<double>& p);

// A table of comparisons is one family: with 30 points at 5 % each, one or two
// would be "significant" by chance on two identical kernels. Every change that
// was tested (Significant or WithinNoise) gets its Benjamini-Hochberg
// p_adjusted over those, and is Significant only when that is below alpha.
// Points not judged (too few samples or runs, loaded) are not in the family.
void adjust_for_table(std::vector<Change*>& changes, double alpha = 0.05);

}  // namespace leapfrog::stats
