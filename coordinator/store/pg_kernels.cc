// Kernel rows and kernel build jobs (pg_kernels.h).

#include "coordinator/store/pg_kernels.h"

#include <spdlog/spdlog.h>

#include "common/kernel/built_kernel.h"
#include "common/ktap/words.h"
#include "coordinator/store/pg_rows.h"
#include "coordinator/store/pg_util.h"
#include "coordinator/store/report_acceptance.h"

namespace leapfrog::coord {

// The whole message goes into `details` (so new fields need no migration);
// the columns hold what queries and people read.
v1::Kernel store_kernel(pqxx::work& txn, const char* statement, const v1::Kernel& k,
                        TimePoint now) {
  v1::Kernel added = k;
  set_timestamp(added.mutable_added_at(), us(now));
  if (added.status() == v1::KERNEL_STATUS_UNSPECIFIED) added.set_status(v1::KERNEL_STATUS_READY);
  auto r = txn.exec_prepared(statement, clean(k.label()), clean(k.version()), clean(k.sha256()),
                             clean(k.source()), us(now), ktap::kernel_status_word(added.status()),
                             bytes(added));
  if (r.empty()) throw StoreError("kernel '" + k.label() + "' exists", false);
  return added;
}


void insert_build_jobs(pqxx::work& txn, int64_t campaign_id, const std::vector<NewJob>& jobs,
                       int max_attempts) {
  for (const auto& job : jobs) {
    if (!job.build) continue;
    int64_t build_id =
        txn.exec_params1(
               "INSERT INTO jobs (campaign_id, scenario, fs, kernel_label, spec, max_attempts, build)"
               " VALUES ($1, $2, $2, $3, $4, $5, $6) RETURNING id",
               campaign_id, clean(job.spec.scenario()), clean(job.kernel_label), bytes(job.spec),
               max_attempts, bytes(*job.build))[0]
            .as<int64_t>();
    auto waiting = txn.exec_params(
        "UPDATE jobs SET state = 'waiting', wait_build = $2"
        " WHERE campaign_id = $1 AND kernel_label = $3 AND build IS NULL AND state = 'queued'",
        campaign_id, build_id, clean(job.kernel_label));
    spdlog::info("build_job_created campaign={} job={} label={} waiting={}", campaign_id, build_id,
                 job.kernel_label, waiting.affected_rows());
  }
}

int settle_waiting(pqxx::work& txn, TimePoint now, SummaryDelta& summary) {
  auto settled = txn.exec_prepared("settle_waiting", us(now));
  for (const auto& row : settled) {
    spdlog::warn("job_build_failure job={} reason=\"build job ended without a kernel\"",
                 row[0].as<int64_t>());
    summary.job_done(CellKey{row[1].as<int64_t>(), row[2].as<std::string>(),
                             row[3].as<std::string>(), row[4].as<std::string>()},
                     v1::VERDICT_BUILD_FAILURE);
  }
  return static_cast<int>(settled.size());
}

std::optional<v1::Job> lease_build(pqxx::nontransaction& txn, const std::string& agent_id,
                                   int64_t deadline_us, const std::string& key) {
  auto r = txn.exec_prepared("lease_build_job", clean(agent_id), deadline_us, clean(key));
  if (r.empty()) return std::nullopt;
  v1::Job job = job_from_row(r[0]);
  *job.mutable_build() = parse<v1::KernelBuild>(r[0][6], "kernel build");
  return job;
}

ReportResult store_build_report(pqxx::work& txn, const std::string& agent_id, int64_t job_id,
                                uint32_t attempt, const v1::Outcome& outcome, TimePoint now,
                                const std::string& key) {
  auto row = txn.exec_params(
      "SELECT state, attempt, campaign_id, coalesce(verdict, 0), build, coalesce(agent_id, ''),"
      "  scenario, kernel_label, fs, replace(coalesce(holders[$2::int]::text, ''), '-', '')"
      " FROM jobs WHERE id = $1 FOR UPDATE",
      job_id, attempt);
  std::optional<ReportedJob> seen;
  if (!row.empty()) {
    if (row[0][4].is_null())
      throw StoreError("report outcome: job " + std::to_string(job_id) +
                           " is not a kernel build job but the outcome carries a build result",
                       false);
    seen = ReportedJob{
        row[0][0].as<std::string>(), row[0][1].as<uint32_t>(), row[0][3].as<int>(),
        row[0][5].as<std::string>(), row[0][9].as<std::string>(),
        !txn.exec_params("SELECT 1 FROM outcomes WHERE job_id = $1 AND attempt = $2", job_id,
                         attempt)
             .empty()};
  }
  // A late build result is dropped, never kept as an extra outcome: it
  // carries no violations, and the current attempt registers the kernel.
  const ReportDecision decision =
      judge_report(seen, ReportClaim{clean(agent_id), job_id, attempt, key, false});
  if (!decision.result) {
    if (decision.wrong_key) throw WrongAgentSecret(decision.error);
    throw StoreError(decision.error, false);
  }
  const std::string state = seen->state;
  const int verdict = seen->verdict;
  if (*decision.result == ReportResult::Duplicate) return ReportResult::Duplicate;
  if (*decision.result != ReportResult::Stored) {
    spdlog::info("outcome_superseded job={} attempt={} current={} state={} agent={}", job_id,
                 attempt, seen->attempt, state, agent_id);
    return ReportResult::Superseded;
  }
  const auto campaign_id = row[0][2].as<int64_t>();
  const auto build = parse<v1::KernelBuild>(row[0][4], "kernel build");
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
      clean(outcome.error().empty() ? error : outcome.error()),
      pqxx::binarystring(pack_outcome(outcome.SerializeAsString())), us(now));
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


}  // namespace leapfrog::coord
