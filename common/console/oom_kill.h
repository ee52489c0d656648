#pragma once
// The kernel's OOM killer in a log or a console: each process it killed, by
// pid and name, with the kernel's line. The agent reads it in /dev/kmsg to
// tell a run killed for memory (agent/run_end.h), the VM launcher in a VM's
// console to tell an agent killed for memory from a hang.

#include <sys/types.h>

#include <string>
#include <string_view>
#include <vector>

namespace leapfrog::console {

// One OOM kill.
struct OomKill {
  pid_t pid = 0;
  std::string comm;  // the victim's name, e.g. "leapfrog-agent"
  std::string line;  // the kernel's line, printk decorations stripped
};

// The OOM kills in `text`, in order: "Out of memory: Killed process 72
// (leapfrog-agent) total-vm:..." (the whole machine's killer), "Memory
// cgroup out of memory: Killed process ..." (a cgroup's), and before 5.1 a
// line "Killed process ..." of its own.
std::vector<OomKill> oom_kills_in(std::string_view text);

}  // namespace leapfrog::console
