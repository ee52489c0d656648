#pragma once
// Small POSIX helpers shared by the sandbox and the workspaces: error text,
// recursive removal, running a helper program, timed waits on a child.

#include <sys/types.h>

#include <chrono>
#include <string>
#include <vector>

namespace leapfrog::fs {

// "what: strerror(err)", e.g. "mount /tmp/x: Operation not permitted".
std::string errno_message(const std::string& what, int err);

// Removes `path` and everything below it without following symlinks (rm -rf).
// Missing `path` is not an error. Returns false and sets `error` on failure.
bool remove_tree(const std::string& path, std::string* error);

// Finds an executable by name in $PATH and the sbin folders (which a non-login
// root shell may lack). Returns "" when not found.
std::string find_program(const std::string& name);

struct ProgramResult {
  int status = 0;      // raw waitpid status
  std::string output;  // stdout and stderr, interleaved
};

// Runs `argv` (argv[0] a full path) with stdin from /dev/null, capturing its
// output, and waits for it. Throws SetupError when it cannot be started.
ProgramResult run_program(const std::vector<std::string>& argv);

// "exit status 1", "killed by signal 9".
std::string describe_status(int status);

// Waits up to `timeout` for child `pid` to end and reaps it. Returns true and the
// raw status when it ended in time; false (not reaped) otherwise.
bool wait_child_for(pid_t pid, std::chrono::milliseconds timeout, int* status);

// waitpid that retries on EINTR. Returns the raw status, or -1 on error.
int wait_child(pid_t pid);

// Is `type` (a mount(2) type) registered in /proc/filesystems?
bool kernel_has_fs(const std::string& type);
// Can the kernel load `type`'s module on first mount (it is in this kernel's
// modules.dep, and modprobe is there for request_module)?
bool kernel_can_load_fs(const std::string& type);

// Is the running kernel's release (uname -r) at least major.minor?
bool kernel_at_least(int major, int minor);

// st_dev of `path`; throws SetupError.
dev_t dev_of(const std::string& path);
// A fresh empty folder at `path`, mode 0755 (an empty leftover from an
// earlier run is fine); throws SetupError.
void make_dir(const std::string& path);
// Unmounts `path` (lazily if busy) and removes the mount point. Logs failures.
void unmount_quietly(const std::string& path);

}  // namespace leapfrog::fs
