#pragma once
// The kernel a build's result registers. One function for every way a kernel
// is built: `leapfrog kernel build` on the CLI's host, and build jobs, which
// a builder agent runs (build_and_store.h) and the store registers when the
// result comes back. Proto-only, so the store needs no kbuild.

#include "leapfrog/v1/common.pb.h"
#include "leapfrog/v1/control.pb.h"

namespace leapfrog::kbuild {

// The Kernel `build` registers given its `result`: status READY with the
// stored image's sha256, release and version, or "build-failure" with the
// stage that failed ("patch failed: ..." as its version) and the log tail.
// The source says what was built ("build of SOURCE + PATCH..."); the patches
// are the result's, or the build's names when the result has none.
v1::Kernel built_kernel(const v1::KernelBuild& build, const v1::KernelBuildResult& result);

}  // namespace leapfrog::kbuild
