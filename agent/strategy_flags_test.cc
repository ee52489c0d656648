// The race strategy from the command line to the outcome proto: --align and
// --pin leave a field to the seed or fix it, and the outcome's strategy
// survives the JSON the agent prints and the proto it reports.

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "agent/options.h"
#include "agent/outcome_proto.h"
#include "scenarios/registry.h"
#include "scenarios/outcome.h"

namespace leapfrog {
namespace {

RunOptions parse(const std::string& align, const std::string& pin,
                 const std::string& strategy = "fixed") {
  RunFlags f;
  f.scenario = "setattr-lookup";
  f.align = align;
  f.pin = pin;
  f.strategy = strategy;
  return to_run_options(f);
}

TEST(StrategyFlags, ByHandTheDefaultsAreFuzzyPinnedAndTheScenariosObservers) {
  const RunOptions o = parse("", "");
  EXPECT_EQ(o.alignment, Alignment::Fuzzy);
  EXPECT_EQ(o.pin_cpus, true);
  EXPECT_TRUE(o.default_observers);
  const Strategy s = resolve_strategy(find_scenario("acl-exec-deny"), o, 8);
  EXPECT_EQ(s.observers, 2u);  // its default, not the seed's pick
  EXPECT_TRUE(s.chosen.empty());
}

TEST(StrategyFlags, SeedLeavesTheFieldsOpen) {
  for (const RunOptions& o : {parse("seed", "seed"), parse("", "", "seed")}) {
    EXPECT_FALSE(o.alignment);
    EXPECT_FALSE(o.pin_cpus);
    EXPECT_EQ(o.observers, 0u);
  }
  const RunOptions o = parse("", "", "seed");
  EXPECT_FALSE(o.default_observers);
  EXPECT_EQ(resolve_strategy(find_scenario("setattr-lookup"), o, 8).chosen,
            (std::vector<std::string>{"alignment", "observers", "pin"}));
  // --align seed alone leaves only the alignment open.
  EXPECT_EQ(resolve_strategy(find_scenario("setattr-lookup"), parse("seed", ""), 8).chosen,
            (std::vector<std::string>{"alignment"}));
}

TEST(StrategyFlags, FixedValuesAreKept) {
  EXPECT_EQ(parse("fuzzy", "on").alignment, Alignment::Fuzzy);
  EXPECT_EQ(parse("free", "on").alignment, Alignment::Free);
  EXPECT_EQ(parse("both", "on").alignment, Alignment::Both);
  EXPECT_EQ(parse("both", "on").pin_cpus, true);
  EXPECT_EQ(parse("both", "off").pin_cpus, false);
}

TEST(StrategyFlags, BadValuesAreUsageErrors) {
  try {
    parse("sometimes", "seed");
    FAIL() << "no error";
  } catch (const UsageError& e) {
    EXPECT_STREQ(e.what(), "bad --align \"sometimes\", want fuzzy, free, both or seed");
  }
  EXPECT_THROW(parse("seed", "yes"), UsageError);
  EXPECT_THROW(parse("", "", "random"), UsageError);
}

TEST(StrategyFlags, OutcomeProtoCarriesTheStrategy) {
  Outcome o;
  o.scenario = "setattr-lookup";
  o.strategy.alignment = Alignment::Both;
  o.strategy.observers = 2;
  o.strategy.aligned = 1;
  o.strategy.pin_cpus = false;
  o.strategy.chosen = {"alignment", "pin"};
  o.strategy.widening = "off (the seed chose none)";
  const v1::Outcome p = outcome_from_json(to_json(o).dump());
  ASSERT_TRUE(p.has_strategy());
  EXPECT_EQ(p.strategy().alignment(), v1::ALIGNMENT_BOTH);
  EXPECT_EQ(p.strategy().observers(), 2u);
  EXPECT_EQ(p.strategy().aligned_observers(), 1u);
  EXPECT_FALSE(p.strategy().pinned());
  ASSERT_EQ(p.strategy().chosen_by_seed_size(), 2);
  EXPECT_EQ(p.strategy().chosen_by_seed(1), "pin");
  EXPECT_EQ(p.strategy().widening(), "off (the seed chose none)");
  // An outcome from an agent that predates strategies has none.
  EXPECT_FALSE(outcome_from_json(R"({"verdict":"pass"})").has_strategy());
}

}  // namespace
}  // namespace leapfrog
