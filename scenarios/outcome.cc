#include "scenarios/outcome.h"

#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <sstream>

#include "scenarios/outcome_json.h"

namespace leapfrog {

using nlohmann::json;

static json versions_json(const std::vector<PossibleVersion>& vs) {
  json out = json::array();
  for (const auto& v : vs) {
    json j{{"value", v.value}};
    j["from"] = v.from <= kTimeMin ? json(nullptr) : json(v.from);
    j["to"] = v.to >= kTimeMax ? json(nullptr) : json(v.to);
    if (!v.node_kind.empty()) j["node_kind"] = v.node_kind;
    out.push_back(std::move(j));
  }
  return out;
}

json to_json(const Violation& v) {
  json steps = json::array();
  for (const auto& s : v.steps)
    steps.push_back({{"step", s.step}, {"component", s.component}, {"object", s.object}, {"versions", versions_json(s.versions)}});
  json history = json::array();
  for (const auto& m : v.history) {
    json op{{"actor", m.actor},   {"op", m.op},           {"object", m.object}, {"value", m.value},
            {"invoke", m.invoke}, {"complete", m.complete}, {"err", m.err}};
    if (!m.node_kind.empty()) op["node_kind"] = m.node_kind;
    history.push_back(std::move(op));
  }
  return json{{"kind", to_string(v.kind)},
              {"actor", v.actor},
              {"record", v.record},
              {"op", v.op},
              {"path", v.path},
              {"invoke", v.invoke},
              {"complete", v.complete},
              {"epsilon_ns", v.epsilon},
              {"step", v.step},
              {"component", v.component},
              {"object", v.object},
              {"observed", v.observed},
              {"expected", v.expected},
              {"versions", versions_json(v.versions)},
              {"steps", steps},
              {"history", history}};
}

json to_json(const Widening& w) {
  json points = json::array();
  for (const auto& p : w.points) {
    points.push_back({{"name", p.name},
                      {"probability_ppm", p.probability_ppm},
                      {"delay_ns", p.delay_ns},
                      {"uid", p.uid},
                      {"hits", p.hits}});
    if (p.spent_ns) points.back()["spent_ns"] = *p.spent_ns;
  }
  return json{
      {"on", w.on}, {"reason", w.reason}, {"points", points}, {"control_checks", w.control_checks}};
}

json to_json(const Strategy& s) {
  return json{{"alignment", to_string(s.alignment)},
              {"observers", s.observers},
              {"aligned_observers", s.aligned},
              {"free_observers", s.observers - s.aligned},
              {"pinned", s.pin_cpus},
              {"chosen_by_seed", s.chosen},
              {"widening", s.widening}};
}

std::string summary(const Widening& w) {
  if (!w.on) return "off" + (w.reason.empty() ? std::string() : " (" + w.reason + ")");
  std::string out = "on" + (w.reason.empty() ? std::string() : " (" + w.reason + ")") + ":";
  for (size_t i = 0; i < w.points.size(); ++i) {
    const WidenPoint& p = w.points[i];
    out += (i ? ", " : " ") + p.name + " " + std::to_string(p.probability_ppm) + "ppm " +
           std::to_string(p.delay_ns) + "ns uid " + p.uid;
  }
  return out;
}

void note_detection(Outcome& o, const History& h) {
  o.first_violation_ns = -1;
  o.ops_to_first_violation = 0;
  const TimeNs at = o.check.first_violation_at;
  if (at >= kTimeMax) return;
  TimeNs start = at;
  for (const auto& m : h.mutations) start = std::min(start, m.invoke);
  for (const auto& l : h.lookups) start = std::min(start, l.invoke);
  for (const auto& r : h.offsets) start = std::min(start, r.invoke);
  o.first_violation_ns = at - start;
  uint64_t n = 0;
  for (const auto& l : h.lookups) n += l.complete <= at;
  if (h.lookups.empty())
    for (const auto& r : h.offsets) n += r.complete <= at;
  o.ops_to_first_violation = n;
}

json to_json(const ScalePoint& p) {
  return {{"test", p.test},
          {"mode", p.mode},
          {"tasks", p.tasks},
          {"ops_per_sec", p.ops_per_sec},
          {"samples", p.samples},
          {"n", p.samples.size()},
          {"stddev", p.stddev},
          {"ci95_low", p.ci_low},
          {"ci95_high", p.ci_high},
          {"idle_pct", p.idle_pct},
          {"other_load", p.other_load},
          {"task_cpu_s", p.task_cpu_s},
          {"window_s", p.window_s},
          {"host_load", p.host_load}};
}

ScalePoint scale_point_from_json(const json& j) {
  ScalePoint p;
  p.test = j.at("test").get<std::string>();
  p.mode = j.at("mode").get<std::string>();
  p.tasks = j.at("tasks").get<uint32_t>();
  p.ops_per_sec = j.at("ops_per_sec").get<double>();
  if (j.contains("samples")) p.samples = j["samples"].get<std::vector<double>>();
  p.stddev = j.value("stddev", 0.0);
  p.ci_low = j.value("ci95_low", p.ops_per_sec);
  p.ci_high = j.value("ci95_high", p.ops_per_sec);
  p.idle_pct = j.value("idle_pct", -1.0);
  p.other_load = j.value("other_load", -1.0);
  p.task_cpu_s = j.value("task_cpu_s", 0.0);
  p.window_s = j.value("window_s", 0.0);
  p.host_load = j.value("host_load", -1.0);
  return p;
}

json to_json(const ScaleHost& h) {
  return {{"cpus", h.cpus},
          {"sample_s", h.sample_s},
          {"warmup_s", h.warmup_s},
          {"max_other_load", h.max_other_load},
          {"load_average", h.load_average},
          {"max_host_load", h.max_host_load},
          {"host_cpus", h.host_cpus},
          {"vcpus", h.vcpus},
          {"vcpu_pinning", h.vcpu_pinning},
          {"boot_id", h.boot_id},
          {"warnings", h.warnings}};
}

ScaleHost scale_host_from_json(const json& j) {
  ScaleHost h;
  h.cpus = j.value("cpus", 0u);
  h.sample_s = j.value("sample_s", 0.0);
  h.warmup_s = j.value("warmup_s", 0.0);
  h.max_other_load = j.value("max_other_load", 0.0);
  h.load_average = j.value("load_average", -1.0);
  h.max_host_load = j.value("max_host_load", -1.0);
  h.host_cpus = j.value("host_cpus", 0u);
  h.vcpus = j.value("vcpus", 0u);
  h.vcpu_pinning = j.value("vcpu_pinning", "");
  h.boot_id = j.value("boot_id", "");
  h.warnings = j.value("warnings", std::vector<std::string>{});
  return h;
}

json to_json(const Outcome& o) {
  json by_kind = json::object();
  for (int k = 0; k < kViolationKinds; ++k)
    if (o.check.by_kind[k]) by_kind[to_string(static_cast<ViolationKind>(k))] = o.check.by_kind[k];
  json violations = json::array();
  for (const auto& v : o.check.violations) violations.push_back(to_json(v));
  json scale = json::array();
  for (const auto& p : o.scale) scale.push_back(to_json(p));
  json j{{"scenario", o.scenario},
         {"seed", o.seed},
         {"fs", o.fs},
         {"verdict", o.verdict},
         {"params", o.params},
         {"observers", o.observers},
         {"alignment", to_string(o.strategy.alignment)},
         {"strategy", to_json(o.strategy)},
         {"ops", o.ops},
         {"mutations", o.mutations},
         {"rounds", o.rounds},
         {"lookups_checked", o.check.lookups_checked},
         {"steps_checked", o.check.steps_checked},
         {"offsets_checked", o.check.offsets_checked},
         {"unjudged", o.check.unjudged},
         {"over_budget", o.check.over_budget},
         {"violation_count", o.check.violation_count},
         {"violations_by_kind", by_kind},
         {"violations", violations},
         {"race_window_hits", o.race_window_hits},
         {"first_violation_ns", o.first_violation_ns},
         {"ops_to_first_violation", o.ops_to_first_violation},
         {"duration_s", o.duration_s},
         {"setup_s", o.setup_s},
         {"ops_per_sec", o.ops_per_sec},
         {"clock_source", o.clock_source},
         {"epsilon_ns", o.epsilon_ns},
         {"timing",
          {{"mutator_mean_ns", o.timing.mutator_mean_ns},
           {"observer_mean_ns", o.timing.observer_mean_ns},
           {"delay_span_ns", o.timing.delay_span_ns},
           {"warmup_rounds", o.timing.warmup_rounds},
           {"pace_ns", o.timing.pace_ns}}},
         {"backpressure", {{"waited_s", o.backpressure_s}, {"waits", o.backpressure_waits}}},
         {"notes", o.notes},
         {"widening", to_json(o.widening)}};
  if (!o.scale.empty()) {
    j["scale"] = scale;
    j["scale_host"] = to_json(o.scale_host);
  }
  if (!o.error.empty()) j["error"] = o.error;
  if (o.peak_rss_bytes) j["peak_rss_bytes"] = o.peak_rss_bytes;
  if (o.children_peak_rss_bytes) j["children_peak_rss_bytes"] = o.children_peak_rss_bytes;
  return j;
}

std::string to_text(const Outcome& o) {
  std::ostringstream s;
  char buf[256];
  std::snprintf(buf, sizeof buf, "%s seed=%llu fs=%s: %s", o.scenario.c_str(), static_cast<unsigned long long>(o.seed),
                o.fs.c_str(), o.verdict.c_str());
  s << buf << '\n';
  if (!o.error.empty()) s << "  error: " << o.error << '\n';
  std::snprintf(buf, sizeof buf,
                "  ops=%llu lookups_checked=%llu offsets_checked=%llu rounds=%llu race_window_hits=%llu "
                "ops/s=%.0f duration=%.2fs",
                static_cast<unsigned long long>(o.ops), static_cast<unsigned long long>(o.check.lookups_checked),
                static_cast<unsigned long long>(o.check.offsets_checked), static_cast<unsigned long long>(o.rounds),
                static_cast<unsigned long long>(o.race_window_hits), o.ops_per_sec, o.duration_s);
  s << buf << '\n';
  s << "  strategy: " << to_string(o.strategy.alignment) << ", " << o.strategy.observers
    << " observers (" << o.strategy.aligned << " aligned), "
    << (o.strategy.pin_cpus ? "pinned" : "not pinned");
  if (!o.strategy.chosen.empty()) {
    s << "; chosen by the seed:";
    for (const auto& c : o.strategy.chosen) s << ' ' << c;
  }
  s << '\n';
  if (o.timing.warmup_rounds) {
    std::snprintf(buf, sizeof buf, "  timing: mutator=%lldns observer=%lldns delay_span=%lldns clock=%s epsilon=%lldns",
                  static_cast<long long>(o.timing.mutator_mean_ns), static_cast<long long>(o.timing.observer_mean_ns),
                  static_cast<long long>(o.timing.delay_span_ns), o.clock_source.c_str(),
                  static_cast<long long>(o.epsilon_ns));
    s << buf;
    if (o.timing.pace_ns) s << " pace=" << o.timing.pace_ns << "ns";
    s << '\n';
  } else if (o.timing.pace_ns) {
    s << "  timing: pace=" << o.timing.pace_ns
      << "ns (the free-running mutator's dwell bound) clock=" << o.clock_source
      << " epsilon=" << o.epsilon_ns << "ns\n";
  }
  if (o.peak_rss_bytes || o.children_peak_rss_bytes)
    s << "  peak rss: run " << (o.peak_rss_bytes >> 10) << " KiB, largest child "
      << (o.children_peak_rss_bytes >> 10) << " KiB\n";
  if (o.check.violation_count) {
    s << "  violations=" << o.check.violation_count << " (";
    bool first = true;
    for (int k = 0; k < kViolationKinds; ++k) {
      if (!o.check.by_kind[k]) continue;
      s << (first ? "" : ", ") << to_string(static_cast<ViolationKind>(k)) << "=" << o.check.by_kind[k];
      first = false;
    }
    s << ")\n";
    if (o.first_violation_ns >= 0) {
      std::snprintf(buf, sizeof buf, "  first violation after %.3f ms and %llu operations\n",
                    static_cast<double>(o.first_violation_ns) / 1e6,
                    static_cast<unsigned long long>(o.ops_to_first_violation));
      s << buf;
    }
    for (size_t i = 0; i < o.check.violations.size() && i < 3; ++i) {
      const Violation& v = o.check.violations[i];
      s << "  - " << to_string(v.kind) << ": actor " << v.actor << " " << v.op << " " << v.path << " ["
        << v.invoke << ", " << v.complete << "] step " << v.step << " (" << v.component << ", " << v.object
        << ") observed " << v.observed << ", possible: " << v.expected << '\n';
      for (const auto& pv : v.versions) {
        s << "      version " << pv.value << " possible from "
          << (pv.from <= kTimeMin ? std::string("start") : std::to_string(pv.from)) << " to "
          << (pv.to >= kTimeMax ? std::string("end") : std::to_string(pv.to)) << '\n';
      }
    }
  }
  for (const auto& p : o.scale) {
    std::snprintf(buf, sizeof buf,
                  "  %-15s %-9s tasks=%-3u ops/s=%.0f ±%.1f%% (n=%zu, idle %.0f%%)", p.test.c_str(),
                  p.mode.c_str(), p.tasks, p.ops_per_sec,
                  p.ops_per_sec > 0 ? 100 * (p.ci_high - p.ops_per_sec) / p.ops_per_sec : 0.0,
                  p.samples.size(), p.idle_pct);
    s << buf << '\n';
  }
  for (const auto& n : o.notes) s << "  note: " << n << '\n';
  if (!o.widening.on) {
    s << "  widening: off (" << o.widening.reason << ")\n";
  } else {
    s << "  widening: on (" << o.widening.reason << "):";
    for (const auto& p : o.widening.points)
      s << ' ' << p.name << " p=" << p.probability_ppm << "ppm d=" << p.delay_ns
        << "ns uid=" << p.uid << " hits=" << p.hits
        << (p.spent_ns ? " spent=" + std::to_string(*p.spent_ns) + "ns" : "");
    s << '\n';
  }
  return s.str();
}

int exit_code(const Outcome& o) {
  if (o.verdict == "error") return 2;
  if (o.verdict == "violation") return 1;
  if (o.verdict == "inconclusive") return 3;
  return 0;
}

}  // namespace leapfrog
