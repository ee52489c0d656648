#include "coordinator/http/api_json.h"

#include <algorithm>
#include <cctype>
#include <ctime>

#include "common/ktap/words.h"
#include "common/outcome/run_proto.h"
#include "common/outcome/scale_proto.h"
#include "common/outcome/violation_proto.h"
#include "common/proto_time.h"
#include "coordinator/http/api.h"

namespace leapfrog::coord {

using nlohmann::json;

namespace {

std::string format_time(int64_t seconds, int32_t nanos) {
  const std::time_t t = static_cast<std::time_t>(seconds);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[40];
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900,
                tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, nanos / 1'000'000);
  return buf;
}

// "VERDICT_KERNEL_CRASH" with prefix "VERDICT_" -> "kernel-crash".
std::string short_name(const std::string& full, const std::string& prefix) {
  std::string name = full.rfind(prefix, 0) == 0 ? full.substr(prefix.size()) : full;
  for (char& c : name)
    c = c == '_' ? '-' : static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return name;
}

// "on", "off", or "seed" (chosen by each job's seed).
std::string pin_name(v1::CpuPinning p) {
  if (p == v1::CPU_PINNING_UNSPECIFIED) return "seed";
  return short_name(v1::CpuPinning_Name(p), "CPU_PINNING_");
}

// What a run raced with, from Outcome.strategy; null when the agent did
// not report one.
json strategy_json(const v1::Outcome& o) {
  if (!o.has_strategy()) return nullptr;
  const v1::RaceStrategy& s = o.strategy();
  return json{{"alignment", short_name(v1::Alignment_Name(s.alignment()), "ALIGNMENT_")},
              {"observers", s.observers()},
              {"aligned_observers", s.aligned_observers()},
              {"free_observers", s.observers() - std::min(s.observers(), s.aligned_observers())},
              {"pinned", s.pinned()},
              {"chosen_by_seed", s.chosen_by_seed()},
              {"widening", s.widening()}};
}

// The run's detail as the agent's JSON spells it: times in seconds or
// nanoseconds, from Outcome.run.
json run_json(const v1::RunDetail& d) {
  const v1::RaceTiming& t = d.timing();
  return json{{"mutations", d.mutations()},
              {"rounds", d.rounds()},
              {"steps_checked", d.steps_checked()},
              {"unjudged", d.unjudged()},
              {"over_budget", d.over_budget()},
              {"setup_s", seconds_of(d.setup())},
              {"timing",
               {{"mutator_mean_ns", ns_of(t.mutator_mean())},
                {"observer_mean_ns", ns_of(t.observer_mean())},
                {"delay_span_ns", ns_of(t.delay_span())},
                {"warmup_rounds", t.warmup_rounds()}}},
              {"notes", d.notes()}};
}

const json* field(const json& j, const std::string& key) {
  auto it = j.find(key);
  return it == j.end() || it->is_null() ? nullptr : &*it;
}

std::vector<std::string> string_list(const json& j, const std::string& key) {
  std::vector<std::string> out;
  const json* f = field(j, key);
  if (!f) return out;
  if (!f->is_array())
    throw RequestError(ErrorKind::kInvalidArgument, "\"" + key + "\" must be a list of strings");
  for (const auto& item : *f) {
    if (!item.is_string())
      throw RequestError(ErrorKind::kInvalidArgument, "\"" + key + "\" must be a list of strings");
    out.push_back(item.get<std::string>());
  }
  return out;
}

uint64_t unsigned_field(const json& j, const std::string& key) {
  const json* f = field(j, key);
  if (!f) return 0;
  if (!f->is_number_unsigned() && !(f->is_number_integer() && f->get<int64_t>() >= 0))
    throw RequestError(ErrorKind::kInvalidArgument,
                       "\"" + key + "\" must be a non-negative integer");
  return f->get<uint64_t>();
}

}  // namespace

json iso_time(const google::protobuf::Timestamp& ts) {
  if (ts.seconds() == 0 && ts.nanos() == 0) return nullptr;
  return format_time(ts.seconds(), ts.nanos());
}

std::string verdict_name(v1::Verdict v) {
  if (v == v1::VERDICT_UNSPECIFIED) return "";
  return short_name(v1::Verdict_Name(v), "VERDICT_");
}

std::string job_state_name(v1::JobState s) {
  return short_name(v1::JobState_Name(s), "JOB_STATE_");
}

json to_json(const v1::ScenarioSpec& s) {
  json params = json::object();
  for (const auto& [k, v] : s.params()) params[k] = v;
  return json{{"scenario", s.scenario()},
              {"seed", s.seed()},
              {"fs", s.fs()},
              {"duration_s", seconds_of(s.duration())},
              {"iterations", s.iterations()},
              {"observers", s.observers()},
              {"params", params},
              {"align", s.align().empty() ? "seed" : s.align()},
              {"pin", pin_name(s.pin())}};
}

json to_json(const v1::Violation& v) {
  const json detail = violation_json(v);
  return json{{"kind", ktap::violation_kind_word(v.kind())},
              {"actor", v.actor()},
              {"op", v.op()},
              {"path", v.path()},
              {"invoke_ns", v.invoke_ns()},
              {"complete_ns", v.complete_ns()},
              {"step", v.step()},
              {"component", v.component()},
              {"object", v.object()},
              {"observed", v.observed()},
              {"expected", v.expected()},
              {"detail", detail}};
}

json to_json(const v1::OutcomeRecord& r) {
  const v1::Outcome& o = r.outcome();
  json by_kind = json::object();
  for (const auto& [k, v] : o.violations_by_kind()) by_kind[k] = v;
  json violations = json::array();
  for (const auto& v : o.violations()) violations.push_back(to_json(v));
  json scale = json::array();
  if (const auto run = scale_run_of(o))
    for (const auto& p : run->points()) scale.push_back(leapfrog::to_json(from_proto(p)));
  json out{{"job_id", r.job_id()},
           {"attempt", r.attempt()},
           {"campaign_id", r.campaign_id()},
           {"spec", to_json(r.spec())},
           {"kernel", r.kernel_label()},
           {"agent_id", r.agent_id()},
           {"reported_at", iso_time(r.reported_at())},
           {"superseded", r.superseded()},
           {"verdict", verdict_name(o.verdict())},
           {"error", o.error()},
           {"ops", o.ops()},
           {"lookups_checked", o.lookups_checked()},
           {"offsets_checked", o.offsets_checked()},
           {"violation_count", o.violation_count()},
           {"violations_by_kind", by_kind},
           {"race_window_hits", o.race_window_hits()},
           {"ops_per_sec", o.ops_per_sec()},
           {"elapsed_s", seconds_of(o.elapsed())},
           {"clock_source", o.clock_source()},
           {"epsilon_ns", o.epsilon_ns()},
           {"console_tail", o.console_tail()},
           {"finished_at", iso_time(o.finished_at())},
           {"scale", scale},
           {"strategy", strategy_json(o)},
           {"violations", violations}};
  out.update(run_json(o.run()));
  return out;
}

v1::Kernel shown(v1::Kernel k) {
  if (k.status().empty()) k.set_status("ready");
  return k;
}

v1::CampaignSpec campaign_spec_from_json(const json& j) {
  if (!j.is_object())
    throw RequestError(ErrorKind::kInvalidArgument, "\"campaign\" must be an object");
  v1::CampaignSpec s;
  if (const json* f = field(j, "name")) {
    if (!f->is_string())
      throw RequestError(ErrorKind::kInvalidArgument, "\"name\" must be a string");
    s.set_name(f->get<std::string>());
  }
  for (auto& v : string_list(j, "scenarios")) s.add_scenarios(v);
  for (auto& v : string_list(j, "kernels")) s.add_kernels(v);
  for (auto& v : string_list(j, "filesystems")) s.add_filesystems(v);
  s.set_seeds(static_cast<uint32_t>(unsigned_field(j, "seeds")));
  s.set_first_seed(unsigned_field(j, "first_seed"));
  s.set_iterations(unsigned_field(j, "iterations"));
  s.set_observers(static_cast<uint32_t>(unsigned_field(j, "observers")));
  s.set_max_attempts(static_cast<uint32_t>(unsigned_field(j, "max_attempts")));
  if (const json* f = field(j, "align")) {
    if (!f->is_string())
      throw RequestError(ErrorKind::kInvalidArgument, "\"align\" must be a string");
    const std::string a = f->get<std::string>();
    s.set_align(a == "seed" ? "" : a);  // checked with the rest of the spec
  }
  if (const json* f = field(j, "pin")) {
    const std::string p = f->is_string() ? f->get<std::string>() : "";
    if (p == "on")
      s.set_pin(v1::CPU_PINNING_ON);
    else if (p == "off")
      s.set_pin(v1::CPU_PINNING_OFF);
    else if (p != "seed" && p != "")
      throw RequestError(ErrorKind::kInvalidArgument,
                         "\"pin\" must be \"on\", \"off\" or \"seed\"");
  }
  if (const json* f = field(j, "duration_s")) {
    // Past int64's range the conversion below is undefined (found by
    // fuzz/http_request_fuzz.cc); normalize() refuses past 3600 s anyway.
    if (!f->is_number() || f->get<double>() < 0 || f->get<double>() > 1e9)
      throw RequestError(ErrorKind::kInvalidArgument,
                         "\"duration_s\" must be a non-negative number of seconds, at most 3600");
    const double secs = f->get<double>();
    s.mutable_duration()->set_seconds(static_cast<int64_t>(secs));
    s.mutable_duration()->set_nanos(
        static_cast<int32_t>((secs - static_cast<double>(static_cast<int64_t>(secs))) * 1e9));
  }
  if (const json* f = field(j, "params")) {
    if (!f->is_object())
      throw RequestError(ErrorKind::kInvalidArgument, "\"params\" must be an object of integers");
    for (const auto& [k, v] : f->items()) {
      if (!v.is_number_integer())
        throw RequestError(ErrorKind::kInvalidArgument,
                           "parameter \"" + k + "\" must be an integer");
      (*s.mutable_params())[k] = v.get<int64_t>();
    }
  }
  return s;
}

}  // namespace leapfrog::coord
