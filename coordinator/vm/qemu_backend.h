#pragma once
// The QEMU backend of backend.h: each Instance is a QemuProcess, with QMP for
// saving and loading VMs (qmp.h) and a unix socket as the guest's ttyS1.

#include <chrono>
#include <string>

#include "coordinator/vm/backend.h"

namespace leapfrog::vm {

struct QemuPoolOptions {
  int cpus = 2;
  int mem_mib = kDefaultVmMemMib;
  bool kvm = false;          // else TCG
  int coordinator_port = 0;  // the guests reach 127.0.0.1:PORT (guestfwd)
  std::string socket_dir;    // QMP and control sockets: a short path
};

class QemuPool : public Pool {
 public:
  explicit QemuPool(QemuPoolOptions opts) : opts_(std::move(opts)) {}
  std::unique_ptr<Instance> create(const InstanceSpec& spec) override;
  std::string command_line(const std::string& append) const override;
  std::string saved_vm_traits(std::string& why) const override;

 private:
  std::string socket_path(int index, const char* kind) const;
  QemuPoolOptions opts_;
};

// Whether KVM can run a stock kernel here: /dev/kvm may answer and still be
// unable to (PITFALLS.md), so a probe boot of `kernel` must reach /init in
// time. `mode` is "auto", "on" or "off"; with "on", a failed probe throws
// std::runtime_error. The probe's console goes to `console`.
bool probe_kvm(const std::string& mode, const std::string& kernel, const std::string& initrd,
               const std::string& console);

}  // namespace leapfrog::vm
