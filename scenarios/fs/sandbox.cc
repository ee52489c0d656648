// run_sandboxed: a forked child in a private mount namespace with a tmpfs work
// folder. See workspace.h for the contract.

#include <dirent.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>

#include "scenarios/fs/sys_util.h"
#include "scenarios/fs/workspace.h"

namespace leapfrog::fs {

namespace {

// Child the parent forwards SIGINT/SIGTERM to. One sandbox per process at a
// time: a second concurrent run_sandboxed would take over the forwarding.
std::atomic<pid_t> forward_to{0};
static_assert(std::atomic<pid_t>::is_always_lock_free);

extern "C" void forward_signal(int sig) {
  int saved = errno;
  pid_t pid = forward_to.load();
  if (pid > 0) kill(pid, sig);
  errno = saved;
}

// Runs in the forked child; never returns.
[[noreturn]] void child_main(const std::string& workdir, pid_t parent, const sigset_t& old_mask,
                             const std::function<int(const std::string&)>& body) {
  // Die with the parent (thread): the namespace and its mounts go with us.
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != parent) _exit(128 + SIGKILL);
  sigprocmask(SIG_SETMASK, &old_mask, nullptr);
  try {
    if (unshare(CLONE_NEWNS) != 0) throw SetupError(errno_message("unshare(CLONE_NEWNS)", errno));
    // Nothing we mount may propagate back to the host.
    if (mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) {
      throw SetupError(errno_message("make mounts private", errno));
    }
    if (mount("leapfrog", workdir.c_str(), "tmpfs", 0, "mode=0755") != 0) {
      throw SetupError(errno_message("mount tmpfs on '" + workdir + "'", errno));
    }
    int rc = body(workdir);
    std::fflush(nullptr);
    _exit(rc);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
  } catch (...) {
    std::fprintf(stderr, "error: unknown exception\n");
  }
  std::fflush(nullptr);
  _exit(2);
}

}  // namespace

// The start time of `pid` in clock ticks since boot (field 22 of
// /proc/<pid>/stat, after the parenthesized command name), or 0 when the
// process is gone.
static uint64_t start_ticks(pid_t pid) {
  FILE* f = std::fopen(("/proc/" + std::to_string(pid) + "/stat").c_str(), "re");
  if (f == nullptr) return 0;
  char buf[1024];
  const size_t n = std::fread(buf, 1, sizeof buf - 1, f);
  std::fclose(f);
  buf[n] = '\0';
  const char* p = std::strrchr(buf, ')');
  if (p == nullptr) return 0;
  // Fields 3 (state) to 21 come before the start time.
  for (int field = 2; field < 22 && p != nullptr; ++field) p = std::strchr(p + 1, ' ');
  return p == nullptr ? 0 : std::strtoull(p + 1, nullptr, 10);
}

std::string run_folder_prefix(pid_t pid) {
  const uint64_t start = start_ticks(pid);
  if (start == 0) return "";
  return "/tmp/leapfrog-run-" + std::to_string(pid) + "-" + std::to_string(start) + "-";
}

// Removes /tmp/leapfrog-run-<pid>-<start>-* folders whose supervisor is gone:
// its pid is free, or now names a process that started at another time (pids
// are reused; pid_max is 32768 on many machines). Folders named before the
// start time was part of the name (leapfrog-run-<pid>-XXXXXX) go when their
// pid is free or is ours (we name ours with the start time). They are empty
// on the host side (their tmpfs lived in the dead run's namespace), so rmdir
// suffices and never removes anything a live run still uses.
static void collect_stale_run_folders() {
  DIR* dir = opendir("/tmp");
  if (!dir) return;
  const std::string prefix = "leapfrog-run-";
  while (dirent* e = readdir(dir)) {
    const std::string name = e->d_name;
    if (name.rfind(prefix, 0) != 0) continue;
    char* end = nullptr;
    const long pid = std::strtol(name.c_str() + prefix.size(), &end, 10);
    if (pid <= 0 || *end != '-') continue;
    // A second '-' after the pid's: the start time is in the name.
    const char* rest = end + 1;
    const bool named_with_start = std::strchr(rest, '-') != nullptr;
    bool stale;
    if (kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH) {
      stale = true;
    } else if (named_with_start) {
      const uint64_t start = std::strtoull(rest, nullptr, 10);
      const uint64_t now = start_ticks(static_cast<pid_t>(pid));
      stale = now != 0 && now != start;
    } else {
      stale = pid == getpid();
    }
    if (stale) rmdir(("/tmp/" + name).c_str());
  }
  closedir(dir);
}

int run_sandboxed(const std::function<int(const std::string& workdir)>& body) {
  if (geteuid() != 0) {
    throw SetupError("the sandbox needs root (mount namespaces, mounts), running as euid " +
                     std::to_string(geteuid()));
  }
  collect_stale_run_folders();
  // The name carries our pid and start time, so a later run can tell the
  // folder of a supervisor that was killed outright (SIGKILL) and remove it.
  const std::string prefix = run_folder_prefix(getpid());
  if (prefix.empty()) throw SetupError("cannot read this process's start time in /proc/self/stat");
  std::string templ = prefix + "XXXXXX";
  if (mkdtemp(templ.data()) == nullptr)
    throw SetupError(errno_message("mkdtemp /tmp/leapfrog-run-*", errno));
  std::string workdir = templ;
  // mkdtemp makes 0700; observers (uid 65534) must get through.
  if (chmod(workdir.c_str(), 0755) != 0) {
    int err = errno;
    rmdir(workdir.c_str());
    throw SetupError(errno_message("chmod '" + workdir + "'", err));
  }

  // Block the forwarded signals across fork, so none arrives between fork and
  // the handlers being in place; the child restores the old mask.
  sigset_t forwarded, old_mask;
  sigemptyset(&forwarded);
  sigaddset(&forwarded, SIGINT);
  sigaddset(&forwarded, SIGTERM);
  sigprocmask(SIG_BLOCK, &forwarded, &old_mask);

  pid_t parent = getpid();
  std::fflush(nullptr);  // the child must not flush our buffered output twice
  pid_t pid = fork();
  if (pid < 0) {
    int err = errno;
    sigprocmask(SIG_SETMASK, &old_mask, nullptr);
    rmdir(workdir.c_str());
    throw SetupError(errno_message("fork the sandbox", err));
  }
  if (pid == 0) child_main(workdir, parent, old_mask, body);

  spdlog::debug("sandbox_started pid={} workdir={}", pid, workdir);
  forward_to.store(pid);
  struct sigaction act, old_int, old_term;
  std::memset(&act, 0, sizeof act);
  act.sa_handler = forward_signal;
  sigemptyset(&act.sa_mask);
  sigaction(SIGINT, &act, &old_int);
  sigaction(SIGTERM, &act, &old_term);
  sigprocmask(SIG_SETMASK, &old_mask, nullptr);

  int status = wait_child(pid);
  int wait_err = errno;

  sigprocmask(SIG_BLOCK, &forwarded, nullptr);
  sigaction(SIGINT, &old_int, nullptr);
  sigaction(SIGTERM, &old_term, nullptr);
  forward_to.store(0);
  sigprocmask(SIG_SETMASK, &old_mask, nullptr);

  // The tmpfs lived in the child's namespace: on our side the folder is empty.
  std::string error;
  if (!remove_tree(workdir, &error)) {
    spdlog::warn("sandbox_cleanup_failed workdir={} error=\"{}\"", workdir, error);
  }
  if (status < 0) {
    throw SetupError(
        errno_message("wait for the sandbox (pid " + std::to_string(pid) + ")", wait_err));
  }
  int result = WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
  spdlog::debug("sandbox_ended pid={} status={}", pid, result);
  return result;
}

}  // namespace leapfrog::fs
