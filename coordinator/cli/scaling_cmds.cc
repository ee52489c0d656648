// `leapfrog scaling` (scaling_cmds.h).

#include "coordinator/cli/scaling_cmds.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>

#include "coordinator/scaling.h"
#include "leapfrog/v1/control.grpc.pb.h"

namespace leapfrog::cli {

using nlohmann::json;

namespace {

v1::GetScalingResponse get_scaling(const Endpoint& ep, const std::vector<std::string>& kernels,
                                   uint32_t last = 0) {
  auto channel = grpc::CreateChannel(ep.address, grpc::InsecureChannelCredentials());
  auto control = v1::ControlService::NewStub(channel);
  grpc::ClientContext ctx;
  ctx.AddMetadata("authorization", "Bearer " + ep.token);
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
  v1::GetScalingRequest req;
  for (const auto& k : kernels) req.add_kernels(k);
  req.set_last(last);
  v1::GetScalingResponse resp;
  const grpc::Status s = control->GetScaling(&ctx, req, &resp);
  if (!s.ok()) throw std::runtime_error(s.error_message());
  return resp;
}

// What makes two runs unfit to compare, or either run unfit to publish.
std::vector<std::string> host_warnings(const v1::OutcomeRecord& a, const v1::OutcomeRecord& b) {
  std::vector<std::string> out;
  const json ha = coord::scale_host(a), hb = coord::scale_host(b);
  for (const auto& [r, h] : {std::pair{&a, &ha}, std::pair{&b, &hb}}) {
    if (h->is_null()) continue;
    for (const auto& w : h->value("warnings", json::array()))
      out.push_back(r->kernel_label() + ": " + w.get<std::string>());
  }
  if (ha.is_object() && hb.is_object() && ha.value("cpus", 0) != hb.value("cpus", 0))
    out.push_back("the runs had " + std::to_string(ha.value("cpus", 0)) + " and " +
                  std::to_string(hb.value("cpus", 0)) +
                  " CPUs: different host shapes do not compare");
  return out;
}

// The runs of `kernel`'s set in the reply; its latest run alone from a
// coordinator that sends no sets.
std::vector<const v1::OutcomeRecord*> set_of(const v1::GetScalingResponse& resp,
                                             const v1::OutcomeRecord& latest) {
  std::vector<const v1::OutcomeRecord*> out;
  for (const auto& r : resp.set_runs())
    if (r.kernel_label() == latest.kernel_label()) out.push_back(&r);
  if (out.empty()) out.push_back(&latest);
  return out;
}

// "4 (job 12, 13, 14, 15)".
std::string jobs_text(const std::vector<const v1::OutcomeRecord*>& set) {
  std::string out = std::to_string(set.size()) + (set.size() == 1 ? " run (job " : " runs (job ");
  for (size_t i = 0; i < set.size(); ++i) out += (i ? ", " : "") + std::to_string(set[i]->job_id());
  return out + ")";
}

}  // namespace

ScalingCommands::ScalingCommands(CLI::App& app) {
  scaling_ = app.add_subcommand("scaling", "lookup-scale results: compare two kernels, export CSV");
  scaling_->require_subcommand(1);
  compare_ = scaling_->add_subcommand(
      "compare",
      "K2's lookup-scale runs against K1's (each kernel's latest campaign), with 95 % intervals "
      "over the runs and significance");
  compare_->add_option("before", before_, "kernel label of the baseline")->required();
  compare_->add_option("after", after_, "kernel label to compare with it")->required();
  compare_->add_option("--test", test_, "only this testcase (e.g. lseek1)");
  compare_
      ->add_option("--last", last_,
                   "compare each kernel's newest N runs instead of its latest campaign's")
      ->check(CLI::Range(1, 1000));
  csv_ = scaling_->add_subcommand("csv", "one kernel's run of one testcase as will-it-scale's CSV");
  csv_->add_option("kernel", kernel_, "kernel label")->required();
  csv_->add_option("--test", test_, "testcase (e.g. lseek1)")->required();
  csv_->add_option("--out", out_, "write to this file (default: standard output)");
  for (auto* c : {scaling_, compare_, csv_}) c->fallthrough();
}

bool ScalingCommands::parsed() const {
  return scaling_->parsed();
}

int ScalingCommands::run(const Endpoint& ep, bool as_json) {
  if (csv_->parsed()) {
    const auto resp = get_scaling(ep, {kernel_});
    const auto points = coord::scale_points(resp.runs(0));
    if (std::none_of(points.begin(), points.end(),
                     [&](const ScalePoint& p) { return p.test == test_; }))
      throw std::runtime_error("kernel \"" + kernel_ + "\"'s run has no \"" + test_ + "\" points");
    const std::string doc = wis_csv(points, test_);
    if (out_.empty()) {
      std::cout << doc << std::flush;
    } else {
      std::ofstream out(out_, std::ios::trunc);
      out << doc;
      if (!out.flush()) throw std::runtime_error("cannot write \"" + out_ + "\"");
    }
    return 0;
  }
  if (before_ == after_) throw std::runtime_error("compare needs two different kernels");
  const auto resp = get_scaling(ep, {before_, after_}, last_);
  if (resp.runs_size() != 2) throw std::runtime_error("compare needs two different kernels");
  const auto before_set = set_of(resp, resp.runs(0)), after_set = set_of(resp, resp.runs(1));
  std::vector<RunPoints> before, after;
  for (const auto* r : before_set) before.push_back(coord::run_points(*r));
  for (const auto* r : after_set) after.push_back(coord::run_points(*r));
  const auto changes = compare_runs(before, after, test_);
  if (changes.empty())
    throw std::runtime_error("the two runs have no point in common" +
                             (test_.empty() ? std::string() : " for \"" + test_ + "\""));
  std::vector<std::string> warnings;
  for (const auto* b : before_set)
    for (const auto* a : after_set)
      for (auto& w : host_warnings(*b, *a))
        if (std::find(warnings.begin(), warnings.end(), w) == warnings.end())
          warnings.push_back(std::move(w));
  if (as_json) {
    auto ids = [](const std::vector<const v1::OutcomeRecord*>& set) {
      json out = json::array();
      for (const auto* r : set) out.push_back(r->job_id());
      return out;
    };
    json pts = json::array();
    for (const auto& c : changes) pts.push_back(coord::to_json(c));
    std::cout << json{{"before", before_},
                      {"after", after_},
                      {"before_job", resp.runs(0).job_id()},
                      {"after_job", resp.runs(1).job_id()},
                      {"before_jobs", ids(before_set)},
                      {"after_jobs", ids(after_set)},
                      {"warnings", warnings},
                      {"points", pts}}
                     .dump(2)
              << std::endl;
    return 0;
  }
  std::cout << "before: " << before_ << ", " << jobs_text(before_set) << "; after: " << after_
            << ", " << jobs_text(after_set) << "\n";
  for (const auto& w : warnings) std::cout << "warning: " << w << '\n';
  std::cout << to_text(changes, before_, after_) << std::flush;
  return 0;
}

}  // namespace leapfrog::cli
