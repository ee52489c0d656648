#pragma once
// The spec a replay queues: the job's spec with the race strategy the run
// reported (alignment, observers, CPU pinning) written in, so that the
// replayed runs race exactly as the one that failed even where the job left
// those to the seed (the seed's choice depends on the agent's CPU count,
// which another agent may not share).

#include "leapfrog/v1/common.pb.h"

namespace leapfrog::coord::triage {

// `spec` with outcome.strategy's alignment, observers and pinning; `spec`
// unchanged when the outcome reports no strategy (an older agent).
v1::ScenarioSpec spec_as_run(const v1::ScenarioSpec& spec, const v1::Outcome& outcome);

}  // namespace leapfrog::coord::triage
