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

// Removes /tmp/leapfrog-run-<pid>-* folders whose supervisor is gone. They are
// empty on the host side (their tmpfs lived in the dead run's namespace), so
// rmdir suffices and never removes anything a live run still uses.
static void collect_stale_run_folders() {
  DIR* dir = opendir("/tmp");
  if (!dir) return;
  while (dirent* e = readdir(dir)) {
    const std::string name = e->d_name;
    const std::string prefix = "leapfrog-run-";
    if (name.rfind(prefix, 0) != 0) continue;
    const long pid = std::strtol(name.c_str() + prefix.size(), nullptr, 10);
    if (pid <= 0 || pid == getpid()) continue;
    if (kill(static_cast<pid_t>(pid), 0) == 0 || errno != ESRCH) continue;
    rmdir(("/tmp/" + name).c_str());
  }
  closedir(dir);
}

int run_sandboxed(const std::function<int(const std::string& workdir)>& body) {
  if (geteuid() != 0) {
    throw SetupError("the sandbox needs root (mount namespaces, mounts), running as euid " +
                     std::to_string(geteuid()));
  }
  collect_stale_run_folders();
  // The name carries our pid, so a later run can tell the folder of a
  // supervisor that was killed outright (SIGKILL) and remove it.
  std::string templ = "/tmp/leapfrog-run-" + std::to_string(getpid()) + "-XXXXXX";
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
