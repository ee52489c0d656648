// The clock check on this host: its clock is sound, and a CPU whose clock
// lags (the positive control) is caught both ways: out of order across CPUs
// and a step back on that CPU.

#include "agent/clock_check.h"

#include <gtest/gtest.h>
#include <sched.h>

namespace leapfrog::agent {
namespace {

// The second CPU this process may use, or -1.
int second_cpu() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) != 0) return -1;
  int seen = 0;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &set) && ++seen == 2) return c;
  return -1;
}

TEST(ClockCheck, TheHostClockIsSound) {
  if (second_cpu() < 0) GTEST_SKIP() << "needs two CPUs";
  ClockCheckOptions o;
  o.rounds = 20'000;
  const ClockCheckResult r = check_clock(o);
  EXPECT_TRUE(r.sound()) << to_json(r).dump();
  EXPECT_EQ(r.handoffs, 2 * o.rounds * r.pairs);
  EXPECT_GE(r.reads, r.handoffs);
  EXPECT_FALSE(r.clock_source.empty());
}

TEST(ClockCheck, ALaggingCpuIsCaughtAcrossCpusAndAsAStepBack) {
  const int cpu = second_cpu();
  if (cpu < 0) GTEST_SKIP() << "needs two CPUs";
  ClockCheckOptions o;
  o.rounds = 2'000;
  o.skew_ns = 50'000'000;  // far beyond a hand-off, however busy the machine
  o.skew_cpu = cpu;
  const ClockCheckResult r = check_clock(o);
  EXPECT_FALSE(r.sound());
  EXPECT_GT(r.order_violations, 0u) << to_json(r).dump();
  EXPECT_GT(r.backward_steps, 0u) << to_json(r).dump();
  EXPECT_GE(r.worst_order_ns, o.skew_ns / 2) << to_json(r).dump();
  EXPECT_FALSE(r.first_violation.empty());
}

}  // namespace
}  // namespace leapfrog::agent
