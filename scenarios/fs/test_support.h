#pragma once
// Helpers shared by the file system tests. They run inside run_sandboxed
// bodies, which report each failed check as its own exit code.

#include <dirent.h>
#include <fcntl.h>
#include <grp.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <string>

namespace leapfrog::fs::test_support {

// The unprivileged uid and gid observers run as.
constexpr uid_t kObserver = 65534;

// Inside a sandbox body: on failure print the check and return `code`.
#define SANDBOX_CHECK(cond, code)                                                                 \
  do {                                                                                            \
    if (!(cond)) {                                                                                \
      std::fprintf(stderr, "check failed (exit %d) at line %d: %s [errno: %s]\n", code, __LINE__, \
                   #cond, std::strerror(errno));                                                  \
      return code;                                                                                \
    }                                                                                             \
  } while (0)

// Runs `body` in a child as uid/gid 65534 and returns its result (the child's
// exit code; 250+ when the child could not be set up).
inline int as_observer(const std::function<int()>& body) {
  pid_t pid = fork();
  if (pid < 0) return 250;
  if (pid == 0) {
    if (setgroups(0, nullptr) != 0 || setresgid(kObserver, kObserver, kObserver) != 0 ||
        setresuid(kObserver, kObserver, kObserver) != 0) {
      _exit(251);
    }
    _exit(body());
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 252;
}

// errno of stat(path) done by a child as uid/gid 65534 (0 on success).
inline int observer_stat(const std::string& path) {
  return as_observer([&] {
    struct stat st;
    return stat(path.c_str(), &st) == 0 ? 0 : errno;
  });
}

// Entries of `dir` whose name starts with `prefix` (-1 if unreadable).
inline int count_prefixed(const std::string& dir, const std::string& prefix) {
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return -1;
  int n = 0;
  while (dirent* entry = readdir(d)) {
    if (std::string(entry->d_name).rfind(prefix, 0) == 0) ++n;
  }
  closedir(d);
  return n;
}

inline bool write_file(const std::string& path, const std::string& text) {
  int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return false;
  bool ok = write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  return close(fd) == 0 && ok;
}

// The first line of the file at `path` ("" if unreadable).
inline std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::string text;
  std::getline(in, text);
  return text;
}

}  // namespace leapfrog::fs::test_support
