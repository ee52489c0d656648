#pragma once
// Converts the outcome JSON that `leapfrog-agent run --json` prints into the
// wire Outcome the coordinator stores.

#include <string>

#include "leapfrog/v1/common.pb.h"

namespace leapfrog {

// Throws std::runtime_error if `json_text` is not an outcome object.
v1::Outcome outcome_from_json(const std::string& json_text);

// An ERROR outcome carrying `why` (the run did not produce an outcome).
v1::Outcome error_outcome(const std::string& why);

}  // namespace leapfrog
