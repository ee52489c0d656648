#pragma once
// What lookup-scale needs to know about the machine it measures on: the CPUs
// to pin tasks to (one per core first, then SMT siblings, as will-it-scale
// does) and how busy the CPUs were, so a run on a loaded or too-small machine
// can say so.

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

namespace leapfrog::catalogue::scale {

// The CPUs this process may run on, ordered: the first thread of every core,
// then the second thread of every core, and so on. Never empty.
std::vector<int> cpu_order();

// Pins the calling thread to `cpu`; false if the kernel refused.
bool pin_to(int cpu);

// The "cpu" line of /proc/stat, in clock ticks.
struct CpuTimes {
  uint64_t busy = 0;
  uint64_t idle = 0;  // idle + iowait
};
CpuTimes read_cpu_times();
// Percentage of CPU time idle between two readings (100 when none passed).
double idle_pct(const CpuTimes& before, const CpuTimes& after);

// CPU time thread `tid` of process `pid` has run, in ns: its schedstat, or
// utime + stime (clock-tick resolution) without one; 0 when unreadable.
// (/proc/<tid>/... alone would sum the whole thread group.)
uint64_t thread_cpu_ns(pid_t pid, pid_t tid);
// Clock ticks per second.
double ticks_per_second();

// The 1-minute load average; -1 when unreadable.
double load_average();

}  // namespace leapfrog::catalogue::scale
