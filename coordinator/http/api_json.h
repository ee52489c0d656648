#pragma once
// The hand-written JSON of the outcome routes (docs/api.md): /api/outcomes,
// a job's and an issue's outcomes, until they too are printed by protobuf's
// JSON mapping (proto_json.h) as every other route is. Numbers as numbers,
// times as ISO 8601 UTC strings, verdicts as short lowercase names.

#include <google/protobuf/timestamp.pb.h>

#include <nlohmann/json.hpp>
#include <string>

#include "coordinator/clock.h"
#include "leapfrog/v1/control.pb.h"

namespace leapfrog::coord {

// "2026-11-30T01:00:00.000Z"; null when unset (seconds and nanos 0).
nlohmann::json iso_time(const google::protobuf::Timestamp& ts);
// "pass", "violation", "kernel-crash", ...; "" for UNSPECIFIED.
std::string verdict_name(v1::Verdict v);
// "queued", "leased", "done" (a campaign's by_state keys).
std::string job_state_name(v1::JobState s);

nlohmann::json to_json(const v1::ScenarioSpec& s);
// The violation's fields, its kind as the word (ktap/words.h), with
// "detail" as the agent's JSON writes it (violation_json; null without a
// typed detail).
nlohmann::json to_json(const v1::Violation& v);
// The outcome; "scale" holds lookup-scale's points (Outcome.scale), and the
// run's detail (Outcome.run: rounds, unjudged, timing, notes) sits at the
// top level as the agent's JSON has it.
nlohmann::json to_json(const v1::OutcomeRecord& o);
// A kernel as the API shows it: one registered before builds existed (no
// status) is "ready".
v1::Kernel shown(v1::Kernel k);

// A campaign spec from the API's JSON shape (the inverse of to_json); throws
// RequestError (400) naming the bad field.
v1::CampaignSpec campaign_spec_from_json(const nlohmann::json& j);

}  // namespace leapfrog::coord
