#include "coordinator/agent_service.h"

#include <spdlog/spdlog.h>

#include "common/bounds.h"
#include "common/proto_time.h"
#include "coordinator/metrics/coordinator_metrics.h"
#include "coordinator/agent_secret.h"
#include "coordinator/report_check.h"
#include "coordinator/request_bounds.h"
#include "coordinator/error_status.h"
#include "coordinator/wire_paths.h"

namespace leapfrog::coord {

using grpc::Status;
using grpc::StatusCode;

namespace {

// The store key of the secret a call acting as an agent carries; empty when
// it carries none (answered PERMISSION_DENIED: never kTrustedCaller).
std::string key_of(const std::string& secret) {
  return secret.empty() ? std::string() : agent_key_of(secret);
}

Status missing_secret() {
  return Status(StatusCode::PERMISSION_DENIED,
                "agent_secret is missing: send the one Register answered");
}

}  // namespace

Status AgentServiceImpl::check_agent(const std::string& agent_id, const std::string& key,
                                     v1::Capabilities& out) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = agents_.find(agent_id);
    if (it == agents_.end())
      return Status(StatusCode::NOT_FOUND,
                    "unknown agent " + quoted_start(agent_id) + ": register first");
    if (key.empty()) return missing_secret();
    out = it->second.caps;
    if (it->second.key == key) return Status::OK;
  }
  // Rare: the agent registered again through another replica.
  const auto latest = store_.agent_key(agent_id);
  if (!latest || latest->empty() || *latest != key)
    return Status(StatusCode::PERMISSION_DENIED,
                  "wrong agent_secret for agent " + quoted_start(agent_id) +
                      ": not its latest registration's (register again)");
  std::lock_guard<std::mutex> lock(mu_);
  agents_[agent_id].key = key;
  return Status::OK;
}

void AgentServiceImpl::seen(const std::string& agent_id) {
  const TimePoint now = clock_.now();
  {
    std::lock_guard<std::mutex> lock(mu_);
    TimePoint& last = last_touch_[agent_id];
    if (now - last < cfg_.heartbeat_interval) return;
    last = now;
  }
  store_.touch_agent_async(agent_id, now);  // off the call's path: written in batches
}

Status AgentServiceImpl::Register(grpc::ServerContext* ctx, const v1::RegisterRequest* req,
                                  v1::RegisterResponse* resp) {
  if (auto s = auth_.check(*ctx); !s.ok()) return s;
  if (auto s = check_request_bounds(*req); !s.ok()) return s;
  return guarded("Register", [&] {
    if (req->name().empty()) return Status(StatusCode::INVALID_ARGUMENT, "agent name is empty");
    if (auto why = too_long("agent name", req->name(), kMaxNameBytes); !why.empty())
      return Status(StatusCode::INVALID_ARGUMENT, why);
    if (auto why = too_long("capabilities.kernel_label", req->capabilities().kernel_label(),
                            kMaxLabelBytes);
        !why.empty())
      return Status(StatusCode::INVALID_ARGUMENT, why);
    if (!req->has_capabilities()) return Status(StatusCode::INVALID_ARGUMENT, "capabilities are missing");
    if (req->capabilities().kernel_label().empty())
      return Status(StatusCode::INVALID_ARGUMENT, "capabilities.kernel_label is empty");
    if (req->capabilities().filesystems().empty())
      return Status(StatusCode::INVALID_ARGUMENT, "capabilities.filesystems is empty: the agent could run no job");
    const std::string secret = new_agent_secret();
    const std::string key = agent_key_of(secret);
    const std::string id =
        store_.register_agent(req->name(), req->capabilities(), clock_.now(), key);
    {
      std::lock_guard<std::mutex> lock(mu_);
      agents_[id] = KnownAgent{req->capabilities(), key};
    }
    resp->set_agent_id(id);
    if (metrics_) metrics_->registered(req->capabilities().vm());
    resp->set_agent_secret(secret);
    *resp->mutable_heartbeat_interval() = to_proto(cfg_.heartbeat_interval);
    *resp->mutable_lease_duration() = to_proto(cfg_.lease_duration);
    spdlog::info("agent.register agent={} name={} kernel={} builder={}", id, req->name(),
                 req->capabilities().kernel_label(), req->capabilities().builder());
    return Status::OK;
  });
}

// One Lease call on the callback API. attempt() leases through the store's
// async lease; leased() answers with the job, or parks the call while the
// caller asked to wait. Every path ends in exactly one Finish: a parked call
// is finished by whoever takes it out of the parked calls (the poll thread
// attempts it again, OnCancel answers it), and nothing touches the call after
// its Finish (OnDone may then run at once and delete it).
class AgentServiceImpl::LeaseCall final : public grpc::ServerUnaryReactor {
 public:
  LeaseCall(AgentServiceImpl& service, grpc::CallbackServerContext* ctx,
            const v1::LeaseRequest* req, v1::LeaseResponse* resp, v1::Capabilities caps,
            std::string key, TimePoint until)
      : service_(service),
        ctx_(ctx),
        req_(req),
        resp_(resp),
        caps_(std::move(caps)),
        key_(std::move(key)),
        until_(until) {}

  // One lease: a kernel build first for builders, then the store's async
  // lease (leased() runs once it is written).
  void attempt() {
    // A caller that went away (its VM stopped, its process killed) while
    // this call waited must not be handed a job it will never run.
    if (ctx_->IsCancelled()) return Finish(Status::OK);
    try {
      service_.seen(req_->agent_id());
      // Builders take kernel builds first: test jobs may be waiting for them.
      if (caps_.builder()) {
        if (auto build = service_.store_.lease_build_job(req_->agent_id(), service_.clock_.now(),
                                                         service_.cfg_.lease_duration, key_)) {
          spdlog::info("job.lease_build job={} attempt={} agent={} label={}", build->job_id(),
                       build->attempt(), req_->agent_id(), build->build().label());
          if (service_.metrics_) service_.metrics_->leased(true);
          *resp_->mutable_job() = std::move(*build);
          return Finish(Status::OK);
        }
      }
      service_.store_.lease_job_async(
          req_->agent_id(), caps_, service_.clock_.now(), service_.cfg_.lease_duration,
          [this](std::optional<v1::Job> job, std::exception_ptr error) {
            leased(std::move(job), error);
          },
          key_);
    } catch (...) {
      Finish(grpc_status_of("Lease", std::current_exception()));
    }
  }

  // The caller went away: a parked call is answered now (one whose lease is
  // being written gives its job back in leased()).
  void OnCancel() override {
    if (service_.unpark(this)) Finish(Status::OK);
  }
  void OnDone() override { delete this; }

  grpc::CallbackServerContext* context() const { return ctx_; }
  Parked::iterator slot;  // under poll_mu_: its place in parked_, while `parked`
  bool parked = false;

 private:
  // On a lease writer (or in attempt(), for a store without one).
  void leased(std::optional<v1::Job> job, std::exception_ptr error) {
    if (error) return Finish(grpc_status_of("Lease", error));
    try {
      if (job) {
        if (ctx_->IsCancelled()) {  // gone while the lease was written: give the job back
          service_.store_.release_job(req_->agent_id(), job->job_id(), job->attempt(), key_);
          spdlog::info(
              "job.lease_returned job={} attempt={} agent={} reason=\"the caller went away\"",
              job->job_id(), job->attempt(), req_->agent_id());
          service_.work_.notify();  // parked callers may take it at once
          return Finish(Status::OK);
        }
        spdlog::info("job.lease job={} attempt={} agent={}", job->job_id(), job->attempt(),
                     req_->agent_id());
        if (service_.metrics_) service_.metrics_->leased(false);
        *resp_->mutable_job() = std::move(*job);
        return Finish(Status::OK);
      }
      if (service_.clock_.now() >= until_) return Finish(Status::OK);
      // Other replicas queue work too, so poll as well as wait for a signal.
      if (!service_.park(this, std::chrono::steady_clock::now() + std::chrono::milliseconds(200)))
        Finish(Status::OK);
    } catch (...) {
      Finish(grpc_status_of("Lease", std::current_exception()));
    }
  }

  AgentServiceImpl& service_;
  grpc::CallbackServerContext* const ctx_;
  const v1::LeaseRequest* const req_;
  v1::LeaseResponse* const resp_;
  const v1::Capabilities caps_;
  const std::string key_;
  const TimePoint until_;
};

AgentServiceImpl::AgentServiceImpl(Store& store, const Clock& clock, const TokenAuth& auth,
                                   const ServiceConfig& cfg, WorkSignal& work)
    : store_(store), clock_(clock), auth_(auth), cfg_(cfg), work_(work) {
  SetMessageAllocatorFor_ReportOutcome(&report_allocator_);
  work_subscription_ = work_.subscribe([this] {
    {
      std::lock_guard<std::mutex> lock(poll_mu_);
      signalled_ = true;
    }
    poll_cv_.notify_one();
  });
  poller_ = std::thread([this] { poll_loop(); });
}

AgentServiceImpl::~AgentServiceImpl() {
  work_.unsubscribe(work_subscription_);
  {
    std::lock_guard<std::mutex> lock(poll_mu_);
    stopping_ = true;
  }
  poll_cv_.notify_one();
  poller_.join();
}

bool AgentServiceImpl::park(LeaseCall* call, std::chrono::steady_clock::time_point due) {
  bool first;
  {
    std::lock_guard<std::mutex> lock(poll_mu_);
    // Under the lock that OnCancel takes: a cancellation either shows here
    // or finds the call parked.
    if (call->context()->IsCancelled()) return false;
    first = parked_.empty();
    call->slot = parked_.emplace(due, call);
    call->parked = true;
  }
  if (first) poll_cv_.notify_one();  // later calls are due after the first
  return true;
}

size_t AgentServiceImpl::parked_leases() const {
  std::lock_guard<std::mutex> lock(poll_mu_);
  return parked_.size();
}

bool AgentServiceImpl::unpark(LeaseCall* call) {
  std::lock_guard<std::mutex> lock(poll_mu_);
  if (!call->parked) return false;
  parked_.erase(call->slot);
  call->parked = false;
  return true;
}

void AgentServiceImpl::poll_loop() {
  using Steady = std::chrono::steady_clock;
  // Calls due within this much of each other are attempted in one wake-up.
  constexpr auto kSlack = std::chrono::milliseconds(10);
  std::unique_lock<std::mutex> lock(poll_mu_);
  std::vector<LeaseCall*> ready;
  for (;;) {
    const auto woken = [&] { return signalled_ || stopping_; };
    if (parked_.empty())
      poll_cv_.wait(lock, [&] { return woken() || !parked_.empty(); });
    else
      poll_cv_.wait_until(lock, parked_.begin()->first, woken);
    if (stopping_) return;
    const auto upto =
        signalled_ ? Parked::iterator(parked_.end()) : parked_.upper_bound(Steady::now() + kSlack);
    signalled_ = false;
    for (auto it = parked_.begin(); it != upto; ++it) {
      it->second->parked = false;
      ready.push_back(it->second);
    }
    parked_.erase(parked_.begin(), upto);
    if (ready.empty()) continue;
    lock.unlock();
    for (LeaseCall* call : ready) call->attempt();
    ready.clear();
    lock.lock();
  }
}

grpc::ServerUnaryReactor* AgentServiceImpl::Lease(grpc::CallbackServerContext* ctx,
                                                  const v1::LeaseRequest* req,
                                                  v1::LeaseResponse* resp) {
  LeaseCall* call = nullptr;
  Status refused = auth_.check(*ctx);
  if (refused.ok()) refused = check_request_bounds(*req);
  if (refused.ok()) {
    refused = guarded("Lease", [&] {
      const std::string key = key_of(req->agent_secret());
      v1::Capabilities caps;
      if (Status s = check_agent(req->agent_id(), key, caps); !s.ok()) return s;
      const Duration wait = std::min(from_proto(req->wait()), cfg_.max_lease_wait);
      call = new LeaseCall(*this, ctx, req, resp, std::move(caps), key, clock_.now() + wait);
      return Status::OK;
    });
  }
  if (!call) {
    grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
    reactor->Finish(refused);
    return reactor;
  }
  // A Finish before the reactor is returned waits for gRPC to bind it.
  call->attempt();
  return call;
}

Status AgentServiceImpl::Heartbeat(grpc::ServerContext* ctx, const v1::HeartbeatRequest* req,
                                   v1::HeartbeatResponse* resp) {
  if (auto s = auth_.check(*ctx); !s.ok()) return s;
  if (auto s = check_request_bounds(*req); !s.ok()) return s;
  return guarded("Heartbeat", [&] {
    if (req->agent_secret().empty()) return missing_secret();
    const TimePoint now = clock_.now();
    seen(req->agent_id());
    auto deadline = store_.renew_lease(req->agent_id(), req->job_id(), req->attempt(), now,
                                       cfg_.lease_duration, key_of(req->agent_secret()),
                                       req->has_progress() ? &req->progress() : nullptr);
    if (!deadline)
      return Status(StatusCode::FAILED_PRECONDITION, "job " + std::to_string(req->job_id()) + " attempt " +
                                                         std::to_string(req->attempt()) +
                                                         " is no longer leased by this agent");
    *resp->mutable_lease_deadline() = to_proto(*deadline);
    return Status::OK;
  });
}

grpc::ServerUnaryReactor* AgentServiceImpl::ReportOutcome(grpc::CallbackServerContext* ctx,
                                                          const v1::ReportOutcomeRequest* req,
                                                          v1::ReportOutcomeResponse* resp) {
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  Status refused = auth_.check(*ctx);
  if (refused.ok()) refused = check_request_bounds(*req);
  if (refused.ok()) {
    if (auto why = report_problem(*req); !why.empty())
      refused = Status(StatusCode::INVALID_ARGUMENT, why);
    else if (req->agent_secret().empty())
      refused = missing_secret();
  }
  if (!refused.ok()) {
    reactor->Finish(refused);
    return reactor;
  }
  // The request and response live until Finish; `done` runs on a report
  // writer once the batch holding this report is committed (or failed).
  store_.report_outcome_async(
      req->agent_id(), req->job_id(), req->attempt(), req->outcome(), clock_.now(),
      [reactor, req, resp, m = metrics_, t0 = std::chrono::steady_clock::now()](
          ReportResult result, std::exception_ptr error) {
        if (m)
          m->reported(req->outcome().verdict(), error ? std::nullopt : std::optional(result), t0);
        reactor->Finish(report_status(req, resp, result, error));
      },
      key_of(req->agent_secret()));
  return reactor;
}

Status AgentServiceImpl::report_status(const v1::ReportOutcomeRequest* req,
                                       v1::ReportOutcomeResponse* resp, ReportResult result,
                                       std::exception_ptr error) {
  if (error) return grpc_status_of("ReportOutcome", error);
  switch (result) {
    case ReportResult::Stored:
      spdlog::info("job.outcome job={} attempt={} verdict={}", req->job_id(), req->attempt(),
                   v1::Verdict_Name(req->outcome().verdict()));
      return Status::OK;
    case ReportResult::Duplicate:
      resp->set_duplicate(true);
      return Status::OK;
    case ReportResult::KeptSuperseded:
      spdlog::warn("job.outcome_kept_superseded job={} attempt={} verdict={}", req->job_id(),
                   req->attempt(), v1::Verdict_Name(req->outcome().verdict()));
      resp->set_kept_superseded(true);
      return Status::OK;
    case ReportResult::Superseded:
      return Status(StatusCode::FAILED_PRECONDITION,
                    "job " + std::to_string(req->job_id()) + " attempt " +
                        std::to_string(req->attempt()) + " was superseded");
  }
  return Status::OK;
}

Status AgentServiceImpl::ReleaseJob(grpc::ServerContext* ctx, const v1::ReleaseJobRequest* req,
                                    v1::ReleaseJobResponse*) {
  if (auto s = auth_.check(*ctx); !s.ok()) return s;
  if (auto s = check_request_bounds(*req); !s.ok()) return s;
  return guarded("ReleaseJob", [&] {
    if (req->agent_secret().empty()) return missing_secret();
    if (!store_.release_job(req->agent_id(), req->job_id(), req->attempt(),
                            key_of(req->agent_secret())))
      // Another agent's lease, or one that has ended: nothing is released,
      // and the caller is told so (issue 41 §7).
      return Status(StatusCode::PERMISSION_DENIED,
                    "job " + std::to_string(req->job_id()) + " attempt " + std::to_string(req->attempt()) +
                        " is not leased to agent " + quoted_start(req->agent_id()) + ": nothing released");
    spdlog::info("job.release job={} attempt={} agent={} reason=\"{}\"", req->job_id(), req->attempt(),
                 req->agent_id(), req->reason());
    work_.notify();
    return Status::OK;
  });
}

Status AgentServiceImpl::check_launcher(const std::string& id, const std::string& secret,
                                        LauncherRecord& out) {
  if (secret.empty())
    return Status(StatusCode::PERMISSION_DENIED,
                  "launcher_secret is missing: only a VM launcher ends a VM agent's job, with the "
                  "secret RegisterLauncher answered");
  auto launcher = store_.find_launcher(id);
  if (!launcher || launcher->key != agent_key_of(secret))
    return Status(StatusCode::PERMISSION_DENIED,
                  "wrong launcher_secret for launcher " + quoted_start(id) + ": register again");
  out = std::move(*launcher);
  return Status::OK;
}

Status AgentServiceImpl::RegisterLauncher(grpc::ServerContext* ctx,
                                          const v1::RegisterLauncherRequest* req,
                                          v1::RegisterLauncherResponse* resp) {
  if (auto s = auth_.check(*ctx); !s.ok()) return s;
  if (auto s = check_request_bounds(*req); !s.ok()) return s;
  return guarded("RegisterLauncher", [&] {
    if (req->name().empty()) return Status(StatusCode::INVALID_ARGUMENT, "launcher name is empty");
    if (req->kernel_label().empty())
      return Status(StatusCode::INVALID_ARGUMENT, "kernel_label is empty");
    if (auto why = too_long("launcher name", req->name(), kMaxNameBytes); !why.empty())
      return Status(StatusCode::INVALID_ARGUMENT, why);
    if (auto why = too_long("kernel_label", req->kernel_label(), kMaxLabelBytes); !why.empty())
      return Status(StatusCode::INVALID_ARGUMENT, why);
    const std::string secret = new_agent_secret();
    const std::string id = store_.register_launcher(req->name(), req->kernel_label(),
                                                    agent_key_of(secret), clock_.now());
    resp->set_launcher_id(id);
    resp->set_launcher_secret(secret);
    spdlog::info("launcher.register launcher={} name={} kernel={}", id, req->name(),
                 req->kernel_label());
    return Status::OK;
  });
}

Status AgentServiceImpl::ClaimAgentName(grpc::ServerContext* ctx,
                                        const v1::ClaimAgentNameRequest* req,
                                        v1::ClaimAgentNameResponse*) {
  if (auto s = auth_.check(*ctx); !s.ok()) return s;
  if (auto s = check_request_bounds(*req); !s.ok()) return s;
  return guarded("ClaimAgentName", [&] {
    if (req->agent_name().empty())
      return Status(StatusCode::INVALID_ARGUMENT, "agent_name is empty");
    if (auto why = too_long("agent_name", req->agent_name(), kMaxNameBytes); !why.empty())
      return Status(StatusCode::INVALID_ARGUMENT, why);
    LauncherRecord launcher;
    if (Status s = check_launcher(req->launcher_id(), req->launcher_secret(), launcher); !s.ok())
      return s;
    switch (store_.claim_agent_name(launcher.id, req->agent_name(), clock_.now())) {
      case ClaimResult::Claimed:
        spdlog::info("launcher.claim launcher={} agent_name={}", launcher.id, req->agent_name());
        return Status::OK;
      case ClaimResult::TakenByAgent:
        return Status(StatusCode::ALREADY_EXISTS, "an agent registered as " +
                                                      quoted_start(req->agent_name()) +
                                                      " before: choose another name");
      case ClaimResult::TakenByLauncher:
        return Status(StatusCode::ALREADY_EXISTS, "another launcher claimed " +
                                                      quoted_start(req->agent_name()) +
                                                      ": choose another name");
      case ClaimResult::UnknownLauncher:
        break;
    }
    return Status(StatusCode::PERMISSION_DENIED,
                  "unknown launcher " + quoted_start(launcher.id) + ": register again");
  });
}

Status AgentServiceImpl::FailAgentJob(grpc::ServerContext* ctx, const v1::FailAgentJobRequest* req,
                                      v1::FailAgentJobResponse* resp) {
  if (auto s = auth_.check(*ctx); !s.ok()) return s;
  if (auto s = check_request_bounds(*req); !s.ok()) return s;
  return guarded("FailAgentJob", [&] {
    if (req->agent_name().empty()) return Status(StatusCode::INVALID_ARGUMENT, "agent_name is empty");
    const v1::Verdict verdict = req->outcome().verdict();
    // INFRA_FAILURE only for an agent the guest's OOM killer took.
    const bool agent_oom = verdict == v1::VERDICT_INFRA_FAILURE &&
                           req->outcome().killed().reason() == v1::RUN_KILL_OUT_OF_MEMORY;
    if (verdict != v1::VERDICT_KERNEL_CRASH && verdict != v1::VERDICT_HANG &&
        verdict != v1::VERDICT_BOOT_FAILURE && !agent_oom)
      return Status(StatusCode::INVALID_ARGUMENT,
                    "outcome.verdict must be KERNEL_CRASH, HANG, BOOT_FAILURE, or INFRA_FAILURE "
                    "with killed.reason RUN_KILL_OUT_OF_MEMORY");
    LauncherRecord launcher;
    if (Status s = check_launcher(req->launcher_id(), req->launcher_secret(), launcher); !s.ok()) {
      spdlog::warn("job.fail_refused agent={} launcher={} error=\"{}\"", req->agent_name(),
                   req->launcher_id(), s.error_message());
      return s;
    }
    const auto claim = store_.agent_claim(req->agent_name());
    if (!claim || claim->launcher_id != launcher.id) {
      spdlog::warn("job.fail_refused agent={} launcher={} error=\"not its VM\"", req->agent_name(),
                   launcher.id);
      return Status(StatusCode::PERMISSION_DENIED, "agent " + quoted_start(req->agent_name()) +
                                                       " was not launched by launcher " +
                                                       quoted_start(launcher.id));
    }
    if (verdict != v1::VERDICT_BOOT_FAILURE) {
      if (!claim->agent)
        return Status(StatusCode::NOT_FOUND, "unknown agent " + quoted_start(req->agent_name()));
      // An agent that registered before the claim, or outside a VM, is not
      // the launcher's VM: a launcher that claimed a name it guessed cannot
      // end the jobs of the agent that later registers under it.
      if (!claim->agent->vm() || claim->registered_at < claim->claimed_at)
        return Status(StatusCode::PERMISSION_DENIED,
                      "agent " + quoted_start(req->agent_name()) +
                          " is not a VM this launcher booted (it registered before the claim, or "
                          "not from a VM)");
    }
    return end_launched_job(launcher, *req, *resp);
  });
}

Status AgentServiceImpl::end_launched_job(const LauncherRecord& launcher,
                                          const v1::FailAgentJobRequest& req,
                                          v1::FailAgentJobResponse& resp) {
  const v1::Verdict verdict = req.outcome().verdict();
  AgentJob held;
  if (verdict == v1::VERDICT_BOOT_FAILURE) {
    // No agent ever ran: the kernel's oldest queued job ends, leased in the
    // launcher's name.
    held = store_.lease_queued_job(launcher.id, launcher.kernel_label, clock_.now(),
                                   cfg_.lease_duration);
  } else if (auto job = store_.agent_job(req.agent_name(), req.job_id())) {
    held = std::move(*job);
  } else {
    return Status(StatusCode::NOT_FOUND, "unknown agent " + quoted_start(req.agent_name()));
  }
  if (held.job_id == 0) {
    spdlog::warn("job.fail_no_job agent={} launcher={} verdict={} kernel={}", req.agent_name(),
                 launcher.id, v1::Verdict_Name(verdict), launcher.kernel_label);
    return Status::OK;
  }
  if (store_.report_outcome(held.agent_id, held.job_id, held.attempt, req.outcome(),
                            clock_.now()) != ReportResult::Stored)
    return Status::OK;
  if (metrics_) metrics_->vm_failed(verdict);
  spdlog::warn(
      "job.failed_by_launcher job={} attempt={} agent={} launcher={} verdict={} error=\"{}\"",
      held.job_id, held.attempt, req.agent_name(), launcher.id, v1::Verdict_Name(verdict),
      req.outcome().error());
  resp.set_job_id(held.job_id);
  resp.set_attempt(held.attempt);
  return Status::OK;
}

}  // namespace leapfrog::coord
