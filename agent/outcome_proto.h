#pragma once
// Converts the outcome JSON that `leapfrog-agent run --json` prints into the
// wire Outcome the coordinator stores, typed part by part (scale run,
// violation details, the run's detail and notes).

#include <string>

#include "leapfrog/v1/common.pb.h"

namespace leapfrog {

// Throws std::runtime_error if `json_text` is not an outcome object.
v1::Outcome outcome_from_json(const std::string& json_text);

// The outcome a run child wrote with `--format proto` (the v1.Outcome
// message, serialized), as the agent stores it. Throws std::runtime_error
// saying so if the child wrote nothing, something that does not parse, or
// an outcome without a verdict (never a PASS it did not earn).
v1::Outcome outcome_of_run(const std::string& bytes);

// An ERROR outcome carrying `why` (the run did not produce an outcome).
v1::Outcome error_outcome(const std::string& why);

// Makes `o` fit in `max_bytes` serialized (the coordinator refuses larger
// outcomes) and says what it left out; the verdict and every count stay.
// In order, until it fits: violations lose their history excerpts, last
// first; the last violations go (violation_count and violations_by_kind
// still count them); error and console_tail keep their last 64 KiB; the one
// violation left drops its detail. Each step adds a note to Outcome.run's
// notes. Returns false if nothing needed trimming.
bool fit_outcome(v1::Outcome& o, size_t max_bytes);

}  // namespace leapfrog
