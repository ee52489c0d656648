#pragma once
// The slot state machine of the launcher (launcher.h): each slot runs one VM
// at a time, generation after generation. A VM starts from the saved VM of
// the current kernel when there is one (restore, then handoff of its
// identity on the control port); else as the template that is saved for the
// others (which wait for it); else, with saved VMs off, by a full boot. The
// launcher supervises each VM once it runs (kBoot): registration, crashes,
// hangs.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "coordinator/vm/backend.h"
#include "coordinator/vm/host_load.h"
#include "coordinator/vm/saved_vms.h"

namespace leapfrog::vm {

class LauncherEvents;

using Steady = std::chrono::steady_clock;

struct Slot {
  // How this generation started. kTemplate: booting to be saved; kRestore:
  // loading the saved state; kHandoff: running, taking its identity on
  // ttyS1; kWaiting: no VM yet, waiting for another slot's template;
  // kBoot: booted (or handed off), waiting for the agent and supervised.
  enum class Phase { kBoot, kTemplate, kRestore, kHandoff, kWaiting };

  int index = 0;
  std::string name;  // the VM agent's name, claimed with the coordinator
  int generation = 0;
  Phase phase = Phase::kBoot;
  bool restored = false;     // this generation started from a saved VM
  std::string snapshot_key;  // kTemplate: the key it is saved under
  int sends = 0;             // identity lines sent this generation
  Steady::time_point phase_started, last_send;
  Steady::time_point last_host_view;  // last lf-host line sent (HostLoadMeter)
  std::unique_ptr<Instance> vm;
  std::string console;
  size_t console_size = 0;
  Steady::time_point started, last_output;
  std::chrono::system_clock::time_point started_wall;
  bool registered = false;
  size_t registered_offset = 0;
  int64_t last_seen_us = 0;
  Steady::time_point last_seen_local;  // when last_seen last advanced
  int64_t job = 0;
  // Where the console stood when the agent's last job ended: an OOM kill
  // after it belongs to what the VM does now (the agent reported those of
  // its jobs' runs itself).
  size_t job_console_offset = 0;
  std::string kernel_sha256;  // of the image this generation booted
  std::optional<Steady::time_point> report_seen;
  bool stopped = false;
};

// The kernel the slots boot, as the launcher prepared it.
struct BootImage {
  std::string kernel;   // ELF vmlinux or bzImage
  std::string sha256;   // of the kernel
  std::string initrd;   // the image with the token: full boots
  std::string image;    // the image without it: templates and their copies
  std::string cmdline;  // the registered kernel's extra boot words
};

struct SlotOptions {
  std::string kernel_label;
  std::string token;
  int port = 0;  // the coordinator's, on 127.0.0.1
  int cpus = 2;
  bool selftest = false;
  bool prepare_only = false;  // only make the saved VM (launcher.h)
  std::string run_dir;        // console logs
  LauncherEvents* events = nullptr;
};

class VmSlots {
 public:
  VmSlots(SlotOptions opts, Pool& pool, SavedVms& saved)
      : opts_(std::move(opts)), pool_(pool), saved_(saved) {}

  // Turns saved VMs on (false with `why`: every VM boots in full).
  bool enable_saved_vms(std::string& why);
  // The kernel the next generations boot.
  void use_image(const BootImage& image);
  const BootImage& image() const { return image_; }
  // Starts the slot's next VM (or makes it wait for a template, or stops it).
  void start(Slot& s);
  // The snapshot steps of a slot that is not yet booted (kTemplate,
  // kRestore, kHandoff, kWaiting). True when the launcher should go on with
  // its checks (boot deadline, VM exit) this round.
  bool advance(Slot& s, Steady::time_point now, bool exited);
  // A VM that did not come back from the saved state: drop the state and
  // boot in full from now on.
  void restore_failed(Slot& s, const std::string& why);
  // A slot that did not boot stops; true when it was the template, so that
  // the slots waiting for it stop too.
  bool boot_failed(Slot& s);
  // Releases the slot's VM.
  void release(Slot& s);
  // Once a second, tells a running VM how busy the host is outside it.
  void send_host_view(Slot& s, Steady::time_point now);
  // True while a slot is being saved, restored or handed its identity.
  static bool snapshotting(const Slot& s);

  // prepare_only: the saved VM is there; else why not.
  bool saved() const { return saved_vm_ready_; }
  const std::string& failure() const { return failure_; }

 private:
  void launch(Slot& s, Slot::Phase phase);
  void save_template(Slot& s);
  void to_handoff(Slot& s);
  void send_identity(Slot& s);
  void snapshots_off(const std::string& why);
  void update_snapshot_key();
  std::string template_append() const;
  std::string boot_append(const Slot& s) const;

  SlotOptions opts_;
  Pool& pool_;
  SavedVms& saved_;
  HostLoadMeter host_load_;
  BootImage image_;
  bool snapshots_ = false;    // VMs start from saved VMs (off after a failure)
  std::string traits_;        // Pool::saved_vm_traits
  std::string snapshot_key_;  // of the current kernel; "" with snapshots off
  std::string making_key_;    // a template of this key is booting
  bool saved_vm_ready_ = false;
  std::string failure_;
};

// The file at `path` from byte `offset` on ("" if unreadable).
std::string read_from(const std::string& path, size_t offset);

}  // namespace leapfrog::vm
