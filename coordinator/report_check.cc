#include "coordinator/report_check.h"

#include <cstdint>

#include "common/bounds.h"
#include "common/outcome/values.h"
#include "coordinator/wire_paths.h"

namespace leapfrog::coord {

std::string outcome_problem(const v1::Outcome& o) {
  if (!v1::Verdict_IsValid(o.verdict()))
    return "outcome.verdict " + std::to_string(o.verdict()) + " is not a known verdict";
  // Kinds are the ViolationKind enum; an agent from before it sent a word
  // (the old field 1), which reads as no kind here. Stored, it would name no
  // kind in any list: refuse it, and say why.
  for (int i = 0; i < o.violations_size(); ++i) {
    const auto kind = o.violations(i).kind();
    if (kind == v1::VIOLATION_KIND_UNSPECIFIED || !v1::ViolationKind_IsValid(kind))
      return "outcome.violations[" + std::to_string(i) + "].kind " + std::to_string(kind) +
             " is not a known violation kind (an agent older than the coordinator sends kinds as "
             "words: upgrade it)";
  }
  if (auto why = outcome::first_bad_value(o, "outcome"); !why.empty()) return why;
  // The counters agree: the listed violations are some of those counted.
  if (o.violation_count() < static_cast<uint64_t>(o.violations_size()))
    return "outcome.violation_count " + std::to_string(o.violation_count()) + " is less than the " +
           std::to_string(o.violations_size()) + " violations listed";
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
