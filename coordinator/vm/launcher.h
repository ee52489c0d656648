#pragma once
// `leapfrog vm run`: boots N VMs of one registered kernel, each running the
// static agent against the coordinator, and supervises them. The launcher
// registers with the coordinator as a launcher and claims the agent name of
// each VM before it boots it (coordinator_client.h): only it may then end
// those agents' jobs. The parts: the VM backend (backend.h; QEMU:
// qemu_backend.h), the saved-VM cache (saved_vms.h), the slot state machine
// (slot.h), the coordinator client; this file is the supervisor.
// - the agent must register within the boot deadline, else the slot reports
//   BOOT_FAILURE (the coordinator ends one queued job of that kernel) and
//   stops: a kernel that does not boot is not booted again and again;
// - a kernel report in the console (parsed by common/console) ends the
//   agent's job as KERNEL_CRASH with the report's title and the console tail,
//   and the VM is replaced;
// - no heartbeat (agent last_seen) and no console output past the hang
//   deadline: QEMU is killed, the job ends as HANG, and the VM is replaced.
//
// Snapshots: the first VM of a kernel boots as a template. Once its /init has
// set everything up, the launcher saves the VM (qmp.h) into the cache, keyed
// by everything the saved state depends on, and hands the template its
// identity (name, port, token, ...) on its second serial port; every later
// VM of that key, in this run or a later one, starts from the saved state and
// gets its own identity the same way: running in ~0.6 s instead of a ~3 s boot under
// TCG. The state holds no token and no name. A restore that fails falls back
// to a full boot for the rest of the run.

#include <atomic>
#include <chrono>
#include <string>

#include "coordinator/vm/backend.h"

namespace leapfrog::vm {

// What the launcher tells as its VMs come and go, for its metrics
// (coordinator/metrics/vm_metrics.h). Calls come from the launcher's thread,
// must be cheap and must not throw.
class LauncherEvents {
 public:
  virtual ~LauncherEvents() = default;
  // A VM of `kernel` started: `mode` is "boot", "template", "restore" or "handoff".
  virtual void vm_started(const std::string& kernel, const std::string& mode) = 0;
  // Its agent registered `boot` after the VM started.
  virtual void vm_registered(const std::string& kernel, std::chrono::milliseconds boot) = 0;
  // A VM ended its job as `kind`: "kernel-crash", "hang" or "boot-failure".
  virtual void vm_failed(const std::string& kernel, const std::string& kind) = 0;
};

struct LauncherOptions {
  std::string coordinator;  // 127.0.0.1:PORT (the guests reach it through guestfwd)
  std::string token;
  std::string kernel_label;
  int count = 1;
  int cpus = 2;
  int mem_mib = kDefaultVmMemMib;
  // Let the agents run selftest-crash and selftest-hang jobs (tests only).
  bool selftest = false;
  std::string cache_dir;     // kernels/ and images/; default default_cache_dir()
  std::string run_dir;       // console logs, the initrd with the token
  std::string agent_exe;     // leapfrog-agent-static
  std::string image_script;  // deploy/vm/build-initramfs.sh
  std::chrono::milliseconds boot_timeout{90'000};
  std::chrono::milliseconds hang_timeout{30'000};
  // KVM: "auto" (a probe boot decides), "on", "off".
  std::string kvm = "auto";
  // Start VMs from a saved boot (see above); false: every VM boots.
  bool snapshot = true;
  // Only make the kernel's saved VM (boot the template, save it, stop), so
  // that no later launch has to: `leapfrog kernel add`. No agent runs and
  // nothing is reported to the coordinator.
  bool prepare_only = false;
  // Told of boots and failures; null: nobody.
  LauncherEvents* events = nullptr;
};

// Runs until `stop` becomes true (or every slot stopped). Returns the exit
// code: 0, or 2 when no VM ever booted. Throws std::runtime_error on setup
// failure (unknown kernel, no image).
int run_launcher(const LauncherOptions& opts, const std::atomic<bool>& stop);

// With opts.prepare_only: 0 once the saved VM is there (made now, or made
// before), else 2, with `why` saying what failed (the template's console
// tail included). Throws like run_launcher.
int prepare_saved_vm(const LauncherOptions& opts, const std::atomic<bool>& stop, std::string& why);

// The last `max_bytes` of a console log, cut at a line start.
std::string console_tail(const std::string& text, size_t max_bytes = 8000);

}  // namespace leapfrog::vm
