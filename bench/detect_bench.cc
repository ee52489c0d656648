// Detection power on real kernel bugs: the planted bug (tests/planted/) and
// the corpus of reverted real fixes (tests/corpus/), each built with
// Leapfrog's delay points (`--widen`) and raced in a VM with its scenario,
// and the findings on 6.1 as shipped (tests/findings/), raced against a
// diagnostic patch that removes them.
// For each bug, with widening off and on, side by side in one run:
//   - jobs that detected it / jobs run (a violation, or a kernel crash);
//   - median time and lookups to the first violation;
//   - detections per minute of job wall time, and the on/off ratio;
//   - the twin (6.1 as shipped, the planted build with the bug off, or a
//     finding's diagnostic patch) with the same seeds: clean or not, and
//     over how many lookups; with --twin-lookups N, for each bug the row
//     detected, more seeds (each one's own widening) until its twin judged
//     at least N lookups (--twin-iterations sets those jobs' rounds,
//     --twin-minutes caps a row's twin wall time; a row that stops short
//     says so in a note);
//   - the host's load average over the row: under TCG the rates fall when
//     the host is busy, so a row measured under load says so.
// "Off" seeds are those whose widening choice is empty (one in four); "on"
// seeds those whose choice holds the point inside the bug's window, so the
// agent sets exactly what it sets in a campaign.
//
//   leapfrog_detect_bench [--seeds K] [--iterations N] [--only BUG]
//                         [--twin-lookups N] [--twin-iterations N]
//                         [--twin-minutes M] [--out FILE]
//
// Each bug is raced on its kernel line (Debian's linux-source-6.1 or
// linux-source-6.12, with that line's delay-point series); a line whose
// source is not installed is left out with a note. Its twin is that line as
// shipped unless the bug names another. The table has one block of rows per
// line.
//
// Builds come from the kernel build cache (LEAPFROG_KBUILD_CACHE, default
// /var/cache/leapfrog; a series switch rebuilds in about a minute). Needs
// root and qemu-system-x86. Prints a Markdown table (docs/detection.md holds
// one, with the date and the machine).

#include <sys/utsname.h>
#include <unistd.h>

#include <cstdlib>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "agent/widen.h"
#include "coordinator/pg/test_dir.h"
#include "tests/process_util.h"

namespace {

using nlohmann::json;
using namespace leapfrog::testing;
namespace stdfs = std::filesystem;

// Debian's source tarball of a kernel line.
std::string source_of(const std::string& line) { return "/usr/src/linux-source-" + line + ".tar.xz"; }
constexpr uint32_t kObserverUid = 65534;
const std::string kTests = std::string(LEAPFROG_SOURCE_DIR) + "/tests/";

struct Bug {
  std::string name;
  std::vector<std::string> patches;  // under tests/
  std::string scenario, fs;
  std::vector<std::string> params;
  std::string point;        // the delay point inside its window
  std::string twin_cmdline;  // twin: the same build booted with this; else 6.1 as shipped
  std::string align = "fuzzy";  // the race's alignment (free: observers without a barrier)
  uint32_t min_delay_ns = 20'000;  // "on" seeds delay at the point at least this long
  std::vector<std::string> twin_patches =
      {};                  // a finding: the twin is 6.1 with these (a diagnostic)
  std::string pin = "on";  // pin the actors to CPUs
  std::string line = "6.1";  // the kernel line: its source, series and twin
};

const std::vector<Bug> kBugs = {
    {"planted per-CPU grant cache",
     {"planted/0000-harmless-namei-comment.patch",
      "planted/0001-namei-per-cpu-search-grant-cache-PLANTED.patch"},
     "setattr-lookup",
     "tmpfs",
     {},
     "may_lookup_after",
     "leapfrog_planted=0"},
    {"766c4cbfacd8 negative dentry",
     {"corpus/negative-dentry-766c4cbfacd8.patch"},
     "typeflip-lookup",
     "ext4",
     {},
     "step_validated",
     ""},
    {"b8a7a3a66747 ACL cache",
     {"corpus/acl-cache-b8a7a3a66747.patch"},
     "acl-exec-deny",
     "xfs",
     {"evict=3"},
     "acl_fetched",
     "",
     "free",
     50'000},  // the hold must outlast xfs's ACL write
    // Free-running: the window runs from exec's open to begin_new_exec(), late
    // in an exec that lasts milliseconds under TCG; the fuzzy barrier's swept
    // delays put every chmod near the exec's start, before its permission check.
    {"f50733b45d86 exec set-id",
     {"corpus/exec-setid-f50733b45d86.patch"},
     "exec-setid",
     "ext4",
     {"toctou=1"},
     "exec_setid",
     "",
     "free"},
    {"aed434ada685 .. across mount --move",
     {"corpus/dotdot-mount-aed434ada685.patch"},
     "mount-move-dotdot",
     "ext4",
     {"parents=0", "moved=0"},
     "dotdot_mountpoint",
     ""},
    {"20aac6c60981 mount crossing",
     {"corpus/mount-cross-20aac6c60981.patch"},
     "rename-umount",
     "ext4",
     {"mounted=1"},
     "mount_cross",
     ""},
    {"4c0d7cd5c841 d_seq in __dentry_kill",
     {"corpus/dentry-kill-dseq-4c0d7cd5c841.patch"},
     "typeflip-lookup",
     "ext4",
     {},
     "lookup_found",
     ""},
    // The bug is 6.1 as shipped; the twin leaves a fast symlink's body alone
    // at eviction. Free-running and unpinned, as the finding was minimized.
    {"finding: symlink body cleared at eviction (6.1 as shipped)",
     {},
     "symlink-lookup",
     "ext4",
     {"ops=4"},
     "link_body",
     "",
     "free",
     20'000,
     {"findings/ext4-fast-symlink-keep-body.patch"},
     "off"},
    // 6.12: the corpus bug the line carries as 6.1 does (the fix is there as
    // merged), and the finding on 6.12 as shipped against the same diagnostic.
    {"f50733b45d86 exec set-id",
     {"corpus/6.12/exec-setid-f50733b45d86.patch"},
     "exec-setid",
     "ext4",
     {"toctou=1"},
     "exec_setid",
     "",
     "free",
     20'000,
     {},
     "on",
     "6.12"},
    // Their 6.1 patches apply to 6.12 as they are (tests/corpus/README.md).
    {"766c4cbfacd8 negative dentry", {"corpus/negative-dentry-766c4cbfacd8.patch"}, "typeflip-lookup", "ext4", {},
     "step_validated", "", "fuzzy", 20'000, {}, "on", "6.12"},
    {"aed434ada685 .. across mount --move", {"corpus/dotdot-mount-aed434ada685.patch"}, "mount-move-dotdot", "ext4",
     {"parents=0", "moved=0"}, "dotdot_mountpoint", "", "fuzzy", 20'000, {}, "on", "6.12"},
    {"20aac6c60981 mount crossing", {"corpus/mount-cross-20aac6c60981.patch"}, "rename-umount", "ext4",
     {"mounted=1"}, "mount_cross", "", "fuzzy", 20'000, {}, "on", "6.12"},
    {"finding: symlink body cleared at eviction (6.12 as shipped)",
     {},
     "symlink-lookup",
     "ext4",
     {"ops=4"},
     "link_body",
     "",
     "free",
     20'000,
     {"findings/6.12/ext4-fast-symlink-keep-body.patch"},
     "off",
     "6.12"},
};

double median(std::vector<double> v) {
  if (v.empty()) return -1;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Seeds from 1: `count` whose widening holds `point` with at least 20 % and
// `min_delay_ns` (on), or is empty (off).
std::vector<uint64_t> pick_seeds(const std::string& point, uint32_t min_delay_ns, bool on, size_t count) {
  std::vector<uint64_t> out;
  for (uint64_t s = 1; out.size() < count && s < 10'000'000; ++s) {
    const auto c = leapfrog::widen::choose(s, leapfrog::widen::kBuiltInPoints, kObserverUid);
    bool has = false;
    for (const auto& p : c) has = has || (p.name == point && p.probability_ppm >= 200'000 && p.delay_ns >= min_delay_ns);
    if (on ? has : c.empty()) out.push_back(s);
  }
  return out;
}

struct Tally {
  int runs = 0, detected = 0, clean = 0, errors = 0;
  std::vector<double> s_to_first, lookups_to_first;
  double wall_min = 0;
  uint64_t lookups = 0;
  std::string notes;
};

struct Bench {
  leapfrog::coord::testing::TestDir dir;
  std::string data = dir / "coord", logs = dir / "logs";
  std::string cache = std::getenv("LEAPFROG_KBUILD_CACHE") ? std::getenv("LEAPFROG_KBUILD_CACHE")
                                                          : LEAPFROG_KBUILD_CACHE;
  std::string iterations = "2000";

  Result cli(std::vector<std::string> args, std::chrono::milliseconds timeout = 600s) {
    std::vector<std::string> argv = {LEAPFROG, "--data-dir", data};
    argv.insert(argv.end(), args.begin(), args.end());
    return run_to_end(argv, logs, timeout);
  }

  bool build(const std::string& label, const std::vector<std::string>& patches, const std::string& cmdline,
             const std::string& line) {
    std::vector<std::string> args = {"kernel", "build", label, "--source", source_of(line), "--widen",
                                     "--cache-dir", cache};
    for (const auto& p : patches) args.insert(args.end(), {"--patch", kTests + p});
    if (!cmdline.empty()) args.insert(args.end(), {"--cmdline", cmdline});
    const Result r = cli(args, 3000s);
    if (r.exit != 0)
      std::fprintf(stderr, "detect bench: kernel build %s failed (exit %d):\n%s%s\n", label.c_str(), r.exit,
                   r.out.c_str(), r.err.c_str());
    return r.exit == 0;
  }

  std::unique_ptr<Proc> boot(const std::string& label) {
    return std::make_unique<Proc>(
        std::vector<std::string>{LEAPFROG, "--data-dir", data, "vm", "run", "--kernel", label, "--cpus", "2",
                                 "--cache-dir", cache},
        logs + "/vm-" + label + ".out", logs + "/vm-" + label + ".err");
  }

  // One job of `bug` on `label` with `seed`, waited for, into `t`.
  // `rounds` overrides --iterations (the twin's extra jobs).
  void job(const Bug& bug, const std::string& label, uint64_t seed, Tally& t,
           const std::string& rounds = "") {
    std::vector<std::string> args = {"campaign",     "run",
                                     "--name",       "detect",
                                     "--scenario",   bug.scenario,
                                     "--fs",         bug.fs,
                                     "--kernel",     label,
                                     "--iterations", rounds.empty() ? iterations : rounds,
                                     "--first-seed", std::to_string(seed),
                                     "--seeds",      "1",
                                     "--align",      bug.align,
                                     "--pin",        bug.pin,
                                     "--wait",       "--json"};
    for (const auto& p : bug.params) args.insert(args.end(), {"--param", p});
    const auto started = Clock::now();
    const Result c = cli(args, 1800s);
    t.wall_min += std::chrono::duration<double>(Clock::now() - started).count() / 60;
    ++t.runs;
    if (c.exit != 0) {
      ++t.errors;
      t.notes = "campaign failed (exit " + std::to_string(c.exit) + "): " + (c.err + c.out).substr(0, 200);
      return;
    }
    const std::string campaign = std::to_string(json::parse(c.out).at("campaign").get<int64_t>());
    const Result o = cli({"outcomes", "--campaign", campaign, "--json"});
    for (const auto& rec : json::parse(o.exit == 0 ? o.out : "[]")) {
      const json& out = rec.at("outcome");
      const std::string verdict = out.value("verdict", "");
      t.lookups += std::stoull(out.value("lookups_checked", std::string("0")));
      if (verdict == "VERDICT_PASS") {
        ++t.clean;
      } else if (verdict == "VERDICT_VIOLATION" || verdict == "VERDICT_KERNEL_CRASH") {
        ++t.detected;
        const int64_t ns = std::stoll(out.value("first_violation_ns", std::string("-1")));
        if (ns > 0) {
          t.s_to_first.push_back(static_cast<double>(ns) / 1e9);
          t.lookups_to_first.push_back(
              static_cast<double>(std::stoull(out.value("ops_to_first_violation", std::string("0")))));
        }
      } else {
        ++t.errors;
        t.notes = verdict + ": " + out.value("error", "").substr(0, 160);
      }
    }
  }
};

std::string cell(const Tally& t) {
  char b[160];
  std::snprintf(b, sizeof b, "%d/%d | %s | %s | %.2f", t.detected, t.runs,
                t.s_to_first.empty() ? "–" : (std::to_string(median(t.s_to_first)).substr(0, 5) + " s").c_str(),
                t.lookups_to_first.empty() ? "–" : std::to_string(static_cast<long>(median(t.lookups_to_first))).c_str(),
                t.wall_min > 0 ? t.detected / t.wall_min : 0.0);
  return b;
}

}  // namespace

int main(int argc, char** argv) {
  size_t seeds = 3;
  uint64_t twin_lookups = 0;
  std::string only, out_file, iterations = "2000", twin_iterations;
  double twin_minutes = 0;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i], v = argv[i + 1];
    if (a == "--seeds") seeds = std::stoul(v);
    else if (a == "--iterations") iterations = v;
    else if (a == "--only") only = v;
    else if (a == "--out") out_file = v;
    else if (a == "--twin-lookups")
      twin_lookups = std::stoull(v);
    else if (a == "--twin-iterations")
      twin_iterations = v;
    else if (a == "--twin-minutes")
      twin_minutes = std::stod(v);
    else {
      std::fprintf(stderr,
                   "usage: %s [--seeds K] [--iterations N] [--only BUG] [--twin-lookups N] "
                   "[--twin-iterations N] [--twin-minutes M] [--out FILE]\n",
                   argv[0]);
      return 2;
    }
  }
  if (geteuid() != 0 || !stdfs::exists(source_of("6.1"))) {
    std::printf("detect bench: skipped (needs root and %s)\n", source_of("6.1").c_str());
    return 0;
  }
  Bench b;
  b.iterations = iterations;
  stdfs::create_directories(b.logs);
  Proc up({LEAPFROG, "up", "--agents", "0", "--data-dir", b.data, "--heartbeat-ms", "1000", "--lease-ms", "30000"},
          b.logs + "/up.out", b.logs + "/up.err");
  if (!poll_until([&] { return !slurp(b.data + "/address").empty(); }, 60s)) {
    std::fprintf(stderr, "detect bench: coordinator did not start: %s\n", tail_of(b.logs + "/up.err").c_str());
    return 1;
  }
  // Each line's twin (the line as shipped, with its points), built and
  // booted when its first bug comes: "twin" for 6.1, "twin-6.12", ...
  std::map<std::string, std::unique_ptr<Proc>> twin_vms;
  auto twin_of = [&](const std::string& line) -> std::string {
    const std::string label = line == "6.1" ? "twin" : "twin-" + line;
    if (!twin_vms.count(line)) {
      if (!b.build(label, {}, "", line)) return "";
      twin_vms[line] = b.boot(label);
    }
    return label;
  };

  std::string table =
      "| bug | scenario | off: detected | off: s to first | off: lookups to first | off: per min | "
      "on: detected | "
      "on: s to first | on: lookups to first | on: per min | on/off per min | twin: clean · "
      "lookups judged | "
      "load |\n"
      "|---|---|---|---|---|---|---|---|---|---|---|---|---|\n";
  std::string line_now;
  for (const Bug& bug : kBugs) {
    if (!only.empty() && (bug.name + " (Linux " + bug.line + ")").find(only) == std::string::npos) continue;
    if (!stdfs::exists(source_of(bug.line))) {
      std::printf("  note (%s): %s is not installed: the %s line is left out\n", bug.name.c_str(),
                  source_of(bug.line).c_str(), bug.line.c_str());
      continue;
    }
    if (bug.line != line_now) {
      line_now = bug.line;
      table += "| **Linux " + line_now + "** | | | | | | | | | | | | |\n";
    }
    // A finding's bug is the line as shipped, the line's shared twin build.
    const bool finding = bug.patches.empty();
    const std::string line_twin = twin_of(bug.line);
    if (line_twin.empty()) continue;
    const std::string label = finding ? line_twin : "bug" + std::to_string(&bug - kBugs.data());
    if (!finding && !b.build(label, bug.patches, "", bug.line)) continue;
    std::string twin = line_twin;
    std::unique_ptr<Proc> own_twin;
    if (!bug.twin_cmdline.empty() || !bug.twin_patches.empty()) {
      twin = label + "-off";
      if (!b.build(twin, bug.twin_cmdline.empty() ? bug.twin_patches : bug.patches,
                   bug.twin_cmdline, bug.line))
        continue;
      own_twin = b.boot(twin);
    }
    std::unique_ptr<Proc> vm = finding ? nullptr : b.boot(label);
    double load_before[1] = {0}, load_after[1] = {0};
    getloadavg(load_before, 1);
    Tally off, on, twin_t;
    std::vector<uint64_t> used;
    for (const bool widen : {false, true}) {
      for (const uint64_t seed : pick_seeds(bug.point, bug.min_delay_ns, widen, seeds)) {
        b.job(bug, label, seed, widen ? on : off);
        b.job(bug, twin, seed, twin_t);
        used.push_back(seed);
      }
    }
    // For a bug the row detected: more twin jobs, each seed with its own
    // widening, until the twin judged twin_lookups (at most 2000 jobs; stop
    // early if jobs judge nothing).
    int empty_in_a_row = 0;
    const bool detected = off.detected + on.detected > 0;
    for (uint64_t seed = 1; detected && twin_t.lookups < twin_lookups && twin_t.runs < 2000; ++seed) {
      if (std::find(used.begin(), used.end(), seed) != used.end()) continue;
      if (twin_minutes > 0 && twin_t.wall_min >= twin_minutes) {
        twin_t.notes = "the twin's " + std::to_string(static_cast<int>(twin_minutes)) +
                       " minutes ran out before --twin-lookups";
        break;
      }
      const uint64_t before = twin_t.lookups;
      b.job(bug, twin, seed, twin_t, twin_iterations);
      empty_in_a_row = twin_t.lookups == before ? empty_in_a_row + 1 : 0;
      if (empty_in_a_row == 3) {
        twin_t.notes = "three twin jobs in a row judged no lookup: --twin-lookups stopped";
        break;
      }
    }
    getloadavg(load_after, 1);
    if (vm) vm->stop();
    if (own_twin) own_twin->stop();
    const double off_rate = off.wall_min > 0 ? off.detected / off.wall_min : 0;
    const double on_rate = on.wall_min > 0 ? on.detected / on.wall_min : 0;
    char ratio[32];
    if (off_rate > 0)
      std::snprintf(ratio, sizeof ratio, "%.1f×", on_rate / off_rate);
    else
      std::snprintf(ratio, sizeof ratio, on_rate > 0 ? "∞ (none off)" : "–");
    char twin_cell[96];
    std::snprintf(twin_cell, sizeof twin_cell, "%d/%d · %llu", twin_t.clean, twin_t.runs,
                  static_cast<unsigned long long>(twin_t.lookups));
    std::string row = "| " + bug.name + " | `" + bug.scenario + "` " + bug.fs;
    for (const auto& p : bug.params) row += " " + p;
    char load[48];
    std::snprintf(load, sizeof load, "%.1f → %.1f", load_before[0], load_after[0]);
    row += " | " + cell(off) + " | " + cell(on) + " | " + ratio + " | " + twin_cell + " | " + load +
           " |\n";
    table += row;
    std::printf("%s", row.c_str());
    std::fflush(stdout);
    for (const Tally* t : {&off, &on, &twin_t})
      if (!t->notes.empty()) std::printf("  note (%s): %s\n", bug.name.c_str(), t->notes.c_str());
  }
  for (auto& [line, vm] : twin_vms) vm->stop();
  up.stop();

  utsname u{};
  uname(&u);
  const std::time_t now = std::time(nullptr);
  char date[32];
  std::strftime(date, sizeof date, "%Y-%m-%d", std::gmtime(&now));
  const std::string head =
      std::string("Measured ") + date + " on " + u.nodename + " (" + u.machine + ", " +
      std::to_string(sysconf(_SC_NPROCESSORS_ONLN)) + " CPUs), VMs under QEMU TCG with 2 vCPUs; " +
      std::to_string(seeds) + " seeds per cell, " + iterations + " rounds per job" +
      (twin_lookups
           ? ", twins raced to " + std::to_string(twin_lookups) + " lookups" +
                 (twin_iterations.empty() ? "" : " in jobs of " + twin_iterations + " rounds")
           : "") +
      "; load: the host's 1-minute load average before and after the row.\n\n";
  std::printf("\n%s%s", head.c_str(), table.c_str());
  if (!out_file.empty()) std::ofstream(out_file) << head << table;
  return 0;
}
