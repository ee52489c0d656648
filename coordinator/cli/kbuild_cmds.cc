#include "coordinator/cli/kbuild_cmds.h"

#include <unistd.h>
#include "coordinator/channel.h"

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "common/kernel/build_and_store.h"
#include "common/kernel/built_kernel.h"
#include "common/kernel/kernel_build.h"
#include "common/kernel/kernel_image.h"
#include "common/ktap/words.h"
#include "common/proto_time.h"
#include "leapfrog/v1/control.grpc.pb.h"

namespace leapfrog::cli {

namespace {

v1::Kernel register_kernel(const Endpoint& ep, const v1::Kernel& k) {
  v1::AddKernelRequest req;
  *req.mutable_kernel() = k;
  req.set_replace(true);  // a rebuild of a label replaces it
  auto stub = v1::ControlService::NewStub(coord::coordinator_channel(ep.address));
  grpc::ClientContext ctx;
  ctx.AddMetadata("authorization", "Bearer " + ep.token);
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  v1::Kernel resp;
  const grpc::Status s = stub->AddKernel(&ctx, req, &resp);
  if (!s.ok()) throw std::runtime_error("cannot register kernel \"" + k.label() + "\": " + s.error_message());
  return resp;
}

nlohmann::json to_json(const v1::Kernel& k) {
  nlohmann::json patches = nlohmann::json::array();
  for (const auto& p : k.patches()) patches.push_back({{"name", p.name()}, {"sha256", p.sha256()}, {"subject", p.subject()}});
  return {{"label", k.label()},
          {"status", ktap::kernel_status_word(k.status())},
          {"release", k.release()},
          {"version", k.version()},
          {"sha256", k.sha256()},
          {"source", k.source()},
          {"cmdline", k.cmdline()},
          {"inputs_hash", k.inputs_hash()},
          {"patches", patches},
          {"build_seconds", seconds_of(k.build_time())},
          {"build_log", k.build_log_path()},
          {"build_log_tail", k.build_log_tail()}};
}

}  // namespace

KernelBuildCommands::KernelBuildCommands(CLI::App& app) {
  CLI::App* kernel = app.get_subcommand("kernel");
  build_ = kernel->add_subcommand("build", "build a kernel from a source tree and patches, then register it");
  build_->add_option("label", label_, "label campaigns use (--kernel LABEL); a rebuild replaces it")->required();
  build_->add_option("--source", source_, "kernel source folder or tarball (e.g. /usr/src/linux-source-6.1.tar.xz)")
      ->required()
      ->check(CLI::ExistingPath);
  build_->add_option("--patch", patches_, "patch applied with patch -p1, in the order given (repeatable)")
      ->check(CLI::ExistingFile);
  build_->add_option("--config", fragments_, "config fragment applied on top of Leapfrog's (repeatable)")
      ->check(CLI::ExistingFile);
  build_->add_option("--cmdline", cmdline_, "words added to the kernel command line at boot, e.g. leapfrog_planted=0");
  build_->add_option("--jobs", jobs_, "make -j (default: online CPUs)");
  build_->add_option("--cache-dir", cache_dir_, "build cache and kernel store (default $LEAPFROG_CACHE or /var/cache/leapfrog)");
  build_->add_flag("--retry-failed", retry_, "build again although these inputs failed before");
  build_->add_flag("--widen", widen_,
                   "append Leapfrog's delay-point series of the tree's line (deploy/kernel/widen/<line>/): race windows widened at "
                   "run time through /sys/kernel/leapfrog_widen, all off at boot");
  build_->fallthrough();
}

bool KernelBuildCommands::parsed() const { return build_->parsed(); }

int KernelBuildCommands::run(const Endpoint& ep, bool json) {
  kbuild::BuildSpec spec;
  spec.label = label_;
  spec.source = std::filesystem::absolute(source_).string();
  try {
    for (const auto& p : patches_) spec.patches.push_back(kbuild::read_input_file(p, "patch"));
    // The series of the tree's own line (deploy/kernel/widen/<line>/).
    if (widen_)
      for (const auto& p : kbuild::widen_series(kbuild::source_version(spec.source)))
        spec.patches.push_back(kbuild::read_input_file(p, "patch"));
    for (const auto& f : fragments_) spec.config_fragments.push_back(kbuild::read_input_file(f, "config"));
  } catch (const kbuild::BuildError& e) {
    throw std::runtime_error(e.what());
  }
  spec.cache_dir = cache_dir_.empty() ? vm::default_cache_dir() : cache_dir_;
  spec.jobs = jobs_;
  spec.retry_failed = retry_;
  // As root, the tools run as the build user in the build sandbox, as on a
  // builder agent: the source's Makefile is not trusted with root. As
  // another user they run as that user.
  spec.sandbox.enabled = ::geteuid() == 0;

  // The build as a build job would carry it: the kernel record is then the
  // one a builder agent's result registers.
  v1::KernelBuild build;
  build.set_label(label_);
  build.set_source(spec.source);
  for (size_t i = 0; i < patches_.size(); ++i) {
    auto* f = build.add_patch_files();
    f->set_name(spec.patches[i].name);
    f->set_sha256(kbuild::sha256_hex(spec.patches[i].content));
  }
  build.set_cmdline(cmdline_);
  auto progress = [&](const std::string& line) {
    if (!json) std::fprintf(stderr, "kernel build %s: %s\n", label_.c_str(), line.c_str());
  };
  const v1::KernelBuildResult r = kbuild::build_and_store(spec, progress);
  // An image the store refuses is this host's problem, not the kernel's: no record.
  if (r.failed_stage() == "store") throw std::runtime_error(r.error());
  v1::Kernel k = kbuild::built_kernel(build, r);
  if (widen_) k.set_source(k.source() + " + widen");
  if (r.ok()) {
    const auto added = register_kernel(ep, k);
    if (json) {
      std::cout << to_json(added).dump(2) << std::endl;
    } else {
      std::printf("kernel %s: %s%s\n  sha256  %s\n  patches %d\n  log     %s\n",
                  added.label().c_str(), r.release().c_str(),
                  r.cached() ? " (from the build cache)" : "", added.sha256().c_str(),
                  added.patches_size(), r.log_path().c_str());
    }
    return 0;
  }
  try {
    const auto added = register_kernel(ep, k);
    if (json) std::cout << to_json(added).dump(2) << std::endl;
  } catch (const std::exception& reg) {
    std::fprintf(stderr, "warning: %s\n", reg.what());
  }
  if (!r.log_tail().empty()) std::fprintf(stderr, "%s", r.log_tail().c_str());
  std::fprintf(stderr, "error: kernel \"%s\": %s (%s stage%s%s)\n", label_.c_str(),
               r.error().c_str(), r.failed_stage().c_str(),
               r.log_path().empty() ? "" : "; log: ", r.log_path().c_str());
  return 2;
}

}  // namespace leapfrog::cli
