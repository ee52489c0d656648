#include "agent/outcome_proto.h"

#include <google/protobuf/util/time_util.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "common/ktap/words.h"
#include "common/outcome/run_proto.h"
#include "common/outcome/scale_proto.h"
#include "common/outcome/violation_proto.h"
#include "common/proto_time.h"

namespace leapfrog {

using nlohmann::json;

static v1::Verdict verdict_from(const std::string& v) {
  if (v == "pass") return v1::VERDICT_PASS;
  if (v == "violation") return v1::VERDICT_VIOLATION;
  if (v == "error") return v1::VERDICT_ERROR;
  if (v == "inconclusive") return v1::VERDICT_INCONCLUSIVE;
  throw std::runtime_error("unknown verdict \"" + v + "\"");
}

static v1::Alignment alignment_from(const std::string& a) {
  if (a == "fuzzy") return v1::ALIGNMENT_FUZZY;
  if (a == "free") return v1::ALIGNMENT_FREE;
  if (a == "both") return v1::ALIGNMENT_BOTH;
  return v1::ALIGNMENT_UNSPECIFIED;
}

static void stamp(v1::Outcome& o) {
  const auto now = std::chrono::system_clock::now().time_since_epoch();
  o.mutable_finished_at()->set_seconds(std::chrono::duration_cast<std::chrono::seconds>(now).count());
}

v1::Outcome outcome_from_json(const std::string& text) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    throw std::runtime_error(std::string("outcome is not JSON: ") + e.what());
  }
  if (!j.is_object() || !j.contains("verdict")) throw std::runtime_error("outcome has no verdict");
  v1::Outcome o;
  o.set_verdict(verdict_from(j.at("verdict").get<std::string>()));
  o.set_error(j.value("error", ""));
  o.set_ops(j.value("ops", uint64_t{0}));
  o.set_lookups_checked(j.value("lookups_checked", uint64_t{0}));
  o.set_offsets_checked(j.value("offsets_checked", uint64_t{0}));
  o.set_violation_count(j.value("violation_count", uint64_t{0}));
  if (j.contains("violations_by_kind"))
    for (const auto& [k, v] : j.at("violations_by_kind").items()) (*o.mutable_violations_by_kind())[k] = v.get<uint64_t>();
  if (j.contains("violations")) {
    for (const auto& v : j.at("violations")) {
      auto* p = o.add_violations();
      p->set_kind(ktap::violation_kind_from(v.value("kind", "")));
      p->set_actor(v.value("actor", 0u));
      p->set_op(v.value("op", ""));
      p->set_path(v.value("path", ""));
      p->set_invoke_ns(v.value("invoke", int64_t{0}));
      p->set_complete_ns(v.value("complete", int64_t{0}));
      p->set_step(v.value("step", 0));
      p->set_component(v.value("component", ""));
      p->set_object(v.value("object", ""));
      p->set_observed(v.value("observed", ""));
      p->set_expected(v.value("expected", ""));
      *p->mutable_detail() = detail_from_json(v);
    }
  }
  o.set_race_window_hits(j.value("race_window_hits", uint64_t{0}));
  o.set_ops_per_sec(j.value("ops_per_sec", 0.0));
  const double secs = j.value("duration_s", 0.0);
  o.mutable_elapsed()->set_seconds(static_cast<int64_t>(secs));
  o.mutable_elapsed()->set_nanos(static_cast<int32_t>((secs - static_cast<double>(static_cast<int64_t>(secs))) * 1e9));
  o.set_clock_source(j.value("clock_source", ""));
  o.set_epsilon_ns(j.value("epsilon_ns", int64_t{0}));
  o.set_first_violation_ns(j.value("first_violation_ns", int64_t{-1}));
  o.set_ops_to_first_violation(j.value("ops_to_first_violation", uint64_t{0}));
  if (j.contains("widening") && j.at("widening").is_object()) {
    const json& w = j.at("widening");
    v1::Widening* pw = o.mutable_widening();
    pw->set_on(w.value("on", false));
    pw->set_reason(w.value("reason", ""));
    for (const auto& p : w.value("points", json::array())) {
      v1::WidenPoint* pp = pw->add_points();
      pp->set_name(p.value("name", ""));
      pp->set_probability_ppm(p.value("probability_ppm", 0u));
      pp->set_delay_ns(p.value("delay_ns", 0u));
      pp->set_uid(p.value("uid", ""));
      pp->set_hits(p.value("hits", uint64_t{0}));
      if (p.contains("spent_ns"))
        *pp->mutable_spent() = duration_of_ns(p.at("spent_ns").get<int64_t>());
    }
    for (const auto& c : w.value("control_checks", json::array()))
      pw->add_control_checks(c.get<std::string>());
  }
  if (j.contains("strategy") && j.at("strategy").is_object()) {
    const json& st = j.at("strategy");
    v1::RaceStrategy* ps = o.mutable_strategy();
    ps->set_alignment(alignment_from(st.value("alignment", "")));
    ps->set_observers(st.value("observers", 0u));
    ps->set_aligned_observers(st.value("aligned_observers", 0u));
    ps->set_pinned(st.value("pinned", false));
    for (const auto& c : st.value("chosen_by_seed", json::array()))
      ps->add_chosen_by_seed(c.get<std::string>());
    ps->set_widening(st.value("widening", ""));
  }
  if (auto scale = scale_run_from_json(j)) *o.mutable_scale() = std::move(*scale);
  *o.mutable_run() = run_detail_from_json(j);
  stamp(o);
  return o;
}

namespace {

void add_note(v1::Outcome& o, const std::string& note) {
  o.mutable_run()->add_notes(note);
}

std::string tail_of(const std::string& s, size_t keep) {
  return s.size() <= keep
             ? s
             : "[" + std::to_string(s.size() - keep) + " bytes cut] " + s.substr(s.size() - keep);
}

}  // namespace

bool fit_outcome(v1::Outcome& o, size_t max_bytes) {
  const size_t before = o.ByteSizeLong();
  if (before <= max_bytes) return false;
  const std::string why = "the outcome was " + std::to_string(before) +
                          " bytes, over the coordinator's " + std::to_string(max_bytes) + ": ";
  size_t dropped_history = 0;
  for (int i = o.violations_size() - 1; i >= 0 && o.ByteSizeLong() > max_bytes; --i) {
    v1::Violation* v = o.mutable_violations(i);
    if (v->detail().history_size() == 0) continue;
    v->mutable_detail()->clear_history();
    ++dropped_history;
  }
  if (dropped_history)
    add_note(o,
             why + std::to_string(dropped_history) + " violations dropped their history excerpts");
  size_t dropped = 0;
  while (o.violations_size() > 1 && o.ByteSizeLong() > max_bytes) {
    o.mutable_violations()->RemoveLast();
    ++dropped;
  }
  if (dropped)
    add_note(o, why + "the last " + std::to_string(dropped) + " violations were dropped (" +
                    std::to_string(o.violations_size()) +
                    " kept; violation_count still counts all " +
                    std::to_string(o.violation_count()) + ")");
  if (o.ByteSizeLong() > max_bytes) {
    o.set_error(tail_of(o.error(), 64 << 10));
    o.set_console_tail(tail_of(o.console_tail(), 64 << 10));
    add_note(o, why + "error and console_tail keep their last 64 KiB");
  }
  if (o.ByteSizeLong() > max_bytes && o.violations_size() > 0) {
    o.mutable_violations(0)->clear_detail();
    add_note(o, why + "the one violation kept dropped its detail (its fields are kept)");
  }
  return true;
}

v1::Outcome outcome_of_run(const std::string& bytes) {
  if (bytes.empty()) throw std::runtime_error("the run wrote no outcome");
  v1::Outcome o;
  if (!o.ParseFromString(bytes))
    throw std::runtime_error("the run's output (" + std::to_string(bytes.size()) +
                             " bytes) is not a v1.Outcome");
  if (o.verdict() == v1::VERDICT_UNSPECIFIED)
    throw std::runtime_error("the run's outcome (" + std::to_string(bytes.size()) +
                             " bytes) has no verdict");
  return o;
}

v1::Outcome error_outcome(const std::string& why) {
  v1::Outcome o;
  o.set_verdict(v1::VERDICT_ERROR);
  o.set_error(why);
  stamp(o);
  return o;
}

}  // namespace leapfrog
