#pragma once
// A Store in front of the coordinator bench's PgStore (coordinator_bench.cc).

#include <atomic>
#include <chrono>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "coordinator/store/store.h"

namespace leapfrog::coord {

// Forwards every call to `inner`. With `touch_every_lease` set, lease_job
// touches the agent first, as the agent service did before it touched agents
// at most once per heartbeat interval: the bench shows what that round trip
// costs. With `discard_reports` set, report_outcome stores nothing and
// answers Stored: the bench's floor for the gRPC part of ingest alone.
// With `time_leases` set, it keeps how long each lease_job call took (the
// group lease's queue, its statement and commit: the database side of a
// lease, inside the coordinator; lease_job_async until its callback ran).
class TouchEveryLeaseStore : public Store {
 public:
  explicit TouchEveryLeaseStore(Store& inner) : inner_(inner) {}
  std::atomic<bool> touch_every_lease{false};
  std::atomic<bool> discard_reports{false};
  std::atomic<bool> time_leases{false};

  // The lease_job times kept since the last call, in microseconds.
  std::vector<double> take_lease_times() {
    std::lock_guard<std::mutex> lock(mu_);
    return std::exchange(lease_us_, {});
  }

  std::string register_agent(const std::string& name, const v1::Capabilities& caps, TimePoint now,
                             const std::string& key = kTrustedCaller) override {
    return inner_.register_agent(name, caps, now, key);
  }
  std::optional<std::string> agent_key(const std::string& agent_id) override {
    return inner_.agent_key(agent_id);
  }
  bool touch_agent(const std::string& agent_id, TimePoint now) override {
    return inner_.touch_agent(agent_id, now);
  }
  void touch_agent_async(const std::string& agent_id, TimePoint now) override {
    inner_.touch_agent_async(agent_id, now);
  }
  std::vector<v1::AgentInfo> list_agents(TimePoint online_since) override {
    return inner_.list_agents(online_since);
  }
  v1::Kernel add_kernel(const v1::Kernel& k, TimePoint now) override {
    return inner_.add_kernel(k, now);
  }
  std::vector<v1::Kernel> list_kernels() override { return inner_.list_kernels(); }
  int64_t create_campaign(const v1::CampaignSpec& spec, const std::vector<NewJob>& jobs,
                          int64_t schedule_id, TimePoint now) override {
    return inner_.create_campaign(spec, jobs, schedule_id, now);
  }
  std::optional<v1::Campaign> get_campaign(int64_t id) override { return inner_.get_campaign(id); }
  std::vector<v1::Campaign> list_campaigns(uint32_t limit) override {
    return inner_.list_campaigns(limit);
  }
  std::vector<v1::JobInfo> list_jobs(int64_t campaign_id) override {
    return inner_.list_jobs(campaign_id);
  }
  std::optional<v1::Job> lease_job(const std::string& agent_id, const v1::Capabilities& caps,
                                   TimePoint now, Duration lease,
                                   const std::string& key = kTrustedCaller) override {
    const auto t0 = std::chrono::steady_clock::now();
    if (touch_every_lease) inner_.touch_agent(agent_id, now);
    auto job = inner_.lease_job(agent_id, caps, now, lease, key);
    if (time_leases && job) {
      const std::chrono::duration<double, std::micro> took = std::chrono::steady_clock::now() - t0;
      std::lock_guard<std::mutex> lock(mu_);
      lease_us_.push_back(took.count());
    }
    return job;
  }
  void lease_job_async(const std::string& agent_id, const v1::Capabilities& caps, TimePoint now,
                       Duration lease, LeaseDone done,
                       const std::string& key = kTrustedCaller) override {
    const auto t0 = std::chrono::steady_clock::now();
    if (touch_every_lease) inner_.touch_agent(agent_id, now);
    inner_.lease_job_async(
        agent_id, caps, now, lease,
        [this, t0, done = std::move(done)](std::optional<v1::Job> job, std::exception_ptr error) {
          if (time_leases && job) {
            const std::chrono::duration<double, std::micro> took =
                std::chrono::steady_clock::now() - t0;
            std::lock_guard<std::mutex> lock(mu_);
            lease_us_.push_back(took.count());
          }
          done(std::move(job), error);
        },
        key);
  }
  std::optional<TimePoint> renew_lease(const std::string& agent_id, int64_t job_id,
                                       uint32_t attempt, TimePoint now, Duration lease,
                                       const std::string& key = kTrustedCaller,
                                       const v1::JobProgress* progress = nullptr) override {
    return inner_.renew_lease(agent_id, job_id, attempt, now, lease, key, progress);
  }
  ReportResult report_outcome(const std::string& agent_id, int64_t job_id, uint32_t attempt,
                              const v1::Outcome& outcome, TimePoint now,
                              const std::string& key = kTrustedCaller) override {
    if (discard_reports) return ReportResult::Stored;
    return inner_.report_outcome(agent_id, job_id, attempt, outcome, now, key);
  }
  void report_outcome_async(const std::string& agent_id, int64_t job_id, uint32_t attempt,
                            const v1::Outcome& outcome, TimePoint now, ReportDone done,
                            const std::string& key = kTrustedCaller) override {
    if (discard_reports) return done(ReportResult::Stored, nullptr);
    inner_.report_outcome_async(agent_id, job_id, attempt, outcome, now, std::move(done), key);
  }
  bool release_job(const std::string& agent_id, int64_t job_id, uint32_t attempt,
                   const std::string& key = kTrustedCaller) override {
    return inner_.release_job(agent_id, job_id, attempt, key);
  }
  int expire_leases(TimePoint now) override { return inner_.expire_leases(now); }
  std::vector<v1::OutcomeRecord> find_outcomes(const OutcomeFilter& filter) override {
    return inner_.find_outcomes(filter);
  }
  std::optional<v1::JobInfo> get_job(int64_t id) override { return inner_.get_job(id); }
  std::vector<CellSummary> campaign_cells(int64_t campaign_id) override {
    return inner_.campaign_cells(campaign_id);
  }
  Page<v1::OutcomeRecord> page_outcomes(const OutcomeQuery& query) override {
    return inner_.page_outcomes(query);
  }
  Page<v1::Campaign> page_campaigns(const CampaignQuery& query) override {
    return inner_.page_campaigns(query);
  }
  Page<v1::JobInfo> page_jobs(int64_t campaign_id, uint32_t limit,
                              const std::string& page_token) override {
    return inner_.page_jobs(campaign_id, limit, page_token);
  }
  v1::Schedule add_schedule(const std::string& name, const std::string& cron,
                            const v1::CampaignSpec& spec, TimePoint next_run) override {
    return inner_.add_schedule(name, cron, spec, next_run);
  }
  std::vector<v1::Schedule> list_schedules() override { return inner_.list_schedules(); }
  Page<v1::AgentInfo> page_agents(TimePoint online_since, uint32_t limit,
                                  const std::string& page_token) override {
    return inner_.page_agents(online_since, limit, page_token);
  }
  Page<v1::Kernel> page_kernels(uint32_t limit, const std::string& page_token) override {
    return inner_.page_kernels(limit, page_token);
  }
  Page<v1::Schedule> page_schedules(uint32_t limit, const std::string& page_token) override {
    return inner_.page_schedules(limit, page_token);
  }
  std::vector<std::string> scale_kernels() override { return inner_.scale_kernels(); }
  std::vector<ScaleRun> scale_runs(const ScaleRunQuery& query) override {
    return inner_.scale_runs(query);
  }
  std::optional<v1::Schedule> set_schedule_enabled(int64_t id, bool enabled,
                                                   TimePoint next_run) override {
    return inner_.set_schedule_enabled(id, enabled, next_run);
  }
  bool remove_schedule(int64_t id) override { return inner_.remove_schedule(id); }
  std::optional<int64_t> fire_schedule(int64_t id, TimePoint due, TimePoint next,
                                       const std::vector<NewJob>& jobs, TimePoint now) override {
    return inner_.fire_schedule(id, due, next, jobs, now);
  }

 private:
  Store& inner_;
  std::mutex mu_;
  std::vector<double> lease_us_;
};

}  // namespace leapfrog::coord
