#pragma once
// The few words of the HTTP API that are not protobuf's JSON mapping
// (proto_json.h prints every answer): the short names of verdicts and job
// states that a campaign matrix counts by, and how a kernel is shown.

#include <string>

#include "coordinator/clock.h"
#include "leapfrog/v1/control.pb.h"

namespace leapfrog::coord {

// "pass", "violation", "kernel-crash", ...; "" for UNSPECIFIED.
std::string verdict_name(v1::Verdict v);
// "queued", "leased", "done" (a campaign's by_state keys).
std::string job_state_name(v1::JobState s);

// A kernel as the API shows it: one registered before builds existed (no
// status) is READY.
v1::Kernel shown(v1::Kernel k);

}  // namespace leapfrog::coord
