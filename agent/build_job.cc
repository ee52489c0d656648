#include "agent/build_job.h"

#include <google/protobuf/util/time_util.h>

#include "common/kernel/build_and_store.h"

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
  *o.mutable_build() = kbuild::build_and_store(spec, log);
  const v1::KernelBuildResult& r = o.build();
  if (r.ok()) {
    o.set_verdict(v1::VERDICT_PASS);
    if (log) log("stored " + r.vmlinux_sha256() + (r.cached() ? " (from the build cache)" : ""));
  } else {
    o.set_verdict(v1::VERDICT_BUILD_FAILURE);
    o.set_error(r.failed_stage() + " failed: " + r.error());
  }
  *o.mutable_finished_at() = google::protobuf::util::TimeUtil::GetCurrentTime();
  return o;
}

}  // namespace leapfrog
