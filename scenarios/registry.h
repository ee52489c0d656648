#pragma once
// The one table of scenarios, by name.

#include <memory>
#include <string>
#include <vector>

#include "scenarios/scenario.h"

namespace leapfrog {

// Every registered scenario, in catalogue order.
const std::vector<std::unique_ptr<Scenario>>& scenarios();
// The scenario called `name`; throws UsageError listing the known names.
const Scenario& find_scenario(const std::string& name);

}  // namespace leapfrog
