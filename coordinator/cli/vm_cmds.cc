#include "coordinator/cli/vm_cmds.h"

#include <signal.h>
#include <spawn.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <grpcpp/grpcpp.h>
#include <spdlog/spdlog.h>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "coordinator/vm/kernel_image.h"
#include "leapfrog/v1/control.grpc.pb.h"

extern char** environ;

namespace leapfrog::cli {
namespace {

namespace stdfs = std::filesystem;

std::atomic<bool> g_stop{false};
void on_stop(int) {
  g_stop.store(true);
}

std::string self_exe() {
  std::error_code ec;
  const auto exe = stdfs::read_symlink("/proc/self/exe", ec);
  return ec ? "leapfrog" : exe.string();
}

std::string self_dir() {
  return stdfs::path(self_exe()).parent_path().string();
}

}  // namespace

VmCommands::VmCommands(CLI::App& app) {
  kernel_ = app.add_subcommand("kernel", "kernel images for VMs");
  kernel_->require_subcommand(1);
  kernel_add_ =
      kernel_->add_subcommand("add", "register a kernel image (bzImage, vmlinuz or ELF vmlinux)");
  kernel_add_->add_option("label", label_, "label campaigns use (--kernel LABEL)")->required();
  kernel_add_->add_option("image", image_, "kernel image file")
      ->required()
      ->check(CLI::ExistingFile);
  kernel_add_->add_option("--modules", modules_,
                          "its modules folder (default /lib/modules/<release> if present)");
  kernel_add_->add_option("--cmdline", cmdline_,
                          "words added to the kernel command line at boot (e.g. leapfrog_planted=0)");
  kernel_add_->add_option(
      "--cache-dir", cache_dir_,
      "kernel and image store (default $LEAPFROG_CACHE or /var/cache/leapfrog)");

  vm_ = app.add_subcommand("vm", "VMs running the agent on a registered kernel");
  vm_->require_subcommand(1);
  vm_run_ = vm_->add_subcommand("run", "boot VMs of a kernel and supervise them until Ctrl-C");
  vm_run_->add_option("--kernel", launch_.kernel_label, "registered kernel label")->required();
  vm_run_->add_option("--count", launch_.count, "VMs to run")->check(CLI::Range(1, 64));
  vm_run_->add_option("--cpus", launch_.cpus, "vCPUs per VM")->check(CLI::Range(1, 64));
  vm_run_->add_option("--mem", launch_.mem_mib, "MiB of memory per VM")
      ->check(CLI::Range(128, 65536));
  vm_run_->add_option("--cache-dir", cache_dir_,
                      "kernel and image store (default $LEAPFROG_CACHE or /var/cache/leapfrog)");
  vm_run_
      ->add_option("--boot-timeout", boot_timeout_s_,
                   "seconds from launch to agent registered (default 90)")
      ->check(CLI::Range(1.0, 3600.0));
  vm_run_
      ->add_option(
          "--hang-timeout", hang_timeout_s_,
          "seconds without heartbeat and console output before a VM counts as hung (default 30)")
      ->check(CLI::Range(1.0, 3600.0));
  vm_run_->add_option("--kvm", launch_.kvm, "auto (a probe boot decides), on, off")
      ->check(CLI::IsMember({"auto", "on", "off"}));
  vm_run_->add_option("--agent", launch_.agent_exe,
                      "static agent binary (default: leapfrog-agent-static beside leapfrog)");
  vm_run_->add_flag(
      "!--no-snapshot", launch_.snapshot,
      "boot every VM in full (default: the first VM of a kernel is saved once booted, and the others "
      "start from the saved VM)");
  vm_run_->add_flag(
      "--selftest", launch_.selftest,
      "let the agents run selftest-crash and selftest-hang jobs (for testing the launcher)");
  vm_run_->add_flag("--die-with-parent", die_with_parent_,
                    "exit when the parent process dies (used by up)");
  for (auto* sub : {kernel_, kernel_add_, vm_, vm_run_}) sub->fallthrough();
}

bool VmCommands::parsed() const {
  return kernel_add_->parsed() || vm_run_->parsed();
}

int VmCommands::run(const Endpoint& ep, const std::string& data_dir, bool json) {
  if (kernel_add_->parsed()) return kernel_add(ep, json);
  if (vm_run_->parsed()) return vm_run(ep, data_dir);
  return 2;
}

int VmCommands::kernel_add(const Endpoint& ep, bool json) {
  const std::string cache = cache_dir_.empty() ? vm::default_cache_dir() : cache_dir_;
  vm::StoredKernel k;
  try {
    k = vm::store_kernel(cache, image_, modules_);
  } catch (const vm::ImageError& e) {
    throw std::runtime_error(e.what());
  }
  v1::AddKernelRequest req;
  auto* kernel = req.mutable_kernel();
  kernel->set_label(label_);
  kernel->set_version(k.version);
  kernel->set_sha256(k.sha256);
  kernel->set_source(stdfs::absolute(image_).string());
  kernel->set_cmdline(cmdline_);
  auto stub = v1::ControlService::NewStub(
      grpc::CreateChannel(ep.address, grpc::InsecureChannelCredentials()));
  grpc::ClientContext ctx;
  ctx.AddMetadata("authorization", "Bearer " + ep.token);
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  v1::Kernel resp;
  const grpc::Status s = stub->AddKernel(&ctx, req, &resp);
  if (!s.ok()) throw std::runtime_error(s.error_message());
  if (json) {
    std::cout << nlohmann::json{{"label", resp.label()},   {"version", resp.version()},
                                {"sha256", resp.sha256()}, {"source", resp.source()},
                                {"release", k.release},    {"modules", k.modules},
                                {"vmlinux", k.vmlinux},    {"store", k.dir}}
                     .dump(2)
              << std::endl;
  } else {
    std::printf("kernel %s: %s\n  sha256  %s\n  boots   %s\n  modules %s\n", resp.label().c_str(),
                k.release.c_str(), k.sha256.c_str(),
                k.vmlinux.empty() ? "bzImage (no ELF vmlinux extracted)" : "ELF vmlinux (PVH)",
                k.modules.empty() ? "(none)" : k.modules.c_str());
  }
  return 0;
}

int VmCommands::vm_run(const Endpoint& ep, const std::string& data_dir) {
  if (die_with_parent_) {
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() == 1) return 2;
  }
  launch_.coordinator = ep.address;
  launch_.token = ep.token;
  launch_.cache_dir = cache_dir_.empty() ? vm::default_cache_dir() : cache_dir_;
  launch_.run_dir = data_dir + "/vm-" + launch_.kernel_label + "-" + std::to_string(getpid());
  if (launch_.agent_exe.empty()) launch_.agent_exe = self_dir() + "/leapfrog-agent-static";
  launch_.image_script = self_dir() + "/vm/build-initramfs.sh";
  launch_.boot_timeout = std::chrono::milliseconds(static_cast<int64_t>(boot_timeout_s_ * 1000));
  launch_.hang_timeout = std::chrono::milliseconds(static_cast<int64_t>(hang_timeout_s_ * 1000));
  struct sigaction sa {};
  sa.sa_handler = on_stop;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_UNBLOCK, &set, nullptr);
  spdlog::set_level(spdlog::level::info);
  std::printf("leapfrog vm run: %d VM(s) of kernel %s, logs in %s\n", launch_.count,
              launch_.kernel_label.c_str(), launch_.run_dir.c_str());
  std::fflush(stdout);
  return vm::run_launcher(launch_, g_stop);
}

pid_t spawn_vm_launcher(const std::string& address, const std::string& token_file,
                        const std::string& data_dir, const std::string& kernel, int count) {
  const std::string exe = self_exe();
  std::vector<std::string> argv = {exe,
                                   "--coordinator",
                                   address,
                                   "--token-file",
                                   token_file,
                                   "--data-dir",
                                   data_dir,
                                   "vm",
                                   "run",
                                   "--kernel",
                                   kernel,
                                   "--count",
                                   std::to_string(count),
                                   "--die-with-parent"};
  std::vector<char*> args;
  for (auto& a : argv) args.push_back(a.data());
  args.push_back(nullptr);
  sigset_t none;
  sigemptyset(&none);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK);
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, exe.c_str(), nullptr, &attr, args.data(), environ);
  posix_spawnattr_destroy(&attr);
  if (rc != 0)
    throw std::runtime_error("cannot start the VM launcher: " + std::string(std::strerror(rc)));
  return pid;
}

}  // namespace leapfrog::cli
