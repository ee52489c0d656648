// The statements every pooled connection of PgStore prepares. Times cross
// the wire as microseconds since the epoch (lf_ts/lf_us in SQL), proto
// messages as bytea, and lists as array literals (libpqxx 6 binds no arrays).

#include "coordinator/store/pg_statements.h"

#include <iterator>
#include <stdexcept>

#include "coordinator/store/pg_agents.h"
#include "coordinator/store/pg_lease_keys.h"
#include "coordinator/store/pg_rows.h"
#include "coordinator/store/pg_summaries.h"
#include "leapfrog/v1/common.pb.h"

namespace leapfrog::coord {

namespace {

static_assert(v1::VERDICT_INFRA_FAILURE == 4, "expire_leases writes INFRA_FAILURE as 4");
static_assert(v1::VERDICT_BUILD_FAILURE == 8, "settle_waiting writes BUILD_FAILURE as 8");

// Every statement, prepared on each pooled connection. The agents' hot
// statements spell out lf_ts and lf_us: the schema declares them IMMUTABLE
// over STABLE operators, which keeps the planner from inlining them, and
// every execution then runs them as SQL functions, parsing and planning their
// bodies anew (a quarter of a lease's server time, measured).
const PgStatement kStatements[] = {
    {"register_agent",
     "INSERT INTO agents (id, name, kernel_label, capabilities, registered_at, last_seen,"
     "  secret_sha256)"
     " VALUES (gen_random_uuid()::text, $1, $2, $3, lf_ts($4), lf_ts($4), nullif($5, ''))"
     " ON CONFLICT (name) DO UPDATE SET kernel_label = EXCLUDED.kernel_label,"
     "  capabilities = EXCLUDED.capabilities, last_seen = EXCLUDED.last_seen,"
     "  secret_sha256 = coalesce(EXCLUDED.secret_sha256, agents.secret_sha256)"
     " RETURNING id"},
    {"agent_key", "SELECT coalesce(secret_sha256, '') FROM agents WHERE id = $1"},
    {"touch_agent",
     "UPDATE agents SET last_seen = greatest(last_seen,"
     "  timestamptz 'epoch' + $2::bigint * interval '1 microsecond') WHERE id = $1"},
    {"list_agents",
     "SELECT a.id, a.name, a.capabilities, lf_us(a.registered_at), lf_us(a.last_seen),"
     "  a.last_seen >= lf_ts($1), coalesce(l.job_id, 0)"
     " FROM agents a LEFT JOIN (SELECT agent_id, min(id) AS job_id FROM jobs"
     "  WHERE state = 'leased' GROUP BY agent_id) l ON l.agent_id = a.id"
     " ORDER BY a.name"},
    // A page of them: the names after $2 (all when $3), one more than $4.
    {"page_agents",
     "SELECT a.id, a.name, a.capabilities, lf_us(a.registered_at), lf_us(a.last_seen),"
     "  a.last_seen >= lf_ts($1), coalesce(l.job_id, 0)"
     " FROM (SELECT * FROM agents WHERE $3 OR name > $2 ORDER BY name LIMIT $4) a"
     " LEFT JOIN (SELECT agent_id, min(id) AS job_id FROM jobs"
     "  WHERE state = 'leased' GROUP BY agent_id) l ON l.agent_id = a.id"
     " ORDER BY a.name"},
    // The agents of the names in $2, each with the job it holds.
    {"agents_named",
     "SELECT a.id, a.name, a.capabilities, lf_us(a.registered_at), lf_us(a.last_seen),"
     "  a.last_seen >= lf_ts($1), coalesce(l.job_id, 0)"
     " FROM (SELECT * FROM agents WHERE name = ANY($2::text[])) a"
     " LEFT JOIN LATERAL (SELECT min(id) AS job_id FROM jobs"
     "  WHERE state = 'leased' AND agent_id = a.id) l ON true"
     " ORDER BY a.name"},
    {"add_kernel",
     "INSERT INTO kernels (label, version, sha256, source, added_at, status, details)"
     " VALUES ($1, $2, $3, $4, lf_ts($5), $6, $7) ON CONFLICT (label) DO NOTHING RETURNING label"},
    {"put_kernel",
     "INSERT INTO kernels (label, version, sha256, source, added_at, status, details)"
     " VALUES ($1, $2, $3, $4, lf_ts($5), $6, $7) ON CONFLICT (label) DO UPDATE SET"
     " version = excluded.version, sha256 = excluded.sha256, source = excluded.source,"
     " added_at = excluded.added_at, status = excluded.status, details = excluded.details"
     " RETURNING label"},
    {"list_kernels",
     "SELECT label, version, sha256, source, lf_us(added_at), status, details FROM kernels"
     " ORDER BY added_at, label"},
    {"page_kernels",
     "SELECT label, version, sha256, source, lf_us(added_at), status, details FROM kernels"
     " WHERE $3 OR (added_at, label) > (lf_ts($1), $2) ORDER BY added_at, label LIMIT $4"},
    {"insert_campaign",
     "INSERT INTO campaigns (name, spec, schedule_id, job_count, created_at)"
     " VALUES ($1, $2, $3, $4, lf_ts($5)) RETURNING id"},
    {"get_campaign",
     "SELECT id, spec, schedule_id, job_count, lf_us(created_at) FROM campaigns WHERE id = $1"},
    {"recent_campaigns",
     "SELECT id, spec, schedule_id, job_count, lf_us(created_at) FROM campaigns"
     " ORDER BY id DESC LIMIT $1"},
    {"list_jobs",
     "SELECT " + std::string(kJobInfoColumns) + " FROM jobs WHERE campaign_id = $1 ORDER BY id"},
    // A page of a campaign's jobs after job $2. The planner likes to walk
    // the primary key from $2 and filter by campaign, as if a campaign's jobs
    // were spread over the table; a nightly's are one run of ids after every
    // older campaign's, so the latest campaign's first page read every older
    // job (9.97 M rows, 5.7 s, at 10^7 outcomes), and so did a min(id) of
    // the campaign. Written as a range, campaign_id is no constant to the
    // planner, so only jobs_campaign_id (migration 21) gives the order
    // (campaign_id, id): the page is a walk of it from ($1, $2) to the
    // campaign's end, which reads the campaign's jobs and nothing else.
    {"page_jobs", "SELECT " + std::string(kJobInfoColumns) +
                      " FROM jobs WHERE campaign_id >= $1 AND campaign_id <= $1 AND id > $2"
                      " ORDER BY campaign_id, id LIMIT $3"},
    // The oldest matching queued job; SKIP LOCKED lets concurrent leases (from
    // any replica) pass each other instead of queueing on one row. Only the
    // jobs_queued index (kernel_label, id) gives this ORDER BY: written as
    // `kernel_label = $3 ... ORDER BY id`, the planner may walk the primary key
    // instead, past every job already leased, whenever the statistics say
    // most jobs are queued (a first big campaign), and leasing the whole
    // campaign then costs its length squared.
    {"lease_job",
     "UPDATE jobs SET state = 'leased', attempt = attempt + 1, agent_id = $1,"
     "  holders[attempt + 1] = " +
         holder_sql("$6") +
         ","
         "  lease_deadline = timestamptz 'epoch' + $2::bigint * interval '1 microsecond'"
         " WHERE id = (SELECT id FROM jobs WHERE state = 'queued' AND kernel_label = ANY(ARRAY[$3])"
         "  AND fs = ANY($4::text[]) AND (release IS NULL OR release = $5) AND build IS NULL"
         "  ORDER BY kernel_label, id LIMIT 1 FOR UPDATE SKIP LOCKED)"
         " RETURNING id, attempt, campaign_id, spec, kernel_label,"
         "  (extract(epoch FROM lease_deadline) * 1000000)::bigint"},
    // Builder agents: the oldest queued kernel build job, of any label.
    {"lease_build_job",
     "UPDATE jobs SET state = 'leased', attempt = attempt + 1, agent_id = $1,"
     "  holders[attempt + 1] = " +
         holder_sql("$3") +
         ","
         "  lease_deadline = timestamptz 'epoch' + $2::bigint * interval '1 microsecond'"
         " WHERE id = (SELECT id FROM jobs WHERE state = 'queued' AND build IS NOT NULL"
         "  ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED)"
         " RETURNING id, attempt, campaign_id, spec, kernel_label,"
         "  (extract(epoch FROM lease_deadline) * 1000000)::bigint, build"},
    // Jobs still waiting for a build job that ended without registering a
    // kernel (it failed, or its lease expired for the last time): they end.
    {"settle_waiting",
     "UPDATE jobs w SET state = 'done', verdict = 8,"  // VERDICT_BUILD_FAILURE
     "  reason = format('kernel %s was not built: build job %s ended without a kernel%s',"
     "   w.kernel_label, b.id, coalesce(' (' || b.reason || ')', '')),"
     "  finished_at = lf_ts($1), wait_build = NULL"
     " FROM jobs b WHERE w.state = 'waiting' AND b.id = w.wait_build AND b.state = 'done'"
     " RETURNING w.id, w.campaign_id, w.scenario, w.kernel_label, w.fs"},
    // lease_job for several callers with the same capabilities at once (group
    // lease): the n-th caller gets the n-th oldest matching job.
    {"lease_jobs",
     "UPDATE jobs j SET state = 'leased', attempt = j.attempt + 1, agent_id = w.agent_id,"
     "  holders[j.attempt + 1] = " +
         holder_sql("w.key") +
         ","
         "  lease_deadline = timestamptz 'epoch' + w.deadline * interval '1 microsecond'"
         " FROM (SELECT id, row_number() OVER (ORDER BY kernel_label, id) AS n FROM"
         "   (SELECT id, kernel_label FROM jobs WHERE state = 'queued'"
         "     AND kernel_label = ANY(ARRAY[$3]) AND fs = ANY($4::text[])"
         "     AND (release IS NULL OR release = $6) AND build IS NULL"
         "     ORDER BY kernel_label, id LIMIT $5 FOR UPDATE SKIP LOCKED) q) picked"
         "  JOIN unnest($1::text[], $2::bigint[], $7::text[]) WITH ORDINALITY"
         "   AS w(agent_id, deadline, key, n)"
         "   ON w.n = picked.n"
         " WHERE j.id = picked.id"
         " RETURNING j.id, j.attempt, j.campaign_id, j.spec, j.kernel_label,"
         "  (extract(epoch FROM j.lease_deadline) * 1000000)::bigint, w.n"},
    {"renew_lease",
     "UPDATE jobs SET lease_deadline = timestamptz 'epoch' + $4::bigint * interval '1 microsecond',"
     // The counts of a heartbeat that carried them ($6 >= 0), as renew_leases.
     "  progress_attempt = CASE WHEN $6::bigint >= 0 THEN attempt ELSE progress_attempt END,"
     "  progress_operations = CASE WHEN $6::bigint >= 0 THEN $6::bigint"
     "   ELSE progress_operations END,"
     "  progress_lookups = CASE WHEN $6::bigint >= 0 THEN $7::bigint ELSE progress_lookups END,"
     "  progress_violations = CASE WHEN $6::bigint >= 0 THEN $8::bigint"
     "   ELSE progress_violations END,"
     "  progress_at = CASE WHEN $6::bigint >= 0 THEN lf_ts($9::bigint) ELSE progress_at END"
     " WHERE id = $1 AND attempt = $2 AND agent_id = $3 AND state = 'leased'"
     "  AND " +
         key_matches_sql("attempt", "$5") +
         " RETURNING (extract(epoch FROM lease_deadline) * 1000000)::bigint"},
    // Why renew_lease or release_job found nothing: the lease is the agent's,
    // but was taken with another key.
    {"leased_with_other_key",
     "SELECT 1 FROM jobs WHERE id = $1 AND attempt = $2 AND agent_id = $3 AND state = 'leased'"
     "  AND NOT " +
         key_matches_sql("attempt", "$4")},
    // Reports, a batch at a time (group commit). Rows are locked in id order,
    // so two batches (of any replica) never deadlock; the row locks order
    // concurrent reports (and leases) of one job.
    {"lock_jobs",
     "SELECT id, state, attempt, campaign_id, coalesce(verdict, 0), coalesce(agent_id, ''),"
     "  scenario, kernel_label, fs, coalesce(array_lower(holders, 1), 1),"
     "  coalesce(replace(array_to_string(holders, ',', ''), '-', ''), '') FROM jobs"
     " WHERE id = ANY($1::bigint[]) ORDER BY id FOR UPDATE"},
    // The accepted reports of a batch: their outcome rows (in report order,
    // which seq keeps) and, where the row is new, their jobs, done. Returns
    // the keys stored (true), and of the keys $14/$15 (reports judged
    // superseded) those already stored (false). It runs after lock_jobs, so
    // its snapshot sees every outcome of the locked jobs: a stored key is a
    // duplicate. One statement instead of a query before and an insert after.
    {"store_outcomes",
     "WITH r AS (SELECT * FROM unnest($1::bigint[], $2::int[], $3::bigint[], $4::text[],"
     "   $5::int[], $6::bigint[], $7::bigint[], $8::bigint[], $9::bigint[], $10::bigint[],"
     "   $11::text[], $12::text[], $13::bigint[], $16::bool[]) WITH ORDINALITY AS r(job_id,"
     "   attempt, campaign_id, agent_id, verdict, ops, lookups_checked, offsets_checked,"
     "   violation_count, race_window_hits, error, outcome, at, extra, n)),"
     " stored AS (INSERT INTO outcomes (job_id, attempt, campaign_id, agent_id, verdict, ops,"
     "   lookups_checked, offsets_checked, violation_count, race_window_hits, error, outcome,"
     "   reported_at, superseded)"
     "  SELECT job_id, attempt, campaign_id, agent_id, verdict, ops, lookups_checked,"
     "   offsets_checked, violation_count, race_window_hits, error, decode(outcome, 'hex'),"
     "   timestamptz 'epoch' + at * interval '1 microsecond', extra FROM r ORDER BY n"
     "  ON CONFLICT (job_id, attempt) DO NOTHING RETURNING job_id, attempt),"
     // An extra (superseded) outcome leaves its job alone.
     " finished AS (UPDATE jobs j SET state = 'done', verdict = r.verdict, agent_id = r.agent_id,"
     // An INFRA_FAILURE the agent reported (its run killed by the OOM
     // killer) says why where an expired lease's does.
     "  lease_deadline = NULL,"
     "  reason = CASE WHEN r.verdict = 4 AND r.error <> '' THEN left(r.error, 2000) END,"
     "  finished_at = timestamptz 'epoch' + r.at * interval '1 microsecond'"
     "  FROM r JOIN stored s ON s.job_id = r.job_id AND s.attempt = r.attempt"
     "  WHERE j.id = r.job_id AND NOT r.extra)"
     " SELECT true, job_id, attempt FROM stored"
     " UNION ALL SELECT false, o.job_id, o.attempt FROM outcomes o"
     "  JOIN unnest($14::bigint[], $15::int[]) AS k(job_id, attempt)"
     "   ON o.job_id = k.job_id AND o.attempt = k.attempt"},
    {"release_job",
     "UPDATE jobs SET state = 'queued', agent_id = NULL, lease_deadline = NULL,"
     "  released = released + 1"
     " WHERE id = $1 AND attempt = $2 AND agent_id = $3 AND state = 'leased'"
     "  AND " +
         key_matches_sql("attempt", "$4")},
    {"expire_leases",
     "WITH expired AS (SELECT id, agent_id AS last_agent,"
     "   attempt - released >= max_attempts AS final FROM jobs"
     "  WHERE state = 'leased' AND lease_deadline < lf_ts($1) FOR UPDATE SKIP LOCKED)"
     " UPDATE jobs j SET"
     "  state = CASE WHEN e.final THEN 'done' ELSE 'queued' END,"
     "  verdict = CASE WHEN e.final THEN 4 END,"  // VERDICT_INFRA_FAILURE
     "  reason = CASE WHEN e.final THEN format('lease expired after %s attempts (last agent %s)',"
     "   j.attempt - j.released, j.agent_id) END,"
     "  finished_at = CASE WHEN e.final THEN lf_ts($1) END,"
     "  agent_id = CASE WHEN e.final THEN j.agent_id END,"
     "  lease_deadline = NULL"
     " FROM expired e WHERE j.id = e.id"
     " RETURNING j.id, j.attempt, e.final, coalesce(e.last_agent, ''), j.campaign_id, j.scenario,"
     "  j.kernel_label, j.fs"},
    {"outcome_violations",
     "SELECT v.job_id, v.attempt, v.kind, v.actor, v.op, v.path, v.step, v.component,"
     "  v.object, v.observed, v.expected, v.invoke_ns, v.complete_ns, v.detail, v.detail_pb"
     " FROM violations v JOIN unnest($1::bigint[], $2::int[]) AS k(job_id, attempt)"
     "  ON v.job_id = k.job_id AND v.attempt = k.attempt"
     " ORDER BY v.job_id, v.attempt, v.idx"},
    {"outcome_violation_details",
     "SELECT d.job_id, d.attempt, d.details"
     " FROM violation_details d JOIN unnest($1::bigint[], $2::int[]) AS k(job_id, attempt)"
     "  ON d.job_id = k.job_id AND d.attempt = k.attempt"},
    {"add_schedule",
     "INSERT INTO schedules (name, cron, spec, enabled, next_run)"
     " VALUES ($1, $2, $3, true, lf_ts($4)) RETURNING id"},
    {"list_schedules",
     "SELECT id, name, cron, spec, enabled, lf_us(next_run), lf_us(last_run) FROM schedules"
     " ORDER BY id"},
    {"page_schedules",
     "SELECT id, name, cron, spec, enabled, lf_us(next_run), lf_us(last_run) FROM schedules"
     " WHERE id > $1 ORDER BY id LIMIT $2"},
    {"set_schedule_enabled",
     "UPDATE schedules SET enabled = $2, next_run = lf_ts($3) WHERE id = $1"
     " RETURNING id, name, cron, spec, enabled, lf_us(next_run), lf_us(last_run)"},
    {"remove_schedule", "DELETE FROM schedules WHERE id = $1"},
    // Both replicas may try; the row lock serialises them and the second finds
    // next_run moved, so it updates nothing.
    {"fire_schedule",
     "UPDATE schedules SET next_run = lf_ts($3), last_run = lf_ts($2)"
     " WHERE id = $1 AND enabled AND next_run = lf_ts($2) RETURNING spec"},
};

}  // namespace

std::vector<PgStatement> store_statements() {
  std::vector<PgStatement> out(std::begin(kStatements), std::end(kStatements));
  for (auto& st : summary_statements()) out.push_back(std::move(st));
  for (auto& st : agent_statements()) out.push_back(std::move(st));
  return out;
}

std::string store_statement_sql(const std::string& name) {
  for (const auto& s : store_statements()) {
    if (s.name == name) return s.sql;
  }
  throw std::out_of_range("no store statement \"" + name + "\"");
}

}  // namespace leapfrog::coord
