// PgStore: each Store call is one transaction on a pooled connection, or one
// autocommit statement where a single statement does the whole call (the
// agent's hot path: lease, touch, renew, release); run_in in pg_pool.h holds
// the error policy. Concurrent leases and reports are written in groups
// (PgGroupCommit, PgBatchWriter). Times cross the wire as microseconds since the epoch
// (lf_ts/lf_us in SQL), proto messages as bytea, and lists as array literals
// (libpqxx 6 binds no arrays).

#include "coordinator/store/pg_store.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <google/protobuf/wire_format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <charconv>
#include <iterator>
#include <map>
#include <optional>
#include <pqxx/pqxx>
#include <pqxx/tablewriter>
#include <set>
#include <tuple>
#include <utility>

#include "common/hex.h"
#include "common/kernel/built_kernel.h"
#include "coordinator/store/migrations.h"
#include "coordinator/store/pg_agents.h"
#include "coordinator/store/pg_lease_keys.h"
#include "coordinator/store/pg_pool.h"
#include "coordinator/store/pg_summaries.h"
#include "coordinator/store/pg_util.h"

namespace leapfrog::coord {

// One report_outcome call, queued for group commit.
struct PgReport {
  const std::string& agent_id;
  int64_t job_id;
  uint32_t attempt;
  const v1::Outcome& outcome;
  TimePoint now;
  std::string key;  // Store's `key`
};

// One lease_job call, queued for a group lease.
struct PgLease {
  std::string agent_id;
  std::string kernel_label;
  std::string filesystems;  // text[] literal
  int64_t deadline_us;
  std::string release;  // the agent's `uname -r`: jobs on a rebuilt kernel need it
  std::string key;      // Store's `key`, recorded with the lease
};

namespace {

using ReportBatch = PgBatchWriter<PgReport, ReportResult>::Batch;
using LeaseBatch = PgGroupCommit<PgLease, std::optional<v1::Job>>::Batch;

constexpr int kDefaultMaxAttempts = 3;
constexpr uint32_t kDefaultCampaignLimit = 50;
constexpr uint32_t kDefaultOutcomeLimit = 200;
constexpr int kPassVerdict = v1::VERDICT_PASS;
constexpr int kInfraVerdict = v1::VERDICT_INFRA_FAILURE;
static_assert(kInfraVerdict == 4, "expire_leases writes INFRA_FAILURE as 4");

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
    {"insert_campaign",
     "INSERT INTO campaigns (name, spec, schedule_id, job_count, created_at)"
     " VALUES ($1, $2, $3, $4, lf_ts($5)) RETURNING id"},
    {"get_campaign",
     "SELECT id, spec, schedule_id, job_count, lf_us(created_at) FROM campaigns WHERE id = $1"},
    {"recent_campaigns",
     "SELECT id, spec, schedule_id, job_count, lf_us(created_at) FROM campaigns"
     " ORDER BY id DESC LIMIT $1"},
    {"list_jobs",
     "SELECT id, campaign_id, spec, kernel_label, state, attempt, coalesce(agent_id, ''),"
     "  coalesce(verdict, 0), coalesce(reason, ''), build, coalesce(release, '')"
     " FROM jobs WHERE campaign_id = $1 ORDER BY id"},
    // The oldest matching queued job; SKIP LOCKED lets concurrent leases (from
    // any replica) pass each other instead of queueing on one row. Only the
    // jobs_queued index (kernel_label, id) gives this ORDER BY: written as
    // `kernel_label = $3 ... ORDER BY id`, the planner may walk the primary key
    // instead, past every job already leased, whenever the statistics say
    // most jobs are queued (a first big campaign), and leasing the whole
    // campaign then costs its length squared.
    {"lease_job",
     "UPDATE jobs SET state = 'leased', attempt = attempt + 1, agent_id = $1,"
     "  holders[attempt + 1] = " + holder_sql("$6") + ","
     "  lease_deadline = timestamptz 'epoch' + $2::bigint * interval '1 microsecond'"
     " WHERE id = (SELECT id FROM jobs WHERE state = 'queued' AND kernel_label = ANY(ARRAY[$3])"
     "  AND fs = ANY($4::text[]) AND (release IS NULL OR release = $5) AND build IS NULL"
     "  ORDER BY kernel_label, id LIMIT 1 FOR UPDATE SKIP LOCKED)"
     " RETURNING id, attempt, campaign_id, spec, kernel_label,"
     "  (extract(epoch FROM lease_deadline) * 1000000)::bigint"},
    // Builder agents: the oldest queued kernel build job, of any label.
    {"lease_build_job",
     "UPDATE jobs SET state = 'leased', attempt = attempt + 1, agent_id = $1,"
     "  holders[attempt + 1] = " + holder_sql("$3") + ","
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
     "  holders[j.attempt + 1] = " + holder_sql("w.key") + ","
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
     "UPDATE jobs SET lease_deadline = timestamptz 'epoch' + $4::bigint * interval '1 microsecond'"
     " WHERE id = $1 AND attempt = $2 AND agent_id = $3 AND state = 'leased'"
     "  AND " + key_matches_sql("attempt", "$5") +
     " RETURNING (extract(epoch FROM lease_deadline) * 1000000)::bigint"},
    // Why renew_lease or release_job found nothing: the lease is the agent's,
    // but was taken with another key.
    {"leased_with_other_key",
     "SELECT 1 FROM jobs WHERE id = $1 AND attempt = $2 AND agent_id = $3 AND state = 'leased'"
     "  AND NOT " + key_matches_sql("attempt", "$4")},
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
     "  lease_deadline = NULL, reason = NULL,"
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
     "  AND " + key_matches_sql("attempt", "$4")},
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
     "  v.object, v.observed, v.expected, v.invoke_ns, v.complete_ns, v.detail"
     " FROM violations v JOIN unnest($1::bigint[], $2::int[]) AS k(job_id, attempt)"
     "  ON v.job_id = k.job_id AND v.attempt = k.attempt"
     " ORDER BY v.job_id, v.attempt, v.idx"},
    {"add_schedule",
     "INSERT INTO schedules (name, cron, spec, enabled, next_run)"
     " VALUES ($1, $2, $3, true, lf_ts($4)) RETURNING id"},
    {"list_schedules",
     "SELECT id, name, cron, spec, enabled, lf_us(next_run), lf_us(last_run) FROM schedules"
     " ORDER BY id"},
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

// list_outcomes, by (campaign filter, failed only).
std::string outcomes_query(bool by_campaign, bool failed_only) {
  std::string sql =
      "SELECT o.job_id, o.attempt, o.campaign_id, j.spec, j.kernel_label, o.agent_id,"
      "  o.outcome, lf_us(o.reported_at), o.superseded"
      " FROM outcomes o JOIN jobs j ON j.id = o.job_id WHERE true";
  if (by_campaign) sql += " AND o.campaign_id = $2";
  if (failed_only) sql += " AND o.verdict <> " + std::to_string(kPassVerdict);
  return sql + " ORDER BY o.seq DESC LIMIT $1";
}
const char* outcomes_statement(bool by_campaign, bool failed_only) {
  static const char* names[2][2] = {{"outcomes_all", "outcomes_all_failed"},
                                    {"outcomes_campaign", "outcomes_campaign_failed"}};
  return names[by_campaign][failed_only];
}

int64_t us(TimePoint t) {
  return t.time_since_epoch().count();
}

void set_timestamp(google::protobuf::Timestamp* ts, int64_t us) {
  int64_t seconds = us / 1000000;
  int64_t rest = us % 1000000;
  if (rest < 0) {
    seconds -= 1;
    rest += 1000000;
  }
  ts->set_seconds(seconds);
  ts->set_nanos(static_cast<int32_t>(rest * 1000));
}

pqxx::binarystring bytes(const google::protobuf::MessageLite& m) {
  return pqxx::binarystring(m.SerializeAsString());
}

// bytea in COPY text format (the stream escapes the backslash once more).
std::string bytea_text(const google::protobuf::MessageLite& m) {
  return "\\x" + hex_encode(m.SerializeAsString());
}

// The outcome serialized without its violations (they are rows of their
// own), field by field: serializing the whole message to cut them out again
// cost more than the rest of the outcome (it walks every violation twice).
std::string without_violations(const v1::Outcome& o) {
  using google::protobuf::internal::WireFormat;
  std::vector<const google::protobuf::FieldDescriptor*> fields;
  o.GetReflection()->ListFields(o, &fields);
  std::string out;
  {
    google::protobuf::io::StringOutputStream stream(&out);
    google::protobuf::io::CodedOutputStream coded(&stream);
    for (const auto* f : fields) {
      if (f->number() == v1::Outcome::kViolationsFieldNumber) continue;
      WireFormat::FieldByteSize(f, o);  // caches the sizes of nested messages
      WireFormat::SerializeFieldWithCachedSizes(f, o, &coded);
    }
    WireFormat::SerializeUnknownFields(o.GetReflection()->GetUnknownFields(o), &coded);
    if (coded.HadError()) throw StoreError("an outcome does not serialize", false);
  }
  return out;
}

std::string bool_array(const std::vector<bool>& items) {
  std::string out = "{";
  for (bool v : items) {
    if (out.size() > 1) out += ',';
    out += v ? 't' : 'f';
  }
  return out + "}";
}

// A report worth keeping even when its job has moved on: it found violations.
bool carries_violations(const v1::Outcome& o) {
  return o.verdict() == v1::VERDICT_VIOLATION || o.violation_count() > 0 || o.violations_size() > 0;
}

// OutcomeRecords of outcome rows (job_id, attempt, campaign_id, spec,
// kernel_label, agent_id, outcome, reported_at, superseded), with their
// violations unless `with_violations` is false.
std::vector<v1::OutcomeRecord> outcome_records(pqxx::work& txn, const pqxx::result& rows,
                                               bool with_violations = true) {
  std::vector<v1::OutcomeRecord> out;
  std::map<std::pair<int64_t, uint32_t>, size_t> index;
  std::vector<int64_t> job_ids;
  std::vector<uint32_t> attempts;
  for (const auto& r : rows) {
    v1::OutcomeRecord o;
    o.set_job_id(r[0].as<int64_t>());
    o.set_attempt(r[1].as<uint32_t>());
    o.set_campaign_id(r[2].as<int64_t>());
    *o.mutable_spec() = parse<v1::ScenarioSpec>(r[3], "scenario spec");
    o.set_kernel_label(r[4].as<std::string>());
    o.set_agent_id(r[5].as<std::string>());
    *o.mutable_outcome() = parse<v1::Outcome>(r[6], "outcome");
    set_timestamp(o.mutable_reported_at(), r[7].as<int64_t>());
    o.set_superseded(r[8].as<bool>());
    index[{o.job_id(), o.attempt()}] = out.size();
    job_ids.push_back(o.job_id());
    attempts.push_back(o.attempt());
    out.push_back(std::move(o));
  }
  if (out.empty() || !with_violations) return out;
  for (const auto& r :
       txn.exec_prepared("outcome_violations", number_array(job_ids), number_array(attempts))) {
    auto* v = out[index.at({r[0].as<int64_t>(), r[1].as<uint32_t>()})]
                  .mutable_outcome()
                  ->add_violations();
    v->set_kind(r[2].as<std::string>());
    v->set_actor(r[3].as<uint32_t>());
    v->set_op(r[4].as<std::string>());
    v->set_path(r[5].as<std::string>());
    v->set_step(r[6].as<int32_t>());
    v->set_component(r[7].as<std::string>());
    v->set_object(r[8].as<std::string>());
    v->set_observed(r[9].as<std::string>());
    v->set_expected(r[10].as<std::string>());
    v->set_invoke_ns(r[11].as<int64_t>());
    v->set_complete_ns(r[12].as<int64_t>());
    v->set_detail_json(r[13].as<std::string>());
  }
  return out;
}

v1::JobInfo job_info_from_row(const pqxx::row& r) {
  v1::JobInfo j;
  j.set_job_id(r[0].as<int64_t>());
  j.set_campaign_id(r[1].as<int64_t>());
  *j.mutable_spec() = parse<v1::ScenarioSpec>(r[2], "scenario spec");
  j.set_kernel_label(r[3].as<std::string>());
  j.set_state(job_state(r[4].as<std::string>()));
  j.set_attempt(r[5].as<uint32_t>());
  j.set_agent_id(r[6].as<std::string>());
  j.set_verdict(static_cast<v1::Verdict>(r[7].as<int>()));
  j.set_reason(r[8].as<std::string>());
  if (r.size() > 10) {
    if (!r[9].is_null()) *j.mutable_build() = parse<v1::KernelBuild>(r[9], "kernel build");
    j.set_release(r[10].as<std::string>());
  }
  return j;
}

v1::Schedule schedule_from_row(const pqxx::row& r) {
  v1::Schedule s;
  s.set_id(r[0].as<int64_t>());
  s.set_name(r[1].as<std::string>());
  s.set_cron(r[2].as<std::string>());
  *s.mutable_campaign() = parse<v1::CampaignSpec>(r[3], "campaign spec");
  s.set_enabled(r[4].as<bool>());
  set_timestamp(s.mutable_next_run(), r[5].as<int64_t>());
  if (!r[6].is_null()) set_timestamp(s.mutable_last_run(), r[6].as<int64_t>());
  return s;
}

int64_t insert_campaign(pqxx::work& txn, const v1::CampaignSpec& spec,
                        const std::vector<NewJob>& jobs, int64_t schedule_id, TimePoint now) {
  int max_attempts =
      spec.max_attempts() > 0 ? static_cast<int>(spec.max_attempts()) : kDefaultMaxAttempts;
  int64_t id = txn.exec_prepared1("insert_campaign", clean(spec.name()), bytes(spec), schedule_id,
                                  static_cast<int>(jobs.size()), us(now))[0]
                   .as<int64_t>();
  const bool any_tests =
      std::any_of(jobs.begin(), jobs.end(), [](const NewJob& j) { return !j.build; });
  if (any_tests) {
    pqxx::stream_to copy(txn, "jobs",
                         std::vector<std::string>{"campaign_id", "scenario", "fs", "kernel_label",
                                                  "spec", "max_attempts"});
    for (const auto& job : jobs) {
      if (job.build) continue;  // inserted below
      copy << std::make_tuple(id, clean(job.spec.scenario()), clean(job.spec.fs()),
                              clean(job.kernel_label), bytea_text(job.spec), max_attempts);
    }
    copy.complete();
  }
  // Build jobs, then the jobs on their labels wait for them: the campaign's
  // kernels are tested only once built.
  for (const auto& job : jobs) {
    if (!job.build) continue;
    int64_t build_id =
        txn.exec_params1(
               "INSERT INTO jobs (campaign_id, scenario, fs, kernel_label, spec, max_attempts, build)"
               " VALUES ($1, $2, $2, $3, $4, $5, $6) RETURNING id",
               id, clean(job.spec.scenario()), clean(job.kernel_label), bytes(job.spec),
               max_attempts, bytes(*job.build))[0]
            .as<int64_t>();
    auto waiting = txn.exec_params(
        "UPDATE jobs SET state = 'waiting', wait_build = $2"
        " WHERE campaign_id = $1 AND kernel_label = $3 AND build IS NULL AND state = 'queued'",
        id, build_id, clean(job.kernel_label));
    spdlog::info("build_job_created campaign={} job={} label={} waiting={}", id, build_id,
                 job.kernel_label, waiting.affected_rows());
  }
  // The campaign's cells, counted once; their verdict counts follow the jobs.
  txn.exec_params(
      "INSERT INTO cells SELECT campaign_id, scenario, kernel_label, fs, count(*) FROM jobs"
      " WHERE campaign_id = $1 GROUP BY 1, 2, 3, 4",
      id);
  spdlog::info("campaign_created id={} name=\"{}\" jobs={} schedule={}", id, spec.name(),
               jobs.size(), schedule_id);
  return id;
}

// Campaign rows (id, spec, schedule_id, job_count, created_at) with their counters.
std::vector<v1::Campaign> campaigns_with_counts(pqxx::work& txn, const pqxx::result& rows) {
  std::vector<v1::Campaign> out;
  for (const auto& r : rows) {
    v1::Campaign c;
    c.set_id(r[0].as<int64_t>());
    *c.mutable_spec() = parse<v1::CampaignSpec>(r[1], "campaign spec");
    c.set_schedule_id(r[2].as<int64_t>());
    c.set_jobs(r[3].as<uint32_t>());
    set_timestamp(c.mutable_created_at(), r[4].as<int64_t>());
    out.push_back(std::move(c));
  }
  add_campaign_counts(txn, out);  // from the summaries
  return out;
}

// A leased job from a lease_job / lease_jobs row.
v1::Job job_from_row(const pqxx::row& r) {
  v1::Job job;
  job.set_job_id(r[0].as<int64_t>());
  job.set_attempt(r[1].as<uint32_t>());
  job.set_campaign_id(r[2].as<int64_t>());
  *job.mutable_spec() = parse<v1::ScenarioSpec>(r[3], "scenario spec");
  job.set_kernel_label(r[4].as<std::string>());
  set_timestamp(job.mutable_lease_deadline(), r[5].as<int64_t>());
  return job;
}

// Leases a job for each caller of `batch`, one autocommit statement per set
// of capabilities; callers left without a job get nullopt.
void write_leases(PgPool& pool, LeaseBatch& batch) {
  std::map<std::tuple<std::string, std::string, std::string>, std::vector<LeaseBatch::value_type>>
      groups;
  for (auto* item : batch) {
    groups[{item->request.kernel_label, item->request.filesystems, item->request.release}]
        .push_back(item);
  }
  for (auto& [caps, items] : groups) {
    try {
      std::vector<std::optional<v1::Job>> jobs =
          run_autocommit(pool, "lease_job", [&](pqxx::nontransaction& txn) {
            std::vector<std::optional<v1::Job>> out(items.size());
            if (items.size() == 1) {
              const PgLease& l = items[0]->request;
              auto r = txn.exec_prepared("lease_job", l.agent_id, l.deadline_us, l.kernel_label,
                                         l.filesystems, l.release, l.key);
              if (!r.empty()) out[0] = job_from_row(r[0]);
              return out;
            }
            std::vector<std::string> agents, keys;
            std::vector<int64_t> deadlines;
            for (const auto* item : items) {
              agents.push_back(item->request.agent_id);
              deadlines.push_back(item->request.deadline_us);
              keys.push_back(item->request.key);
            }
            for (const auto& r :
                 txn.exec_prepared("lease_jobs", text_array(agents), number_array(deadlines),
                                   std::get<0>(caps), std::get<1>(caps),
                                   static_cast<int64_t>(items.size()), std::get<2>(caps),
                                   text_array(keys))) {
              out.at(r[6].as<size_t>() - 1) = job_from_row(r);
            }
            return out;
          });
      for (size_t i = 0; i < items.size(); ++i) items[i]->result = std::move(jobs[i]);
    } catch (const StoreError& e) {
      for (auto* item : items) item->error = std::make_exception_ptr(e);
    } catch (...) {
      for (auto* item : items) item->error = std::current_exception();
    }
  }
}

// What became of one report in a batch: a result, or the caller's error.
struct ReportDecision {
  std::optional<ReportResult> result;
  std::string error;
  bool wrong_key = false;  // `error` is a WrongAgentSecret
};

// The job row a report is judged against, as locked (and as the batch's
// earlier reports left it).
struct LockedJob {
  std::string state;
  uint32_t attempt;
  int64_t campaign_id;
  int verdict;
  std::string holder;  // the agent holding the lease while state is "leased"
  CellKey cell;        // where its counts go in the summaries
  LeaseHolders keys;   // the key of each attempt's lease
};

// Set while `state` is "leased" and the report comes from another agent than
// the lease's holder: its result would take the holder's place.
std::string not_the_holder(const std::string& state, const std::string& holder,
                           const std::string& agent_id, int64_t job_id, uint32_t attempt) {
  if (state != "leased" || holder == agent_id) return "";
  return "report outcome: job " + std::to_string(job_id) + " attempt " + std::to_string(attempt) +
         " is leased by agent \"" + holder + "\", not by \"" + agent_id.substr(0, 80) + "\"";
}

// Violation rows in COPY's text format, sent a chunk at a time through one
// COPY statement. Cheaper than stream_to's tuple path (a string per field,
// escaped into another, a line per row), and the server parses a chunk while
// the next is formatted.
class ViolationCopy {
 public:
  explicit ViolationCopy(pqxx::work& txn) : txn_(txn) { buf_.reserve(kChunk + 4096); }

  void row(int64_t job_id, uint32_t attempt, int idx, const v1::Violation& v) {
    number(job_id);
    number(attempt);
    number(idx);
    text(v.kind());
    number(v.actor());
    text(v.op());
    text(v.path());
    number(v.step());
    text(v.component());
    text(v.object());
    text(v.observed());
    text(v.expected());
    number(v.invoke_ns());
    number(v.complete_ns());
    text(v.detail_json());
    buf_.back() = '\n';  // the last field's tab
    if (buf_.size() >= kChunk) flush();
  }

  // Sends what is left and ends the COPY.
  void complete() {
    flush();
    if (writer_) writer_->complete();
  }

 private:
  static constexpr size_t kChunk = 64 * 1024;

  template <class T>
  void number(T v) {
    char digits[24];
    auto end = std::to_chars(digits, digits + sizeof digits, v).ptr;
    buf_.append(digits, end);
    buf_ += '\t';
  }

  // COPY text escapes; NUL bytes are dropped (PostgreSQL text cannot hold them).
  void text(const std::string& s) {
    const char* p = s.data();
    const char* const end = p + s.size();
    while (p < end) {
      const char* plain = p;
      while (p < end && !special(*p)) ++p;
      buf_.append(plain, p);  // the common case: the whole field at once
      if (p == end) break;
      switch (*p++) {
        case '\\': buf_ += "\\\\"; break;
        case '\n': buf_ += "\\n"; break;
        case '\r': buf_ += "\\r"; break;
        case '\t': buf_ += "\\t"; break;
        default: break;  // NUL
      }
    }
    buf_ += '\t';
  }

  static bool special(char c) {
    return c == '\\' || c == '\n' || c == '\r' || c == '\t' || c == '\0';
  }

  void flush() {
    if (buf_.empty()) return;
    if (!writer_) {
      static const std::vector<std::string> columns = {
          "job_id", "attempt", "idx",      "kind",     "actor",     "op",          "path",  "step",
          "component", "object", "observed", "expected", "invoke_ns", "complete_ns", "detail"};
      // tablewriter is libpqxx 6's only way to send COPY data as is (one
      // PQputCopyData per chunk of whole rows); stream_to escapes what it gets.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
      writer_.emplace(txn_, "violations", columns.begin(), columns.end());
#pragma GCC diagnostic pop
    }
    writer_->write_raw_line(buf_);  // it drops the last newline; libpqxx adds one
    buf_.clear();
  }

  pqxx::work& txn_;
  std::string buf_;
  std::optional<pqxx::tablewriter> writer_;
};

// Judges the batch's reports in arrival order, as if each ran alone; stores
// the accepted ones and finishes their jobs (one statement), then their
// violations (one COPY).
std::vector<ReportDecision> store_reports(pqxx::work& txn, const ReportBatch& batch) {
  std::vector<int64_t> ids;
  for (const auto* item : batch) ids.push_back(item->request.job_id);
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  std::map<int64_t, LockedJob> jobs;
  for (const auto& r : txn.exec_prepared("lock_jobs", number_array(ids))) {
    jobs[r[0].as<int64_t>()] = {r[1].as<std::string>(),
                                r[2].as<uint32_t>(),
                                r[3].as<int64_t>(),
                                r[4].as<int>(),
                                r[5].as<std::string>(),
                                CellKey{r[3].as<int64_t>(), r[6].as<std::string>(),
                                        r[7].as<std::string>(), r[8].as<std::string>()},
                                LeaseHolders(r[9].as<int>(), r[10].as<std::string>())};
  }

  std::vector<ReportDecision> decisions(batch.size());
  // The verdict a stored report replaces (a done job's INFRA_FAILURE), or -1.
  std::vector<int> replaces(batch.size(), -1);
  // Accepted, and judged superseded: either may turn out to be a duplicate
  // of an outcome stored before, which store_outcomes tells.
  std::vector<size_t> accepted, superseded;
  std::set<std::pair<int64_t, uint32_t>> accepted_keys;
  for (size_t i = 0; i < batch.size(); ++i) {
    const PgReport& report = batch[i]->request;
    auto job = jobs.find(report.job_id);
    if (job == jobs.end()) {
      decisions[i].error = "report outcome: unknown job " + std::to_string(report.job_id);
      continue;
    }
    LockedJob& j = job->second;
    if (accepted_keys.count({report.job_id, report.attempt})) {
      decisions[i].result = ReportResult::Duplicate;
      continue;
    }
    // An attempt past the current one was never handed out, so it has no outcome.
    if (report.attempt > j.attempt) {
      decisions[i].error = "report outcome: job " + std::to_string(report.job_id) +
                           " has no attempt " + std::to_string(report.attempt) + " (latest " +
                           std::to_string(j.attempt) + ")";
      continue;
    }
    // Only the lease's holder, by its key, reports on an attempt, even once
    // the job moved on (its violations would be kept); without a key on
    // either side, the agent id decides while the attempt is leased.
    const std::string holder_key = j.keys.of(report.attempt);
    if (auto why = wrong_key(holder_key, report.key, report.job_id, report.attempt);
        !why.empty()) {
      decisions[i].error = "report outcome: " + why;
      decisions[i].wrong_key = true;
      continue;
    }
    if (report.attempt == j.attempt && (holder_key.empty() || report.key.empty())) {
      decisions[i].error =
          not_the_holder(j.state, j.holder, clean(report.agent_id), report.job_id, report.attempt);
      if (!decisions[i].error.empty()) continue;
    }
    // The current attempt's report is taken while the job waits for its next
    // lease, and also after the lease expired for the last time: a real
    // outcome then replaces INFRA_FAILURE (nothing the agent measured is lost).
    bool accept = report.attempt == j.attempt && (j.state != "done" || j.verdict == kInfraVerdict);
    if (!accept && carries_violations(report.outcome)) {
      // Too late for its job, but what it found is kept (an extra outcome).
      decisions[i].result = ReportResult::KeptSuperseded;
      accepted.push_back(i);
      accepted_keys.emplace(report.job_id, report.attempt);
      continue;
    }
    if (!accept) {
      decisions[i].result = ReportResult::Superseded;
      superseded.push_back(i);
      continue;
    }
    decisions[i].result = ReportResult::Stored;
    accepted.push_back(i);
    accepted_keys.emplace(report.job_id, report.attempt);
    if (j.state == "done") replaces[i] = j.verdict;
    j.state = "done";
    j.verdict = static_cast<int>(report.outcome.verdict());
  }
  if (accepted.empty() && superseded.empty()) return decisions;
  // Columns of store_outcomes, one array each.
  std::vector<int64_t> job_ids, campaign_ids, ops, lookups, offsets, counts, hits, times, ask_ids;
  std::vector<uint32_t> attempts, ask_attempts;
  std::vector<int> verdicts;
  std::vector<bool> extras;
  std::vector<std::string> agents, errors, outcomes;
  for (size_t i : accepted) {
    const PgReport& r = batch[i]->request;
    const v1::Outcome& o = r.outcome;
    extras.push_back(decisions[i].result == ReportResult::KeptSuperseded);
    job_ids.push_back(r.job_id);
    attempts.push_back(r.attempt);
    campaign_ids.push_back(jobs.at(r.job_id).campaign_id);
    agents.push_back(r.agent_id);
    verdicts.push_back(static_cast<int>(o.verdict()));
    ops.push_back(static_cast<int64_t>(o.ops()));
    lookups.push_back(static_cast<int64_t>(o.lookups_checked()));
    offsets.push_back(static_cast<int64_t>(o.offsets_checked()));
    counts.push_back(static_cast<int64_t>(o.violation_count()));
    hits.push_back(static_cast<int64_t>(o.race_window_hits()));
    errors.push_back(o.error());
    outcomes.push_back(hex_encode(without_violations(o)));
    times.push_back(us(r.now));
  }
  for (size_t i : superseded) {
    ask_ids.push_back(batch[i]->request.job_id);
    ask_attempts.push_back(batch[i]->request.attempt);
  }
  std::set<std::pair<int64_t, uint32_t>> stored, existed;
  for (const auto& row : txn.exec_prepared(
           "store_outcomes", number_array(job_ids), number_array(attempts),
           number_array(campaign_ids), text_array(agents), number_array(verdicts),
           number_array(ops), number_array(lookups), number_array(offsets), number_array(counts),
           number_array(hits), text_array(errors), text_array(outcomes), number_array(times),
           number_array(ask_ids), number_array(ask_attempts), bool_array(extras))) {
    (row[0].as<bool>() ? stored : existed).emplace(row[1].as<int64_t>(), row[2].as<uint32_t>());
  }
  for (size_t i : superseded) {
    const PgReport& r = batch[i]->request;
    if (existed.count({r.job_id, r.attempt})) {
      decisions[i].result = ReportResult::Duplicate;
      continue;
    }
    const LockedJob& j = jobs.at(r.job_id);
    spdlog::info("outcome_superseded job={} attempt={} current={} state={} agent={}", r.job_id,
                 r.attempt, j.attempt, j.state, r.agent_id);
  }
  std::optional<ViolationCopy> copy;
  SummaryDelta summary;
  for (size_t i : accepted) {
    const PgReport& r = batch[i]->request;
    // Not inserted: its outcome was stored before (an agent-reported INFRA_FAILURE).
    if (!stored.count({r.job_id, r.attempt})) {
      decisions[i].result = ReportResult::Duplicate;
      continue;
    }
    const CellKey& cell = jobs.at(r.job_id).cell;
    const int verdict = static_cast<int>(r.outcome.verdict());
    summary.outcome(cell, verdict, static_cast<int64_t>(r.outcome.violation_count()));
    if (decisions[i].result == ReportResult::Stored) {  // its job is done (store_outcomes)
      summary.job_done(cell, verdict);
      if (replaces[i] >= 0) summary.job_done(cell, replaces[i], -1);
    }
    if (decisions[i].result == ReportResult::KeptSuperseded) {
      const LockedJob& j = jobs.at(r.job_id);
      spdlog::warn(
          "outcome_kept_superseded job={} attempt={} current={} state={} agent={} violations={}",
          r.job_id, r.attempt, j.attempt, j.state, r.agent_id, r.outcome.violation_count());
    }
    spdlog::debug("outcome_stored job={} attempt={} agent={} verdict={} violations={}", r.job_id,
                  r.attempt, r.agent_id, verdict_key(r.outcome.verdict()),
                  r.outcome.violations_size());
    int idx = 0;
    for (const auto& v : r.outcome.violations()) {
      if (!copy) copy.emplace(txn);
      copy->row(r.job_id, r.attempt, idx++, v);
    }
  }
  if (copy) copy->complete();
  summary.apply(txn);  // last: its row locks are held until commit
  return decisions;
}

ReportResult store_build_report(pqxx::work& txn, const std::string& agent_id, int64_t job_id,
                                uint32_t attempt, const v1::Outcome& outcome, TimePoint now,
                                const std::string& key);

// Writes `batch` in one transaction and hands each caller its result. A batch
// failing for a reason other than the database being unavailable is written
// again one report at a time, so that only the report at fault fails. A build
// job's report (rare) is a transaction of its own: it also registers its
// kernel and moves the jobs waiting for it.
void write_reports(PgPool& pool, ReportBatch& batch) {
  if (std::any_of(batch.begin(), batch.end(),
                  [](const auto* item) { return item->request.outcome.has_build(); })) {
    ReportBatch tests;
    for (auto* item : batch) {
      if (!item->request.outcome.has_build()) {
        tests.push_back(item);
        continue;
      }
      const PgReport& r = item->request;
      try {
        item->result = run_transaction(pool, "report_build", [&](pqxx::work& txn) {
          return store_build_report(txn, r.agent_id, r.job_id, r.attempt, r.outcome, r.now, r.key);
        });
      } catch (...) {
        item->error = std::current_exception();
      }
    }
    if (!tests.empty()) write_reports(pool, tests);
    return;
  }
  try {
    auto decisions = run_transaction(pool, "report_outcome",
                                     [&](pqxx::work& txn) { return store_reports(txn, batch); });
    for (size_t i = 0; i < batch.size(); ++i) {
      if (decisions[i].result) {
        batch[i]->result = decisions[i].result;
      } else if (decisions[i].wrong_key) {
        batch[i]->error = std::make_exception_ptr(WrongAgentSecret(decisions[i].error));
      } else {
        batch[i]->error = std::make_exception_ptr(StoreError(decisions[i].error, false));
      }
    }
    if (batch.size() > 1) spdlog::debug("outcomes_batch reports={}", batch.size());
  } catch (const StoreError& e) {
    if (!e.unavailable() && batch.size() > 1) {
      for (auto* item : batch) {
        ReportBatch one{item};
        write_reports(pool, one);
      }
      return;
    }
    for (auto* item : batch) item->error = std::make_exception_ptr(e);
  } catch (...) {
    for (auto* item : batch) item->error = std::current_exception();
  }
}

std::vector<PgStatement> all_statements() {
  std::vector<PgStatement> out(std::begin(kStatements), std::end(kStatements));
  for (auto& st : summary_statements()) out.push_back(std::move(st));
  for (auto& st : agent_statements()) out.push_back(std::move(st));
  for (bool by_campaign : {false, true}) {
    for (bool failed : {false, true}) {
      out.push_back({outcomes_statement(by_campaign, failed), outcomes_query(by_campaign, failed)});
    }
  }
  return out;
}

}  // namespace

PgStore::PgStore(const std::string& url, PgStoreOptions options)
    : pool_(std::make_unique<PgPool>(url, options.pool_size, all_statements())),
      // Generic plans: the batch statements take arrays, and PostgreSQL
      // plans a prepared statement anew for every call while the plan for
      // the actual array length looks cheaper than a generic one; that
      // planning was a fifth of the server's time per batch. (The lease
      // statements keep custom plans: their index choice depends on them.)
      report_pool_(std::make_unique<PgPool>(
          url, options.report_writers, all_statements(),
          std::vector<PgSetting>{{"plan_cache_mode", "force_generic_plan"}})),
      leases_(std::make_unique<PgGroupCommit<PgLease, std::optional<v1::Job>>>(
          options.lease_writers, static_cast<size_t>(std::max(options.max_lease_batch, 1)))),
      renewals_(std::make_unique<PgRenewals>(
          options.renew_writers, static_cast<size_t>(std::max(options.max_renew_batch, 1)))),
      touches_(std::make_unique<PgTouchWriter>(
          1, 4096, 1, [pool = pool_.get()](PgTouchWriter::Batch& batch) { write_touches(*pool, batch); })),
      reports_(std::make_unique<PgBatchWriter<PgReport, ReportResult>>(
          options.report_writers, static_cast<size_t>(std::max(options.max_report_batch, 1)),
          static_cast<size_t>(std::max(options.min_parallel_report_batch, 1)),
          [pool = report_pool_.get()](ReportBatch& batch) { write_reports(*pool, batch); })) {
  if (!options.migrate) return;
  std::optional<PgPool::Handle> handle;
  try {
    handle.emplace(pool_->acquire());
  } catch (...) {
    pg_rethrow_as_store_error("migrate");
  }
  try {
    int applied = apply_migrations(handle->conn());
    spdlog::info("store_ready migrations_applied={} pool_size={}", applied, options.pool_size);
  } catch (const StoreError&) {
    throw;
  } catch (...) {
    handle->discard();
    pg_rethrow_as_store_error("migrate");
  }
}

PgStore::~PgStore() = default;

std::string PgStore::statement_sql(const std::string& name) {
  for (const auto& s : all_statements()) {
    if (s.name == name) return s.sql;
  }
  throw std::out_of_range("no store statement \"" + name + "\"");
}

// ---- agents ----

bool PgStore::reachable() {
  try {
    run_transaction(*pool_, "ping", [](pqxx::work& txn) { return txn.exec("SELECT 1").size(); });
    return true;
  } catch (const StoreError&) {
    return false;
  }
}

std::string PgStore::register_agent(const std::string& name, const v1::Capabilities& caps,
                                    TimePoint now, const std::string& key) {
  return run_transaction(*pool_, "register_agent", [&](pqxx::work& txn) {
    return txn
        .exec_prepared1("register_agent", clean(name), clean(caps.kernel_label()), bytes(caps),
                        us(now), clean(key))[0]
        .as<std::string>();
  });
}

std::optional<std::string> PgStore::agent_key(const std::string& agent_id) {
  return run_autocommit(
      *pool_, "agent_key", [&](pqxx::nontransaction& txn) -> std::optional<std::string> {
        auto r = txn.exec_prepared("agent_key", clean(agent_id));
        if (r.empty()) return std::nullopt;
        return r[0][0].as<std::string>();
      });
}

void PgStore::touch_agent_async(const std::string& agent_id, TimePoint now) {
  touches_->post(PgTouch{clean(agent_id), us(now), false}, [](PgTouchWriter::Item&) {});
}

bool PgStore::touch_agent(const std::string& agent_id, TimePoint now) {
  return run_autocommit(*pool_, "touch_agent", [&](pqxx::nontransaction& txn) {
    return txn.exec_prepared("touch_agent", clean(agent_id), us(now)).affected_rows() > 0;
  });
}

std::vector<v1::AgentInfo> PgStore::list_agents(TimePoint online_since) {
  touches_->submit(PgTouch{"", 0, true});  // after the touches queued so far
  return run_transaction(*pool_, "list_agents", [&](pqxx::work& txn) {
    std::vector<v1::AgentInfo> out;
    for (const auto& r : txn.exec_prepared("list_agents", us(online_since))) {
      v1::AgentInfo a;
      a.set_agent_id(r[0].as<std::string>());
      a.set_name(r[1].as<std::string>());
      *a.mutable_capabilities() = parse<v1::Capabilities>(r[2], "agent capabilities");
      set_timestamp(a.mutable_registered_at(), r[3].as<int64_t>());
      set_timestamp(a.mutable_last_seen(), r[4].as<int64_t>());
      a.set_online(r[5].as<bool>());
      a.set_current_job(r[6].as<int64_t>());
      out.push_back(std::move(a));
    }
    return out;
  });
}

// ---- kernels ----

namespace {

// The whole message goes into `details` (so new fields need no migration);
// the columns hold what queries and people read.
v1::Kernel store_kernel(pqxx::work& txn, const char* statement, const v1::Kernel& k,
                        TimePoint now) {
  v1::Kernel added = k;
  set_timestamp(added.mutable_added_at(), us(now));
  if (added.status().empty()) added.set_status("ready");
  auto r = txn.exec_prepared(statement, clean(k.label()), clean(k.version()), clean(k.sha256()),
                             clean(k.source()), us(now), clean(added.status()), bytes(added));
  if (r.empty()) throw StoreError("kernel '" + k.label() + "' exists", false);
  return added;
}

}  // namespace

v1::Kernel PgStore::add_kernel(const v1::Kernel& k, TimePoint now) {
  return run_transaction(*pool_, "add_kernel",
                         [&](pqxx::work& txn) { return store_kernel(txn, "add_kernel", k, now); });
}

v1::Kernel PgStore::put_kernel(const v1::Kernel& k, TimePoint now) {
  return run_transaction(*pool_, "put_kernel",
                         [&](pqxx::work& txn) { return store_kernel(txn, "put_kernel", k, now); });
}

std::vector<v1::Kernel> PgStore::list_kernels() {
  return run_transaction(*pool_, "list_kernels", [&](pqxx::work& txn) {
    std::vector<v1::Kernel> out;
    for (const auto& r : txn.exec_prepared("list_kernels")) {
      v1::Kernel k;
      if (!r[6].is_null()) k = parse<v1::Kernel>(r[6], "kernel");
      k.set_status(r[5].as<std::string>());
      k.set_label(r[0].as<std::string>());
      k.set_version(r[1].as<std::string>());
      k.set_sha256(r[2].as<std::string>());
      k.set_source(r[3].as<std::string>());
      set_timestamp(k.mutable_added_at(), r[4].as<int64_t>());
      out.push_back(std::move(k));
    }
    return out;
  });
}

// ---- campaigns and jobs ----

int64_t PgStore::create_campaign(const v1::CampaignSpec& spec, const std::vector<NewJob>& jobs,
                                 int64_t schedule_id, TimePoint now) {
  return run_transaction(*pool_, "create_campaign", [&](pqxx::work& txn) {
    return insert_campaign(txn, spec, jobs, schedule_id, now);
  });
}

std::optional<v1::Campaign> PgStore::get_campaign(int64_t id) {
  return run_transaction(
      *pool_, "get_campaign", [&](pqxx::work& txn) -> std::optional<v1::Campaign> {
        auto c = campaigns_with_counts(txn, txn.exec_prepared("get_campaign", id));
        if (c.empty()) return std::nullopt;
        return std::move(c.front());
      });
}

std::vector<v1::Campaign> PgStore::list_campaigns(uint32_t limit) {
  if (limit == 0) limit = kDefaultCampaignLimit;
  return run_transaction(*pool_, "list_campaigns", [&](pqxx::work& txn) {
    return campaigns_with_counts(txn, txn.exec_prepared("recent_campaigns", limit));
  });
}

std::vector<CellSummary> PgStore::campaign_cells(int64_t campaign_id) {
  return run_transaction(*pool_, "campaign_cells",
                         [&](pqxx::work& txn) { return read_cells(txn, campaign_id); });
}

Page<v1::Campaign> PgStore::page_campaigns(const CampaignQuery& q) {
  const uint32_t limit = kCampaignPage.resolve(q.limit);
  const auto after = parse_page_token("campaigns", 1, q.page_token);
  return run_transaction(*pool_, "page_campaigns", [&](pqxx::work& txn) {
    // The filters before the LIMIT; one more row than the page says whether
    // more follow. Running: fewer jobs done than it has, by the summaries.
    pqxx::result rows = txn.exec_params(
        "SELECT id, spec, schedule_id, job_count, lf_us(created_at) FROM campaigns c"
        " WHERE ($2::bigint = 0 OR id < $2::bigint) AND (NOT $3::bool OR schedule_id <> 0)"
        "  AND (NOT $4::bool OR job_count > coalesce((SELECT sum(done) FROM campaign_verdicts v"
        "   WHERE v.campaign_id = c.id), 0))"
        " ORDER BY id DESC LIMIT $1",
        static_cast<int64_t>(limit) + 1, after.empty() ? int64_t{0} : after[0], q.scheduled_only,
        q.running_only);
    Page<v1::Campaign> page;
    page.items = campaigns_with_counts(txn, rows);
    if (page.items.size() > limit) {
      page.items.resize(limit);
      page.next_page_token = make_page_token("campaigns", {page.items.back().id()});
    }
    return page;
  });
}

Page<v1::JobInfo> PgStore::page_jobs(int64_t campaign_id, uint32_t limit,
                                     const std::string& page_token) {
  limit = kJobPage.resolve(limit);
  const auto after = parse_page_token("jobs", 1, page_token);
  return run_transaction(*pool_, "page_jobs", [&](pqxx::work& txn) {
    Page<v1::JobInfo> page;
    for (const auto& r : txn.exec_params(
             "SELECT id, campaign_id, spec, kernel_label, state, attempt, coalesce(agent_id, ''),"
             "  coalesce(verdict, 0), coalesce(reason, ''), build, coalesce(release, '')"
             " FROM jobs WHERE campaign_id = $1 AND id > $2 ORDER BY id LIMIT $3",
             campaign_id, after.empty() ? int64_t{0} : after[0], static_cast<int64_t>(limit) + 1))
      page.items.push_back(job_info_from_row(r));
    if (page.items.size() > limit) {
      page.items.resize(limit);
      page.next_page_token = make_page_token("jobs", {page.items.back().job_id()});
    }
    return page;
  });
}

std::vector<v1::JobInfo> PgStore::list_jobs(int64_t campaign_id) {
  return run_transaction(*pool_, "list_jobs", [&](pqxx::work& txn) {
    std::vector<v1::JobInfo> out;
    for (const auto& r : txn.exec_prepared("list_jobs", campaign_id)) {
      out.push_back(job_info_from_row(r));
    }
    return out;
  });
}

// ---- leases ----

std::optional<v1::Job> PgStore::lease_job(const std::string& agent_id, const v1::Capabilities& caps,
                                          TimePoint now, Duration lease, const std::string& key) {
  if (caps.filesystems().empty()) return std::nullopt;
  // uname is "<release> <version>"; jobs on a rebuilt kernel match the release.
  const std::string uname = clean(caps.uname());
  PgLease request{clean(agent_id), clean(caps.kernel_label()), text_array(caps.filesystems()),
                  us(now + lease), uname.substr(0, uname.find(' ')), clean(key)};
  return leases_->submit(request, [this](LeaseBatch& batch) { write_leases(*pool_, batch); });
}

std::optional<TimePoint> PgStore::renew_lease(const std::string& agent_id, int64_t job_id,
                                              uint32_t attempt, TimePoint now, Duration lease,
                                              const std::string& key) {
  const PgRenew request{clean(agent_id), job_id, attempt, us(now + lease), clean(key)};
  auto renewed =
      renewals_->submit(request, [this](PgRenewals::Batch& batch) { write_renewals(*pool_, batch); });
  if (!renewed) throw_if_leased_with_other_key(agent_id, job_id, attempt, key);
  return renewed;
}

void PgStore::throw_if_leased_with_other_key(const std::string& agent_id, int64_t job_id,
                                             uint32_t attempt, const std::string& key) {
  if (key.empty()) return;
  const bool other = run_autocommit(*pool_, "leased_with_other_key", [&](pqxx::nontransaction& txn) {
    return !txn.exec_prepared("leased_with_other_key", job_id, attempt, clean(agent_id), clean(key))
                .empty();
  });
  if (other)
    throw WrongAgentSecret("job " + std::to_string(job_id) + " attempt " + std::to_string(attempt) +
                           " was leased with another agent_secret");
}

namespace {

// report_outcome for a build job (the outcome has a build result): stores the
// outcome as store_reports does, registers the kernel (ready or
// build-failure), and queues the jobs waiting for it on the built release or
// ends them as BUILD_FAILURE, all in the caller's transaction.
ReportResult store_build_report(pqxx::work& txn, const std::string& agent_id, int64_t job_id,
                                uint32_t attempt, const v1::Outcome& outcome, TimePoint now,
                                const std::string& key) {
  auto row = txn.exec_params(
      "SELECT state, attempt, campaign_id, coalesce(verdict, 0), build, coalesce(agent_id, ''),"
      "  scenario, kernel_label, fs, replace(coalesce(holders[$2::int]::text, ''), '-', '')"
      " FROM jobs WHERE id = $1 FOR UPDATE",
      job_id, attempt);
  if (row.empty()) throw StoreError("report outcome: unknown job " + std::to_string(job_id), false);
  if (row[0][4].is_null())
    throw StoreError("report outcome: job " + std::to_string(job_id) +
                         " is not a kernel build job but the outcome carries a build result",
                     false);
  const std::string state = row[0][0].as<std::string>();
  const auto current = row[0][1].as<uint32_t>();
  const auto campaign_id = row[0][2].as<int64_t>();
  const int verdict = row[0][3].as<int>();
  const auto build = parse<v1::KernelBuild>(row[0][4], "kernel build");
  if (!txn.exec_params("SELECT 1 FROM outcomes WHERE job_id = $1 AND attempt = $2", job_id, attempt)
           .empty())
    return ReportResult::Duplicate;
  if (attempt > current)
    throw StoreError("report outcome: job " + std::to_string(job_id) + " has no attempt " +
                         std::to_string(attempt) + " (latest " + std::to_string(current) + ")",
                     false);
  const std::string holder_key = row[0][9].as<std::string>();
  if (auto why = wrong_key(holder_key, key, job_id, attempt); !why.empty())
    throw WrongAgentSecret("report outcome: " + why);
  if (attempt == current && (holder_key.empty() || key.empty())) {
    const std::string why =
        not_the_holder(state, row[0][5].as<std::string>(), clean(agent_id), job_id, attempt);
    if (!why.empty()) throw StoreError(why, false);
  }
  if (attempt != current || (state == "done" && verdict != kInfraVerdict)) {
    spdlog::info("outcome_superseded job={} attempt={} current={} state={} agent={}", job_id,
                 attempt, current, state, agent_id);
    return ReportResult::Superseded;
  }
  const v1::KernelBuildResult& r = outcome.build();
  const std::string error = r.ok() ? "" : clean(r.failed_stage() + " failed: " + r.error());
  SummaryDelta summary;
  const CellKey cell{campaign_id, row[0][6].as<std::string>(), row[0][7].as<std::string>(),
                     row[0][8].as<std::string>()};
  summary.outcome(cell, static_cast<int>(outcome.verdict()), 0);
  summary.job_done(cell, static_cast<int>(outcome.verdict()));
  if (state == "done") summary.job_done(cell, verdict, -1);  // its INFRA_FAILURE, replaced
  txn.exec_params(
      "INSERT INTO outcomes (job_id, attempt, campaign_id, agent_id, verdict, ops, lookups_checked,"
      " offsets_checked, violation_count, race_window_hits, error, outcome, reported_at)"
      " VALUES ($1, $2, $3, $4, $5, 0, 0, 0, 0, 0, $6, $7, lf_ts($8))",
      job_id, attempt, campaign_id, clean(agent_id), static_cast<int>(outcome.verdict()),
      clean(outcome.error().empty() ? error : outcome.error()), bytes(outcome), us(now));
  txn.exec_params(
      "UPDATE jobs SET state = 'done', verdict = $2, agent_id = $3, lease_deadline = NULL,"
      " reason = nullif($4, ''), finished_at = lf_ts($5) WHERE id = $1",
      job_id, static_cast<int>(outcome.verdict()), clean(agent_id), error, us(now));
  const v1::Kernel k = store_kernel(txn, "put_kernel", kbuild::built_kernel(build, r), now);
  if (r.ok()) {
    auto released = txn.exec_params(
        "UPDATE jobs SET state = 'queued', release = $2, wait_build = NULL"
        " WHERE wait_build = $1 AND state = 'waiting'",
        job_id, clean(r.release()));
    spdlog::info("kernel_built job={} label={} release={} sha256={} cached={} queued={}", job_id,
                 k.label(), r.release(), r.vmlinux_sha256(), r.cached(), released.affected_rows());
  } else {
    auto ended = txn.exec_params(
        "UPDATE jobs SET state = 'done', verdict = $2, reason = $3, finished_at = lf_ts($4),"
        " wait_build = NULL WHERE wait_build = $1 AND state = 'waiting'"
        " RETURNING campaign_id, scenario, kernel_label, fs",
        job_id, static_cast<int>(v1::VERDICT_BUILD_FAILURE),
        clean("kernel " + build.label() + " did not build (build job " + std::to_string(job_id) +
              ", " + error + ")"),
        us(now));
    for (const auto& e : ended)
      summary.job_done(CellKey{e[0].as<int64_t>(), e[1].as<std::string>(), e[2].as<std::string>(),
                               e[3].as<std::string>()},
                       v1::VERDICT_BUILD_FAILURE);
    spdlog::warn("kernel_build_failed job={} label={} stage={} ended={}", job_id, build.label(),
                 r.failed_stage(), ended.affected_rows());
  }
  summary.apply(txn);  // last: its row locks are held until commit
  return ReportResult::Stored;
}

}  // namespace

std::optional<v1::Job> PgStore::lease_build_job(const std::string& agent_id, TimePoint now,
                                                Duration lease, const std::string& key) {
  return run_autocommit(
      *pool_, "lease_build_job", [&](pqxx::nontransaction& txn) -> std::optional<v1::Job> {
        auto r =
            txn.exec_prepared("lease_build_job", clean(agent_id), us(now + lease), clean(key));
        if (r.empty()) return std::nullopt;
        v1::Job job = job_from_row(r[0]);
        *job.mutable_build() = parse<v1::KernelBuild>(r[0][6], "kernel build");
        return job;
      });
}

ReportResult PgStore::report_outcome(const std::string& agent_id, int64_t job_id, uint32_t attempt,
                                     const v1::Outcome& outcome, TimePoint now,
                                     const std::string& key) {
  // A build job's outcome also registers its kernel and moves the jobs
  // waiting for it: a transaction of its own, off the group-commit path.
  if (outcome.has_build()) {
    return run_transaction(*pool_, "report_build", [&](pqxx::work& txn) {
      return store_build_report(txn, agent_id, job_id, attempt, outcome, now, key);
    });
  }
  return reports_->submit(PgReport{agent_id, job_id, attempt, outcome, now, clean(key)});
}

void PgStore::report_outcome_async(const std::string& agent_id, int64_t job_id, uint32_t attempt,
                                   const v1::Outcome& outcome, TimePoint now, ReportDone done,
                                   const std::string& key) {
  // Build reports too: the writers give them a transaction of their own.
  reports_->post(PgReport{agent_id, job_id, attempt, outcome, now, clean(key)},
                 [done = std::move(done)](auto& item) {
                   done(item.result.value_or(ReportResult::Stored), item.error);
                 });
}

size_t PgStore::queued_reports() { return reports_->queued(); }

void PgStore::release_job(const std::string& agent_id, int64_t job_id, uint32_t attempt,
                          const std::string& key) {
  const bool requeued = run_autocommit(*pool_, "release_job", [&](pqxx::nontransaction& txn) {
    auto r = txn.exec_prepared("release_job", job_id, attempt, clean(agent_id), clean(key));
    spdlog::info("job_released job={} attempt={} agent={} requeued={}", job_id, attempt, agent_id,
                 r.affected_rows() > 0);
    return r.affected_rows() > 0;
  });
  if (!requeued) throw_if_leased_with_other_key(agent_id, job_id, attempt, key);
}

int PgStore::expire_leases(TimePoint now) {
  return run_transaction(*pool_, "expire_leases", [&](pqxx::work& txn) {
    auto r = txn.exec_prepared("expire_leases", us(now));
    auto settled = txn.exec_prepared("settle_waiting", us(now));
    SummaryDelta summary;
    auto cell_of = [](const pqxx::row& row, int at) {
      return CellKey{row[at].as<int64_t>(), row[at + 1].as<std::string>(),
                     row[at + 2].as<std::string>(), row[at + 3].as<std::string>()};
    };
    for (const auto& row : settled) {
      spdlog::warn("job_build_failure job={} reason=\"build job ended without a kernel\"",
                   row[0].as<int64_t>());
      summary.job_done(cell_of(row, 1), v1::VERDICT_BUILD_FAILURE);
    }
    for (const auto& row : r)
      if (row[2].as<bool>()) summary.job_done(cell_of(row, 4), kInfraVerdict);
    summary.apply(txn);
    for (const auto& row : r) {
      if (row[2].as<bool>()) {
        spdlog::warn("job_infra_failure job={} attempts={} last_agent={}", row[0].as<int64_t>(),
                     row[1].as<int>(), row[3].as<std::string>());
      } else {
        spdlog::info("lease_expired job={} attempt={} agent={} requeued=true", row[0].as<int64_t>(),
                     row[1].as<int>(), row[3].as<std::string>());
      }
    }
    return static_cast<int>(r.size() + settled.size());
  });
}

std::optional<AgentJob> PgStore::agent_job(const std::string& agent_name, int64_t job_id) {
  return run_transaction(*pool_, "agent_job", [&](pqxx::work& txn) -> std::optional<AgentJob> {
    auto agent = txn.exec_params("SELECT id FROM agents WHERE name = $1", clean(agent_name));
    if (agent.empty()) return std::nullopt;
    AgentJob out;
    out.agent_id = agent[0][0].as<std::string>();
    pqxx::result r =
        job_id == 0 ? txn.exec_params("SELECT id, attempt FROM jobs WHERE agent_id = $1 AND state = 'leased'"
                                      " ORDER BY id LIMIT 1",
                                      out.agent_id)
                    : txn.exec_params("SELECT id, attempt FROM jobs WHERE id = $1 AND attempt > 0 AND"
                                      " ((state = 'leased' AND agent_id = $2) OR state = 'queued')",
                                      job_id, out.agent_id);
    if (!r.empty()) {
      out.job_id = r[0][0].as<int64_t>();
      out.attempt = r[0][1].as<uint32_t>();
    }
    return out;
  });
}

// ---- outcomes ----

std::vector<v1::OutcomeRecord> PgStore::list_outcomes(int64_t campaign_id, bool failed_only,
                                                      uint32_t limit) {
  if (limit == 0) limit = kDefaultOutcomeLimit;
  return run_transaction(*pool_, "list_outcomes", [&](pqxx::work& txn) {
    const char* statement = outcomes_statement(campaign_id != 0, failed_only);
    pqxx::result rows = campaign_id != 0 ? txn.exec_prepared(statement, limit, campaign_id)
                                         : txn.exec_prepared(statement, limit);
    return outcome_records(txn, rows);
  });
}

std::vector<v1::OutcomeRecord> PgStore::find_outcomes(const OutcomeFilter& f) {
  const uint32_t limit = f.limit ? f.limit : kDefaultOutcomeLimit;
  return run_transaction(*pool_, "find_outcomes", [&](pqxx::work& txn) {
    // Not prepared: each filter gets its own plan.
    pqxx::result rows = txn.exec_params(
        "SELECT o.job_id, o.attempt, o.campaign_id, j.spec, j.kernel_label, o.agent_id,"
        "  o.outcome, lf_us(o.reported_at), o.superseded"
        " FROM outcomes o JOIN jobs j ON j.id = o.job_id"
        " WHERE ($2 = 0 OR o.campaign_id = $2) AND ($3 = 0 OR o.job_id = $3)"
        "  AND ($4 = '' OR j.scenario = $4) AND (NOT $5 OR o.verdict <> " +
            std::to_string(kPassVerdict) +
            ")"
            " ORDER BY o.seq DESC LIMIT $1",
        limit, f.campaign_id, f.job_id, clean(f.scenario), f.failed_only);
    return outcome_records(txn, rows);
  });
}

Page<v1::OutcomeRecord> PgStore::page_outcomes(const OutcomeQuery& q) {
  const uint32_t limit =
      (q.with_violations ? kOutcomePageWithViolations : kOutcomePage).resolve(q.limit);
  const auto after = parse_page_token("outcomes", 1, q.page_token);
  return run_transaction(*pool_, "page_outcomes", [&](pqxx::work& txn) {
    // Not prepared: an unnamed statement is planned with its values, so the
    // filters left out fold away and each shape gets its own plan. Every
    // filter is in the WHERE clause, before the LIMIT; one row more than the
    // page says whether more follow.
    pqxx::result rows = txn.exec_params(
        "SELECT o.job_id, o.attempt, o.campaign_id, j.spec, j.kernel_label, o.agent_id,"
        "  o.outcome, lf_us(o.reported_at), o.superseded, o.seq"
        " FROM outcomes o JOIN jobs j ON j.id = o.job_id"
        " WHERE ($2::bigint = 0 OR o.campaign_id = $2::bigint)"
        "  AND ($3::bigint = 0 OR o.job_id = $3::bigint)"
        "  AND ($4::text = '' OR j.scenario = $4::text)"
        "  AND ($5::text = '' OR j.kernel_label = $5::text)"
        "  AND (NOT $6::bool OR o.verdict <> " +
            std::to_string(kPassVerdict) +
            ")"
            "  AND ($7::bigint = 0 OR o.seq < $7::bigint)"
            " ORDER BY o.seq DESC LIMIT $1",
        static_cast<int64_t>(limit) + 1, q.campaign_id, q.job_id, clean(q.scenario),
        clean(q.kernel_label), q.failed_only, after.empty() ? int64_t{0} : after[0]);
    Page<v1::OutcomeRecord> page;
    const bool more = rows.size() > limit;
    int64_t last_seq = 0;
    if (more) last_seq = rows[static_cast<pqxx::result::size_type>(limit) - 1][9].as<int64_t>();
    page.items = outcome_records(txn, rows, q.with_violations);
    if (more) {
      page.items.resize(limit);
      page.next_page_token = make_page_token("outcomes", {last_seq});
    }
    return page;
  });
}

std::optional<v1::JobInfo> PgStore::get_job(int64_t id) {
  return run_transaction(*pool_, "get_job", [&](pqxx::work& txn) -> std::optional<v1::JobInfo> {
    auto r = txn.exec_params(
        "SELECT id, campaign_id, spec, kernel_label, state, attempt, coalesce(agent_id, ''),"
        "  coalesce(verdict, 0), coalesce(reason, ''), build, coalesce(release, '')"
        " FROM jobs WHERE id = $1",
        id);
    if (r.empty()) return std::nullopt;
    return job_info_from_row(r[0]);
  });
}

// ---- schedules ----

v1::Schedule PgStore::add_schedule(const std::string& name, const std::string& cron,
                                   const v1::CampaignSpec& spec, TimePoint next_run) {
  return run_transaction(*pool_, "add_schedule", [&](pqxx::work& txn) {
    v1::Schedule s;
    s.set_id(
        txn.exec_prepared1("add_schedule", clean(name), clean(cron), bytes(spec), us(next_run))[0]
            .as<int64_t>());
    s.set_name(name);
    s.set_cron(cron);
    *s.mutable_campaign() = spec;
    s.set_enabled(true);
    set_timestamp(s.mutable_next_run(), us(next_run));
    return s;
  });
}

std::vector<v1::Schedule> PgStore::list_schedules() {
  return run_transaction(*pool_, "list_schedules", [&](pqxx::work& txn) {
    std::vector<v1::Schedule> out;
    for (const auto& r : txn.exec_prepared("list_schedules")) out.push_back(schedule_from_row(r));
    return out;
  });
}

std::optional<v1::Schedule> PgStore::set_schedule_enabled(int64_t id, bool enabled,
                                                          TimePoint next_run) {
  return run_transaction(
      *pool_, "set_schedule_enabled", [&](pqxx::work& txn) -> std::optional<v1::Schedule> {
        auto r = txn.exec_prepared("set_schedule_enabled", id, enabled, us(next_run));
        if (r.empty()) return std::nullopt;
        return schedule_from_row(r[0]);
      });
}

bool PgStore::remove_schedule(int64_t id) {
  return run_transaction(*pool_, "remove_schedule", [&](pqxx::work& txn) {
    return txn.exec_prepared("remove_schedule", id).affected_rows() > 0;
  });
}

std::optional<int64_t> PgStore::fire_schedule(int64_t id, TimePoint due, TimePoint next,
                                              const std::vector<NewJob>& jobs, TimePoint now) {
  return run_transaction(*pool_, "fire_schedule", [&](pqxx::work& txn) -> std::optional<int64_t> {
    auto r = txn.exec_prepared("fire_schedule", id, us(due), us(next));
    if (r.empty()) return std::nullopt;
    auto spec = parse<v1::CampaignSpec>(r[0][0], "campaign spec");
    int64_t campaign = insert_campaign(txn, spec, jobs, id, now);
    spdlog::info("schedule_fired id={} campaign={} due_us={}", id, campaign, us(due));
    return campaign;
  });
}

}  // namespace leapfrog::coord
