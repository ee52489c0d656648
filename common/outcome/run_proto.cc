#include "common/outcome/run_proto.h"

#include <nlohmann/json.hpp>
#include <string>
#include <type_traits>

#include "common/proto_time.h"

namespace leapfrog {

using nlohmann::json;

namespace {

// j[key] when it is a number (an integer for an integer T: casting a huge
// double is undefined; an old row's JSON is not trusted), else 0.
template <class T>
T number(const json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end()) return T{};
  const bool fits = std::is_floating_point_v<T> ? it->is_number() : it->is_number_integer();
  return fits ? it->get<T>() : T{};
}

}  // namespace

v1::RunDetail run_detail_from_json(const json& outcome) {
  v1::RunDetail d;
  if (!outcome.is_object()) return d;
  d.set_mutations(number<uint64_t>(outcome, "mutations"));
  d.set_rounds(number<uint64_t>(outcome, "rounds"));
  d.set_steps_checked(number<uint64_t>(outcome, "steps_checked"));
  d.set_unjudged(number<uint64_t>(outcome, "unjudged"));
  d.set_over_budget(number<uint64_t>(outcome, "over_budget"));
  *d.mutable_setup() = duration_of_seconds(number<double>(outcome, "setup_s"));
  d.set_peak_rss_bytes(number<uint64_t>(outcome, "peak_rss_bytes"));
  d.set_children_peak_rss_bytes(number<uint64_t>(outcome, "children_peak_rss_bytes"));
  v1::RaceTiming* t = d.mutable_timing();
  if (auto timing = outcome.find("timing"); timing != outcome.end() && timing->is_object()) {
    *t->mutable_mutator_mean() = duration_of_ns(number<int64_t>(*timing, "mutator_mean_ns"));
    *t->mutable_observer_mean() = duration_of_ns(number<int64_t>(*timing, "observer_mean_ns"));
    *t->mutable_delay_span() = duration_of_ns(number<int64_t>(*timing, "delay_span_ns"));
    t->set_warmup_rounds(number<uint32_t>(*timing, "warmup_rounds"));
    if (const auto pace = number<int64_t>(*timing, "pace_ns"); pace > 0)
      *t->mutable_pace() = duration_of_ns(pace);
  }
  if (auto bp = outcome.find("backpressure"); bp != outcome.end() && bp->is_object()) {
    if (const auto waited = number<double>(*bp, "waited_s"); waited > 0)
      *t->mutable_backpressure() = duration_of_seconds(waited);
    t->set_backpressure_waits(number<uint64_t>(*bp, "waits"));
  }
  if (auto notes = outcome.find("notes"); notes != outcome.end() && notes->is_array())
    for (const auto& n : *notes)
      if (n.is_string()) d.add_notes(n.get<std::string>());
  return d;
}

}  // namespace leapfrog
