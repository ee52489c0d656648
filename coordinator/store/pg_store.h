#pragma once
// Store over PostgreSQL (libpqxx 6.4). Thread-safe: calls share a small pool
// of connections, each with the store's prepared statements. Every call is one
// transaction; the single-statement ones (lease, touch, renew, release) are
// one autocommit statement, a single round trip. Concurrent lease_job calls
// share one statement (group lease), and concurrent report_outcome calls one
// transaction (group commit): each caller still gets its own result, and one
// caller's unknown job or bad data fails only that caller.
//
// Errors: a lost or refused connection (server down, restarting, shutting
// down, out of connections) throws StoreError with unavailable() true; the
// broken connection is dropped, and the next call connects anew, so the store
// recovers by itself once the server is back. A call that finds its pooled
// connection dead (the server restarted since it was last used) retries once
// on a fresh one before giving up. If the connection breaks during COMMIT the
// outcome of the call is unknown: it throws unavailable, and retrying is safe
// for every call (outcomes are idempotent; a lease the caller never saw
// expires). Any other database error throws StoreError with unavailable()
// false.

#include <memory>
#include <string>

#include "coordinator/store/pg_stats.h"
#include "coordinator/store/store.h"

namespace leapfrog::coord {

struct PgStoreOptions {
  // Most connections open at once; callers beyond wait for one.
  int pool_size = 8;
  // Apply pending schema migrations in the constructor.
  bool migrate = true;
  // Group lease: lease_job calls that arrive while a lease statement runs
  // are served together by one statement, by at most this many writers at
  // once, each on a connection of its own (beyond pool_size).
  int lease_writers = 2;
  // Most callers served by one statement.
  int max_lease_batch = 64;
  // Heartbeats (renew_lease) likewise: concurrent ones share a statement.
  int renew_writers = 2;
  int max_renew_batch = 256;
  // Group commit of report_outcome: the reports that arrive while a batch is
  // being written are written together, in one transaction, by at most this
  // many writer threads at once, each on a connection of their own (beyond
  // pool_size).
  int report_writers = 3;
  // Most reports in one batch.
  int max_report_batch = 256;
  // While a batch is being written, another writer starts only once this
  // many reports wait: a batch of one or two costs the database nearly as
  // much as a batch of ten, and the database shares the machine's CPU.
  // (Measured with coordinator_bench: 4 beat 1 and 6 at 8 calls in flight.)
  int min_parallel_report_batch = 4;
};

class PgPool;
template <class Request, class Result>
class PgGroupCommit;
template <class Request, class Result>
class PgBatchWriter;
struct PgLease;   // one lease_job call (pg_lease.h)
struct PgReport;  // one report_outcome call (pg_reports.h)
struct PgTouch;   // one touch_agent_async call (pg_agents.h)
struct PgRenew;   // one renew_lease call (pg_agents.h)

class PgStore : public Store {
 public:
  // Connects (libpq URL or key=value string) and migrates. Throws StoreError.
  explicit PgStore(const std::string& url, PgStoreOptions options = {});
  ~PgStore() override;

  bool reachable() override;
  std::string register_agent(const std::string& name, const v1::Capabilities& caps,
                             TimePoint now, const std::string& key = kTrustedCaller) override;
  std::optional<std::string> agent_key(const std::string& agent_id) override;
  bool touch_agent(const std::string& agent_id, TimePoint now) override;
  // Queued for a writer thread that touches many agents per statement.
  void touch_agent_async(const std::string& agent_id, TimePoint now) override;
  // Waits for the touches queued before it to be written.
  std::vector<v1::AgentInfo> list_agents(TimePoint online_since) override;
  // As list_agents, waits for the touches queued before it.
  std::vector<v1::AgentInfo> agents_named(TimePoint online_since,
                                          const std::vector<std::string>& names) override;
  Page<v1::AgentInfo> page_agents(TimePoint online_since, uint32_t limit,
                                  const std::string& page_token) override;

  v1::Kernel add_kernel(const v1::Kernel& k, TimePoint now) override;
  std::vector<v1::Kernel> list_kernels() override;
  Page<v1::Kernel> page_kernels(uint32_t limit, const std::string& page_token) override;
  v1::Kernel put_kernel(const v1::Kernel& k, TimePoint now) override;

  int64_t create_campaign(const v1::CampaignSpec& spec, const std::vector<NewJob>& jobs,
                          int64_t schedule_id, TimePoint now) override;
  std::optional<v1::Campaign> get_campaign(int64_t id) override;
  std::vector<v1::Campaign> list_campaigns(uint32_t limit) override;
  std::vector<v1::JobInfo> list_jobs(int64_t campaign_id) override;
  std::vector<CellSummary> campaign_cells(int64_t campaign_id) override;
  Page<v1::Campaign> page_campaigns(const CampaignQuery& query) override;
  Page<v1::JobInfo> page_jobs(int64_t campaign_id, uint32_t limit,
                              const std::string& page_token) override;

  std::optional<v1::Job> lease_job(const std::string& agent_id, const v1::Capabilities& caps,
                                   TimePoint now, Duration lease,
                                   const std::string& key = kTrustedCaller) override;
  // Queues the lease for the group lease's writers; `done` runs on one of them.
  void lease_job_async(const std::string& agent_id, const v1::Capabilities& caps, TimePoint now,
                       Duration lease, LeaseDone done,
                       const std::string& key = kTrustedCaller) override;
  std::optional<TimePoint> renew_lease(const std::string& agent_id, int64_t job_id,
                                       uint32_t attempt, TimePoint now, Duration lease,
                                       const std::string& key = kTrustedCaller,
                                       const v1::JobProgress* progress = nullptr) override;
  std::optional<v1::Job> lease_build_job(const std::string& agent_id, TimePoint now,
                                         Duration lease,
                                         const std::string& key = kTrustedCaller) override;
  ReportResult report_outcome(const std::string& agent_id, int64_t job_id, uint32_t attempt,
                              const v1::Outcome& outcome, TimePoint now,
                              const std::string& key = kTrustedCaller) override;
  // Queued for the report writers, which call `done` once the batch is written.
  void report_outcome_async(const std::string& agent_id, int64_t job_id, uint32_t attempt,
                            const v1::Outcome& outcome, TimePoint now, ReportDone done,
                            const std::string& key = kTrustedCaller) override;
  bool release_job(const std::string& agent_id, int64_t job_id, uint32_t attempt,
                   const std::string& key = kTrustedCaller) override;
  int expire_leases(TimePoint now) override;
  std::optional<AgentJob> agent_job(const std::string& agent_name, int64_t job_id) override;

  // VM launchers (pg_launchers.cc).
  std::string register_launcher(const std::string& name, const std::string& kernel_label,
                                const std::string& key, TimePoint now) override;
  std::optional<LauncherRecord> find_launcher(const std::string& id) override;
  ClaimResult claim_agent_name(const std::string& launcher_id, const std::string& agent_name,
                               TimePoint now) override;
  std::optional<AgentClaim> agent_claim(const std::string& agent_name) override;
  AgentJob lease_queued_job(const std::string& holder, const std::string& kernel_label,
                            TimePoint now, Duration lease) override;

  std::vector<v1::OutcomeRecord> find_outcomes(const OutcomeFilter& filter) override;
  Page<v1::OutcomeRecord> page_outcomes(const OutcomeQuery& query) override;
  std::optional<v1::JobInfo> get_job(int64_t id) override;
  std::map<int64_t, v1::JobInfo> get_jobs(const std::vector<int64_t>& ids) override;

  std::vector<std::string> scale_kernels() override;
  std::vector<ScaleRun> scale_runs(const ScaleRunQuery& query) override;

  v1::Schedule add_schedule(const std::string& name, const std::string& cron,
                            const v1::CampaignSpec& spec, TimePoint next_run) override;
  std::vector<v1::Schedule> list_schedules() override;
  Page<v1::Schedule> page_schedules(uint32_t limit, const std::string& page_token) override;
  std::optional<v1::Schedule> set_schedule_enabled(int64_t id, bool enabled,
                                                   TimePoint next_run) override;
  bool remove_schedule(int64_t id) override;
  std::optional<int64_t> fire_schedule(int64_t id, TimePoint due, TimePoint next,
                                       const std::vector<NewJob>& jobs, TimePoint now) override;

  RetentionPass apply_retention(TimePoint cutoff, uint32_t batch) override;

  // The SQL of one of the store's prepared statements ("lease_job"), for
  // benchmarks that run it directly. Throws std::out_of_range for other names.
  static std::string statement_sql(const std::string& name);
  // report_outcome calls waiting for a writer (tests use it to form a batch).
  size_t queued_reports();
  // Counts for monitoring (GET /metrics; pg_stats.cc): one transaction that
  // reads the summaries, the pending jobs' partial index and small tables.
  // Throws StoreError.
  PgStoreStats stats(TimePoint online_since);
  // The connection pools' use now (no database call).
  std::vector<PgPoolUse> pool_use();

 private:
  // Throws WrongAgentSecret if (job, attempt) is leased by `agent_id` with a
  // key other than `key` (why a renew or release found nothing).
  void throw_if_leased_with_other_key(const std::string& agent_id, int64_t job_id,
                                      uint32_t attempt, const std::string& key);

  std::unique_ptr<PgPool> pool_;
  // The report writers' connections (see PgStore::PgStore).
  std::unique_ptr<PgPool> report_pool_;
  // The group lease writers' connections (see PgStore::PgStore).
  std::unique_ptr<PgPool> lease_pool_;
  // lease_job calls waiting to be served together, by writer threads of
  // their own (lease_writers of them).
  std::unique_ptr<PgBatchWriter<PgLease, std::optional<v1::Job>>> leases_;
  // renew_lease calls waiting to be served together.
  std::unique_ptr<PgGroupCommit<PgRenew, std::optional<TimePoint>>> renewals_;
  // touch_agent_async calls, written by a thread of their own (one, so that
  // a barrier queued after touches is written after them).
  std::unique_ptr<PgBatchWriter<PgTouch, bool>> touches_;
  // report_outcome calls waiting to be written together, by writer threads
  // of their own. Last: its writers use the pools and finish before them.
  std::unique_ptr<PgBatchWriter<PgReport, ReportResult>> reports_;
};

}  // namespace leapfrog::coord
