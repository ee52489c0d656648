#pragma once
// Migrations 18 and 19. Migration 18: what older coordinators stored in the shape outcomes had
// before every part was typed, converted once (common/outcome/legacy.h is
// the one reader of that shape):
//   - outcome values with their JSON (old Outcome field 14) get Outcome.run
//     and Outcome.scale from it, and lose it (a lookup-scale run without
//     scale_runs rows gets them);
//   - violation rows with their detail as JSON (violations.detail) get it
//     typed, in their outcome's violation_details value, and an empty detail;
//   - issues' example violations with a string kind (old Violation field 1)
//     or a JSON detail (old field 12) get them typed.
// Afterwards no reader falls back on JSON.

#include <pqxx/transaction>

namespace leapfrog::coord {

// What one run of upgrade_legacy_rows converted.
struct LegacyUpgrade {
  int outcomes = 0;    // outcome values that carried their JSON
  int scale_runs = 0;  // lookup-scale runs of those that got their rows
  int violations = 0;  // violation rows whose JSON detail became typed
  int examples = 0;    // issues' example violations
};

// Migration 18's `then`: converts every stored value of the old shape, a
// page at a time by key. Idempotent: a second run finds nothing to do.
LegacyUpgrade upgrade_legacy_rows(pqxx::work& txn);

// Migration 19: words older coordinators stored where the protos now have
// enums, converted once, a page at a time by id:
//   - bisect actions' steps (old BisectStep field 2: "bad", ...);
//   - events' issue kinds and cell verdicts (old Event field 8,
//     EventCell field 4: "crash", "violation", ...);
//   - subscriptions' issue kind filters (old SubscriptionFilter field 4).
struct WordUpgrade {
  int bisects = 0;        // bisect actions rewritten
  int events = 0;         // events rewritten
  int subscriptions = 0;  // subscriptions rewritten
};

// Migration 19's `then`. Idempotent: a second run finds nothing to do.
WordUpgrade upgrade_stored_words(pqxx::work& txn);

// Migration 20: build times older coordinators stored as doubles of seconds
// become Durations: kernels' details (old Kernel field 13) and build jobs'
// outcomes (old KernelBuildResult field 7 in Outcome.build).
struct BuildTimeUpgrade {
  int kernels = 0;   // kernel rows rewritten
  int outcomes = 0;  // build jobs' outcome values rewritten
};

// Migration 20's `then`. Idempotent: a second run finds nothing to do.
BuildTimeUpgrade upgrade_build_times(pqxx::work& txn);

}  // namespace leapfrog::coord
