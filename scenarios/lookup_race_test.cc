// The observer step of the race engine: free-running observers chain their
// windows (one clock read per lookup), aligned ones read the clock twice, and
// either way every window contains its call.

#include "scenarios/lookup_race.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <ctime>
#include <stdexcept>
#include <string>
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

// Runs `rounds` rounds of set_observer_step's observer; batched: with its
// free-running batches (steps), else one round at a time (step only).
RaceResult observer_rounds(const std::vector<QueryTemplate>& queries, std::vector<uint32_t> mine,
                           bool batched, uint64_t rounds, uint64_t capacity) {
  ActorSpec observer;
  observer.role = ActorRole::Observer;
  set_observer_step(observer, queries, mine, /*chained=*/true);
  EXPECT_TRUE(observer.step);
  EXPECT_TRUE(observer.steps);
  if (!batched) observer.steps = nullptr;
  RaceConfig cfg;
  cfg.iterations = rounds;
  cfg.duration = rounds ? 600'000'000'000 : 50'000'000;
  cfg.fuzzy = false;
  cfg.warmup = 100;  // not a multiple of the batch length
  cfg.capacity = capacity;
  return run_race({observer}, cfg, 7);
}

TEST(ObserverStep, BatchesRecordTheSameRoundsAsSingleSteps) {
  std::vector<QueryTemplate> queries = {stamping_query(), stamping_query(), stamping_query()};
  constexpr uint64_t kN = 1000;
  const RaceResult batched = observer_rounds(queries, {2, 0, 1}, true, kN, kN + 16);
  const RaceResult single = observer_rounds(queries, {2, 0, 1}, false, kN, kN + 16);
  ASSERT_EQ(batched.error, "");
  ASSERT_EQ(single.error, "");
  const auto& b = batched.records.at(0);
  const auto& s = single.records.at(0);
  ASSERT_EQ(b.size(), kN);
  ASSERT_EQ(s.size(), kN);
  expect_windows_contain_calls(b);
  uint32_t used[3] = {};
  for (size_t i = 0; i < kN; ++i) {
    ASSERT_EQ(b[i].round, i);
    ASSERT_EQ(b[i].op, s[i].op) << "round " << i << ": the same seed draws the same query";
    ASSERT_LT(b[i].op, 3u);
    ++used[b[i].op];
    if (i > 0) {
      ASSERT_EQ(b[i].invoke, b[i - 1].complete) << i;
    }
  }
  for (uint32_t n : used) EXPECT_GT(n, 0u);
}

TEST(ObserverStep, BatchesStopBeforeTheBufferFills) {
  std::vector<QueryTemplate> queries = {stamping_query()};
  const RaceResult r = observer_rounds(queries, {0}, true, /*rounds=*/0, /*capacity=*/203);
  ASSERT_EQ(r.error, "");
  const auto& recs = r.records.at(0);
  EXPECT_EQ(recs.size(), 199u);  // the loop keeps 4 slots free
  for (size_t i = 0; i < recs.size(); ++i) ASSERT_EQ(recs[i].round, i);
}

// pad: "./" repeated in front of the file name, to make the paths long.
void expect_lookups_recorded(size_t pad) {
  char dir[] = "/tmp/leapfrog-observer-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  std::string dots;
  for (size_t i = 0; i < pad; ++i) dots += "./";
  const std::string file = std::string(dir) + "/" + dots + "f";
  const std::string missing = std::string(dir) + "/" + dots + "a-long-name-that-is-not-there";
  ASSERT_EQ(close(open(file.c_str(), O_CREAT | O_WRONLY, 0644)), 0);
  struct stat st;
  ASSERT_EQ(stat(file.c_str(), &st), 0);
  auto lookup = [](LookupCall call, const std::string& path) {
    QueryTemplate q;
    q.call = call;
    q.path = path;
    return q;
  };
  std::vector<QueryTemplate> queries = {
      lookup(LookupCall::Stat, file),   lookup(LookupCall::Access, file),
      lookup(LookupCall::Open, file),   lookup(LookupCall::Stat, missing),
      lookup(LookupCall::Open, missing)};
  const RaceResult r = observer_rounds(queries, {0, 1, 2, 3, 4}, true, 500, 516);
  unlink(file.c_str());
  rmdir(dir);
  ASSERT_EQ(r.error, "");
  uint32_t seen[5] = {};
  for (const RawRecord& rec : r.records.at(0)) {
    ASSERT_LT(rec.op, 5u);
    ++seen[rec.op];
    EXPECT_LE(rec.invoke, rec.complete);
    if (rec.op < 3) {
      EXPECT_EQ(rec.err, 0) << rec.op;
      // stat and open report what they reached; access observes nothing.
      EXPECT_EQ(rec.a, rec.op == 1 ? 0 : static_cast<uint64_t>(st.st_dev)) << rec.op;
      EXPECT_EQ(rec.b, rec.op == 1 ? 0 : static_cast<uint64_t>(st.st_ino)) << rec.op;
    } else {
      EXPECT_EQ(rec.err, ENOENT) << rec.op;
      EXPECT_EQ(rec.a, 0u);
      EXPECT_EQ(rec.b, 0u);
    }
  }
  for (uint32_t n : seen) EXPECT_GT(n, 0u);
}

TEST(ObserverStep, RecordsWhatTheLookupsSaw) {
  expect_lookups_recorded(0);
}

// A mix too large to copy into the batch's frame is read in place.
TEST(ObserverStep, RecordsWhatTheLookupsSawWithLongPaths) {
  expect_lookups_recorded(200);
}

TEST(ObserverStep, RejectsQueriesThatAreNotThere) {
  std::vector<QueryTemplate> queries = {stamping_query()};
  ActorSpec o;
  EXPECT_THROW(set_observer_step(o, queries, {}, true), std::invalid_argument);
  EXPECT_THROW(set_observer_step(o, queries, {0, 1}, true), std::invalid_argument);
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

// An actor whose every operation is `ns` of busy work, one record a round.
ActorSpec busy_actor(ActorRole role, TimeNs ns) {
  ActorSpec a;
  a.role = role;
  a.step = [ns](ActorEnv& env, uint32_t round) {
    RawRecord r{};
    r.round = round;
    timed(r, [ns] {
      const TimeNs until = now_ns() + ns;
      while (now_ns() < until) {
      }
      return 0;
    });
    env.push(r);
  };
  return a;
}

// Free-running with a number of rounds: the actor done first does not stop
// while the other is still racing, and the last one done stops after exactly
// its rounds. (Which is first is up to the scheduler on a loaded machine.)
TEST(RunRace, FreeRunningActorsRaceOnUntilTheSlowestIsDone) {
  constexpr uint32_t kN = 300;
  RaceConfig cfg;
  cfg.iterations = kN;
  cfg.duration = 600'000'000'000;
  cfg.fuzzy = false;
  cfg.capacity = 64 * kN;
  const RaceResult r = run_race(
      {busy_actor(ActorRole::Observer, 1'000), busy_actor(ActorRole::Observer, 40'000)}, cfg, 1);
  ASSERT_EQ(r.error, "");
  const size_t a = r.records.at(0).size(), b = r.records.at(1).size();
  EXPECT_EQ(std::min(a, b), kN);
  EXPECT_GT(std::max(a, b), kN);  // went on past its rounds
}

// Lookups whose whole window lies between two consecutive mutations: the
// only ones that can show a state stale.
size_t lookups_between_mutations(const std::vector<RawRecord>& mutations,
                                 const std::vector<RawRecord>& lookups) {
  size_t n = 0;
  for (const RawRecord& l : lookups) {
    auto next = std::lower_bound(mutations.begin(), mutations.end(), l.invoke,
                                 [](const RawRecord& m, TimeNs t) { return m.invoke < t; });
    if (next == mutations.begin() || next == mutations.end()) continue;
    if (std::prev(next)->complete < l.invoke && l.complete < next->invoke) ++n;
  }
  return n;
}

// Free-running, a fast mutator (1 us) back to back would change the tree
// several times within every slow lookup (40 us), and no lookup could show a
// stale state. Paced, it dwells for [0, 2 M] after each mutation, M the
// observer's median lookup, and many lookups fit between two mutations. The
// unpaced control: the same two actors with the mutator's dwell off (an
// observer role on both is not paced).
TEST(RunRace, AFreeRunningMutatorIsPacedByTheObserversLookups) {
  // Rounds, not a duration: a loaded machine gives fewer lookups a second.
  RaceConfig cfg;
  cfg.iterations = 2000;
  cfg.duration = 600'000'000'000;
  cfg.fuzzy = false;
  cfg.capacity = 1 << 20;
  const RaceResult paced = run_race(
      {busy_actor(ActorRole::Mutator, 1'000), busy_actor(ActorRole::Observer, 40'000)}, cfg, 1);
  const RaceResult storm = run_race(
      {busy_actor(ActorRole::Observer, 1'000), busy_actor(ActorRole::Observer, 40'000)}, cfg, 1);
  ASSERT_EQ(paced.error, "");
  ASSERT_EQ(storm.error, "");
  // The bound is twice the observer's median lookup (at least its 40 us).
  EXPECT_GE(paced.timing.pace_ns, 80'000);
  EXPECT_EQ(storm.timing.pace_ns, 0);
  const auto& pl = paced.records.at(1);
  const auto& sl = storm.records.at(1);
  ASSERT_GE(pl.size(), 2000u);
  ASSERT_GE(sl.size(), 2000u);
  const size_t paced_between = lookups_between_mutations(paced.records.at(0), pl);
  const size_t storm_between = lookups_between_mutations(storm.records.at(0), sl);
  // Uniform dwells in [0, 2 M]: about a quarter of the lookups fit whole in one
  // (half the dwells outlast a lookup, by half of it on average), once the
  // observer has published its first median, after 8 lookups.
  // Unpaced, only a preempted mutator leaves such a gap: next to none on an
  // idle machine, a few percent when the actors wait for CPUs.
  EXPECT_GT(paced_between * 10, pl.size()) << paced_between << " of " << pl.size();
  EXPECT_GT(paced_between, 3 * storm_between)
      << "paced " << paced_between << " of " << pl.size() << ", unpaced " << storm_between << " of "
      << sl.size();
}

// Mixed alignment: in one run, the aligned observer meets the mutator at the
// barrier every round (its round r starts after the mutator's round r - 1
// ended, and the mutator's after its), while the free-running observer chains
// its lookups and runs ahead of the mutator. Real chmod and fstatat on tmpfs.
// The barrier check is applied to both observers: it must hold for the
// aligned one and fire for the free one (its positive control).

// Rounds in which `a` started before `b` ended the round before, or the
// other way round: steps that a barrier between rounds forbids.
size_t rounds_out_of_step(const std::vector<RawRecord>& a, const std::vector<RawRecord>& b) {
  size_t n = 0;
  for (size_t r = 1; r < std::min(a.size(), b.size()); ++r)
    n += a[r].invoke < b[r - 1].complete || b[r].invoke < a[r - 1].complete;
  return n;
}

size_t chained(const std::vector<RawRecord>& recs) {
  size_t n = 0;
  for (size_t i = 1; i < recs.size(); ++i) n += recs[i].invoke == recs[i - 1].complete;
  return n;
}

TEST(RunRace, MixedAlignmentRunsAlignedAndFreeObserversTogether) {
  char dir[] = "/dev/shm/leapfrog-mixed-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  struct statfs sfs;
  ASSERT_EQ(statfs(dir, &sfs), 0);
  ASSERT_EQ(sfs.f_type, 0x01021994) << "want tmpfs at /dev/shm";  // TMPFS_MAGIC
  const std::string file = std::string(dir) + "/f";
  ASSERT_EQ(close(open(file.c_str(), O_CREAT | O_WRONLY, 0644)), 0);

  // Few rounds: on a loaded machine each barrier can wait for a time slice.
  constexpr uint32_t kN = 300;
  ActorSpec mutator;
  mutator.role = ActorRole::Mutator;
  mutator.step = [&file](ActorEnv& env, uint32_t round) {
    RawRecord r{};
    r.round = round;
    // A slow mutation (chmod, then ~30 us of work) lets a free observer run ahead.
    timed(r, [&] {
      const int rc = chmod(file.c_str(), round % 2 ? 0600 : 0644) == 0 ? 0 : errno;
      const TimeNs until = now_ns() + 30'000;
      while (now_ns() < until) {
      }
      return rc;
    });
    env.push(r);
  };
  QueryTemplate q;
  q.call = LookupCall::Stat;
  q.path = file;
  const std::vector<QueryTemplate> queries = {q};
  ActorSpec aligned, free;
  aligned.role = free.role = ActorRole::Observer;
  set_observer_step(aligned, queries, {0}, /*chained=*/false);
  set_observer_step(free, queries, {0}, /*chained=*/true);
  free.free_running = true;
  RaceConfig cfg;
  cfg.iterations = kN;
  cfg.duration = 600'000'000'000;
  cfg.fuzzy = true;
  cfg.warmup = 16;
  cfg.capacity = kN + 16;
  const RaceResult r = run_race({mutator, aligned, free}, cfg, 3);
  unlink(file.c_str());
  rmdir(dir);
  ASSERT_EQ(r.error, "");
  const auto& m = r.records.at(0);
  const auto& a = r.records.at(1);
  const auto& f = r.records.at(2);
  ASSERT_EQ(m.size(), kN);
  ASSERT_EQ(a.size(), kN);
  // The free observer raced on past its rounds while the others were not
  // done, until its buffer was full.
  ASSERT_GT(f.size(), kN);
  for (const auto* recs : {&m, &a, &f})
    for (const RawRecord& rec : *recs) ASSERT_EQ(rec.err, 0);
  EXPECT_EQ(rounds_out_of_step(a, m), 0u);  // at the barrier every round
  EXPECT_GT(rounds_out_of_step(f, m), 0u);  // the same check fires on the free one
  EXPECT_EQ(chained(f), f.size() - 1);      // free-running: one clock read a lookup
  EXPECT_EQ(chained(a), 0u);
  // The delays were swept from the aligned actors' timing alone.
  EXPECT_GT(r.timing.mutator_mean_ns, 25'000);
  EXPECT_GT(r.timing.delay_span_ns, r.timing.mutator_mean_ns);
  EXPECT_EQ(r.timing.pace_ns, 0);  // an aligned mutator is paced by the barrier
}

// Collects what run_race hands it, per actor, taking at most `per_call`
// records a call and sleeping `sleep_ns` each call (a judge falling behind).
class CollectingSink final : public RecordSink {
 public:
  CollectingSink(size_t actors, size_t per_call, TimeNs sleep_ns)
      : records(actors), ended(actors, false), per_call_(per_call), sleep_ns_(sleep_ns) {}
  size_t take(uint32_t actor, const RawRecord* r, size_t n) override {
    EXPECT_FALSE(ended.at(actor)) << "records after the actor was done";
    if (sleep_ns_) {
      const timespec ts{0, static_cast<long>(sleep_ns_)};
      nanosleep(&ts, nullptr);
    }
    n = std::min(n, per_call_);
    records.at(actor).insert(records.at(actor).end(), r, r + n);
    return n;
  }
  void done(uint32_t actor) override { ended.at(actor) = true; }
  std::vector<std::vector<RawRecord>> records;
  std::vector<bool> ended;

 private:
  size_t per_call_;
  TimeNs sleep_ns_;
};

// Every record reaches the sink once, in each actor's order, through a ring
// far smaller than the run (aligned and free-running actors), and nothing is
// kept in the result.
TEST(RunRace, ASinkTakesEveryRecordInOrderThroughASmallRing) {
  for (bool fuzzy : {true, false}) {
    RaceConfig cfg;
    cfg.iterations = 20'000;
    cfg.duration = 600'000'000'000;
    cfg.fuzzy = fuzzy;
    cfg.capacity = 1024;
    CollectingSink sink(2, SIZE_MAX, 0);
    const RaceResult r = run_race(
        {busy_actor(ActorRole::Mutator, 100), busy_actor(ActorRole::Observer, 100)}, cfg, 1, &sink);
    ASSERT_EQ(r.error, "") << fuzzy;
    EXPECT_TRUE(r.records.empty());
    for (size_t a = 0; a < 2; ++a) {
      const auto& got = sink.records[a];
      EXPECT_TRUE(sink.ended[a]);
      ASSERT_GE(got.size(), cfg.iterations) << fuzzy << " actor " << a;
      if (fuzzy) {
        EXPECT_EQ(got.size(), cfg.iterations) << a;
      }
      for (size_t i = 0; i < got.size(); ++i) {
        ASSERT_EQ(got[i].round, i) << fuzzy << " actor " << a;
        if (i) {
          ASSERT_GE(got[i].invoke, got[i - 1].complete) << fuzzy << " actor " << a;
        }
      }
    }
    EXPECT_EQ(r.taken, sink.records[0].size() + sink.records[1].size());
  }
}

// A sink slower than the actors: they wait for it (backpressure, counted in
// the result) rather than lose a record or end the run early.
TEST(RunRace, ASlowSinkHoldsTheActorsBack) {
  RaceConfig cfg;
  cfg.iterations = 6'000;
  cfg.duration = 600'000'000'000;
  cfg.fuzzy = false;
  cfg.capacity = 1024;
  CollectingSink sink(1, 64, 1'000'000);  // 64 records a millisecond at most
  const RaceResult r = run_race({busy_actor(ActorRole::Observer, 1'000)}, cfg, 1, &sink);
  ASSERT_EQ(r.error, "");
  EXPECT_EQ(sink.records[0].size(), cfg.iterations);
  EXPECT_GT(r.stalls, 0u);
  EXPECT_GT(r.stalled_s, 0.0);
}

}  // namespace
}  // namespace leapfrog
