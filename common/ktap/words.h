#pragma once
// The lower-case words the exports print for proto enums (docs/exports.md).
// Proto-only, in leapfrog_ktap, so the agent's KTAP and every export share
// them.

#include <string>

#include "leapfrog/v1/common.pb.h"

namespace leapfrog::ktap {

// "pass", "violation", "kernel-crash", ...
std::string verdict_word(v1::Verdict v);
// "fuzzy", "free", "both", or "" when the outcome did not say.
std::string alignment_name(v1::Alignment a);

}  // namespace leapfrog::ktap
