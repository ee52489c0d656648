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

// Makes `call` with a fresh context from `make_ctx` until it answers anything
// but UNAVAILABLE, at most kAttempts times, pausing after each UNAVAILABLE;
// the last answer.
template <typename MakeCtx, typename Call>
grpc::Status retrying(const MakeCtx& make_ctx, const Call& call) {
  grpc::Status s;
  for (int attempt = 0; attempt < kAttempts; ++attempt) {
    auto c = make_ctx();
    s = call(c.get());
    if (s.error_code() != grpc::StatusCode::UNAVAILABLE) return s;
    std::this_thread::sleep_for(kRetryPause);
  }
  return s;
}

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

std::optional<std::map<std::string, v1::AgentInfo>> CoordinatorClient::agents(
    const std::vector<std::string>& names) {
  v1::ListAgentsRequest req;
  for (const auto& n : names) req.add_names(n);
  v1::ListAgentsResponse resp;
  auto c = ctx();
  const auto s = control_->ListAgents(c.get(), req, &resp);
  if (!s.ok()) {
    spdlog::warn("vm.list_agents_failed error=\"{}\"", s.error_message());
    return std::nullopt;
  }
  std::map<std::string, v1::AgentInfo> out;
  for (const auto& a : resp.agents()) out[a.name()] = a;
  return out;
}

void CoordinatorClient::register_launcher(const std::string& name,
                                          const std::string& kernel_label) {
  v1::RegisterLauncherRequest req;
  req.set_name(name);
  req.set_kernel_label(kernel_label);
  v1::RegisterLauncherResponse resp;
  const grpc::Status s =
      retrying([this] { return ctx(); },
               [&](grpc::ClientContext* c) { return agent_->RegisterLauncher(c, req, &resp); });
  if (s.ok()) {
    launcher_id_ = resp.launcher_id();
    launcher_secret_ = resp.launcher_secret();
    spdlog::info("vm.launcher_registered launcher={} name={}", launcher_id_, name);
    return;
  }
  throw std::runtime_error("cannot register the launcher with the coordinator: " +
                           s.error_message());
}

bool CoordinatorClient::claim(const std::string& agent_name) {
  v1::ClaimAgentNameRequest req;
  req.set_launcher_id(launcher_id_);
  req.set_launcher_secret(launcher_secret_);
  req.set_agent_name(agent_name);
  v1::ClaimAgentNameResponse resp;
  const grpc::Status s =
      retrying([this] { return ctx(); },
               [&](grpc::ClientContext* c) { return agent_->ClaimAgentName(c, req, &resp); });
  if (s.ok()) return true;
  if (s.error_code() == grpc::StatusCode::ALREADY_EXISTS) {
    spdlog::warn("vm.name_taken agent={} error=\"{}\"", agent_name, s.error_message());
    return false;
  }
  throw std::runtime_error("cannot claim the VM agent name \"" + agent_name +
                           "\": " + s.error_message());
}

void CoordinatorClient::fail_job(const std::string& name, int64_t job_id,
                                 const v1::Outcome& outcome) {
  v1::FailAgentJobRequest req;
  req.set_agent_name(name);
  req.set_job_id(job_id);
  req.set_launcher_id(launcher_id_);
  req.set_launcher_secret(launcher_secret_);
  *req.mutable_outcome() = outcome;
  const std::string verdict = v1::Verdict_Name(outcome.verdict());
  v1::FailAgentJobResponse resp;
  const grpc::Status s =
      retrying([this] { return ctx(); },
               [&](grpc::ClientContext* c) { return agent_->FailAgentJob(c, req, &resp); });
  if (s.ok()) {
    spdlog::warn("vm.job_failed agent={} job={} attempt={} verdict={} error=\"{}\"", name,
                 resp.job_id(), resp.attempt(), verdict, outcome.error());
  } else if (s.error_code() != grpc::StatusCode::UNAVAILABLE) {
    spdlog::error("vm.fail_job_refused agent={} verdict={} error=\"{}\"", name, verdict,
                  s.error_message());
  } else {
    spdlog::error("vm.fail_job_unreported agent={} verdict={}: the coordinator is unavailable",
                  name, verdict);
  }
}

}  // namespace leapfrog::vm
