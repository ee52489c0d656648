// `leapfrog export` (export_cmds.h).

#include "coordinator/cli/export_cmds.h"
#include "coordinator/channel.h"

#include <grpcpp/grpcpp.h>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>

#include "coordinator/export/export.h"
#include "coordinator/export/submit.h"
#include "leapfrog/v1/control.grpc.pb.h"
#include "leapfrog/v1/triage.grpc.pb.h"

namespace leapfrog::cli {

namespace ex = coord::exports;

namespace {

std::string read_trimmed(const std::string& path) {
  std::ifstream in(path);
  if (!in) return "";
  std::stringstream ss;
  ss << in.rdbuf();
  std::string s = ss.str();
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ' || s.back() == '\r')) s.pop_back();
  return s;
}

std::unique_ptr<grpc::ClientContext> context(const Endpoint& ep) {
  auto c = std::make_unique<grpc::ClientContext>();
  c->AddMetadata("authorization", "Bearer " + ep.token);
  c->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
  return c;
}

void check(const grpc::Status& s, const std::string& what) {
  if (!s.ok()) throw std::runtime_error(what + ": " + s.error_message());
}

// The campaign's export data over gRPC, as exports::gather reads it from the store.
ex::CampaignData gather(const Endpoint& ep, int64_t id) {
  auto channel = coord::coordinator_channel(ep.address);
  auto control = v1::ControlService::NewStub(channel);
  auto triage = v1::TriageService::NewStub(channel);
  ex::CampaignData d;
  v1::GetCampaignRequest gc;
  gc.set_id(id);
  check(control->GetCampaign(context(ep).get(), gc, &d.campaign),
        "campaign \"" + std::to_string(id) + "\"");
  // Every page of the jobs and of the outcomes (with their violations).
  v1::ListJobsRequest lj;
  lj.set_campaign_id(id);
  do {
    v1::ListJobsResponse jobs;
    check(control->ListJobs(context(ep).get(), lj, &jobs), "jobs");
    d.jobs.insert(d.jobs.end(), jobs.jobs().begin(), jobs.jobs().end());
    lj.set_page_token(jobs.next_page_token());
  } while (!lj.page_token().empty());
  v1::ListOutcomesRequest lo;
  lo.set_campaign_id(id);
  lo.set_with_violations(true);
  do {
    v1::ListOutcomesResponse outcomes;
    check(control->ListOutcomes(context(ep).get(), lo, &outcomes), "outcomes");
    d.outcomes.insert(d.outcomes.end(), outcomes.outcomes().begin(), outcomes.outcomes().end());
    lo.set_page_token(outcomes.next_page_token());
  } while (!lo.page_token().empty());
  v1::ListKernelsRequest lk;
  do {
    v1::ListKernelsResponse kernels;
    check(control->ListKernels(context(ep).get(), lk, &kernels), "kernels");
    d.kernels.insert(d.kernels.end(), kernels.kernels().begin(), kernels.kernels().end());
    lk.set_page_token(kernels.next_page_token());
  } while (!lk.page_token().empty());
  v1::ListIssuesRequest li;
  do {
    v1::ListIssuesResponse issues;
    check(triage->ListIssues(context(ep).get(), li, &issues), "issues");
    d.issues.insert(d.issues.end(), issues.issues().begin(), issues.issues().end());
    li.set_page_token(issues.next_page_token());
  } while (!li.page_token().empty());
  return d;
}

}  // namespace

ExportCommands::ExportCommands(CLI::App& app) {
  export_ = app.add_subcommand("export", "a campaign as KCIDB JSON, JUnit XML or KTAP");
  export_->add_option("--campaign", campaign_, "campaign id")->required();
  export_->add_option("--format", format_, "kcidb | junit | ktap (default kcidb)");
  export_->add_option("--out", out_, "write to this file (default: standard output)");
  export_->add_option("--origin", origin_, "KCIDB origin, [a-z0-9_]+ (default leapfrog)");
  export_->add_option("--link-base", link_base_,
                      "dashboard URL the issue links start with (default: <data-dir>/http)");
  export_->add_option("--submit", submit_, "POST the KCIDB document to this submission URL");
  export_->add_option(
      "--token-file", token_file_,
      "with --submit: the submission endpoint's token; otherwise the coordinator's");
  export_->fallthrough();
}

bool ExportCommands::parsed() const {
  return export_->parsed();
}

int ExportCommands::run(const std::string& coordinator, const std::string& token_file,
                        const std::string& data_dir) {
  const ex::Format f = [&] {
    try {
      return ex::parse_format(format_);
    } catch (const std::invalid_argument& e) {
      throw std::runtime_error(e.what());
    }
  }();
  if (!submit_.empty() && f != ex::Format::Kcidb)
    throw std::runtime_error("--submit sends KCIDB documents: drop --format or use --format kcidb");
  const bool own_token = !submit_.empty();
  const Endpoint ep = resolve_endpoint(
      coordinator, own_token || token_file_.empty() ? token_file : token_file_, data_dir);
  ex::ExportOptions o;
  o.origin = origin_;
  // The base the running coordinator links with (serve --link-base), else its
  // dashboard's own address.
  if (o.link_base = link_base_; o.link_base.empty())
    o.link_base = read_trimmed(data_dir + "/link-base");
  if (o.link_base.empty()) o.link_base = read_trimmed(data_dir + "/http");
  std::string doc;
  try {
    doc = ex::render(f, gather(ep, campaign_), o);
  } catch (const std::invalid_argument& e) {
    throw std::runtime_error(e.what());
  }
  if (!out_.empty()) {
    std::ofstream out(out_, std::ios::trunc);
    out << doc;
    if (!out.flush()) throw std::runtime_error("cannot write \"" + out_ + "\"");
  } else if (submit_.empty()) {
    std::cout << doc << std::flush;
  }
  if (!submit_.empty()) {
    std::string token;
    if (!token_file_.empty()) {
      token = read_trimmed(token_file_);
      if (token.empty())
        throw std::runtime_error("token file \"" + token_file_ + "\" is empty or unreadable");
    }
    const auto r = ex::submit(submit_, token, doc);
    std::fprintf(stderr, "submitted campaign %lld to %s: %d\n", static_cast<long long>(campaign_),
                 submit_.c_str(), r.status);
  }
  return 0;
}

}  // namespace leapfrog::cli
