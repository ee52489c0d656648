#pragma once
// A violation's detail between the run's JSON (scenarios' to_json(Violation))
// and the wire's typed v1::ViolationDetail: the agent fills it, the store
// keeps it once, and the HTTP API and triage read it back as JSON.

#include <nlohmann/json.hpp>

#include "leapfrog/v1/common.pb.h"

namespace leapfrog {

// The detail of one violation object as `leapfrog-agent run --json` prints
// it (versions, steps, history, record, epsilon_ns). Throws
// nlohmann::json::exception when a field has the wrong type.
v1::ViolationDetail detail_from_json(const nlohmann::json& violation);

// The violation as scenarios' to_json(Violation) writes it, from its fields
// and typed `detail` (its kind as the word, ktap/words.h); null when it has
// no detail.
nlohmann::json violation_json(const v1::Violation& v);

}  // namespace leapfrog
