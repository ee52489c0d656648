#include "coordinator/scaling.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <mutex>

#include "common/outcome/scale_proto.h"

namespace leapfrog::coord {

using nlohmann::json;

namespace {

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

json run_json(const RunSummary& r) {
  json j = summary_json(r.samples);
  j["job_id"] = r.job_id;
  j["boot_id"] = r.boot_id;
  j["loaded"] = r.loaded;
  return j;
}

std::string boot_of(const json& host) {
  if (!host.is_object()) return "";
  const auto it = host.find("boot_id");
  return it != host.end() && it->is_string() ? it->get<std::string>() : "";
}

// The points of a run read by scale_run_of (none when it has none).
std::vector<ScalePoint> points_of(const std::optional<v1::ScaleRun>& scale) {
  std::vector<ScalePoint> out;
  if (scale)
    for (const auto& p : scale->points()) out.push_back(from_proto(p));
  return out;
}

std::string run_key(const ScaleRun& r) {
  return std::to_string(r.record.job_id()) + "/" + std::to_string(r.record.attempt()) + " ";
}

}  // namespace

std::vector<std::vector<v1::OutcomeRecord>> scaling_sets(Store& store,
                                                         const std::vector<std::string>& kernels,
                                                         uint32_t last) {
  ScaleRunQuery q;
  q.kernels = kernels;
  q.by_campaign = last == 0;
  q.per_kernel = last == 0 ? 1 : last;
  std::map<std::string, std::vector<v1::OutcomeRecord>> sets;
  for (auto& r : store.scale_runs(q)) sets[r.record.kernel_label()].push_back(std::move(r.record));
  std::vector<std::vector<v1::OutcomeRecord>> out;
  for (const auto& k : kernels) {
    auto it = sets.find(k);
    if (it == sets.end()) throw NoScalingRun(k);
    out.push_back(it->second);
  }
  return out;
}

RunPoints run_points(const v1::OutcomeRecord& run) {
  // One read of the run: an old row's outcome JSON is parsed once.
  const auto scale = scale_run_of(run.outcome());
  return RunPoints{run.job_id(), scale && scale->has_host() ? scale->host().boot_id() : "",
                   points_of(scale)};
}

RunPoints run_points(const ScaleRun& run) {
  const json host =
      run.host_json.empty() ? json(nullptr) : json::parse(run.host_json, nullptr, false);
  return RunPoints{run.record.job_id(), boot_of(host), scale_points(run)};
}

ScalingRuns latest_scaling_runs(Store& store, const std::vector<std::string>& kernels) {
  ScalingRuns out;
  out.available = store.scale_kernels();
  ScaleRunQuery q;
  q.kernels = kernels;
  q.per_kernel = 1;
  std::map<std::string, v1::OutcomeRecord> latest;
  for (auto& r : store.scale_runs(q)) latest.emplace(r.record.kernel_label(), std::move(r.record));
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
  return points_of(scale_run_of(run.outcome()));
}

std::vector<ScalePoint> scale_points(const ScaleRun& run) {
  std::vector<ScalePoint> out;
  for (const auto& r : run.points) {
    ScalePoint p;
    p.test = r.test;
    p.mode = r.mode;
    p.tasks = r.tasks;
    p.ops_per_sec = r.ops_per_sec;
    p.samples = r.samples;
    p.stddev = r.stddev;
    p.ci_low = r.ci_low;
    p.ci_high = r.ci_high;
    p.idle_pct = r.idle_pct;
    p.other_load = r.other_load;
    p.task_cpu_s = r.task_cpu_s;
    p.window_s = r.window_s;
    p.host_load = r.host_load;
    out.push_back(std::move(p));
  }
  return out;
}

json scale_host(const v1::OutcomeRecord& run) {
  const auto scale = scale_run_of(run.outcome());
  if (!scale || !scale->has_host()) return json(nullptr);
  return leapfrog::to_json(from_proto(scale->host()));
}

std::vector<ScalingRegression> scaling_regressions(Store& store) {
  // The runs of the last two campaigns of each kernel name the state of the
  // data: while they stay the same, so does the answer. Reading their keys is
  // one index scan per kernel; their points are read only when they changed.
  ScaleRunQuery q;
  q.per_kernel = 2;
  q.by_campaign = true;
  q.details = false;
  std::string key;
  for (const auto& r : store.scale_runs(q)) key += run_key(r);
  static std::mutex mu;
  static std::map<const Store*, std::pair<std::string, std::vector<ScalingRegression>>> cache;
  {
    std::lock_guard<std::mutex> lock(mu);
    auto it = cache.find(&store);
    if (it != cache.end() && it->second.first == key) return it->second.second;
  }
  std::vector<ScalingRegression> out;
  if (!key.empty()) {
    q.details = true;
    key.clear();
    // Per kernel, its last two campaigns' runs, newest campaign first.
    std::map<std::string, std::vector<std::vector<ScaleRun>>> sets;
    for (auto& r : store.scale_runs(q)) {
      key += run_key(r);
      // Campaigns in the order of their newest run (their runs may interleave).
      auto& kernel = sets[r.record.kernel_label()];
      auto set = std::find_if(kernel.begin(), kernel.end(), [&](const std::vector<ScaleRun>& s) {
        return s.front().record.campaign_id() == r.record.campaign_id();
      });
      if (set == kernel.end()) set = kernel.emplace(kernel.end());
      set->push_back(std::move(r));
    }
    for (auto& [kernel, two] : sets) {
      if (two.size() < 2) continue;
      std::vector<RunPoints> before, after;
      for (const auto& r : two[1]) before.push_back(run_points(r));
      for (const auto& r : two[0]) after.push_back(run_points(r));
      ScalingRegression r;
      for (auto& c : compare_runs(before, after))
        if (c.change.significance == stats::Significance::Significant && c.change.change_pct < 0)
          r.drops.push_back(std::move(c));
      if (r.drops.empty()) continue;
      r.kernel = kernel;
      r.before_runs = static_cast<uint32_t>(two[1].size());
      r.after_runs = static_cast<uint32_t>(two[0].size());
      r.before = std::move(two[1].front().record);
      r.after = std::move(two[0].front().record);
      out.push_back(std::move(r));
    }
  }
  std::lock_guard<std::mutex> lock(mu);
  cache[&store] = {key, out};
  return out;
}

json to_json(const PointChange& c) {
  const stats::Change& ch = c.change;
  auto runs = [](const std::vector<RunSummary>& rs) {
    json out = json::array();
    for (const auto& r : rs) out.push_back(run_json(r));
    return out;
  };
  return json{{"test", c.test},
              {"mode", c.mode},
              {"tasks", c.tasks},
              {"before", summary_json(ch.before)},
              {"after", summary_json(ch.after)},
              {"before_runs", runs(c.before_runs)},
              {"after_runs", runs(c.after_runs)},
              {"change_pct", number(ch.change_pct)},
              {"ci95_low_pct", number(ch.ci_low_pct)},
              {"ci95_high_pct", number(ch.ci_high_pct)},
              {"p_value", number(ch.p_value)},
              {"p_adjusted", number(ch.p_adjusted)},
              {"verdict", stats::to_string(ch.significance)}};
}

}  // namespace leapfrog::coord

namespace leapfrog::coord {

namespace {

void set_summary(const stats::Summary& s, v1::ScaleSummary* out) {
  out->set_n(static_cast<uint32_t>(s.n));
  if (std::isfinite(s.mean)) out->set_mean(s.mean);
  if (std::isfinite(s.stddev)) out->set_stddev(s.stddev);
  if (std::isfinite(s.ci_low)) out->set_ci95_low(s.ci_low);
  if (std::isfinite(s.ci_high)) out->set_ci95_high(s.ci_high);
}

void add_runs(const std::vector<RunSummary>& runs,
              google::protobuf::RepeatedPtrField<v1::ScaleRunSummary>* out) {
  for (const auto& r : runs) {
    v1::ScaleRunSummary* p = out->Add();
    p->set_job_id(r.job_id);
    p->set_boot_id(r.boot_id);
    set_summary(r.samples, p->mutable_samples());
    p->set_loaded(r.loaded);
  }
}

}  // namespace

v1::PointChange to_proto(const PointChange& c) {
  const stats::Change& ch = c.change;
  v1::PointChange out;
  out.set_test(c.test);
  out.set_mode(c.mode);
  out.set_tasks(c.tasks);
  set_summary(ch.before, out.mutable_before());
  set_summary(ch.after, out.mutable_after());
  add_runs(c.before_runs, out.mutable_before_runs());
  add_runs(c.after_runs, out.mutable_after_runs());
  if (std::isfinite(ch.change_pct)) out.set_change_pct(ch.change_pct);
  if (std::isfinite(ch.ci_low_pct)) out.set_ci95_low_pct(ch.ci_low_pct);
  if (std::isfinite(ch.ci_high_pct)) out.set_ci95_high_pct(ch.ci_high_pct);
  if (std::isfinite(ch.p_value)) out.set_p_value(ch.p_value);
  if (std::isfinite(ch.p_adjusted)) out.set_p_adjusted(ch.p_adjusted);
  out.set_verdict(stats::to_string(ch.significance));
  return out;
}

}  // namespace leapfrog::coord
