#pragma once
// The lower-case words the exports print for proto enums (docs/exports.md).
// Proto-only, in leapfrog_ktap, so the agent's KTAP and every export share
// them.

#include <string>

#include "leapfrog/v1/common.pb.h"
#include "leapfrog/v1/control.pb.h"
#include "leapfrog/v1/triage.pb.h"

namespace leapfrog::ktap {

// "pass", "violation", "kernel-crash", ...
std::string verdict_word(v1::Verdict v);
// "fuzzy", "free", "both", or "" when the outcome did not say.
std::string alignment_name(v1::Alignment a);

// A violation kind's word, as the oracle (scenarios/oracle.cc) and every
// reader outside the protos spell it: "stale-grant", ..., "torn-offset";
// "" for UNSPECIFIED or a value this build does not know.
std::string violation_kind_word(v1::ViolationKind k);
// The kind a word names; UNSPECIFIED for a word no kind has.
v1::ViolationKind violation_kind_from(const std::string& word);

// An issue kind's word, as signatures (coordinator/triage/signature.h), the
// store, events and exports say it: "violation", "crash", "hang",
// "boot-failure"; "" for UNSPECIFIED or a value this build does not know.
std::string issue_kind_word(v1::IssueKind k);
// The kind a word or an enum name names ("crash", "ISSUE_KIND_CRASH");
// UNSPECIFIED for anything else.
v1::IssueKind issue_kind_from(const std::string& text);

// A bisect step's word, as the CLI prints it and older coordinators stored
// it: "bad", "good", "skipped", "measure"; "" for UNSPECIFIED.
std::string bisect_step_word(v1::BisectStepVerdict v);
// The verdict a word names; UNSPECIFIED for any other.
v1::BisectStepVerdict bisect_step_from(const std::string& word);

// A kernel status's word, as the store's `kernels.status` column, the CLI
// and the exports say it: "ready", "build-failure"; UNSPECIFIED is "ready"
// (a kernel registered before builds existed).
std::string kernel_status_word(v1::KernelStatus s);
// The status a word or an enum name names; UNSPECIFIED for any other.
v1::KernelStatus kernel_status_from(const std::string& text);

}  // namespace leapfrog::ktap
