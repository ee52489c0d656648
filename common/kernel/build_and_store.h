#pragma once
// A kernel build as the CLI (`leapfrog kernel build`) and builder agents
// (`leapfrog-agent connect --builder`) run it: build with the kbuild library
// (cached by inputs, so the same inputs never build twice), then put the ELF
// vmlinux into the local kernel store, which the VM launcher boots.

#include "common/kernel/kernel_build.h"
#include "leapfrog/v1/common.pb.h"

namespace leapfrog::kbuild {

// Builds `spec` and stores the result under spec.cache_dir. Never throws for
// a failed build or store: the result says what failed (ok false,
// failed_stage "source", "patch", "config", "build" or "store", error,
// log_tail, log_path, and the series as given: name, sha256 and subject of
// each patch still readable).
v1::KernelBuildResult build_and_store(const BuildSpec& spec, const Progress& progress = {});

}  // namespace leapfrog::kbuild
