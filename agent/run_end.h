#pragma once
// Why a job's run child ended without finishing by itself: the OOM killer,
// another signal, or nothing the agent can tell. The agent gathers the facts
// while the run goes (its processes, its memory cgroup's OOM-kill counter,
// the kernel log) and judges them once it has reaped the run (connect.cc).
//
// Two sources, because neither is enough alone:
// - the kernel log names each OOM victim by pid ("Out of memory: Killed
//   process 72 (leapfrog-agent) total-vm:...", or "Memory cgroup out of
//   memory: ..."): precise when the victim is among the run's processes the
//   agent saw, but only root may read /dev/kmsg and the line may be missed
//   when the run dies before the agent has seen its processes;
// - the memory cgroup the run lives in counts its OOM kills (cgroup v2
//   memory.events, v1 memory.oom_control: "oom_kill N"): the count rising
//   while a run dies of SIGKILL is an OOM kill even without a kernel line,
//   but the cgroup may hold other processes, so the count alone never
//   explains a run that did not die of SIGKILL.

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "common/console/oom_kill.h"
#include "leapfrog/v1/common.pb.h"

namespace leapfrog {

// The OOM-kill counter of the memory cgroup a process lives in.
class OomCounter {
 public:
  // The counter of `pid`'s memory cgroup, found through `proc`/PID/cgroup
  // under `cgroup_root` (v1's memory controller first, then v2, mounted at
  // the root or at "unified"); file() is empty when there is none (no
  // memory controller, the root cgroup, no cgroup file system mounted).
  static OomCounter of(pid_t pid, const std::string& proc = "/proc",
                       const std::string& cgroup_root = "/sys/fs/cgroup");
  // The count now; nullopt when it cannot be read.
  std::optional<uint64_t> read() const;
  const std::string& file() const { return file_; }

 private:
  std::string file_;
};

// `root` and every process below it now, by the parents in `proc`/*/stat.
std::set<pid_t> process_tree(pid_t root, const std::string& proc = "/proc");

// What the agent knew of a run when it reaped it.
struct RunEndFacts {
  int wait_status = 0;           // from waitpid/wait4
  bool killed_by_agent = false;  // past its deadline, handed back, lease lost
  std::set<pid_t> pids;          // the run's processes seen while it ran
  std::string kernel_log;        // the kernel's messages during the run
  std::string counter_file;      // OomCounter::file(), empty: none
  std::optional<uint64_t> oom_kills_before, oom_kills_after;
};

// The signal that ended the run child, directly or through its sandbox
// (which exits 128 + the signal of the child it waited for); 0 if none.
int run_signal(int wait_status);

// Why the run was killed: OUT_OF_MEMORY when the kernel log names one of its
// processes as an OOM victim, or when it died of SIGKILL while its memory
// cgroup counted an OOM kill; SIGNAL for another signal the agent did not
// send; nullopt when it ended by itself or the agent killed it.
std::optional<v1::RunKilled> run_killed(const RunEndFacts& facts);

// One line for Outcome.error: "out of memory: the OOM killer killed the run
// (LINE)", "the run was killed by signal 15 (SIGTERM)".
std::string run_killed_message(const v1::RunKilled& k);

}  // namespace leapfrog
