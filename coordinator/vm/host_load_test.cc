// HostLoadMeter on the real /proc: the host's other load is the host's busy
// time minus the measured QEMU's, so a busy process counts as "other" for
// every VM but the one it is.

#include "coordinator/vm/host_load.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <thread>

namespace leapfrog::vm {
namespace {

double other_of(const std::string& line) {
  double other = -1;
  EXPECT_EQ(std::sscanf(line.c_str(), "lf-host other=%lf", &other), 1) << line;
  return other;
}

// A child that spins until killed.
pid_t burner() {
  const pid_t pid = fork();
  if (pid == 0) {
    volatile unsigned long n = 0;
    for (;;) n = n + 1;
  }
  return pid;
}

TEST(HostLoadMeter, TheFirstReadingSaysNothingAndLinesAreWellFormed) {
  HostLoadMeter m;
  EXPECT_EQ(m.line_for(getpid(), 2), "");
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  const std::string line = m.line_for(getpid(), 2);
  ASSERT_EQ(line.rfind("lf-host other=", 0), 0u) << line;
  EXPECT_NE(line.find(" host_cpus=" + std::to_string(sysconf(_SC_NPROCESSORS_ONLN)) + " "),
            std::string::npos)
      << line;
  EXPECT_NE(line.find(" vcpus=2 pinning=none end\n"), std::string::npos) << line;
  EXPECT_GE(other_of(line), 0);
  // A process that is gone: no line, not a zero.
  EXPECT_EQ(m.line_for(999'999'999, 2), "");
}

TEST(HostLoadMeter, AProcessCountsAsOtherLoadForEveryVmButItself) {
  const pid_t busy = burner();
  ASSERT_GT(busy, 0);
  HostLoadMeter as_itself, as_other;
  uint64_t before = 0, after = 0;
  // Same window for both: the burner measured as the VM, and this (idle)
  // process measured as the VM.
  as_itself.line_for(busy, 1);
  as_other.line_for(getpid(), 1);
  ASSERT_TRUE(process_ticks(busy, before));
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  const double excluded = other_of(as_itself.line_for(busy, 1));
  const double included = other_of(as_other.line_for(getpid(), 1));
  ASSERT_TRUE(process_ticks(busy, after));
  kill(busy, SIGKILL);
  waitpid(busy, nullptr, 0);
  const double burned =
      static_cast<double>(after - before) / static_cast<double>(sysconf(_SC_CLK_TCK)) / 1.5;
  // The positive control: the burner ran (on a loaded machine, maybe less than a CPU).
  ASSERT_GT(burned, 0.2);
  EXPECT_GT(included, 0.2);
  // The difference is the burner's own time, within tick and window slack.
  EXPECT_NEAR(included - excluded, burned, 0.25)
      << "included " << included << " excluded " << excluded;
}

}  // namespace
}  // namespace leapfrog::vm
