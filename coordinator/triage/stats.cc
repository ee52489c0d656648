#include "coordinator/triage/stats.h"

#include <algorithm>
#include <cmath>

namespace leapfrog::coord::triage {

Interval wilson_interval(uint32_t reproduced, uint32_t runs) {
  if (runs == 0) return {};
  constexpr double z = 1.959963984540054;
  const double n = runs;
  const double p = std::min<double>(reproduced, runs) / n;
  const double z2 = z * z;
  const double denom = 1 + z2 / n;
  const double center = (p + z2 / (2 * n)) / denom;
  const double half = z * std::sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / denom;
  return {p, std::max(0.0, center - half), std::min(1.0, center + half)};
}

uint32_t runs_for_confidence(double rate, double confidence, uint32_t cap) {
  cap = std::max<uint32_t>(cap, 1);
  if (!(rate > 0)) return cap;
  if (rate >= 1) return 1;
  const double n = std::ceil(std::log(1 - confidence) / std::log(1 - rate) - 1e-9);
  if (n >= cap) return cap;
  return std::max<uint32_t>(1, static_cast<uint32_t>(n));
}

}  // namespace leapfrog::coord::triage
