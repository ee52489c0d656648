#pragma once
// End-to-end tests: real child processes with their output in files, timed
// waits on pidfds, bounded polling, and a look at /proc.

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace leapfrog::testing {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

inline std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The line of Debian's stock kernel the VM tests were written against. Other
// lines (6.12) are installed beside it; a test that means one says which.
inline constexpr const char* kStockLine = "6.1";

// The newest /boot/vmlinuz-<line>.* (a Debian stock kernel of that line:
// "6.1" takes 6.1.0-57-amd64, not 6.12.118+deb12-amd64), or "" if none.
inline std::string stock_boot_kernel(const std::string& line = kStockLine) {
  const std::string prefix = "vmlinuz-" + line + ".";
  std::string best;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/boot", ec)) {
    const std::string name = e.path().filename();
    if (name.rfind(prefix, 0) == 0 && name > std::filesystem::path(best).filename().string())
      best = e.path();
  }
  return best;
}

// A bare initramfs in `dir`: busybox-static and `init_script` as /init (plus
// /dev/console), packed with cpio. Returns the cpio's path, "" on failure.
inline std::string busybox_initramfs(const std::string& dir, const std::string& init_script) {
  namespace stdfs = std::filesystem;
  const std::string stage = dir + "/stage", out = dir + "/initrd.cpio";
  stdfs::create_directories(stage + "/bin");
  stdfs::create_directories(stage + "/dev");
  std::error_code ec;
  stdfs::copy_file("/bin/busybox", stage + "/bin/busybox", stdfs::copy_options::overwrite_existing, ec);
  if (ec) return "";
  std::ofstream(stage + "/init") << init_script;
  stdfs::permissions(stage + "/init", stdfs::perms::owner_all | stdfs::perms::group_read |
                                          stdfs::perms::group_exec | stdfs::perms::others_read |
                                          stdfs::perms::others_exec);
  const std::string cmd = "cd " + stage + " && rm -f dev/console && mknod -m 0600 dev/console c 5 1" +
                          " && find . -mindepth 1 | cpio --quiet -o -H newc -R 0:0 > " + out;
  if (std::system(cmd.c_str()) != 0) return "";
  return out;
}

// The last `max` bytes of a file, for failure messages.
inline std::string tail_of(const std::string& path, size_t max = 4000) {
  std::string s = slurp(path);
  return s.size() > max ? "..." + s.substr(s.size() - max) : s;
}

// Polls `pred` until it holds or `timeout` passes; true if it held.
inline bool poll_until(const std::function<bool()>& pred, std::chrono::milliseconds timeout,
                       std::chrono::milliseconds every = 20ms) {
  const auto deadline = Clock::now() + timeout;
  for (;;) {
    if (pred()) return true;
    if (Clock::now() >= deadline) return false;
    std::this_thread::sleep_for(every);
  }
}

inline int pidfd_open(pid_t pid) {
  return static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
}

// Waits until the process behind `pidfd` has exited (true) or `timeout` passes.
inline bool pidfd_wait(int pidfd, std::chrono::milliseconds timeout) {
  pollfd p{pidfd, POLLIN, 0};
  const auto deadline = Clock::now() + timeout;
  for (;;) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    const int r = poll(&p, 1, static_cast<int>(std::max<int64_t>(left.count(), 0)));
    if (r > 0) return true;
    if (r == 0) return false;
    if (errno != EINTR) return false;
  }
}

// A child process running `argv`, stdout and stderr appended to files. It
// gets SIGKILL if the test process dies. Destruction stops it: SIGTERM, then
// SIGKILL after `grace`.
class Proc {
 public:
  Proc(std::vector<std::string> argv, std::string out_file, std::string err_file)
      : argv_(std::move(argv)), out_(std::move(out_file)), err_(std::move(err_file)) {
    const pid_t parent = getpid();
    std::vector<char*> args;
    for (auto& a : argv_) args.push_back(a.data());
    args.push_back(nullptr);
    pid_ = fork();
    if (pid_ < 0) throw std::runtime_error("fork failed");
    if (pid_ == 0) {
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (getppid() != parent) _exit(127);
      const int o = open(out_.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
      const int e = open(err_.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
      if (o < 0 || e < 0) _exit(127);
      dup2(o, 1);
      dup2(e, 2);
      const int null = open("/dev/null", O_RDONLY);
      if (null >= 0) dup2(null, 0);
      sigset_t none;
      sigemptyset(&none);
      sigprocmask(SIG_SETMASK, &none, nullptr);
      execvp(args[0], args.data());
      _exit(127);
    }
    pidfd_ = pidfd_open(pid_);
  }
  ~Proc() { stop(); }
  Proc(const Proc&) = delete;
  Proc& operator=(const Proc&) = delete;

  pid_t pid() const { return pid_; }
  const std::string& out_file() const { return out_; }
  const std::string& err_file() const { return err_; }
  bool exited() const { return reaped_ || pidfd_wait(pidfd_, 0ms); }

  void signal(int sig) {
    if (!reaped_) ::kill(pid_, sig);
  }

  // Waits for the exit and reaps; the exit code (128+signal when killed), or
  // nullopt on timeout.
  std::optional<int> wait(std::chrono::milliseconds timeout) {
    if (!reaped_) {
      if (!pidfd_wait(pidfd_, timeout)) return std::nullopt;
      int status = 0;
      waitpid(pid_, &status, 0);
      status_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      reaped_ = true;
      close(pidfd_);
      pidfd_ = -1;
    }
    return status_;
  }

  // SIGKILL and reap.
  void kill9() {
    signal(SIGKILL);
    wait(std::chrono::hours(1));
  }

  // SIGTERM, SIGKILL after `grace`; reaped either way.
  void stop(std::chrono::milliseconds grace = 20s) {
    if (reaped_ || pid_ <= 0) return;
    signal(SIGTERM);
    if (!wait(grace)) kill9();
  }

 private:
  std::vector<std::string> argv_;
  std::string out_, err_;
  pid_t pid_ = -1;
  int pidfd_ = -1;
  bool reaped_ = false;
  int status_ = -1;
};

struct Result {
  int exit = -1;
  std::string out;
  std::string err;
};

// Runs argv to completion (at most `timeout`, then SIGKILL) with output captured
// in files under `dir`.
inline Result run_to_end(const std::vector<std::string>& argv, const std::string& dir,
                         std::chrono::milliseconds timeout = 120s) {
  static int counter = 0;
  const std::string base =
      dir + "/cmd-" + std::to_string(getpid()) + "-" + std::to_string(++counter);
  Result r;
  {
    Proc p(argv, base + ".out", base + ".err");
    auto code = p.wait(timeout);
    if (!code) {
      p.kill9();
      r.exit = -1;
    } else {
      r.exit = *code;
    }
  }
  r.out = slurp(base + ".out");
  r.err = slurp(base + ".err");
  std::remove((base + ".out").c_str());
  std::remove((base + ".err").c_str());
  return r;
}

// /proc: the parent of a process, its command line, and its descendants.
inline std::optional<pid_t> parent_of(pid_t pid) {
  const std::string stat = slurp("/proc/" + std::to_string(pid) + "/stat");
  const auto close_paren = stat.rfind(')');
  if (close_paren == std::string::npos) return std::nullopt;
  std::istringstream in(stat.substr(close_paren + 2));
  char state = 0;
  pid_t ppid = 0;
  in >> state >> ppid;
  if (!in || state == 'Z') return std::nullopt;
  return ppid;
}

inline std::string cmdline_of(pid_t pid) {
  std::string s = slurp("/proc/" + std::to_string(pid) + "/cmdline");
  for (auto& c : s)
    if (c == '\0') c = ' ';
  return s;
}

// Live (not zombie) processes: pid -> parent.
inline std::vector<std::pair<pid_t, pid_t>> live_processes() {
  std::vector<std::pair<pid_t, pid_t>> out;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/proc", ec)) {
    const std::string name = e.path().filename();
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    const pid_t pid = std::atoi(name.c_str());
    if (auto ppid = parent_of(pid)) out.emplace_back(pid, *ppid);
  }
  return out;
}

inline std::vector<pid_t> descendants_of(pid_t root) {
  const auto all = live_processes();
  std::vector<pid_t> out;
  std::set<pid_t> frontier = {root};
  while (!frontier.empty()) {
    std::set<pid_t> next;
    for (const auto& [pid, ppid] : all) {
      if (frontier.count(ppid)) {
        out.push_back(pid);
        next.insert(pid);
      }
    }
    frontier = std::move(next);
  }
  return out;
}

// Live processes whose command line mentions `needle` or whose working folder
// is inside it (PostgreSQL's backends rename themselves but stay in the data
// folder).
inline std::vector<pid_t> processes_using(const std::string& needle) {
  std::vector<pid_t> out;
  for (const auto& [pid, ppid] : live_processes()) {
    (void)ppid;
    if (pid == getpid()) continue;
    std::error_code ec;
    const std::string cwd =
        std::filesystem::read_symlink("/proc/" + std::to_string(pid) + "/cwd", ec).string();
    if (cmdline_of(pid).find(needle) != std::string::npos || (!ec && cwd.rfind(needle, 0) == 0))
      out.push_back(pid);
  }
  return out;
}

}  // namespace leapfrog::testing
