#include "coordinator/scaling.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <mutex>
#include <set>

namespace leapfrog::coord {

using nlohmann::json;

namespace {

constexpr uint32_t kScaleScan = 500;
constexpr const char* kScaleScenario = "lookup-scale";

json parse_outcome(const v1::OutcomeRecord& r) {
  if (r.outcome().outcome_json().empty()) return json::object();
  json j = json::parse(r.outcome().outcome_json(), nullptr, false);
  return j.is_object() ? j : json::object();
}

// JSON has no infinity: an infinite t or a NaN becomes null.
json number(double x) {
  return std::isfinite(x) ? json(x) : json(nullptr);
}

json summary_json(const stats::Summary& s) {
  return json{{"n", s.n},
              {"mean", number(s.mean)},
              {"stddev", number(s.stddev)},
              {"ci95_low", number(s.ci_low)},
              {"ci95_high", number(s.ci_high)}};
}

}  // namespace

ScalingRuns latest_scaling_runs(Store& store, const std::vector<std::string>& kernels) {
  OutcomeFilter f;
  f.scenario = kScaleScenario;
  f.limit = kScaleScan;
  std::map<std::string, v1::OutcomeRecord> latest;
  std::set<std::string> available;
  for (auto& o : store.find_outcomes(f)) {
    if (o.outcome().verdict() != v1::VERDICT_PASS) continue;
    if (scale_points(o).empty()) continue;
    available.insert(o.kernel_label());
    if (!kernels.empty() &&
        std::find(kernels.begin(), kernels.end(), o.kernel_label()) == kernels.end())
      continue;
    latest.emplace(o.kernel_label(), std::move(o));  // most recent first: keeps the first
  }
  ScalingRuns out;
  out.available.assign(available.begin(), available.end());
  if (kernels.empty()) {
    for (auto& [k, r] : latest) out.runs.push_back(std::move(r));
  } else {
    for (const auto& k : kernels) {
      auto it = latest.find(k);
      if (it == latest.end()) throw NoScalingRun(k);
      out.runs.push_back(it->second);
    }
  }
  return out;
}

std::vector<ScalePoint> scale_points(const v1::OutcomeRecord& run) {
  const json j = parse_outcome(run);
  std::vector<ScalePoint> out;
  if (!j.contains("scale") || !j["scale"].is_array()) return out;
  for (const auto& p : j["scale"]) {
    try {
      out.push_back(scale_point_from_json(p));
    } catch (const json::exception&) {
      // A malformed point is skipped; the rest of the run still compares.
    }
  }
  return out;
}

json scale_host(const v1::OutcomeRecord& run) {
  const json j = parse_outcome(run);
  return j.contains("scale_host") ? j["scale_host"] : json(nullptr);
}

std::vector<ScalingRegression> scaling_regressions(Store& store) {
  // The newest lookup-scale outcome names the state of the data: while it
  // stays the same, so does the answer.
  OutcomeFilter newest;
  newest.scenario = kScaleScenario;
  newest.limit = 1;
  const auto head = store.find_outcomes(newest);
  const std::string key = head.empty() ? ""
                                       : std::to_string(head[0].job_id()) + "/" +
                                             std::to_string(head[0].attempt()) + "@" +
                                             std::to_string(head[0].reported_at().seconds()) + "." +
                                             std::to_string(head[0].reported_at().nanos());
  static std::mutex mu;
  static std::map<const Store*, std::pair<std::string, std::vector<ScalingRegression>>> cache;
  {
    std::lock_guard<std::mutex> lock(mu);
    auto it = cache.find(&store);
    if (it != cache.end() && it->second.first == key) return it->second.second;
  }
  std::vector<ScalingRegression> out;
  if (!key.empty()) {
    OutcomeFilter f;
    f.scenario = kScaleScenario;
    f.limit = kScaleScan;
    std::map<std::string, std::vector<v1::OutcomeRecord>> last_two;  // newest first
    for (auto& o : store.find_outcomes(f)) {
      if (o.outcome().verdict() != v1::VERDICT_PASS || scale_points(o).empty()) continue;
      auto& two = last_two[o.kernel_label()];
      if (two.size() < 2) two.push_back(std::move(o));
    }
    for (auto& [kernel, two] : last_two) {
      if (two.size() < 2) continue;
      ScalingRegression r;
      for (auto& c : compare_points(scale_points(two[1]), scale_points(two[0])))
        if (c.change.significance == stats::Significance::Significant && c.change.change_pct < 0)
          r.drops.push_back(std::move(c));
      if (r.drops.empty()) continue;
      r.kernel = kernel;
      r.before = std::move(two[1]);
      r.after = std::move(two[0]);
      out.push_back(std::move(r));
    }
  }
  std::lock_guard<std::mutex> lock(mu);
  cache[&store] = {key, out};
  return out;
}

json to_json(const PointChange& c) {
  const stats::Change& ch = c.change;
  return json{{"test", c.test},
              {"mode", c.mode},
              {"tasks", c.tasks},
              {"before", summary_json(ch.before)},
              {"after", summary_json(ch.after)},
              {"change_pct", number(ch.change_pct)},
              {"ci95_low_pct", number(ch.ci_low_pct)},
              {"ci95_high_pct", number(ch.ci_high_pct)},
              {"p_value", number(ch.p_value)},
              {"verdict", stats::to_string(ch.significance)}};
}

}  // namespace leapfrog::coord
