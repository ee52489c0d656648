#pragma once
// An outcome's lookup-scale host in its JSON (outcome.h's to_json writes it
// as "scale_host"), both ways, for readers of stored outcomes.

#include <nlohmann/json_fwd.hpp>

#include "scenarios/outcome.h"

namespace leapfrog {

nlohmann::json to_json(const ScaleHost& h);
// Reads a host back from to_json; a field an older outcome lacks keeps its
// default. Throws nlohmann::json::exception when a field has the wrong type.
ScaleHost scale_host_from_json(const nlohmann::json& j);

}  // namespace leapfrog
