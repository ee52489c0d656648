#pragma once
// What the launcher needs of a VM, whatever runs it (as syzkaller's vmimpl):
// a Pool starts Instances, an Instance is one VM, watched through its serial
// console and talked to on its second serial port (the control port). QEMU is
// the one backend (qemu_backend.h); the launcher (launcher.h) supervises.

#include <sys/types.h>

#include <memory>
#include <stdexcept>
#include <string>

namespace leapfrog::vm {

// The memory of a VM unless `leapfrog vm run --mem` says otherwise, in MiB.
// To be chosen from measurement (issue 47): the agent's peak RSS for the
// heaviest scenario (Outcome.run.peak_rss_bytes), plus what the file systems
// under test take of the guest's RAM (loop images, page cache). Below it a
// run may be killed by the guest's OOM killer, which its outcome then says
// (Outcome.killed).
inline constexpr int kDefaultVmMemMib = 512;

// A VM could not be started, saved or loaded; the message says why.
class VmError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A VM that did not come up. Carries the end of what it printed, for the
// BOOT_FAILURE outcome.
class BootError : public VmError {
 public:
  BootError(const std::string& what, std::string console_tail)
      : VmError(what), console_tail_(std::move(console_tail)) {}
  const std::string& console_tail() const { return console_tail_; }

 private:
  std::string console_tail_;
};

// How an instance starts.
enum class StartMode {
  kBoot,      // boots the kernel
  kTemplate,  // boots the kernel to be saved (Instance::save), its RAM in ram_file
  kRestore,   // loads a saved VM: its devices from state_file, its RAM from ram_file
};

struct InstanceSpec {
  int index = 0;  // the launcher's slot: names the instance's sockets
  StartMode mode = StartMode::kBoot;
  std::string kernel;  // the image to boot
  std::string initrd;
  std::string append;  // the kernel command line the launcher adds
  std::string
      console;  // the serial console's file; the backend's own messages go to console + ".qemu"
  std::string ram_file;    // kTemplate (written), kRestore (read, copy-on-write)
  std::string state_file;  // kRestore
};

class Instance {
 public:
  virtual ~Instance() = default;
  // The host process that runs the VM (its CPU time is not the host's other load).
  virtual pid_t pid() const = 0;
  // True once the VM has stopped; never blocks.
  virtual bool exited() = 0;
  // Its exit status once exited: the code, or 128 + signal.
  virtual int exit_status() const = 0;
  // Stops the VM now.
  virtual void kill() = 0;
  // Writes `line` to the guest's control port without blocking; false when
  // the port is not connected (a line the guest cannot take now is dropped).
  virtual bool send_control(const std::string& line) = 0;
  // kRestore: true once the saved VM is loaded and runs. Throws VmError if it cannot load.
  virtual bool loaded() = 0;
  // kTemplate: stops the VM and saves its devices to `state_file` (its RAM
  // stays in ram_file, which must not be written again). Throws VmError.
  virtual void save(const std::string& state_file) = 0;
  // Runs a VM that save() stopped (after a failed save). Throws VmError.
  virtual void resume() = 0;
};

class Pool {
 public:
  virtual ~Pool() = default;
  // Starts a VM. Throws VmError if it cannot be started.
  virtual std::unique_ptr<Instance> create(const InstanceSpec& spec) = 0;
  // The whole kernel command line of a VM started with `append`.
  virtual std::string command_line(const std::string& append) const = 0;
  // What a VM saved by this pool depends on besides its kernel and image
  // (machine, accelerator, emulator build), for the saved VM's key; "" with
  // `why` set when this pool cannot save VMs.
  virtual std::string saved_vm_traits(std::string& why) const = 0;
};

}  // namespace leapfrog::vm
