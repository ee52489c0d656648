#pragma once
// Child processes: posix_spawn with the standard streams redirected, and the
// wait for their exit code. For the programs both binaries run: compressors,
// make and its tools, the VM launcher's helpers, `leapfrog up`'s own agents.

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

namespace leapfrog {

// Where a child's standard streams go; an empty path inherits the parent's.
struct SpawnOptions {
  std::string stdin_path;          // opened read-only ("/dev/null": no input)
  int stdin_fd = -1;               // >= 0: stdin from this descriptor instead of stdin_path
  std::string stdout_path;         // created mode 0644, truncated unless `append`
  std::string stderr_path;         // as stdout_path
  bool append = false;             // stdout_path and stderr_path are appended to
  bool stderr_to_stdout = false;   // stderr goes where stdout goes
  int stdout_fd = -1;              // >= 0: stdout to this descriptor instead of stdout_path
  bool search_path = false;        // argv[0] is looked up in $PATH
  bool reset_signal_mask = false;  // the child starts with no signal blocked
  // Descriptors the child keeps under the same numbers, close-on-exec or
  // not here (the build sandbox hands bubblewrap what it binds this way).
  std::vector<int> inherit_fds;
};

// Starts `argv`. Its pid, or -1 with `*error` (when given) set to the errno
// value when it cannot start.
pid_t spawn_process(const std::vector<std::string>& argv, const SpawnOptions& opts,
                    int* error = nullptr);

// Waits for `pid` to end (retrying on EINTR) and reaps it: its exit status,
// 128 + the number of the signal that killed it, or -1 when it cannot be
// waited for.
int wait_exit_code(pid_t pid);

// spawn_process, then wait_exit_code; -1 when it cannot start.
int run_process(const std::vector<std::string>& argv, const SpawnOptions& opts);

// Runs `argv` (argv[0] looked up in $PATH) with stdin and stderr on
// /dev/null: its standard output, or nullopt when it cannot start or exits
// other than 0.
std::optional<std::string> capture_output(const std::vector<std::string>& argv);

// The path of the executable `name` in $PATH ("" when there is none); a name
// with a slash is returned as it is when executable.
std::string find_in_path(const std::string& name);

}  // namespace leapfrog
