#pragma once
// What an export of one campaign is made from, gathered once (from the store
// in the coordinator, over gRPC in the CLI), and the rules every format
// shares: which outcome is a job's, a job's test path, which issues an outcome
// carries.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "leapfrog/v1/control.pb.h"
#include "leapfrog/v1/triage.pb.h"

namespace leapfrog::coord::exports {

struct CampaignData {
  v1::Campaign campaign;
  // In job id order, kernel build jobs included.
  std::vector<v1::JobInfo> jobs;
  // Every stored outcome of the campaign (any attempt).
  std::vector<v1::OutcomeRecord> outcomes;
  // Registered kernels (those of the campaign's labels are used).
  std::vector<v1::Kernel> kernels;
  // Known issues (matched to outcomes by signature); empty without triage.
  std::vector<v1::Issue> issues;
};

struct ExportOptions {
  // KCIDB origin: the name of the submitting CI system, [a-z0-9_]+.
  std::string origin = "leapfrog";
  // Base URL of the dashboard ("http://127.0.0.1:8080"); empty: no links.
  std::string link_base;
};

// Throws std::invalid_argument unless `origin` matches [a-z0-9_]+.
void check_origin(const std::string& origin);

// The job's outcome: its current attempt's, else its latest; null if none.
const v1::OutcomeRecord* job_outcome(const CampaignData& d, const v1::JobInfo& job);

// "leapfrog.<scenario>.<fs>", with any character KCIDB's path rule refuses
// ([a-zA-Z0-9_-] per dot-separated part) replaced by '_'.
std::string test_path(const v1::ScenarioSpec& spec);

// Issues whose signature the outcome carries, in the outcome's order.
std::vector<const v1::Issue*> outcome_issues(const CampaignData& d, const v1::OutcomeRecord& o);

// The registered kernel with that label, if any.
const v1::Kernel* kernel_of(const CampaignData& d, const std::string& label);

// Kernel labels of the campaign's test jobs, sorted, each once.
std::vector<std::string> kernel_labels(const CampaignData& d);

// "<link_base>/#/issues/<id>", "" without a link base.
std::string issue_link(const ExportOptions& o, int64_t issue_id);
std::string job_link(const ExportOptions& o, int64_t job_id);

// One line for people: "3 violations: stale-grant stat a/b/c step 2 ...".
std::string violation_summary(const v1::Outcome& o);

// A Timestamp in RFC 3339 UTC.
std::string rfc3339(const google::protobuf::Timestamp& t);

}  // namespace leapfrog::coord::exports
