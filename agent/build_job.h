#pragma once
// Kernel build jobs on a builder agent (`leapfrog-agent connect --builder`):
// build and store the kernel as `leapfrog kernel build` does
// (common/kernel/build_and_store.h), and describe the result as an Outcome
// for the coordinator. Not part of the static VM agent.

#include <functional>
#include <string>

#include "leapfrog/v1/common.pb.h"

namespace leapfrog {

// Builds `build` with the cache (and kernel store) under `cache_dir`.
// Never throws for a failed build: the outcome says what failed (verdict
// BUILD_FAILURE, Outcome.build.failed_stage and log_tail).
v1::Outcome run_build_job(const v1::KernelBuild& build, const std::string& cache_dir,
                          const std::function<void(const std::string&)>& log);

}  // namespace leapfrog
