// The seed's choice of a race strategy: a pure function of its inputs that
// covers every alignment over a campaign's seeds, keeps what the spec fixed
// and stays within the scenario's and the machine's limits.

#include "scenarios/strategy.h"

#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>

#include "scenarios/outcome.h"
#include "scenarios/registry.h"
#include "scenarios/scenario.h"

namespace leapfrog {
namespace {

constexpr uint64_t kSeeds = 2000;
const ObserverLimits kOne{1, kMaxObservers, true};  // setattr-lookup's

bool same(const Strategy& a, const Strategy& b) {
  return a.alignment == b.alignment && a.observers == b.observers && a.aligned == b.aligned &&
         a.pin_cpus == b.pin_cpus && a.chosen == b.chosen;
}

TEST(Strategy, IsAPureFunctionOfSeedLimitsAndCpus) {
  for (uint64_t seed = 1; seed <= kSeeds; ++seed)
    ASSERT_TRUE(same(choose_strategy(seed, kOne, 4, {}), choose_strategy(seed, kOne, 4, {})))
        << seed;
  // ... and not a constant: the seed decides.
  size_t differ = 0;
  for (uint64_t seed = 1; seed <= 100; ++seed)
    differ += !same(choose_strategy(seed, kOne, 4, {}), choose_strategy(seed + 1, kOne, 4, {}));
  EXPECT_GT(differ, 50u);
}

TEST(Strategy, SeedsCoverEveryAlignmentInTheDocumentedShares) {
  std::map<Alignment, uint64_t> n;
  uint64_t pinned = 0;
  for (uint64_t seed = 1; seed <= kSeeds; ++seed) {
    const Strategy s = choose_strategy(seed, kOne, 2, {});
    ++n[s.alignment];
    pinned += s.pin_cpus;
    EXPECT_EQ(s.chosen, (std::vector<std::string>{"alignment", "observers", "pin"}));
  }
  // 40 / 30 / 30 % and 75 % pinned, within a few percent over 2000 seeds.
  EXPECT_NEAR(n[Alignment::Fuzzy] * 100.0 / kSeeds, kFuzzyPct, 4);
  EXPECT_NEAR(n[Alignment::Free] * 100.0 / kSeeds, kFreePct, 4);
  EXPECT_NEAR(n[Alignment::Both] * 100.0 / kSeeds, kBothPct, 4);
  EXPECT_NEAR(pinned * 100.0 / kSeeds, kPinPct, 4);
}

TEST(Strategy, ObserversStayWithinTheScenarioAndTheCpus) {
  for (uint32_t cpus : {1u, 2u, 4u, 64u}) {
    for (const ObserverLimits limits :
         {ObserverLimits{1, kMaxObservers, true}, ObserverLimits{2, 4, true},
          ObserverLimits{1, 1, true}, ObserverLimits{2, kMaxObservers, false}}) {
      std::map<uint32_t, uint64_t> seen;
      for (uint64_t seed = 1; seed <= kSeeds; ++seed) {
        const Strategy s = choose_strategy(seed, limits, cpus, {});
        const uint32_t lo = std::max(limits.def, s.alignment == Alignment::Both ? 2u : 1u);
        const uint32_t hi = std::max(lo, std::min(limits.max, cpus > 1 ? cpus - 1 : 1));
        ASSERT_GE(s.observers, lo) << seed << " cpus " << cpus;
        ASSERT_LE(s.observers, hi) << seed << " cpus " << cpus;
        ASSERT_LE(s.observers, limits.max);
        if (!limits.mixed || limits.max < 2) {
          ASSERT_NE(s.alignment, Alignment::Both) << seed;
        }
        ASSERT_EQ(s.aligned, aligned_observers(s.alignment, s.observers));
        if (s.alignment == Alignment::Both) {
          ASSERT_GE(s.aligned, 1u);
          ASSERT_GE(s.observers - s.aligned, 1u);
        }
        ++seen[s.observers];
      }
      // Every count in the range is drawn, not only its ends.
      const uint32_t hi = std::max(limits.def, std::min(limits.max, cpus > 1 ? cpus - 1 : 1));
      for (uint32_t k = limits.def; k <= hi; ++k) EXPECT_GT(seen[k], 0u) << k << " cpus " << cpus;
    }
  }
}

TEST(Strategy, SplitsBothAmongAlignedAndFreeObservers) {
  EXPECT_EQ(aligned_observers(Alignment::Fuzzy, 3), 3u);
  EXPECT_EQ(aligned_observers(Alignment::Free, 3), 0u);
  EXPECT_EQ(aligned_observers(Alignment::Both, 2), 1u);
  EXPECT_EQ(aligned_observers(Alignment::Both, 3), 2u);
}

TEST(Strategy, KeepsWhatTheSpecFixes) {
  for (uint64_t seed = 1; seed <= kSeeds; ++seed) {
    const Strategy free = choose_strategy(seed, kOne, 2, {});
    StrategyRequest fixed;
    fixed.alignment = Alignment::Free;
    fixed.observers = 3;
    fixed.pin_cpus = false;
    const Strategy s = choose_strategy(seed, kOne, 2, fixed);
    ASSERT_EQ(s.alignment, Alignment::Free);
    ASSERT_EQ(s.observers, 3u);  // above the CPUs: the spec wins
    ASSERT_FALSE(s.pin_cpus);
    ASSERT_TRUE(s.chosen.empty());
    // Fixing one field leaves the seed's choice of the others as it was.
    StrategyRequest pin_only;
    pin_only.pin_cpus = !free.pin_cpus;
    const Strategy p = choose_strategy(seed, kOne, 2, pin_only);
    ASSERT_EQ(p.alignment, free.alignment) << seed;
    ASSERT_EQ(p.observers, free.observers) << seed;
    ASSERT_EQ(p.pin_cpus, !free.pin_cpus);
    ASSERT_EQ(p.chosen, (std::vector<std::string>{"alignment", "observers"}));
  }
}

TEST(Strategy, OneFixedObserverNeverMixes) {
  StrategyRequest one;
  one.observers = 1;
  for (uint64_t seed = 1; seed <= kSeeds; ++seed)
    ASSERT_NE(choose_strategy(seed, kOne, 8, one).alignment, Alignment::Both) << seed;
}

TEST(Strategy, ContradictoryFixedFieldsAreUsageErrors) {
  StrategyRequest both;
  both.alignment = Alignment::Both;
  both.observers = 1;
  EXPECT_THROW(choose_strategy(1, kOne, 2, both), UsageError);
  both.observers = 0;
  EXPECT_THROW(choose_strategy(1, ObserverLimits{2, 8, false}, 2, both), UsageError);
  EXPECT_EQ(choose_strategy(1, kOne, 1, both).observers, 2u);  // at least one of each
}

TEST(Strategy, ParsesAlignmentNames) {
  for (Alignment a : {Alignment::Fuzzy, Alignment::Free, Alignment::Both})
    EXPECT_EQ(parse_alignment(to_string(a)), a);
  EXPECT_FALSE(parse_alignment("seed"));
  EXPECT_FALSE(parse_alignment("Fuzzy"));
}

TEST(Strategy, ResolvesFromTheScenarioLimits) {
  RunOptions opts;
  opts.seed = 5;
  const Scenario& foffset = find_scenario("foffset");
  for (uint64_t seed = 1; seed <= 200; ++seed) {
    opts.seed = seed;
    const Strategy s = resolve_strategy(foffset, opts, 8);
    ASSERT_NE(s.alignment, Alignment::Both);  // its peers rewind at a barrier of their own
    ASSERT_GE(s.observers, foffset.default_observers());
  }
  opts.alignment = Alignment::Both;
  EXPECT_THROW(resolve_strategy(foffset, opts, 8), UsageError);
}

TEST(Strategy, OutcomeJsonCarriesIt) {
  Outcome o;
  o.strategy = choose_strategy(3, kOne, 2, {});
  o.strategy.alignment = Alignment::Both;
  o.strategy.observers = 3;
  o.strategy.aligned = 2;
  o.strategy.pin_cpus = false;
  Widening w;
  w.on = true;
  w.reason = "chosen by seed 3";
  w.points.push_back(WidenPoint{"step_into", 200000, 1000, "65534", 12});
  o.strategy.widening = summary(w);
  const nlohmann::json j = to_json(o);
  ASSERT_TRUE(j.contains("strategy")) << j.dump();
  const auto& s = j["strategy"];
  EXPECT_EQ(s["alignment"], "both");
  EXPECT_EQ(j["alignment"], "both");
  EXPECT_EQ(s["observers"], 3);
  EXPECT_EQ(s["aligned_observers"], 2);
  EXPECT_EQ(s["free_observers"], 1);
  EXPECT_EQ(s["pinned"], false);
  EXPECT_EQ(s["chosen_by_seed"], nlohmann::json({"alignment", "observers", "pin"}));
  EXPECT_EQ(s["widening"], "on (chosen by seed 3): step_into 200000ppm 1000ns uid 65534");
  EXPECT_NE(to_text(o).find("strategy: both, 3 observers (2 aligned), not pinned"),
            std::string::npos)
      << to_text(o);
  Widening off;
  off.reason = "no /sys/kernel/leapfrog_widen";
  EXPECT_EQ(summary(off), "off (no /sys/kernel/leapfrog_widen)");
}

// The agent's job deadline comes from run_time: lookup-scale measures
// point after point, so its run takes as long as its points, not the spec's
// duration (a full default run once outlived the 2 s + 2 min deadline).
TEST(RunTime, LookupScaleDeclaresItsPointsAndRacesDeclareNothing) {
  auto defaults = [](const Scenario& s) {
    std::map<std::string, int64_t> p;
    for (const auto& spec : s.params()) p[spec.name] = spec.def;
    return p;
  };
  const Scenario& scale = find_scenario("lookup-scale");
  auto p = defaults(scale);
  p["max_tasks"] = 2;
  const auto full = scale.run_time(p);
  ASSERT_TRUE(full);
  // 17 tests x 2 modes x 2 task counts, each 1 s warm-up + 5 x 1 s samples
  // and at most 12 s of starting and waiting.
  EXPECT_EQ(std::chrono::duration_cast<std::chrono::seconds>(*full).count(), 17 * 2 * 2 * 18);
  EXPECT_GT(*full, std::chrono::minutes(7));  // docs/scaling.md: 7 minutes on 2 CPUs
  p["test"] = 4;
  p["mode"] = 0;
  p["point_ms"] = 200;
  p["warmup_ms"] = 100;
  EXPECT_EQ(std::chrono::duration_cast<std::chrono::milliseconds>(*scale.run_time(p)).count(),
            2 * (100 + 5 * 200 + 12'000));
  const Scenario& race = find_scenario("setattr-lookup");
  EXPECT_FALSE(race.run_time(defaults(race)));
}

}  // namespace
}  // namespace leapfrog
