#pragma once
// `leapfrog-agent clock-check`: is the clock every record uses (now_ns(),
// CLOCK_MONOTONIC through the vDSO) sound for the oracle on this machine?
// The oracle orders operations by their timestamps across CPUs, so it needs
// - each CPU's clock never to go back, and
// - a time read on CPU A before a write that CPU B then sees to be at most
//   the time B reads after seeing it (t1 <= t2): no CPU's clock is behind
//   another's by more than the time a cache line takes to travel.
// Two threads pinned to two CPUs pass a stamp back and forth through shared
// memory, for every pair of CPUs the process may use; every clock read is
// also compared with the thread's previous one. Run in a VM on the clock
// source the launcher chose (tests/guest_clock_e2e_test.cc).

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "scenarios/model.h"

namespace leapfrog::agent {

struct ClockCheckOptions {
  // Hand-offs each way per pair of CPUs.
  uint64_t rounds = 100'000;
  // Positive control: from the middle of each pair's run on, the clock
  // reads `skew_ns` behind on `skew_cpu` (a CPU whose TSC lags, and so a
  // step back on it). 0: the real clock only.
  TimeNs skew_ns = 0;
  int skew_cpu = -1;
  // A pair that has not finished by then is reported as stuck (a CPU that
  // never ran the other thread), not waited for.
  TimeNs deadline_ns = 120'000'000'000;
};

struct ClockCheckResult {
  std::string clock_source;
  int cpus = 0;                   // CPUs checked
  uint64_t pairs = 0;             // pairs of CPUs checked
  uint64_t handoffs = 0;          // stamps passed between CPUs
  uint64_t reads = 0;             // clock reads compared with the previous one
  uint64_t order_violations = 0;  // t2 < t1 across a hand-off
  TimeNs worst_order_ns = 0;      // the largest t1 - t2
  uint64_t backward_steps = 0;    // a CPU's read below its previous one
  TimeNs worst_backward_ns = 0;
  TimeNs min_handoff_ns = 0;  // the smallest t2 - t1 seen (the resolution the check had)
  TimeNs median_handoff_ns = 0;
  double ns_per_read = 0;       // the clock's cost, from the waiting loops
  bool stuck = false;           // a pair did not finish before the deadline
  std::string first_violation;  // what, where and by how much; empty if none
  std::string error;            // why nothing was checked (fewer than 2 CPUs)

  bool sound() const {
    return error.empty() && !stuck && order_violations == 0 && backward_steps == 0;
  }
};

// Runs the check over every pair of the CPUs this process may run on.
ClockCheckResult check_clock(const ClockCheckOptions& opts);

nlohmann::json to_json(const ClockCheckResult& r);

}  // namespace leapfrog::agent
