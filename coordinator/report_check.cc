#include "coordinator/report_check.h"

#include "common/bounds.h"
#include "coordinator/wire_paths.h"

namespace leapfrog::coord {

std::string outcome_problem(const v1::Outcome& o) {
  if (!v1::Verdict_IsValid(o.verdict()))
    return "outcome.verdict " + std::to_string(o.verdict()) + " is not a known verdict";
  const size_t bytes = o.ByteSizeLong();
  if (bytes > kMaxOutcomeBytes)
    return "outcome is " + std::to_string(bytes) + " bytes, want at most " +
           std::to_string(kMaxOutcomeBytes) + " (" + std::to_string(o.violations_size()) +
           " violations, error of " + std::to_string(o.error().size()) + " bytes)";
  return "";
}

std::string report_problem(const v1::ReportOutcomeRequest& req) {
  if (req.job_id() <= 0 || req.attempt() == 0) return "job_id and attempt are required";
  if (!req.has_outcome() || req.outcome().verdict() == v1::VERDICT_UNSPECIFIED)
    return "outcome.verdict is required";
  if (auto why = outcome_problem(req.outcome()); !why.empty()) return why;
  if (req.outcome().has_build()) return build_result_problem(req.outcome().build());
  return "";
}

}  // namespace leapfrog::coord
