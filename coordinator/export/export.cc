// Formats, rendering and gathering of campaign exports (export.h).

#include "coordinator/export/export.h"

#include <sstream>
#include <stdexcept>

#include "coordinator/export/junit.h"
#include "coordinator/export/kcidb.h"
#include "common/ktap/ktap.h"
#include "coordinator/triage/triage_engine.h"

namespace leapfrog::coord::exports {

Format parse_format(const std::string& name) {
  if (name == "kcidb") return Format::Kcidb;
  if (name == "junit") return Format::Junit;
  if (name == "ktap") return Format::Ktap;
  throw std::invalid_argument("bad format \"" + name + "\": want kcidb, junit or ktap");
}

std::string format_name(Format f) {
  switch (f) {
    case Format::Kcidb:
      return "kcidb";
    case Format::Junit:
      return "junit";
    case Format::Ktap:
      return "ktap";
  }
  return "";
}

std::string file_suffix(Format f) {
  switch (f) {
    case Format::Kcidb:
      return ".kcidb.json";
    case Format::Junit:
      return ".junit.xml";
    case Format::Ktap:
      return ".ktap";
  }
  return "";
}

std::string content_type(Format f) {
  switch (f) {
    case Format::Kcidb:
      return "application/json";
    case Format::Junit:
      return "application/xml";
    case Format::Ktap:
      return "text/plain; charset=utf-8";
  }
  return "";
}

std::string to_ktap(const CampaignData& d, const ExportOptions& o) {
  const v1::Campaign& c = d.campaign;
  std::vector<const v1::JobInfo*> jobs;
  for (const auto& j : d.jobs)
    if (!j.has_build()) jobs.push_back(&j);
  const std::string suite = ktap::safe_name("leapfrog.campaign-" + std::to_string(c.id()) +
                                            (c.spec().name().empty() ? "" : "." + c.spec().name()));
  std::ostringstream out;
  out << "KTAP version 1\n";
  out << "1..1\n";
  out << "# leapfrog campaign " << c.id() << " created " << rfc3339(c.created_at()) << "\n";
  out << "  KTAP version 1\n";
  out << "  # Subtest: " << suite << "\n";
  out << "  1.." << jobs.size() << "\n";
  bool failed = false;
  int n = 0;
  for (const v1::JobInfo* job : jobs) {
    const v1::OutcomeRecord* rec = job_outcome(d, *job);
    ktap::JobLines l;
    l.number = ++n;
    l.name = job->spec().scenario() + "." + job->spec().fs() + "." + job->kernel_label() + ".seed" +
             std::to_string(job->spec().seed()) + ".job" + std::to_string(job->job_id());
    l.spec = &job->spec();
    l.kernel = job->kernel_label();
    l.indent = 2;
    if (job->state() == v1::JOB_STATE_DONE) {
      l.verdict = job->verdict();
      l.outcome = rec ? &rec->outcome() : nullptr;
      l.why_not = job->reason();
      if (rec) {
        for (const v1::Issue* issue : outcome_issues(d, *rec)) {
          std::string note = "issue " + std::to_string(issue->id()) + ": " + issue->title();
          const std::string link = issue_link(o, issue->id());
          if (!link.empty()) note += " " + link;
          l.notes.push_back(note);
        }
      }
    } else {
      l.why_not = "not run yet (" + v1::JobState_Name(job->state()) + ")";
    }
    const ktap::Result r = ktap::result_of(l.verdict);
    failed = failed ||
             (r != ktap::Result::Pass && r != ktap::Result::Skip && r != ktap::Result::Unjudged);
    out << ktap::job_lines(l);
  }
  out << (failed ? "not ok 1 " : "ok 1 ") << suite << "\n";
  return out.str();
}

std::string render(Format f, const CampaignData& d, const ExportOptions& o) {
  check_origin(o.origin);
  switch (f) {
    case Format::Kcidb:
      return to_kcidb(d, o).dump(2) + "\n";
    case Format::Junit:
      return to_junit(d, o);
    case Format::Ktap:
      return to_ktap(d, o);
  }
  return "";
}

std::optional<CampaignData> gather(Store& store, triage::TriageEngine* triage, int64_t id) {
  auto c = store.get_campaign(id);
  if (!c) return std::nullopt;
  CampaignData d;
  d.campaign = std::move(*c);
  d.jobs = store.list_jobs(id);
  // Every attempt's outcome: a job has at most max_attempts of them.
  const uint32_t cap = static_cast<uint32_t>(
      std::max<size_t>(1, d.jobs.size()) * std::max<uint32_t>(3, d.campaign.spec().max_attempts()));
  d.outcomes = store.find_outcomes({.campaign_id = id, .limit = cap});
  d.kernels = store.list_kernels();
  if (triage) {
    v1::ListIssuesRequest req;  // every page: an outcome may match any issue
    do {
      auto resp = triage->list_issues(req);
      d.issues.insert(d.issues.end(), resp.issues().begin(), resp.issues().end());
      req.set_page_token(resp.next_page_token());
    } while (!req.page_token().empty());
  }
  return d;
}

}  // namespace leapfrog::coord::exports
