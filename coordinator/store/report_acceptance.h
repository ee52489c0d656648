#pragma once
// The report-acceptance rule: what becomes of an agent's report of (job,
// attempt) given the job as the store found it. Pure (no database): PgStore's
// batched reports (pg_reports.cc) and its kernel build reports
// (pg_kernels.cc) both judge by it, then store what it accepts.

#include <cstdint>
#include <optional>
#include <string>

#include "coordinator/store/store.h"
#include "leapfrog/v1/common.pb.h"

namespace leapfrog::coord {

// The job a report names, as locked, seen from the report's attempt.
struct ReportedJob {
  std::string state;            // jobs.state: "queued", "leased", "waiting" or "done"
  uint32_t attempt = 0;         // the job's current (latest) attempt
  int verdict = 0;              // jobs.verdict; 0 while not done
  std::string holder;           // the agent holding the lease while state is "leased"
  std::string attempt_key;      // the key the report's attempt was leased with (32 hex), or ""
  bool already_stored = false;  // an outcome of (job, the report's attempt) is stored
};

// The report being judged.
struct ReportClaim {
  std::string agent_id;  // cleaned (pg_util.h)
  int64_t job_id = 0;
  uint32_t attempt = 0;
  std::string key;                  // Store's `key`; kTrustedCaller ("") for a trusted caller
  bool carries_violations = false;  // worth keeping even when too late for its job
};

// The verdict on one report: a result, or refused with why.
struct ReportDecision {
  // Stored: store it and finish the job. KeptSuperseded: store it as an
  // extra outcome, the job left alone. Superseded and Duplicate: store
  // nothing. Unset: refused.
  std::optional<ReportResult> result;
  std::string error;       // why it was refused ("report outcome: ...")
  bool wrong_key = false;  // refused as WrongAgentSecret (else a StoreError)
};

// Judges `report` against `job` (nullopt: no such job). In order: a report
// on an unknown job, on an attempt never handed out, with another key than
// the attempt's lease, or (without a key on either side) from another agent
// than the current lease's holder is refused; then one already stored is a
// Duplicate; the current attempt's report is Stored unless the job is done
// with a verdict other than INFRA_FAILURE; any other is KeptSuperseded if it
// carries violations, else Superseded.
ReportDecision judge_report(const std::optional<ReportedJob>& job, const ReportClaim& report);

// A report worth keeping even when its job has moved on: it found violations.
bool carries_violations(const v1::Outcome& o);

}  // namespace leapfrog::coord
