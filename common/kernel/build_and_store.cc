#include "common/kernel/build_and_store.h"

#include "common/kernel/kernel_image.h"
#include "common/proto_time.h"

namespace leapfrog::kbuild {

v1::KernelBuildResult build_and_store(const BuildSpec& spec, const Progress& progress) {
  v1::KernelBuildResult out;
  v1::KernelBuildResult* r = &out;
  try {
    const BuildResult b = build_kernel(spec, progress);
    r->set_inputs_hash(b.inputs_hash);
    r->set_release(b.release);
    r->set_cached(b.cached);
    if (b.seconds > 0) *r->mutable_build_time() = duration_of_seconds(b.seconds);
    r->set_log_path(b.build_log);
    for (const auto& p : b.patches) {
      auto* bp = r->add_patches();
      bp->set_name(p.name);
      bp->set_sha256(p.sha256);
      bp->set_subject(p.subject);
    }
    try {
      // The ELF vmlinux, booted directly (PVH): it has everything built in.
      const vm::StoredKernel stored = vm::store_kernel(spec.cache_dir, b.vmlinux, "");
      r->set_vmlinux_sha256(stored.sha256);
      r->set_version(stored.version);
      r->set_ok(true);
    } catch (const vm::ImageError& e) {
      r->set_failed_stage("store");
      r->set_error(e.what());
    }
  } catch (const BuildError& e) {
    r->set_failed_stage(e.stage());
    r->set_error(e.what());
    r->set_log_tail(e.log_tail());
    r->set_log_path(e.log_path());
    // The series is recorded as fully as for a good build, so the failure can be read.
    for (const auto& p : spec.patches) {
      auto* kp = r->add_patches();
      kp->set_name(p.name);
      kp->set_sha256(sha256_hex(p.content));
      kp->set_subject(patch_subject(p.content));
    }
  }
  return out;
}

}  // namespace leapfrog::kbuild
