#include "common/kernel/built_kernel.h"

#include "common/proto_time.h"

namespace leapfrog::kbuild {

v1::Kernel built_kernel(const v1::KernelBuild& b, const v1::KernelBuildResult& r) {
  v1::Kernel k;
  k.set_label(b.label());
  k.set_cmdline(b.cmdline());
  std::string source = "build of " + b.source();
  for (const auto& p : b.patch_files()) source += " + " + p.name();
  k.set_source(source);
  for (const auto& p : r.patches()) {
    auto* kp = k.add_patches();
    kp->set_name(p.name());
    kp->set_sha256(p.sha256());
    kp->set_subject(p.subject());
  }
  if (r.patches().empty()) {
    for (const auto& p : b.patch_files()) {
      auto* kp = k.add_patches();
      kp->set_name(p.name());
      kp->set_sha256(p.sha256());
    }
  }
  k.set_inputs_hash(r.inputs_hash());
  k.set_build_log_path(r.log_path());
  k.set_build_log_tail(r.log_tail());
  if (r.ok()) {
    k.set_status(v1::KERNEL_STATUS_READY);
    k.set_release(r.release());
    k.set_sha256(r.vmlinux_sha256());
    k.set_version(r.version());
    if (r.has_build_time()) *k.mutable_build_time() = r.build_time();
  } else {
    k.set_status(v1::KERNEL_STATUS_BUILD_FAILURE);
    k.set_version(r.failed_stage() + " failed: " + r.error());
  }
  return k;
}

}  // namespace leapfrog::kbuild
