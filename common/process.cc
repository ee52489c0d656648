#include "common/process.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>

extern char** environ;

namespace leapfrog {

pid_t spawn_process(const std::vector<std::string>& argv, const SpawnOptions& opts, int* error) {
  if (argv.empty()) {
    if (error) *error = EINVAL;
    return -1;
  }
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  const int out_flags = O_WRONLY | O_CREAT | (opts.append ? O_APPEND : O_TRUNC);
  if (opts.stdin_fd >= 0)
    posix_spawn_file_actions_adddup2(&fa, opts.stdin_fd, 0);
  else if (!opts.stdin_path.empty())
    posix_spawn_file_actions_addopen(&fa, 0, opts.stdin_path.c_str(), O_RDONLY, 0);
  if (opts.stdout_fd >= 0)
    posix_spawn_file_actions_adddup2(&fa, opts.stdout_fd, 1);
  else if (!opts.stdout_path.empty())
    posix_spawn_file_actions_addopen(&fa, 1, opts.stdout_path.c_str(), out_flags, 0644);
  if (opts.stderr_to_stdout)
    posix_spawn_file_actions_adddup2(&fa, 1, 2);
  else if (!opts.stderr_path.empty())
    posix_spawn_file_actions_addopen(&fa, 2, opts.stderr_path.c_str(), out_flags, 0644);

  // dup2 onto itself clears FD_CLOEXEC in the child (glibc 2.29 and later).
  for (int fd : opts.inherit_fds) posix_spawn_file_actions_adddup2(&fa, fd, fd);

  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  if (opts.reset_signal_mask) {
    // Callers block SIGINT/SIGTERM to wait for them; their children must not inherit that.
    sigset_t none;
    sigemptyset(&none);
    posix_spawnattr_setsigmask(&attr, &none);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK);
  }

  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = -1;
  const int rc = opts.search_path ? posix_spawnp(&pid, args[0], &fa, &attr, args.data(), environ)
                                  : posix_spawn(&pid, args[0], &fa, &attr, args.data(), environ);
  posix_spawnattr_destroy(&attr);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) {
    if (error) *error = rc;
    return -1;
  }
  return pid;
}

int wait_exit_code(pid_t pid) {
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return -1;
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

int run_process(const std::vector<std::string>& argv, const SpawnOptions& opts) {
  const pid_t pid = spawn_process(argv, opts);
  return pid < 0 ? -1 : wait_exit_code(pid);
}

std::optional<std::string> capture_output(const std::vector<std::string>& argv) {
  int out[2];
  if (pipe2(out, O_CLOEXEC) != 0) return std::nullopt;
  SpawnOptions opts;
  opts.stdin_path = "/dev/null";
  opts.stderr_path = "/dev/null";
  opts.stdout_fd = out[1];
  opts.search_path = true;
  const pid_t pid = spawn_process(argv, opts);
  close(out[1]);
  if (pid < 0) {
    close(out[0]);
    return std::nullopt;
  }
  std::string text;
  char buf[4096];
  for (;;) {
    const ssize_t n = read(out[0], buf, sizeof buf);
    if (n > 0)
      text.append(buf, static_cast<size_t>(n));
    else if (n == 0 || errno != EINTR)
      break;
  }
  close(out[0]);
  if (wait_exit_code(pid) != 0) return std::nullopt;
  return text;
}

std::string find_in_path(const std::string& name) {
  if (name.empty()) return "";
  if (name.find('/') != std::string::npos) return access(name.c_str(), X_OK) == 0 ? name : "";
  const char* path = std::getenv("PATH");
  const std::string dirs = path != nullptr ? path : "/usr/local/bin:/usr/bin:/bin";
  size_t start = 0;
  while (start <= dirs.size()) {
    size_t end = dirs.find(':', start);
    if (end == std::string::npos) end = dirs.size();
    const std::string dir = dirs.substr(start, end - start);
    start = end + 1;
    const std::string candidate = (dir.empty() ? "." : dir) + "/" + name;
    struct stat st {};
    if (stat(candidate.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
        access(candidate.c_str(), X_OK) == 0)
      return candidate;
  }
  return "";
}

}  // namespace leapfrog
