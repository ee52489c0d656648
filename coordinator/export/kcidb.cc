// KCIDB v5.3 documents (kcidb.h).

#include "coordinator/export/kcidb.h"

#include <openssl/evp.h>

#include <cstdio>

#include "common/hex.h"
#include "common/ktap/words.h"
#include "common/proto_time.h"

namespace leapfrog::coord::exports {

using ktap::alignment_name;
using ktap::verdict_word;

using nlohmann::json;

namespace {

constexpr size_t kExcerptCap = 16384;  // the schema's maxLength of log_excerpt

std::string sha256_hex(const std::string& bytes) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_Digest(bytes.data(), bytes.size(), md, &len, EVP_sha256(), nullptr);
  return hex_encode(md, len);
}

// The last kExcerptCap bytes, cut at a line start, without NUL bytes.
std::string excerpt(const std::string& text) {
  std::string t = text;
  t.erase(std::remove(t.begin(), t.end(), '\0'), t.end());
  if (t.size() <= kExcerptCap) return t;
  t = t.substr(t.size() - kExcerptCap);
  const size_t nl = t.find('\n');
  return nl == std::string::npos ? t : t.substr(nl + 1);
}

// What names a kernel's checkout and build: its label and, for a registered
// kernel, its build inputs or image hash (a rebuilt label is another build).
std::string kernel_key(const CampaignData& d, const std::string& label) {
  const v1::Kernel* k = kernel_of(d, label);
  if (k && !k->inputs_hash().empty()) return label + "-" + k->inputs_hash().substr(0, 16);
  if (k && !k->sha256().empty()) return label + "-" + k->sha256().substr(0, 16);
  return label;
}

std::string state_word(v1::JobState s) {
  std::string n = v1::JobState_Name(s);
  if (n.rfind("JOB_STATE_", 0) == 0) n = n.substr(10);
  for (char& c : n) c = static_cast<char>(std::tolower(c));
  return n;
}

std::string issue_status_word(v1::IssueStatus s) {
  std::string n = v1::IssueStatus_Name(s);
  if (n.rfind("ISSUE_STATUS_", 0) == 0) n = n.substr(13);
  for (char& c : n) c = static_cast<char>(std::tolower(c));
  return n;
}

json checkout_of(const CampaignData& d, const std::string& label, const ExportOptions& o) {
  const v1::Kernel* k = kernel_of(d, label);
  json c{{"id", o.origin + ":checkout-" + kernel_key(d, label)},
         {"origin", o.origin},
         {"tree_name", label}};
  json misc{{"kernel_label", label}};
  if (k) {
    std::vector<std::string> hashes;
    json patches = json::array();
    for (const auto& p : k->patches()) {
      hashes.push_back(p.sha256());
      patches.push_back({{"name", p.name()}, {"sha256", p.sha256()}, {"subject", p.subject()}});
    }
    c["patchset_hash"] = patchset_hash(hashes);
    if (!k->version().empty()) c["comment"] = k->version();
    c["start_time"] = rfc3339(k->added_at());
    c["valid"] = k->status() != v1::KERNEL_STATUS_BUILD_FAILURE;
    misc["source"] = k->source();
    misc["patches"] = patches;
    if (!k->release().empty()) misc["release"] = k->release();
    if (!k->inputs_hash().empty()) misc["inputs_hash"] = k->inputs_hash();
  } else {
    c["comment"] = label == "host" ? "the agents' own running kernels" : "kernel label " + label;
  }
  c["misc"] = misc;
  return c;
}

json build_of(const CampaignData& d, const std::string& label, const ExportOptions& o) {
  const v1::Kernel* k = kernel_of(d, label);
  const std::string key = kernel_key(d, label);
  json b{{"id", o.origin + ":build-" + key},
         {"checkout_id", o.origin + ":checkout-" + key},
         {"origin", o.origin},
         {"architecture", "x86_64"}};
  json misc{{"kernel_label", label}};
  if (k) {
    if (!k->version().empty()) b["comment"] = k->version();
    b["start_time"] = rfc3339(k->added_at());
    if (seconds_of(k->build_time()) > 0) b["duration"] = seconds_of(k->build_time());
    b["status"] = k->status() == v1::KERNEL_STATUS_BUILD_FAILURE ? "FAIL" : "PASS";
    if (!k->build_log_tail().empty()) b["log_excerpt"] = excerpt(k->build_log_tail());
    if (!k->sha256().empty()) misc["vmlinux_sha256"] = k->sha256();
    if (!k->cmdline().empty()) misc["cmdline"] = k->cmdline();
    if (!k->build_log_path().empty()) misc["build_log_path"] = k->build_log_path();
    misc["status"] = ktap::kernel_status_word(k->status());
  } else {
    b["comment"] = "not built by Leapfrog";
  }
  b["misc"] = misc;
  return b;
}

json counts_of(const v1::Outcome& out) {
  json by_kind = json::object();
  for (const auto& [kind, n] : out.violations_by_kind()) by_kind[kind] = n;
  return {{"ops", out.ops()},
          {"lookups_checked", out.lookups_checked()},
          {"offsets_checked", out.offsets_checked()},
          {"violations", out.violation_count()},
          {"violations_by_kind", by_kind},
          {"race_window_hits", out.race_window_hits()},
          {"ops_per_sec", out.ops_per_sec()}};
}

json strategy_of(const v1::RaceStrategy& s) {
  return {{"alignment", alignment_name(s.alignment())},
          {"observers", s.observers()},
          {"aligned_observers", s.aligned_observers()},
          {"pinned", s.pinned()},
          {"chosen_by_seed",
           std::vector<std::string>(s.chosen_by_seed().begin(), s.chosen_by_seed().end())},
          {"widening", s.widening()}};
}

}  // namespace

std::string kcidb_status(v1::Verdict v) {
  switch (v) {
    case v1::VERDICT_PASS:
      return "PASS";
    case v1::VERDICT_VIOLATION:
    case v1::VERDICT_KERNEL_CRASH:
    case v1::VERDICT_HANG:
    case v1::VERDICT_BOOT_FAILURE:
      return "FAIL";
    case v1::VERDICT_ERROR:
      return "ERROR";
    case v1::VERDICT_INFRA_FAILURE:
    case v1::VERDICT_BUILD_FAILURE:
      return "MISS";
    case v1::VERDICT_INCONCLUSIVE:  // finished, neither passed nor failed
      return "DONE";
    default:
      return "";
  }
}

std::string patchset_hash(const std::vector<std::string>& patch_sha256s) {
  if (patch_sha256s.empty()) return "";
  std::string lines;
  for (const auto& h : patch_sha256s) lines += h + "\n";
  return sha256_hex(lines);
}

json to_kcidb(const CampaignData& d, const ExportOptions& o) {
  check_origin(o.origin);
  json checkouts = json::array(), builds = json::array(), tests = json::array();
  json issues = json::array(), incidents = json::array();
  for (const auto& label : kernel_labels(d)) {
    checkouts.push_back(checkout_of(d, label, o));
    builds.push_back(build_of(d, label, o));
  }
  std::map<int64_t, const v1::Issue*> seen_issues;
  for (const auto& job : d.jobs) {
    if (job.has_build()) continue;  // a kernel build job: its kernel is the build
    const v1::OutcomeRecord* rec = job_outcome(d, job);
    const std::string build_id = o.origin + ":build-" + kernel_key(d, job.kernel_label());
    const std::string test_id = o.origin + ":job-" + std::to_string(job.job_id());
    json t{{"id", test_id},
           {"build_id", build_id},
           {"origin", o.origin},
           {"path", test_path(job.spec())},
           {"comment", job.spec().scenario() + " on " + job.spec().fs() + ", seed " +
                           std::to_string(job.spec().seed())}};
    const v1::Verdict verdict =
        job.state() == v1::JOB_STATE_DONE ? job.verdict() : v1::VERDICT_UNSPECIFIED;
    const std::string status = kcidb_status(verdict);
    if (!status.empty()) t["status"] = status;
    json misc{{"seed", job.spec().seed()},         {"fs", job.spec().fs()},
              {"scenario", job.spec().scenario()}, {"kernel_label", job.kernel_label()},
              {"campaign_id", job.campaign_id()},  {"job_id", job.job_id()},
              {"attempt", job.attempt()},          {"state", state_word(job.state())}};
    if (verdict != v1::VERDICT_UNSPECIFIED) misc["verdict"] = verdict_word(verdict);
    if (!job.reason().empty()) misc["reason"] = job.reason();
    const std::string link = job_link(o, job.job_id());
    if (!link.empty()) misc["url"] = link;
    if (rec) {
      const v1::Outcome& out = rec->outcome();
      misc["strategy"] = strategy_of(out.strategy());
      misc["counts"] = counts_of(out);
      misc["clock_source"] = out.clock_source();
      misc["agent_id"] = rec->agent_id();
      // Why the run was killed (the OOM killer, a signal, a crash), typed.
      if (out.has_killed() && out.killed().reason() != v1::RUN_KILL_UNSPECIFIED) {
        misc["killed"] = {{"reason", v1::RunKill_Name(out.killed().reason())},
                          {"signal", out.killed().signal()},
                          {"line", out.killed().line()}};
      }
      if (out.run().peak_rss_bytes() > 0) misc["peak_rss_bytes"] = out.run().peak_rss_bytes();
      if (out.has_elapsed()) t["duration"] = seconds_of(out.elapsed());
      if (out.has_finished_at()) {
        google::protobuf::Timestamp start = out.finished_at();
        if (out.has_elapsed()) {
          const int64_t ns = start.seconds() * 1000000000LL + start.nanos() -
                             (out.elapsed().seconds() * 1000000000LL + out.elapsed().nanos());
          start.set_seconds(ns / 1000000000LL);
          start.set_nanos(static_cast<int32_t>(ns % 1000000000LL));
        }
        t["start_time"] = rfc3339(start);
      }
      std::string log = violation_summary(out);
      if (!out.console_tail().empty()) log += (log.empty() ? "" : "\n") + out.console_tail();
      if (!log.empty()) t["log_excerpt"] = excerpt(log);
      t["environment"] = {{"comment", "agent " + rec->agent_id()},
                          {"misc", {{"agent_id", rec->agent_id()}}}};
      for (const v1::Issue* issue : outcome_issues(d, *rec)) {
        seen_issues[issue->id()] = issue;
        incidents.push_back({{"id", o.origin + ":incident-" + std::to_string(job.job_id()) + "-" +
                                        std::to_string(issue->id())},
                             {"origin", o.origin},
                             {"issue_id", o.origin + ":issue-" + std::to_string(issue->id())},
                             {"issue_version", issue->regressions()},
                             {"test_id", test_id},
                             {"build_id", build_id},
                             {"present", true},
                             {"comment", issue->title()}});
      }
    }
    t["misc"] = misc;
    tests.push_back(std::move(t));
  }
  for (const auto& [id, issue] : seen_issues) {
    const bool harness = issue->status() == v1::ISSUE_STATUS_INVALID;
    const std::string kind = ktap::issue_kind_word(issue->kind());
    json i{{"id", o.origin + ":issue-" + std::to_string(id)},
           {"version", issue->regressions()},
           {"origin", o.origin},
           {"comment", issue->title()},
           {"report_subject", issue->title()},
           {"categories", json::array({"leapfrog." + (kind.empty() ? "unknown" : kind)})},
           {"culprit", {{"code", !harness}, {"tool", false}, {"harness", harness}}},
           {"misc",
            {{"signature", issue->signature()},
             {"status", issue_status_word(issue->status())},
             {"scenario", issue->scenario()},
             {"count", issue->count()},
             {"first_seen", rfc3339(issue->first_seen())},
             {"last_seen", rfc3339(issue->last_seen())}}}};
    const std::string link = issue_link(o, id);
    if (!link.empty()) i["report_url"] = link;
    issues.push_back(std::move(i));
  }
  return {{"version", {{"major", 5}, {"minor", 3}}},
          {"checkouts", checkouts},
          {"builds", builds},
          {"tests", tests},
          {"issues", issues},
          {"incidents", incidents}};
}

}  // namespace leapfrog::coord::exports
