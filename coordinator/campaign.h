#pragma once
// Turns a campaign spec (scenarios x kernels x file systems x seeds) into jobs,
// after checking it against the scenario catalogue.

#include <stdexcept>
#include <string>
#include <vector>

#include "coordinator/store/store.h"

namespace leapfrog::coord {

// The spec is malformed; the message says what is wrong (-> INVALID_ARGUMENT).
class SpecError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

inline constexpr uint32_t kMaxJobsPerCampaign = 100'000;
inline constexpr uint32_t kDefaultMaxAttempts = 3;
// Scenario and file system of a kernel build job. Only a builder's lease
// (Store::lease_build_job) takes build jobs, whatever an agent advertises.
inline constexpr const char* kBuildJobScenario = "kernel-build";

// The VM launcher's test hooks (selftest-crash, selftest-hang): accepted in
// campaigns, run only by VM agents started with --selftest (agent/connect.cc);
// every other agent ends them as ERROR.
bool is_selftest_scenario(const std::string& name);

// Fills defaults (kernels: ["host"], seeds: 1, duration: 2 s, max_attempts: 3)
// and validates every field; throws SpecError.
v1::CampaignSpec normalize(const v1::CampaignSpec& spec);

// The jobs of a normalized spec, in a stable order; the build jobs of
// spec.builds come last.
std::vector<NewJob> expand(const v1::CampaignSpec& spec);

// Why jobs of a normalized spec would wait with nothing to run them, one
// line per kernel label (or label and file system): no registered agent runs
// the label, none of its agents offers the file system, or its agents are
// all offline. Labels the campaign builds are skipped (their VMs come after
// the build). `agents`: every registered agent, with `online` set;
// `kernels`: the registered kernels (one whose build failed cannot boot).
// Empty when every job has an
// agent that could lease it.
std::vector<std::string> unserved(const v1::CampaignSpec& spec,
                                  const std::vector<v1::AgentInfo>& agents,
                                  const std::vector<v1::Kernel>& kernels);

// unserved() for a stored campaign, against the store's agents (online when
// seen at or after `online_since`) and kernels; empty once none of its jobs
// is queued.
std::vector<std::string> unserved(Store& store, const v1::Campaign& c, TimePoint online_since);

}  // namespace leapfrog::coord
