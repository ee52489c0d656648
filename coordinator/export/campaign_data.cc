// Shared rules of the exports (campaign_data.h).

#include "coordinator/export/campaign_data.h"

#include <google/protobuf/util/time_util.h>

#include <algorithm>
#include <set>
#include <stdexcept>

#include "common/ktap/words.h"
#include "coordinator/triage/signature.h"

namespace leapfrog::coord::exports {

void check_origin(const std::string& origin) {
  const bool ok = !origin.empty() && std::all_of(origin.begin(), origin.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
  });
  if (!ok)
    throw std::invalid_argument("bad origin \"" + origin +
                                "\": want lowercase letters, digits and '_' ([a-z0-9_]+)");
}

const v1::OutcomeRecord* job_outcome(const CampaignData& d, const v1::JobInfo& job) {
  const v1::OutcomeRecord* best = nullptr;
  for (const auto& o : d.outcomes) {
    if (o.job_id() != job.job_id()) continue;
    if (o.attempt() == job.attempt()) return &o;
    if (!best || o.attempt() > best->attempt()) best = &o;
  }
  return best;
}

std::string test_path(const v1::ScenarioSpec& spec) {
  auto part = [](const std::string& s) {
    std::string out;
    for (char c : s) {
      const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                      c == '_' || c == '-';
      out += ok ? c : '_';
    }
    return out.empty() ? std::string("_") : out;
  };
  return "leapfrog." + part(spec.scenario()) + "." + part(spec.fs());
}

std::vector<const v1::Issue*> outcome_issues(const CampaignData& d, const v1::OutcomeRecord& o) {
  std::vector<const v1::Issue*> out;
  for (const auto& sig : triage::outcome_signatures(o.spec(), o.outcome())) {
    for (const auto& issue : d.issues) {
      if (issue.signature() == sig.key) {
        out.push_back(&issue);
        break;
      }
    }
  }
  return out;
}

const v1::Kernel* kernel_of(const CampaignData& d, const std::string& label) {
  for (const auto& k : d.kernels)
    if (k.label() == label) return &k;
  return nullptr;
}

std::vector<std::string> kernel_labels(const CampaignData& d) {
  std::set<std::string> labels;
  for (const auto& j : d.jobs)
    if (!j.has_build()) labels.insert(j.kernel_label());
  return {labels.begin(), labels.end()};
}

std::string issue_link(const ExportOptions& o, int64_t issue_id) {
  if (o.link_base.empty()) return "";
  std::string base = o.link_base;
  while (!base.empty() && base.back() == '/') base.pop_back();
  return base + "/#/issues/" + std::to_string(issue_id);
}

std::string job_link(const ExportOptions& o, int64_t job_id) {
  if (o.link_base.empty()) return "";
  std::string base = o.link_base;
  while (!base.empty() && base.back() == '/') base.pop_back();
  return base + "/#/jobs/" + std::to_string(job_id);
}

std::string violation_summary(const v1::Outcome& o) {
  if (o.violation_count() == 0) return o.error();
  std::string s = std::to_string(o.violation_count()) +
                  (o.violation_count() == 1 ? " violation" : " violations");
  if (o.violations_size() > 0) {
    const auto& v = o.violations(0);
    s += ": " + ktap::violation_kind_word(v.kind()) + " " + v.op() + " " + v.path() + " step " +
         std::to_string(v.step()) + " (" + v.component() + ") observed " + v.observed() +
         ", expected " + v.expected();
  }
  return s;
}

std::string rfc3339(const google::protobuf::Timestamp& t) {
  return google::protobuf::util::TimeUtil::ToString(t);
}

}  // namespace leapfrog::coord::exports
