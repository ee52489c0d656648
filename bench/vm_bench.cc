// VM bench, side by side in one run on the same kernel:
// - launch -> agent registered (`leapfrog vm run` until the coordinator lists
//   the VM's agent), divided by a bare busybox initramfs (busybox and an /init
//   that prints one line) booting the same kernel, with the same QEMU
//   machine, to that line. Target <= 1.2. Three ways: a full boot
//   (--no-snapshot), a launch with no saved VM (the kernel added with
//   --no-prepare: the VM boots, is saved, and starts again from the save)
//   and a launch from the saved VM (what `kernel add` prepares, and what
//   every later launch and replaced VM gets; coordinator/vm/launcher.h). Also shown: Leapfrog's image booted
//   to its first /init line (what unpacking the agent costs), and where the
//   launch's time goes (launcher, kernel to /init, /init to network up,
//   network up to registered), from the VM's console. Measured for the
//   Debian kernel (virtio as modules, which /init loads) and, when the kernel
//   build cache has one, for the newest kernel `leapfrog kernel build` made
//   (virtio built in), which is what users test a patch on.
// - foffset throughput in the guest (a campaign on the VM) against the host
//   (`leapfrog-agent run`), which is what TCG costs.
// Needs root, qemu-system-x86, busybox-static, cpio and a kernel in /boot (or
// LEAPFROG_BENCH_KERNEL).

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "coordinator/pg/test_dir.h"
#include "coordinator/vm/qemu_process.h"
#include "leapfrog/v1/control.grpc.pb.h"
#include "tests/guest_run.h"
#include "tests/process_util.h"

namespace {

using nlohmann::json;
using namespace leapfrog::testing;
namespace stdfs = std::filesystem;
using Ms = std::chrono::duration<double, std::milli>;

std::string newest_kernel() {
  if (const char* k = std::getenv("LEAPFROG_BENCH_KERNEL")) return k;
  return stock_boot_kernel();
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

  // Milliseconds from `leapfrog vm run` to: the first /init line on the
  // console, the network up (/init's "agent" line), the agent listed by the
  // coordinator; for a VM started from a saved VM, to the VM running and to
  // its identity taken (from the launcher's log); for the first launch of a
  // kernel, how long saving its VM took. -1 where not reached.
  struct Launch {
    double init = -1, net = -1, registered = -1, restored = -1, identity = -1, saved = -1;
  };
  std::string last_run_dir;  // of the last launch: its initrd.cpio

  // The number after `key=` on the launcher log's line with `event`, or -1.
  static double log_ms(const std::string& log, const std::string& event, const std::string& key) {
    const size_t at = log.find(event + " ");
    if (at == std::string::npos) return -1;
    const size_t k = log.find(" " + key + "=", at);
    const size_t eol = log.find('\n', at);
    if (k == std::string::npos || (eol != std::string::npos && k > eol)) return -1;
    return std::atof(log.c_str() + k + key.size() + 2);
  }

  // Boots `leapfrog vm run` until its agent is listed.
  Launch launch_to_registered(const std::string& label, const std::string& run_log,
                              const std::vector<std::string>& extra = {}) {
    const auto t0 = Clock::now();
    std::vector<std::string> argv = {LEAPFROG, "--data-dir", data,  "vm",          "run",
                                     "--kernel", label,       "--cache-dir", cache};
    argv.insert(argv.end(), extra.begin(), extra.end());
    Proc launcher(argv, run_log + ".out", run_log + ".err");
    const std::string run_dir = data + "/vm-" + label + "-" + std::to_string(launcher.pid());
    const std::string name = "vm-" + label + "-" + std::to_string(launcher.pid()) + "-0";
    const std::string console = run_dir + "/" + name + ".1.console.log";
    last_run_dir = run_dir;
    Launch l;
    poll_until(
        [&] {
          const double now = Ms(Clock::now() - t0).count();
          if (l.init < 0 || l.net < 0) {
            const std::string text = slurp(console);
            if (l.init < 0 && text.find("leapfrog-init: start") != std::string::npos) l.init = now;
            if (l.net < 0 && text.find("leapfrog-init: agent ") != std::string::npos) l.net = now;
          }
          if (agent_listed(name)) {
            l.registered = Ms(Clock::now() - t0).count();
            return true;
          }
          return launcher.exited();
        },
        180s, 10ms);
    launcher.stop();
    const std::string log = slurp(run_log + ".err") + slurp(run_log + ".out");
    l.restored = log_ms(log, "vm.restored", "ms");
    l.identity = log_ms(log, "vm.identity_taken", "ms");
    l.saved = log_ms(log, "vm.snapshot_saved", "ms");
    return l;
  }

  // Boots the kernel with `initrd` to its first /init line, as the launcher
  // boots it (machine, CPUs, memory, accelerator, base command line), without
  // a network device.
  double bare_boot(const std::string& kernel, const std::string& initrd, const std::string& tag) {
    leapfrog::vm::QemuConfig cfg;
    cfg.kernel = kernel;
    cfg.initrd = initrd;
    cfg.append = std::string(leapfrog::vm::kBaseCmdline) + " lf.bare=1";
    cfg.console_log = logs + "/" + tag + ".console.log";
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

  // The baseline the target is judged against: busybox and an /init that
  // prints the line the bench waits for, nothing else.
  std::string bare_busybox_initramfs() {
    return busybox_initramfs(dir / "bare",
                             "#!/bin/busybox sh\necho \"leapfrog-init: start\"\n/bin/busybox poweroff -f\n");
  }
};

// The newest bzImage `leapfrog kernel build` left in its cache, or "".
std::string newest_built_kernel() {
  std::string best;
  stdfs::file_time_type when{};
  std::error_code ec;
  for (const auto& e : stdfs::directory_iterator(std::string(LEAPFROG_KBUILD_CACHE) + "/kbuild/out", ec)) {
    const stdfs::path image = e.path() / "bzImage";
    if (!stdfs::exists(image)) continue;
    const auto t = stdfs::last_write_time(image);
    if (best.empty() || t > when) {
      best = image;
      when = t;
    }
  }
  return best;
}

// Registers `image` as `label`, then launches it three ways, each launch
// beside a bare boot of the same kernel, and prints the table:
// - full boot (`--no-snapshot`): 5 launches;
// - first launch of the kernel: no saved VM, so the VM boots, is saved, and
//   takes its identity: 3 launches, the saved VMs removed before each;
// - restored: the saved VM is there (what every later launch of the kernel
//   gets, and every VM replaced after a crash or a hang): 5 launches.
// False on a setup error.
bool boot_rows(Bench& b, const std::string& label, const std::string& image_path,
               const std::string& bare_initrd) {
  // The bench makes (and times) the saved VMs itself.
  const Result added =
      b.cli({"kernel", "add", label, image_path, "--cache-dir", b.cache, "--json", "--no-prepare"});
  if (added.exit != 0) {
    std::fprintf(stderr, "vm bench: kernel add %s failed: %s\n", image_path.c_str(), added.err.c_str());
    return false;
  }
  const json k = json::parse(added.out);
  const std::string kernel = k.at("vmlinux").get<std::string>().empty()
                                 ? k.at("store").get<std::string>() + "/image"
                                 : k.at("vmlinux").get<std::string>();
  struct Mode {
    const char* name;
    std::vector<Bench::Launch> launches;
    std::vector<double> bare, ratio;
    double median_of(double Bench::Launch::*field) const {
      std::vector<double> v;
      for (const auto& l : launches) v.push_back(l.*field);
      return median(v);
    }
  };
  Mode full{"full boot"}, first{"first launch"}, restored{"restored"};
  std::vector<double> image;
  auto one = [&](Mode& m, const std::string& tag, const std::vector<std::string>& extra) {
    const Bench::Launch l = b.launch_to_registered(label, b.logs + "/launch-" + tag, extra);
    const double bb = b.bare_boot(kernel, bare_initrd, "bare-" + tag);
    m.launches.push_back(l);
    m.bare.push_back(bb);
    if (l.registered > 0 && bb > 0) m.ratio.push_back(l.registered / bb);
  };
  for (int i = 0; i < 5; ++i) {
    const std::string tag = label + "-full-" + std::to_string(i);
    one(full, tag, {"--no-snapshot"});
    // The initrd the launcher built (image + token), in its run folder.
    image.push_back(b.bare_boot(kernel, b.last_run_dir + "/initrd.cpio", "image-" + tag));
  }
  for (int i = 0; i < 3; ++i) {
    std::error_code ec;
    stdfs::remove_all(b.cache + "/snapshots", ec);
    one(first, label + "-first-" + std::to_string(i), {});
  }
  for (int i = 0; i < 5; ++i) one(restored, label + "-restored-" + std::to_string(i), {});

  std::printf("boot of %s (%s), TCG unless KVM proved usable; medians, each launch beside a bare boot:\n",
              label.c_str(), k.value("release", "?").c_str());
  std::printf("  %-40s %12s %12s %12s\n", "", "full boot", "no saved VM", "saved VM");
  std::printf("  %-40s %12zu %12zu %12zu\n", "launches", full.launches.size(), first.launches.size(),
              restored.launches.size());
  std::printf("  %-40s %9.0f ms %9.0f ms %9.0f ms\n", "launch -> agent registered",
              full.median_of(&Bench::Launch::registered), first.median_of(&Bench::Launch::registered),
              restored.median_of(&Bench::Launch::registered));
  std::printf("  %-40s %9.0f ms %9.0f ms %9.0f ms\n", "bare busybox initramfs -> first line",
              median(full.bare), median(first.bare), median(restored.bare));
  std::printf("  %-40s %12.2f %12.2f %12.2f   (target <= 1.20)\n", "ratio (median of the pairs' ratios)",
              median(full.ratio), median(first.ratio), median(restored.ratio));
  const double fr = full.median_of(&Bench::Launch::registered);
  const double fi = full.median_of(&Bench::Launch::init), fn = full.median_of(&Bench::Launch::net);
  std::printf("  full boot: launch -> first /init line %.0f ms, /init -> network up %.0f ms, network up -> "
              "registered %.0f ms\n",
              fi, fn - fi, fr - fn);
  std::printf("  no saved VM: saving the booted VM %.0f ms, its restart from the save -> identity taken %.0f ms\n",
              first.median_of(&Bench::Launch::saved), first.median_of(&Bench::Launch::identity));
  std::printf("  saved VM: launch -> VM running %.0f ms, -> identity taken %.0f ms\n",
              restored.median_of(&Bench::Launch::restored), restored.median_of(&Bench::Launch::identity));
  std::printf("  Leapfrog image -> first /init line %.0f ms (the bare boot of the image with the agent)\n",
              median(image));
  return true;
}

// Judged lookups per second in the guest, Leapfrog against its bare twin
// (bench/bare_lookup.c: the same tree, mutator syscalls and lookups, no clock
// read per call, no record, no oracle), side by side in one boot per guest
// clock source: the kernel's own choice under TCG (hpet) and the launcher's
// (tsc, vm::clock_cmdline). Leapfrog's side is `leapfrog-agent run` of the
// family with one free-running pinned observer, timed from start to outcome:
// its judged rate is lookups_checked / (that time - setup_s), so recording
// and judging both count; its race rate (lookups_checked / duration_s)
// leaves judging out. Rounds alternate the two sides.
constexpr int kTputRounds = 2;
constexpr const char* kTputSeconds = "3";
const std::vector<std::string> kTputFamilies = {"setattr", "rename", "typeflip"};
const std::vector<std::string> kTputFilesystems = {"tmpfs", "ext4"};

std::string throughput_script() {
  std::string s = R"SH(
D=)SH" + std::string(kTputSeconds) + R"SH(
echo "lf-clock $(/bin/leapfrog-agent clock-check --json --rounds 20000)"
bare_fs() {
  mkdir -p /mnt/bare
  if [ "$1" = tmpfs ]; then
    mount -t tmpfs none /mnt/bare
  else
    rm -f /tmp/bare.img
    dd if=/dev/zero of=/tmp/bare.img bs=1M count=0 seek=256 2>/dev/null
    mkfs.$1 -q -F /tmp/bare.img >/dev/null 2>&1
    mount -o loop /tmp/bare.img /mnt/bare
  fi
  mkdir /mnt/bare/w
}
for r in )SH";
  for (int r = 1; r <= kTputRounds; ++r) s += std::to_string(r) + " ";
  s += "; do for fs in ";
  for (const auto& f : kTputFilesystems) s += f + " ";
  s += "; do for fam in ";
  for (const auto& f : kTputFamilies) s += f + " ";
  s += R"SH(; do
  /bin/lf-bare time /bin/leapfrog-agent run --scenario $fam-lookup --fs $fs --duration ${D}s \
    --align free --observers 1 --pin on --seed $r --json > /tmp/agent.out 2>/tmp/agent.err
  echo "lf-agent $r $fam $fs $(tr '\n' ' ' < /tmp/agent.out)"
  bare_fs $fs
  echo "lf-bare $r $fam $fs $(/bin/lf-bare $fam /mnt/bare/w $D)"
  umount /mnt/bare; rm -f /tmp/bare.img
done; done; done
)SH";
  return s;
}

// The number after `key=` in `text`, or -1.
double field(const std::string& text, const std::string& key) {
  const size_t at = text.find(key + "=");
  return at == std::string::npos ? -1 : std::atof(text.c_str() + at + key.size() + 1);
}

struct TputCell {
  std::vector<double> judged, race, bare, ratio, race_ratio, mutations, bare_mutations;
  std::string clock;
};

// One boot with `clock` as the guest's clock words; rows by family and fs.
std::map<std::string, TputCell> throughput_boot(const leapfrog::testing::GuestImage& image, const std::string& dir,
                                                const std::string& clock, double& ns_per_read,
                                                std::string& source) {
  std::map<std::string, TputCell> cells;
  const leapfrog::testing::GuestRun run = leapfrog::testing::run_in_guest(
      image, dir, throughput_script(), {{"/bin/lf-bare", LEAPFROG_BARE_LOOKUP}}, std::chrono::seconds(1800), &clock,
      2, 1024);
  if (run.exit != 0) {
    std::fprintf(stderr, "vm bench: the throughput run failed (exit %d%s); console in %s\n", run.exit,
                 run.timed_out ? ", timed out" : "", dir.c_str());
    return cells;
  }
  std::map<std::string, json> agent;  // "r fam fs" -> outcome + time
  std::istringstream lines(run.console);
  for (std::string line; std::getline(lines, line);) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    std::istringstream w(line);
    std::string tag, r, fam, fs;
    w >> tag;
    if (tag == "lf-clock") {
      std::string rest;
      std::getline(w, rest);
      try {
        const json c = json::parse(rest);
        ns_per_read = c.value("ns_per_read", 0.0);
        source = c.value("clock_source", "?");
      } catch (const json::exception&) {
      }
      continue;
    }
    if (tag != "lf-agent" && tag != "lf-bare") continue;
    w >> r >> fam >> fs;
    std::string rest;
    std::getline(w, rest);
    TputCell& cell = cells[fam + " " + fs];
    if (tag == "lf-agent") {
      const size_t t = rest.rfind("time ns=");
      try {
        json o = json::parse(rest.substr(0, t));
        o["wall_ns"] = field(rest.substr(t), "ns");
        agent[r + " " + fam + " " + fs] = o;
      } catch (const json::exception&) {
        std::fprintf(stderr, "vm bench: no outcome for %s %s round %s: %.200s\n", fam.c_str(), fs.c_str(),
                     r.c_str(), rest.c_str());
      }
      continue;
    }
    const double bare = field(rest, "lookups") / field(rest, "seconds");
    const auto it = agent.find(r + " " + fam + " " + fs);
    if (it == agent.end() || bare <= 0) continue;
    const json& o = it->second;
    const double lookups = o.value("lookups_checked", 0.0);
    const double wall = o.value("wall_ns", 0.0) / 1e9 - o.value("setup_s", 0.0);
    const double judged = wall > 0 ? lookups / wall : 0;
    const double race = o.value("duration_s", 0.0) > 0 ? lookups / o.value("duration_s", 0.0) : 0;
    cell.judged.push_back(judged);
    cell.race.push_back(race);
    cell.bare.push_back(bare);
    cell.ratio.push_back(judged / bare);
    cell.race_ratio.push_back(race / bare);
    cell.mutations.push_back(o.value("mutations", 0.0) / std::max(o.value("duration_s", 1.0), 1e-9));
    cell.bare_mutations.push_back(field(rest, "mutations") / field(rest, "seconds"));
    cell.clock = o.value("clock_source", "?");
    if (o.value("verdict", "") != "pass")
      std::printf("  note: %s-lookup on %s round %s: verdict %s (%llu violations)\n", fam.c_str(), fs.c_str(),
                  r.c_str(), o.value("verdict", "?").c_str(), o.value("violation_count", 0ull));
  }
  return cells;
}

// The throughput table: both clocks, each family and file system.
void throughput_rows(Bench& b, const std::string& image_path) {
  const leapfrog::testing::GuestImage image =
      leapfrog::testing::guest_image(image_path, b.cache, LEAPFROG_IMAGE_SCRIPT, LEAPFROG_AGENT_STATIC, b.logs);
  if (!image.error.empty()) {
    std::fprintf(stderr, "vm bench: no guest image: %s\n", image.error.c_str());
    return;
  }
  std::printf("judged lookups per second in the guest, Leapfrog / its bare twin (%s, TCG, 2 vCPUs, 1 GiB; one "
              "free-running pinned observer, %s s per side, %d rounds alternating; medians):\n",
              image.release.c_str(), kTputSeconds, kTputRounds);
  const std::vector<std::pair<std::string, std::string>> clocks = {{"kernel's choice", ""},
                                                                   {"launcher's", leapfrog::vm::clock_cmdline(false)}};
  for (const auto& [name, words] : clocks) {
    double ns_per_read = 0;
    std::string source;
    const auto cells = throughput_boot(image, b.dir / ("tput-" + std::to_string(words.size())), words,
                                       ns_per_read, source);
    std::printf("  clock %s (%s): %s, %.0f ns per clock_gettime\n", source.c_str(), name.c_str(),
                words.empty() ? "no clock words" : words.c_str(), ns_per_read);
    std::printf("    %-9s %-6s %12s %12s %12s %8s %8s %14s\n", "family", "fs", "judged/s", "race/s", "bare/s",
                "judged÷", "race÷", "mutations/s L|B");
    for (const auto& [key, c] : cells) {
      const std::string fam = key.substr(0, key.find(' ')), fs = key.substr(key.find(' ') + 1);
      std::printf("    %-9s %-6s %12.0f %12.0f %12.0f %8.2f %8.2f %7.0f|%-7.0f\n", fam.c_str(), fs.c_str(),
                  median(c.judged), median(c.race), median(c.bare), median(c.ratio), median(c.race_ratio),
                  median(c.mutations), median(c.bare_mutations));
    }
  }
  std::printf("  (target: judged÷ >= 0.8; race÷ leaves judging out)\n");
}

}  // namespace

int main(int argc, char** argv) {
  // --throughput: only the guest throughput table (no boot rows).
  const bool throughput_only = argc > 1 && std::string(argv[1]) == "--throughput";
  if (geteuid() != 0) {
    std::printf("vm bench: skipped (needs root)\n");
    return 0;
  }
  const std::string image_path = newest_kernel();
  if (image_path.empty()) {
    std::printf("vm bench: skipped (no /boot/vmlinuz-6.1.*)\n");
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
  const std::string bare_initrd = b.bare_busybox_initramfs();
  if (bare_initrd.empty()) {
    std::fprintf(stderr, "vm bench: cannot build the bare busybox initramfs (busybox-static, cpio)\n");
    return 1;
  }
  if (throughput_only) {
    throughput_rows(b, image_path);
    up.stop();
    return 0;
  }
  if (!boot_rows(b, "bench", image_path, bare_initrd)) return 1;
  // A kernel built by `leapfrog kernel build` (what users test a patch on):
  // virtio built in, so /init loads no modules.
  const std::string built = newest_built_kernel();
  if (built.empty()) {
    std::printf("Leapfrog-built kernel: none in %s/kbuild/out (`make test` or `leapfrog kernel build` makes one)\n",
                LEAPFROG_KBUILD_CACHE);
  } else if (!boot_rows(b, "built", built, bare_initrd)) {
    return 1;
  }

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
  throughput_rows(b, image_path);
  up.stop();
  return 0;
}
