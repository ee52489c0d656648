// Harness overhead: lookups per second of the recorded observer loop (the real
// race engine: clock reads, shared-memory record, loop bookkeeping) divided by
// a bare loop of the same syscalls, measured side by side, interleaved, in one
// run on tmpfs. Needs root (it runs in a sandbox like the agent).

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <vector>

#include "scenarios/catalogue/common.h"
#include "scenarios/clock.h"
#include "scenarios/race.h"
#include "scenarios/shared_region.h"
#include "scenarios/sys/posix_ops.h"

namespace leapfrog {
namespace {

constexpr uint64_t kIterations = 400'000;
constexpr int kRounds = 5;
const Cred kObserver{65534, 65534, {}};

// The three lookups of the query mix, without any recording (with_clock: plus
// the two CLOCK_MONOTONIC reads every record needs, and nothing else).
double bare_loop(const std::string& cwd, const std::string& file, uint64_t seed, bool with_clock) {
  SharedRegion result(sizeof(double));
  const pid_t pid = fork();
  if (pid == 0) {
    if (chdir(cwd.c_str()) != 0) _exit(3);
    sys::drop_privileges(kObserver);
    Rng rng = Rng(seed).fork(0);
    const char* path = file.c_str();
    struct stat st;
    TimeNs sink = 0;
    const TimeNs start = now_ns();
    for (uint64_t i = 0; i < kIterations; ++i) {
      if (with_clock) sink += now_ns();
      switch (rng.below(3)) {
        case 0: fstatat(AT_FDCWD, path, &st, 0); break;
        case 1: faccessat(AT_FDCWD, path, R_OK, 0); break;
        default: {
          const int fd = openat(AT_FDCWD, path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
          if (fd >= 0) {
            fstat(fd, &st);
            close(fd);
          }
        }
      }
      if (with_clock) sink += now_ns();
    }
    if (sink == 42) std::printf(" ");
    *static_cast<double*>(result.data()) = static_cast<double>(kIterations) / (static_cast<double>(now_ns() - start) / 1e9);
    _exit(0);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return *static_cast<double*>(result.data());
}

// The same mix through the race engine's observer loop (free-running).
double median(std::vector<double> v);

double recorded_loop(const std::string& cwd, std::vector<QueryTemplate>& queries, uint64_t seed) {
  ActorSpec observer;
  observer.role = ActorRole::Observer;
  observer.prepare = [cwd] {
    if (chdir(cwd.c_str()) != 0) throw std::runtime_error("chdir");
    sys::drop_privileges(kObserver);
  };
  observer.step = [&queries](ActorEnv& env, uint32_t round) {
    const uint32_t q = static_cast<uint32_t>(env.rng().below(queries.size()));
    RawRecord r{};
    r.op = q;
    r.round = round;
    queries[q].run(r);
    env.push(r);
  };
  RaceConfig cfg;
  cfg.iterations = kIterations;
  cfg.duration = 600LL * 1'000'000'000;
  cfg.fuzzy = false;
  cfg.capacity = kIterations + 16;
  RaceResult r = run_race({observer}, cfg, seed);
  if (!r.error.empty()) {
    std::fprintf(stderr, "error: %s\n", r.error.c_str());
    return 0;
  }
  const auto& recs = r.records[0];
  return static_cast<double>(recs.size()) / (static_cast<double>(recs.back().complete - recs.front().invoke) / 1e9);
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

struct Figures {
  double bare, clock, recorded;
};

Figures measure(const std::string& root, const std::string& file) {
  std::vector<QueryTemplate> queries = {catalogue::stat_query(0, file), catalogue::access_query(0, file),
                                        catalogue::open_query(0, file)};
  std::vector<double> bare, clock, recorded;
  for (int round = 0; round < kRounds; ++round) {
    bare.push_back(bare_loop(root, file, 42, false));
    clock.push_back(bare_loop(root, file, 42, true));
    recorded.push_back(recorded_loop(root, queries, 42));
  }
  return Figures{median(bare), median(clock), median(recorded)};
}

int bench(const std::string& workdir) {
  auto ws = fs::provision(fs::FsSpec{}, workdir);
  catalogue::DiskTree disk(*ws);
  std::string path;
  for (int i = 0; i < 8; ++i) {
    path += (i ? "/d" : "d") + std::to_string(i);
    disk.mkdir(path, 0755);
    if (i == 2) disk.file(path + "/f", 0644, "f");
  }
  disk.file(path + "/f", 0644, "f");
  std::printf("harness overhead on tmpfs: stat/access/open mix, %llu lookups x %d interleaved rounds, medians\n",
              static_cast<unsigned long long>(kIterations), kRounds);
  std::printf("  %-12s %14s %18s %14s %16s %14s\n", "path", "bare/s", "bare+2 clocks/s", "recorded/s",
              "recorded/bare", "clock share");
  for (const std::string& file : {std::string("d0/d1/d2/f"), path + "/f"}) {
    const Figures f = measure(ws->lookup_root(), file);
    const double overhead = 1 / f.recorded - 1 / f.bare, clock_cost = 1 / f.clock - 1 / f.bare;
    std::printf("  depth %-6zu %14.0f %18.0f %14.0f %16.3f %13.0f%%\n", static_cast<size_t>(std::count(file.begin(), file.end(), '/')),
                f.bare, f.clock, f.recorded, f.recorded / f.bare, 100 * clock_cost / overhead);
  }
  std::printf("  target: recorded/bare >= 0.95; 'clock share' is the part of the overhead that the two\n"
              "  CLOCK_MONOTONIC reads per record (required by the design) cost on their own\n");
  return 0;
}

}  // namespace
}  // namespace leapfrog

int main() {
  try {
    return leapfrog::fs::run_sandboxed([](const std::string& workdir) { return leapfrog::bench(workdir); });
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 2;
  }
}
