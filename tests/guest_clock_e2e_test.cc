// The guest clock the oracle's timestamps come from, checked in a VM booted
// as the launcher boots it (TCG, 2 vCPUs, the launcher's command line, so
// clocksource=tsc tsc=reliable: coordinator/vm/qemu_process.h): the guest
// runs on the TSC, keeps it (the kernel marks it unstable for nothing), and
// `leapfrog-agent clock-check` finds each vCPU's clock monotonic and the
// vCPUs' clocks consistent (a time read on one vCPU before a hand-off is
// never after the time the other reads once it sees it). Positive control:
// the same check with one vCPU's clock made to lag fails in the same guest.
// Needs root, qemu-system-x86, cpio and a kernel in /boot.

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>

#include "coordinator/pg/test_dir.h"
#include "tests/guest_run.h"

namespace {

using namespace leapfrog::testing;
using nlohmann::json;

// Runs the check in the guest and prints each result as one console line.
constexpr const char* kScript = R"SH(
echo "clock-cmdline: $(cat /proc/cmdline)"
out=$(/bin/leapfrog-agent clock-check --json --rounds 100000); st=$?
echo "clock-check: $out"
echo "clock-check-status: $st"
out=$(/bin/leapfrog-agent clock-check --json --rounds 2000 --skew-ns 50000000 --skew-cpu 1); st=$?
echo "clock-control: $out"
echo "clock-control-status: $st"
echo "clock-unstable: $(dmesg | grep -c 'Marking TSC unstable')"
)SH";

json parse_or_empty(const std::string& text) {
  try {
    return json::parse(text);
  } catch (const json::exception&) {
    return json::object();
  }
}

TEST(GuestClock, TheVmRunsOnTheTscAndItsClockIsSoundAcrossVcpus) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root";
  const std::string kernel = stock_boot_kernel();
  if (kernel.empty()) GTEST_SKIP() << "no /boot/vmlinuz-6.1.* (install linux-image-amd64: deploy/install-deps.sh)";
  leapfrog::coord::testing::TestDir dir;
  const std::string logs = dir / "logs";
  std::filesystem::create_directories(logs);
  const GuestImage image =
      guest_image(kernel, LEAPFROG_VM_CACHE, LEAPFROG_IMAGE_SCRIPT, LEAPFROG_AGENT_STATIC, logs);
  ASSERT_TRUE(image.error.empty()) << image.error;

  const GuestRun run = run_in_guest(image, dir / "guest", kScript, {}, std::chrono::seconds(400));
  ASSERT_FALSE(run.timed_out) << run.console;
  ASSERT_EQ(run.exit, 0) << run.console;
  EXPECT_NE(console_value(run.console, "clock-cmdline: ").find(" clocksource=tsc tsc=reliable no_timer_check "),
            std::string::npos)
      << "the launcher no longer asks for the TSC (vm::clock_cmdline): " << run.console;

  const json check = parse_or_empty(console_value(run.console, "clock-check: "));
  EXPECT_EQ(console_value(run.console, "clock-check-status: "), "0") << run.console;
  EXPECT_TRUE(check.value("sound", false)) << check.dump();
  EXPECT_EQ(check.value("clock_source", "").rfind("tsc", 0), 0u)
      << check.dump();  // tsc (or tsc-early)
  EXPECT_EQ(check.value("cpus", 0), 2) << check.dump();
  EXPECT_EQ(check.value("handoffs", 0u), 200'000u) << check.dump();
  EXPECT_EQ(check.value("order_violations", 1u), 0u) << check.dump();
  EXPECT_EQ(check.value("backward_steps", 1u), 0u) << check.dump();
  EXPECT_EQ(console_value(run.console, "clock-unstable: "), "0") << run.console;
  std::printf(
      "guest clock %s: %llu hand-offs between 2 vCPUs, t2 - t1 min %lld ns median %lld ns; %llu "
      "reads, "
      "%.0f ns each\n",
      check.value("clock_source", "?").c_str(), check.value("handoffs", 0ull),
      check.value("min_handoff_ns", 0ll), check.value("median_handoff_ns", 0ll),
      check.value("reads", 0ull), check.value("ns_per_read", 0.0));

  // The positive control: a vCPU whose clock lags 50 ms from halfway on.
  const json control = parse_or_empty(console_value(run.console, "clock-control: "));
  EXPECT_EQ(console_value(run.console, "clock-control-status: "), "1") << run.console;
  EXPECT_FALSE(control.value("sound", true)) << control.dump();
  EXPECT_GT(control.value("order_violations", 0u), 0u) << control.dump();
  EXPECT_GT(control.value("backward_steps", 0u), 0u) << control.dump();
}

}  // namespace
