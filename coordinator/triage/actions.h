#pragma once
// The action state machines (replay, minimize, bisect). Each advance locks the
// action's row, reads the campaign it waits for, and either waits, queues the
// next campaign or finishes; its private state is a JSON "machine" stored
// beside the Action, so an action resumes after a restart, on any replica.

#include <string>

#include "coordinator/clock.h"
#include "coordinator/store/store.h"
#include "coordinator/triage/triage_engine.h"
#include "coordinator/triage/triage_store.h"

namespace leapfrog::coord::triage {

struct ActionContext {
  Store& store;
  TriageStore& triage;
  const Clock& clock;
  WorkSignal* work;
  const EngineOptions& opts;
};

// "replay", "minimize", "bisect".
std::string action_kind_name(v1::ActionKind kind);

// The initial machine of an action chasing `signature`.
std::string new_machine(const std::string& signature);

// Advances action `id` by at most one state; false if another caller holds it.
bool advance_one(const ActionContext& ctx, int64_t id);

// What the runs of one campaign said about a signature.
struct Tally {
  bool done = false;
  uint32_t runs = 0;        // jobs of the campaign
  uint32_t finished = 0;    // jobs with a final state
  uint32_t reproduced = 0;  // outcomes with the signature
  uint32_t clean = 0;       // PASS outcomes
  uint32_t other = 0;       // failed some other way (or lost)
};
Tally tally_campaign(Store& store, int64_t campaign_id, const std::string& signature);

}  // namespace leapfrog::coord::triage
