#include "agent/build_job.h"

#include <google/protobuf/util/time_util.h>

#include <filesystem>

#include "common/kernel/kernel_build.h"
#include "common/kernel/kernel_image.h"

namespace leapfrog {

v1::Outcome run_build_job(const v1::KernelBuild& build, const std::string& cache_dir,
                          const std::function<void(const std::string&)>& log) {
  kbuild::BuildSpec spec;
  spec.label = build.label();
  spec.source = build.source();
  spec.patches.assign(build.patches().begin(), build.patches().end());
  spec.config_fragments.assign(build.config_fragments().begin(), build.config_fragments().end());
  spec.cache_dir = cache_dir;
  v1::Outcome o;
  v1::KernelBuildResult* r = o.mutable_build();
  try {
    const kbuild::BuildResult b = kbuild::build_kernel(spec, log);
    r->set_inputs_hash(b.inputs_hash);
    r->set_release(b.release);
    r->set_cached(b.cached);
    r->set_build_seconds(b.seconds);
    r->set_log_path(b.build_log);
    for (const auto& p : b.patches) {
      auto* bp = r->add_patches();
      bp->set_name(p.name);
      bp->set_sha256(p.sha256);
      bp->set_subject(p.subject);
    }
    try {
      // The ELF vmlinux, booted directly (PVH), as `leapfrog kernel build` stores it.
      const vm::StoredKernel stored = vm::store_kernel(cache_dir, b.vmlinux, "");
      r->set_vmlinux_sha256(stored.sha256);
      r->set_version(stored.version);
      r->set_ok(true);
      o.set_verdict(v1::VERDICT_PASS);
      if (log) log("stored " + stored.sha256 + (b.cached ? " (from the build cache)" : ""));
    } catch (const vm::ImageError& e) {
      r->set_failed_stage("store");
      r->set_error(e.what());
      o.set_verdict(v1::VERDICT_BUILD_FAILURE);
      o.set_error(std::string("store failed: ") + e.what());
    }
  } catch (const kbuild::BuildError& e) {
    r->set_failed_stage(e.stage());
    r->set_error(e.what());
    r->set_log_tail(e.log_tail());
    r->set_log_path(e.log_path());
    for (const auto& p : build.patches()) r->add_patches()->set_name(std::filesystem::path(p).filename().string());
    o.set_verdict(v1::VERDICT_BUILD_FAILURE);
    o.set_error(e.stage() + " failed: " + e.what());
  }
  *o.mutable_finished_at() = google::protobuf::util::TimeUtil::GetCurrentTime();
  return o;
}

}  // namespace leapfrog
