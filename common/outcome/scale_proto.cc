#include "common/outcome/scale_proto.h"

#include <nlohmann/json.hpp>

#include "common/proto_time.h"

namespace leapfrog {

using nlohmann::json;

v1::ScaleMode scale_mode_from(const std::string& mode) {
  if (mode == "processes") return v1::SCALE_MODE_PROCESSES;
  if (mode == "threads") return v1::SCALE_MODE_THREADS;
  return v1::SCALE_MODE_UNSPECIFIED;
}

std::string to_string(v1::ScaleMode mode) {
  switch (mode) {
    case v1::SCALE_MODE_PROCESSES:
      return "processes";
    case v1::SCALE_MODE_THREADS:
      return "threads";
    default:
      return "";
  }
}

v1::ScalePoint to_proto(const ScalePoint& p) {
  v1::ScalePoint out;
  out.set_test(p.test);
  out.set_mode(scale_mode_from(p.mode));
  out.set_tasks(p.tasks);
  out.set_ops_per_sec(p.ops_per_sec);
  for (double s : p.samples) out.add_samples(s);
  out.set_stddev(p.stddev);
  out.set_ci95_low(p.ci_low);
  out.set_ci95_high(p.ci_high);
  out.set_idle_pct(p.idle_pct);
  out.set_other_load(p.other_load);
  out.set_task_cpu_s(p.task_cpu_s);
  out.set_window_s(p.window_s);
  out.set_host_load(p.host_load);
  return out;
}

ScalePoint from_proto(const v1::ScalePoint& p) {
  ScalePoint out;
  out.test = p.test();
  out.mode = to_string(p.mode());
  out.tasks = p.tasks();
  out.ops_per_sec = p.ops_per_sec();
  out.samples.assign(p.samples().begin(), p.samples().end());
  out.stddev = p.stddev();
  out.ci_low = p.ci95_low();
  out.ci_high = p.ci95_high();
  out.idle_pct = p.idle_pct();
  out.other_load = p.other_load();
  out.task_cpu_s = p.task_cpu_s();
  out.window_s = p.window_s();
  out.host_load = p.host_load();
  return out;
}

v1::ScaleHost to_proto(const ScaleHost& h) {
  v1::ScaleHost out;
  out.set_cpus(h.cpus);
  *out.mutable_sample() = duration_of_seconds(h.sample_s);
  *out.mutable_warmup() = duration_of_seconds(h.warmup_s);
  out.set_max_other_load(h.max_other_load);
  out.set_load_average(h.load_average);
  out.set_max_host_load(h.max_host_load);
  out.set_host_cpus(h.host_cpus);
  out.set_vcpus(h.vcpus);
  out.set_vcpu_pinning(h.vcpu_pinning);
  out.set_boot_id(h.boot_id);
  for (const auto& w : h.warnings) out.add_warnings(w);
  return out;
}

ScaleHost from_proto(const v1::ScaleHost& h) {
  ScaleHost out;
  out.cpus = h.cpus();
  out.sample_s = seconds_of(h.sample());
  out.warmup_s = seconds_of(h.warmup());
  out.max_other_load = h.max_other_load();
  out.load_average = h.load_average();
  out.max_host_load = h.max_host_load();
  out.host_cpus = h.host_cpus();
  out.vcpus = h.vcpus();
  out.vcpu_pinning = h.vcpu_pinning();
  out.boot_id = h.boot_id();
  out.warnings.assign(h.warnings().begin(), h.warnings().end());
  return out;
}

std::optional<v1::ScaleRun> scale_run_from_json(const json& outcome) {
  if (!outcome.is_object()) return std::nullopt;
  auto scale = outcome.find("scale");
  if (scale == outcome.end() || !scale->is_array()) return std::nullopt;
  v1::ScaleRun run;
  for (const auto& p : *scale) {
    try {
      *run.add_points() = to_proto(scale_point_from_json(p));
    } catch (const json::exception&) {
      // A malformed point is skipped; the rest of the run still compares.
    }
  }
  if (run.points().empty()) return std::nullopt;
  auto host = outcome.find("scale_host");
  if (host != outcome.end() && host->is_object()) {
    try {
      *run.mutable_host() = to_proto(scale_host_from_json(*host));
    } catch (const json::exception&) {
      // A malformed host is left out, as a run without one.
    }
  }
  return run;
}

std::optional<v1::ScaleRun> scale_run_of(const v1::Outcome& o) {
  if (o.scale().points().empty()) return std::nullopt;
  return o.scale();
}

}  // namespace leapfrog
