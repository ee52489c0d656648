#include "coordinator/triage/actions.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "common/proto_time.h"
#include "coordinator/campaign.h"
#include "coordinator/triage/repro_c.h"
#include "coordinator/triage/stats.h"
#include "coordinator/work_signal.h"
#include "scenarios/registry.h"
#include "scenarios/widen_request.h"

namespace leapfrog::coord::triage {

namespace {

using nlohmann::json;

constexpr double kConfidence = 0.95;
// The smallest duration minimize tries for duration-based specs (us).
constexpr int64_t kMinDurationUs = 100'000;

v1::ReproRate make_rate(const std::string& kernel, const Tally& t, int64_t action_id,
                        TimePoint now) {
  v1::ReproRate r;
  r.set_kernel_label(kernel);
  r.set_runs(t.runs);
  r.set_reproduced(t.reproduced);
  const Interval i = wilson_interval(t.reproduced, t.runs);
  r.set_rate(i.rate);
  r.set_lower(i.lower);
  r.set_upper(i.upper);
  r.set_other_failures(t.other);
  *r.mutable_measured_at() = to_proto(now);
  r.set_action_id(action_id);
  return r;
}

// The rate that sizes steps and candidates: the lower end of the measured
// rate's 95% interval, so that 10 of 10 is not taken for "always" (it gives
// 3 runs, not 1), and "good" stays 95% sure under the rate's uncertainty.
double sizing_rate(const Tally& t) {
  return wilson_interval(t.reproduced, t.runs).lower;
}

// Queues `runs` jobs of exactly `spec` on `kernel` as one campaign.
int64_t queue_runs(const ActionContext& ctx, const v1::Action& a, const v1::ScenarioSpec& spec,
                   const std::string& kernel, uint32_t runs, const std::string& what) {
  v1::CampaignSpec c;
  c.set_name(std::string(kActionCampaignPrefix) + "action-" + std::to_string(a.id()) + "/" +
             action_kind_name(a.kind()) + "/" + what);
  c.add_scenarios(spec.scenario());
  c.add_kernels(kernel);
  c.add_filesystems(spec.fs());
  c.set_seeds(runs);
  c.set_first_seed(spec.seed());
  *c.mutable_duration() = spec.duration();
  c.set_iterations(spec.iterations());
  c.set_observers(spec.observers());
  c.set_align(spec.align());
  c.set_pin(spec.pin());
  *c.mutable_params() = spec.params();
  c.set_max_attempts(3);
  std::vector<NewJob> jobs(runs);
  for (auto& j : jobs) {
    j.spec = spec;  // the exact seed every time: the race timing is what varies
    j.kernel_label = kernel;
  }
  const int64_t id = ctx.store.create_campaign(c, jobs, 0, ctx.clock.now());
  if (ctx.work) ctx.work->notify();
  spdlog::info("triage.queued action={} campaign={} kernel={} runs={} what=\"{}\"", a.id(), id,
               kernel, runs, what);
  return id;
}

std::string describe(const Tally& t) {
  return std::to_string(t.reproduced) + "/" + std::to_string(t.runs) + " reproduced" +
         (t.other ? ", " + std::to_string(t.other) + " failed otherwise" : "");
}

void fail(v1::Action& a, const std::string& why) {
  a.set_state(v1::ACTION_STATE_FAILED);
  a.set_error(why);
  a.set_progress("failed");
  spdlog::warn("triage.action_failed action={} error=\"{}\"", a.id(), why);
}

// The issue of the action's signature (a replay of an outcome may start
// before its failure was grouped).
int64_t issue_of(const ActionContext& ctx, v1::Action& a, const json& m) {
  if (a.issue_id() == 0)
    a.set_issue_id(ctx.triage.find_issue(m.at("signature").get<std::string>()).value_or(0));
  return a.issue_id();
}

// ---- replay ----

void step_replay(const ActionContext& ctx, v1::Action& a, json& m) {
  const std::string sig = m.at("signature");
  if (m.value("campaign", int64_t{0}) == 0) {
    const int64_t c = queue_runs(ctx, a, a.spec(), a.kernel_label(), a.runs(), a.kernel_label());
    m["campaign"] = c;
    a.add_campaign_ids(c);
    a.set_progress("running " + std::to_string(a.runs()) + " runs on " + a.kernel_label());
    return;
  }
  const Tally t = tally_campaign(ctx.store, m.at("campaign"), sig);
  if (!t.done) {
    a.set_progress(std::to_string(t.finished) + "/" + std::to_string(t.runs) + " runs done on " +
                   a.kernel_label());
    return;
  }
  *a.mutable_rate() = make_rate(a.kernel_label(), t, a.id(), ctx.clock.now());
  if (issue_of(ctx, a, m) != 0) ctx.triage.put_rate(a.issue_id(), a.rate());
  a.set_state(v1::ACTION_STATE_DONE);
  a.set_progress("done: " + describe(t) + " on " + a.kernel_label());
}

// ---- bisect ----

// Queues the next step, or finishes when no untested kernel is left between
// the last good and the first bad.
void next_bisect_step(const ActionContext& ctx, v1::Action& a, json& m) {
  const int lo = m.at("lo"), hi = m.at("hi");
  std::vector<int> skipped = m.value("skipped", std::vector<int>{});
  std::vector<int> candidates;
  for (int k = lo + 1; k < hi; ++k)
    if (std::find(skipped.begin(), skipped.end(), k) == skipped.end()) candidates.push_back(k);
  v1::BisectResult* r = a.mutable_bisect();
  if (candidates.empty()) {
    r->set_first_bad(a.kernels(hi));
    r->set_last_good(a.kernels(lo));
    r->clear_skipped();
    for (int k : skipped)
      if (k > lo && k < hi) r->add_skipped(a.kernels(k));
    a.set_state(v1::ACTION_STATE_DONE);
    a.set_progress("done: first bad " + a.kernels(hi) + " (last good " + a.kernels(lo) + ", " +
                   std::to_string(r->runs_per_step()) + " runs per step at rate " +
                   std::to_string(r->rate()) + ")" +
                   (r->skipped_size() ? ", skipped kernels in between" : ""));
    return;
  }
  const int mid = candidates[candidates.size() / 2];
  const uint32_t n = r->runs_per_step();
  const int64_t c = queue_runs(ctx, a, a.spec(), a.kernels(mid), n, a.kernels(mid));
  m["mid"] = mid;
  m["campaign"] = c;
  a.add_campaign_ids(c);
  a.set_progress("testing " + a.kernels(mid) + " with " + std::to_string(n) + " runs (good " +
                 a.kernels(lo) + ", bad " + a.kernels(hi) + ")");
}

void step_bisect(const ActionContext& ctx, v1::Action& a, json& m) {
  const std::string sig = m.at("signature");
  const int last = a.kernels_size() - 1;
  if (!m.contains("phase")) {
    const uint32_t n = ctx.opts.bisect_measure_runs;
    const int64_t c =
        queue_runs(ctx, a, a.spec(), a.kernels(last), n, "measure-" + a.kernels(last));
    m["phase"] = "measure";
    m["campaign"] = c;
    m["lo"] = 0;
    m["hi"] = last;
    a.add_campaign_ids(c);
    a.set_progress("measuring the rate on " + a.kernels(last) + " with " + std::to_string(n) +
                   " runs");
    return;
  }
  const Tally t = tally_campaign(ctx.store, m.at("campaign"), sig);
  if (!t.done) return;
  v1::BisectResult* r = a.mutable_bisect();
  v1::BisectStep* s = r->add_steps();
  s->set_runs(t.runs);
  s->set_reproduced(t.reproduced);
  s->set_other_failures(t.other);
  s->set_campaign_id(m.at("campaign"));
  const std::string phase = m.at("phase");
  const int kernel = phase == "measure" ? last : m.at("mid").get<int>();
  s->set_kernel_label(a.kernels(kernel));
  if (issue_of(ctx, a, m) != 0)
    ctx.triage.put_rate(a.issue_id(), make_rate(a.kernels(kernel), t, a.id(), ctx.clock.now()));
  if (phase == "measure") {
    s->set_verdict(v1::BISECT_STEP_MEASURE);
    if (t.reproduced == 0) {
      fail(a, "the issue did not reproduce on the last bad kernel \"" + a.kernels(last) + "\" (" +
                  describe(t) + "): cannot size the steps");
      return;
    }
    const double rate = static_cast<double>(t.reproduced) / t.runs;
    r->set_rate(rate);
    r->set_runs_per_step(runs_for_confidence(sizing_rate(t), kConfidence, a.runs()));
    m["phase"] = "step";
  } else if (t.reproduced > 0) {
    s->set_verdict(v1::BISECT_STEP_BAD);
    m["hi"] = kernel;
  } else if (t.clean == t.runs) {
    s->set_verdict(v1::BISECT_STEP_GOOD);
    m["lo"] = kernel;
  } else {
    // Failed some other way (another signature, a crash, no boot): neither
    // good nor bad.
    s->set_verdict(v1::BISECT_STEP_SKIPPED);
    auto skipped = m.value("skipped", std::vector<int>{});
    skipped.push_back(kernel);
    m["skipped"] = skipped;
  }
  next_bisect_step(ctx, a, m);
}

// ---- minimize ----

// The "ops" parameter bit of a lookup operation (0: not in the mix).
int64_t op_mask(const std::string& op) {
  if (op == "stat" || op == "fstatat") return 1;
  if (op == "access" || op == "faccessat") return 2;
  if (op == "open" || op == "openat") return 4;
  return 0;
}

// The next smaller candidate of `best` along dimension `dim`, or nullopt when
// that dimension cannot shrink further; the race strategy's pinning stays as
// the issue's example ran, and so does its alignment but for "both", which
// one observer takes from the violating observer. Dimensions: 0 observers, 1 scenario
// parameters (each to its minimum: tree depth, optional operations), 2 the
// kernel delay points (all off first, then each point alone), 3 iterations or
// duration.
std::optional<std::pair<v1::ScenarioSpec, std::string>> candidate(const EngineOptions& opts,
                                                                  const v1::ScenarioSpec& best,
                                                                  int dim, json& m) {
  v1::ScenarioSpec c = best;
  if (dim == 0) {
    if (best.align() == "both") {
      // One observer cannot be both: keep the alignment of the one that saw
      // the violation (actor 0 is the mutator; the first ceil(n/2)
      // observers were aligned, scenarios/strategy.h).
      const int64_t actor = m.value("actor", int64_t{-1});
      const bool was_free =
          actor >= 1 && static_cast<uint32_t>(actor - 1) >= (best.observers() + 1) / 2;
      c.set_align(was_free ? "free" : "fuzzy");
      c.set_observers(1);
      return std::make_pair(c, "observers " + std::to_string(best.observers()) +
                                   " -> 1, alignment both -> " + c.align() +
                                   " (the violating observer's)");
    }
    if (best.observers() == 1) return std::nullopt;
    c.set_observers(1);
    return std::make_pair(c, "observers " + std::to_string(best.observers()) + " -> 1");
  }
  if (dim == 1) {
    const Scenario* scenario = nullptr;
    try {
      scenario = &find_scenario(best.scenario());
    } catch (const std::exception&) {
      return std::nullopt;
    }
    const auto params = scenario->params();
    for (size_t k = m.value("param", size_t{0}); k < params.size(); ++k) {
      const ParamSpec& p = params[k];
      m["param"] = k + 1;
      // Choices (-1: by the seed) and the mutation rate are not sizes.
      if (p.min < 0 || p.name == "mutate_pct") continue;
      const auto it = best.params().find(p.name);
      const int64_t cur = it == best.params().end() ? p.def : it->second;
      if (p.name == "ops") {
        // The operation mix narrows to the lookup the issue's violation used
        // (its minimum would be an arbitrary op).
        const std::string op = m.value("op", std::string());
        const int64_t want = op_mask(op);
        if (want == 0 || cur == want) continue;
        (*c.mutable_params())[p.name] = want;
        return std::make_pair(c, "operations " + std::to_string(cur) + " -> " + std::to_string(want) +
                                     " (only " + op + ")");
      }
      if (cur <= p.min) continue;
      (*c.mutable_params())[p.name] = p.min;
      return std::make_pair(c, p.name + " " + std::to_string(cur) + " -> " + std::to_string(p.min));
    }
    return std::nullopt;
  }
  if (dim == 2) {
    // Only an explicit list (what replay and the issue's example carry) can
    // shrink: "off" first, which says whether the bug needs widening at all;
    // then without each point in turn, keeping those it still needs.
    widen::Request w;
    try {
      w = widen::parse_request(best.widen());
    } catch (const UsageError&) {
      return std::nullopt;
    }
    if (w.mode != widen::Request::Mode::Explicit) return std::nullopt;
    if (!m.value("widen_off_tried", false)) {
      m["widen_off_tried"] = true;
      c.set_widen("off");
      return std::make_pair(c, "widening " + best.widen() + " -> off");
    }
    if (w.points.size() < 2) return std::nullopt;  // without its one point is "off"
    auto tried = m.value("widen_tried", std::vector<std::string>{});
    for (size_t i = 0; i < w.points.size(); ++i) {
      if (std::find(tried.begin(), tried.end(), w.points[i].name) != tried.end()) continue;
      tried.push_back(w.points[i].name);
      m["widen_tried"] = tried;
      std::vector<WidenPoint> rest = w.points;
      rest.erase(rest.begin() + static_cast<std::ptrdiff_t>(i));
      c.set_widen(widen::format_request(rest));
      return std::make_pair(c, "widening without " + w.points[i].name + " -> " + c.widen());
    }
    return std::nullopt;
  }
  if (dim == 3) {
    if (best.iterations() > 0) {
      if (best.iterations() <= opts.min_iterations) return std::nullopt;
      c.set_iterations(std::max<uint64_t>(opts.min_iterations, best.iterations() / 2));
      return std::make_pair(c, "iterations " + std::to_string(best.iterations()) + " -> " +
                                   std::to_string(c.iterations()));
    }
    const int64_t d = from_proto(best.duration()).count();
    if (d <= kMinDurationUs) return std::nullopt;
    *c.mutable_duration() = to_proto(Duration(std::max(kMinDurationUs, d / 2)));
    return std::make_pair(c, "duration " + std::to_string(d / 1000) + "ms -> " +
                                 std::to_string(std::max(kMinDurationUs, d / 2) / 1000) + "ms");
  }
  return std::nullopt;
}

// Queues the next candidate, or finishes with the minimal spec and its C
// reproducer.
void next_candidate(const ActionContext& ctx, v1::Action& a, json& m) {
  v1::MinimizeResult* r = a.mutable_minimize();
  for (int dim = m.value("dim", 0); dim < 4; ++dim) {
    m["dim"] = dim;
    auto c = candidate(ctx.opts, r->minimal_spec(), dim, m);
    if (!c) {
      m["param"] = 0;
      continue;
    }
    const uint32_t n = m.at("n");
    *a.mutable_spec() = c->first;
    const int64_t id = queue_runs(ctx, a, c->first, a.kernel_label(), n, "candidate");
    m["campaign"] = id;
    m["change"] = c->second;
    a.add_campaign_ids(id);
    r->set_tried(r->tried() + 1);
    a.set_progress("trying " + c->second + " with " + std::to_string(n) + " runs");
    return;
  }
  *a.mutable_spec() = r->minimal_spec();
  v1::Violation example;
  if (auto issue = ctx.triage.get_issue(a.issue_id())) example = issue->example_violation();
  try {
    r->set_c_reproducer(c_reproducer(r->minimal_spec(), example));
  } catch (const ReproError& e) {
    r->set_c_reproducer_error(e.what());
  }
  a.set_state(v1::ACTION_STATE_DONE);
  a.set_progress("done: kept " + std::to_string(r->kept()) + " of " + std::to_string(r->tried()) +
                 " reductions");
}

void step_minimize(const ActionContext& ctx, v1::Action& a, json& m) {
  const std::string sig = m.at("signature");
  if (!m.contains("phase")) {
    const uint32_t n = ctx.opts.bisect_measure_runs;
    const int64_t c = queue_runs(ctx, a, a.spec(), a.kernel_label(), n, "measure");
    m["phase"] = "measure";
    m["campaign"] = c;
    a.add_campaign_ids(c);
    a.set_progress("measuring the rate on " + a.kernel_label() + " with " + std::to_string(n) +
                   " runs");
    return;
  }
  const Tally t = tally_campaign(ctx.store, m.at("campaign"), sig);
  if (!t.done) return;
  v1::MinimizeResult* r = a.mutable_minimize();
  if (m.at("phase") == "measure") {
    if (t.reproduced == 0) {
      fail(a, "the issue did not reproduce on \"" + a.kernel_label() + "\" (" + describe(t) +
                  "): nothing to minimize");
      return;
    }
    if (issue_of(ctx, a, m) != 0)
      ctx.triage.put_rate(a.issue_id(), make_rate(a.kernel_label(), t, a.id(), ctx.clock.now()));
    // Enough runs that a candidate still reproducing at this rate shows it
    // with 95% confidence.
    m["n"] = runs_for_confidence(sizing_rate(t), kConfidence, a.runs());
    m["phase"] = "candidate";
    m["dim"] = 0;
    if (auto issue = ctx.triage.get_issue(a.issue_id())) {
      m["op"] = issue->example_violation().op();
      m["actor"] = issue->example_violation().actor();
    }
    r->add_log("measured: " + describe(t) + "; " + std::to_string(m["n"].get<uint32_t>()) +
               " runs per candidate");
  } else {
    const std::string change = m.at("change");
    if (t.reproduced > 0) {
      *r->mutable_minimal_spec() = a.spec();
      r->set_kept(r->kept() + 1);
      r->add_log(change + ": " + describe(t) + ", kept");
      // The same dimension may shrink again (iterations halve); parameters
      // and delay points move on to the next one by themselves.
    } else {
      r->add_log(change + ": " + describe(t) + ", dropped");
      const int dim = m.at("dim").get<int>();
      if (dim != 1 && dim != 2) m["dim"] = dim + 1;
    }
  }
  next_candidate(ctx, a, m);
}

}  // namespace

std::string action_kind_name(v1::ActionKind kind) {
  switch (kind) {
    case v1::ACTION_KIND_REPLAY:
      return "replay";
    case v1::ACTION_KIND_MINIMIZE:
      return "minimize";
    case v1::ACTION_KIND_BISECT:
      return "bisect";
    default:
      return "action";
  }
}

std::string new_machine(const std::string& signature) {
  return json{{"signature", signature}}.dump();
}

Tally tally_campaign(Store& store, int64_t campaign_id, const std::string& signature) {
  Tally t;
  const auto c = store.get_campaign(campaign_id);
  if (!c) return t;
  t.runs = c->jobs();
  const auto by = c->by_state();
  t.finished = by.count("done") ? by.at("done") : 0;
  if (c->state() != v1::CAMPAIGN_STATE_DONE) return t;
  t.done = true;
  for (const auto& o : store.find_outcomes({.campaign_id = campaign_id, .limit = t.runs + 1})) {
    if (outcome_has_signature(o.spec(), o.outcome(), signature)) {
      ++t.reproduced;
    } else if (o.outcome().verdict() == v1::VERDICT_PASS) {
      ++t.clean;
    }
  }
  t.other = t.runs - t.reproduced - t.clean;  // other failures, and jobs lost to the infrastructure
  return t;
}

bool advance_one(const ActionContext& ctx, int64_t id) {
  return ctx.triage.advance_action(id, ctx.clock.now(), [&](v1::Action& a, std::string& text) {
    json m = json::parse(text, nullptr, false);
    if (m.is_discarded() || !m.contains("signature")) {
      fail(a, "the action's stored state does not parse");
      return;
    }
    try {
      switch (a.kind()) {
        case v1::ACTION_KIND_REPLAY:
          step_replay(ctx, a, m);
          break;
        case v1::ACTION_KIND_BISECT:
          step_bisect(ctx, a, m);
          break;
        case v1::ACTION_KIND_MINIMIZE:
          step_minimize(ctx, a, m);
          break;
        default:
          fail(a, "unknown action kind " + std::to_string(a.kind()));
      }
    } catch (const SpecError& e) {
      fail(a, std::string("cannot queue runs: ") + e.what());
    }
    text = m.dump();
  });
}

}  // namespace leapfrog::coord::triage
