#pragma once
// The coordinator, as a VM launcher sees it: the control service (kernels,
// agents) and the agent service (ending a VM agent's job when its VM
// crashes, hangs or does not boot).

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "leapfrog/v1/agent.grpc.pb.h"
#include "leapfrog/v1/control.grpc.pb.h"

namespace leapfrog::vm {

class CoordinatorClient {
 public:
  CoordinatorClient(const std::string& address, std::string token);

  // The kernel registered under `label`; nullopt when there is none (yet: a
  // campaign's build job may be building it). Throws std::runtime_error
  // when the coordinator does not answer.
  std::optional<v1::Kernel> find_kernel(const std::string& label);
  // Agents by name; nullopt when the coordinator did not answer (logged).
  std::optional<std::map<std::string, v1::AgentInfo>> agents();
  // Ends the job the VM agent `name` holds (or `job_id`) with `outcome`.
  // Retries a few times while the coordinator is unavailable; a refusal is
  // logged.
  void fail_job(const std::string& name, int64_t job_id, const v1::Outcome& outcome);
  // A VM that did not boot has no agent: registers under the VM's agent
  // name, leases one queued job of the kernel, and reports the boot failure
  // on it.
  void report_boot_failure(const std::string& name, const std::string& label,
                           const v1::Outcome& outcome);

 private:
  std::unique_ptr<grpc::ClientContext> ctx() const;

  std::string token_;
  std::unique_ptr<v1::ControlService::Stub> control_;
  std::unique_ptr<v1::AgentService::Stub> agent_;
};

}  // namespace leapfrog::vm
