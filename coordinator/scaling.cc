#include "coordinator/scaling.h"

#include <algorithm>
#include <cmath>
#include <map>
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
