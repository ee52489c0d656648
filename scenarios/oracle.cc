#include "scenarios/oracle.h"

#include <algorithm>
#include <cerrno>

#include "scenarios/oracle_checker.h"

namespace leapfrog {

const char* to_string(ViolationKind k) {
  switch (k) {
    case ViolationKind::StaleGrant:
      return "stale-grant";
    case ViolationKind::StaleDeny:
      return "stale-deny";
    case ViolationKind::StaleEntry:
      return "stale-entry";
    case ViolationKind::WrongMount:
      return "wrong-mount";
    case ViolationKind::TornOffset:
      return "torn-offset";
    case ViolationKind::Escape:
      return "escape";
  }
  return "?";
}

namespace oracle_detail {

void Checker::run() {
  index_nodes();
  index_initial();
  apply_mutations();
  index_queries();
  for (size_t i = 0; i < h_.lookups.size(); ++i) check_lookup(i);
  add_lookup_notes(out_, opts_);
}

void Checker::check_node(NodeId n, const char* what) const {
  if (n >= h_.header.nodes.size())
    throw HistoryError(std::string(what) + ": unknown node id " + std::to_string(n));
}

uint32_t Checker::add_value(const Value& v, ObjectKind kind) {
  if (kind != ObjectKind::Attr && v.target != kNoNode) check_node(v.target, "value");
  values_.push_back(v);
  return static_cast<uint32_t>(values_.size() - 1);
}

void Checker::check_times(const char* what, size_t i, TimeNs invoke, TimeNs complete) {
  if (invoke < -kMaxTimeNs || complete > kMaxTimeNs)
    throw HistoryError(std::string(what) + " " + std::to_string(i) +
                       ": time out of range, want [-2^60, 2^60] ns");
}

void Checker::index_nodes() {
  if (h_.header.epsilon_ns < 0 || h_.header.epsilon_ns > kMaxEpsilonNs)
    throw HistoryError("epsilon_ns " + std::to_string(h_.header.epsilon_ns) +
                       " is out of range, want [0, 2^58]");
  const size_t n = h_.header.nodes.size();
  for (size_t i = 0; i < n; ++i) {
    if (h_.header.nodes[i].id != i)
      throw HistoryError("node " + std::to_string(i) + " has id " +
                         std::to_string(h_.header.nodes[i].id));
  }
  attr_obj_.assign(n, kNone);
  parent_obj_.assign(n, kNone);
  mount_obj_.assign(n, kNone);
  link_target_.resize(n);
  link_absolute_.assign(n, false);
  visit_stamp_.assign(n, 0);
  for (size_t i = 0; i < n; ++i) {
    const Node& node = h_.header.nodes[i];
    if (node.kind != NodeKind::Symlink) continue;
    if (node.magic_target != kNoNode) check_node(node.magic_target, "magic link target");
    link_absolute_[i] = !node.symlink_target.empty() && node.symlink_target[0] == '/';
    link_target_[i] = split_path(node.symlink_target);
  }
  n_actors_ = h_.header.actors.size();
  for (size_t i = 0; i < n_actors_; ++i) {
    if (h_.header.actors[i].id != i)
      throw HistoryError("actor " + std::to_string(i) + " has id " +
                         std::to_string(h_.header.actors[i].id));
  }
}

std::vector<uint32_t> Checker::split_path(const std::string& path) {
  std::vector<uint32_t> out;
  size_t i = 0;
  while (i <= path.size()) {
    size_t j = path.find('/', i);
    if (j == std::string::npos) j = path.size();
    if (j > i) out.push_back(intern(path.substr(i, j - i)));
    i = j + 1;
  }
  return out;
}

uint32_t Checker::new_object(const ObjectKey& key, uint32_t value) {
  objects_.push_back(Object{key, {Version{kTimeMin, kTimeMax, value}}, kNone});
  return static_cast<uint32_t>(objects_.size() - 1);
}

void Checker::index_initial() {
  for (const auto& set : h_.header.initial) {
    uint32_t* slot = slot_for(set.key, true);
    if (*slot != kNone)
      throw HistoryError("initial value given twice for " + describe(set.key, h_.header.nodes));
    *slot = new_object(set.key, add_value(set.value, set.key.kind));
  }
  // Directories' entries default to absent and mounts to nothing: those need
  // no initial line. Every directory needs its attributes.
  for (const auto& node : h_.header.nodes) {
    if (node.kind == NodeKind::Dir && attr_obj_[node.id] == kNone)
      throw HistoryError("directory node " + std::to_string(node.id) + " has no initial attr");
  }
}

void Checker::apply_mutations() {
  // Values of each effect, interned once: records refer to effects by index.
  std::vector<std::vector<uint32_t>> effect_values(h_.effects.size());
  for (size_t e = 0; e < h_.effects.size(); ++e) {
    for (const auto& set : h_.effects[e].sets)
      effect_values[e].push_back(add_value(set.value, set.key.kind));
  }
  std::vector<uint32_t> order(h_.mutations.size());
  for (uint32_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [this](uint32_t a, uint32_t b) {
    return h_.mutations[a].invoke < h_.mutations[b].invoke;
  });
  effect_objects_.assign(h_.effects.size(), {});
  for (size_t e = 0; e < h_.effects.size(); ++e) {
    for (const auto& set : h_.effects[e].sets)
      effect_objects_[e].push_back(describe(set.key, h_.header.nodes));
  }
  for (uint32_t idx : order) {
    const MutationRecord& m = h_.mutations[idx];
    if (m.complete >= m.invoke)
      longest_mutation_ = std::max(longest_mutation_, m.complete - m.invoke);
  }
  for (uint32_t idx : order) {
    const MutationRecord& m = h_.mutations[idx];
    if (m.effect >= h_.effects.size())
      throw HistoryError("mutation " + std::to_string(idx) + " refers to unknown effect " +
                         std::to_string(m.effect));
    if (m.complete < m.invoke)
      throw HistoryError("mutation " + std::to_string(idx) + " completes before it is invoked");
    check_times("mutation", idx, m.invoke, m.complete);
    if (m.err != 0) continue;
    const Effect& eff = h_.effects[m.effect];
    for (size_t s = 0; s < eff.sets.size(); ++s) {
      const ObjectKey& key = eff.sets[s].key;
      uint32_t* slot = slot_for(key, true);
      if (*slot == kNone) {
        if (key.kind == ObjectKind::Attr || key.kind == ObjectKind::Parent)
          throw HistoryError("mutation " + std::to_string(idx) + " sets " +
                             describe(key, h_.header.nodes) + " which has no initial value");
        *slot = new_object(key, add_value(Value{}, key.kind));
      }
      auto& versions = objects_[*slot].versions;
      Version& prev = versions.back();
      // The versions are in invoke order, which is the order they took
      // effect only if each mutation completed before the next began.
      const uint32_t last = objects_[*slot].last_mutation;
      if (last != kNone && h_.mutations[last].complete > m.invoke)
        throw HistoryError("mutations " + std::to_string(last) + " and " + std::to_string(idx) +
                           " of " + describe(key, h_.header.nodes) +
                           " overlap in time; the mutations of one object must follow each other");
      objects_[*slot].last_mutation = idx;
      prev.end = std::max(prev.start, m.complete);
      versions.push_back(Version{m.invoke, kTimeMax, effect_values[m.effect][s]});
    }
  }
  mutation_order_ = std::move(order);
  // What can be mounted where comes from the templates (the initial values
  // and every effect), not from the mutations that ran: so a part of the
  // history (a batch judged as the run goes) knows it as the whole does.
  const size_t n_nodes = h_.header.nodes.size();
  mutable_mount_.assign(n_nodes, false);
  mounted_on_.assign(n_nodes, {});
  auto may_mount = [&](const ObjectSet& set) {
    if (set.key.kind != ObjectKind::Mount || set.key.node >= n_nodes) return false;
    const NodeId root = set.value.target;
    if (root < n_nodes) {
      auto& points = mounted_on_[root];
      if (std::find(points.begin(), points.end(), set.key.node) == points.end())
        points.push_back(set.key.node);
    }
    return true;
  };
  for (const auto& set : h_.header.initial) may_mount(set);
  for (const auto& eff : h_.effects)
    for (const auto& set : eff.sets)
      if (may_mount(set)) mutable_mount_[set.key.node] = true;
  for (uint32_t idx : mutation_order_) {
    const MutationRecord& m = h_.mutations[idx];
    const std::string& op = h_.effects[m.effect].op;
    if (m.err == 0 &&
        (op.find("rename") != std::string::npos || op.find("mount") != std::string::npos))
      moves_.push_back(idx);
  }
  // Permission answers per (attr value, actor, wanted bits), computed once.
  grants_.assign(values_.size() * n_actors_, 0);
  for (const auto& obj : objects_) {
    if (obj.key.kind != ObjectKind::Attr) continue;
    const NodeKind kind = h_.header.nodes[obj.key.node].kind;
    for (const auto& v : obj.versions) {
      for (size_t a = 0; a < n_actors_; ++a) {
        const Cred& cred = h_.header.actors[a].cred;
        const Attr& attr = values_[v.value].attr;
        uint8_t bits = 0;
        for (uint8_t want = 0; want < 8; ++want)
          if (permits(attr, cred, want) || (cred.uid == 0 && root_permits(attr, kind, want)))
            bits |= uint8_t(1u << want);
        grants_[v.value * n_actors_ + a] = bits;
      }
    }
  }
}

void Checker::index_queries() {
  query_stack_.resize(h_.queries.size());
  for (size_t q = 0; q < h_.queries.size(); ++q) {
    const Query& query = h_.queries[q];
    check_node(query.start, "query start");
    std::vector<uint32_t> comps;
    for (const auto& c : query.path) {
      for (uint32_t id : split_path(c)) comps.push_back(id);
    }
    query_stack_[q] = push_all(kNone, comps);
  }
  dot_ = intern(".");
  dotdot_ = intern("..");
}

bool Checker::move_overlaps(TimeNs a, TimeNs b) const {
  auto it = std::partition_point(moves_.begin(), moves_.end(), [&](uint32_t i) {
    return h_.mutations[i].invoke < a - longest_mutation_;
  });
  for (; it != moves_.end() && h_.mutations[*it].invoke <= b; ++it)
    if (h_.mutations[*it].complete >= a) return true;
  return false;
}

void Checker::check_lookup(size_t i) {
  const LookupRecord& r = h_.lookups[i];
  if (r.query >= h_.queries.size())
    throw HistoryError("lookup " + std::to_string(i) + " refers to unknown query " +
                       std::to_string(r.query));
  if (r.actor >= n_actors_)
    throw HistoryError("lookup " + std::to_string(i) + " refers to unknown actor " +
                       std::to_string(r.actor));
  if (r.complete < r.invoke)
    throw HistoryError("lookup " + std::to_string(i) + " completes before it is invoked");
  check_times("lookup", i, r.invoke, r.complete);
  const Query& q = h_.queries[r.query];
  // EXDEV and EAGAIN have rules only for openat2; elsewhere they are outside the model.
  const bool openat2_err = r.err == EXDEV || r.err == EAGAIN;
  if (r.err != 0 && (fail_bit(r.err) == 0 || (openat2_err && !q.openat2))) {
    ++out_.unjudged;
    return;
  }
  if (r.err == EAGAIN && (q.resolve & kResolveCached)) {  // the lockless walk may always give up
    ++out_.lookups_checked;
    return;
  }
  WalkOutcome w = walk(r, q, r.query, nullptr);
  if (w.overflow) {
    ++out_.unjudged;
    ++out_.over_budget;
    return;
  }
  const bool legal = r.err == 0 ? w.matched : (w.fail_bits & fail_bit(r.err)) != 0;
  bool relaxed = false;
  if (!legal && r.err == 0 && !w.escape && scope_of(q).scoped()) {
    // Reached without the scope's rules ("..": EXDEV or staying, "/": the root)?
    const WalkOutcome wr = walk(r, q, r.query, nullptr, false, true);
    relaxed = w.escape = wr.escape && !wr.overflow;
  }
  if (legal) {
    ++out_.lookups_checked;
    if (r.err == EAGAIN &&
        !move_overlaps(r.invoke - h_.header.epsilon_ns, r.complete + h_.header.epsilon_ns))
      ++out_.foreign_eagain;
    return;
  }
  if (w.unknown) {  // part of the walk left the model: cannot judge
    ++out_.unjudged;
    return;
  }
  ++out_.lookups_checked;
  report(i, r, q, w, relaxed);
}

}  // namespace oracle_detail

void add_lookup_notes(CheckResult& r, const CheckOptions& opts) {
  std::vector<std::string> notes;
  if (r.over_budget)
    notes.push_back("NOT JUDGED: " + std::to_string(r.over_budget) +
                    " lookups exceeded the search budget of " +
                    std::to_string(opts.max_expansions) +
                    " walk states each; their verdict is unknown");
  if (r.cached_violations)
    notes.push_back(std::to_string(r.cached_violations) +
                    " violations are of RESOLVE_CACHED walks: the lockless (RCU) walk alone gave "
                    "them");
  if (r.foreign_eagain)
    notes.push_back(std::to_string(r.foreign_eagain) +
                    " scoped openat2 walks gave EAGAIN with no rename or mount of this run in "
                    "their window (the kernel counts every rename and mount on the machine)");
  r.notes.insert(r.notes.begin(), notes.begin(), notes.end());
}

std::string unearned_pass_reason(const CheckResult& r) {
  if (r.over_budget)
    return std::to_string(r.over_budget) +
           " lookups exceeded the search budget and were not judged";
  if (r.lookups_checked == 0 && r.offsets_checked == 0)
    return r.unjudged ? "no operation could be judged (" + std::to_string(r.unjudged) + " unjudged)"
                      : "the history holds no lookup or offset operation to judge";
  return "";
}

std::string earned_verdict(const CheckResult& r, std::string& why) {
  if (r.violation_count) return "violation";
  why = unearned_pass_reason(r);
  return why.empty() ? "pass" : "inconclusive";
}

CheckResult check_history(const History& h, const CheckOptions& opts) {
  CheckResult out;
  oracle_detail::Checker(h, opts, out).run();
  check_offsets(h, out, opts);
  return out;
}

}  // namespace leapfrog
