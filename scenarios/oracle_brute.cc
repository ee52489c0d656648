#include "scenarios/oracle_brute.h"

#include <algorithm>
#include <cerrno>
#include <map>
#include <set>
#include <tuple>

#include "scenarios/history_io.h"
#include "scenarios/rng.h"

namespace leapfrog::brute {
namespace {

constexpr TimeNs kNever = kTimeMax;
constexpr int kLinkLimit = 40;

using Key = std::tuple<ObjectKind, NodeId, std::string>;

struct Possible {
  TimeNs from, to;  // current somewhere in [from, to]
  Value value;
};

// Every object's versions, straight from the format's definition.
std::map<Key, std::vector<Possible>> versions_of(const History& h) {
  std::map<Key, std::vector<Possible>> out;
  for (const auto& s : h.header.initial)
    out[{s.key.kind, s.key.node, s.key.name}].push_back({-kNever, kNever, s.value});
  std::vector<const MutationRecord*> ms;
  for (const auto& m : h.mutations)
    if (m.err == 0) ms.push_back(&m);
  std::stable_sort(ms.begin(), ms.end(), [](auto* a, auto* b) { return a->invoke < b->invoke; });
  for (const MutationRecord* m : ms) {
    for (const auto& s : h.effects[m->effect].sets) {
      auto& vs = out[{s.key.kind, s.key.node, s.key.name}];
      if (vs.empty()) vs.push_back({-kNever, kNever, Value{}});  // entries and mounts start empty
      vs.back().to = m->complete;
      vs.push_back({m->invoke, kNever, s.value});
    }
  }
  return out;
}

// Mode bits, then root's override; no ACLs (the generator makes none).
bool may(const Attr& a, const Cred& c, bool dir, uint8_t want) {
  if (want == 0) return true;
  int shift = 0;
  if (c.uid == a.uid)
    shift = 6;
  else if (c.gid == a.gid || std::count(c.groups.begin(), c.groups.end(), a.gid))
    shift = 3;
  if ((((a.mode >> shift) & 7) & want) == want) return true;
  if (c.uid != 0) return false;
  return dir || !(want & kMayExec) || (a.mode & 0111);
}

std::vector<std::string> components(const std::string& path) {
  std::vector<std::string> out;
  std::string cur;
  for (char ch : path + "/") {
    if (ch != '/') {
      cur += ch;
    } else if (!cur.empty()) {
      out.push_back(cur);
      cur.clear();
    }
  }
  return out;
}

enum : uint8_t { kAcces = 1, kNoent = 2, kNotdir = 4, kLoop = 8 };

class Judge {
 public:
  Judge(const History& h, const std::map<Key, std::vector<Possible>>& objects,
        const LookupRecord& r)
      : h_(h),
        r_(r),
        q_(h.queries[r.query]),
        cred_(h.header.actors[r.actor].cred),
        objects_(objects) {
    const TimeNs a = r.invoke - h.header.epsilon_ns, b = r.complete + h.header.epsilon_ns;
    times_ = {a, b};
    for (const auto& [key, vs] : objects_)
      for (const auto& v : vs)
        for (TimeNs t : {v.from, v.to})
          if (t > a && t < b) times_.push_back(t);
    std::sort(times_.begin(), times_.end());
    times_.erase(std::unique(times_.begin(), times_.end()), times_.end());
  }

  Verdict run() {
    std::string stack;
    for (const auto& c : q_.path)
      for (const auto& part : components(c)) stack.push_back(code(part));
    std::reverse(stack.begin(), stack.end());
    explore(q_.start, stack, 0, 0);
    if (seen_.size() > kStateBudget) return Verdict::GaveUp;
    bool legal;
    if (r_.err == 0) {
      legal = matched_;
    } else {
      const uint8_t bit = r_.err == EACCES    ? kAcces
                          : r_.err == ENOENT  ? kNoent
                          : r_.err == ENOTDIR ? kNotdir
                          : r_.err == ELOOP   ? kLoop
                                              : 0;
      if (bit == 0) return Verdict::Unjudged;
      legal = fails_ & bit;
    }
    if (legal) return Verdict::Legal;
    return unknown_ ? Verdict::Unjudged : Verdict::Illegal;
  }

 private:
  // The versions of `key` possible at times_[i].
  std::vector<const Value*> at(const Key& key, size_t i) const {
    std::vector<const Value*> out;
    auto it = objects_.find(key);
    if (it == objects_.end()) return out;
    for (const auto& v : it->second)
      if (v.from <= times_[i] && times_[i] <= v.to) out.push_back(&v.value);
    return out;
  }
  bool has(const Key& key) const { return objects_.count(key) != 0; }
  const Node& node(NodeId n) const { return h_.header.nodes[n]; }

  // The walk at `n` no earlier than times_[ti], with `stack` left (back: next).
  // Components as one char each, so that a stack is a short string.
  char code(const std::string& comp) {
    auto it = std::find(names_.begin(), names_.end(), comp);
    if (it == names_.end()) it = names_.insert(names_.end(), comp);
    return static_cast<char>(it - names_.begin());
  }

  void explore(NodeId n, const std::string& stack, size_t ti, int links) {
    if (seen_.size() > kStateBudget) return;
    if (!seen_.emplace(n, stack, ti, links).second) return;  // its outcomes are already in
    if (stack.empty()) return finish(n, ti);
    if (node(n).kind != NodeKind::Dir) {
      fails_ |= kNotdir;
      return;
    }
    const std::string comp = names_[static_cast<size_t>(stack.back())];
    const std::string rest = stack.substr(0, stack.size() - 1);
    for (size_t tj = ti; tj < times_.size(); ++tj) {
      for (const Value* attr : at({ObjectKind::Attr, n, ""}, tj)) {
        if (!may(attr->attr, cred_, true, kMayExec)) {
          fails_ |= kAcces;
          continue;
        }
        if (comp == ".") {
          explore(n, rest, tj, links);
        } else if (comp == "..") {
          if (!has({ObjectKind::Parent, n, ""})) {
            unknown_ = true;
            continue;
          }
          for (size_t tk = tj; tk < times_.size(); ++tk)
            for (const Value* p : at({ObjectKind::Parent, n, ""}, tk))
              if (p->target != kNoNode) explore(p->target, rest, tk, links);
        } else {
          const Key entry{ObjectKind::Entry, n, comp};
          if (!has(entry)) {
            fails_ |= kNoent;
            continue;
          }
          for (size_t tk = tj; tk < times_.size(); ++tk) {
            for (const Value* e : at(entry, tk)) {
              if (e->target == kNoNode) {
                fails_ |= kNoent;
                continue;
              }
              step_into(n, e->target, rest, tk, links);
            }
          }
        }
      }
    }
  }

  void step_into(NodeId dir, NodeId child, const std::string& rest, size_t t, int links) {
    const Node& c = node(child);
    if (c.kind == NodeKind::Symlink && (!rest.empty() || q_.follow_final)) {
      if (links + 1 > kLinkLimit) {
        fails_ |= kLoop;
        return;
      }
      std::string next = rest;
      const auto target = components(c.symlink_target);
      for (auto it = target.rbegin(); it != target.rend(); ++it) next.push_back(code(*it));
      return explore(dir, next, t, links + 1);
    }
    explore(child, rest, t, links);
  }

  void finish(NodeId n, size_t ti) {
    if (node(n).kind == NodeKind::Symlink) fails_ |= kLoop;  // O_NOFOLLOW on a link
    const uint8_t want = q_.final_access & 7;
    bool success = want == 0;
    if (want) {
      if (!has({ObjectKind::Attr, n, ""})) unknown_ = true;
      for (size_t tj = ti; tj < times_.size(); ++tj) {
        for (const Value* attr : at({ObjectKind::Attr, n, ""}, tj)) {
          if (may(attr->attr, cred_, node(n).kind == NodeKind::Dir, want))
            success = true;
          else
            fails_ |= kAcces;
        }
      }
    }
    if (success && r_.err == 0 && node(n).identity.dev == r_.dev && node(n).identity.ino == r_.ino)
      matched_ = true;
  }

  const History& h_;
  const LookupRecord& r_;
  const Query& q_;
  const Cred& cred_;
  const std::map<Key, std::vector<Possible>>& objects_;
  std::vector<TimeNs> times_;
  std::vector<std::string> names_;
  std::set<std::tuple<NodeId, std::string, size_t, int>> seen_;
  bool matched_ = false, unknown_ = false;
  uint8_t fails_ = 0;
};

const char* kNames[] = {"x", "y", ".", ".."};

}  // namespace

std::vector<Verdict> judge(const History& h) {
  std::vector<Verdict> out;
  const auto objects = versions_of(h);
  for (const auto& r : h.lookups) out.push_back(Judge(h, objects, r).run());
  return out;
}

History random_history(uint64_t seed) {
  Rng rng(seed);
  History h;
  const size_t n_nodes = 2 + rng.below(4);
  std::vector<NodeId> dirs;
  for (NodeId id = 0; id < n_nodes; ++id) {
    Node n;
    n.id = id;
    const uint64_t k = rng.below(4);
    n.kind = id == 0 || k < 2 ? NodeKind::Dir : k == 2 ? NodeKind::File : NodeKind::Symlink;
    n.name = "n" + std::to_string(id);
    n.identity = NodeIdentity{1, 100 + id, false};
    if (n.kind == NodeKind::Symlink) {
      n.symlink_target = kNames[rng.below(4) == 0 ? 3 : rng.below(2)];
      if (rng.chance(0.4)) n.symlink_target += std::string("/") + kNames[rng.below(4)];
    }
    if (n.kind == NodeKind::Dir) dirs.push_back(id);
    h.header.nodes.push_back(n);
  }
  static const uint32_t kModes[] = {0755, 0700, 0711, 0644, 0000, 0750, 0705, 0601, 0070, 0111};
  static const uint32_t kIds[] = {0, 1000, 65534};
  auto random_attr = [&]() {
    Value v;
    v.attr = Attr{kModes[rng.below(10)], kIds[rng.below(3)], kIds[rng.below(2)], {}};
    return v;
  };
  auto random_node = [&]() {
    Value v;
    v.target = rng.chance(0.2) ? kNoNode : static_cast<NodeId>(rng.below(n_nodes));
    return v;
  };
  auto random_dir = [&]() {
    Value v;
    v.target = rng.chance(0.1) ? kNoNode : dirs[rng.below(dirs.size())];
    return v;
  };
  std::vector<ObjectKey> keys;
  for (NodeId id = 0; id < n_nodes; ++id) {
    h.header.initial.push_back({ObjectKey{ObjectKind::Attr, id, ""}, random_attr()});
    keys.push_back(h.header.initial.back().key);
  }
  for (NodeId d : dirs) {
    if (rng.chance(0.9)) {
      h.header.initial.push_back({ObjectKey{ObjectKind::Parent, d, ""}, random_dir()});
      keys.push_back(h.header.initial.back().key);
    }
    for (const char* name : {"x", "y"}) {
      const ObjectKey key{ObjectKind::Entry, d, name};
      if (rng.chance(0.6)) h.header.initial.push_back({key, random_node()});
      keys.push_back(key);  // an entry without initial value starts absent
    }
  }
  h.header.base_dev = 1;
  h.header.epsilon_ns = rng.chance(0.8) ? 0 : 2;
  static const uint32_t kCreds[] = {65534, 1000, 0};
  Actor observer{1, "observer", Cred{kCreds[rng.below(3)], kCreds[rng.below(3)], {}}};
  if (rng.chance(0.3)) observer.cred.groups.push_back(kIds[rng.below(2)]);
  h.header.actors = {Actor{0, "mutator", Cred{0, 0, {}}}, observer};

  // Mutations: each object's follow each other; windows of different
  // objects overlap freely.
  std::map<std::tuple<ObjectKind, NodeId, std::string>, TimeNs> free_at;
  const size_t n_mut = rng.below(5);
  for (size_t i = 0; i < n_mut; ++i) {
    Effect e;
    e.op = "mutate";
    const size_t n_sets = rng.chance(0.2) ? 2 : 1;
    TimeNs start = 0;
    for (size_t s = 0; s < n_sets; ++s) {
      const ObjectKey key = keys[rng.below(keys.size())];
      if (std::any_of(e.sets.begin(), e.sets.end(),
                      [&](const ObjectSet& o) { return o.key == key; }))
        continue;
      Value v = key.kind == ObjectKind::Attr     ? random_attr()
                : key.kind == ObjectKind::Parent ? random_dir()
                                                 : random_node();
      e.sets.push_back({key, v});
      start = std::max(start, free_at[{key.kind, key.node, key.name}]);
    }
    const TimeNs invoke = start + static_cast<TimeNs>(rng.below(12));
    const TimeNs complete = invoke + static_cast<TimeNs>(rng.below(16));
    const int err = rng.chance(0.1) ? EPERM : 0;
    if (err == 0)
      for (const auto& s : e.sets) free_at[{s.key.kind, s.key.node, s.key.name}] = complete;
    h.effects.push_back(e);
    h.mutations.push_back(
        MutationRecord{0, static_cast<uint32_t>(h.effects.size() - 1), invoke, complete, err, 0});
  }

  Query q;
  q.op = "stat";
  q.start = dirs[rng.below(dirs.size())];
  const size_t n_comps = 1 + rng.below(4);
  for (size_t i = 0; i < n_comps; ++i)
    q.path.push_back(kNames[rng.chance(0.7) ? rng.below(2) : 2 + rng.below(2)]);
  static const uint8_t kAccess[] = {0, 0, 0, 1, 4, 2, 5, 7};
  q.final_access = kAccess[rng.below(8)];
  q.follow_final = rng.chance(0.75);
  h.queries.push_back(q);

  const TimeNs invoke = static_cast<TimeNs>(rng.below(40));
  const TimeNs complete = invoke + static_cast<TimeNs>(rng.below(25));
  auto add = [&](int err, uint64_t ino) {
    h.lookups.push_back(
        LookupRecord{1, 0, invoke, complete, err, 0, err == 0 ? 1u : 0u, err == 0 ? ino : 0});
  };
  for (NodeId id = 0; id < n_nodes; ++id) add(0, 100 + id);
  add(0, 99);  // a node the model does not have
  for (int err : {EACCES, ENOENT, ENOTDIR, ELOOP}) add(err, 0);
  return h;
}

bool comparable(const CheckResult& oracle, const std::vector<Verdict>& want) {
  return oracle.over_budget == 0 && std::count(want.begin(), want.end(), Verdict::GaveUp) == 0;
}

std::vector<std::string> disagreements(const History& h, const CheckResult& oracle,
                                       const std::vector<Verdict>& want) {
  std::vector<std::string> out;
  std::vector<bool> flagged(h.lookups.size(), false);
  for (const auto& v : oracle.violations)
    if (v.record < flagged.size()) flagged[v.record] = true;
  if (oracle.violations.size() != oracle.violation_count)
    out.push_back("the oracle reported " + std::to_string(oracle.violations.size()) + " of " +
                  std::to_string(oracle.violation_count) + " violations: raise max_reported");
  uint64_t unjudged = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    unjudged += want[i] == Verdict::Unjudged;
    const bool illegal = want[i] == Verdict::Illegal;
    if (flagged[i] != illegal) {
      const LookupRecord& r = h.lookups[i];
      out.push_back("lookup " + std::to_string(i) + " (" + errno_name(r.err) +
                    (r.err == 0 ? " ino " + std::to_string(r.ino) : "") + "): oracle " +
                    (flagged[i] ? "flags it" : "does not flag it") + ", brute force says " +
                    (want[i] == Verdict::Legal     ? "legal"
                     : want[i] == Verdict::Illegal ? "illegal"
                                                   : "unjudged"));
    }
  }
  if (unjudged != oracle.unjudged)
    out.push_back("unjudged: oracle " + std::to_string(oracle.unjudged) + ", brute force " +
                  std::to_string(unjudged));
  return out;
}

}  // namespace leapfrog::brute
