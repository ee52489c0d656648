// foffset's recorder judges pass by pass as the race runs; its results must
// be check_history's on the history file it writes, violations and all, and
// it must hold about a pass, not the run.

#include "scenarios/offset_recorder.h"

#include <gtest/gtest.h>

#include <sstream>

#include "scenarios/history_io.h"
#include "scenarios/rng.h"

namespace leapfrog {
namespace {

constexpr uint32_t kBlock = 64;
constexpr uint64_t kBlocks = 64;

HistoryHeader header() {
  HistoryHeader h;
  h.scenario = "foffset";
  h.block_size = kBlock;
  h.blocks = kBlocks;
  h.actors = {Actor{0, "peer", {}, "fuzzy"}, Actor{1, "peer", {}, "fuzzy"}};
  return h;
}

RawRecord read_at(uint32_t round, TimeNs invoke, TimeNs complete, uint32_t epoch, int64_t offset,
                  uint32_t length = kBlock) {
  RawRecord r{};
  r.round = round;
  r.invoke = invoke;
  r.complete = complete;
  r.a = static_cast<uint64_t>(offset);
  r.b = length;
  r.aux = epoch << 1;
  return r;
}

// Two peers read `passes` passes over the file, rewinding together between
// them; `torn` passes get a block read twice or skipped, by the seed.
std::vector<std::vector<RawRecord>> race(uint32_t passes, uint64_t seed, uint32_t* torn) {
  Rng rng(seed);
  std::vector<std::vector<RawRecord>> by_actor(2);
  TimeNs t = 1000;
  uint32_t round = 0;
  *torn = 0;
  for (uint32_t e = 0; e < passes; ++e) {
    const bool tear = rng.chance(0.3);
    *torn += tear;
    const uint64_t skip = tear ? rng.below(kBlocks - 1) + 1 : kBlocks;  // this block comes twice
    for (uint64_t b = 0; b < kBlocks; ++b, ++round) {
      const uint32_t actor = b % 2;
      const uint64_t block = b == skip ? b - 1 : b;
      by_actor[actor].push_back(read_at(round, t, t + 40, e, static_cast<int64_t>(block * kBlock)));
      if (rng.chance(0.1)) {  // an lseek(SEEK_CUR) where the reads stand
        RawRecord s = read_at(round, t + 45, t + 50, e, static_cast<int64_t>((block + 1) * kBlock), 0);
        s.aux |= 1;
        by_actor[actor].push_back(s);
      }
      t += 60;
    }
    by_actor[kBlocks % 2].push_back(read_at(round++, t, t + 10, e, -1, 0));  // end of file
    t += 1000;  // the rewind barrier
  }
  return by_actor;
}

TEST(OffsetRecorder, JudgesAsCheckHistoryDoesOnTheFileItWrites) {
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    uint32_t torn = 0;
    const auto by_actor = race(12, seed, &torn);
    const HistoryHeader h = header();
    std::stringstream file;
    CheckOptions opts;
    opts.max_reported = 3;  // the cap falls in the same place
    OffsetRecorder recorder(h, 2, true, &file, nullptr, opts);
    // The actors' records arrive in chunks, interleaved, as the race hands them over.
    size_t at[2] = {0, 0};
    Rng rng(seed * 7);
    while (at[0] < by_actor[0].size() || at[1] < by_actor[1].size()) {
      for (uint32_t a = 0; a < 2; ++a) {
        const size_t n = std::min<size_t>(rng.below(9) + 1, by_actor[a].size() - at[a]);
        if (n) recorder.take(a, by_actor[a].data() + at[a], n);
        at[a] += n;
        if (at[a] == by_actor[a].size()) recorder.done(a);
      }
      recorder.drained();
    }
    const CheckResult live = recorder.finish();
    const History read = read_history(file);
    const CheckResult whole = check_history(read, opts);
    EXPECT_EQ(live.violation_count, whole.violation_count) << seed;
    EXPECT_EQ(live.violation_count > 0, torn > 0) << seed << ": the positive control did not fire";
    EXPECT_EQ(live.offsets_checked, whole.offsets_checked) << seed;
    EXPECT_EQ(live.first_violation_at, whole.first_violation_at) << seed;
    EXPECT_EQ(live.by_kind, whole.by_kind) << seed;
    ASSERT_EQ(live.violations.size(), whole.violations.size()) << seed;
    for (size_t i = 0; i < live.violations.size(); ++i) {
      EXPECT_EQ(live.violations[i].record, whole.violations[i].record) << seed << " " << i;
      EXPECT_EQ(live.violations[i].observed, whole.violations[i].observed) << seed << " " << i;
    }
    EXPECT_EQ(recorder.ops(), read.offsets.size());
    // It never held much more than a pass (64 reads, a few seeks, per pass).
    EXPECT_LT(recorder.peak_held(), 3 * (kBlocks + kBlocks / 4)) << seed;
  }
}

}  // namespace
}  // namespace leapfrog
