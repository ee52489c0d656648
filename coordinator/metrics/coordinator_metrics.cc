#include "coordinator/metrics/coordinator_metrics.h"

#include <spdlog/spdlog.h>

#include "coordinator/metrics/exposition.h"
#include "coordinator/store/pg_store.h"
#include "leapfrog/v1/common.pb.h"
#include "leapfrog/v1/triage.pb.h"

namespace leapfrog::metrics {

namespace {

using prometheus::MetricType;

const char* const kResults[] = {"stored", "duplicate", "superseded", "kept-superseded", "error"};

std::string result_label(std::optional<coord::ReportResult> r) {
  if (!r) return "error";
  switch (*r) {
    case coord::ReportResult::Stored:
      return "stored";
    case coord::ReportResult::Duplicate:
      return "duplicate";
    case coord::ReportResult::Superseded:
      return "superseded";
    case coord::ReportResult::KeptSuperseded:
      return "kept-superseded";
  }
  return "error";
}

// Every verdict but UNSPECIFIED, so each series exists (at 0) from the start.
std::vector<int> all_verdicts() {
  std::vector<int> out;
  for (int v = v1::Verdict_MIN; v <= v1::Verdict_MAX; ++v)
    if (v1::Verdict_IsValid(v) && v != v1::VERDICT_UNSPECIFIED) out.push_back(v);
  return out;
}

}  // namespace

CoordinatorMetrics::CoordinatorMetrics(coord::PgStore* store, const coord::Clock& clock,
                                       CoordinatorMetricsOptions opts)
    : store_(store), clock_(clock), opts_(opts) {
  auto& leases = prometheus::BuildCounter()
                     .Name("leapfrog_leases_total")
                     .Help("Jobs leased to agents by this coordinator, by kind (test, build)")
                     .Register(registry_);
  leases_test_ = &leases.Add({{"kind", "test"}});
  leases_build_ = &leases.Add({{"kind", "build"}});
  auto& outcomes = prometheus::BuildCounter()
                       .Name("leapfrog_outcomes_total")
                       .Help(
                           "Outcomes stored through this coordinator, by verdict (agents' "
                           "reports and launchers' crash, hang and boot-failure ends)")
                       .Register(registry_);
  for (int v : all_verdicts()) outcomes_[v] = &outcomes.Add({{"verdict", verdict_label(v)}});
  auto& reports = prometheus::BuildCounter()
                      .Name("leapfrog_reports_total")
                      .Help("ReportOutcome calls answered, by what the store did with them")
                      .Register(registry_);
  for (const char* r : kResults) reports_[r] = &reports.Add({{"result", r}});
  report_seconds_ = &prometheus::BuildHistogram()
                         .Name("leapfrog_report_store_seconds")
                         .Help(
                             "Ingest latency: from a ReportOutcome's arrival to its batch "
                             "committed (or failed) in the database")
                         .Register(registry_)
                         .Add({}, latency_buckets());
  auto& regs = prometheus::BuildCounter()
                   .Name("leapfrog_agent_registrations_total")
                   .Help(
                       "Agent registrations; vm=\"true\": agents in launchers' VMs, one per "
                       "VM that came up")
                   .Register(registry_);
  registrations_host_ = &regs.Add({{"vm", "false"}});
  registrations_vm_ = &regs.Add({{"vm", "true"}});
  auto& failures = prometheus::BuildCounter()
                       .Name("leapfrog_vm_failures_total")
                       .Help(
                           "VMs that launchers reported ending a job, by verdict "
                           "(kernel-crash, hang, boot-failure)")
                       .Register(registry_);
  for (int v : {v1::VERDICT_KERNEL_CRASH, v1::VERDICT_HANG, v1::VERDICT_BOOT_FAILURE})
    vm_failures_[v] = &failures.Add({{"verdict", verdict_label(v)}});
}

void CoordinatorMetrics::leased(bool build) {
  (build ? leases_build_ : leases_test_)->Increment();
}

void CoordinatorMetrics::reported(int verdict, std::optional<coord::ReportResult> result,
                                  Steady::time_point since) {
  report_seconds_->Observe(std::chrono::duration<double>(Steady::now() - since).count());
  reports_.at(result_label(result))->Increment();
  const bool stored =
      result == coord::ReportResult::Stored || result == coord::ReportResult::KeptSuperseded;
  if (!stored) return;
  if (auto it = outcomes_.find(verdict); it != outcomes_.end()) it->second->Increment();
  // Launchers end VM jobs (boot failures too) through FailAgentJob: vm_failed().
}

void CoordinatorMetrics::registered(bool vm) {
  (vm ? registrations_vm_ : registrations_host_)->Increment();
}

void CoordinatorMetrics::vm_failed(int verdict) {
  if (auto it = vm_failures_.find(verdict); it != vm_failures_.end()) it->second->Increment();
  if (auto it = outcomes_.find(verdict); it != outcomes_.end()) it->second->Increment();
}

CoordinatorMetrics::Snapshot CoordinatorMetrics::snapshot() {
  std::lock_guard<std::mutex> lock(mu_);
  const auto now = Steady::now();
  auto max_age =
      snapshot_.ok ? opts_.cache_for
                   : std::min<std::chrono::milliseconds>(opts_.cache_for, std::chrono::seconds(1));
  // The health check found the database away: what was read before is stale.
  if (!serving()) max_age = std::chrono::milliseconds(0);
  if (store_ && (!snapshot_.read || now - snapshot_.read_at >= max_age)) {
    snapshot_.read = true;
    snapshot_.read_at = now;
    try {
      snapshot_.stats = store_->stats(clock_.now() - opts_.offline_after);
      snapshot_.ok = true;
      snapshot_.error.clear();
    } catch (const coord::StoreError& e) {
      if (snapshot_.ok) spdlog::warn("metrics.store_error error=\"{}\"", e.what());
      snapshot_.ok = false;
      snapshot_.error = e.what();
    }
  }
  return snapshot_;
}

std::string CoordinatorMetrics::not_ready() {
  if (!serving()) return "the database does not answer";
  if (!store_) return "";
  const Snapshot s = snapshot();
  if (!s.ok) return "the database does not answer: " + s.error;
  if (s.stats.schema_version < s.stats.schema_wanted)
    return "the database schema is at version " + std::to_string(s.stats.schema_version) +
           ", this coordinator needs version " + std::to_string(s.stats.schema_wanted) +
           ": migrations are not applied";
  return "";
}

std::string CoordinatorMetrics::render() {
  std::vector<prometheus::MetricFamily> out = registry_.Collect();
  auto serving = family("leapfrog_serving",
                        "1 while the gRPC health service says SERVING (the database answered at "
                        "the last check), else 0",
                        MetricType::Gauge);
  add_sample(serving, serving_.load() ? 1 : 0);
  out.push_back(std::move(serving));
  if (!store_) return serialize(out);

  auto pool_size = family("leapfrog_db_pool_max_connections",
                          "Most PostgreSQL connections a pool opens", MetricType::Gauge);
  auto pool_conns =
      family("leapfrog_db_pool_connections",
             "Open PostgreSQL connections of a pool, by state (in-use, idle)", MetricType::Gauge);
  auto pool_waiting =
      family("leapfrog_db_pool_waiting_calls", "Store calls waiting now for a connection of a pool",
             MetricType::Gauge);
  auto pool_waits =
      family("leapfrog_db_pool_waits_total",
             "Store calls that had to wait for a connection of a pool", MetricType::Counter);
  for (const auto& p : store_->pool_use()) {
    add_sample(pool_size, p.size, {{"pool", p.pool}});
    add_sample(pool_conns, p.open - p.idle, {{"pool", p.pool}, {"state", "in-use"}});
    add_sample(pool_conns, p.idle, {{"pool", p.pool}, {"state", "idle"}});
    add_sample(pool_waiting, p.waiting, {{"pool", p.pool}});
    add_sample(pool_waits, static_cast<double>(p.waits), {{"pool", p.pool}});
  }
  for (auto* f : {&pool_size, &pool_conns, &pool_waiting, &pool_waits})
    out.push_back(std::move(*f));

  const Snapshot s = snapshot();
  auto up = family("leapfrog_database_up",
                   "1 if the last read of the database counts below succeeded (they are left "
                   "out while it fails)",
                   MetricType::Gauge);
  add_sample(up, s.ok ? 1 : 0);
  out.push_back(std::move(up));
  if (!s.ok) return serialize(out);
  auto age = family("leapfrog_database_counts_age_seconds",
                    "Age of the database counts below (read at most every few seconds)",
                    MetricType::Gauge);
  add_sample(age, std::chrono::duration<double>(Steady::now() - s.read_at).count());
  auto jobs = family("leapfrog_jobs", "Jobs of every campaign, by state", MetricType::Gauge);
  for (const auto& [state, n] : s.stats.jobs_by_state)
    add_sample(jobs, static_cast<double>(n), {{"state", state}});
  auto stored = family("leapfrog_stored_outcomes",
                       "Outcomes in the database (every replica, extras included), by verdict",
                       MetricType::Gauge);
  for (int v : all_verdicts()) {
    const auto it = s.stats.outcomes_by_verdict.find(v);
    add_sample(stored,
               it == s.stats.outcomes_by_verdict.end() ? 0 : static_cast<double>(it->second),
               {{"verdict", verdict_label(v)}});
  }
  auto issues = family("leapfrog_issues", "Triage issues, by status", MetricType::Gauge);
  for (int st = v1::IssueStatus_MIN; st <= v1::IssueStatus_MAX; ++st) {
    if (!v1::IssueStatus_IsValid(st) || st == v1::ISSUE_STATUS_UNSPECIFIED) continue;
    const auto it = s.stats.issues_by_status.find(st);
    add_sample(issues, it == s.stats.issues_by_status.end() ? 0 : static_cast<double>(it->second),
               {{"status", issue_status_label(st)}});
  }
  auto online = family("leapfrog_agents_online", "Agents seen within the last three heartbeats",
                       MetricType::Gauge);
  add_sample(online, static_cast<double>(s.stats.agents_online));
  auto agents = family("leapfrog_agents_registered", "Agents ever registered", MetricType::Gauge);
  add_sample(agents, static_cast<double>(s.stats.agents));
  auto schema =
      family("leapfrog_schema_version", "The newest schema migration applied", MetricType::Gauge);
  add_sample(schema, s.stats.schema_version);
  for (auto* f : {&age, &jobs, &stored, &issues, &online, &agents, &schema})
    out.push_back(std::move(*f));
  return serialize(out);
}

}  // namespace leapfrog::metrics
