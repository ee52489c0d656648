#include "agent/kernel_log.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace leapfrog {

KernelLog::KernelLog(const std::string& path) {
  fd_ = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd_ < 0) {
    unavailable_ = path + ": " + std::strerror(errno);
    return;
  }
  if (::lseek(fd_, 0, SEEK_END) < 0) {
    unavailable_ = path + ": seek: " + std::strerror(errno);
    ::close(fd_);
    fd_ = -1;
  }
}

KernelLog::~KernelLog() {
  if (fd_ >= 0) ::close(fd_);
}

std::string KernelLog::read_new() {
  std::string text;
  if (fd_ < 0) return text;
  // One record per read: "PRI,SEQ,USEC,FLAGS;message\n" and, for some,
  // continuation lines " KEY=VALUE" that are not console text.
  char buf[8192];
  for (;;) {
    const ssize_t n = ::read(fd_, buf, sizeof buf - 1);
    if (n < 0 && errno == EPIPE) continue;  // records were overwritten: go on
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    const std::string rec(buf, static_cast<size_t>(n));
    const size_t semi = rec.find(';');
    if (semi == std::string::npos) continue;
    const size_t end = rec.find('\n', semi);
    text += rec.substr(semi + 1, end == std::string::npos ? std::string::npos : end - semi - 1);
    text += '\n';
  }
  return text;
}

std::optional<console::KernelReport> KernelLog::first_crash() { return first_crash_in(read_new()); }

std::optional<console::KernelReport> KernelLog::first_crash_in(const std::string& text) {
  for (auto& r : console::parse_console(text))
    if (r.kind == "oops" || r.kind == "bug" || r.kind == "kasan" || r.kind == "panic") return r;
  return std::nullopt;
}

}  // namespace leapfrog
