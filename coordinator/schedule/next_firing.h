#pragma once
// When a schedule fires next: its cron expression (cron.h) evaluated at the
// coordinator clock's resolution.

#include <string>

#include "coordinator/clock.h"

namespace leapfrog::coord {

// The next firing of a cron expression after `t`; throws SpecError if it does not parse.
TimePoint next_firing(const std::string& cron, TimePoint t);

}  // namespace leapfrog::coord
