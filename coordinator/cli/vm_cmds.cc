#include "coordinator/cli/vm_cmds.h"
#include "coordinator/channel.h"

#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <grpcpp/grpcpp.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "common/kernel/kernel_image.h"
#include "common/process.h"
#include "coordinator/metrics/metrics_endpoint.h"
#include "coordinator/metrics/vm_metrics.h"
#include "leapfrog/v1/control.grpc.pb.h"

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
  kernel_add_->add_flag("!--no-prepare", prepare_,
                        "only register it (default: also boot it once and save the booted VM, so that "
                        "`vm run` starts its VMs from that in ~1 s; for the default --cpus and --mem)");
  kernel_add_
      ->add_option("--boot-timeout", add_boot_timeout_s_,
                   "seconds the boot for the saved VM may take before the kernel counts as not booting "
                   "(default 90)")
      ->check(CLI::Range(1.0, 3600.0));

  vm_ = app.add_subcommand("vm", "VMs running the agent on a registered kernel");
  vm_->require_subcommand(1);
  vm_run_ = vm_->add_subcommand("run", "boot VMs of a kernel and supervise them until Ctrl-C");
  vm_run_->add_option("--kernel", launch_.kernel_label, "registered kernel label")->required();
  vm_run_->add_option("--count", launch_.count, "VMs to run")->check(CLI::Range(1, 64));
  vm_run_->add_option("--cpus", launch_.cpus, "vCPUs per VM")->check(CLI::Range(1, 64));
  vm_run_->add_option("--mem", launch_.mem_mib,
                      "MiB of memory per VM (default " + std::to_string(vm::kDefaultVmMemMib) + ")")
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
  vm_run_->add_option(
      "--metrics-listen", metrics_listen_,
      "serve Prometheus metrics (VM boots, boot times, crashes) on GET "
      "http://HOST:PORT/metrics; port 0 picks a free one (logged as metrics.listen); "
      "beyond loopback the token is needed");
  vm_run_->add_flag("--die-with-parent", die_with_parent_,
                    "exit when the parent process dies (used by up)");
  for (auto* sub : {kernel_, kernel_add_, vm_, vm_run_}) sub->fallthrough();
}

bool VmCommands::parsed() const {
  return kernel_add_->parsed() || vm_run_->parsed();
}

int VmCommands::run(const Endpoint& ep, const std::string& data_dir, bool json) {
  if (kernel_add_->parsed()) return kernel_add(ep, data_dir, json);
  if (vm_run_->parsed()) return vm_run(ep, data_dir);
  return 2;
}

// Boots the added kernel once and saves the booted VM (launcher.h), as its
// first `vm run` would. Fills `why` when it could not; logs go to stderr.
bool prepare_kernel(const Endpoint& ep, const std::string& data_dir, const std::string& label,
                    const std::string& cache, double boot_timeout_s, std::string& why, long& ms) {
  vm::LauncherOptions o;
  o.boot_timeout = std::chrono::milliseconds(static_cast<int64_t>(boot_timeout_s * 1000));
  o.coordinator = ep.address;
  o.token = ep.token;
  o.kernel_label = label;
  o.cache_dir = cache;
  o.run_dir = data_dir + "/vm-prepare-" + label + "-" + std::to_string(getpid());
  o.agent_exe = self_dir() + "/leapfrog-agent-static";
  o.image_script = self_dir() + "/vm/build-initramfs.sh";
  struct sigaction sa {};
  sa.sa_handler = on_stop;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  const auto t0 = std::chrono::steady_clock::now();
  int code = 2;
  try {
    code = vm::prepare_saved_vm(o, g_stop, why);
  } catch (const std::runtime_error& e) {
    why = e.what();
  }
  ms = static_cast<long>(
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0).count());
  std::error_code ec;
  if (code == 0) stdfs::remove_all(o.run_dir, ec);  // else its console logs stay for a look
  else why += " (logs in " + o.run_dir + ")";
  return code == 0;
}

int VmCommands::kernel_add(const Endpoint& ep, const std::string& data_dir, bool json) {
  // Its output is the kernel's summary; the launcher's log lines go to stderr.
  if (!spdlog::get("stderr")) spdlog::set_default_logger(spdlog::stderr_color_mt("stderr"));
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
  auto stub = v1::ControlService::NewStub(coord::coordinator_channel(ep.address));
  grpc::ClientContext ctx;
  ctx.AddMetadata("authorization", "Bearer " + ep.token);
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  v1::Kernel resp;
  const grpc::Status s = stub->AddKernel(&ctx, req, &resp);
  if (!s.ok()) throw std::runtime_error(s.error_message());
  // Registered: a kernel that then does not boot is still added (its VMs
  // report boot-failure), with a warning now.
  std::string why;
  long ms = 0;
  const bool saved = prepare_ && prepare_kernel(ep, data_dir, label_, cache, add_boot_timeout_s_, why, ms);
  if (prepare_ && !saved) std::fprintf(stderr, "warning: kernel %s: no saved VM: %s\n", label_.c_str(), why.c_str());
  if (json) {
    nlohmann::json out{{"label", resp.label()},   {"version", resp.version()}, {"sha256", resp.sha256()},
                       {"source", resp.source()}, {"release", k.release},      {"modules", k.modules},
                       {"vmlinux", k.vmlinux},    {"store", k.dir}};
    if (prepare_) out["saved_vm"] = {{"ready", saved}, {"ms", ms}, {"error", why}};
    std::cout << out.dump(2) << std::endl;
  } else {
    std::printf("kernel %s: %s\n  sha256  %s\n  boots   %s\n  modules %s\n", resp.label().c_str(),
                k.release.c_str(), k.sha256.c_str(),
                k.vmlinux.empty() ? "bzImage (no ELF vmlinux extracted)" : "ELF vmlinux (PVH)",
                k.modules.empty() ? "(none)" : k.modules.c_str());
    if (!prepare_)
      std::printf("  saved VM  not made (--no-prepare): the first `vm run` makes it\n");
    else if (saved)
      std::printf("  saved VM  ready (%.1f s): `vm run` starts its VMs from it\n", ms / 1000.0);
    else
      std::printf("  saved VM  none: VMs boot in full until one is saved\n");
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
  std::unique_ptr<metrics::VmMetrics> vm_metrics;
  std::unique_ptr<metrics::MetricsEndpoint> endpoint;
  if (!metrics_listen_.empty()) {
    vm_metrics = std::make_unique<metrics::VmMetrics>(launch_.kernel_label);
    endpoint = std::make_unique<metrics::MetricsEndpoint>(
        metrics_listen_, launch_.token, [m = vm_metrics.get()] { return m->render(); });
    launch_.events = vm_metrics.get();
  }
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
  SpawnOptions opts;
  opts.reset_signal_mask = true;
  int rc = 0;
  const pid_t pid = spawn_process(argv, opts, &rc);
  if (pid < 0)
    throw std::runtime_error("cannot start the VM launcher: " + std::string(std::strerror(rc)));
  return pid;
}

}  // namespace leapfrog::cli
