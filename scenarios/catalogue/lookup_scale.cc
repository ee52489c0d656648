// lookup-scale: will-it-scale's file testcases (lseek1.., readseek1.., open1..,
// unlink1.., pread1..) under their own names, and access/stat lookups at depth
// N, for 1..N tasks as processes and as threads, optionally with a background
// mutator dirtying a directory on the lookup path. Run as will-it-scale runs
// them: one task per core first, then SMT siblings; a warm-up, then timed
// samples; ops/s summed over the tasks. No oracle: it reports each point's
// samples, mean and interval, and says when the machine was too small or busy.

#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <bit>
#include <cerrno>
#include <cstring>
#include <thread>
#include <vector>

#include "scenarios/catalogue/catalogue.h"
#include "scenarios/catalogue/common.h"
#include "scenarios/catalogue/scale_host.h"
#include "scenarios/catalogue/scale_testcases.h"
#include "scenarios/clock.h"
#include "scenarios/scale_report.h"
#include "scenarios/shared_region.h"
#include "scenarios/stats/sample_stats.h"
#include "scenarios/sys/posix_ops.h"

namespace leapfrog::catalogue {
namespace {

using scale::kTestcaseCount;
using scale::kTestcases;
using scale::Testcase;

constexpr uint32_t kMaxTasks = 64;
constexpr uint32_t kMaxSamples = 30;
// Other work beyond kLoadedCpus (scale_report.h) during a point marks the run loaded.
// Longest wait, after the warm-up, for every task to have started iterating.
constexpr TimeNs kStartWait = 10'000'000'000;

struct alignas(64) Counter {
  std::atomic<uint64_t> ops{0};
  std::atomic<int32_t> pid{0};
  std::atomic<int32_t> tid{0};
};

struct PointResult {
  uint32_t n = 0;
  double samples[kMaxSamples];
  double idle_pct = -1;
  double other_load = -1;
  double task_cpu_s = 0;  // CPU time the tasks ran over the samples
  double window_s = 0;    // wall time of the samples
  double host_load = -1;  // the VM host's other load, highest over the samples (-1: unknown)
};

struct Board {
  std::atomic<uint32_t> go{0};
  std::atomic<uint32_t> stop{0};
  std::atomic<uint32_t> ready{0};
  std::atomic<uint32_t> failed{0};
  Counter counters[kMaxTasks];
  PointResult results[kTestcaseCount][2][kMaxTasks + 1];  // by test, mode, tasks
  char error[256];

  void fail(const std::string& why) {
    if (failed.exchange(1) == 0) std::strncpy(error, why.c_str(), sizeof error - 1);
  }
};

struct Timing {
  TimeNs warmup;
  TimeNs sample;
  uint32_t samples;
};

struct LookupPaths {
  std::string same;                   // relative to the lookup root
  std::vector<std::string> separate;  // one per task
};

// One task: pinned, opens its files, then iterates from go to stop.
void task_main(Board* b, const Testcase& tc, uint32_t task, const scale::PointFiles& files,
               int cpu) {
  scale::pin_to(cpu);
  b->counters[task].pid.store(static_cast<int32_t>(getpid()));
  b->counters[task].tid.store(static_cast<int32_t>(syscall(SYS_gettid)));
  scale::TaskFiles f;
  bool ok = true;
  try {
    f = files.open_task(task);
  } catch (const std::exception& e) {
    b->fail(std::string(tc.name) + " task " + std::to_string(task) + ": " + e.what());
    ok = false;
  }
  b->ready.fetch_add(1);
  while (!b->go.load(std::memory_order_acquire)) __builtin_ia32_pause();
  if (!ok) return;
  if (const int err = scale::run_loop(tc, f, b->counters[task].ops, b->stop))
    b->fail(std::string(tc.name) + " task " + std::to_string(task) + ": " + std::strerror(err));
  scale::PointFiles::close_task(f);
}

uint64_t total_ops(Board* b, uint32_t tasks) {
  uint64_t total = 0;
  for (uint32_t t = 0; t < tasks; ++t) total += b->counters[t].ops.load(std::memory_order_relaxed);
  return total;
}

uint64_t task_cpu_ns(Board* b, uint32_t tasks) {
  uint64_t ns = 0;
  for (uint32_t t = 0; t < tasks; ++t)
    ns += scale::thread_cpu_ns(b->counters[t].pid.load(), b->counters[t].tid.load());
  return ns;
}

// Measures one point: `tasks` tasks of `tc`, a warm-up, then the samples;
// each sample's operations go to `progress` (if any) as it ends. Throws
// std::runtime_error when a task failed.
PointResult measure(Board* b, const Testcase& tc, bool threads, uint32_t tasks,
                    const LookupPaths& paths, const std::vector<int>& cpus, const Timing& tm,
                    RunProgress* progress) {
  b->go = 0;
  b->stop = 0;
  b->ready = 0;
  for (auto& c : b->counters) {
    c.ops = 0;
    c.pid = 0;
    c.tid = 0;
  }
  const std::string dir =
      std::string("w/") + tc.name + (threads ? "-threads-" : "-processes-") + std::to_string(tasks);
  const scale::PointFiles files(tc, dir, tasks, paths.same, paths.separate);
  std::vector<pid_t> pids;
  std::vector<std::thread> pool;
  for (uint32_t t = 0; t < tasks; ++t) {
    const int cpu = cpus[t % cpus.size()];
    if (threads) {
      pool.emplace_back([b, &tc, t, &files, cpu] { task_main(b, tc, t, files, cpu); });
    } else {
      const pid_t pid = fork();
      if (pid == 0) {
        task_main(b, tc, t, files, cpu);
        _exit(0);
      }
      if (pid < 0) {
        b->fail(std::string("fork: ") + std::strerror(errno));
        b->ready.fetch_add(1);
      } else {
        pids.push_back(pid);
      }
    }
  }
  while (b->ready.load() < tasks) std::this_thread::yield();
  b->go.store(1, std::memory_order_release);
  PointResult r;
  // The sleeps are the measurement intervals themselves, not synchronisation.
  std::this_thread::sleep_for(std::chrono::nanoseconds(tm.warmup));
  // On a busy machine a task may not have run yet: the samples start once
  // every task has iterated (or after kStartWait, then the point shows it).
  const TimeNs started_by = now_ns() + kStartWait;
  auto all_started = [&] {
    for (uint32_t t = 0; t < tasks; ++t)
      if (b->counters[t].ops.load(std::memory_order_relaxed) == 0 && !b->failed.load())
        return false;
    return true;
  };
  while (!all_started() && now_ns() < started_by)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  const scale::CpuTimes cpu0 = scale::read_cpu_times();
  const uint64_t cpu_ns0 = task_cpu_ns(b, tasks);
  const TimeNs start = now_ns();
  TimeNs t0 = start;
  uint64_t c0 = total_ops(b, tasks);
  for (uint32_t s = 0; s < tm.samples; ++s) {
    std::this_thread::sleep_for(std::chrono::nanoseconds(tm.sample));
    const TimeNs t1 = now_ns();
    const uint64_t c1 = total_ops(b, tasks);
    r.samples[r.n++] = static_cast<double>(c1 - c0) / (static_cast<double>(t1 - t0) / 1e9);
    if (progress) progress->operations.fetch_add(c1 - c0, std::memory_order_relaxed);
    const scale::HostView host = scale::read_host_view(scale::host_view_path());
    if (host.known) r.host_load = std::max(r.host_load, host.other_load);
    t0 = t1;
    c0 = c1;
  }
  const scale::CpuTimes cpu1 = scale::read_cpu_times();
  const uint64_t cpu_ns1 = task_cpu_ns(b, tasks);
  const double window_s = static_cast<double>(now_ns() - start) / 1e9;
  b->stop.store(1);
  for (auto& th : pool) th.join();
  for (pid_t pid : pids) waitpid(pid, nullptr, 0);
  if (b->failed.load()) throw std::runtime_error(b->error);
  r.idle_pct = scale::idle_pct(cpu0, cpu1);
  const double busy_s = static_cast<double>(cpu1.busy - cpu0.busy) / scale::ticks_per_second();
  r.task_cpu_s = static_cast<double>(cpu_ns1 - cpu_ns0) / 1e9;
  r.window_s = window_s;
  r.other_load = std::max(0.0, (busy_s - r.task_cpu_s) / window_s);
  return r;
}

class LookupScale : public Scenario {
 public:
  const char* name() const override { return "lookup-scale"; }
  const char* summary() const override {
    return "will-it-scale's lseek1-2, readseek1-3, open1-3, unlink1-2, pread1-3 and access/stat "
           "lookups at depth N, 1..N tasks, warm-up then timed samples with 95 % intervals";
  }
  std::vector<ParamSpec> params() const override {
    const int64_t cpus = static_cast<int64_t>(scale::cpu_order().size());
    return {
        {"max_tasks", std::min<int64_t>(cpus, kMaxTasks), 1, kMaxTasks,
         "largest task count (1..N are measured)"},
        {"point_ms", 1000, 20, 10000, "length of one timed sample"},
        {"samples", 5, 1, kMaxSamples, "timed samples per point"},
        {"warmup_ms", 1000, 0, 10000, "warm-up before each point's samples"},
        {"mode", 2, 0, 2, "0: processes, 1: threads, 2: both"},
        {"test", -1, -1, kTestcaseCount - 1,
         "only this test (index in docs/scaling.md's list; 0-3 access/stat, 4 lseek1 .. 16 "
         "pread3), -1: all"},
        {"tests", 0, 0, (int64_t{1} << kTestcaseCount) - 1,
         "these tests, as a bit mask of their indices (bit i: test i; e.g. 80 = lseek1 and "
         "readseek1); 0: as `test` says"},
        {"depth", 2, 1, 16, "directories above the access/stat tests' file"},
        {"mutator", 0, 0, 1, "1: chmod a directory on the path (0755 <-> 0711) in the background"}};
  }
  // Every point: its warm-up, its samples, up to 10 s waiting for tasks to
  // start on a busy machine, and 2 s to start and stop the tasks.
  std::optional<std::chrono::nanoseconds> run_time(
      const std::map<std::string, int64_t>& p) const override {
    using std::chrono::milliseconds;
    const int64_t tests = std::popcount(chosen_tests(p.at("tests"), p.at("test")));
    const int64_t modes = p.at("mode") == 2 ? 2 : 1;
    const int64_t points = tests * modes * p.at("max_tasks");
    return milliseconds(points * (p.at("warmup_ms") + p.at("samples") * p.at("point_ms") + 12'000));
  }
  Outcome run(RunContext& ctx) const override {
    const uint32_t max_tasks = static_cast<uint32_t>(ctx.param("max_tasks"));
    const Timing tm{ctx.param("warmup_ms") * 1'000'000, ctx.param("point_ms") * 1'000'000,
                    static_cast<uint32_t>(ctx.param("samples"))};
    const int mode = static_cast<int>(ctx.param("mode"));
    const uint64_t only = chosen_tests(ctx.param("tests"), ctx.param("test"));
    const int depth = static_cast<int>(ctx.param("depth"));
    DiskTree disk(ctx.ws);
    std::string dir;
    for (int i = 0; i < depth; ++i) {
      dir += (i ? "/l" : "l") + std::to_string(i);
      disk.mkdir(dir, 0755);
    }
    LookupPaths paths{dir + "/f", {}};
    disk.file(paths.same, 0644, "x");
    for (uint32_t t = 0; t < max_tasks; ++t) {
      paths.separate.push_back(dir + "/f" + std::to_string(t));
      disk.file(paths.separate.back(), 0644, "x");
    }
    // will-it-scale's files, made by the unprivileged tasks as in its /tmp.
    disk.mkdir("w", 01777);
    const std::vector<int> cpus = scale::cpu_order();
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
        for (int ti = 0; ti < kTestcaseCount; ++ti) {
          if (!(only >> ti & 1)) continue;
          for (int threads = 0; threads < 2; ++threads) {
            if (mode != 2 && mode != threads) continue;
            for (uint32_t n = 1; n <= max_tasks; ++n)
              board->results[ti][threads][n] =
                  measure(board, kTestcases[ti], threads, n, paths, cpus, tm, ctx.opts.progress);
          }
        }
      } catch (const std::exception& e) {
        if (!board->error[0]) std::strncpy(board->error, e.what(), sizeof board->error - 1);
        code = 3;
      }
      _exit(code);
    }
    // The optional background mutator runs here, as root, until the child ends.
    const std::string mdir = disk.m(dir);
    uint64_t mutations = 0;
    int status = 0;
    if (ctx.param("mutator")) {
      while (waitpid(child, &status, WNOHANG) == 0) {
        ::chmod(mdir.c_str(), (mutations & 1) ? 0755 : 0711);
        ++mutations;
      }
      ::chmod(mdir.c_str(), 0755);
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
    report(*board, max_tasks, mode, only, tm, cpus.size(), ctx.param("mutator") != 0, out);
    out.mutations = mutations;
    out.ops += mutations;
    out.verdict = "pass";
    board->~Board();
    return out;
  }

 private:
  // The tests to measure, a bit per index: the `tests` mask, else `test`
  // alone, else all.
  static uint64_t chosen_tests(int64_t mask, int64_t test) {
    if (mask > 0) return static_cast<uint64_t>(mask);
    if (test >= 0) return uint64_t{1} << test;
    return (uint64_t{1} << kTestcaseCount) - 1;
  }

  // The points, their statistics and the machine's fitness into `out`.
  static void report(const Board& board, uint32_t max_tasks, int mode, uint64_t only,
                     const Timing& tm, size_t cpus, bool mutator, Outcome& out) {
    double total_ops = 0, busy_s = 0;
    ScaleHost& host = out.scale_host;
    host.cpus = static_cast<uint32_t>(cpus);
    host.sample_s = static_cast<double>(tm.sample) / 1e9;
    host.warmup_s = static_cast<double>(tm.warmup) / 1e9;
    std::string busiest, busiest_on_host;
    for (int ti = 0; ti < kTestcaseCount; ++ti) {
      if (!(only >> ti & 1)) continue;
      for (int threads = 0; threads < 2; ++threads) {
        if (mode != 2 && mode != threads) continue;
        for (uint32_t n = 1; n <= max_tasks; ++n) {
          const PointResult& r = board.results[ti][threads][n];
          ScalePoint p;
          p.test = kTestcases[ti].name;
          p.mode = threads ? "threads" : "processes";
          p.tasks = n;
          p.samples.assign(r.samples, r.samples + r.n);
          const stats::Summary s = stats::summarize(p.samples);
          p.ops_per_sec = s.mean;
          p.stddev = s.stddev;
          p.ci_low = s.ci_low;
          p.ci_high = s.ci_high;
          p.idle_pct = r.idle_pct;
          p.other_load = r.other_load;
          p.task_cpu_s = r.task_cpu_s;
          p.window_s = r.window_s;
          p.host_load = r.host_load;
          if (r.host_load > host.max_host_load) {
            host.max_host_load = r.host_load;
            busiest_on_host = p.test + " " + p.mode + " " + std::to_string(n) + " tasks";
          }
          if (r.other_load > host.max_other_load) {
            host.max_other_load = r.other_load;
            busiest = p.test + " " + p.mode + " " + std::to_string(n) + " tasks";
          }
          total_ops += s.mean * static_cast<double>(s.n) * host.sample_s;
          busy_s += static_cast<double>(s.n) * host.sample_s;
          out.scale.push_back(std::move(p));
        }
      }
    }
    if (max_tasks > cpus)
      host.warnings.push_back(std::to_string(max_tasks) + " tasks on " + std::to_string(cpus) +
                              " CPUs: points above " + std::to_string(cpus) + " tasks share CPUs");
    if (host.max_other_load > kLoadedCpus) {
      char buf[160];
      std::snprintf(buf, sizeof buf, "loaded: other work used %.2f CPUs during %s%s",
                    host.max_other_load, busiest.c_str(),
                    mutator ? " (the background mutator counts)" : "");
      host.warnings.push_back(buf);
    }
    const std::string view_path = scale::host_view_path();
    const scale::HostView view = scale::read_host_view(view_path);
    struct stat view_stat {};
    if (::stat(view_path.c_str(), &view_stat) == 0) {
      // In a VM whose launcher reports: a point it said nothing about is
      // unknown, never idle.
      const auto unknown = std::count_if(out.scale.begin(), out.scale.end(),
                                         [](const ScalePoint& p) { return p.host_load < 0; });
      if (unknown > 0)
        host.warnings.push_back(
            "the VM's host did not report its load during " + std::to_string(unknown) + " of " +
            std::to_string(out.scale.size()) + " points: whether it was loaded then is unknown");
    }
    if (view.known) {
      host.host_cpus = view.host_cpus;
      host.vcpus = view.vcpus;
      host.vcpu_pinning = view.pinning;
    }
    if (host.max_host_load > kLoadedCpus) {
      char buf[200];
      std::snprintf(buf, sizeof buf,
                    "loaded host: work outside this VM used %.2f of the host's %u CPUs during %s",
                    host.max_host_load, host.host_cpus, busiest_on_host.c_str());
      host.warnings.push_back(buf);
    }
    host.load_average = scale::load_average();
    host.boot_id = scale::boot_id();
    for (const auto& w : host.warnings) out.notes.push_back(w);
    out.ops = static_cast<uint64_t>(total_ops);
    out.ops_per_sec = busy_s > 0 ? total_ops / busy_s : 0;
  }
};

}  // namespace

std::unique_ptr<Scenario> make_lookup_scale() {
  return std::make_unique<LookupScale>();
}

}  // namespace leapfrog::catalogue
