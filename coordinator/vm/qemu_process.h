#pragma once
// One QEMU process: the command line of a Leapfrog VM (serial console to a
// file, user networking restricted to the coordinator), started with
// Boost.Process, watched through a pidfd. Only this file's .cc includes
// boost/process.hpp (it costs seconds of compile time per file).

#include <sys/types.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

namespace leapfrog::vm {

// The kernel command line every Leapfrog VM starts with (the launcher adds
// its lf.* parameters and the kernel's own). acpi=noirq: PCI interrupts are
// routed by the BIOS's table instead of ACPI methods, whose interpreter,
// under TCG, took ~0.13 s to enable the NIC's interrupt link (the virtio
// devices use MSI-X anyway). random.trust_cpu=on: the entropy pool is
// ready at boot from the CPU's RDRAND; a kernel built from allnoconfig does
// not trust it by default, and the agent's first getrandom() then waited
// ~1.7 s under TCG for jitter entropy. Path lookup depends on neither.
inline constexpr const char* kBaseCmdline =
    "console=ttyS0 loglevel=5 panic=-1 acpi=noirq random.trust_cpu=on";

// The guest's clock source, chosen for the accelerator: the words the
// launcher adds to kBaseCmdline. Under TCG every vCPU's TSC reads QEMU's one
// tick counter (cpu_get_ticks: under a lock, never going back, stopped while
// the VM is stopped and carried by a saved VM), so it is monotonic and the
// same on every vCPU. The guest kernel cannot know that: -cpu max has no
// invariant-TSC flag and is not Intel, so with two CPUs it marks the TSC
// "unsynchronized" and runs on the HPET, where every clock_gettime is an
// emulated MMIO read (a quarter of the lookups per second). tsc=reliable
// skips that guess and the clocksource watchdog; the guest clock test
// (tests/guest_clock_e2e_test.cc) checks the result across vCPUs. Under KVM
// the kernel's own choice (kvm-clock) stands. A kernel's --cmdline comes
// later on the line, so `clocksource=hpet` there overrides this.
// no_timer_check, also under TCG only: at boot the kernel checks that the
// 8254 timer reaches the IO-APIC by waiting a few ticks for it; a translated
// CPU on a busy host misses them, and the kernel panicked ("IO-APIC + timer
// doesn't work!") before the agent started. KVM guests skip that check
// themselves.
std::string clock_cmdline(bool kvm);

struct QemuConfig {
  std::string qemu = "qemu-system-x86_64";
  std::string kernel;  // ELF vmlinux (PVH boot) or bzImage
  std::string initrd;
  std::string append;  // kernel command line
  int cpus = 2;
  int mem_mib = 512;
  bool kvm = false;                 // else TCG with -cpu max
  int coordinator_port = 0;         // guestfwd 10.0.2.100:PORT -> 127.0.0.1:PORT; 0: no network
  std::string busybox = "busybox";  // its nc carries each guest connection to the host
  std::string console_log;          // the serial console
  std::string stderr_log;           // QEMU's own messages
  // Snapshots (see qmp.h): QEMU's QMP socket; a unix socket QEMU listens on
  // as the guest's second serial port (ttyS1), so the host can hand a VM
  // restored from a snapshot what differs between clones; and the state
  // file to start from instead of booting. Empty: none.
  std::string qmp_socket;
  std::string control_socket;
  std::string incoming;
  // Guest RAM in this file instead of anonymous memory, so that a saved VM
  // keeps its RAM there and copies map it instead of reading it through
  // the state file. Shared: the guest's writes go to the file (the template,
  // whose RAM becomes the saved VM's); private: the guest starts from the
  // file's content and its writes stay its own (copy-on-write). With a
  // RAM file, `incoming` is not loaded at start (`-incoming defer`): the
  // caller starts the load with load_vm_state() (qmp.h), which first tells
  // QEMU that the RAM is not in the stream.
  std::string ram_file;
  bool ram_shared = false;
};

// `text` quoted for /bin/sh (QEMU runs exec: migration URIs through it).
std::string shell_quote(const std::string& text);

// What identifies the QEMU binary `qemu` finds in PATH (its path, size,
// inode and mtime): a VM saved by one QEMU is restored only by the same.
// Throws std::runtime_error if it is not installed.
std::string qemu_fingerprint(const std::string& qemu);

// The argv QEMU runs with (for logs and tests).
std::vector<std::string> qemu_argv(const QemuConfig& cfg);

class QemuProcess {
 public:
  // Starts QEMU; throws std::runtime_error if it cannot be started.
  explicit QemuProcess(const QemuConfig& cfg);
  // Kills QEMU (SIGKILL) if it still runs, and reaps it.
  ~QemuProcess();
  QemuProcess(const QemuProcess&) = delete;
  QemuProcess& operator=(const QemuProcess&) = delete;

  pid_t pid() const;
  // Waits up to `timeout` for QEMU to exit; true once it has (reaped).
  bool wait_exit(std::chrono::milliseconds timeout);
  // SIGKILL and reap.
  void kill();
  // Exit status once exited: the code, or 128 + signal.
  int exit_status() const { return status_; }

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  int status_ = -1;
};

}  // namespace leapfrog::vm
