// The report-acceptance rule (report_acceptance.h).

#include "coordinator/store/report_acceptance.h"

#include "coordinator/store/pg_lease_keys.h"

namespace leapfrog::coord {

namespace {

ReportDecision refuse(std::string why, bool wrong_key = false) {
  ReportDecision d;
  d.error = "report outcome: " + std::move(why);
  d.wrong_key = wrong_key;
  return d;
}

ReportDecision result(ReportResult r) {
  ReportDecision d;
  d.result = r;
  return d;
}

}  // namespace

ReportDecision judge_report(const std::optional<ReportedJob>& job, const ReportClaim& report) {
  const std::string job_id = std::to_string(report.job_id);
  const std::string attempt = std::to_string(report.attempt);
  if (!job) return refuse("unknown job " + job_id);
  // An attempt past the current one was never handed out, so it has no outcome.
  if (report.attempt > job->attempt)
    return refuse("job " + job_id + " has no attempt " + attempt + " (latest " +
                  std::to_string(job->attempt) + ")");
  // Only the lease's holder, by its key, reports on an attempt, even once
  // the job moved on (its violations would be kept); without a key on
  // either side, the agent id decides while the attempt is leased.
  if (auto why = wrong_key(job->attempt_key, report.key, report.job_id, report.attempt);
      !why.empty())
    return refuse(why, true);
  if (report.attempt == job->attempt && (job->attempt_key.empty() || report.key.empty()) &&
      job->state == "leased" && job->holder != report.agent_id)
    return refuse("job " + job_id + " attempt " + attempt + " is leased by agent \"" + job->holder +
                  "\", not by \"" + report.agent_id.substr(0, 80) + "\"");
  if (job->already_stored) return result(ReportResult::Duplicate);
  // The current attempt's report is taken while the job waits for its next
  // lease, and also after the lease expired for the last time: a real
  // outcome then replaces INFRA_FAILURE (nothing the agent measured is lost).
  if (report.attempt == job->attempt &&
      (job->state != "done" || job->verdict == v1::VERDICT_INFRA_FAILURE))
    return result(ReportResult::Stored);
  // Too late for its job, but what it found is kept (an extra outcome).
  if (report.carries_violations) return result(ReportResult::KeptSuperseded);
  return result(ReportResult::Superseded);
}

bool carries_violations(const v1::Outcome& o) {
  return o.verdict() == v1::VERDICT_VIOLATION || o.violation_count() > 0 || o.violations_size() > 0;
}

}  // namespace leapfrog::coord
