#include "scenarios/strategy.h"

#include <sched.h>

#include <algorithm>

#include "scenarios/rng.h"
#include "scenarios/scenario.h"

namespace leapfrog {

const char* to_string(Alignment a) {
  switch (a) {
    case Alignment::Fuzzy:
      return "fuzzy";
    case Alignment::Free:
      return "free";
    case Alignment::Both:
      return "both";
  }
  return "?";
}

std::optional<Alignment> parse_alignment(const std::string& text) {
  if (text == "fuzzy") return Alignment::Fuzzy;
  if (text == "free") return Alignment::Free;
  if (text == "both") return Alignment::Both;
  return std::nullopt;
}

uint32_t aligned_observers(Alignment a, uint32_t observers) {
  switch (a) {
    case Alignment::Fuzzy:
      return observers;
    case Alignment::Free:
      return 0;
    case Alignment::Both:
      return (observers + 1) / 2;
  }
  return observers;
}

Strategy choose_strategy(uint64_t seed, const ObserverLimits& limits, uint32_t cpus,
                         const StrategyRequest& fixed) {
  // A stream of its own: the scenario's setup and the actors draw from other
  // streams of the same seed. Every draw is taken whatever is fixed, so that
  // fixing one field does not change the others' choice.
  Rng rng(seed ^ 0x73747261746567ULL);
  const uint32_t align_roll = static_cast<uint32_t>(rng.below(100));
  const uint64_t observer_roll = rng.next();
  const uint32_t pin_roll = static_cast<uint32_t>(rng.below(100));

  const bool can_mix = limits.mixed && limits.max >= 2 && fixed.observers != 1;
  Strategy s;
  if (fixed.alignment) {
    s.alignment = *fixed.alignment;
    if (s.alignment == Alignment::Both && !limits.mixed)
      throw UsageError(
          "alignment \"both\": this scenario cannot run aligned and free actors together");
    if (s.alignment == Alignment::Both && (limits.max < 2 || fixed.observers == 1))
      throw UsageError("alignment \"both\" needs at least 2 observers (one aligned, one free)");
  } else {
    s.chosen.push_back("alignment");
    if (align_roll < kFuzzyPct)
      s.alignment = Alignment::Fuzzy;
    else if (align_roll < kFuzzyPct + kFreePct)
      s.alignment = Alignment::Free;
    else if (can_mix)
      s.alignment = Alignment::Both;
    else  // both is not possible: split its share, fuzzy first
      s.alignment =
          align_roll < kFuzzyPct + kFreePct + kBothPct / 2 ? Alignment::Fuzzy : Alignment::Free;
  }

  if (fixed.observers) {
    s.observers = fixed.observers;
  } else {
    s.chosen.push_back("observers");
    uint32_t lo = std::max<uint32_t>(limits.def, 1);
    if (s.alignment == Alignment::Both) lo = std::max<uint32_t>(lo, 2);
    lo = std::min(lo, std::max<uint32_t>(limits.max, 1));
    // One CPU per actor, the mutator's included: more would only take turns
    // (and starve the agent's own heartbeats).
    const uint32_t hi = std::max(lo, std::min(limits.max, cpus > 1 ? cpus - 1 : 1));
    s.observers = lo + static_cast<uint32_t>(observer_roll % (hi - lo + 1));
  }
  s.aligned = aligned_observers(s.alignment, s.observers);

  if (fixed.pin_cpus) {
    s.pin_cpus = *fixed.pin_cpus;
  } else {
    s.chosen.push_back("pin");
    s.pin_cpus = pin_roll < kPinPct;
  }
  return s;
}

uint32_t usable_cpus() {
  cpu_set_t allowed;
  if (sched_getaffinity(0, sizeof allowed, &allowed) != 0) return 1;
  return static_cast<uint32_t>(std::max(1, CPU_COUNT(&allowed)));
}

}  // namespace leapfrog
