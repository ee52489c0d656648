// End-to-end tests of the leapfrog-agent binary on the real kernel: the
// positive control (FUSE with kernel caching) must fire, correct file systems
// must stay clean, histories round-trip through `check`, and bad input gets a
// one-line error with exit 2. Needs root, like the agent itself.

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "scenarios/fs/view.h"
#include "scenarios/fs/workspace.h"
#include "tests/process_util.h"

namespace {

using nlohmann::json;
namespace stdfs = std::filesystem;

using leapfrog::testing::Result;
using leapfrog::testing::slurp;

class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/leapfrog-e2e-XXXXXX";
    path_ = mkdtemp(tmpl);
  }
  ~TempDir() { stdfs::remove_all(path_); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// Runs argv with stdout and stderr captured in files (no pipe deadlocks).
Result run(const std::vector<std::string>& argv) {
  TempDir dir;
  return leapfrog::testing::run_to_end(argv, dir.path(), std::chrono::minutes(10));
}

Result agent(std::vector<std::string> args) {
  args.insert(args.begin(), LEAPFROG_AGENT);
  return run(args);
}

json run_json(const std::vector<std::string>& args, int want_exit) {
  std::vector<std::string> a = {"run", "--json"};
  a.insert(a.end(), args.begin(), args.end());
  Result r = agent(a);
  EXPECT_EQ(r.exit, want_exit) << r.out << r.err;
  try {
    return json::parse(r.out);
  } catch (const std::exception&) {
    ADD_FAILURE() << "not JSON: " << r.out << r.err;
    return json::object();
  }
}

uint64_t kind_count(const json& o, const char* kind) {
  const auto& by = o.at("violations_by_kind");
  return by.contains(kind) ? by.at(kind).get<uint64_t>() : 0;
}

std::set<std::string> run_folders() {
  std::set<std::string> s;
  for (const auto& e : stdfs::directory_iterator("/tmp"))
    if (e.path().filename().string().rfind("leapfrog-run-", 0) == 0) s.insert(e.path());
  return s;
}

// Run folders (/tmp/leapfrog-run-<supervisor pid>-<start>-*) not in `before`
// whose supervisor is gone: left behind. A folder of a run still in flight
// belongs to another process on the machine (another test binary), not to
// this test, whose runs have all ended. A live pid with another start time is
// a reused pid: its folder is left behind too.
std::set<std::string> left_behind(const std::set<std::string>& before) {
  std::set<std::string> out;
  for (const auto& f : run_folders()) {
    if (before.count(f)) continue;
    const pid_t pid = std::atoi(stdfs::path(f).filename().string().c_str() + std::strlen("leapfrog-run-"));
    const std::string live = pid > 0 ? leapfrog::fs::run_folder_prefix(pid) : "";
    if (!live.empty() && f.rfind(live, 0) == 0) continue;
    out.insert(f);
  }
  return out;
}

// Mounts that a Leapfrog run could have leaked into this namespace.
std::string mountinfo() {
  std::istringstream in(slurp("/proc/self/mountinfo"));
  std::string line, out;
  while (std::getline(in, line)) {
    if (line.find("leapfrog") != std::string::npos || line.find("/dev/loop") != std::string::npos) out += line + "\n";
  }
  return out;
}

class AgentE2E : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "needs root";
    folders_ = run_folders();
    mounts_ = mountinfo();
  }
  void TearDown() override {
    if (geteuid() != 0) return;
    // Every run keeps its mounts and temp folder to itself.
    EXPECT_EQ(left_behind(folders_), std::set<std::string>());
    EXPECT_EQ(mountinfo(), mounts_);
  }

 private:
  std::set<std::string> folders_;
  std::string mounts_;
};

// ---- the positive control and its negative --------------------------------

TEST_F(AgentE2E, SetattrOnCachedFuseReportsStaleGrant) {
  json o = run_json({"--scenario", "setattr-lookup", "--fs", "fuse-cached", "--duration", "2s"}, 1);
  EXPECT_EQ(o["verdict"], "violation");
  EXPECT_GT(kind_count(o, "stale-grant"), 0u);
  ASSERT_FALSE(o["violations"].empty());
  const json& v = o["violations"][0];
  EXPECT_EQ(v["kind"], "stale-grant");
  EXPECT_FALSE(v["versions"].empty());  // the report names the versions possible in the window
  EXPECT_FALSE(v["steps"].empty());
}

TEST_F(AgentE2E, RenameOnCachedFuseReportsStaleEntryOrGrant) {
  json o = run_json({"--scenario", "rename-lookup", "--fs", "fuse-cached", "--duration", "2s"}, 1);
  EXPECT_GT(kind_count(o, "stale-entry") + kind_count(o, "stale-grant"), 0u);
}

// typeflip-lookup's control: the cached FUSE view keeps serving the old type
// of "n" after the mutator changed it (ENOTDIR from a replaced file, or a
// walk through a replaced symlink or directory).
TEST_F(AgentE2E, TypeflipOnCachedFuseReportsStaleEntry) {
  json o = run_json({"--scenario", "typeflip-lookup", "--fs", "fuse-cached", "--iterations", "3000",
                     "--align", "fuzzy"},
                    1);
  EXPECT_EQ(o["verdict"], "violation");
  EXPECT_GT(kind_count(o, "stale-entry"), 0u);
  ASSERT_FALSE(o["violations"].empty());
  const json& v = o["violations"][0];
  EXPECT_EQ(v["kind"], "stale-entry");
  EXPECT_EQ(v["object"], "entry(., \"n\")");
  EXPECT_FALSE(v["versions"].empty());
}

// exec-setid's control on the cached FUSE view: exec passes on a cached mode
// after its exec bit (or bin's search) was revoked. FUSE mounts are nosuid,
// so the set-id gain itself cannot fire there: see ExecSetidGainInForeignHistory.
// Fuzzy alignment here; free-running in the next test.
TEST_F(AgentE2E, ExecSetidOnCachedFuseReportsStaleGrant) {
  json o = run_json({"--scenario", "exec-setid", "--fs", "fuse-cached", "--iterations", "3000",
                     "--align", "fuzzy"},
                    1);
  EXPECT_EQ(o["verdict"], "violation");
  EXPECT_GT(kind_count(o, "stale-grant"), 0u);
  ASSERT_FALSE(o["violations"].empty());
  const json& v = o["violations"][0];
  EXPECT_EQ(v["kind"], "stale-grant");
  EXPECT_EQ(v["op"].get<std::string>().rfind("execve", 0), 0u) << v.dump();
}

// The same control free-running. Back to back, the mutator would change the
// mode many times within one execve (a chmod takes microseconds, an execve
// hundreds), every mode would be possible in each window, and nothing could
// be shown stale; paced by the observer's median execve, it leaves most
// modes in place long enough for whole execves to see them.
TEST_F(AgentE2E, ExecSetidOnCachedFuseIsCaughtFreeRunningWithAPacedMutator) {
  json o = run_json({"--scenario", "exec-setid", "--fs", "fuse-cached", "--iterations", "3000",
                     "--align", "free"},
                    1);
  EXPECT_EQ(o["strategy"]["alignment"], "free");
  EXPECT_EQ(o["verdict"], "violation");
  EXPECT_GT(kind_count(o, "stale-grant"), 0u);
  EXPECT_GT(o["timing"]["pace_ns"].get<int64_t>(), 0) << o["timing"].dump();
}

// The set-id gain's control: a hand-built history (a gain after the bit was
// removed, a gain with the bit of one version and the owner of another) that
// `check` must flag, next to its legal twin that it must pass.
TEST_F(AgentE2E, ExecSetidGainInForeignHistory) {
  const std::string dir = std::string(LEAPFROG_SOURCE) + "/scenarios/testdata/";
  Result bad = agent({"check", dir + "exec_setid_illegal.jsonl", "--json"});
  EXPECT_EQ(bad.exit, 1) << bad.err;
  json o = json::parse(bad.out);
  EXPECT_EQ(kind_count(o, "stale-grant"), 6u);
  EXPECT_EQ(kind_count(o, "stale-deny"), 1u);
  bool gain = false;
  for (const auto& v : o["violations"])
    gain |= v["observed"] == "success: ran with euid=0 egid=65534";
  EXPECT_TRUE(gain) << bad.out;
  Result good = agent({"check", dir + "exec_setid_legal.jsonl"});
  EXPECT_EQ(good.exit, 0) << good.out << good.err;
}

// On a plain tmpfs the set-id bits apply: the observers really gain the
// helper's owner and group, so the clean runs above judged gains.
TEST_F(AgentE2E, ExecSetidObserversGainPrivilegeOnTmpfs) {
  TempDir dir;
  const std::string file = dir.path() + "/h.jsonl";
  // Fuzzy: one mutation a round, so every set-id state meets some execve.
  run_json(
      {"--scenario", "exec-setid", "--iterations", "3000", "--history", file, "--align", "fuzzy"},
      0);
  std::istringstream in(slurp(file));
  std::string line;
  std::set<std::string> seen;
  while (std::getline(in, line)) {
    json j = json::parse(line);
    if (j.value("type", "") == "lookup" && j.contains("euid"))
      seen.insert(j["op"].get<std::string>() + " " + std::to_string(j["euid"].get<uint32_t>()) +
                  " " + std::to_string(j["egid"].get<uint32_t>()));
  }
  EXPECT_TRUE(seen.count("execve 0 65534")) << line;
  EXPECT_TRUE(seen.count("execve-script 0 65534"));
  EXPECT_TRUE(seen.count("execve 65533 65534"));
  EXPECT_TRUE(seen.count("execve 65534 65533"));
}

// ---- the mount shapes' positive controls ------------------------------------

// Lines of a history file, and the same lines written back.
std::vector<json> read_lines(const std::string& file) {
  std::vector<json> out;
  std::istringstream in(slurp(file));
  std::string line;
  while (std::getline(in, line))
    if (!line.empty()) out.push_back(json::parse(line));
  return out;
}

void write_lines(const std::string& file, const std::vector<json>& lines) {
  std::ofstream out(file);
  for (const auto& j : lines) out << j.dump() << "\n";
}

// A real run's history (so the model is the scenario's own), with one
// successful lookup of `path` replaced by `change`, must be flagged by
// `check` once, as `kinds` (one of them); the untouched history passes.
void expect_tampered_flagged(const std::string& scenario, const std::string& fs,
                             const std::string& path,
                             const std::function<bool(json&, const std::vector<json>&)>& change,
                             const std::set<std::string>& kinds) {
  TempDir dir;
  const std::string file = dir.path() + "/h.jsonl", bad = dir.path() + "/bad.jsonl";
  run_json({"--scenario", scenario, "--fs", fs, "--iterations", "3000", "--history", file}, 0);
  std::vector<json> lines = read_lines(file);
  bool changed = false;
  for (auto& j : lines) {
    if (j.value("type", "") != "lookup" || j["path"] != path || j["result"] != "ok") continue;
    if ((changed = change(j, lines))) break;
  }
  ASSERT_TRUE(changed) << scenario << ": no lookup of " << path << " to change";
  write_lines(bad, lines);
  Result r = agent({"check", bad, "--json"});
  EXPECT_EQ(r.exit, 1) << r.out << r.err;
  json o = json::parse(r.out);
  EXPECT_EQ(o["violation_count"], 1) << r.out.substr(0, 2000);
  uint64_t n = 0;
  for (const auto& k : kinds) n += kind_count(o, k.c_str());
  EXPECT_EQ(n, 1u) << r.out.substr(0, 2000);
  EXPECT_EQ(agent({"check", file}).exit, 0);
}

// The hard errors a torn lockless ".." returns before its final check:
// ENOENT where both parents hold g, EACCES where every directory is open.
TEST_F(AgentE2E, MountMoveDotdotFlagsTornAnswersInItsOwnHistory) {
  auto fail = [](const char* err) {
    return [err](json& j, const std::vector<json>&) {
      j["result"] = err;
      j.erase("dev");
      j.erase("ino");
      return true;
    };
  };
  expect_tampered_flagged("mount-move-dotdot", "tmpfs", "../g", fail("ENOENT"), {"stale-entry"});
  expect_tampered_flagged("mount-move-dotdot", "ext4", "../../k2/g", fail("EACCES"),
                          {"stale-deny"});
  // ".." reached the parent the mount was not on: the other parent's g, in
  // a window no move overlaps.
  auto other_parent = [](json& j, const std::vector<json>& lines) {
    const json& nodes = lines.at(0).at("nodes");
    // Each parent is its own tmpfs: their g may share an inode number.
    json ga, gb;
    for (const auto& n : nodes) {
      if (n["name"] == "tmpfs:pa/g") ga = n;
      if (n["name"] == "tmpfs:pb/g") gb = n;
    }
    if (ga.is_null() || gb.is_null()) return false;
    const int64_t eps = lines.at(0).value("epsilon_ns", int64_t{0});
    const int64_t a = j["invoke"].get<int64_t>() - eps, b = j["complete"].get<int64_t>() + eps;
    for (const auto& m : lines)
      if (m.value("type", "") == "mutate" && m["op"] == "mount-move" &&
          m["invoke"].get<int64_t>() <= b && m["complete"].get<int64_t>() >= a)
        return false;
    const json& other = j["dev"] == ga["dev"] && j["ino"] == ga["ino"] ? gb : ga;
    j["dev"] = other["dev"];
    j["ino"] = other["ino"];
    return true;
  };
  expect_tampered_flagged("mount-move-dotdot", "tmpfs", "../g", other_parent, {"stale-entry"});
}

// A stray ENOENT where every version of p/d/f exists.
TEST_F(AgentE2E, RenameUmountFlagsAStrayEnoentInItsOwnHistory) {
  auto enoent = [](json& j, const std::vector<json>&) {
    j["result"] = "ENOENT";
    j.erase("dev");
    j.erase("ino");
    return true;
  };
  for (const char* fs : {"tmpfs", "ext4"})
    expect_tampered_flagged("rename-umount", fs, "p/d/f", enoent, {"wrong-mount", "stale-entry"});
}

// rename-umount's control on the cached FUSE view: the kernel keeps the
// entries of p/d and q/e that the exchange in the backing tree replaced, so
// a lookup reaches the other directory's f.
TEST_F(AgentE2E, RenameUmountOnCachedFuseReportsStaleEntries) {
  json o = run_json({"--scenario", "rename-umount", "--fs", "fuse-cached", "--iterations", "3000"}, 1);
  EXPECT_EQ(o["verdict"], "violation");
  EXPECT_GT(kind_count(o, "wrong-mount") + kind_count(o, "stale-entry"), 0u) << o.dump().substr(0, 2000);
}

// The mount shapes' other trees: plain parents and a moved tmpfs; a disk
// directory bound instead of a tmpfs.
TEST_F(AgentE2E, MountShapesStayCleanWithTheirOtherTrees) {
  for (const char* fs : {"tmpfs", "ext4"}) {
    for (const std::vector<std::string>& params :
         {std::vector<std::string>{"mount-move-dotdot", "parents=1", "moved=1"},
          std::vector<std::string>{"mount-move-dotdot", "parents=0", "moved=1"},
          std::vector<std::string>{"mount-move-dotdot", "parents=1", "moved=0"},
          std::vector<std::string>{"rename-umount", "mounted=1", "inside=1"}}) {
      json o = run_json({"--scenario", params[0], "--fs", fs, "--param", params[1], "--param",
                         params[2], "--iterations", "3000"},
                        0);
      EXPECT_EQ(o["verdict"], "pass") << fs << " " << params[1] << " " << o.dump().substr(0, 2000);
      EXPECT_GE(o["lookups_checked"].get<uint64_t>(), 3000u);
      EXPECT_GT(o["mutations"].get<uint64_t>(), 10u);
    }
  }
}

// The largest resident set of `leapfrog-agent run ARGS --json` and of the
// processes it waited for (its actors), in KiB, and its outcome.
std::pair<long, json> peak_rss_of_run(const std::vector<std::string>& args) {
  TempDir dir;
  std::vector<std::string> argv = {LEAPFROG_AGENT, "run", "--json"};
  argv.insert(argv.end(), args.begin(), args.end());
  const std::string out = dir.path() + "/out", err = dir.path() + "/err";
  const pid_t pid = fork();
  if (pid == 0) {
    std::vector<char*> a;
    for (auto& s : argv) a.push_back(s.data());
    a.push_back(nullptr);
    const int o = open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    const int e = open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    dup2(o, 1);
    dup2(e, 2);
    execv(a[0], a.data());
    _exit(127);
  }
  int status = 0;
  rusage ru{};
  EXPECT_EQ(wait4(pid, &status, 0, &ru), pid);
  EXPECT_TRUE(WIFEXITED(status)) << slurp(err);
  json o = json::object();
  try {
    o = json::parse(slurp(out));
  } catch (const std::exception&) {
    ADD_FAILURE() << "not JSON: " << slurp(out) << slurp(err);
  }
  return {ru.ru_maxrss, o};
}

// ---- jobs of any length ----------------------------------------------------

// The run judges as it goes and forgets what it judged: a run twice as long
// takes no more memory (the whole history held to the end took ~150 bytes an
// operation, so twice the length was nearly twice the memory).
TEST_F(AgentE2E, PeakMemoryDoesNotGrowWithTheRunsLength) {
  // A lookup race, and foffset, which judges each pass over its shared file
  // as the peers leave it (fuzzy: they rewind together and go on).
  for (const char* scenario : {"setattr-lookup", "foffset"}) {
    std::vector<long> peaks;
    std::vector<uint64_t> ops;
    for (const char* duration : {"3s", "6s"}) {
      std::vector<std::string> args = {"--scenario", scenario, "--fs", "tmpfs", "--duration", duration,
                                       "--observers", "2"};
      args.insert(args.end(), {"--align", std::string(scenario) == "foffset" ? "fuzzy" : "free"});
      auto [rss, o] = peak_rss_of_run(args);
      EXPECT_EQ(o.value("verdict", ""), "pass") << scenario << ": " << o.dump().substr(0, 2000);
      peaks.push_back(rss);
      ops.push_back(o.value("ops", uint64_t{0}));
    }
    // Enough more operations that holding them would show: 15 MB at 150 B
    // each, against a 10 % margin of ~2 MB.
    ASSERT_GT(ops[1], ops[0]) << scenario;
    EXPECT_GT(ops[1] - ops[0], 100'000u) << scenario << ": too few operations to tell";
    EXPECT_LE(peaks[1], peaks[0] * 11 / 10)
        << scenario << ": peak RSS " << peaks[0] << " KiB for " << ops[0] << " ops, " << peaks[1]
        << " KiB for " << ops[1];
  }
}

TEST_F(AgentE2E, CorrectFileSystemsStayCleanOver100kLookups) {
  for (const char* fs : {"tmpfs", "fuse-direct"}) {
    for (const char* scenario : {"setattr-lookup", "rename-lookup"}) {
      // Fuzzy alignment: race_window_hits counts aligned rounds only.
      json o = run_json(
          {"--scenario", scenario, "--fs", fs, "--iterations", "100000", "--align", "fuzzy"}, 0);
      EXPECT_EQ(o["verdict"], "pass") << fs << " " << scenario << " " << o.dump().substr(0, 2000);
      EXPECT_GE(o["lookups_checked"].get<uint64_t>(), 100000u) << fs << " " << scenario;
      EXPECT_GT(o["race_window_hits"].get<uint64_t>(), 0u) << fs << " " << scenario;
    }
  }
}

// ---- every scenario on tmpfs and ext4 --------------------------------------

class EveryScenario : public AgentE2E, public ::testing::WithParamInterface<std::tuple<std::string, std::string>> {};

TEST_P(EveryScenario, RunsClean) {
  const auto& [scenario, fs] = GetParam();
  // A fixed number of rounds, not a duration: the counts below must not
  // depend on how loaded the machine is.
  std::vector<std::string> args = {"--scenario", scenario, "--fs", fs, "--iterations", "3000"};
  if (scenario == "lookup-scale")
    args = {"--scenario",  scenario,  "--fs",         fs,        "--param",
            "point_ms=20", "--param", "warmup_ms=20", "--param", "samples=2"};
  json o = run_json(args, 0);
  EXPECT_EQ(o["verdict"], "pass") << o.dump().substr(0, 2000);
  EXPECT_EQ(o["scenario"], scenario);
  EXPECT_EQ(o["fs"], fs);
  EXPECT_GT(o["ops"].get<uint64_t>(), 0u);
  EXPECT_GT(o["ops_per_sec"].get<double>(), 0.0);
  for (const char* key : {"seed", "lookups_checked", "violations", "race_window_hits"}) {
    EXPECT_TRUE(o.contains(key)) << key;
  }
  if (scenario == "foffset") {
    EXPECT_GE(o["offsets_checked"].get<uint64_t>(), 3000u);
  }
  if (scenario == "lookup-scale") {
    EXPECT_FALSE(o["scale"].empty());
  } else if (scenario != "foffset") {
    EXPECT_GE(o["lookups_checked"].get<uint64_t>(), 3000u);
    EXPECT_GT(o["mutations"].get<uint64_t>(), 10u);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Catalogue, EveryScenario,
    ::testing::Combine(::testing::Values("setattr-lookup", "chown-lookup", "acl-exec-deny",
                                         "rename-lookup", "mount-lookup", "dotdot-lookup",
                                         "symlink-lookup", "dirfd-lookup", "foffset",
                                         "lookup-scale", "typeflip-lookup", "exec-setid",
                                         "beneath-lookup", "cached-lookup", "mount-move-dotdot",
                                         "rename-umount"),
                       ::testing::Values("tmpfs", "ext4")),
    [](const auto& info) {
      std::string n = std::get<0>(info.param) + "_" + std::get<1>(info.param);
      for (auto& c : n)
        if (c == '-') c = '_';
      return n;
    });

// The type and set-id shapes on the other disk file systems: xfs and btrfs
// keep negative dentries like ext4, and each caches inodes its own way.
INSTANTIATE_TEST_SUITE_P(TypeAndSetidOnDisk, EveryScenario,
                         ::testing::Combine(::testing::Values("typeflip-lookup", "exec-setid"),
                                            ::testing::Values("xfs", "btrfs")),
                         [](const auto& info) {
                           std::string n = std::get<0>(info.param) + "_" + std::get<1>(info.param);
                           for (auto& c : n)
                             if (c == '-') c = '_';
                           return n;
                         });

// The mount shapes on the other disk file systems, which keep the negative
// dentries their traps rely on like ext4.
INSTANTIATE_TEST_SUITE_P(MountShapesOnDisk, EveryScenario,
                         ::testing::Combine(::testing::Values("mount-move-dotdot", "rename-umount"),
                                            ::testing::Values("xfs", "btrfs")),
                         [](const auto& info) {
                           std::string n = std::get<0>(info.param) + "_" + std::get<1>(info.param);
                           for (auto& c : n)
                             if (c == '-') c = '_';
                           return n;
                         });

// The openat2 scenarios on the other disk file systems too.
INSTANTIATE_TEST_SUITE_P(Openat2, EveryScenario,
                         ::testing::Combine(::testing::Values("beneath-lookup", "cached-lookup"),
                                            ::testing::Values("xfs", "btrfs")),
                         [](const auto& info) {
                           std::string n = std::get<0>(info.param) + "_" + std::get<1>(info.param);
                           for (auto& c : n)
                             if (c == '-') c = '_';
                           return n;
                         });

// ---- openat2: the FUSE control, and hand-built histories where none fires ---

// FUSE with kernel caching serves stale entries to both walks; the lockless
// (RESOLVE_CACHED) walk's violations are told apart by their op and a note.
TEST_F(AgentE2E, CachedLookupOnCachedFuseReportsFastPathViolations) {
  TempDir dir;
  const std::string file = dir.path() + "/cached.jsonl";
  json o = run_json(
      {"--scenario", "cached-lookup", "--fs", "fuse-cached", "--duration", "2s", "--history", file},
      1);
  EXPECT_EQ(o["verdict"], "violation");
  size_t cached = 0;
  for (const auto& v : o["violations"]) cached += v["op"] == "openat2-cached";
  EXPECT_GT(cached, 0u) << o.dump().substr(0, 2000);
  bool noted = false;
  for (const auto& n : o["notes"])
    noted = noted || n.get<std::string>().find("RESOLVE_CACHED walks") != std::string::npos;
  EXPECT_TRUE(noted) << o["notes"].dump();
  // The resolve flags survive the history file.
  Result r = agent({"check", file, "--json"});
  EXPECT_EQ(r.exit, 1) << r.err;
  json offline = json::parse(r.out);
  EXPECT_EQ(offline["violation_count"], o["violation_count"]);
  EXPECT_EQ(offline["violations_by_kind"], o["violations_by_kind"]);
}

// The stale FUSE dcache is a consistent old tree: ".." of the moved directory
// still leads to its old parent, so scoped walks see stale entries, never an
// escape (the escape control is the hand-built history below).
TEST_F(AgentE2E, BeneathLookupOnCachedFuseReportsStaleEntryNotEscape) {
  json o = run_json({"--scenario", "beneath-lookup", "--fs", "fuse-cached", "--duration", "2s"}, 1);
  EXPECT_GT(kind_count(o, "stale-entry"), 0u) << o.dump().substr(0, 2000);
  EXPECT_EQ(kind_count(o, "escape"), 0u) << o.dump().substr(0, 2000);
}

TEST_F(AgentE2E, HandBuiltOpenat2HistoriesAreJudged) {
  const std::string testdata = std::string(LEAPFROG_SOURCE) + "/scenarios/testdata/";
  Result escape = agent({"check", testdata + "escape.jsonl", "--json"});
  EXPECT_EQ(escape.exit, 1) << escape.err;
  json e = json::parse(escape.out);
  EXPECT_EQ(kind_count(e, "escape"), 1u) << escape.out;
  EXPECT_EQ(e["violations"][0]["kind"], "escape");
  Result illegal = agent({"check", testdata + "openat2_illegal.jsonl", "--json"});
  EXPECT_EQ(illegal.exit, 1) << illegal.err;
  EXPECT_EQ(json::parse(illegal.out)["violation_count"], 9);
  Result legal = agent({"check", testdata + "openat2_legal.jsonl", "--json"});
  EXPECT_EQ(legal.exit, 0) << legal.out << legal.err;
}

TEST_F(AgentE2E, StaticAclDenyHolds) {
  // Rounds, not a duration: a loaded machine must not turn this into a
  // test of speed. Both observers (the denied one and the other) look up
  // every round, and every lookup is judged.
  json o = run_json({"--scenario", "acl-exec-deny", "--param", "static=1", "--iterations", "1000",
                     "--align", "fuzzy"},
                    0);
  EXPECT_EQ(o["verdict"], "pass");
  EXPECT_EQ(o["lookups_checked"].get<uint64_t>(), 2000u);
}

TEST_F(AgentE2E, FreeRunningAlignment) {
  json o = run_json({"--scenario", "setattr-lookup", "--align", "free", "--observers", "2", "--duration", "500ms"}, 0);
  EXPECT_EQ(o["alignment"], "free");
}

// Mixed alignment on tmpfs: in one run the first observer meets the mutator
// at the barrier (fresh clock reads, its rounds overlap the mutator's), the
// second runs free (each lookup's invoke is its previous completion). The
// history header says which is which, and the records agree; the chain check
// is applied to both observers, so it fires on the free one and stays quiet on
// the aligned one.
TEST_F(AgentE2E, MixedAlignmentRunsAlignedAndFreeObserversInOneRun) {
  TempDir dir;
  const std::string file = dir.path() + "/mixed.jsonl";
  json o = run_json({"--scenario", "setattr-lookup", "--fs", "tmpfs", "--align", "both",
                     "--observers", "2", "--pin", "on", "--iterations", "3000", "--history", file},
                    0);
  ASSERT_TRUE(o.contains("strategy")) << o.dump().substr(0, 2000);
  const json& st = o["strategy"];
  EXPECT_EQ(st["alignment"], "both");
  EXPECT_EQ(o["alignment"], "both");
  EXPECT_EQ(st["observers"], 2);
  EXPECT_EQ(st["aligned_observers"], 1);
  EXPECT_EQ(st["free_observers"], 1);
  EXPECT_EQ(st["pinned"], true);
  EXPECT_EQ(st["chosen_by_seed"], json::array());
  EXPECT_EQ(st["widening"].get<std::string>().rfind("off", 0), 0u) << st.dump();
  EXPECT_GT(o["race_window_hits"].get<uint64_t>(), 0u);  // the aligned observer's

  std::istringstream in(slurp(file));
  std::string line;
  ASSERT_TRUE(std::getline(in, line));
  const json header = json::parse(line);
  std::map<uint32_t, std::string> align;
  for (const auto& a : header.at("actors"))
    align[a.at("id").get<uint32_t>()] = a.value("align", "");
  EXPECT_EQ(align, (std::map<uint32_t, std::string>{{0, "fuzzy"}, {1, "fuzzy"}, {2, "free"}}));
  std::map<uint32_t, std::vector<std::pair<int64_t, int64_t>>>
      windows;  // per observer, in file order
  while (std::getline(in, line)) {
    const json j = json::parse(line);
    if (j.value("type", "") != "lookup") continue;
    windows[j["actor"].get<uint32_t>()].emplace_back(j["invoke"].get<int64_t>(),
                                                     j["complete"].get<int64_t>());
  }
  ASSERT_EQ(windows[1].size(), 3000u);
  // The free observer raced on past its 3000 rounds while the aligned pair was not done.
  ASSERT_GE(windows[2].size(), 3000u);
  auto chained = [](std::vector<std::pair<int64_t, int64_t>> w) {
    std::sort(w.begin(), w.end());
    size_t n = 0;
    for (size_t i = 1; i < w.size(); ++i) n += w[i].first == w[i - 1].second;
    return n;
  };
  EXPECT_EQ(chained(windows[2]), windows[2].size() - 1);  // free: one clock read a lookup
  EXPECT_EQ(chained(windows[1]), 0u);                     // aligned: a barrier between lookups
}

// With --strategy seed (what every job runs with) the seed chooses the
// strategy, the same way every time; a flag fixes its field and leaves the
// others to the seed. Without it a run by hand is fuzzy, pinned, with the
// scenario's observers.
TEST_F(AgentE2E, TheSeedChoosesTheStrategyAndFlagsFixIt) {
  const std::vector<std::string> base = {"--scenario", "setattr-lookup", "--iterations", "500",
                                         "--strategy", "seed"};
  std::set<std::string> alignments;
  for (const char* seed : {"1", "2", "10"}) {
    std::vector<std::string> args = base;
    args.insert(args.end(), {"--seed", seed});
    const json a = run_json(args, 0)["strategy"];
    const json b = run_json(args, 0)["strategy"];
    EXPECT_EQ(a, b) << seed;
    EXPECT_EQ(a["chosen_by_seed"], json({"alignment", "observers", "pin"}));
    alignments.insert(a["alignment"].get<std::string>());
    args.insert(args.end(), {"--align", "fuzzy", "--pin", "off"});
    const json fixed = run_json(args, 0)["strategy"];
    EXPECT_EQ(fixed["alignment"], "fuzzy");
    EXPECT_EQ(fixed["pinned"], false);
    EXPECT_EQ(fixed["chosen_by_seed"], json({"observers"}));
  }
  // Seeds 1, 2 and 10 choose free, both and fuzzy (scenarios/strategy_test.cc
  // checks the shares over many seeds).
  EXPECT_EQ(alignments, (std::set<std::string>{"free", "both", "fuzzy"}));
  const json by_hand = run_json({"--scenario", "setattr-lookup", "--iterations", "500", "--seed", "1"}, 0)["strategy"];
  EXPECT_EQ(by_hand["alignment"], "fuzzy");
  EXPECT_EQ(by_hand["pinned"], true);
  EXPECT_EQ(by_hand["observers"], 1);
  EXPECT_EQ(by_hand["chosen_by_seed"], json::array());
}

// ---- histories -------------------------------------------------------------

TEST_F(AgentE2E, HistoryRecheckGivesSameVerdict) {
  TempDir dir;
  for (const char* fs : {"tmpfs", "fuse-cached"}) {
    const std::string file = dir.path() + "/" + fs + ".jsonl";
    const int want = std::string(fs) == "tmpfs" ? 0 : 1;
    json live = run_json({"--scenario", "setattr-lookup", "--fs", fs, "--duration", "1s", "--history", file}, want);
    Result r = agent({"check", file, "--json"});
    EXPECT_EQ(r.exit, want) << r.err;
    json offline = json::parse(r.out);
    EXPECT_EQ(offline["verdict"], live["verdict"]);
    EXPECT_EQ(offline["violation_count"], live["violation_count"]);
    EXPECT_EQ(offline["lookups_checked"], live["lookups_checked"]);
    EXPECT_EQ(offline["violations_by_kind"], live["violations_by_kind"]);
  }
}

TEST_F(AgentE2E, ForeignHistoryIsChecked) {
  Result r = agent({"check", std::string(LEAPFROG_SOURCE) + "/scenarios/testdata/stale_grant.jsonl"});
  EXPECT_EQ(r.exit, 1);
  EXPECT_NE(r.out.find("stale-grant"), std::string::npos);
}

// ---- bad input: one line, exit 2 -------------------------------------------

void expect_usage_error(const Result& r, const std::string& want) {
  EXPECT_EQ(r.exit, 2) << r.out << r.err;
  EXPECT_NE(r.err.find(want), std::string::npos) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
}

TEST_F(AgentE2E, BadInputGetsOneLineAndExit2) {
  expect_usage_error(agent({"run", "--scenario", "no-such"}), "unknown scenario \"no-such\"");
  expect_usage_error(agent({"run", "--scenario", "setattr-lookup", "--param", "depth=100"}),
                     "parameter \"depth\" = 100 is out of limits, want [3, 8]");
  expect_usage_error(agent({"run", "--scenario", "setattr-lookup", "--observers", "99"}), "bad observers: 99");
  expect_usage_error(agent({"run", "--scenario", "setattr-lookup", "--fs", "zfs"}), "unknown file system kind");
  expect_usage_error(agent({"run", "--scenario", "setattr-lookup", "--duration", "soon"}), "bad duration");
  expect_usage_error(agent({"run", "--scenario", "setattr-lookup", "--param", "depth"}), "want NAME=VALUE");
  expect_usage_error(agent({"run", "--scenario", "setattr-lookup", "--dir", "/nonexistent/x"}), "/nonexistent/x");
  expect_usage_error(agent({"run"}), "--scenario is required");
  expect_usage_error(agent({"frobnicate"}), "error:");
  expect_usage_error(agent({"connect", "--token-file", "/dev/null"}), "--coordinator (or --data-dir) is required");
  expect_usage_error(agent({"connect", "--coordinator", "127.0.0.1:1"}), "--token-file is required");
  // A VM's identity file (deploy/vm/init writes it) without a token.
  const std::string identity =
      (std::filesystem::temp_directory_path() / ("lf-identity-" + std::to_string(getpid()))).string();
  std::ofstream(identity) << "coordinator=ipv4:127.0.0.1:1\nname=vm-x\nkernel=k\nselftest=0\nend\n";
  expect_usage_error(agent({"connect", "--identity-file", identity}), "--identity-file " + identity + ": no token");
  std::filesystem::remove(identity);
  std::filesystem::remove(identity + ".waiting");
}

TEST_F(AgentE2E, NotRootIsRefused) {
  Result r = run({"setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", LEAPFROG_AGENT, "run", "--scenario",
                  "mount-lookup"});
  expect_usage_error(r, "needs root");
}

// Under no_new_privs exec never applies set-id bits: refused, not judged.
TEST_F(AgentE2E, ExecSetidRefusesNoNewPrivs) {
  Result r = run({"setpriv", "--no-new-privs", LEAPFROG_AGENT, "run", "--scenario", "exec-setid",
                  "--iterations", "100"});
  expect_usage_error(r, "no_new_privs");
}

TEST_F(AgentE2E, NoFuseIsAClearError) {
  // /dev without fuse, in a private mount namespace of this command only.
  Result r = run({"unshare", "--mount", "--propagation", "private", "sh", "-c",
                  "mount -t tmpfs none /dev && exec " + std::string(LEAPFROG_AGENT) +
                      " run --scenario setattr-lookup --fs fuse-cached --duration 100ms"});
  EXPECT_EQ(r.exit, 2) << r.out << r.err;
  EXPECT_NE(r.err.find("FUSE is not available"), std::string::npos) << r.err;
}

TEST_F(AgentE2E, MalformedHistorySaysWhichLine) {
  TempDir dir;
  const std::string file = dir.path() + "/bad.jsonl";
  std::ofstream(file) << slurp(std::string(LEAPFROG_SOURCE) + "/scenarios/testdata/stale_grant.jsonl")
                      << "{\"type\":\"lookup\",\"actor\":1}\n";
  expect_usage_error(agent({"check", file}), "line 7: missing field");
  expect_usage_error(agent({"check", dir.path() + "/missing.jsonl"}), "cannot read history file");
}

// Issue 19: what `check` cannot judge is never a pass, and input that never
// ends or breaks the format's rules is refused with the line.
TEST_F(AgentE2E, CheckEarnsItsVerdict) {
  TempDir dir;
  const std::string good =
      slurp(std::string(LEAPFROG_SOURCE) + "/scenarios/testdata/stale_grant.jsonl");
  const std::string header_only = dir.path() + "/header.jsonl";
  std::ofstream(header_only) << good.substr(0, good.find('\n') + 1);
  Result r = agent({"check", header_only, "--json"});
  EXPECT_EQ(r.exit, 3) << r.out << r.err;
  json o = json::parse(r.out);
  EXPECT_EQ(o["verdict"], "inconclusive");
  EXPECT_NE(o["error"].get<std::string>().find("no lookup"), std::string::npos);
  r = agent({"check", header_only});
  EXPECT_EQ(r.exit, 3);
  EXPECT_NE(r.out.find(": inconclusive\n  error: the history holds no lookup"), std::string::npos)
      << r.out;

  expect_usage_error(agent({"check", "/dev/zero", "--max-line-bytes", "65536"}),
                     "line 1: longer than 65536 bytes");
  expect_usage_error(agent({"check", "/dev/zero"}), "line 1: longer than 67108864 bytes");
  expect_usage_error(agent({"check", dir.path()}), "is a directory");
  expect_usage_error(agent({"check", header_only, "--max-bytes", "100"}),
                     "input longer than 100 bytes");
  const std::string overlap = dir.path() + "/overlap.jsonl";
  std::ofstream(overlap)
      << good
      << R"({"type":"mutate","actor":0,"op":"chmod","invoke":2100,"complete":2200,"result":"ok",)"
         R"("sets":[{"object":{"kind":"attr","node":1},"value":{"mode":493,"uid":0,"gid":0}}]})"
      << "\n";
  expect_usage_error(agent({"check", overlap}),
                     "line 3 and line 7: mutations of attr(node 1) overlap in time");
  // The untouched history still gets its verdict.
  EXPECT_EQ(
      agent({"check", std::string(LEAPFROG_SOURCE) + "/scenarios/testdata/stale_grant.jsonl"}).exit,
      1);
}

// Starts the agent in the background; returns its pid once its run folder exists.
pid_t start_long_run(std::string& folder) {
  const pid_t pid = fork();
  if (pid == 0) {
    const int null = open("/dev/null", O_WRONLY);
    dup2(null, 1);
    dup2(null, 2);
    execl(LEAPFROG_AGENT, LEAPFROG_AGENT, "run", "--scenario", "setattr-lookup", "--fs", "ext4", "--duration", "60s",
          static_cast<char*>(nullptr));
    _exit(127);
  }
  const std::string prefix = leapfrog::fs::run_folder_prefix(pid);
  for (int i = 0; i < 3000 && folder.empty(); ++i) {
    for (const auto& f : run_folders())
      if (f.rfind(prefix, 0) == 0) folder = f;
    if (folder.empty()) usleep(2000);  // bounded poll for the folder to appear
  }
  return pid;
}

TEST_F(AgentE2E, InterruptedRunCleansUp) {
  std::string folder;
  const pid_t pid = start_long_run(folder);
  ASSERT_FALSE(folder.empty());
  kill(pid, SIGTERM);
  int status = 0;
  waitpid(pid, &status, 0);
  EXPECT_TRUE(WIFEXITED(status)) << status;
  EXPECT_FALSE(stdfs::exists(folder));
}

TEST_F(AgentE2E, KilledRunIsCleanedUpByTheNext) {
  std::string folder;
  const pid_t pid = start_long_run(folder);
  ASSERT_FALSE(folder.empty());
  kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
  // Its namespace died with it (so did its mounts and loop device); only the
  // empty folder is left, and the next run collects it.
  Result r = agent({"run", "--scenario", "setattr-lookup", "--duration", "100ms"});
  EXPECT_EQ(r.exit, 0) << r.err;
  EXPECT_FALSE(stdfs::exists(folder));
}

TEST_F(AgentE2E, ListShowsParametersAndLimits) {
  Result r = agent({"list", "--json"});
  ASSERT_EQ(r.exit, 0);
  json l = json::parse(r.out);
  EXPECT_EQ(l.size(), 16u);
  std::set<std::string> names;
  for (const auto& s : l) names.insert(s["name"]);
  for (const char* n : {"typeflip-lookup", "exec-setid", "beneath-lookup", "cached-lookup",
                        "mount-move-dotdot", "rename-umount"})
    EXPECT_TRUE(names.count(n)) << n;
  bool found = false, resolve = false;
  for (const auto& s : l) {
    for (const auto& p : s["params"]) {
      if (s["name"] == "setattr-lookup" && p["name"] == "depth")
        found = p["min"] == 3 && p["max"] == 8;
      if (s["name"] == "beneath-lookup" && p["name"] == "resolve")
        resolve = p["min"] == 1 && p["max"] == 63;
    }
  }
  EXPECT_TRUE(found);
  EXPECT_TRUE(resolve);
}

TEST_F(AgentE2E, SameSeedSameTree) {
  // The seed decides the mutated directory: two runs with one seed agree.
  json a = run_json({"--scenario", "setattr-lookup", "--seed", "7", "--fs", "fuse-cached", "--duration", "1s"}, 1);
  json b = run_json({"--scenario", "setattr-lookup", "--seed", "7", "--fs", "fuse-cached", "--duration", "1s"}, 1);
  ASSERT_FALSE(a["violations"].empty());
  ASSERT_FALSE(b["violations"].empty());
  EXPECT_EQ(a["violations"][0]["object"], b["violations"][0]["object"]);
}

// ---- views: one tree through two mounts ------------------------------------

class EveryView : public AgentE2E,
                  public ::testing::WithParamInterface<std::tuple<std::string, std::string, std::string>> {};

// Each lookup scenario is clean with its tree mutated through one mount and
// looked up through another (bind, overlay with copy-up, idmapped), on every
// disk file system.
TEST_P(EveryView, RunsClean) {
  const auto& [scenario, fs, view] = GetParam();
  // The kernel may lack a view (tmpfs takes idmapped mounts from 6.3): the
  // agent would not offer it either.
  const std::string why = leapfrog::fs::view_unavailable_reason(leapfrog::fs::parse_fs_kind(fs),
                                                                leapfrog::fs::parse_fs_view(view));
  if (!why.empty()) GTEST_SKIP() << why;
  json o = run_json({"--scenario", scenario, "--fs", fs, "--view", view, "--iterations", "1500"}, 0);
  EXPECT_EQ(o["verdict"], "pass") << o.dump().substr(0, 2000);
  EXPECT_EQ(o["fs"], fs + "+" + view);
  EXPECT_GE(o["lookups_checked"].get<uint64_t>(), 1500u);
  EXPECT_GT(o["mutations"].get<uint64_t>(), 10u);
}

INSTANTIATE_TEST_SUITE_P(Views, EveryView,
                         ::testing::Combine(::testing::Values("setattr-lookup", "chown-lookup", "acl-exec-deny",
                                                              "rename-lookup", "mount-lookup", "dotdot-lookup",
                                                              "symlink-lookup", "dirfd-lookup", "typeflip-lookup",
                                                              "beneath-lookup", "mount-move-dotdot",
                                                              "rename-umount"),
                                            ::testing::Values("tmpfs", "ext4", "xfs", "btrfs"),
                                            ::testing::Values("bind", "overlay", "idmap")),
                         [](const auto& info) {
                           std::string n = std::get<0>(info.param) + "_" + std::get<1>(info.param) + "_" +
                                           std::get<2>(info.param);
                           for (auto& c : n)
                             if (c == '-') c = '_';
                           return n;
                         });

// The views' positive control: mutating the lower layer underneath a mounted
// overlay (which overlayfs leaves undefined) leaves the overlay's dentries
// stale, and the two-view check must say so; `--fs tmpfs+overlay-lower` and
// `--view overlay-lower` are the same thing.
TEST_F(AgentE2E, MutatingTheLowerLayerUnderAnOverlayIsCaught) {
  json o = run_json({"--scenario", "rename-lookup", "--fs", "tmpfs+overlay-lower", "--duration", "2s"}, 1);
  EXPECT_EQ(o["verdict"], "violation");
  EXPECT_GT(kind_count(o, "stale-entry"), 0u) << o.dump().substr(0, 2000);
  EXPECT_EQ(o["fs"], "tmpfs+overlay-lower");
  // Fuzzy: a free-running mutator toggles the mode within every lookup's
  // window, which then admits the stale mode too (docs/strategy.md).
  json s = run_json({"--scenario", "setattr-lookup", "--fs", "ext4", "--view", "overlay-lower",
                     "--duration", "2s", "--align", "fuzzy"},
                    1);
  EXPECT_GT(s["violation_count"].get<uint64_t>(), 0u);
}

// ACL caches on disk: with the dentry and inode caches dropped after each
// ACL change, every permission check after it reads the ACL from disk
// while the mutator sets it again (get_acl against set_acl, Linux
// b8a7a3a66747). The deny must still hold, and the other uid keep access.
TEST_F(AgentE2E, AclExecDenyHoldsWhileInodesAreEvictedOnDiskFileSystems) {
  // evict=2 drops them just before each change, inside the same mutation.
  for (const int evict : {1, 2}) {
    for (const char* fs : {"ext4", "xfs", "btrfs"}) {
      json o = run_json({"--scenario", "acl-exec-deny", "--fs", fs, "--param",
                         "evict=" + std::to_string(evict), "--iterations", "400"},
                        0);
      EXPECT_EQ(o["verdict"], "pass") << fs << " " << o.dump().substr(0, 2000);
      EXPECT_EQ(o["params"]["evict"], evict) << fs;
      EXPECT_GE(o["lookups_checked"].get<uint64_t>(), 400u) << fs;
      EXPECT_GT(o["mutations"].get<uint64_t>(), 100u) << fs;
    }
  }
}

// evict=3 writes each ACL as xfs's raw trusted.SGI_ACL_FILE xattr, which
// also forgets the cached ACL: every change is a set and a forget, and the
// first permission check after it reads the ACL from disk. On this (fixed)
// kernel the deny holds throughout; the model's deny is what the kernel
// enforces (were the raw bytes wrong, every denied lookup would be a
// stale-grant). Anywhere but xfs the run is refused, never judged.
TEST_F(AgentE2E, AclExecDenyWithXfsRawAclsForgetsTheCacheOnEveryChange) {
  json o = run_json(
      {"--scenario", "acl-exec-deny", "--fs", "xfs", "--param", "evict=3", "--iterations", "600"},
      0);
  EXPECT_EQ(o["verdict"], "pass") << o.dump().substr(0, 2000);
  EXPECT_EQ(o["params"]["evict"], 3);
  EXPECT_GE(o["lookups_checked"].get<uint64_t>(), 1200u);
  EXPECT_GT(o["mutations"].get<uint64_t>(), 150u);
  for (const char* fs : {"ext4", "xfs+overlay"}) {
    json r = run_json(
        {"--scenario", "acl-exec-deny", "--fs", fs, "--param", "evict=3", "--iterations", "10"}, 2);
    EXPECT_NE(r.value("error", "").find("needs xfs on both"), std::string::npos)
        << fs << " " << r.dump();
    EXPECT_EQ(r["lookups_checked"], 0u) << fs;
    EXPECT_NE(r["verdict"], "pass") << fs;
  }
}

// exec-setid toctou=1 races only the chmod that grants set-uid and revokes
// exec at once (0755 <-> 04754, owned by the second uid): the window of
// Linux f50733b45d86, fixed in this kernel, so the run is clean; on
// fuse-cached the kernel keeps the old mode for its cache timeout and the
// oracle must see the exec it should have refused (the positive control).
TEST_F(AgentE2E, ExecSetidToctouStaysCleanAndFuseCachedIsCaught) {
  for (const char* fs : {"tmpfs", "ext4"}) {
    json o = run_json({"--scenario", "exec-setid", "--fs", fs, "--param", "toctou=1", "--iterations", "300"}, 0);
    EXPECT_EQ(o["verdict"], "pass") << fs << " " << o.dump().substr(0, 2000);
    EXPECT_EQ(o["params"]["toctou"], 1) << fs;
    EXPECT_GE(o["lookups_checked"].get<uint64_t>(), 300u) << fs;
  }
  json c = run_json({"--scenario", "exec-setid", "--fs", "fuse-cached", "--param", "toctou=1", "--iterations", "300"}, 1);
  EXPECT_EQ(c["verdict"], "violation") << c.dump().substr(0, 2000);
  EXPECT_GT(kind_count(c, "stale-grant"), 0u) << c.dump().substr(0, 2000);
}

TEST_F(AgentE2E, BadViewsGetOneLineAndExit2) {
  Result r = agent({"run", "--scenario", "setattr-lookup", "--fs", "ext4", "--view", "union"});
  EXPECT_EQ(r.exit, 2);
  EXPECT_NE(r.err.find("unknown view 'union'"), std::string::npos) << r.err;
  r = agent({"run", "--scenario", "setattr-lookup", "--fs", "fuse-cached", "--view", "bind"});
  EXPECT_EQ(r.exit, 2);
  EXPECT_NE(r.err.find("fuse-cached+bind"), std::string::npos) << r.err;
  r = agent({"run", "--scenario", "setattr-lookup", "--fs", "ext4+bind", "--view", "idmap"});
  EXPECT_EQ(r.exit, 2);
  EXPECT_NE(r.err.find("already names a view"), std::string::npos) << r.err;
}

}  // namespace
