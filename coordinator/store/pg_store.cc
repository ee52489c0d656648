// PgStore: each Store call is one transaction on a pooled connection
// (run_transaction in pg_pool.h holds the error policy). Times
// cross the wire as microseconds since the epoch (lf_ts/lf_us in SQL), proto
// messages as bytea, and lists as array literals (libpqxx 6 binds no arrays).

#include "coordinator/store/pg_store.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <iterator>
#include <map>
#include <pqxx/pqxx>
#include <tuple>
#include <utility>

#include "coordinator/store/migrations.h"
#include "coordinator/store/pg_pool.h"

namespace leapfrog::coord {

namespace {

constexpr int kDefaultMaxAttempts = 3;
constexpr uint32_t kDefaultCampaignLimit = 50;
constexpr uint32_t kDefaultOutcomeLimit = 200;
constexpr int kPassVerdict = v1::VERDICT_PASS;
constexpr int kInfraVerdict = v1::VERDICT_INFRA_FAILURE;
static_assert(kInfraVerdict == 4, "expire_leases writes INFRA_FAILURE as 4");

// Every statement, prepared on each pooled connection.
const PgStatement kStatements[] = {
    {"register_agent",
     "INSERT INTO agents (id, name, kernel_label, capabilities, registered_at, last_seen)"
     " VALUES (gen_random_uuid()::text, $1, $2, $3, lf_ts($4), lf_ts($4))"
     " ON CONFLICT (name) DO UPDATE SET kernel_label = EXCLUDED.kernel_label,"
     "  capabilities = EXCLUDED.capabilities, last_seen = EXCLUDED.last_seen"
     " RETURNING id"},
    {"touch_agent", "UPDATE agents SET last_seen = greatest(last_seen, lf_ts($2)) WHERE id = $1"},
    {"list_agents",
     "SELECT a.id, a.name, a.capabilities, lf_us(a.registered_at), lf_us(a.last_seen),"
     "  a.last_seen >= lf_ts($1), coalesce(l.job_id, 0)"
     " FROM agents a LEFT JOIN (SELECT agent_id, min(id) AS job_id FROM jobs"
     "  WHERE state = 'leased' GROUP BY agent_id) l ON l.agent_id = a.id"
     " ORDER BY a.name"},
    {"add_kernel",
     "INSERT INTO kernels (label, version, sha256, source, added_at)"
     " VALUES ($1, $2, $3, $4, lf_ts($5)) ON CONFLICT (label) DO NOTHING RETURNING label"},
    {"list_kernels",
     "SELECT label, version, sha256, source, lf_us(added_at) FROM kernels"
     " ORDER BY added_at, label"},
    {"insert_campaign",
     "INSERT INTO campaigns (name, spec, schedule_id, job_count, created_at)"
     " VALUES ($1, $2, $3, $4, lf_ts($5)) RETURNING id"},
    {"get_campaign",
     "SELECT id, spec, schedule_id, job_count, lf_us(created_at) FROM campaigns WHERE id = $1"},
    {"recent_campaigns",
     "SELECT id, spec, schedule_id, job_count, lf_us(created_at) FROM campaigns"
     " ORDER BY id DESC LIMIT $1"},
    {"campaign_job_counts",
     "SELECT campaign_id, state, coalesce(verdict, 0), count(*) FROM jobs"
     " WHERE campaign_id = ANY($1::bigint[]) GROUP BY 1, 2, 3"},
    {"campaign_violations",
     "SELECT campaign_id, sum(violation_count)::bigint FROM outcomes"
     " WHERE campaign_id = ANY($1::bigint[]) GROUP BY 1"},
    {"list_jobs",
     "SELECT id, campaign_id, spec, kernel_label, state, attempt, coalesce(agent_id, ''),"
     "  coalesce(verdict, 0), coalesce(reason, '')"
     " FROM jobs WHERE campaign_id = $1 ORDER BY id"},
    // The oldest matching queued job; SKIP LOCKED lets concurrent leases (from
    // any replica) pass each other instead of queueing on one row.
    {"lease_job",
     "UPDATE jobs SET state = 'leased', attempt = attempt + 1, agent_id = $1,"
     "  lease_deadline = lf_ts($2)"
     " WHERE id = (SELECT id FROM jobs WHERE state = 'queued' AND kernel_label = $3"
     "  AND fs = ANY($4::text[]) ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED)"
     " RETURNING id, attempt, campaign_id, spec, kernel_label, lf_us(lease_deadline)"},
    {"renew_lease",
     "UPDATE jobs SET lease_deadline = lf_ts($4)"
     " WHERE id = $1 AND attempt = $2 AND agent_id = $3 AND state = 'leased'"
     " RETURNING lf_us(lease_deadline)"},
    {"lock_job",
     "SELECT state, attempt, campaign_id, coalesce(verdict, 0) FROM jobs WHERE id = $1"
     " FOR UPDATE"},
    {"outcome_exists", "SELECT 1 FROM outcomes WHERE job_id = $1 AND attempt = $2"},
    {"insert_outcome",
     "INSERT INTO outcomes (job_id, attempt, campaign_id, agent_id, verdict, ops,"
     "  lookups_checked, offsets_checked, violation_count, race_window_hits, error, outcome,"
     "  reported_at)"
     " VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, lf_ts($13))"},
    {"finish_job",
     "UPDATE jobs SET state = 'done', verdict = $2, agent_id = $3, lease_deadline = NULL,"
     "  reason = NULL, finished_at = lf_ts($4) WHERE id = $1"},
    {"release_job",
     "UPDATE jobs SET state = 'queued', agent_id = NULL, lease_deadline = NULL,"
     "  released = released + 1"
     " WHERE id = $1 AND attempt = $2 AND agent_id = $3 AND state = 'leased'"},
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
     " RETURNING j.id, j.attempt, e.final, coalesce(e.last_agent, '')"},
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
      "  o.outcome, lf_us(o.reported_at)"
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

// PostgreSQL text cannot hold NUL bytes; agents' strings should not either.
std::string clean(const std::string& s) {
  if (s.find('\0') == std::string::npos) return s;
  std::string out = s;
  out.erase(std::remove(out.begin(), out.end(), '\0'), out.end());
  return out;
}

pqxx::binarystring bytes(const google::protobuf::MessageLite& m) {
  return pqxx::binarystring(m.SerializeAsString());
}

// bytea in COPY text format (the stream escapes the backslash once more).
std::string bytea_text(const google::protobuf::MessageLite& m) {
  static const char* digits = "0123456789abcdef";
  std::string raw = m.SerializeAsString();
  std::string out = "\\x";
  out.reserve(2 + raw.size() * 2);
  for (unsigned char c : raw) {
    out += digits[c >> 4];
    out += digits[c & 15];
  }
  return out;
}

template <class M>
M parse(const pqxx::field& f, const char* what) {
  pqxx::binarystring b(f);
  M m;
  if (!m.ParseFromArray(b.data(), static_cast<int>(b.size()))) {
    throw StoreError(std::string("a stored ") + what + " does not parse", false);
  }
  return m;
}

// '{"a","b"}': a text[] literal, each element quoted.
std::string text_array(const google::protobuf::RepeatedPtrField<std::string>& items) {
  std::string out = "{";
  for (const auto& item : items) {
    if (out.size() > 1) out += ',';
    out += '"';
    for (char c : clean(item)) {
      if (c == '"' || c == '\\') out += '\\';
      out += c;
    }
    out += '"';
  }
  return out + "}";
}

template <class T>
std::string number_array(const std::vector<T>& items) {
  std::string out = "{";
  for (const auto& v : items) {
    if (out.size() > 1) out += ',';
    out += std::to_string(v);
  }
  return out + "}";
}

// "pass", "violation", "infra-failure", ...
std::string verdict_key(int verdict) {
  std::string name = v1::Verdict_IsValid(verdict)
                         ? v1::Verdict_Name(static_cast<v1::Verdict>(verdict))
                         : "VERDICT_" + std::to_string(verdict);
  name = name.substr(std::string("VERDICT_").size());
  for (char& c : name) c = c == '_' ? '-' : static_cast<char>(std::tolower(c));
  return name;
}

v1::JobState job_state(const std::string& s) {
  if (s == "queued") return v1::JOB_STATE_QUEUED;
  if (s == "leased") return v1::JOB_STATE_LEASED;
  if (s == "done") return v1::JOB_STATE_DONE;
  return v1::JOB_STATE_UNSPECIFIED;
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
  if (!jobs.empty()) {
    pqxx::stream_to copy(txn, "jobs",
                         std::vector<std::string>{"campaign_id", "scenario", "fs", "kernel_label",
                                                  "spec", "max_attempts"});
    for (const auto& job : jobs) {
      copy << std::make_tuple(id, clean(job.spec.scenario()), clean(job.spec.fs()),
                              clean(job.kernel_label), bytea_text(job.spec), max_attempts);
    }
    copy.complete();
  }
  spdlog::info("campaign_created id={} name=\"{}\" jobs={} schedule={}", id, spec.name(),
               jobs.size(), schedule_id);
  return id;
}

// Campaign rows (id, spec, schedule_id, job_count, created_at) with their counters.
std::vector<v1::Campaign> campaigns_with_counts(pqxx::work& txn, const pqxx::result& rows) {
  std::vector<v1::Campaign> out;
  std::map<int64_t, size_t> index;
  std::vector<int64_t> ids;
  for (const auto& r : rows) {
    v1::Campaign c;
    c.set_id(r[0].as<int64_t>());
    *c.mutable_spec() = parse<v1::CampaignSpec>(r[1], "campaign spec");
    c.set_schedule_id(r[2].as<int64_t>());
    c.set_jobs(r[3].as<uint32_t>());
    set_timestamp(c.mutable_created_at(), r[4].as<int64_t>());
    for (const char* state : {"queued", "leased", "done"}) (*c.mutable_by_state())[state] = 0;
    index[c.id()] = out.size();
    ids.push_back(c.id());
    out.push_back(std::move(c));
  }
  if (ids.empty()) return out;
  std::string id_array = number_array(ids);
  for (const auto& r : txn.exec_prepared("campaign_job_counts", id_array)) {
    v1::Campaign& c = out[index.at(r[0].as<int64_t>())];
    std::string state = r[1].as<std::string>();
    auto n = r[3].as<uint32_t>();
    (*c.mutable_by_state())[state] += n;
    if (state == "done") (*c.mutable_by_verdict())[verdict_key(r[2].as<int>())] += n;
  }
  for (const auto& r : txn.exec_prepared("campaign_violations", id_array)) {
    if (!r[1].is_null()) out[index.at(r[0].as<int64_t>())].set_violations(r[1].as<uint64_t>());
  }
  for (auto& c : out) {
    c.set_state(c.by_state().at("done") == c.jobs() ? v1::CAMPAIGN_STATE_DONE
                                                    : v1::CAMPAIGN_STATE_RUNNING);
  }
  return out;
}

std::vector<PgStatement> all_statements() {
  std::vector<PgStatement> out(std::begin(kStatements), std::end(kStatements));
  for (bool by_campaign : {false, true}) {
    for (bool failed : {false, true}) {
      out.push_back({outcomes_statement(by_campaign, failed), outcomes_query(by_campaign, failed)});
    }
  }
  return out;
}

}  // namespace

PgStore::PgStore(const std::string& url, PgStoreOptions options)
    : pool_(std::make_unique<PgPool>(url, options.pool_size, all_statements())) {
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

// ---- agents ----

std::string PgStore::register_agent(const std::string& name, const v1::Capabilities& caps,
                                    TimePoint now) {
  return run_transaction(*pool_, "register_agent", [&](pqxx::work& txn) {
    return txn
        .exec_prepared1("register_agent", clean(name), clean(caps.kernel_label()), bytes(caps),
                        us(now))[0]
        .as<std::string>();
  });
}

bool PgStore::touch_agent(const std::string& agent_id, TimePoint now) {
  return run_transaction(*pool_, "touch_agent", [&](pqxx::work& txn) {
    return txn.exec_prepared("touch_agent", clean(agent_id), us(now)).affected_rows() > 0;
  });
}

std::vector<v1::AgentInfo> PgStore::list_agents(TimePoint online_since) {
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

v1::Kernel PgStore::add_kernel(const v1::Kernel& k, TimePoint now) {
  return run_transaction(*pool_, "add_kernel", [&](pqxx::work& txn) {
    auto r = txn.exec_prepared("add_kernel", clean(k.label()), clean(k.version()),
                               clean(k.sha256()), clean(k.source()), us(now));
    if (r.empty()) throw StoreError("kernel '" + k.label() + "' exists", false);
    v1::Kernel added = k;
    set_timestamp(added.mutable_added_at(), us(now));
    return added;
  });
}

std::vector<v1::Kernel> PgStore::list_kernels() {
  return run_transaction(*pool_, "list_kernels", [&](pqxx::work& txn) {
    std::vector<v1::Kernel> out;
    for (const auto& r : txn.exec_prepared("list_kernels")) {
      v1::Kernel k;
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

std::vector<v1::JobInfo> PgStore::list_jobs(int64_t campaign_id) {
  return run_transaction(*pool_, "list_jobs", [&](pqxx::work& txn) {
    std::vector<v1::JobInfo> out;
    for (const auto& r : txn.exec_prepared("list_jobs", campaign_id)) {
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
      out.push_back(std::move(j));
    }
    return out;
  });
}

// ---- leases ----

std::optional<v1::Job> PgStore::lease_job(const std::string& agent_id, const v1::Capabilities& caps,
                                          TimePoint now, Duration lease) {
  if (caps.filesystems().empty()) return std::nullopt;
  std::string fs = text_array(caps.filesystems());
  return run_transaction(*pool_, "lease_job", [&](pqxx::work& txn) -> std::optional<v1::Job> {
    auto r = txn.exec_prepared("lease_job", clean(agent_id), us(now + lease),
                               clean(caps.kernel_label()), fs);
    if (r.empty()) return std::nullopt;
    v1::Job job;
    job.set_job_id(r[0][0].as<int64_t>());
    job.set_attempt(r[0][1].as<uint32_t>());
    job.set_campaign_id(r[0][2].as<int64_t>());
    *job.mutable_spec() = parse<v1::ScenarioSpec>(r[0][3], "scenario spec");
    job.set_kernel_label(r[0][4].as<std::string>());
    set_timestamp(job.mutable_lease_deadline(), r[0][5].as<int64_t>());
    return job;
  });
}

std::optional<TimePoint> PgStore::renew_lease(const std::string& agent_id, int64_t job_id,
                                              uint32_t attempt, TimePoint now, Duration lease) {
  return run_transaction(*pool_, "renew_lease", [&](pqxx::work& txn) -> std::optional<TimePoint> {
    auto r = txn.exec_prepared("renew_lease", job_id, attempt, clean(agent_id), us(now + lease));
    if (r.empty()) return std::nullopt;
    return TimePoint(Duration(r[0][0].as<int64_t>()));
  });
}

ReportResult PgStore::report_outcome(const std::string& agent_id, int64_t job_id, uint32_t attempt,
                                     const v1::Outcome& outcome, TimePoint now) {
  return run_transaction(*pool_, "report_outcome", [&](pqxx::work& txn) {
    // The row lock orders concurrent reports (and leases) of this job.
    auto job = txn.exec_prepared("lock_job", job_id);
    if (job.empty())
      throw StoreError("report outcome: unknown job " + std::to_string(job_id), false);
    std::string state = job[0][0].as<std::string>();
    auto current = job[0][1].as<uint32_t>();
    auto campaign_id = job[0][2].as<int64_t>();
    int verdict = job[0][3].as<int>();
    if (!txn.exec_prepared("outcome_exists", job_id, attempt).empty()) {
      return ReportResult::Duplicate;
    }
    if (attempt > current) {
      throw StoreError("report outcome: job " + std::to_string(job_id) + " has no attempt " +
                           std::to_string(attempt) + " (latest " + std::to_string(current) + ")",
                       false);
    }
    // The current attempt's report is taken while the job waits for its next
    // lease, and also after the lease expired for the last time: a real
    // outcome then replaces INFRA_FAILURE (nothing the agent measured is lost).
    bool accept = attempt == current && (state != "done" || (verdict == kInfraVerdict));
    if (!accept) {
      spdlog::info("outcome_superseded job={} attempt={} current={} state={} agent={}", job_id,
                   attempt, current, state, agent_id);
      return ReportResult::Superseded;
    }
    v1::Outcome stored = outcome;
    stored.clear_violations();
    txn.exec_prepared("insert_outcome", job_id, attempt, campaign_id, clean(agent_id),
                      static_cast<int>(outcome.verdict()), static_cast<int64_t>(outcome.ops()),
                      static_cast<int64_t>(outcome.lookups_checked()),
                      static_cast<int64_t>(outcome.offsets_checked()),
                      static_cast<int64_t>(outcome.violation_count()),
                      static_cast<int64_t>(outcome.race_window_hits()), clean(outcome.error()),
                      bytes(stored), us(now));
    if (!outcome.violations().empty()) {
      pqxx::stream_to copy(
          txn, "violations",
          std::vector<std::string>{"job_id", "attempt", "idx", "kind", "actor", "op", "path",
                                   "step", "component", "object", "observed", "expected",
                                   "invoke_ns", "complete_ns", "detail"});
      int idx = 0;
      for (const auto& v : outcome.violations()) {
        copy << std::make_tuple(
            job_id, attempt, idx++, clean(v.kind()), static_cast<int64_t>(v.actor()), clean(v.op()),
            clean(v.path()), v.step(), clean(v.component()), clean(v.object()), clean(v.observed()),
            clean(v.expected()), v.invoke_ns(), v.complete_ns(), clean(v.detail_json()));
      }
      copy.complete();
    }
    txn.exec_prepared("finish_job", job_id, static_cast<int>(outcome.verdict()), clean(agent_id),
                      us(now));
    spdlog::debug("outcome_stored job={} attempt={} agent={} verdict={} violations={}", job_id,
                  attempt, agent_id, verdict_key(outcome.verdict()), outcome.violations_size());
    return ReportResult::Stored;
  });
}

void PgStore::release_job(const std::string& agent_id, int64_t job_id, uint32_t attempt) {
  run_transaction(*pool_, "release_job", [&](pqxx::work& txn) {
    auto r = txn.exec_prepared("release_job", job_id, attempt, clean(agent_id));
    spdlog::info("job_released job={} attempt={} agent={} requeued={}", job_id, attempt, agent_id,
                 r.affected_rows() > 0);
  });
}

int PgStore::expire_leases(TimePoint now) {
  return run_transaction(*pool_, "expire_leases", [&](pqxx::work& txn) {
    auto r = txn.exec_prepared("expire_leases", us(now));
    for (const auto& row : r) {
      if (row[2].as<bool>()) {
        spdlog::warn("job_infra_failure job={} attempts={} last_agent={}", row[0].as<int64_t>(),
                     row[1].as<int>(), row[3].as<std::string>());
      } else {
        spdlog::info("lease_expired job={} attempt={} agent={} requeued=true", row[0].as<int64_t>(),
                     row[1].as<int>(), row[3].as<std::string>());
      }
    }
    return static_cast<int>(r.size());
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
      index[{o.job_id(), o.attempt()}] = out.size();
      job_ids.push_back(o.job_id());
      attempts.push_back(o.attempt());
      out.push_back(std::move(o));
    }
    if (out.empty()) return out;
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
