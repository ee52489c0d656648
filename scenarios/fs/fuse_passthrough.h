#pragma once
// Leapfrog's own FUSE passthrough file system: a daemon process that mirrors a
// backing folder at a view folder. The kernel checks permissions itself
// (default_permissions, POSIX ACLs), on attributes it may have cached: with
// timeouts > 0 this is the positive control for stale lookups. The daemon
// answers each request about the inode the kernel named, never by path (see
// fuse_daemon.h), so with timeouts 0 each lookup step is current at an instant.

#include <sys/types.h>

#include <memory>
#include <string>

namespace leapfrog::fs {

struct FuseOptions {
  std::string backing;  // existing folder whose tree is served
  std::string view;     // existing empty folder to mount on
  // attr_timeout, entry_timeout and negative_timeout in seconds; 0 turns the
  // kernel's caching of attributes and names off.
  double timeout_s = 0;
};

class FusePassthrough {
 public:
  // Forks the daemon and returns once `options.view` is mounted and answering.
  // Throws SetupError (with the daemon's output when it died).
  static std::unique_ptr<FusePassthrough> start(const FuseOptions& options);

  // Calls stop().
  ~FusePassthrough();
  FusePassthrough(const FusePassthrough&) = delete;
  FusePassthrough& operator=(const FusePassthrough&) = delete;

  // Detaches the mount and waits up to 2 s for the daemon to exit, then kills
  // it. Idempotent; errors are logged, not thrown.
  void stop();

  // Daemon process id (0 once stopped).
  pid_t pid() const { return pid_; }

 private:
  FusePassthrough(FuseOptions options, pid_t pid, int log_fd);
  // What the daemon wrote to stdout/stderr so far.
  std::string daemon_output() const;

  FuseOptions options_;
  pid_t pid_ = 0;
  int log_fd_ = -1;
  bool stopped_ = false;
};

}  // namespace leapfrog::fs
