// lookup-scale: will-it-scale style throughput of lookups and file-offset
// operations for 1..N tasks, as processes and as threads, optionally with a
// background mutator dirtying a directory on the path. No oracle: it reports
// ops/s per task count.

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <thread>
#include <vector>

#include "scenarios/catalogue/catalogue.h"
#include "scenarios/catalogue/common.h"
#include "scenarios/clock.h"
#include "scenarios/shared_region.h"
#include "scenarios/sys/posix_ops.h"

namespace leapfrog::catalogue {
namespace {

constexpr uint32_t kMaxTasks = 64;

enum class Test {
  AccessSame,
  AccessSeparate,
  StatSame,
  StatSeparate,
  OpenSame,
  OpenSeparate,
  Lseek,
  LseekShared,
  Readseek
};
struct TestInfo {
  Test test;
  const char* name;
};
constexpr TestInfo kTests[] = {
    {Test::AccessSame, "access-same"},
    {Test::AccessSeparate, "access-separate"},
    {Test::StatSame, "stat-same"},
    {Test::StatSeparate, "stat-separate"},
    {Test::OpenSame, "open-same"},
    {Test::OpenSeparate, "open-separate"},
    {Test::Lseek, "lseek"},
    {Test::LseekShared, "lseek-shared"},
    {Test::Readseek, "readseek"},
};
constexpr int kTestCount = sizeof kTests / sizeof kTests[0];

struct alignas(64) Counter {
  std::atomic<uint64_t> ops{0};
};

struct Board {
  std::atomic<uint32_t> go{0};
  std::atomic<uint32_t> stop{0};
  std::atomic<uint32_t> ready{0};
  std::atomic<uint32_t> failed{0};
  Counter counters[kMaxTasks];
  double results[kTestCount][2][kMaxTasks + 1];  // ops/s by test, mode, tasks
  char error[256];
};

struct Paths {
  std::string same;                   // relative to the lookup root
  std::vector<std::string> separate;  // one per task
};

// One task's loop. Runs until the board says stop.
void task_loop(Board* b, Test test, uint32_t task, const Paths& p, int shared_fd) {
  const char* same = p.same.c_str();
  const char* mine = p.separate[task].c_str();
  int fd = -1;
  if (test == Test::Lseek || test == Test::Readseek) fd = ::open(mine, O_RDONLY | O_CLOEXEC);
  if (test == Test::LseekShared) fd = shared_fd;
  b->ready.fetch_add(1);
  while (!b->go.load(std::memory_order_acquire)) __builtin_ia32_pause();
  uint64_t n = 0;
  char c;
  struct stat st;
  std::atomic<uint64_t>& out = b->counters[task].ops;
  while (!b->stop.load(std::memory_order_relaxed)) {
    switch (test) {
      case Test::AccessSame:
        ::access(same, R_OK);
        break;
      case Test::AccessSeparate:
        ::access(mine, R_OK);
        break;
      case Test::StatSame:
        ::stat(same, &st);
        break;
      case Test::StatSeparate:
        ::stat(mine, &st);
        break;
      case Test::OpenSame:
        ::close(::open(same, O_RDONLY | O_CLOEXEC));
        break;
      case Test::OpenSeparate:
        ::close(::open(mine, O_RDONLY | O_CLOEXEC));
        break;
      case Test::Lseek:
      case Test::LseekShared:
        ::lseek(fd, 0, SEEK_SET);
        break;
      case Test::Readseek:
        if (::read(fd, &c, 1) < 0) b->failed.store(1);
        ::lseek(fd, 0, SEEK_SET);
        break;
    }
    if ((++n & 63) == 0) out.store(n, std::memory_order_relaxed);
  }
  out.store(n, std::memory_order_relaxed);
  if (fd >= 0 && test != Test::LseekShared) ::close(fd);
}

// Measures one point: `tasks` tasks of `test` for `point` ns.
double measure(Board* b, Test test, bool threads, uint32_t tasks, const Paths& p, int shared_fd,
               TimeNs point) {
  b->go = 0;
  b->stop = 0;
  b->ready = 0;
  for (auto& c : b->counters) c.ops = 0;
  std::vector<pid_t> pids;
  std::vector<std::thread> pool;
  for (uint32_t t = 0; t < tasks; ++t) {
    if (threads) {
      pool.emplace_back([=] { task_loop(b, test, t, p, shared_fd); });
    } else {
      const pid_t pid = fork();
      if (pid == 0) {
        task_loop(b, test, t, p, shared_fd);
        _exit(0);
      }
      if (pid > 0) pids.push_back(pid);
    }
  }
  while (b->ready.load() < tasks) std::this_thread::yield();
  const TimeNs start = now_ns();
  b->go.store(1, std::memory_order_release);
  // This is the measurement interval itself, not synchronisation.
  std::this_thread::sleep_for(std::chrono::nanoseconds(point));
  b->stop.store(1);
  const TimeNs end = now_ns();
  for (auto& th : pool) th.join();
  for (pid_t pid : pids) waitpid(pid, nullptr, 0);
  uint64_t total = 0;
  for (uint32_t t = 0; t < tasks; ++t) total += b->counters[t].ops.load();
  return static_cast<double>(total) / (static_cast<double>(end - start) / 1e9);
}

class LookupScale : public Scenario {
 public:
  const char* name() const override { return "lookup-scale"; }
  const char* summary() const override {
    return "will-it-scale style ops/s of access/stat/open (same vs separate files), lseek, "
           "read+lseek for 1..N tasks";
  }
  std::vector<ParamSpec> params() const override {
    const int64_t cpus = std::max<int64_t>(1, sysconf(_SC_NPROCESSORS_ONLN));
    return {
        {"max_tasks", std::min<int64_t>(cpus, kMaxTasks), 1, kMaxTasks,
         "largest task count (1..N are measured)"},
        {"point_ms", 200, 20, 10000, "measuring time per point"},
        {"mode", 2, 0, 2, "0: processes, 1: threads, 2: both"},
        {"test", -1, -1, kTestCount - 1,
         "only this test (index in the list printed by a run), -1: all"},
        {"mutator", 0, 0, 1, "1: chmod a directory on the path (0755 <-> 0711) in the background"}};
  }
  Outcome run(RunContext& ctx) const override {
    const uint32_t max_tasks = static_cast<uint32_t>(ctx.param("max_tasks"));
    const TimeNs point = ctx.param("point_ms") * 1'000'000;
    const int mode = static_cast<int>(ctx.param("mode"));
    const int only = static_cast<int>(ctx.param("test"));
    DiskTree disk(ctx.ws);
    disk.mkdir("s", 0755);
    disk.mkdir("s/d", 0755);
    disk.file("s/d/f", 0644, "x");
    Paths paths{"s/d/f", {}};
    for (uint32_t t = 0; t < max_tasks; ++t) {
      disk.file("s/d/f" + std::to_string(t), 0644, "x");
      paths.separate.push_back("s/d/f" + std::to_string(t));
    }
    SharedRegion region(sizeof(Board));
    auto* board = new (region.data()) Board();

    Outcome out = begin_outcome(ctx);
    const TimeNs started = now_ns();
    const pid_t child = fork();
    if (child < 0) throw fs::SetupError(std::string("fork: ") + std::strerror(errno));
    if (child == 0) {
      int code = 0;
      try {
        if (chdir(ctx.ws.lookup_root().c_str()) != 0)
          throw std::system_error(errno, std::generic_category(), "chdir");
        sys::drop_privileges(ctx.opts.observer);
        const int shared_fd = ::open(paths.same.c_str(), O_RDONLY | O_CLOEXEC);
        for (int ti = 0; ti < kTestCount; ++ti) {
          if (only >= 0 && ti != only) continue;
          for (int threads = 0; threads < 2; ++threads) {
            if (mode != 2 && mode != threads) continue;
            for (uint32_t n = 1; n <= max_tasks; ++n)
              board->results[ti][threads][n] =
                  measure(board, kTests[ti].test, threads, n, paths, shared_fd, point);
          }
        }
      } catch (const std::exception& e) {
        std::strncpy(board->error, e.what(), sizeof board->error - 1);
        code = 3;
      }
      _exit(code);
    }
    // The optional background mutator runs here, as root, until the child ends.
    const std::string dir = disk.m("s/d");
    uint64_t mutations = 0;
    int status = 0;
    if (ctx.param("mutator")) {
      while (waitpid(child, &status, WNOHANG) == 0) {
        ::chmod(dir.c_str(), (mutations & 1) ? 0755 : 0711);
        ++mutations;
      }
      ::chmod(dir.c_str(), 0755);
    } else {
      waitpid(child, &status, 0);
    }
    out.duration_s = static_cast<double>(now_ns() - started) / 1e9;
    out.mutations = mutations;
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      out.verdict = "error";
      out.error = board->error[0] ? board->error : "lookup-scale worker failed";
      return out;
    }
    if (board->failed.load()) out.notes.push_back("some reads failed during readseek");
    double total_ops = 0;
    for (int ti = 0; ti < kTestCount; ++ti) {
      if (only >= 0 && ti != only) continue;
      for (int threads = 0; threads < 2; ++threads) {
        if (mode != 2 && mode != threads) continue;
        for (uint32_t n = 1; n <= max_tasks; ++n) {
          const double ops = board->results[ti][threads][n];
          out.scale.push_back(
              ScalePoint{kTests[ti].name, threads ? "threads" : "processes", n, ops});
          total_ops += ops * static_cast<double>(point) / 1e9;
        }
      }
    }
    out.ops = static_cast<uint64_t>(total_ops) + mutations;
    out.ops_per_sec = out.duration_s > 0 ? total_ops / out.duration_s : 0;
    out.verdict = "pass";
    board->~Board();
    return out;
  }
};

}  // namespace

std::unique_ptr<Scenario> make_lookup_scale() {
  return std::make_unique<LookupScale>();
}

}  // namespace leapfrog::catalogue
