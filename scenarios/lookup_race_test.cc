// The observer step of the race engine: free-running observers chain their
// windows (one clock read per lookup), aligned ones read the clock twice, and
// either way every window contains its call.

#include "scenarios/lookup_race.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <vector>

#include "scenarios/shared_region.h"

namespace leapfrog {
namespace {

constexpr uint64_t kRounds = 2000;

// A query whose call stamps the time it ran at into the record's `a`, so that
// the test can check that the window contains the call.
QueryTemplate stamping_query() {
  QueryTemplate q;
  q.run = [](RawRecord& r) {
    timed(r, [&] {
      r.a = static_cast<uint64_t>(now_ns());
      return getppid() > 0 ? 0 : 1;
    });
  };
  return q;
}

std::vector<RawRecord> observe_rounds(bool chained, bool fuzzy) {
  std::vector<QueryTemplate> queries = {stamping_query()};
  ActorSpec observer;
  observer.role = ActorRole::Observer;
  observer.step = [&queries, chained](ActorEnv& env, uint32_t round) {
    observe(env, queries[0], 0, round, chained);
  };
  RaceConfig cfg;
  cfg.iterations = kRounds;
  cfg.duration = 600'000'000'000;
  cfg.fuzzy = fuzzy;
  cfg.warmup = 16;
  cfg.capacity = kRounds + 16;
  RaceResult r = run_race({observer}, cfg, 1);
  EXPECT_EQ(r.error, "");
  EXPECT_EQ(r.cpu_s.size(), 1u);
  return r.records.at(0);
}

void expect_windows_contain_calls(const std::vector<RawRecord>& recs) {
  for (const RawRecord& r : recs) {
    EXPECT_LE(r.invoke, static_cast<TimeNs>(r.a));
    EXPECT_LE(static_cast<TimeNs>(r.a), r.complete);
    EXPECT_EQ(r.err, 0);
  }
}

TEST(Observe, ChainedWindowsTouchEndToEnd) {
  auto recs = observe_rounds(/*chained=*/true, /*fuzzy=*/false);
  ASSERT_EQ(recs.size(), kRounds);
  expect_windows_contain_calls(recs);
  for (size_t i = 1; i < recs.size(); ++i) ASSERT_EQ(recs[i].invoke, recs[i - 1].complete) << i;
}

TEST(Observe, UnchainedWindowsReadTheClockBeforeEachCall) {
  auto recs = observe_rounds(/*chained=*/false, /*fuzzy=*/true);
  ASSERT_EQ(recs.size(), kRounds);
  expect_windows_contain_calls(recs);
  // Each invoke is a fresh read, taken after the previous completion (the
  // barrier lies between the two calls), so the windows are not chained.
  size_t later = 0;
  for (size_t i = 1; i < recs.size(); ++i) {
    ASSERT_GE(recs[i].invoke, recs[i - 1].complete) << i;
    later += recs[i].invoke > recs[i - 1].complete;
  }
  EXPECT_GT(later, 0u);
}

TEST(Observe, FirstRecordOfAChainReadsTheClock) {
  auto recs = observe_rounds(/*chained=*/true, /*fuzzy=*/false);
  ASSERT_FALSE(recs.empty());
  EXPECT_GT(recs[0].invoke, 0);
}

TEST(RunRace, ReportsEachActorsCpuTime) {
  ActorSpec busy;
  busy.step = [](ActorEnv& env, uint32_t round) {
    RawRecord r{};
    r.round = round;
    timed(r, [] {
      volatile uint64_t x = 0;
      for (int i = 0; i < 20000; ++i) x = x + i;
      return 0;
    });
    env.push(r);
  };
  RaceConfig cfg;
  cfg.iterations = 200;
  cfg.fuzzy = false;
  cfg.capacity = 256;
  RaceResult r = run_race({busy}, cfg, 1);
  ASSERT_EQ(r.error, "");
  ASSERT_EQ(r.cpu_s.size(), 1u);
  EXPECT_GT(r.cpu_s[0], 0.0);
  EXPECT_EQ(r.records[0].size(), 200u);
}

}  // namespace
}  // namespace leapfrog
