#include "common/kernel/build_and_store.h"

#include <filesystem>
#include <fstream>

#include "common/kernel/kernel_image.h"
#include "common/proto_time.h"

namespace leapfrog::kbuild {

namespace {

// The "Subject:" header of a patch file before its first diff; "" if none.
std::string patch_subject(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("Subject: ", 0) == 0) return line.substr(9);
    if (line.rfind("--- ", 0) == 0) break;
  }
  return "";
}

}  // namespace

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
    for (const auto& p : spec.patches) {
      auto* kp = r->add_patches();
      kp->set_name(std::filesystem::path(p).filename().string());
      // The series is recorded as fully as for a good build, so the failure can be read.
      try {
        kp->set_sha256(sha256_of_file(p));
      } catch (const std::exception&) {  // unreadable now: the name still says which
      }
      kp->set_subject(patch_subject(p));
    }
  }
  return out;
}

}  // namespace leapfrog::kbuild
