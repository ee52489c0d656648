#include "agent/build_job.h"

#include <google/protobuf/util/time_util.h>

#include "common/bounds.h"
#include "common/kernel/build_and_store.h"
#include "common/kernel/build_file.h"
#include "common/kernel/kernel_build.h"

namespace leapfrog {

namespace {

// The spec of `build`, or a BuildError saying why it cannot be built here.
// The coordinator checks the same, but a builder trusts nobody to have.
kbuild::BuildSpec spec_of(const v1::KernelBuild& build, const BuilderConfig& config) {
  if (!build.patches().empty() || !build.config_fragments().empty())
    throw kbuild::BuildError("source",
                             "the build names files on the builder (patches or config_fragments); "
                             "a builder reads no path it is sent: send patch_files and config_files",
                             "");
  kbuild::BuildSpec spec;
  spec.label = build.label();
  spec.source = kbuild::resolve_source(build.source(), config.source_roots);
  size_t bytes = 0;
  auto take = [&](const v1::BuildFile& f, const char* what) {
    if (auto why = kbuild::file_name_problem(f.name()); !why.empty())
      throw kbuild::BuildError("source", std::string(what) + ": " + why, "");
    bytes += f.content().size();
    if (f.content().size() > kMaxBuildFileBytes || bytes > kMaxBuildBytes)
      throw kbuild::BuildError("source", std::string(what) + " \"" + f.name() + "\" is too large", "");
    if (!f.sha256().empty() && f.sha256() != kbuild::sha256_hex(f.content()))
      throw kbuild::BuildError("source", std::string(what) + " \"" + f.name() + "\" does not match its sha256", "");
    return kbuild::InputFile{f.name(), f.content()};
  };
  for (const auto& f : build.patch_files()) spec.patches.push_back(take(f, "patch"));
  for (const auto& f : build.config_files()) spec.config_fragments.push_back(take(f, "config fragment"));
  spec.cache_dir = config.cache_dir;
  spec.sandbox.enabled = true;
  spec.sandbox.hide = config.hide;
  return spec;
}

}  // namespace

v1::Outcome run_build_job(const v1::KernelBuild& build, const BuilderConfig& config,
                          const std::function<void(const std::string&)>& log) {
  v1::Outcome o;
  try {
    *o.mutable_build() = kbuild::build_and_store(spec_of(build, config), log);
  } catch (const kbuild::BuildError& e) {
    o.mutable_build()->set_failed_stage(e.stage());
    o.mutable_build()->set_error(e.what());
  }
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
