#pragma once
// What a VM's guest cannot see: the host's CPU time used outside that VM. A
// TCG or KVM guest's /proc/stat counts only its own vCPUs, so a lookup-scale
// run in a VM on a busy host would call itself unloaded. The launcher sends
// each VM one line a second on its ttyS1; the guest's /init writes it where
// lookup-scale reads it (scenarios/catalogue/scale_host.h, HostView).

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <string>

namespace leapfrog::vm {

class HostLoadMeter {
 public:
  // The line for the VM whose QEMU is `qemu_pid`:
  //   "lf-host other=CPUS host_cpus=N vcpus=N pinning=none end\n"
  // where CPUS is the host's busy CPU time minus that QEMU's, since the last
  // call for the same pid, over the wall time between them. "" on the first
  // call for a pid (nothing measured yet) or when /proc cannot be read.
  std::string line_for(pid_t qemu_pid, uint32_t vcpus);
  // Forgets a QEMU that exited.
  void forget(pid_t qemu_pid) { last_.erase(qemu_pid); }

 private:
  struct Reading {
    std::chrono::steady_clock::time_point at;
    uint64_t host_busy_ticks = 0;
    uint64_t qemu_ticks = 0;
  };
  std::map<pid_t, Reading> last_;
};

// A process's CPU time (utime + stime of /proc/PID/stat, all its threads),
// in clock ticks; false if unreadable. The host's busy time is
// scale::read_cpu_times() (scenarios/catalogue/scale_host.h), which
// lookup-scale uses for the guest's own side.
bool process_ticks(pid_t pid, uint64_t& out);

}  // namespace leapfrog::vm
