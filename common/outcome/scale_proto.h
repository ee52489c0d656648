#pragma once
// lookup-scale results between scenarios' structs and the wire's typed
// v1::ScaleRun (Outcome.scale): the agent fills it, the store keeps its
// rows, and the coordinator's readers read it back.

#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>

#include "leapfrog/v1/common.pb.h"
#include "scenarios/outcome_json.h"

namespace leapfrog {

// "processes" / "threads" as the enum; UNSPECIFIED for anything else.
v1::ScaleMode scale_mode_from(const std::string& mode);
// The enum as scenarios spell it ("" for UNSPECIFIED).
std::string to_string(v1::ScaleMode mode);

v1::ScalePoint to_proto(const ScalePoint& p);
ScalePoint from_proto(const v1::ScalePoint& p);
v1::ScaleHost to_proto(const ScaleHost& h);
ScaleHost from_proto(const v1::ScaleHost& h);

// The run in an outcome JSON object (as `leapfrog-agent run --json` prints
// it): its "scale" points, read by scenarios' scale_point_from_json (a
// malformed point is skipped), and its "scale_host". nullopt when it has no
// valid point.
std::optional<v1::ScaleRun> scale_run_from_json(const nlohmann::json& outcome);

// The run of a stored or reported outcome (Outcome.scale); nullopt when it
// has no point.
std::optional<v1::ScaleRun> scale_run_of(const v1::Outcome& o);

}  // namespace leapfrog
