#pragma once
// The clock every record uses: CLOCK_MONOTONIC, read through the vDSO.

#include <time.h>

#include <string>

#include "scenarios/model.h"

namespace leapfrog {

inline TimeNs now_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<TimeNs>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

// The kernel's current clock source ("tsc", "kvm-clock", ...), or "unknown".
std::string clock_source();

}  // namespace leapfrog
