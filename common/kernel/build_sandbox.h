#pragma once
// The sandbox a kernel build's tools run in (tar, cp, patch, make): the
// source tree's Makefile is code from whoever asked for the build, so it runs
// as an unprivileged system user (kBuildUser), through setpriv and
// bubblewrap, in namespaces of its own:
//   - no network (a network namespace holding only a loopback that is down);
//   - the root file system read-only, /tmp a fresh tmpfs, /proc its own;
//   - writable: only the folders handed to it (the source tree, the object
//     folder), bound at their own paths, which the build user must be able
//     to reach (search rights on every folder above: the cache's folders are
//     made so, and a folder that blocks the way is a clear error);
//   - hidden behind empty tmpfs: the build cache, /root, /home, the
//     Leapfrog data, config and spool folders, and whatever the caller adds
//     (an agent's spool, data folder and token);
//   - umask 027: what it writes is not world-readable.
// Needs root (to become the build user) and bubblewrap.

#include <sys/types.h>

#include <string>
#include <vector>

namespace leapfrog::kbuild {

// The system user builds run as; deploy/install-deps.sh and the Debian
// package create it.
inline constexpr const char* kBuildUser = "leapfrog-build";

// Runs `argv` (looked up in $PATH) as this process, stdout and stderr
// appended to `log_fd`, stdin from `stdin_fd` (-1: /dev/null): its exit code,
// 127 when it is not installed. What BuildSandbox::run does when off.
int run_logged_here(const std::vector<std::string>& argv, int log_fd, int stdin_fd = -1);

struct SandboxConfig {
  bool enabled = false;
  std::string user = kBuildUser;
  // Paths hidden besides the defaults: folders behind an empty tmpfs, files
  // behind /dev/null. Missing ones are skipped.
  std::vector<std::string> hide;
};

// A path the sandbox binds at the same place.
struct Bind {
  std::string path;
  bool writable = false;
};

class BuildSandbox {
 public:
  // Checks the user and the tools. Throws BuildError("sandbox") saying what
  // is missing. `cache_dir` is hidden inside.
  BuildSandbox(const SandboxConfig& config, const std::string& cache_dir);

  bool enabled() const { return config_.enabled; }
  uid_t uid() const { return uid_; }
  gid_t gid() const { return gid_; }
  const std::string& user() const { return config_.user; }

  // Makes `path` and everything under it the build user's, not readable by
  // others (a tree a root build or an older Leapfrog left). No-op when off.
  void hand_over(const std::string& path) const;

  // Makes the folder `path` root's, searchable (only) by the build user's
  // group: mode 0710, or 0750 with `listable`. No-op when off.
  void let_through(const std::string& path, bool listable = false) const;

  // Runs `argv` in the sandbox with `binds`, stdout and stderr appended to
  // the open descriptor `log_fd`, stdin from `stdin_fd` (-1: /dev/null).
  // Its exit code (when the sandbox itself cannot start, not 0, and the log
  // says why). When off, runs `argv` directly. Throws BuildError("sandbox")
  // when the build user cannot reach a bind's path.
  int run(const std::vector<std::string>& argv, const std::vector<Bind>& binds, int log_fd,
          int stdin_fd = -1) const;

 private:
  SandboxConfig config_;
  std::string cache_dir_;
  uid_t uid_ = 0;
  gid_t gid_ = 0;
  std::string setpriv_, bwrap_;
};

}  // namespace leapfrog::kbuild
