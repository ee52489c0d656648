#include "coordinator/vm/coordinator_client.h"

#include <grpcpp/grpcpp.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <stdexcept>
#include <thread>

#include "coordinator/channel.h"

namespace leapfrog::vm {
namespace {

constexpr int kAttempts = 5;
constexpr std::chrono::milliseconds kRetryPause{500};

}  // namespace

CoordinatorClient::CoordinatorClient(const std::string& address, std::string token)
    : token_(std::move(token)) {
  auto channel = coord::coordinator_channel(address);
  control_ = v1::ControlService::NewStub(channel);
  agent_ = v1::AgentService::NewStub(channel);
}

std::unique_ptr<grpc::ClientContext> CoordinatorClient::ctx() const {
  auto c = std::make_unique<grpc::ClientContext>();
  c->AddMetadata("authorization", "Bearer " + token_);
  c->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  return c;
}

std::optional<v1::Kernel> CoordinatorClient::find_kernel(const std::string& label) {
  v1::ListKernelsResponse resp;
  auto c = ctx();
  const auto s = control_->ListKernels(c.get(), v1::ListKernelsRequest(), &resp);
  if (!s.ok()) throw std::runtime_error("cannot list kernels: " + s.error_message());
  for (const auto& k : resp.kernels())
    if (k.label() == label) return k;
  return std::nullopt;
}

std::optional<std::map<std::string, v1::AgentInfo>> CoordinatorClient::agents() {
  v1::ListAgentsResponse resp;
  auto c = ctx();
  const auto s = control_->ListAgents(c.get(), v1::ListAgentsRequest(), &resp);
  if (!s.ok()) {
    spdlog::warn("vm.list_agents_failed error=\"{}\"", s.error_message());
    return std::nullopt;
  }
  std::map<std::string, v1::AgentInfo> out;
  for (const auto& a : resp.agents()) out[a.name()] = a;
  return out;
}

void CoordinatorClient::fail_job(const std::string& name, int64_t job_id,
                                 const v1::Outcome& outcome) {
  v1::FailAgentJobRequest req;
  req.set_agent_name(name);
  req.set_job_id(job_id);
  *req.mutable_outcome() = outcome;
  const std::string verdict = v1::Verdict_Name(outcome.verdict());
  for (int attempt = 0; attempt < kAttempts; ++attempt) {
    v1::FailAgentJobResponse resp;
    auto c = ctx();
    const auto s = agent_->FailAgentJob(c.get(), req, &resp);
    if (s.ok()) {
      spdlog::warn("vm.job_failed agent={} job={} attempt={} verdict={} error=\"{}\"", name,
                   resp.job_id(), resp.attempt(), verdict, outcome.error());
      return;
    }
    if (s.error_code() != grpc::StatusCode::UNAVAILABLE) {
      spdlog::error("vm.fail_job_refused agent={} verdict={} error=\"{}\"", name, verdict,
                    s.error_message());
      return;
    }
    std::this_thread::sleep_for(kRetryPause);
  }
  spdlog::error("vm.fail_job_unreported agent={} verdict={}: the coordinator is unavailable", name,
                verdict);
}

void CoordinatorClient::report_boot_failure(const std::string& name, const std::string& label,
                                            const v1::Outcome& outcome) {
  v1::RegisterRequest reg;
  reg.set_name(name);
  auto* caps = reg.mutable_capabilities();
  caps->set_kernel_label(label);
  caps->add_filesystems("tmpfs");
  caps->set_root(true);
  caps->set_vm(true);
  caps->set_uname("(did not boot)");
  v1::RegisterResponse rr;
  auto c1 = ctx();
  auto s = agent_->Register(c1.get(), reg, &rr);
  if (!s.ok()) {
    spdlog::error("vm.boot_failure_unreported agent={} error=\"{}\"", name, s.error_message());
    return;
  }
  v1::LeaseRequest lr;
  lr.set_agent_id(rr.agent_id());
  lr.set_agent_secret(rr.agent_secret());
  lr.mutable_wait()->set_seconds(0);
  v1::LeaseResponse lease;
  auto c2 = ctx();
  s = agent_->Lease(c2.get(), lr, &lease);
  if (!s.ok() || !lease.has_job()) {
    spdlog::error("vm.boot_failure_no_job agent={} kernel={} error=\"{}\"", name, label,
                  outcome.error());
    return;
  }
  v1::ReportOutcomeRequest rep;
  rep.set_agent_id(rr.agent_id());
  rep.set_agent_secret(rr.agent_secret());
  rep.set_job_id(lease.job().job_id());
  rep.set_attempt(lease.job().attempt());
  *rep.mutable_outcome() = outcome;
  v1::ReportOutcomeResponse rresp;
  auto c3 = ctx();
  s = agent_->ReportOutcome(c3.get(), rep, &rresp);
  spdlog::error("vm.boot_failure agent={} kernel={} job={} reported={} error=\"{}\"", name, label,
                lease.job().job_id(), s.ok(), outcome.error());
}

}  // namespace leapfrog::vm
