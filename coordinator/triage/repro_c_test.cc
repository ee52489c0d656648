// The generated C reproducer: it compiles with plain `cc`, and it tells the
// FUSE positive control (fuse-cached: FAIL) from the per-step correct
// passthrough (fuse-direct: PASS). Runs as root; mounts happen inside
// run_sandboxed children.

#include "coordinator/triage/repro_c.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>

#include "coordinator/pg/test_dir.h"
#include "scenarios/fs/workspace.h"

namespace leapfrog::coord::triage {
namespace {

using coord::testing::TestDir;

v1::ScenarioSpec spec_of(const std::string& scenario) {
  v1::ScenarioSpec s;
  s.set_scenario(scenario);
  s.set_seed(3);
  s.set_fs("fuse-cached");
  s.set_iterations(50);
  s.set_observers(1);
  return s;
}

v1::Violation stale_grant(const std::string& op, const std::string& path,
                          const std::string& object) {
  v1::Violation v;
  v.set_kind(v1::VIOLATION_KIND_STALE_GRANT);
  v.set_op(op);
  v.set_path(path);
  v.set_object(object);
  v.set_step(3);
  return v;
}

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Writes `source` and compiles it with `cc` (no flags but -o); returns the binary.
std::string compile(const TestDir& dir, const std::string& name, const std::string& source) {
  const std::string c = dir / (name + ".c"), bin = dir / name;
  std::ofstream(c) << source;
  const std::string cmd = "cc -o " + bin + " " + c + " > " + bin + ".log 2>&1";
  EXPECT_EQ(std::system(cmd.c_str()), 0) << slurp(bin + ".log");
  return bin;
}

TEST(ReproC, EverySupportedScenarioCompilesWithPlainCc) {
  TestDir dir;
  compile(dir, "setattr",
          c_reproducer(spec_of("setattr-lookup"), stale_grant("stat", "d0/d1/d2/f", "attr(d1)")));
  compile(dir, "chown",
          c_reproducer(spec_of("chown-lookup"), stale_grant("access", "d0/d1/d2/f", "attr(d2)")));
  compile(
      dir, "rename",
      c_reproducer(spec_of("rename-lookup"), stale_grant("open", "p1/x/f", "entry(p1, \"x\")")));
  compile(dir, "empty", c_reproducer(spec_of("setattr-lookup"), v1::Violation()));
  compile(dir, "typeflip", c_reproducer(spec_of("typeflip-lookup"), v1::Violation()));
  compile(dir, "symlink", c_reproducer(spec_of("symlink-lookup"), v1::Violation()));
  compile(dir, "exec", c_reproducer(spec_of("exec-setid"), v1::Violation()));
  compile(dir, "script",
          c_reproducer(spec_of("exec-setid"),
                       stale_grant("execve-script", "bin/helper", "attr(bin/helper)")));
}

TEST(ReproC, PicksTheViolatingDirectoryAndOperation) {
  const std::string c =
      c_reproducer(spec_of("setattr-lookup"), stale_grant("open", "d0/d1/d2/f", "attr(d1)"));
  EXPECT_NE(c.find("mpath(p, \"d0/d1\");\n  return chmod(p, state ? 0700 : 0755)"),
            std::string::npos)
      << c;
  EXPECT_NE(c.find("open(path, O_RDONLY"), std::string::npos);
  EXPECT_EQ(c.find("stat(path, &st)"), std::string::npos);
}

TEST(ReproC, UnsupportedScenariosSaySoAndNameTheSupportedOnes) {
  try {
    c_reproducer(spec_of("mount-lookup"), v1::Violation());
    FAIL();
  } catch (const ReproError& e) {
    EXPECT_STREQ(e.what(),
                 "no C reproducer for scenario \"mount-lookup\": supported are setattr-lookup, "
                 "chown-lookup, rename-lookup, typeflip-lookup, symlink-lookup, exec-setid");
  }
  EXPECT_THROW(c_reproducer(spec_of("rename-lookup"), stale_grant("stat", "e/d1/f", "")),
               ReproError);
  EXPECT_THROW(c_reproducer(spec_of("setattr-lookup"), stale_grant("readlink", "d0/f", "")),
               ReproError);
  EXPECT_THROW(c_reproducer(spec_of("exec-setid"), stale_grant("stat", "bin/helper", "")),
               ReproError);
}

// Runs `bin MUTATED LOOKUP seconds` in a sandbox holding `kind`; returns its
// exit status and output.
std::pair<int, std::string> run_in(fs::FsKind kind, const std::string& bin, const std::string& out,
                                   const char* seconds) {
  const int status = fs::run_sandboxed([&](const std::string& workdir) {
    fs::FsSpec spec;
    spec.kind = kind;
    spec.fuse_timeout_s = 1;
    auto ws = fs::provision(spec, workdir);
    const pid_t pid = fork();
    if (pid == 0) {
      if (!freopen(out.c_str(), "w", stdout)) _exit(120);
      execl(bin.c_str(), bin.c_str(), ws->mutate_root().c_str(), ws->lookup_root().c_str(), seconds,
            static_cast<char*>(nullptr));
      _exit(121);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 122;
  });
  return {status, slurp(out)};
}

TEST(ReproC, FailsOnFuseCachedAndPassesOnFuseDirect) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root";
  TestDir dir;
  const std::string bin = compile(
      dir, "repro",
      c_reproducer(spec_of("setattr-lookup"), stale_grant("stat", "d0/d1/d2/f", "attr(d1)")));
  const auto cached = run_in(fs::FsKind::FuseCached, bin, dir / "cached.out", "10");
  EXPECT_EQ(cached.first, 1) << cached.second;
  EXPECT_EQ(cached.second.rfind("FAIL ", 0), 0u) << cached.second;
  const auto direct = run_in(fs::FsKind::FuseDirect, bin, dir / "direct.out", "2");
  EXPECT_EQ(direct.first, 0) << direct.second;
  EXPECT_EQ(direct.second.rfind("PASS", 0), 0u) << direct.second;
}

// A PASS is earned by judged lookups: with fewer than the minimum judged the
// run goes on past its budget (up to four times it) and then says
// INCONCLUSIVE with exit 3, never PASS. The minimum is set out of reach here.
TEST(ReproC, TooFewJudgedLookupsAreInconclusiveNotAPass) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root";
  TestDir dir;
  const std::string bin = compile(
      dir, "repro",
      c_reproducer(spec_of("setattr-lookup"), stale_grant("stat", "d0/d1/d2/f", "attr(d1)")));
  EXPECT_NE(c_reproducer(spec_of("setattr-lookup"), v1::Violation())
                .find("#define MIN_JUDGED " + std::to_string(kMinJudged) + "\n"),
            std::string::npos);
  ASSERT_EQ(setenv("LEAPFROG_MIN_JUDGED", "1000000000000", 1), 0);
  const auto r = run_in(fs::FsKind::Tmpfs, bin, dir / "out", "0.5");
  unsetenv("LEAPFROG_MIN_JUDGED");
  EXPECT_EQ(r.first, 3) << r.second;
  ASSERT_EQ(r.second.rfind("INCONCLUSIVE (", 0), 0u) << r.second;
  EXPECT_NE(r.second.find("a PASS needs 1000000000000"), std::string::npos) << r.second;
  // It ran the extended budget: 4 x 0.5 s.
  const double elapsed = std::stod(r.second.substr(r.second.find(" in ") + 4));
  EXPECT_GE(elapsed, 1.95) << r.second;
}

// The type and set-id reproducers: each fails where the kernel serves cached
// entries and attributes (fuse-cached) and passes where it does not.
void expect_fail_then_pass(const v1::ScenarioSpec& spec, const v1::Violation& v,
                           const std::string& name, const std::string& want) {
  TestDir dir;
  const std::string bin = compile(dir, name, c_reproducer(spec, v));
  const auto cached = run_in(fs::FsKind::FuseCached, bin, dir / "cached.out", "10");
  EXPECT_EQ(cached.first, 1) << cached.second;
  EXPECT_EQ(cached.second.rfind("FAIL " + want, 0), 0u) << cached.second;
  for (auto kind : {fs::FsKind::FuseDirect, fs::FsKind::Tmpfs}) {
    const auto clean = run_in(kind, bin, dir / "clean.out", "2");
    EXPECT_EQ(clean.first, 0) << clean.second;
    EXPECT_EQ(clean.second.rfind("PASS", 0), 0u) << clean.second;
  }
}

TEST(ReproC, TypeflipFailsOnFuseCachedAndPassesElsewhere) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root";
  v1::Violation v;
  v.set_kind(v1::VIOLATION_KIND_STALE_ENTRY);
  v.set_op("open");
  v.set_path("n/f");
  expect_fail_then_pass(spec_of("typeflip-lookup"), v, "typeflip", "stale-entry: open n/f");
}

// symlink-lookup judges a result no state explains (ENOENT through l) even
// when a change overlapped the lookup; fuse-cached's stale entry for l fails
// the ordinary judgement.
TEST(ReproC, SymlinkFailsOnFuseCachedAndPassesElsewhere) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root";
  v1::Violation v;
  v.set_kind(v1::VIOLATION_KIND_STALE_ENTRY);
  v.set_op("open");
  v.set_path("l/f");
  expect_fail_then_pass(spec_of("symlink-lookup"), v, "symlink", "stale-");
}

// The control for that judgement: looking up through a folder where l does
// not exist gives ENOENT, which no state of l explains, and must fail the
// run, overlapped by a change or not.
TEST(ReproC, SymlinkFailsOnAResultNoStateExplains) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root";
  TestDir dir;
  const std::string bin =
      compile(dir, "symlink", c_reproducer(spec_of("symlink-lookup"), v1::Violation()));
  const std::string mutated = dir / "m", empty = dir / "empty";
  ASSERT_EQ(mkdir(mutated.c_str(), 0755), 0);
  ASSERT_EQ(mkdir(empty.c_str(), 0755), 0);
  const std::string cmd = bin + " " + mutated + " " + empty + " 1 > " + (dir / "out") + " 2>&1";
  const int st = std::system(cmd.c_str());
  const std::string out = slurp(dir / "out");
  ASSERT_TRUE(WIFEXITED(st)) << out;
  EXPECT_EQ(WEXITSTATUS(st), 1) << out;
  EXPECT_EQ(out.rfind("FAIL stale-entry: stat l/f gave ENOENT, which no state explains", 0), 0u)
      << out;
}

// The run's delay points go to the kernel's control file before the race
// and "off" after it; a kernel without the points gets a warning and an
// unwidened race. A spec that leaves the points to the seed cannot say
// which points to set.
TEST(ReproC, SetsTheRunsDelayPointsAndTurnsThemOff) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root";
  v1::ScenarioSpec spec = spec_of("symlink-lookup");
  spec.set_widen("link_body:500000:50000:65534,step_into:1000:2000:any");
  TestDir dir;
  const std::string source = c_reproducer(spec, v1::Violation());
  EXPECT_NE(source.find("\"link_body 500000 50000 65534\", \"step_into 1000 2000 any\", NULL"),
            std::string::npos)
      << source;
  const std::string bin = compile(dir, "widened", source);
  const std::string tree = dir / "tree", control = dir / "control";
  ASSERT_EQ(mkdir(tree.c_str(), 0755), 0);
  std::ofstream(control).close();
  const std::string run = bin + " " + tree + " " + tree + " 1 > " + (dir / "out") + " 2> " + (dir / "err");
  ASSERT_EQ(std::system(("LEAPFROG_WIDEN_CONTROL=" + control + " " + run).c_str()), 0) << slurp(dir / "out");
  EXPECT_EQ(slurp(control), "link_body 500000 50000 65534\nstep_into 1000 2000 any\noff\n");
  EXPECT_EQ(slurp(dir / "out").rfind("PASS", 0), 0u) << slurp(dir / "out");

  const std::string missing = dir / "no-such-control";
  ASSERT_EQ(std::system(("LEAPFROG_WIDEN_CONTROL=" + missing + " " + run).c_str()), 0) << slurp(dir / "err");
  EXPECT_NE(slurp(dir / "err").find("is missing (not a kernel built with Leapfrog's delay points)"),
            std::string::npos)
      << slurp(dir / "err");

  spec.set_widen("off");
  EXPECT_NE(c_reproducer(spec, v1::Violation()).find("widen_points[] = {NULL}"), std::string::npos);
  spec.set_widen("seed");
  EXPECT_THROW(c_reproducer(spec, v1::Violation()), ReproError);
  spec.set_widen("link_body:lots");
  EXPECT_THROW(c_reproducer(spec, v1::Violation()), ReproError);
}

TEST(ReproC, ExecSetidFailsOnFuseCachedAndPassesElsewhere) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root";
  expect_fail_then_pass(spec_of("exec-setid"),
                        stale_grant("execve", "bin/helper", "attr(bin/helper)"), "exec",
                        "stale-grant: execve bin/helper");
  expect_fail_then_pass(spec_of("exec-setid"),
                        stale_grant("execve-script", "bin/helper", "attr(bin/helper)"), "script",
                        "stale-grant: execve-script bin/script");
}

}  // namespace
}  // namespace leapfrog::coord::triage
