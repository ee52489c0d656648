// The oracle's a violation in full: the walk, the versions and the mutations around it
// (oracle_checker.h).

#include <algorithm>
#include <cerrno>

#include "scenarios/oracle_checker.h"

namespace leapfrog::oracle_detail {

void Checker::report(size_t i, const LookupRecord& r, const Query& q, const WalkOutcome& w,
                     bool relaxed) {
  // steps_checked counts the judging walks, not the walks that write a
  // report: how many are written in detail depends on max_reported, and the
  // count must not (a run judged in batches writes other ones).
  struct KeepSteps {
    uint64_t& steps;
    const uint64_t was;
    ~KeepSteps() { steps = was; }
  } keep{out_.steps_checked, out_.steps_checked};
  ViolationKind kind;
  if (r.err == 0) {
    kind = ViolationKind::StaleEntry;  // refined below
  } else if (w.touched_mount) {
    kind = ViolationKind::WrongMount;
  } else if (r.err == EACCES) {
    kind = ViolationKind::StaleDeny;
  } else {
    kind = ViolationKind::StaleEntry;
  }
  const bool detailed = out_.violations.size() < opts_.max_reported;
  Ending best;
  if (r.err == 0 && w.escape) {
    // Every walk to the observed node ends outside the root.
    kind = ViolationKind::Escape;
    trace_.clear();
    if (detailed) walk(r, q, r.query, &best, false, relaxed);
  } else if (r.err == 0) {
    // Reached only through a permission no version granted: stale-grant.
    // Otherwise no version of the entries (or mounts) leads there.
    trace_.clear();
    if (walk(r, q, r.query, detailed ? &best : nullptr, true).matched) {
      kind = ViolationKind::StaleGrant;
    } else {
      kind = w.touched_mount ? ViolationKind::WrongMount : ViolationKind::StaleEntry;
      best = Ending{};
      trace_.clear();
      if (detailed) walk(r, q, r.query, &best);
    }
  } else if (detailed) {
    trace_.clear();
    walk(r, q, r.query, &best);
  }
  ++out_.violation_count;
  ++out_.by_kind[static_cast<size_t>(kind)];
  if (q.resolve & kResolveCached) ++out_.cached_violations;
  out_.first_violation_at = std::min(out_.first_violation_at, r.complete);
  if (!detailed) return;

  Violation v;
  v.kind = kind;
  v.actor = r.actor;
  v.record = i;
  v.op = q.op;
  for (size_t c = 0; c < q.path.size(); ++c) v.path += (c ? "/" : "") + q.path[c];
  v.invoke = r.invoke;
  v.complete = r.complete;
  v.epsilon = h_.header.epsilon_ns;
  v.observed = observed_text(r);
  v.expected = expected_text(w, best);
  if (q.resolve & kResolveCached)
    v.expected +=
        " (RESOLVE_CACHED: the plain walk's outcomes, or EAGAIN; this is the lockless walk "
        "alone)";
  if (r.has_ids && v.expected == "no outcome") {
    // The exec was allowed, but no version's set-id bits give these ids.
    const Cred& c = h_.header.actors[r.actor].cred;
    v.expected =
        "success: ran with euid=" + std::to_string(c.uid) + " egid=" + std::to_string(c.gid);
  }
  if (r.err == 0) {
    v.step = best.step;
    v.component = best.component;
    v.object = best.object;
    v.versions = best.versions;
  }
  // The deepest branch's steps, root first.
  std::vector<StepTrace> steps;
  uint32_t t = best.trace;
  if (t == kNone && !trace_.empty()) t = static_cast<uint32_t>(trace_.size() - 1);
  for (; t != kNone; t = trace_[t].parent) steps.push_back(trace_[t].step);
  std::reverse(steps.begin(), steps.end());
  v.steps = std::move(steps);
  if (r.err != 0 && !v.steps.empty()) {
    // No step could fail this way: name the last one, where the walk went on.
    const StepTrace& last = v.steps.back();
    v.step = last.step;
    v.component = last.component;
    v.object = last.object;
    v.versions = last.versions;
  }
  v.history = mutation_trace(v);
  out_.violations.push_back(std::move(v));
}

std::vector<MutationTrace> Checker::mutation_trace(const Violation& v) const {
  std::vector<MutationTrace> out;
  if (v.object.empty()) return out;
  const TimeNs margin = std::max<TimeNs>(v.complete - v.invoke, 1);
  TimeNs lo = v.invoke - margin, hi = v.complete + margin;
  for (const auto& pv : v.versions) {
    if (pv.from > kTimeMin) lo = std::min(lo, pv.from);
    if (pv.to < kTimeMax) hi = std::max(hi, pv.to);
  }
  // Sorted by invoke: start where a mutation could still reach lo.
  auto it = std::partition_point(mutation_order_.begin(), mutation_order_.end(), [&](uint32_t i) {
    return h_.mutations[i].invoke < lo - longest_mutation_;
  });
  std::vector<std::pair<TimeNs, uint32_t>> found;  // (distance from the window, record)
  constexpr size_t kMaxScan = 1 << 14;
  for (size_t scanned = 0; it != mutation_order_.end() && scanned < kMaxScan; ++it, ++scanned) {
    const MutationRecord& m = h_.mutations[*it];
    if (m.invoke > hi) break;
    if (m.complete < lo) continue;
    const auto& names = effect_objects_[m.effect];
    if (std::find(names.begin(), names.end(), v.object) == names.end()) continue;
    // The mutations that start or end a possible version come first.
    const bool bounds_version =
        m.err == 0 &&
        std::any_of(v.versions.begin(), v.versions.end(), [&](const PossibleVersion& pv) {
          return pv.from == m.invoke || pv.to == m.complete;
        });
    const TimeNs distance = bounds_version          ? -1
                            : m.complete < v.invoke ? v.invoke - m.complete
                            : m.invoke > v.complete ? m.invoke - v.complete
                                                    : 0;
    found.emplace_back(distance, *it);
  }
  if (found.size() > kMaxMutationTrace) {
    std::partial_sort(found.begin(), found.begin() + kMaxMutationTrace, found.end());
    found.resize(kMaxMutationTrace);
  }
  std::sort(found.begin(), found.end(), [this](const auto& a, const auto& b) {
    return h_.mutations[a.second].invoke < h_.mutations[b.second].invoke;
  });
  for (const auto& [distance, idx] : found) {
    const MutationRecord& m = h_.mutations[idx];
    const Effect& eff = h_.effects[m.effect];
    MutationTrace t{m.actor, eff.op, v.object, "", m.invoke, m.complete, m.err};
    for (size_t s = 0; s < eff.sets.size(); ++s) {
      if (effect_objects_[m.effect][s] == v.object) {
        t.value = describe(eff.sets[s].value, eff.sets[s].key.kind, h_.header.nodes);
        t.node_kind = node_kind_of(eff.sets[s].value, eff.sets[s].key.kind);
      }
    }
    out.push_back(std::move(t));
  }
  return out;
}

std::string Checker::observed_text(const LookupRecord& r) const {
  if (r.err != 0) return std::string("error ") + strerrorname(r.err);
  if (r.has_ids)
    return "success: ran with euid=" + std::to_string(r.euid) + " egid=" + std::to_string(r.egid);
  if (r.dev == 0 && r.ino == 0) return "success";
  for (const auto& n : h_.header.nodes) {
    if (matches(n.id, r))
      return "success: reached " + (n.name.empty() ? "#" + std::to_string(n.id) : n.name);
  }
  return "success: dev=" + std::to_string(r.dev) + " ino=" + std::to_string(r.ino);
}

std::string Checker::expected_text(const WalkOutcome& w, const Ending& best) const {
  std::string s;
  auto add = [&s](const std::string& t) { s += s.empty() ? t : " or " + t; };
  if (w.fail_bits & kFailAcces) add("EACCES");
  if (w.fail_bits & kFailNoent) add("ENOENT");
  if (w.fail_bits & kFailNotdir) add("ENOTDIR");
  if (w.fail_bits & kFailLoop) add("ELOOP");
  if (w.fail_bits & kFailXdev) add("EXDEV");
  if (w.fail_bits & kFailAgain) add("EAGAIN");
  std::vector<NodeId> finals = best.finals;
  std::sort(finals.begin(), finals.end());
  finals.erase(std::unique(finals.begin(), finals.end()), finals.end());
  for (NodeId n : finals) {
    const Node& node = h_.header.nodes[n];
    add("success: reached " + (node.name.empty() ? "#" + std::to_string(n) : node.name));
  }
  if (s.empty()) s = "no outcome";
  return s;
}

}  // namespace leapfrog::oracle_detail
