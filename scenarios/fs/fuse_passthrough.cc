// FusePassthrough: runs the file system of fuse_daemon.cc in a forked daemon
// process, waits until it has mounted, and stops it.

#include "scenarios/fs/fuse_passthrough.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <utility>

#include "scenarios/fs/fuse_daemon.h"
#include "scenarios/fs/sys_util.h"
#include "scenarios/fs/workspace.h"

namespace leapfrog::fs {

namespace {

constexpr auto kStartDeadline = std::chrono::seconds(5);
constexpr auto kStopDeadline = std::chrono::seconds(2);
constexpr size_t kMaxLogBytes = 16 * 1024;
// Fd number the ready pipe gets inside the daemon (after stdin/out/err).
constexpr int kReadyFd = 3;

// Runs in the forked daemon; never returns. Its stdout/stderr go to `log_fd`;
// one byte on `ready_fd` says the mount is in place.
[[noreturn]] void daemon_main(const FuseOptions& options, int ready_fd, int log_fd) {
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  sigset_t all;
  sigemptyset(&all);
  sigprocmask(SIG_SETMASK, &all, nullptr);
  dup2(log_fd, STDOUT_FILENO);
  dup2(log_fd, STDERR_FILENO);
  dup2(ready_fd, kReadyFd);
  // Hold no copies of the caller's fds (pipes whose EOF it may wait for).
  close_range(kReadyFd + 1, ~0U, 0);
  int devnull = open("/dev/null", O_RDONLY);
  if (devnull >= 0 && devnull != STDIN_FILENO) {
    dup2(devnull, STDIN_FILENO);
    close(devnull);
  }
  int rc = serve_passthrough(options, [] {
    char ok = 1;
    if (write(kReadyFd, &ok, 1) != 1) _exit(1);
    close(kReadyFd);
  });
  _exit(rc);
}

// The first kMaxLogBytes of the daemon's log (a memfd), trailing newlines cut.
std::string read_log(int fd) {
  if (fd < 0) return "";
  std::string out(kMaxLogBytes, '\0');
  ssize_t n = pread(fd, out.data(), out.size(), 0);
  out.resize(n > 0 ? static_cast<size_t>(n) : 0);
  while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) out.pop_back();
  return out;
}

}  // namespace

FusePassthrough::FusePassthrough(FuseOptions options, pid_t pid, int log_fd)
    : options_(std::move(options)), pid_(pid), log_fd_(log_fd) {}

FusePassthrough::~FusePassthrough() {
  stop();
}

std::string FusePassthrough::daemon_output() const {
  return read_log(log_fd_);
}

std::unique_ptr<FusePassthrough> FusePassthrough::start(const FuseOptions& options) {
  int probe = open("/dev/fuse", O_RDWR | O_CLOEXEC);
  if (probe < 0) throw SetupError(errno_message("FUSE is not available: /dev/fuse", errno));
  close(probe);

  struct stat parent_st;
  std::string parent = options.view + "/..";
  if (stat(parent.c_str(), &parent_st) != 0) {
    throw SetupError(errno_message("stat '" + parent + "'", errno));
  }

  int log_fd = memfd_create("leapfrog-fuse-log", MFD_CLOEXEC);
  if (log_fd < 0) throw SetupError(errno_message("memfd_create", errno));
  int ready[2];
  if (pipe2(ready, O_CLOEXEC) != 0) {
    close(log_fd);
    throw SetupError(errno_message("pipe", errno));
  }

  pid_t pid = fork();
  if (pid < 0) {
    int err = errno;
    close(ready[0]);
    close(ready[1]);
    close(log_fd);
    throw SetupError(errno_message("fork the FUSE daemon", err));
  }
  if (pid == 0) daemon_main(options, ready[1], log_fd);
  close(ready[1]);

  // From here the object owns pid and log; its destructor cleans up on failure.
  std::unique_ptr<FusePassthrough> fuse(new FusePassthrough(options, pid, log_fd));
  auto failed = [&](const std::string& why) {
    close(ready[0]);
    std::string output = fuse->daemon_output();
    fuse->stop();
    std::string msg = "start FUSE passthrough on '" + options.view + "': " + why;
    if (!output.empty()) msg += ": " + output;
    return SetupError(msg);
  };

  auto deadline = std::chrono::steady_clock::now() + kStartDeadline;
  char byte = 0;
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) throw failed("the daemon did not mount within 5 s");
    struct pollfd p = {ready[0], POLLIN, 0};
    int rc = poll(&p, 1, static_cast<int>(left.count()));
    if (rc < 0 && errno == EINTR) continue;
    if (rc < 0) throw failed(errno_message("poll", errno));
    if (rc == 0) continue;
    ssize_t n = read(ready[0], &byte, 1);
    if (n == 1) break;
    if (n < 0 && errno == EINTR) continue;
    int status = 0;
    if (wait_child_for(pid, std::chrono::milliseconds(500), &status)) {
      fuse->pid_ = 0;
      throw failed("the daemon ended (" + describe_status(status) + ")");
    }
    throw failed("the daemon closed its ready pipe");
  }
  close(ready[0]);

  // Blocks until the daemon has answered FUSE_INIT, so the mount is live after.
  struct stat view_st;
  if (stat(options.view.c_str(), &view_st) != 0) {
    throw failed(errno_message("stat the mount", errno));
  }
  if (view_st.st_dev == parent_st.st_dev) throw failed("the view is not a mount point");
  spdlog::info("fuse_started view={} backing={} pid={} timeout_s={}", options.view, options.backing,
               pid, options.timeout_s);
  return fuse;
}

void FusePassthrough::stop() {
  if (!stopped_) {
    stopped_ = true;
    // EINVAL: not mounted (the daemon failed before mounting).
    if (umount2(options_.view.c_str(), MNT_DETACH) != 0 && errno != EINVAL) {
      spdlog::warn("fuse_umount_failed view={} error=\"{}\"", options_.view, std::strerror(errno));
    }
  }
  if (pid_ != 0) {
    int status = 0;
    if (!wait_child_for(pid_, kStopDeadline, &status)) {
      // Something still holds the mount (an open file, a cwd): cut it off.
      kill(pid_, SIGKILL);
      status = wait_child(pid_);
      spdlog::warn("fuse_daemon_killed view={} pid={}", options_.view, pid_);
    } else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      spdlog::warn("fuse_daemon_failed view={} pid={} status=\"{}\" output=\"{}\"", options_.view,
                   pid_, describe_status(status), daemon_output());
    } else {
      spdlog::debug("fuse_stopped view={} pid={}", options_.view, pid_);
    }
    pid_ = 0;
  }
  if (log_fd_ >= 0) {
    close(log_fd_);
    log_fd_ = -1;
  }
}

}  // namespace leapfrog::fs
