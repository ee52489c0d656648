#pragma once
// A standalone C reproducer from a (minimal) spec: one .c file needing only
// libc, built with `cc repro.c`, run as root with the folder to run in (and,
// for two-view setups such as the FUSE control, the folder to look up
// through). It races the scenario's mutation against the violating lookup
// and prints "FAIL <what>" when a lookup contradicts the state that was
// current for its whole window, "PASS" after its time budget when it judged
// at least kMinJudged lookups, or "INCONCLUSIVE" (exit 3) when it judged
// fewer, even with its budget extended: no violation among a handful of
// lookups says nothing of the race.

#include <stdexcept>
#include <string>

#include "leapfrog/v1/common.pb.h"

namespace leapfrog::coord::triage {

// The scenario has no C reproducer; the message names the supported ones.
class ReproError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The lookups a reproducer must judge before it may say PASS (the program's
// default; $LEAPFROG_MIN_JUDGED overrides it).
inline constexpr long kMinJudged = 100;

// Scenarios c_reproducer supports.
inline constexpr const char* kReproScenarios =
    "setattr-lookup, chown-lookup, rename-lookup, typeflip-lookup, symlink-lookup, exec-setid";

// The C source. `example` is the violation to reproduce (its op, path and
// object pick the lookup and the mutated directory); empty picks stat of the
// scenario's usual path. Throws ReproError.
std::string c_reproducer(const v1::ScenarioSpec& spec, const v1::Violation& example);

}  // namespace leapfrog::coord::triage
