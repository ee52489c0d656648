#pragma once
// What the coordinator accepts in the path-carrying fields of the wire. A
// path that comes from a client is never opened by the coordinator: it is
// stored as text, and read, if at all, only through a path the coordinator
// resolves inside its own cache (see http/kernels_api.cc). These checks
// refuse at the door what could never be such a path, so a bad value is an
// INVALID_ARGUMENT with its reason rather than a record that points at
// /etc/shadow. Each returns "" when the value is acceptable, else why not.

#include <string>

#include "leapfrog/v1/common.pb.h"
#include "leapfrog/v1/control.pb.h"

namespace leapfrog::coord {

// A build log as builders lay it out: empty, or an absolute, normal path
// ending in /kbuild/out/<inputs-hash>/build.log (kbuild/kernel_build.h).
std::string build_log_path_problem(const std::string& path);
// Empty, or 64 lowercase hex digits: it names a folder of the kernel store.
std::string sha256_problem(const std::string& field, const std::string& value);
// The path and hash fields of a kernel given to AddKernel.
std::string kernel_problem(const v1::Kernel& k);
// The same of a builder's KernelBuildResult (ReportOutcome of a build job).
std::string build_result_problem(const v1::KernelBuildResult& r);

// At most `max` bytes of `s` for an error message, with "..." if cut.
std::string quote_prefix(const std::string& s, size_t max = 120);

}  // namespace leapfrog::coord
