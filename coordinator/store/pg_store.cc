// PgStore: each Store call is one transaction on a pooled connection, or one
// autocommit statement where a single statement does the whole call (the
// agent's hot path: lease, touch, renew, release); run_in in pg_pool.h holds
// the error policy. The work is in files of their own: the statements
// (pg_statements), codecs (pg_util), row mappers (pg_rows), the group lease
// (pg_lease), report batching and COPY (pg_reports, judged by
// report_acceptance), kernels and build jobs (pg_kernels), the agents'
// traffic (pg_agents) and the summaries (pg_summaries).

#include "coordinator/store/pg_store.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <limits>
#include <optional>
#include <pqxx/pqxx>
#include <tuple>
#include <utility>

#include "common/bounds.h"
#include "coordinator/store/migrations.h"
#include "coordinator/store/pg_agents.h"
#include "coordinator/store/pg_kernels.h"
#include "coordinator/store/pg_lease.h"
#include "coordinator/store/pg_lease_keys.h"
#include "coordinator/store/pg_pool.h"
#include "coordinator/store/pg_reports.h"
#include "coordinator/store/pg_rows.h"
#include "coordinator/store/pg_scale.h"
#include "coordinator/store/pg_statements.h"
#include "coordinator/store/pg_summaries.h"
#include "coordinator/store/pg_util.h"

namespace leapfrog::coord {

namespace {

constexpr int kDefaultMaxAttempts = 3;
constexpr uint32_t kDefaultCampaignLimit = 50;
constexpr uint32_t kDefaultOutcomeLimit = 200;
constexpr int kPassVerdict = v1::VERDICT_PASS;

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
  insert_build_jobs(txn, id, jobs, max_attempts);
  // The campaign's cells, counted once; their verdict counts follow the jobs.
  txn.exec_params(
      "INSERT INTO cells SELECT campaign_id, scenario, kernel_label, fs, count(*) FROM jobs"
      " WHERE campaign_id = $1 GROUP BY 1, 2, 3, 4",
      id);
  spdlog::info("campaign_created id={} name=\"{}\" jobs={} schedule={}", id, spec.name(),
               jobs.size(), schedule_id);
  return id;
}

}  // namespace

PgStore::PgStore(const std::string& url, PgStoreOptions options)
    : pool_(std::make_unique<PgPool>(url, options.pool_size, store_statements())),
      // Generic plans: the batch statements take arrays, and PostgreSQL
      // plans a prepared statement anew for every call while the plan for
      // the actual array length looks cheaper than a generic one; that
      // planning was a fifth of the server's time per batch.
      report_pool_(std::make_unique<PgPool>(
          url, options.report_writers, store_statements(),
          std::vector<PgSetting>{{"plan_cache_mode", "force_generic_plan"}})),
      // The group lease's writers, generic plans too: lease_jobs was planned
      // anew for every batch (60-440 us of PostgreSQL CPU on the lease's
      // path, measured with pg_stat_statements). Their generic plans still
      // take the oldest queued jobs through jobs_queued (pg_lease_plan_test).
      lease_pool_(std::make_unique<PgPool>(
          url, std::max(options.lease_writers, 1), store_statements(),
          std::vector<PgSetting>{{"plan_cache_mode", "force_generic_plan"}})),
      leases_(std::make_unique<PgLeases>(
          options.lease_writers, static_cast<size_t>(std::max(options.max_lease_batch, 1)), 1,
          [pool = lease_pool_.get()](LeaseBatch& batch) { write_leases(*pool, batch); })),
      renewals_(std::make_unique<PgRenewals>(
          options.renew_writers, static_cast<size_t>(std::max(options.max_renew_batch, 1)))),
      touches_(std::make_unique<PgTouchWriter>(
          1, 4096, 1,
          [pool = pool_.get()](PgTouchWriter::Batch& batch) { write_touches(*pool, batch); })),
      reports_(std::make_unique<PgReports>(
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
  return store_statement_sql(name);
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
    for (const auto& r : txn.exec_prepared("list_agents", us(online_since)))
      out.push_back(agent_from_row(r));
    return out;
  });
}

std::vector<v1::AgentInfo> PgStore::agents_named(TimePoint online_since,
                                                 const std::vector<std::string>& names) {
  touches_->submit(PgTouch{"", 0, true});  // after the touches queued so far
  return run_transaction(*pool_, "agents_named", [&](pqxx::work& txn) {
    std::vector<v1::AgentInfo> out;
    for (const auto& r : txn.exec_prepared("agents_named", us(online_since), text_array(names)))
      out.push_back(agent_from_row(r));
    return out;
  });
}

Page<v1::AgentInfo> PgStore::page_agents(TimePoint online_since, uint32_t limit,
                                         const std::string& page_token) {
  limit = kAgentPage.resolve(limit);
  const auto after = parse_text_page_token("agents", 0, page_token);
  touches_->submit(PgTouch{"", 0, true});  // after the touches queued so far
  return run_transaction(*pool_, "page_agents", [&](pqxx::work& txn) {
    // One row more than the page says whether more follow; so does an agent
    // past the page's bytes.
    std::vector<v1::AgentInfo> rows;
    for (const auto& r :
         txn.exec_prepared("page_agents", us(online_since), after ? after->text : std::string(),
                           !after, static_cast<int64_t>(limit) + 1))
      rows.push_back(agent_from_row(r));
    return cut_page(std::move(rows), limit, kMaxPageBytes, [](const v1::AgentInfo& last, size_t) {
      return make_page_token("agents", {}, last.name());
    });
  });
}

// ---- kernels ----

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
    for (const auto& r : txn.exec_prepared("list_kernels")) out.push_back(kernel_from_row(r));
    return out;
  });
}

Page<v1::Kernel> PgStore::page_kernels(uint32_t limit, const std::string& page_token) {
  limit = kKernelPage.resolve(limit);
  const auto after = parse_text_page_token("kernels", 1, page_token);
  return run_transaction(*pool_, "page_kernels", [&](pqxx::work& txn) {
    // One row more than the page says whether more follow; so does a kernel
    // past the page's bytes (a long series with its build log tail is
    // near a MiB).
    std::vector<v1::Kernel> rows;
    for (const auto& r : txn.exec_prepared("page_kernels", after ? after->numbers[0] : int64_t{0},
                                           after ? after->text : std::string(), !after,
                                           static_cast<int64_t>(limit) + 1))
      rows.push_back(kernel_from_row(r));
    return cut_page(std::move(rows), limit, kMaxPageBytes, [](const v1::Kernel& last, size_t) {
      return make_page_token("kernels",
                             {last.added_at().seconds() * 1000000 + last.added_at().nanos() / 1000},
                             last.label());
    });
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
    return cut_page(campaigns_with_counts(txn, rows), limit, kMaxPageBytes,
                    [](const v1::Campaign& c, size_t) { return make_page_token("campaigns", {c.id()}); });
  });
}

Page<v1::JobInfo> PgStore::page_jobs(int64_t campaign_id, uint32_t limit,
                                     const std::string& page_token) {
  limit = kJobPage.resolve(limit);
  const auto after = parse_page_token("jobs", 1, page_token);
  return run_transaction(*pool_, "page_jobs", [&](pqxx::work& txn) {
    std::vector<v1::JobInfo> rows;
    for (const auto& r :
         txn.exec_prepared("page_jobs", campaign_id, after.empty() ? int64_t{0} : after[0],
                           static_cast<int64_t>(limit) + 1))
      rows.push_back(job_info_from_row(r));
    return cut_page(std::move(rows), limit, kMaxPageBytes,
                    [](const v1::JobInfo& j, size_t) { return make_page_token("jobs", {j.job_id()}); });
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

namespace {

// One lease_job call as the group lease queues it.
PgLease lease_request(const std::string& agent_id, const v1::Capabilities& caps, TimePoint now,
                      Duration lease, const std::string& key) {
  // uname is "<release> <version>"; jobs on a rebuilt kernel match the release.
  const std::string uname = clean(caps.uname());
  PgLease request;
  request.agent_id = clean(agent_id);
  request.kernel_label = clean(caps.kernel_label());
  request.filesystems = text_array(caps.filesystems());
  request.deadline_us = us(now + lease);
  request.release = uname.substr(0, uname.find(' '));
  request.key = clean(key);
  return request;
}

}  // namespace

std::optional<v1::Job> PgStore::lease_job(const std::string& agent_id, const v1::Capabilities& caps,
                                          TimePoint now, Duration lease, const std::string& key) {
  if (caps.filesystems().empty()) return std::nullopt;
  return leases_->submit(lease_request(agent_id, caps, now, lease, key));
}

void PgStore::lease_job_async(const std::string& agent_id, const v1::Capabilities& caps,
                              TimePoint now, Duration lease, LeaseDone done,
                              const std::string& key) {
  if (caps.filesystems().empty()) return done(std::nullopt, nullptr);
  leases_->post(lease_request(agent_id, caps, now, lease, key),
                [done = std::move(done)](PgLeases::Item& item) {
                  done(std::move(item.result).value_or(std::nullopt), item.error);
                });
}

std::optional<TimePoint> PgStore::renew_lease(const std::string& agent_id, int64_t job_id,
                                              uint32_t attempt, TimePoint now, Duration lease,
                                              const std::string& key,
                                              const v1::JobProgress* progress) {
  PgRenew request{clean(agent_id), job_id, attempt, us(now + lease), clean(key)};
  if (progress) {
    // Counts past what a bigint holds are no count a run reaches: clamp.
    auto count = [](uint64_t v) {
      return static_cast<int64_t>(std::min<uint64_t>(v, std::numeric_limits<int64_t>::max()));
    };
    request.operations = count(progress->operations());
    request.lookups_judged = count(progress->lookups_judged());
    request.violations = count(progress->violations());
    request.progress_us = us(now);
  }
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
  if (other) throw WrongAgentSecret(other_key_message(job_id, attempt));
}

std::optional<v1::Job> PgStore::lease_build_job(const std::string& agent_id, TimePoint now,
                                                Duration lease, const std::string& key) {
  return run_autocommit(*pool_, "lease_build_job", [&](pqxx::nontransaction& txn) {
    return lease_build(txn, agent_id, us(now + lease), key);
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

bool PgStore::release_job(const std::string& agent_id, int64_t job_id, uint32_t attempt,
                          const std::string& key) {
  const bool requeued = run_autocommit(*pool_, "release_job", [&](pqxx::nontransaction& txn) {
    auto r = txn.exec_prepared("release_job", job_id, attempt, clean(agent_id), clean(key));
    spdlog::info("job_released job={} attempt={} agent={} requeued={}", job_id, attempt, agent_id,
                 r.affected_rows() > 0);
    return r.affected_rows() > 0;
  });
  if (!requeued) throw_if_leased_with_other_key(agent_id, job_id, attempt, key);
  return requeued;
}

int PgStore::expire_leases(TimePoint now) {
  return run_transaction(*pool_, "expire_leases", [&](pqxx::work& txn) {
    auto r = txn.exec_prepared("expire_leases", us(now));
    SummaryDelta summary;
    const int settled = settle_waiting(txn, now, summary);
    for (const auto& row : r) {
      if (!row[2].as<bool>()) continue;
      summary.job_done(CellKey{row[4].as<int64_t>(), row[5].as<std::string>(),
                               row[6].as<std::string>(), row[7].as<std::string>()},
                       v1::VERDICT_INFRA_FAILURE);
    }
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
    return static_cast<int>(r.size()) + settled;
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

namespace {

// The outcomes that `q`'s filters select (its limit, page token and
// with_violations aside), newest first: at most `limit` rows of
// kOutcomeColumns and then o.seq, all below seq `before` unless it is 0.
//
// Not prepared: an unnamed statement is planned with its values, so the
// filters left out fold away and each shape gets its own plan. Every filter
// is in the WHERE clause, before the LIMIT.
//
// The walk is one of the (column, seq) index of the leading filter: the
// campaign, else the kernel (with the scenario too for failures, the
// outcomes_failed_cell index), else the scenario. The leading filter is
// written as a range and leads the ORDER BY, so the planner cannot take it
// for a constant and walk all outcomes in seq order, filtering: it assumes a
// value's rows are spread over the table, and for a kernel retired months
// ago that walk reads every newer outcome first (docs/bench.md, "At 10⁷
// outcomes"). A range of one value keeps the order seq DESC.
pqxx::result select_outcomes(pqxx::work& txn, const OutcomeQuery& q, int64_t limit,
                             int64_t before) {
  const std::string scenario = clean(q.scenario), kernel = clean(q.kernel_label);
  std::string lead, order = "o.seq DESC";
  auto range = [&](const std::string& column, const std::string& param) {
    lead += " AND o." + column + " >= " + param + " AND o." + column + " <= " + param;
    order = "o." + column + " DESC, " + order;
  };
  bool by_campaign = false, by_kernel = false, by_scenario = false;
  if (q.job_id == 0) {
    if (q.campaign_id != 0) {
      by_campaign = true;
    } else if (!kernel.empty()) {
      by_kernel = true;
      by_scenario = q.failed_only && !scenario.empty();
    } else if (!scenario.empty()) {
      by_scenario = true;
    }
  }
  // Innermost first: order ends (..., scenario, seq) under the kernel.
  if (by_scenario) range("scenario", "$4::text");
  if (by_kernel) range("kernel_label", "$5::text");
  if (by_campaign) range("campaign_id", "$2::bigint");
  return txn.exec_params(
      "SELECT " + std::string(kOutcomeColumns) +
          ", o.seq FROM outcomes o JOIN jobs j ON j.id = o.job_id WHERE true" +
          (by_campaign ? "" : " AND ($2::bigint = 0 OR o.campaign_id = $2::bigint)") +
          "  AND ($3::bigint = 0 OR o.job_id = $3::bigint)" +
          (by_scenario ? "" : "  AND ($4::text = '' OR o.scenario = $4::text)") +
          (by_kernel ? "" : "  AND ($5::text = '' OR o.kernel_label = $5::text)") +
          "  AND (NOT $6::bool OR o.verdict <> " + std::to_string(kPassVerdict) +
          ")"
          "  AND ($7::bigint = 0 OR o.seq < $7::bigint)" +
          lead + " ORDER BY " + order + " LIMIT $1",
      limit, q.campaign_id, q.job_id, scenario, kernel, q.failed_only, before);
}

}  // namespace

std::vector<v1::OutcomeRecord> PgStore::find_outcomes(const OutcomeFilter& f) {
  const uint32_t limit = f.limit ? f.limit : kDefaultOutcomeLimit;
  return run_transaction(*pool_, "find_outcomes", [&](pqxx::work& txn) {
    OutcomeQuery q;
    q.campaign_id = f.campaign_id;
    q.job_id = f.job_id;
    q.scenario = f.scenario;
    q.failed_only = f.failed_only;
    return outcome_records(txn, select_outcomes(txn, q, limit, 0));
  });
}

Page<v1::OutcomeRecord> PgStore::page_outcomes(const OutcomeQuery& q) {
  const uint32_t limit =
      (q.with_violations ? kOutcomePageWithViolations : kOutcomePage).resolve(q.limit);
  const size_t max_bytes = q.max_bytes ? q.max_bytes : kMaxPageBytes;
  const auto after = parse_page_token("outcomes", 1, q.page_token);
  return run_transaction(*pool_, "page_outcomes", [&](pqxx::work& txn) {
    // One row more than the page says whether more follow.
    pqxx::result rows = select_outcomes(txn, q, static_cast<int64_t>(limit) + 1,
                                        after.empty() ? int64_t{0} : after[0]);
    // The page ends at `limit`, or before the outcome that would take it
    // past its bytes; either way the token is the last kept row's seq.
    return cut_page(outcome_records(txn, rows, q.with_violations), limit, max_bytes,
                    [&](const v1::OutcomeRecord&, size_t last) {
                      return make_page_token(
                          "outcomes", {rows[static_cast<pqxx::result::size_type>(last)][9].as<int64_t>()});
                    });
  });
}

std::optional<v1::JobInfo> PgStore::get_job(int64_t id) {
  return run_transaction(*pool_, "get_job", [&](pqxx::work& txn) -> std::optional<v1::JobInfo> {
    auto r =
        txn.exec_params("SELECT " + std::string(kJobInfoColumns) + " FROM jobs WHERE id = $1", id);
    if (r.empty()) return std::nullopt;
    return job_info_from_row(r[0]);
  });
}

std::map<int64_t, v1::JobInfo> PgStore::get_jobs(const std::vector<int64_t>& ids) {
  std::map<int64_t, v1::JobInfo> out;
  if (ids.empty()) return out;
  return run_transaction(*pool_, "get_jobs", [&](pqxx::work& txn) {
    out.clear();
    for (const auto& row : txn.exec_params(
             "SELECT " + std::string(kJobInfoColumns) + " FROM jobs WHERE id = ANY($1::bigint[])",
             number_array(ids))) {
      v1::JobInfo j = job_info_from_row(row);
      out.emplace(j.job_id(), std::move(j));
    }
    return out;
  });
}

// ---- lookup-scale runs (pg_scale.h) ----

std::vector<std::string> PgStore::scale_kernels() {
  return run_transaction(*pool_, "scale_kernels",
                         [&](pqxx::work& txn) { return read_scale_kernels(txn); });
}

std::vector<ScaleRun> PgStore::scale_runs(const ScaleRunQuery& query) {
  return run_transaction(*pool_, "scale_runs",
                         [&](pqxx::work& txn) { return read_scale_runs(txn, query); });
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

Page<v1::Schedule> PgStore::page_schedules(uint32_t limit, const std::string& page_token) {
  limit = kSchedulePage.resolve(limit);
  const auto after = parse_page_token("schedules", 1, page_token);
  return run_transaction(*pool_, "page_schedules", [&](pqxx::work& txn) {
    std::vector<v1::Schedule> rows;
    for (const auto& r : txn.exec_prepared("page_schedules", after.empty() ? int64_t{0} : after[0],
                                           static_cast<int64_t>(limit) + 1))
      rows.push_back(schedule_from_row(r));
    return cut_page(std::move(rows), limit, kMaxPageBytes,
                    [](const v1::Schedule& s, size_t) { return make_page_token("schedules", {s.id()}); });
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
