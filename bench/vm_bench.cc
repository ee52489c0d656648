// VM bench, side by side in one run on the same kernel:
// - launch -> agent registered (`leapfrog vm run` until the coordinator lists
//   the VM's agent), divided by a bare boot of the same kernel and image to
//   its first /init line (lf.bare=1). Target <= 1.2.
// - foffset throughput in the guest (a campaign on the VM) against the host
//   (`leapfrog-agent run`), which is what TCG costs.
// Needs root, qemu-system-x86 and a kernel in /boot (or LEAPFROG_BENCH_KERNEL).

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "coordinator/pg/test_dir.h"
#include "coordinator/vm/qemu_process.h"
#include "leapfrog/v1/control.grpc.pb.h"
#include "tests/process_util.h"

namespace {

using nlohmann::json;
using namespace leapfrog::testing;
namespace stdfs = std::filesystem;
using Ms = std::chrono::duration<double, std::milli>;

std::string newest_kernel() {
  if (const char* k = std::getenv("LEAPFROG_BENCH_KERNEL")) return k;
  std::string best;
  for (const auto& e : stdfs::directory_iterator("/boot"))
    if (e.path().filename().string().rfind("vmlinuz-", 0) == 0 && e.path().string() > best)
      best = e.path();
  return best;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

struct Bench {
  leapfrog::coord::testing::TestDir dir;
  std::string data = dir / "coord", logs = dir / "logs", cache = LEAPFROG_VM_CACHE;

  Result cli(std::vector<std::string> args, std::chrono::milliseconds timeout = 120s) {
    std::vector<std::string> argv = {LEAPFROG, "--data-dir", data};
    argv.insert(argv.end(), args.begin(), args.end());
    return run_to_end(argv, logs, timeout);
  }

  // True when the coordinator lists an agent called `name` (one gRPC call:
  // polling through the CLI would take CPU from the guest).
  bool agent_listed(const std::string& name) {
    if (!stub) {
      std::string address = slurp(data + "/address"), token = slurp(data + "/token");
      while (!address.empty() && address.back() == '\n') address.pop_back();
      while (!token.empty() && token.back() == '\n') token.pop_back();
      bearer = "Bearer " + token;
      stub = leapfrog::v1::ControlService::NewStub(
          grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
    }
    grpc::ClientContext ctx;
    ctx.AddMetadata("authorization", bearer);
    ctx.set_deadline(std::chrono::system_clock::now() + 5s);
    leapfrog::v1::ListAgentsResponse resp;
    if (!stub->ListAgents(&ctx, leapfrog::v1::ListAgentsRequest(), &resp).ok()) return false;
    for (const auto& a : resp.agents())
      if (a.name() == name) return true;
    return false;
  }
  std::unique_ptr<leapfrog::v1::ControlService::Stub> stub;
  std::string bearer;

  // Boots `leapfrog vm run` and returns ms until its agent is listed, or -1.
  double launch_to_registered(const std::string& run_log) {
    const auto t0 = Clock::now();
    Proc launcher(
        {LEAPFROG, "--data-dir", data, "vm", "run", "--kernel", "bench", "--cache-dir", cache},
        run_log + ".out", run_log + ".err");
    const std::string name = "vm-bench-" + std::to_string(launcher.pid()) + "-0";
    double ms = -1;
    poll_until(
        [&] {
          if (agent_listed(name)) {
            ms = Ms(Clock::now() - t0).count();
            return true;
          }
          return launcher.exited();
        },
        180s, 25ms);
    launcher.stop();
    return ms;
  }

  // Boots the kernel with the launcher's image to the first /init line.
  double bare_boot(const std::string& kernel, const std::string& initrd, int i) {
    leapfrog::vm::QemuConfig cfg;
    cfg.kernel = kernel;
    cfg.initrd = initrd;
    cfg.append = "console=ttyS0 loglevel=5 panic=-1 lf.bare=1";
    cfg.console_log = logs + "/bare-" + std::to_string(i) + ".console.log";
    cfg.stderr_log = cfg.console_log + ".qemu";
    const auto t0 = Clock::now();
    leapfrog::vm::QemuProcess qemu(cfg);
    double ms = -1;
    poll_until(
        [&] {
          if (slurp(cfg.console_log).find("leapfrog-init: start") != std::string::npos) {
            ms = Ms(Clock::now() - t0).count();
            return true;
          }
          return qemu.wait_exit(0ms);
        },
        180s, 5ms);
    return ms;
  }
};

}  // namespace

int main() {
  if (geteuid() != 0) {
    std::printf("vm bench: skipped (needs root)\n");
    return 0;
  }
  const std::string image = newest_kernel();
  if (image.empty()) {
    std::printf("vm bench: skipped (no /boot/vmlinuz-*)\n");
    return 0;
  }
  Bench b;
  stdfs::create_directories(b.logs);
  Proc up({LEAPFROG, "up", "--agents", "0", "--data-dir", b.data, "--heartbeat-ms", "500"},
          b.logs + "/up.out", b.logs + "/up.err");
  if (!poll_until([&] { return !slurp(b.data + "/address").empty(); }, 60s)) {
    std::fprintf(stderr, "vm bench: coordinator did not start: %s\n",
                 tail_of(b.logs + "/up.err").c_str());
    return 1;
  }
  const Result added = b.cli({"kernel", "add", "bench", image, "--cache-dir", b.cache, "--json"});
  if (added.exit != 0) {
    std::fprintf(stderr, "vm bench: kernel add failed: %s\n", added.err.c_str());
    return 1;
  }
  const json k = json::parse(added.out);
  const std::string kernel = k.at("vmlinux").get<std::string>().empty()
                                 ? k.at("store").get<std::string>() + "/image"
                                 : k.at("vmlinux").get<std::string>();

  std::vector<double> launch, bare;
  for (int i = 0; i < 3; ++i) {
    launch.push_back(b.launch_to_registered(b.logs + "/launch-" + std::to_string(i)));
    // The initrd the launcher built (image + token), in its run folder.
    std::string initrd;
    for (const auto& e : stdfs::directory_iterator(b.data))
      if (stdfs::exists(e.path() / "initrd.cpio")) initrd = e.path() / "initrd.cpio";
    bare.push_back(b.bare_boot(kernel, initrd, i));
  }
  const double lm = median(launch), bm = median(bare);
  std::printf("boot (%s, TCG unless KVM proved usable), median of 3:\n",
              stdfs::path(image).filename().c_str());
  std::printf("  launch -> agent registered  %8.0f ms\n", lm);
  std::printf("  bare boot -> first /init line %6.0f ms\n", bm);
  std::printf("  ratio %.2f (target <= 1.20)\n", bm > 0 ? lm / bm : 0.0);

  // Throughput: one 3 s foffset job in the guest, and the same on the host.
  Proc launcher(
      {LEAPFROG, "--data-dir", b.data, "vm", "run", "--kernel", "bench", "--cache-dir", b.cache},
      b.logs + "/tput.out", b.logs + "/tput.err");
  const Result c = b.cli({"campaign", "run", "--kernel", "bench", "--scenario", "foffset",
                          "--duration", "3s", "--wait", "--json"},
                         300s);
  const Result o = b.cli({"outcomes", "--json"});
  launcher.stop();
  double guest = 0;
  for (const auto& rec : json::parse(o.exit == 0 ? o.out : "[]"))
    if (rec.at("spec").at("scenario") == "foffset")
      guest = rec.at("outcome").value("ops_per_sec", 0.0);
  const Result host = run_to_end({LEAPFROG_AGENT, "run", "--scenario", "foffset", "--fs", "tmpfs",
                                  "--duration", "3s", "--json"},
                                 b.logs, 120s);
  double host_ops = 0;
  try {
    host_ops = json::parse(host.out).value("ops_per_sec", 0.0);
  } catch (const std::exception&) {
  }
  std::printf("foffset throughput, 3 s on tmpfs:\n");
  std::printf("  guest (TCG) %12.0f ops/s\n  host        %12.0f ops/s\n  guest/host  %12.3f\n",
              guest, host_ops, host_ops > 0 ? guest / host_ops : 0.0);
  up.stop();
  return 0;
}
