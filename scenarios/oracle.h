#pragma once
// The per-step linearizability oracle (docs/design.md, "What it checks") and the shared-offset check.

#include <array>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "scenarios/history.h"

namespace leapfrog {

// Escape: an openat2 RESOLVE_BENEATH/RESOLVE_IN_ROOT walk succeeded to a node
// that no version in its window places beneath the walk's root (a security bug).
enum class ViolationKind : uint8_t {
  StaleGrant,
  StaleDeny,
  StaleEntry,
  WrongMount,
  TornOffset,
  Escape
};
inline constexpr int kViolationKinds = 6;
const char* to_string(ViolationKind k);

// A version of an object that was possible somewhere in a lookup's window.
struct PossibleVersion {
  std::string value;
  TimeNs from = 0;  // invoke of the mutation that made it (kTimeMin: initial)
  TimeNs to = 0;    // complete of the mutation that replaced it (kTimeMax: still current)
  // For entries, mounts and "..": the kind of node the value leads to
  // ("file", "dir", "symlink"; "absent" for none); empty for attributes.
  std::string node_kind;
};

// One step of the lookup walk, with what each object consulted could have been.
struct StepTrace {
  int step = 0;  // 1-based
  std::string component;
  std::string object;  // e.g. attr(a/b)
  std::vector<PossibleVersion> versions;
};

// A mutation near a violation, so a timeline can draw the other actors'
// operations: one record of History::mutations, resolved for display.
struct MutationTrace {
  uint32_t actor = 0;
  std::string op;      // "chmod", "rename", ...
  std::string object;  // the violation's object it sets
  std::string value;   // what it sets it to
  TimeNs invoke = 0;
  TimeNs complete = 0;
  int32_t err = 0;  // a failed mutation changed nothing
  std::string node_kind;  // entries, mounts, "..": what `value` leads to (PossibleVersion)
};

// Most mutations a violation's history excerpt holds.
inline constexpr size_t kMaxMutationTrace = 24;

struct Violation {
  ViolationKind kind = ViolationKind::StaleGrant;
  uint32_t actor = 0;
  uint64_t record = 0;  // index into History::lookups (or ::offsets for torn-offset)
  std::string op;
  std::string path;
  TimeNs invoke = 0;
  TimeNs complete = 0;
  TimeNs epsilon = 0;
  int step = 0;           // the step no time in the window explains (0: whole op)
  std::string component;  // its path component
  std::string object;     // the object it depends on
  std::string observed;   // what the operation saw
  std::string expected;   // what any linearization allows
  std::vector<PossibleVersion> versions;  // of `object`, possible in the window
  std::vector<StepTrace> steps;           // the walk, for drawing the timeline
  // Mutations of `object` overlapping the span from the earliest possible
  // version's start to the latest one's end, widened by the window's length
  // on both sides; the kMaxMutationTrace nearest the window, by invoke.
  std::vector<MutationTrace> history;
};

struct CheckResult {
  uint64_t lookups_checked = 0;
  uint64_t steps_checked = 0;
  uint64_t offsets_checked = 0;
  uint64_t unjudged = 0;  // records the oracle cannot judge (errno outside the model)
  uint64_t over_budget = 0;  // of those: lookups whose walk exceeded max_expansions
  uint64_t violation_count = 0;
  // Completion time of the earliest violating operation (kTimeMax: none),
  // over all violations, not only the reported ones: detection power.
  TimeNs first_violation_at = kTimeMax;
  std::array<uint64_t, kViolationKinds> by_kind{};
  // Counts the notes about lookups are written from (add_lookup_notes):
  // violations of RESOLVE_CACHED walks, and scoped walks that gave EAGAIN
  // with no rename or mount of the history in their window.
  uint64_t cached_violations = 0;
  uint64_t foreign_eagain = 0;
  std::vector<Violation> violations;  // the first `max_reported`, with full detail
  std::vector<std::string> notes;     // warnings about the history itself
};

struct CheckOptions {
  size_t max_reported = 50;
  // Most distinct walk states explored for one lookup; past it the lookup is
  // unjudged and counted in CheckResult::over_budget.
  size_t max_expansions = size_t{1} << 14;
};

// Thrown for a history the oracle cannot interpret (dangling node ids, missing
// initial values). Says which record.
class HistoryError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Checks every lookup and offset record of `h`. Never flags a legal history.
// Cost is linear in the history (plus the versions overlapping each window).
CheckResult check_history(const History& h, const CheckOptions& opts = {});

// Writes the notes about the lookups that `r`'s counts call for (the search
// budget, RESOLVE_CACHED violations, foreign EAGAINs), before any other note.
void add_lookup_notes(CheckResult& r, const CheckOptions& opts);

// Why a check without violations has not earned "pass" (nothing was judged,
// or some lookups exceeded the search budget); empty if it has.
std::string unearned_pass_reason(const CheckResult& r);

// The verdict a check earned: "violation", "pass", or "inconclusive" (no
// violation, and unearned_pass_reason is not empty; `why` then holds it).
std::string earned_verdict(const CheckResult& r, std::string& why);

// The torn-offset check alone (used by check_history).
void check_offsets(const History& h, CheckResult& out, const CheckOptions& opts);

}  // namespace leapfrog
