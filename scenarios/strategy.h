#pragma once
// How a run races: the alignment of its observers, how many there are, and
// whether actors are pinned to CPUs. What the job's spec (or the user) leaves
// open is chosen from the seed, so that a campaign's seeds cover both kinds of
// race window: a few instructions wide (fuzzy alignment sweeps a delay over
// it) and open for a while (free-running observers look up again and again).
// The choice is a pure function of the seed, the scenario's observer limits
// and the CPU count; the outcome records the resolved values so that replay
// and minimize run them explicitly. The kernel delay points (agent/widen.h)
// are chosen from the seed on their own and only summarised here.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace leapfrog {

// fuzzy: every actor meets at a barrier each round and the observers' starts
// are swept over the mutation; free: no barrier, the observers loop; both:
// the first ceil(n/2) observers are aligned with the mutator, the others run
// free in the same run.
enum class Alignment : uint8_t { Fuzzy, Free, Both };
const char* to_string(Alignment a);
// "fuzzy", "free", "both"; nullopt for anything else.
std::optional<Alignment> parse_alignment(const std::string& text);

// Observers at the barrier out of `observers` (the rest run free).
uint32_t aligned_observers(Alignment a, uint32_t observers);

// What the spec fixed; an empty field is chosen by the seed.
struct StrategyRequest {
  std::optional<Alignment> alignment;
  uint32_t observers = 0;  // 0: chosen
  std::optional<bool> pin_cpus;
};

// The observer limits of a scenario (Scenario::default_observers ...).
struct ObserverLimits {
  uint32_t def = 1;
  uint32_t max = 1;
  bool mixed = true;  // the scenario can run aligned and free observers together
};

// The resolved strategy of a run, as the outcome reports it.
struct Strategy {
  Alignment alignment = Alignment::Fuzzy;
  uint32_t observers = 1;
  uint32_t aligned = 1;  // observers at the barrier (aligned_observers)
  bool pin_cpus = true;
  // The fields the seed chose ("alignment", "observers", "pin"); the others
  // were fixed by the spec.
  std::vector<std::string> chosen;
  // The window widening of the run in one line (Outcome.widening holds it in
  // full), e.g. "off (no /sys/kernel/leapfrog_widen)" or
  // "on: step_into 200000ppm 1000ns uid 65534".
  std::string widening;
};

// Percent of seeds per alignment when the spec leaves it open.
inline constexpr uint32_t kFuzzyPct = 40, kFreePct = 30, kBothPct = 30;
// Percent of seeds that pin actors to CPUs when the spec leaves it open.
inline constexpr uint32_t kPinPct = 75;

// The strategy of `seed`: alignment fuzzy 40 %, free 30 %, both 30 % (a
// scenario that cannot mix, or a spec fixing one observer, turns "both" into
// fuzzy or free); observers uniform in [default, max(default, min(max,
// cpus - 1))], at least 2 for both; pinned for 75 % of seeds. Fixed fields are
// kept. Throws UsageError when the fixed fields contradict (both with one
// observer, or with a scenario that cannot mix).
Strategy choose_strategy(uint64_t seed, const ObserverLimits& limits, uint32_t cpus,
                         const StrategyRequest& fixed);

// CPUs this process may run on (at least 1).
uint32_t usable_cpus();

}  // namespace leapfrog
