// Row mappers (pg_rows.h).

#include "coordinator/store/pg_rows.h"

#include <algorithm>
#include <map>
#include <utility>

#include "common/ktap/words.h"
#include "coordinator/store/pg_summaries.h"
#include "coordinator/store/pg_util.h"

namespace leapfrog::coord {

std::vector<v1::OutcomeRecord> outcome_records(pqxx::work& txn, const pqxx::result& rows,
                                               bool with_violations) {
  std::vector<v1::OutcomeRecord> out;
  std::map<std::pair<int64_t, uint32_t>, size_t> index;
  std::vector<int64_t> job_ids;
  std::vector<uint32_t> attempts;
  for (const auto& r : rows) {
    v1::OutcomeRecord o;
    o.set_job_id(r[0].as<int64_t>());
    o.set_attempt(r[1].as<uint32_t>());
    o.set_campaign_id(r[2].as<int64_t>());
    *o.mutable_spec() = parse<v1::ScenarioSpec>(r[3], "scenario spec");
    o.set_kernel_label(r[4].as<std::string>());
    o.set_agent_id(r[5].as<std::string>());
    *o.mutable_outcome() = parse_outcome(r[6]);
    set_timestamp(o.mutable_reported_at(), r[7].as<int64_t>());
    o.set_superseded(r[8].as<bool>());
    index[{o.job_id(), o.attempt()}] = out.size();
    job_ids.push_back(o.job_id());
    attempts.push_back(o.attempt());
    out.push_back(std::move(o));
  }
  if (out.empty() || !with_violations) return out;
  const std::string ids = number_array(job_ids);
  const std::string tries = number_array(attempts);
  auto outcome_of = [&](const pqxx::row& r) -> v1::Outcome& {
    return *out[index.at({r[0].as<int64_t>(), r[1].as<uint32_t>()})].mutable_outcome();
  };
  bool any = false;
  for (const auto& r : txn.exec_prepared("outcome_violations", ids, tries)) {
    violation_from_row(r, 2, outcome_of(r).add_violations());
    any = true;
  }
  if (!any) return out;  // no violation, so no details to attach
  for (const auto& r : txn.exec_prepared("outcome_violation_details", ids, tries))
    attach_violation_details(r[2], outcome_of(r));
  return out;
}

void attach_violation_details(const pqxx::field& details, v1::Outcome& o) {
  const auto all = parse<v1::ViolationDetails>(details, "violation details");
  const int n = std::min(all.details_size(), o.violations_size());
  for (int i = 0; i < n; ++i) {
    v1::Violation* v = o.mutable_violations(i);
    // An empty entry stands for a violation that came without a typed detail.
    if (v->has_detail() || all.details(i).ByteSizeLong() == 0) continue;
    *v->mutable_detail() = all.details(i);
  }
}

void violation_from_row(const pqxx::row& r, int first, v1::Violation* v) {
  v->set_kind(ktap::violation_kind_from(r[first].as<std::string>()));
  v->set_actor(r[first + 1].as<uint32_t>());
  v->set_op(r[first + 2].as<std::string>());
  v->set_path(r[first + 3].as<std::string>());
  v->set_step(r[first + 4].as<int32_t>());
  v->set_component(r[first + 5].as<std::string>());
  v->set_object(r[first + 6].as<std::string>());
  v->set_observed(r[first + 7].as<std::string>());
  v->set_expected(r[first + 8].as<std::string>());
  v->set_invoke_ns(r[first + 9].as<int64_t>());
  v->set_complete_ns(r[first + 10].as<int64_t>());
  // A row stored between migrations 14 and 15 has its typed detail; the
  // others have theirs in the outcome's violation_details value.
  if (!r[first + 12].is_null())
    *v->mutable_detail() = parse<v1::ViolationDetail>(r[first + 12], "violation detail");
}

v1::JobInfo job_info_from_row(const pqxx::row& r) {
  v1::JobInfo j;
  j.set_job_id(r[0].as<int64_t>());
  j.set_campaign_id(r[1].as<int64_t>());
  *j.mutable_spec() = parse<v1::ScenarioSpec>(r[2], "scenario spec");
  j.set_kernel_label(r[3].as<std::string>());
  j.set_state(job_state(r[4].as<std::string>()));
  j.set_attempt(r[5].as<uint32_t>());
  j.set_agent_id(r[6].as<std::string>());
  j.set_verdict(static_cast<v1::Verdict>(r[7].as<int>()));
  j.set_reason(r[8].as<std::string>());
  if (r.size() > 10) {
    if (!r[9].is_null()) {
      *j.mutable_build() = parse<v1::KernelBuild>(r[9], "kernel build");
      // Lists show a build's files by name and sha256; only the builder's
      // lease carries their bytes (lease_build).
      for (auto* files : {j.mutable_build()->mutable_patch_files(), j.mutable_build()->mutable_config_files()})
        for (auto& f : *files) f.clear_content();
    }
    j.set_release(r[10].as<std::string>());
  }
  if (r.size() > 14 && r[11].as<int64_t>() >= 0) {
    v1::JobProgress* p = j.mutable_progress();
    p->set_operations(static_cast<uint64_t>(r[11].as<int64_t>()));
    p->set_lookups_judged(static_cast<uint64_t>(r[12].as<int64_t>()));
    p->set_violations(static_cast<uint64_t>(r[13].as<int64_t>()));
    set_timestamp(p->mutable_updated_at(), r[14].as<int64_t>());
  }
  return j;
}

v1::Schedule schedule_from_row(const pqxx::row& r) {
  v1::Schedule s;
  s.set_id(r[0].as<int64_t>());
  s.set_name(r[1].as<std::string>());
  s.set_cron(r[2].as<std::string>());
  *s.mutable_campaign() = parse<v1::CampaignSpec>(r[3], "campaign spec");
  s.set_enabled(r[4].as<bool>());
  set_timestamp(s.mutable_next_run(), r[5].as<int64_t>());
  if (!r[6].is_null()) set_timestamp(s.mutable_last_run(), r[6].as<int64_t>());
  return s;
}

std::vector<v1::Campaign> campaigns_with_counts(pqxx::work& txn, const pqxx::result& rows) {
  std::vector<v1::Campaign> out;
  for (const auto& r : rows) {
    v1::Campaign c;
    c.set_id(r[0].as<int64_t>());
    *c.mutable_spec() = parse<v1::CampaignSpec>(r[1], "campaign spec");
    c.set_schedule_id(r[2].as<int64_t>());
    c.set_jobs(r[3].as<uint32_t>());
    set_timestamp(c.mutable_created_at(), r[4].as<int64_t>());
    out.push_back(std::move(c));
  }
  add_campaign_counts(txn, out);  // from the summaries
  return out;
}

v1::Job job_from_row(const pqxx::row& r) {
  v1::Job job;
  job.set_job_id(r[0].as<int64_t>());
  job.set_attempt(r[1].as<uint32_t>());
  job.set_campaign_id(r[2].as<int64_t>());
  *job.mutable_spec() = parse<v1::ScenarioSpec>(r[3], "scenario spec");
  job.set_kernel_label(r[4].as<std::string>());
  set_timestamp(job.mutable_lease_deadline(), r[5].as<int64_t>());
  return job;
}

// Leases a job for each caller of `batch`, one autocommit statement per set

v1::Kernel kernel_from_row(const pqxx::row& r) {
  v1::Kernel k;
  if (!r[6].is_null()) k = parse<v1::Kernel>(r[6], "kernel");
  k.set_status(ktap::kernel_status_from(r[5].as<std::string>()));
  k.set_label(r[0].as<std::string>());
  k.set_version(r[1].as<std::string>());
  k.set_sha256(r[2].as<std::string>());
  k.set_source(r[3].as<std::string>());
  set_timestamp(k.mutable_added_at(), r[4].as<int64_t>());
  return k;
}

v1::AgentInfo agent_from_row(const pqxx::row& r) {
  v1::AgentInfo a;
  a.set_agent_id(r[0].as<std::string>());
  a.set_name(r[1].as<std::string>());
  *a.mutable_capabilities() = parse<v1::Capabilities>(r[2], "agent capabilities");
  set_timestamp(a.mutable_registered_at(), r[3].as<int64_t>());
  set_timestamp(a.mutable_last_seen(), r[4].as<int64_t>());
  a.set_online(r[5].as<bool>());
  a.set_current_job(r[6].as<int64_t>());
  return a;
}

}  // namespace leapfrog::coord
