// Detection power on the planted kernel bug (tests/planted/): how long a
// scenario runs, and how many lookups it makes, before the oracle sees its
// first violation. One build, booted with the bug on and off
// (leapfrog_planted=0), side by side in one run; the bug-off runs are the
// control and must find nothing.
//
// Builds come from the kernel build cache (LEAPFROG_KBUILD_CACHE, default
// /var/cache/leapfrog): `make test` fills it; a cold cache builds the kernel
// first (about 5 min on 2 cores). Needs root, qemu-system-x86 and
// linux-source-6.1.

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "coordinator/pg/test_dir.h"
#include "tests/process_util.h"

namespace {

using nlohmann::json;
using namespace leapfrog::testing;
namespace stdfs = std::filesystem;

constexpr const char* kSource = "/usr/src/linux-source-6.1.tar.xz";
constexpr int kSeeds = 5;
const std::vector<std::string> kScenarios = {"setattr-lookup", "chown-lookup", "acl-exec-deny"};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

struct Bench {
  leapfrog::coord::testing::TestDir dir;
  std::string data = dir / "coord", logs = dir / "logs";
  std::string cache = std::getenv("LEAPFROG_KBUILD_CACHE") ? std::getenv("LEAPFROG_KBUILD_CACHE")
                                                          : LEAPFROG_KBUILD_CACHE;

  Result cli(std::vector<std::string> args, std::chrono::milliseconds timeout = 600s) {
    std::vector<std::string> argv = {LEAPFROG, "--data-dir", data};
    argv.insert(argv.end(), args.begin(), args.end());
    return run_to_end(argv, logs, timeout);
  }

  bool build(const std::string& label, const std::vector<std::string>& extra) {
    const std::string planted = std::string(LEAPFROG_SOURCE_DIR) + "/tests/planted/";
    std::vector<std::string> args = {"kernel",  "build",     label,   "--source",
                                     kSource,   "--patch",   planted + "0000-harmless-namei-comment.patch",
                                     "--patch", planted + "0001-namei-per-cpu-search-grant-cache-PLANTED.patch",
                                     "--cache-dir", cache};
    args.insert(args.end(), extra.begin(), extra.end());
    const Result r = cli(args, 3000s);
    if (r.exit != 0) std::fprintf(stderr, "detect bench: kernel build %s failed:\n%s\n", label.c_str(), r.err.c_str());
    return r.exit == 0;
  }
};

struct Row {
  int runs = 0, detected = 0;
  std::vector<double> ms, ops;
  uint64_t lookups = 0;
};

}  // namespace

int main() {
  if (geteuid() != 0) {
    std::printf("detect bench: skipped (needs root)\n");
    return 0;
  }
  if (!stdfs::exists(kSource)) {
    std::printf("detect bench: skipped (%s missing)\n", kSource);
    return 0;
  }
  Bench b;
  stdfs::create_directories(b.logs);
  Proc up({LEAPFROG, "up", "--agents", "0", "--data-dir", b.data, "--heartbeat-ms", "1000", "--lease-ms", "30000"},
          b.logs + "/up.out", b.logs + "/up.err");
  if (!poll_until([&] { return !slurp(b.data + "/address").empty(); }, 60s)) {
    std::fprintf(stderr, "detect bench: coordinator did not start: %s\n", tail_of(b.logs + "/up.err").c_str());
    return 1;
  }
  if (!b.build("planted", {}) || !b.build("planted-off", {"--cmdline", "leapfrog_planted=0"})) return 1;
  std::vector<std::unique_ptr<Proc>> vms;
  for (const std::string label : {"planted", "planted-off"})
    vms.push_back(std::make_unique<Proc>(
        std::vector<std::string>{LEAPFROG, "--data-dir", b.data, "vm", "run", "--kernel", label, "--cpus", "2",
                                 "--cache-dir", b.cache},
        b.logs + "/vm-" + label + ".out", b.logs + "/vm-" + label + ".err"));

  std::vector<std::string> args = {"campaign", "run",          "--kernel",   "planted",  "--kernel",
                                   "planted-off", "--fs",      "tmpfs",      "--seeds",  std::to_string(kSeeds),
                                   "--iterations", "2000",     "--wait",     "--json"};
  for (const auto& s : kScenarios) args.insert(args.end(), {"--scenario", s});
  const Result c = b.cli(args, 3000s);
  if (c.exit != 0) {
    std::fprintf(stderr, "detect bench: campaign failed: %s%s\n", c.out.c_str(), c.err.c_str());
    return 1;
  }
  const std::string campaign = std::to_string(json::parse(c.out).at("campaign").get<int64_t>());
  const Result o = b.cli({"outcomes", "--campaign", campaign, "--json"});
  std::map<std::pair<std::string, std::string>, Row> rows;  // (scenario, kernel)
  for (const auto& rec : json::parse(o.exit == 0 ? o.out : "[]")) {
    const json& out = rec.at("outcome");
    Row& r = rows[{rec.at("spec").value("scenario", ""), rec.value("kernel_label", "")}];
    ++r.runs;
    r.lookups += std::stoull(out.value("lookups_checked", std::string("0")));
    const int64_t ns = std::stoll(out.value("first_violation_ns", std::string("-1")));
    if (ns <= 0 || out.value("verdict", "") != "VERDICT_VIOLATION") continue;
    ++r.detected;
    r.ms.push_back(static_cast<double>(ns) / 1e6);
    r.ops.push_back(static_cast<double>(std::stoull(out.value("ops_to_first_violation", std::string("0")))));
  }
  std::printf("planted per-CPU grant cache (one build, bug on / off), TCG, 2 vCPUs, tmpfs, 2000 rounds, %d seeds\n",
              kSeeds);
  std::printf("  %-16s %-12s %9s %16s %16s %14s\n", "scenario", "kernel", "detected", "ms to first (med)",
              "lookups to first", "lookups judged");
  for (const auto& [key, r] : rows) {
    std::printf("  %-16s %-12s %5d/%-3d %16.1f %16.0f %14llu\n", key.first.c_str(), key.second.c_str(), r.detected,
                r.runs, median(r.ms), median(r.ops), static_cast<unsigned long long>(r.lookups));
  }
  for (auto& v : vms) v->stop();
  up.stop();
  return 0;
}
