#pragma once
// The VM launcher's metrics (`leapfrog vm run --metrics-listen`): VM boots
// by how the VM started, the time from start to the agent's registration,
// and the VMs that ended a job as a kernel crash, a hang or a boot failure.
// The coordinator counts the same failures as launchers report them
// (leapfrog_vm_failures_total there); boot modes and times are seen here only.

#include <prometheus/counter.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <string>

#include "coordinator/vm/launcher.h"

namespace leapfrog::metrics {

class VmMetrics final : public vm::LauncherEvents {
 public:
  // Series of `kernel` exist (at 0) from the start.
  explicit VmMetrics(const std::string& kernel);

  void vm_started(const std::string& kernel, const std::string& mode) override;
  void vm_registered(const std::string& kernel, std::chrono::milliseconds boot) override;
  void vm_failed(const std::string& kernel, const std::string& kind) override;

  // Every metric, in the text exposition format.
  std::string render() const;

 private:
  prometheus::Registry registry_;
  prometheus::Family<prometheus::Counter>& boots_;
  prometheus::Family<prometheus::Histogram>& boot_seconds_;
  prometheus::Family<prometheus::Counter>& failures_;
};

}  // namespace leapfrog::metrics
