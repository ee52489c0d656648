#include "coordinator/metrics/vm_metrics.h"

#include "coordinator/metrics/exposition.h"

namespace leapfrog::metrics {

namespace {

std::vector<double> boot_buckets() {
  return {0.5, 1, 2, 3, 5, 10, 20, 30, 60, 90, 120};
}

}  // namespace

VmMetrics::VmMetrics(const std::string& kernel)
    : boots_(prometheus::BuildCounter()
                 .Name("leapfrog_vm_boots_total")
                 .Help("VMs started, by mode: boot (a full boot), template (booted to be "
                       "saved), restore (from a saved VM), handoff (the template going on)")
                 .Register(registry_)),
      boot_seconds_(prometheus::BuildHistogram()
                        .Name("leapfrog_vm_boot_seconds")
                        .Help("From a VM's start to its agent's registration")
                        .Register(registry_)),
      failures_(prometheus::BuildCounter()
                    .Name("leapfrog_vm_failures_total")
                    .Help("VMs that ended their job, by kind (kernel-crash, hang, boot-failure, out-of-memory)")
                    .Register(registry_)) {
  for (const char* mode : {"boot", "template", "restore", "handoff"})
    boots_.Add({{"kernel", kernel}, {"mode", mode}});
  boot_seconds_.Add({{"kernel", kernel}}, boot_buckets());
  for (const char* kind : {"kernel-crash", "hang", "boot-failure", "out-of-memory"})
    failures_.Add({{"kernel", kernel}, {"kind", kind}});
}

void VmMetrics::vm_started(const std::string& kernel, const std::string& mode) {
  boots_.Add({{"kernel", kernel}, {"mode", mode}}).Increment();
}

void VmMetrics::vm_registered(const std::string& kernel, std::chrono::milliseconds boot) {
  boot_seconds_.Add({{"kernel", kernel}}, boot_buckets())
      .Observe(std::chrono::duration<double>(boot).count());
}

void VmMetrics::vm_failed(const std::string& kernel, const std::string& kind) {
  failures_.Add({{"kernel", kernel}, {"kind", kind}}).Increment();
}

std::string VmMetrics::render() const {
  return serialize(registry_.Collect());
}

}  // namespace leapfrog::metrics
