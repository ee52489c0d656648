#pragma once
// The statistics triage decides with: reproduction rates with a Wilson score
// interval, and how many clean runs make "the bug is absent" 95% sure.

#include <cstdint>

namespace leapfrog::coord::triage {

struct Interval {
  double rate = 0;   // reproduced / runs (0 when runs is 0)
  double lower = 0;  // 95% Wilson score interval
  double upper = 1;
};

// The 95% Wilson score interval of `reproduced` out of `runs` (z = 1.96);
// runs 0 gives [0, 1].
Interval wilson_interval(uint32_t reproduced, uint32_t runs);

// The fewest runs n with (1 - rate)^n <= 1 - confidence: after n clean runs on
// a kernel, the bug (reproducing at `rate` where present) is absent with that
// confidence. n = ceil(ln(1 - confidence) / ln(1 - rate)), at least 1, at
// most `cap`. A rate of 0 (never reproduced) gives `cap`.
uint32_t runs_for_confidence(double rate, double confidence, uint32_t cap);

}  // namespace leapfrog::coord::triage
