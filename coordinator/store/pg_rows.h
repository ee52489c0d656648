#pragma once
// Row mappers: PgStore's result rows as proto messages. Each reads the
// columns its comment lists, in that order; the shared column lists are here
// so that the queries and the mappers cannot drift apart.

#include <pqxx/pqxx>
#include <string>
#include <vector>

#include "coordinator/store/store.h"

namespace leapfrog::coord {

// The columns of jobs job_info_from_row reads (FROM jobs).
inline constexpr const char* kJobInfoColumns =
    "id, campaign_id, spec, kernel_label, state, attempt, coalesce(agent_id, ''),"
    "  coalesce(verdict, 0), coalesce(reason, ''), build, coalesce(release, ''),"
    // The progress of the current attempt's latest heartbeat, -1: none.
    "  CASE WHEN progress_attempt = attempt THEN progress_operations ELSE -1 END,"
    "  coalesce(progress_lookups, 0), coalesce(progress_violations, 0),"
    "  coalesce(lf_us(progress_at), 0)";
// The columns outcome_records reads (FROM outcomes o JOIN jobs j).
inline constexpr const char* kOutcomeColumns =
    "o.job_id, o.attempt, o.campaign_id, j.spec, j.kernel_label, o.agent_id,"
    "  o.outcome, lf_us(o.reported_at), o.superseded";

// OutcomeRecords of kOutcomeColumns rows, with their violations (one more
// query) unless `with_violations` is false.
std::vector<v1::OutcomeRecord> outcome_records(pqxx::work& txn, const pqxx::result& rows,
                                               bool with_violations = true);
// A violation row's columns from `first` on: kind, actor, op, path, step,
// component, object, observed, expected, invoke_ns, complete_ns, detail,
// detail_pb.
void violation_from_row(const pqxx::row& r, int first, v1::Violation* v);
// Gives `o`'s violations (read by violation_from_row, in idx order) their
// typed details from the outcome's violation_details value (a bytea field).
// A violation that has a detail from its row already keeps it. Throws
// std::runtime_error if the value does not parse.
void attach_violation_details(const pqxx::field& details, v1::Outcome& o);

// A JobInfo of a kJobInfoColumns row (build and release only if present).

v1::JobInfo job_info_from_row(const pqxx::row& r);
// (id, name, cron, spec, enabled, next_run, last_run)
v1::Schedule schedule_from_row(const pqxx::row& r);
// Campaign rows (id, spec, schedule_id, job_count, created_at) with their
// counters, from the summaries.
std::vector<v1::Campaign> campaigns_with_counts(pqxx::work& txn, const pqxx::result& rows);
// A leased job from a lease_job / lease_jobs / lease_build_job row (id,
// attempt, campaign_id, spec, kernel_label, lease_deadline in microseconds).
v1::Job job_from_row(const pqxx::row& r);
// (label, version, sha256, source, added_at, status, details)
v1::Kernel kernel_from_row(const pqxx::row& r);
// (id, name, capabilities, registered_at, last_seen, online, current_job)
v1::AgentInfo agent_from_row(const pqxx::row& r);

}  // namespace leapfrog::coord
