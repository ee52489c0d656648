#pragma once
// Everything the coordinator keeps, behind one interface: agents, kernels,
// campaigns and their jobs, leases, outcomes and violations, schedules.
// The PostgreSQL implementation is pg_store.h; several coordinator replicas may
// share one database, so every method is safe against concurrent callers in
// other processes (leases use FOR UPDATE SKIP LOCKED).

#include <cstdint>
#include <exception>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "coordinator/clock.h"
#include "coordinator/store/page.h"
#include "leapfrog/v1/agent.pb.h"
#include "leapfrog/v1/control.pb.h"

namespace leapfrog::coord {

// A store call failed. `unavailable` is true when the database could not be
// reached (the caller may retry later); false for a conflict the caller caused.
class StoreError : public std::runtime_error {
 public:
  StoreError(const std::string& what, bool unavailable)
      : std::runtime_error(what), unavailable_(unavailable) {}
  bool unavailable() const { return unavailable_; }

 private:
  bool unavailable_;
};

// The key presented for a lease is not the one of the registration that took
// it (the agent's secret is wrong, or from another registration).
class WrongAgentSecret : public StoreError {
 public:
  explicit WrongAgentSecret(const std::string& what) : StoreError(what, false) {}
};

// Agent keys: what the agent service passes as `key` to the calls that act
// as an agent is the hex SHA-256 of the agent's secret (agent_secret.h). A
// lease records its key; the heartbeats, release and report of that lease
// must carry the same key, else WrongAgentSecret. kTrustedCaller ("") checks
// no key (the coordinator acting for a VM launcher it authenticated, in
// FailAgentJob, and tests), and a lease taken with it records none: then, as
// for leases taken before keys existed, the agent id decides.
inline const std::string kTrustedCaller;

// One job of a campaign, before it is stored.
struct NewJob {
  v1::ScenarioSpec spec;
  std::string kernel_label;
  // Set on a kernel build job: leased only by builder agents. Jobs of
  // the same campaign on its label wait for it (Store::create_campaign).
  std::optional<v1::KernelBuild> build;
};

// The job an agent holds, for the VM launcher (Store::agent_job).
struct AgentJob {
  std::string agent_id;
  int64_t job_id = 0;  // 0: none
  uint32_t attempt = 0;
};

// A VM launcher (Store::find_launcher): it ends the jobs of the VM agents it
// claimed (FailAgentJob), and no others.
struct LauncherRecord {
  std::string id;
  std::string key;           // of its secret (agent_secret.h)
  std::string kernel_label;  // the kernel its VMs boot: a boot failure ends a job of it
};

// An agent name a launcher claimed before booting the VM that registers
// under it (Store::agent_claim), with that agent, once it registered.
struct AgentClaim {
  std::string launcher_id;
  TimePoint claimed_at;
  std::optional<v1::Capabilities> agent;  // its capabilities; none until it registers
  TimePoint registered_at;                // when it first registered (agent set only)
};

// What Store::claim_agent_name answered.
enum class ClaimResult {
  Claimed,          // the name is the launcher's now (or was already)
  TakenByAgent,     // an agent registered under it before any claim
  TakenByLauncher,  // another launcher claimed it
  UnknownLauncher,  // no launcher of that id
};

// Which outcomes find_outcomes returns; zero or empty fields do not filter.
struct OutcomeFilter {
  int64_t campaign_id = 0;
  int64_t job_id = 0;
  std::string scenario;
  bool failed_only = false;
  uint32_t limit = 0;  // 0 means 200
};

// One page of outcomes (Store::page_outcomes): filters are applied before the
// limit; zero or empty fields do not filter.
struct OutcomeQuery {
  int64_t campaign_id = 0;
  int64_t job_id = 0;
  std::string scenario;
  std::string kernel_label;
  bool failed_only = false;
  // Each outcome with its violations; without, Outcome.violations is empty.
  bool with_violations = false;
  uint32_t limit = 0;  // kOutcomePage (kOutcomePageWithViolations) resolves it
  // The most a page holds, serialized; 0 means kMaxPageBytes. The page ends
  // before the outcome that would pass it (it holds one at least).
  size_t max_bytes = 0;
  std::string page_token;
};

// One page of campaigns (Store::page_campaigns); filters before the limit.
struct CampaignQuery {
  bool scheduled_only = false;  // made by a schedule
  bool running_only = false;    // some job not done yet (by the summaries)
  uint32_t limit = 0;           // kCampaignPage resolves it
  std::string page_token;
};

// Page sizes of the lists: the default (limit 0) and the most a page holds.
inline constexpr PageLimits kOutcomePage{100, 1000};
inline constexpr PageLimits kOutcomePageWithViolations{100, 100};
inline constexpr PageLimits kCampaignPage{50, 500};
inline constexpr PageLimits kJobPage{1000, 10000};
// Agents: a fleet of 1000 fits one page (the VM launcher asks without a limit).
inline constexpr PageLimits kAgentPage{1000, 5000};
// Kernels: likewise (the VM launcher looks a label up in the first page).
inline constexpr PageLimits kKernelPage{1000, 5000};
inline constexpr PageLimits kSchedulePage{200, 1000};

// One (scenario, kernel, file system) cell of a campaign's matrix, from the
// summaries kept as outcomes arrive (Store::campaign_cells).
struct CellSummary {
  std::string scenario;
  std::string kernel_label;
  std::string fs;
  uint32_t jobs = 0;
  std::map<v1::Verdict, uint32_t> done;      // jobs done, by verdict
  std::map<v1::JobState, uint32_t> pending;  // jobs not done, by state
  uint64_t outcomes = 0;                     // stored, extra outcomes included
  uint64_t violations = 0;                   // found by those outcomes
};

// One measured point of a lookup-scale run as kept (scale_points): the
// fields of scenarios' ScalePoint (scenarios/outcome.h), which
// coordinator/scaling.cc converts it to.
struct ScalePointRow {
  std::string test;  // testcase, e.g. "lseek1"
  std::string mode;  // "processes" or "threads"
  uint32_t tasks = 0;
  double ops_per_sec = 0;
  std::vector<double> samples;  // ops/s of each timed sample
  double stddev = 0;
  double ci_low = 0, ci_high = 0;
  double idle_pct = -1;
  double other_load = -1;
  double task_cpu_s = 0;
  double window_s = 0;
  double host_load = -1;
};

// A passing lookup-scale run (Store::scale_runs).
struct ScaleRun {
  // Its outcome, without violations (it passed). With `details` false
  // only job_id, attempt, campaign_id, kernel_label and reported_at are set.
  v1::OutcomeRecord record;
  std::string host_json;              // its "scale_host" object, "" when none
  std::vector<ScalePointRow> points;  // in the order reported; with `details` only
};

// Which runs Store::scale_runs returns.
struct ScaleRunQuery {
  std::vector<std::string> kernels;  // empty: every kernel with a run
  uint32_t per_kernel = 1;           // the newest this many of each kernel
  bool details = true;               // the outcome and the points too
  // per_kernel counts campaigns: every run of each kernel's newest
  // per_kernel campaigns (newest by their newest run of the kernel), a
  // kernel's "run sets" (docs/scaling.md).
  bool by_campaign = false;
};

enum class ReportResult {
  Stored,      // the outcome was stored and the job is done
  Duplicate,   // this (job, attempt) was stored before; nothing changed
  Superseded,  // the job moved on to a later attempt (or is done by another); dropped
  // As Superseded, but the outcome carries violations: stored as an extra
  // outcome of the job (OutcomeRecord.superseded), the job left as it was.
  KeptSuperseded,
};

// Called once with what report_outcome would have returned, or with what it
// would have thrown (`error` set; `result` then means nothing).
using ReportDone = std::function<void(ReportResult result, std::exception_ptr error)>;
// What Store::lease_job_async calls once: the job leased (nullopt when none
// matched), or the error lease_job would have thrown.
using LeaseDone = std::function<void(std::optional<v1::Job> job, std::exception_ptr error)>;

// What one retention pass (Store::apply_retention) did.
struct RetentionPass {
  int outcomes = 0;          // looked at, and marked so they are not looked at again
  int outcomes_trimmed = 0;  // whose stored outcome got smaller
  int excerpts_dropped = 0;  // violation rows that lost their history excerpt
  int examples_kept = 0;     // issue examples, kept whole
  uint64_t bytes_freed = 0;
};

class Store {
 public:
  virtual ~Store() = default;

  // Whether the database answers now (one cheap round trip). Never throws.
  virtual bool reachable() { return true; }

  // ---- agents ----
  // Creates or updates the agent called `name`; returns its id. A non-empty
  // `key` replaces the agent's key (what agent_key returns).
  virtual std::string register_agent(const std::string& name, const v1::Capabilities& caps,
                                     TimePoint now, const std::string& key = kTrustedCaller) = 0;
  // The key of the agent's latest registration ("" if it has none), or
  // nullopt for an unknown agent id.
  virtual std::optional<std::string> agent_key(const std::string& agent_id) {
    (void)agent_id;
    throw StoreError("this store keeps no agent keys", false);
  }
  // Records that the agent was seen; false if the id is unknown.
  virtual bool touch_agent(const std::string& agent_id, TimePoint now) = 0;
  // As touch_agent, without waiting for the database (the agents' hot path);
  // list_agents sees it. Failures are logged, not thrown.
  virtual void touch_agent_async(const std::string& agent_id, TimePoint now) {
    try {
      touch_agent(agent_id, now);
    } catch (const StoreError&) {
    }
  }
  // Every agent; `online` when seen at or after `online_since`.
  virtual std::vector<v1::AgentInfo> list_agents(TimePoint online_since) = 0;
  // One page of list_agents, by name (kAgentPage). Throws BadPageToken.
  // The registered agents among `names`, by name (a launcher's own VMs).
  virtual std::vector<v1::AgentInfo> agents_named(TimePoint online_since,
                                                  const std::vector<std::string>& names) {
    const std::set<std::string> wanted(names.begin(), names.end());
    std::vector<v1::AgentInfo> out;
    for (auto& a : list_agents(online_since))
      if (wanted.count(a.name())) out.push_back(std::move(a));
    return out;
  }
  virtual Page<v1::AgentInfo> page_agents(TimePoint online_since, uint32_t limit,
                                          const std::string& page_token) {
    (void)online_since;
    (void)limit;
    (void)page_token;
    throw StoreError("this store cannot page agents", false);
  }

  // ---- kernels ----
  // Registers a kernel; throws StoreError (not unavailable) if the label exists.
  virtual v1::Kernel add_kernel(const v1::Kernel& k, TimePoint now) = 0;
  virtual std::vector<v1::Kernel> list_kernels() = 0;
  // One page of list_kernels, in its order (added, then label; a replaced
  // kernel counts as added anew) (kKernelPage). Throws BadPageToken.
  virtual Page<v1::Kernel> page_kernels(uint32_t limit, const std::string& page_token) {
    (void)limit;
    (void)page_token;
    throw StoreError("this store cannot page kernels", false);
  }
  // Adds the kernel, or replaces the one with its label (a rebuild).
  virtual v1::Kernel put_kernel(const v1::Kernel& k, TimePoint now) {
    (void)k;
    (void)now;
    throw StoreError("this store cannot replace kernels", false);
  }

  // ---- campaigns and jobs ----
  // Stores the campaign and queues its jobs in one transaction; returns its id.
  // `max_attempts` comes from spec (0 means 3). schedule_id 0: made by hand.
  // Jobs on a label that one of `jobs` builds are stored waiting for it.
  virtual int64_t create_campaign(const v1::CampaignSpec& spec, const std::vector<NewJob>& jobs,
                                  int64_t schedule_id, TimePoint now) = 0;
  virtual std::optional<v1::Campaign> get_campaign(int64_t id) = 0;
  // Most recent first; limit 0 means 50.
  virtual std::vector<v1::Campaign> list_campaigns(uint32_t limit) = 0;
  virtual std::vector<v1::JobInfo> list_jobs(int64_t campaign_id) = 0;
  // The cells of a campaign with their counts, in (scenario, kernel, file
  // system) order; empty for an unknown campaign.
  virtual std::vector<CellSummary> campaign_cells(int64_t campaign_id) {
    (void)campaign_id;
    throw StoreError("this store keeps no summaries", false);
  }
  // Pages of list_campaigns (most recent first) and of list_jobs (in id
  // order). Throws BadPageToken for a token of another list.
  virtual Page<v1::Campaign> page_campaigns(const CampaignQuery& query) {
    (void)query;
    throw StoreError("this store cannot page campaigns", false);
  }
  virtual Page<v1::JobInfo> page_jobs(int64_t campaign_id, uint32_t limit,
                                      const std::string& page_token) {
    (void)campaign_id;
    (void)limit;
    (void)page_token;
    throw StoreError("this store cannot page jobs", false);
  }

  // ---- leases ----
  // Leases the oldest queued job whose kernel label equals caps.kernel_label
  // and whose file system is in caps.filesystems: attempt + 1, deadline now +
  // lease. Never hands one job to two agents. nullopt when none matches.
  // A job on a rebuilt kernel goes only to an agent whose caps.uname starts
  // with the built release.
  // The lease records `key`.
  virtual std::optional<v1::Job> lease_job(const std::string& agent_id,
                                           const v1::Capabilities& caps, TimePoint now,
                                           Duration lease,
                                           const std::string& key = kTrustedCaller) = 0;
  // lease_job without blocking the caller on the database: `done` is called
  // once, possibly from another thread and possibly before this returns, and
  // must not throw. By default it calls lease_job in place.
  virtual void lease_job_async(const std::string& agent_id, const v1::Capabilities& caps,
                               TimePoint now, Duration lease, LeaseDone done,
                               const std::string& key = kTrustedCaller) {
    std::optional<v1::Job> job;
    try {
      job = lease_job(agent_id, caps, now, lease, key);
    } catch (...) {
      done(std::nullopt, std::current_exception());
      return;
    }
    done(std::move(job), nullptr);
  }
  // For builder agents: leases the oldest queued kernel build job (any
  // label), as lease_job. nullopt when none is queued.
  virtual std::optional<v1::Job> lease_build_job(const std::string& agent_id, TimePoint now,
                                                 Duration lease,
                                                 const std::string& key = kTrustedCaller) {
    (void)agent_id;
    (void)now;
    (void)lease;
    (void)key;
    return std::nullopt;
  }
  // Extends the lease if (job, attempt) is still leased by this agent; returns
  // the new deadline, or nullopt if the lease is no longer the agent's.
  // Throws WrongAgentSecret if it is, but was taken with another key. With
  // `progress`, the renewal also keeps the run's counts so far (received
  // `now`) for JobInfo.progress.
  virtual std::optional<TimePoint> renew_lease(const std::string& agent_id, int64_t job_id,
                                               uint32_t attempt, TimePoint now, Duration lease,
                                               const std::string& key = kTrustedCaller,
                                               const v1::JobProgress* progress = nullptr) = 0;
  // Stores the outcome of (job, attempt) once. Accepted while that attempt is
  // the job's current one (leased, or requeued but not yet leased again, or
  // ended as INFRA_FAILURE by expiry: the real outcome then replaces it).
  // Throws StoreError (not unavailable) for an unknown job, or an attempt
  // never handed out. An outcome with a build result (a build job's) also
  // registers the kernel and queues or ends the jobs waiting for it, in the
  // same transaction. Throws WrongAgentSecret when the attempt was leased
  // with a key other than `key` (whatever became of the job since).
  virtual ReportResult report_outcome(const std::string& agent_id, int64_t job_id, uint32_t attempt,
                                      const v1::Outcome& outcome, TimePoint now,
                                      const std::string& key = kTrustedCaller) = 0;
  // report_outcome without blocking the caller on the database: `done` is
  // called once, possibly from another thread and possibly before this
  // returns. `agent_id` and `outcome` must stay valid until `done` is called.
  // By default it calls report_outcome in place.
  virtual void report_outcome_async(const std::string& agent_id, int64_t job_id, uint32_t attempt,
                                    const v1::Outcome& outcome, TimePoint now, ReportDone done,
                                    const std::string& key = kTrustedCaller) {
    ReportResult result{};
    try {
      result = report_outcome(agent_id, job_id, attempt, outcome, now, key);
    } catch (...) {
      done(result, std::current_exception());
      return;
    }
    done(result, nullptr);
  }
  // The agent gives the job back unfinished: queued again, attempt not counted
  // against max_attempts (the next lease still gets a new attempt number).
  // Ignored unless (job, attempt) is leased by this agent (false: nothing
  // released); throws WrongAgentSecret if it is, but was taken with another
  // key. True when the job was queued again.
  virtual bool release_job(const std::string& agent_id, int64_t job_id, uint32_t attempt,
                           const std::string& key = kTrustedCaller) = 0;
  // Leases past their deadline: requeued (the next lease is attempt + 1) or,
  // after max_attempts, done as VERDICT_INFRA_FAILURE with the reason. Jobs
  // still waiting for a build job that ended without a kernel end as
  // VERDICT_BUILD_FAILURE. Returns how many jobs it touched.
  virtual int expire_leases(TimePoint now) = 0;
  // For the VM launcher (FailAgentJob): the agent called `agent_name` and the
  // (job, attempt) it holds when job_id is 0; otherwise job_id's current
  // attempt if that agent holds it, or if its lease expired and no one leased
  // it again (queued after a lease). job_id 0 in the result: no such job.
  // nullopt for an unknown agent name.
  virtual std::optional<AgentJob> agent_job(const std::string& agent_name, int64_t job_id) {
    (void)agent_name;
    (void)job_id;
    throw StoreError("this store cannot look up an agent's job", false);
  }

  // ---- VM launchers ----
  // Registers a VM launcher of `kernel_label` whose secret has key `key`;
  // returns its new id (each call is a new launcher).
  virtual std::string register_launcher(const std::string& name, const std::string& kernel_label,
                                        const std::string& key, TimePoint now) {
    (void)name, (void)kernel_label, (void)key, (void)now;
    throw StoreError("this store keeps no VM launchers", false);
  }
  // The launcher `id`; nullopt if unknown.
  virtual std::optional<LauncherRecord> find_launcher(const std::string& id) {
    (void)id;
    throw StoreError("this store keeps no VM launchers", false);
  }
  // Claims `agent_name` for launcher `launcher_id`, unless an agent already
  // registered under it or another launcher claimed it.
  virtual ClaimResult claim_agent_name(const std::string& launcher_id,
                                       const std::string& agent_name, TimePoint now) {
    (void)launcher_id, (void)agent_name, (void)now;
    throw StoreError("this store keeps no VM launchers", false);
  }
  // Who claimed `agent_name`, and the agent registered under it; nullopt
  // when no launcher claimed it.
  virtual std::optional<AgentClaim> agent_claim(const std::string& agent_name) {
    (void)agent_name;
    throw StoreError("this store keeps no VM launchers", false);
  }
  // For a VM that did not boot: leases the oldest queued job of
  // `kernel_label` (any file system; no build job) to `holder` with no key,
  // so that the coordinator can end it at once with report_outcome. job_id 0
  // in the result: no queued job.
  virtual AgentJob lease_queued_job(const std::string& holder, const std::string& kernel_label,
                                    TimePoint now, Duration lease) {
    (void)holder, (void)kernel_label, (void)now, (void)lease;
    throw StoreError("this store cannot lease for a launcher", false);
  }

  // ---- outcomes ----
  // Outcomes matching every set field of `filter` (none set: all; limit 0
  // means 200), most recent first, each with its violations in the order
  // reported.
  virtual std::vector<v1::OutcomeRecord> find_outcomes(const OutcomeFilter& filter) = 0;
  // One page of the outcomes matching `query`, most recent first (by report
  // order). Throws BadPageToken for a token of another list.
  virtual Page<v1::OutcomeRecord> page_outcomes(const OutcomeQuery& query) {
    (void)query;
    throw StoreError("this store cannot page outcomes", false);
  }
  // The job `id` with its state and verdict; nullopt if unknown.
  virtual std::optional<v1::JobInfo> get_job(int64_t id) = 0;
  // The jobs of `ids` that exist, by id, in one read (unknown ids are left out).
  virtual std::map<int64_t, v1::JobInfo> get_jobs(const std::vector<int64_t>& ids) {
    std::map<int64_t, v1::JobInfo> out;
    for (int64_t id : ids)
      if (auto j = get_job(id)) out.emplace(id, std::move(*j));
    return out;
  }

  // ---- lookup-scale runs (kept as rows as their outcomes are stored) ----
  // Every kernel with a passing lookup-scale run, by label.
  virtual std::vector<std::string> scale_kernels() {
    throw StoreError("this store keeps no scaling runs", false);
  }
  // The newest query.per_kernel passing runs (or campaigns' runs) of each
  // kernel asked for that has one, by kernel label, then newest first (in
  // report order).
  virtual std::vector<ScaleRun> scale_runs(const ScaleRunQuery& query) {
    (void)query;
    throw StoreError("this store keeps no scaling runs", false);
  }

  // ---- schedules ----
  virtual v1::Schedule add_schedule(const std::string& name, const std::string& cron,
                                    const v1::CampaignSpec& spec, TimePoint next_run) = 0;
  virtual std::vector<v1::Schedule> list_schedules() = 0;
  // One page of list_schedules, by id (kSchedulePage). Throws BadPageToken.
  virtual Page<v1::Schedule> page_schedules(uint32_t limit, const std::string& page_token) {
    (void)limit;
    (void)page_token;
    throw StoreError("this store cannot page schedules", false);
  }
  virtual std::optional<v1::Schedule> set_schedule_enabled(int64_t id, bool enabled,
                                                           TimePoint next_run) = 0;
  virtual bool remove_schedule(int64_t id) = 0;
  // Fires schedule `id` for its firing due at `due`, once across replicas: if
  // the schedule is enabled and its next_run still equals `due`, creates the
  // campaign (as create_campaign with schedule_id = id), moves next_run to
  // `next` and last_run to `due`, all in one transaction. Returns the campaign
  // id, or nullopt if another caller fired it first (or it was disabled).
  virtual std::optional<int64_t> fire_schedule(int64_t id, TimePoint due, TimePoint next,
                                               const std::vector<NewJob>& jobs, TimePoint now) = 0;

  // Retention: up to `batch` outcomes reported before `cutoff`, oldest
  // first, each looked at once, drop what only their own page shows
  // (pg_retention.cc says what). Verdicts, counters, violation rows,
  // summaries and issue examples stay. A store without it keeps everything.
  virtual RetentionPass apply_retention(TimePoint cutoff, uint32_t batch) {
    (void)cutoff;
    (void)batch;
    return {};
  }
};

}  // namespace leapfrog::coord
