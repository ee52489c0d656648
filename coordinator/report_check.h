#pragma once
// The checks ReportOutcome makes on a request before the store sees it, in a
// file of their own so that fuzz/report_outcome_fuzz.cc can run them without
// a store or a gRPC server.

#include <string>

#include "leapfrog/v1/agent.pb.h"

namespace leapfrog::coord {

// Why an agent's outcome cannot be stored as it is ("" if it can): values a
// reader could not name, or a size no list of outcomes could carry.
std::string outcome_problem(const v1::Outcome& o);

// Why ReportOutcome refuses `req` with INVALID_ARGUMENT ("" if it does not):
// no job or attempt, no verdict, outcome_problem, or a build result's paths.
std::string report_problem(const v1::ReportOutcomeRequest& req);

}  // namespace leapfrog::coord
