#include "scenarios/fs/sys_util.h"

#include <fcntl.h>
#include <ftw.h>
#include <poll.h>
#include <spdlog/spdlog.h>
#include <spawn.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string_view>

#include "scenarios/fs/workspace.h"

extern char** environ;

namespace leapfrog::fs {

std::string errno_message(const std::string& what, int err) {
  return what + ": " + std::strerror(err);
}

namespace {

// nftw offers no user pointer: the first failure of the current walk lands here.
// remove_tree is not reentrant across threads for that reason alone.
thread_local std::string* remove_error = nullptr;

int remove_entry(const char* path, const struct stat* st, int type, struct FTW*) {
  (void)st;
  int rc = (type == FTW_DP) ? rmdir(path) : unlink(path);
  if (rc != 0 && errno != ENOENT && remove_error != nullptr && remove_error->empty()) {
    *remove_error = errno_message(std::string("remove '") + path + "'", errno);
  }
  return 0;  // keep going: remove as much as possible
}

}  // namespace

bool remove_tree(const std::string& path, std::string* error) {
  struct stat st;
  if (lstat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return true;
    if (error) *error = errno_message("stat '" + path + "'", errno);
    return false;
  }
  std::string first_error;
  remove_error = &first_error;
  // As root, FTW_DEPTH still enters mode-000 folders, so nothing is left behind.
  int rc = nftw(path.c_str(), remove_entry, 64, FTW_DEPTH | FTW_PHYS | FTW_MOUNT);
  remove_error = nullptr;
  if (rc != 0 && first_error.empty()) first_error = errno_message("walk '" + path + "'", errno);
  if (!first_error.empty()) {
    if (error) *error = first_error;
    return false;
  }
  return true;
}

std::string find_program(const std::string& name) {
  const char* path = getenv("PATH");
  std::string dirs = path != nullptr ? path : "";
  dirs += ":/usr/local/sbin:/usr/sbin:/sbin:/usr/bin:/bin";
  size_t start = 0;
  while (start <= dirs.size()) {
    size_t end = dirs.find(':', start);
    if (end == std::string::npos) end = dirs.size();
    std::string dir = dirs.substr(start, end - start);
    start = end + 1;
    if (dir.empty()) continue;
    std::string candidate = dir + "/" + name;
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return "";
}

ProgramResult run_program(const std::vector<std::string>& argv) {
  int out[2];
  if (pipe2(out, O_CLOEXEC) != 0) throw SetupError(errno_message("pipe", errno));

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, out[1], 1);
  posix_spawn_file_actions_adddup2(&actions, out[1], 2);

  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);

  pid_t pid = -1;
  int rc = posix_spawn(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  close(out[1]);
  if (rc != 0) {
    close(out[0]);
    throw SetupError(errno_message("start " + argv[0], rc));
  }

  ProgramResult result;
  char buf[4096];
  for (;;) {
    ssize_t n = read(out[0], buf, sizeof buf);
    if (n > 0) {
      result.output.append(buf, static_cast<size_t>(n));
    } else if (n == 0 || errno != EINTR) {
      break;
    }
  }
  close(out[0]);
  result.status = wait_child(pid);
  return result;
}

std::string describe_status(int status) {
  if (WIFEXITED(status)) return "exit status " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return "killed by signal " + std::to_string(WTERMSIG(status));
  return "status " + std::to_string(status);
}

int wait_child(pid_t pid) {
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return -1;
  }
  return status;
}

bool wait_child_for(pid_t pid, std::chrono::milliseconds timeout, int* status) {
  // glibc's pidfd_open wrapper does not link from C++ here: use the syscall.
  int pidfd = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
  if (pidfd >= 0) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      struct pollfd p = {pidfd, POLLIN, 0};
      int rc = poll(&p, 1, left.count() > 0 ? static_cast<int>(left.count()) : 0);
      if (rc > 0) break;
      if (rc == 0 || errno != EINTR) {
        close(pidfd);
        return false;
      }
    }
    close(pidfd);
  } else {
    // No pidfd (pre-5.3 kernel): poll with WNOHANG.
    auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
      int st = 0;
      pid_t r = waitpid(pid, &st, WNOHANG);
      if (r == pid) {
        if (status) *status = st;
        return true;
      }
      if (r < 0 && errno != EINTR) return false;
      if (std::chrono::steady_clock::now() >= deadline) return false;
      usleep(2000);
    }
  }
  int st = wait_child(pid);
  if (status) *status = st;
  return true;
}

// Is `type` in /proc/filesystems ("nodev\ttmpfs" or "\text4")?
bool kernel_has_fs(const std::string& type) {
  FILE* f = std::fopen("/proc/filesystems", "re");
  if (f == nullptr) return false;
  char line[256];
  bool found = false;
  while (!found && std::fgets(line, sizeof line, f) != nullptr) {
    std::string l(line);
    while (!l.empty() && (l.back() == '\n' || l.back() == ' ')) l.pop_back();
    const size_t tab = l.rfind('\t');
    found = (tab == std::string::npos ? l : l.substr(tab + 1)) == type;
  }
  std::fclose(f);
  return found;
}

// Can the kernel load `type`'s module on first mount (request_module runs
// modprobe, which needs the module in this kernel's modules.dep)?
bool kernel_can_load_fs(const std::string& type) {
  struct utsname u;
  if (uname(&u) != 0) return false;
  FILE* f = std::fopen((std::string("/lib/modules/") + u.release + "/modules.dep").c_str(), "re");
  if (f == nullptr) return false;
  const std::string want = "/" + type + ".ko";
  char line[4096];
  bool found = false;
  while (!found && std::fgets(line, sizeof line, f) != nullptr) {
    const std::string l(line);
    const size_t colon = l.find(':');
    const std::string path = l.substr(0, colon);
    const size_t at = path.rfind(want);
    found = at != std::string::npos &&
            (at + want.size() == path.size() || path[at + want.size()] == '.');
  }
  std::fclose(f);
  return found && !find_program("modprobe").empty();
}


bool kernel_at_least(int major, int minor) {
  struct utsname u;
  if (uname(&u) != 0) return false;
  int got_major = 0, got_minor = 0;
  if (std::sscanf(u.release, "%d.%d", &got_major, &got_minor) != 2) return false;
  return got_major > major || (got_major == major && got_minor >= minor);
}

dev_t dev_of(const std::string& path) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) throw SetupError(errno_message("stat '" + path + "'", errno));
  return st.st_dev;
}

// A fresh empty folder at `path` (an empty leftover from an earlier run is fine).
void make_dir(const std::string& path) {
  if (mkdir(path.c_str(), 0755) != 0 && errno != EEXIST) {
    throw SetupError(errno_message("mkdir '" + path + "'", errno));
  }
  if (chmod(path.c_str(), 0755) != 0)
    throw SetupError(errno_message("chmod '" + path + "'", errno));
}

// Unmounts `path` (lazily if busy) and removes the mount point. Logs failures.
void unmount_quietly(const std::string& path) {
  if (umount2(path.c_str(), 0) != 0) {
    if (errno == EBUSY) {
      if (umount2(path.c_str(), MNT_DETACH) != 0) {
        spdlog::warn("fs_umount_failed path={} error=\"{}\"", path, std::strerror(errno));
      }
    } else if (errno != EINVAL && errno != ENOENT) {  // not mounted, or never made
      spdlog::warn("fs_umount_failed path={} error=\"{}\"", path, std::strerror(errno));
    }
  }
  if (rmdir(path.c_str()) != 0 && errno != ENOENT) {
    spdlog::warn("fs_rmdir_failed path={} error=\"{}\"", path, std::strerror(errno));
  }
}

}  // namespace leapfrog::fs
