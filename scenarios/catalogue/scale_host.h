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

// This boot's id (/proc/sys/kernel/random/boot_id); "" when unreadable.
std::string boot_id();

// What the host of this VM last said about itself. A TCG or KVM guest cannot
// see the host's other work in its own /proc/stat, so the VM launcher sends
// it on the guest's second serial port once a second, and the guest's /init
// writes each line to host_view_path():
//   other=CPUS host_cpus=N vcpus=N pinning=none|LIST end
// `other` is the host's CPU time used by everything but this VM over the
// last second, in CPUs' worth.
struct HostView {
  bool known = false;      // a fresh, well-formed view was read
  double other_load = 0;   // CPUs busy outside this VM
  uint32_t host_cpus = 0;  // CPUs of the host
  uint32_t vcpus = 0;      // this VM's vCPUs
  std::string pinning;     // host CPUs the vCPUs are pinned to ("none": unpinned)
};
// $LEAPFROG_HOST_VIEW, else /run/leapfrog/host.
std::string host_view_path();
// The view in `path`, if it was written within the last `max_age_s` seconds
// (the launcher writes every second) and parses; otherwise known = false.
HostView read_host_view(const std::string& path, double max_age_s = 3);

}  // namespace leapfrog::catalogue::scale
