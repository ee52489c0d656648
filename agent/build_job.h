#pragma once
// Kernel build jobs on a builder agent (`leapfrog-agent connect --builder`):
// build and store the kernel as `leapfrog kernel build` does
// (common/kernel/build_and_store.h), and describe the result as an Outcome
// for the coordinator. Not part of the static VM agent.

#include <functional>
#include <string>
#include <vector>

#include "leapfrog/v1/common.pb.h"

namespace leapfrog {

// Where and how a builder agent builds.
struct BuilderConfig {
  // Build cache and kernel store.
  std::string cache_dir;
  // Folders KernelBuild.source is named relative to (--source-root).
  std::vector<std::string> source_roots;
  // What the build sandbox hides besides its defaults: the agent's spool,
  // token and data folder.
  std::vector<std::string> hide;
};

// Builds `build`: its source resolved under the source roots, its patches
// and config fragments from the content it carries, the tools run in the
// build sandbox (common/kernel/build_sandbox.h) as the build user. A build
// naming paths on this machine (the retired KernelBuild fields 3 and 4) is
// refused. Never throws for a failed build: the outcome says what failed
// (verdict BUILD_FAILURE, Outcome.build.failed_stage and log_tail).
v1::Outcome run_build_job(const v1::KernelBuild& build, const BuilderConfig& config,
                          const std::function<void(const std::string&)>& log);

}  // namespace leapfrog
