// Why a run ended (run_end.h): OOM kills found in kernel logs, the memory
// cgroup's counter (v1 and v2 layouts, in a stand-in folder), the run's
// process tree, and the counts shared with a forked child.

#include "agent/run_end.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "agent/shared_progress.h"

namespace leapfrog {
namespace {

namespace stdfs = std::filesystem;

// What the kernel logs for an OOM kill: the global killer (6.1, as the
// console of issue 47 showed it) and a memory cgroup's (6.18, measured here).
const char* const kGlobalOom =
    "leapfrog-agent invoked oom-killer: gfp_mask=0x140cca(GFP_HIGHUSER_MOVABLE|__GFP_COMP), order=0\n"
    "oom-kill:constraint=CONSTRAINT_NONE,nodemask=(null),cpuset=/,mems_allowed=0,global_oom,"
    "task_memcg=/,task=leapfrog-agent,pid=72,uid=0\n"
    "Out of memory: Killed process 72 (leapfrog-agent) total-vm:629760kB, anon-rss:461944kB, "
    "file-rss:0kB, shmem-rss:0kB, UID:0 pgtables:1012kB oom_score_adj:0\n";
const char* const kMemcgOom =
    "Memory cgroup out of memory: Killed process 7470 (python3) total-vm:118968kB, "
    "anon-rss:20224kB, file-rss:5764kB, shmem-rss:0kB, UID:0 pgtables:96kB oom_score_adj:0\n";

int exited(int code) { return code << 8; }  // a wait status of exit(code)
int signaled(int sig) { return sig; }       // a wait status of death by sig

TEST(RunEnd, FindsTheVictimsOfBothKillers) {
  const auto kills = console::oom_kills_in(std::string("random line\n") + kGlobalOom + kMemcgOom);
  ASSERT_EQ(kills.size(), 2u);
  EXPECT_EQ(kills[0].pid, 72);
  EXPECT_EQ(kills[0].comm, "leapfrog-agent");
  EXPECT_EQ(kills[0].line.rfind("Out of memory: Killed process 72", 0), 0u);
  EXPECT_EQ(kills[1].pid, 7470);
  EXPECT_EQ(kills[1].comm, "python3");
  EXPECT_EQ(kills[1].line.rfind("Memory cgroup out of memory: Killed process 7470", 0), 0u);
  // As a serial console shows it: the timestamp is not part of the line.
  const auto decorated = console::oom_kills_in(std::string("[  311.293918] ") + kMemcgOom);
  ASSERT_EQ(decorated.size(), 1u);
  EXPECT_EQ(decorated[0].line.rfind("Memory cgroup out of memory:", 0), 0u);
  EXPECT_TRUE(console::oom_kills_in("oom_reaper: reaped process 72 (leapfrog-agent)\n").empty());
}

TEST(RunEnd, AVictimAmongTheRunsProcessesIsAnOomKillWhateverTheStatus) {
  RunEndFacts f;
  f.pids = {70, 72};
  f.kernel_log = kGlobalOom;
  f.wait_status = exited(128 + SIGKILL);  // the sandbox lost its child
  auto k = run_killed(f);
  ASSERT_TRUE(k);
  EXPECT_EQ(k->reason(), v1::RUN_KILL_OUT_OF_MEMORY);
  EXPECT_EQ(k->signal(), SIGKILL);
  EXPECT_NE(k->line().find("anon-rss:461944kB"), std::string::npos);
  EXPECT_EQ(run_killed_message(*k).rfind("out of memory: the OOM killer killed the run (Out of memory: Killed process 72", 0), 0u);
  // An actor killed while the run went on and wrote an outcome.
  f.wait_status = exited(0);
  ASSERT_TRUE(run_killed(f));
  EXPECT_EQ(run_killed(f)->reason(), v1::RUN_KILL_OUT_OF_MEMORY);
}

TEST(RunEnd, AnotherProcesssVictimIsNotTheRuns) {
  RunEndFacts f;
  f.pids = {70, 71};
  f.kernel_log = kMemcgOom;
  f.wait_status = exited(0);
  EXPECT_FALSE(run_killed(f));
  // Killed by someone: a signal, not memory, with the counter unchanged.
  f.wait_status = signaled(SIGKILL);
  f.oom_kills_before = f.oom_kills_after = 3;
  ASSERT_TRUE(run_killed(f));
  EXPECT_EQ(run_killed(f)->reason(), v1::RUN_KILL_SIGNAL);
  EXPECT_EQ(run_killed_message(*run_killed(f)), "the run was killed by signal 9 (SIGKILL)");
}

TEST(RunEnd, TheCgroupCounterExplainsASigkillTheLogDoesNotName) {
  RunEndFacts f;
  f.pids = {70};
  f.wait_status = exited(128 + SIGKILL);
  f.counter_file = "/sys/fs/cgroup/x/memory.events";
  f.oom_kills_before = 1;
  f.oom_kills_after = 2;
  auto k = run_killed(f);
  ASSERT_TRUE(k);
  EXPECT_EQ(k->reason(), v1::RUN_KILL_OUT_OF_MEMORY);
  EXPECT_NE(k->line().find("oom_kill in /sys/fs/cgroup/x/memory.events"), std::string::npos);
  // ... but not a run that ended by itself, nor one the agent killed.
  f.wait_status = exited(1);
  EXPECT_FALSE(run_killed(f));
  f.wait_status = signaled(SIGKILL);
  f.killed_by_agent = true;
  EXPECT_FALSE(run_killed(f));
  // Nor another signal.
  f.killed_by_agent = false;
  f.wait_status = exited(128 + SIGTERM);
  ASSERT_TRUE(run_killed(f));
  EXPECT_EQ(run_killed(f)->reason(), v1::RUN_KILL_SIGNAL);
  EXPECT_EQ(run_killed(f)->signal(), SIGTERM);
}

TEST(RunEnd, TheCounterIsFoundInEitherCgroupLayout) {
  const stdfs::path dir = stdfs::temp_directory_path() / ("run_end_test-" + std::to_string(getpid()));
  stdfs::remove_all(dir);
  stdfs::create_directories(dir / "proc/42");
  stdfs::create_directories(dir / "cg/memory/a/b");
  std::ofstream(dir / "proc/42/cgroup") << "5:cpu:/\n4:memory:/a/b\n0::/\n";
  std::ofstream(dir / "cg/memory/a/b/memory.oom_control") << "oom_kill_disable 0\nunder_oom 0\noom_kill 4\n";
  OomCounter c = OomCounter::of(42, dir / "proc", dir / "cg");
  EXPECT_EQ(c.file(), (dir / "cg/memory/a/b/memory.oom_control").string());
  EXPECT_EQ(c.read(), 4u);
  // v2, mounted at "unified" beside v1 controllers without memory.
  std::ofstream(dir / "proc/42/cgroup") << "5:cpu:/\n0::/svc\n";
  stdfs::create_directories(dir / "cg/unified/svc");
  std::ofstream(dir / "cg/unified/svc/memory.events") << "low 0\nhigh 0\nmax 7\noom 2\noom_kill 2\noom_group_kill 0\n";
  c = OomCounter::of(42, dir / "proc", dir / "cg");
  EXPECT_EQ(c.read(), 2u);
  // The root cgroup counts nothing.
  std::ofstream(dir / "proc/42/cgroup") << "0::/\n";
  EXPECT_TRUE(OomCounter::of(42, dir / "proc", dir / "cg").file().empty());
  EXPECT_FALSE(OomCounter::of(42, dir / "proc", dir / "cg").read());
  stdfs::remove_all(dir);
}

TEST(RunEnd, TheTreeHoldsAGrandchild) {
  int told[2], hold[2];  // child -> test: the grandchild's pid; test -> grandchild: exit
  ASSERT_EQ(pipe(told), 0);
  ASSERT_EQ(pipe(hold), 0);
  const pid_t child = fork();
  if (child == 0) {
    const pid_t grandchild = fork();
    if (grandchild == 0) {
      char c;
      (void)!read(hold[0], &c, 1);
      _exit(0);
    }
    (void)!write(told[1], &grandchild, sizeof grandchild);
    waitpid(grandchild, nullptr, 0);
    _exit(0);
  }
  pid_t grandchild = 0;
  ASSERT_EQ(read(told[0], &grandchild, sizeof grandchild), static_cast<ssize_t>(sizeof grandchild));
  const auto tree = process_tree(child);
  EXPECT_TRUE(tree.count(child));
  EXPECT_TRUE(tree.count(grandchild));
  EXPECT_FALSE(tree.count(getpid()));
  (void)!write(hold[1], "x", 1);
  waitpid(child, nullptr, 0);
  for (int fd : {told[0], told[1], hold[0], hold[1]}) close(fd);
}

TEST(SharedProgress, AChildsCountsAreSeenByItsParent) {
  SharedProgress shared;
  ASSERT_NE(shared.get(), nullptr);
  const pid_t child = fork();
  if (child == 0) {
    // As the run child: mapped again from the descriptor, then written by a
    // child of its own (the sandbox).
    RunProgress* p = map_shared_progress(dup(shared.fd()));
    const pid_t sandbox = fork();
    if (sandbox == 0) {
      p->operations.store(1234);
      p->lookups_judged.store(56);
      p->violations.store(7);
      _exit(0);
    }
    waitpid(sandbox, nullptr, 0);
    _exit(0);
  }
  int status = 0;
  waitpid(child, &status, 0);
  EXPECT_EQ(shared.get()->operations.load(), 1234u);
  EXPECT_EQ(shared.get()->lookups_judged.load(), 56u);
  EXPECT_EQ(shared.get()->violations.load(), 7u);
}

}  // namespace
}  // namespace leapfrog
