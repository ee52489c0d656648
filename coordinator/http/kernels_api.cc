// Kernel endpoints (docs/api.md "Kernels"): one kernel with its patch series,
// build record and whole build log, and what was found on it; plus the
// kernels-by-label map the finding views (jobs, issues) carry.

#include <httplib.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "coordinator/http/api.h"
#include "coordinator/http/api_json.h"
#include "coordinator/triage/triage_engine.h"

namespace leapfrog::coord {

using nlohmann::json;

json build_log(const std::string& path) {
  json out{{"path", path},       {"readable", false}, {"size", 0},
           {"truncated", false}, {"text", ""},        {"error", ""}};
  std::error_code ec;
  const uintmax_t size = std::filesystem::file_size(path, ec);
  if (ec) {
    out["error"] = "cannot read \"" + path + "\" on the coordinator: " + ec.message();
    return out;
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    out["error"] = "cannot open \"" + path + "\" on the coordinator";
    return out;
  }
  const uintmax_t skip = size > kBuildLogCap ? size - kBuildLogCap : 0;
  in.seekg(static_cast<std::streamoff>(skip));
  std::string text(static_cast<size_t>(size - skip), '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<size_t>(in.gcount()));
  if (skip > 0) {  // start on a whole line
    const size_t nl = text.find('\n');
    if (nl != std::string::npos) text.erase(0, nl + 1);
  }
  out["readable"] = true;
  out["size"] = size;
  out["truncated"] = skip > 0;
  out["text"] = text;  // the reply replaces bytes that are not UTF-8
  return out;
}

namespace {

constexpr uint32_t kOutcomeScan = 2000;
constexpr size_t kRecentOutcomes = 50;
constexpr uint32_t kIssueScan = 1000;

// One outcome as a row of the kernel page: no violations, no console.
json outcome_row(const v1::OutcomeRecord& o) {
  return json{{"job_id", o.job_id()},
              {"attempt", o.attempt()},
              {"campaign_id", o.campaign_id()},
              {"scenario", o.spec().scenario()},
              {"fs", o.spec().fs()},
              {"seed", o.spec().seed()},
              {"verdict", verdict_name(o.outcome().verdict())},
              {"violation_count", o.outcome().violation_count()},
              {"error", o.outcome().error()},
              {"reported_at", iso_time(o.reported_at())}};
}

json kernel_page(ApiContext& ctx, triage::TriageEngine* engine, const std::string& label) {
  const auto kernels = ctx.store.list_kernels();
  auto it = std::find_if(kernels.begin(), kernels.end(),
                         [&](const v1::Kernel& k) { return k.label() == label; });
  if (it == kernels.end()) throw HttpError(404, "no kernel \"" + label + "\"");

  OutcomeFilter f;
  f.limit = kOutcomeScan;
  json outcomes = json::array();
  for (const auto& o : ctx.store.find_outcomes(f)) {
    if (o.kernel_label() != label) continue;
    outcomes.push_back(outcome_row(o));
    if (outcomes.size() >= kRecentOutcomes) break;
  }

  json issues = json::array();
  if (engine) {
    v1::ListIssuesRequest lr;
    lr.set_limit(kIssueScan);
    const v1::ListIssuesResponse found = engine->list_issues(lr);  // outlives the loop
    for (const auto& i : found.issues()) {
      for (const auto& k : i.kernels()) {
        if (k.kernel_label() != label) continue;
        issues.push_back(json{{"id", i.id()},
                              {"title", i.title()},
                              {"kind", i.kind()},
                              {"scenario", i.scenario()},
                              {"count", k.count()},
                              {"first_seen", iso_time(k.first_seen())},
                              {"last_seen", iso_time(k.last_seen())}});
        break;
      }
    }
  }
  return json{
      {"kernel", to_json(*it)},
      {"build_log", it->build_log_path().empty() ? json(nullptr) : build_log(it->build_log_path())},
      {"outcomes", outcomes},
      {"issues", issues}};
}

}  // namespace

json kernels_by_label(Store& store, const std::vector<std::string>& labels) {
  json out = json::object();
  for (const auto& l : labels) out[l] = nullptr;
  for (const auto& k : store.list_kernels())
    if (out.contains(k.label())) out[k.label()] = to_json(k);
  return out;
}

void register_kernel_api(ApiRouter& r, ApiContext ctx, triage::TriageEngine* engine) {
  r.get(R"(/api/kernels/([^/]+))", [ctx, engine](const httplib::Request& req) mutable {
    return kernel_page(ctx, engine, req.matches[1]);
  });
}

}  // namespace leapfrog::coord
