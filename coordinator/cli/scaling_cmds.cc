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

v1::GetScalingResponse get_scaling(const Endpoint& ep, const std::vector<std::string>& kernels) {
  auto channel = grpc::CreateChannel(ep.address, grpc::InsecureChannelCredentials());
  auto control = v1::ControlService::NewStub(channel);
  grpc::ClientContext ctx;
  ctx.AddMetadata("authorization", "Bearer " + ep.token);
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
  v1::GetScalingRequest req;
  for (const auto& k : kernels) req.add_kernels(k);
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

}  // namespace

ScalingCommands::ScalingCommands(CLI::App& app) {
  scaling_ = app.add_subcommand("scaling", "lookup-scale results: compare two kernels, export CSV");
  scaling_->require_subcommand(1);
  compare_ = scaling_->add_subcommand(
      "compare", "K2's latest lookup-scale run against K1's, with 95 % intervals and significance");
  compare_->add_option("before", before_, "kernel label of the baseline")->required();
  compare_->add_option("after", after_, "kernel label to compare with it")->required();
  compare_->add_option("--test", test_, "only this testcase (e.g. lseek1)");
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
  const auto resp = get_scaling(ep, {before_, after_});
  if (resp.runs_size() != 2) throw std::runtime_error("compare needs two different kernels");
  const auto changes =
      compare_points(coord::scale_points(resp.runs(0)), coord::scale_points(resp.runs(1)), test_);
  if (changes.empty())
    throw std::runtime_error("the two runs have no point in common" +
                             (test_.empty() ? std::string() : " for \"" + test_ + "\""));
  const auto warnings = host_warnings(resp.runs(0), resp.runs(1));
  if (as_json) {
    json pts = json::array();
    for (const auto& c : changes) pts.push_back(coord::to_json(c));
    std::cout << json{{"before", before_},
                      {"after", after_},
                      {"before_job", resp.runs(0).job_id()},
                      {"after_job", resp.runs(1).job_id()},
                      {"warnings", warnings},
                      {"points", pts}}
                     .dump(2)
              << std::endl;
    return 0;
  }
  std::cout << "before: " << before_ << " (job " << resp.runs(0).job_id() << "), after: " << after_
            << " (job " << resp.runs(1).job_id() << ")\n";
  for (const auto& w : warnings) std::cout << "warning: " << w << '\n';
  std::cout << to_text(changes, before_, after_) << std::flush;
  return 0;
}

}  // namespace leapfrog::cli
