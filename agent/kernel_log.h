#pragma once
// The kernel's log during one run, read from /dev/kmsg: an oops that kills
// an observer but leaves the kernel running (a NULL inode walked into, say)
// shows there, and makes the run's outcome a kernel crash with the report's
// title instead of "observer killed by signal 9".

#include <optional>
#include <string>

#include "common/console/console_parser.h"

namespace leapfrog {

class KernelLog {
 public:
  // Starts at the log's end; reads nothing when /dev/kmsg cannot be read
  // (no root, no such device), and says so in unavailable().
  explicit KernelLog(const std::string& path = "/dev/kmsg");
  ~KernelLog();
  KernelLog(const KernelLog&) = delete;
  KernelLog& operator=(const KernelLog&) = delete;

  // The messages logged since construction (or the last call), one per line.
  std::string read_new();

  // The first oops, BUG, KASAN report or panic among the messages since the
  // last call, if any.
  std::optional<console::KernelReport> first_crash();
  // The first oops, BUG, KASAN report or panic in `text` (from read_new()).
  static std::optional<console::KernelReport> first_crash_in(const std::string& text);

  const std::string& unavailable() const { return unavailable_; }

 private:
  int fd_ = -1;
  std::string unavailable_;
};

}  // namespace leapfrog
