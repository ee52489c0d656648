#pragma once
// Kernel rows and kernel build jobs in PgStore: a campaign's build jobs, the
// jobs that wait for them, a builder's lease, and a build's report, which
// registers its kernel and queues (or ends) the jobs waiting for it.

#include <cstdint>
#include <optional>
#include <pqxx/pqxx>
#include <string>
#include <vector>

#include "coordinator/clock.h"
#include "coordinator/store/pg_summaries.h"
#include "coordinator/store/store.h"
#include "leapfrog/v1/control.pb.h"

namespace leapfrog::coord {

// Writes kernel `k` (added now, status "ready" unless set) with `statement`
// ("add_kernel" or "put_kernel"). Throws StoreError if add_kernel finds its
// label taken.
v1::Kernel store_kernel(pqxx::work& txn, const char* statement, const v1::Kernel& k, TimePoint now);

// Inserts the build jobs among `jobs` of campaign `campaign_id`; the
// campaign's queued jobs on each build's label then wait for it.
void insert_build_jobs(pqxx::work& txn, int64_t campaign_id, const std::vector<NewJob>& jobs,
                       int max_attempts);

// Ends the jobs still waiting for a build job that ended without registering
// a kernel as BUILD_FAILURE, counting them into `summary`. Returns how many.
int settle_waiting(pqxx::work& txn, TimePoint now, SummaryDelta& summary);

// The oldest queued kernel build job, leased to `agent_id` until
// `deadline_us` with `key`; nullopt if none.
std::optional<v1::Job> lease_build(pqxx::nontransaction& txn, const std::string& agent_id,
                                   int64_t deadline_us, const std::string& key);

// report_outcome for a build job (the outcome has a build result): judges it
// as every report (judge_report), stores the outcome, registers the kernel
// (ready or build-failure), and queues the jobs waiting for it on the built
// release or ends them as BUILD_FAILURE, all in the caller's transaction.
// Throws WrongAgentSecret or StoreError for a refused report.
ReportResult store_build_report(pqxx::work& txn, const std::string& agent_id, int64_t job_id,
                                uint32_t attempt, const v1::Outcome& outcome, TimePoint now,
                                const std::string& key);

}  // namespace leapfrog::coord
