#pragma once
// The coordinator, as a VM launcher sees it: the control service (kernels,
// agents) and the launcher's calls of the agent service (agent.proto): it
// registers, claims the name of each VM it boots, and ends the jobs of those
// VMs' agents when a VM crashes, hangs or does not boot.

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
  // The registered agents among `names` (this launcher's VMs), by name;
  // nullopt when the coordinator did not answer (logged).
  std::optional<std::map<std::string, v1::AgentInfo>> agents(const std::vector<std::string>& names);
  // Registers this launcher, whose VMs boot `kernel_label`, retrying a few
  // times while the coordinator is unavailable. Throws std::runtime_error.
  void register_launcher(const std::string& name, const std::string& kernel_label);
  // Claims `agent_name` for a VM about to boot; false when an agent or
  // another launcher has it (choose another). Throws std::runtime_error.
  bool claim(const std::string& agent_name);
  // Ends the job the VM agent `name` holds (or `job_id`) with `outcome`;
  // for a BOOT_FAILURE, one queued job of the kernel. Retries a few times
  // while the coordinator is unavailable; a refusal is logged.
  void fail_job(const std::string& name, int64_t job_id, const v1::Outcome& outcome);

 private:
  std::unique_ptr<grpc::ClientContext> ctx() const;

  std::string token_;
  std::string launcher_id_, launcher_secret_;
  std::unique_ptr<v1::ControlService::Stub> control_;
  std::unique_ptr<v1::AgentService::Stub> agent_;
};

}  // namespace leapfrog::vm
