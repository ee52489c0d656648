#pragma once
// What a run did beyond an outcome's counters (rounds, mutations, what the
// oracle could not judge, timing, notes) between the run's JSON and the
// wire's typed v1::RunDetail (Outcome.run): the agent fills it, the
// coordinator's readers read it back.

#include <nlohmann/json_fwd.hpp>

#include "leapfrog/v1/common.pb.h"

namespace leapfrog {

// The detail in an outcome JSON object (as `leapfrog-agent run --json`
// prints it): "mutations", "rounds", "steps_checked", "unjudged",
// "over_budget", "setup_s", "timing" and "notes". A missing or mistyped
// field reads as 0 or empty.
v1::RunDetail run_detail_from_json(const nlohmann::json& outcome);

}  // namespace leapfrog
