// KernelLog reads what the kernel logs during a run: a positive control
// writes an oops-shaped line into the real /dev/kmsg (root) and must see it
// as a crash; lines logged before it started and ordinary lines are not.

#include "agent/kernel_log.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <string>

namespace leapfrog {
namespace {

void log_line(const std::string& text) {
  const int fd = ::open("/dev/kmsg", O_WRONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::write(fd, text.data(), text.size()), static_cast<ssize_t>(text.size()));
  ::close(fd);
}

TEST(KernelLog, SeesAnOopsLoggedDuringTheRunAndNothingBefore) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root";
  const std::string tag = "leapfrog-kernel-log-test-" + std::to_string(getpid());
  log_line("<4>BUG: kernel NULL pointer dereference, address: 0000000000000000 " + tag + " before\n");
  KernelLog log;
  ASSERT_EQ(log.unavailable(), "");
  log_line("<6>" + tag + " an ordinary line\n");
  EXPECT_FALSE(log.first_crash().has_value());
  log_line("<1>BUG: kernel NULL pointer dereference, address: 0000000000000000 (written by " + tag + ")\n");
  log_line("<1>RIP: 0010:inode_permission+0x12/0x150\n");
  log_line("<4>Call Trace:\n");
  const auto crash = log.first_crash();
  ASSERT_TRUE(crash.has_value());
  EXPECT_NE(crash->title.find("NULL pointer dereference"), std::string::npos) << crash->title;
  EXPECT_FALSE(log.first_crash().has_value());  // read once
}

TEST(KernelLog, AnUnreadableLogSaysWhy) {
  KernelLog log("/nonexistent/kmsg");
  EXPECT_NE(log.unavailable().find("/nonexistent/kmsg"), std::string::npos);
  EXPECT_EQ(log.read_new(), "");
  EXPECT_FALSE(log.first_crash().has_value());
}

}  // namespace
}  // namespace leapfrog
