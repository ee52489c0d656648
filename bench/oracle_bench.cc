// Oracle throughput: lookup steps checked per second on one core, for legal
// histories of 1e5, 1e6 and 1e7 operations (a chmod every fourth operation on
// a directory of a depth-4 path, lookups racing it).

#include <benchmark/benchmark.h>

#include <cerrno>
#include <map>
#include <memory>

#include "bench/legal_history.h"
#include "scenarios/oracle.h"

namespace leapfrog {
namespace {

using bench::make_history;

void BM_OracleCheck(benchmark::State& state) {
  static std::map<int64_t, std::unique_ptr<History>> cache;
  auto& h = cache[state.range(0)];
  if (!h) h = make_history(state.range(0));
  uint64_t steps = 0;
  for (auto _ : state) {
    CheckResult r = check_history(*h);
    if (r.violation_count != 0) state.SkipWithError("generated history was not legal");
    steps += r.steps_checked;
    benchmark::DoNotOptimize(r);
  }
  state.counters["steps_per_sec"] = benchmark::Counter(static_cast<double>(steps), benchmark::Counter::kIsRate);
  state.counters["ops"] = static_cast<double>(state.range(0));
}

BENCHMARK(BM_OracleCheck)->Arg(100'000)->Arg(1'000'000)->Arg(10'000'000)->Unit(benchmark::kMillisecond)->MinTime(1.0);

}  // namespace
}  // namespace leapfrog

BENCHMARK_MAIN();
