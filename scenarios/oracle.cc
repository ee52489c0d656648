#include "scenarios/oracle.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <unordered_map>
#include <unordered_set>

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

namespace {

constexpr int kMaxLinks = 40;
constexpr uint32_t kNone = UINT32_MAX;

enum FailBit : uint8_t {
  kFailAcces = 1,
  kFailNoent = 2,
  kFailNotdir = 4,
  kFailLoop = 8,
  kFailXdev = 16,   // openat2 only
  kFailAgain = 32,  // openat2 only
};

uint8_t fail_bit(int err) {
  switch (err) {
    case EACCES:
      return kFailAcces;
    case ENOENT:
      return kFailNoent;
    case ENOTDIR:
      return kFailNotdir;
    case ELOOP:
      return kFailLoop;
    case EXDEV:
      return kFailXdev;
    case EAGAIN:
      return kFailAgain;
    default:
      return 0;
  }
}

// One possible value of an object and where it may be current: [start, end].
struct Version {
  TimeNs start;
  TimeNs end;
  uint32_t value;
};

struct Object {
  ObjectKey key;
  std::vector<Version> versions;
  uint32_t last_mutation = UINT32_MAX;  // the latest successful mutation applied
};

// A branch of the walk: at `node` no earlier than `t`, with the components
// still to resolve on a stack (`stack`: its top cell, kNone when empty).
struct State {
  NodeId node;
  NodeId dir;  // the directory `node`'s entry was found in (openat2's final beneath check)
  TimeNs t;
  uint32_t step;
  uint8_t links;
  uint32_t stack;
  uint32_t trace;  // explain mode: index into the trace arena
  uint32_t denied_step;   // ignore-permissions mode: first step whose check was denied throughout
  uint32_t denied_trace;  // ... and its trace link
};

// A stack of components, shared: a cell holds the top component and the cell
// below (kNone: the bottom). Cells are interned, so two stacks with the same
// components are the same cell, and a state's identity is a few integers.
struct Cell {
  uint32_t comp;
  uint32_t below;
};

// What decides where a branch can go from here (State without its
// explanation): two branches with equal keys have the same futures.
struct StateKey {
  NodeId node, dir;
  uint32_t stack;
  uint32_t links;
  TimeNs t;
  bool operator==(const StateKey&) const = default;
};

struct StateKeyHash {
  size_t operator()(const StateKey& k) const {
    uint64_t h = (uint64_t{k.node} << 32 | k.dir) * 0x9e3779b97f4a7c15ULL;
    h ^= (uint64_t{k.stack} << 8 | k.links) + 0x632be59bd9b4e019ULL + (h << 6) + (h >> 2);
    h ^= static_cast<uint64_t>(k.t) * 0xff51afd7ed558ccdULL + (h << 6) + (h >> 2);
    return static_cast<size_t>(h ^ (h >> 29));
  }
};

// Capabilities of uid 0 (CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH in the initial
// user namespace), as generic_permission applies them after the mode and ACL
// deny: a directory grants every access, any other node every access but
// exec, which needs some x bit in its mode.
bool root_permits(const Attr& attr, NodeKind kind, uint8_t want) {
  if (kind == NodeKind::Dir) return true;
  return !(want & kMayExec) || (attr.mode & 0111) != 0;
}

struct TraceLink {
  uint32_t parent;
  StepTrace step;
};

// Where a branch ended, in explain mode.
struct Ending {
  int step = -1;
  ViolationKind kind = ViolationKind::StaleEntry;
  uint32_t trace = kNone;
  std::string component;
  std::string object;
  std::vector<PossibleVersion> versions;
  std::vector<NodeId> finals;  // nodes a successful walk could have reached
  bool escape = false;         // the observed node was reached outside the root
};

class Checker {
 public:
  Checker(const History& h, const CheckOptions& opts, CheckResult& out)
      : h_(h), opts_(opts), out_(out) {}

  void run() {
    index_nodes();
    index_initial();
    apply_mutations();
    index_queries();
    for (size_t i = 0; i < h_.lookups.size(); ++i) check_lookup(i);
    if (out_.over_budget)
      out_.notes.insert(out_.notes.begin(), "NOT JUDGED: " + std::to_string(out_.over_budget) +
                                                " lookups exceeded the search budget of " +
                                                std::to_string(opts_.max_expansions) +
                                                " walk states each; their verdict is unknown");
    if (cached_violations_)
      out_.notes.push_back(
          std::to_string(cached_violations_) +
          " violations are of RESOLVE_CACHED walks: the lockless (RCU) walk alone gave them");
    if (foreign_eagain_)
      out_.notes.push_back(
          std::to_string(foreign_eagain_) +
          " scoped openat2 walks gave EAGAIN with no rename or mount of this run in their window "
          "(the kernel counts every rename and mount on the machine)");
  }

 private:
  // ---- indexing -------------------------------------------------------------

  uint32_t intern(const std::string& s) {
    auto [it, inserted] = names_.try_emplace(s, static_cast<uint32_t>(name_text_.size()));
    if (inserted) name_text_.push_back(s);
    return it->second;
  }

  static uint64_t entry_key(NodeId dir, uint32_t name) { return (uint64_t{dir} << 32) | name; }

  void check_node(NodeId n, const char* what) const {
    if (n >= h_.header.nodes.size())
      throw HistoryError(std::string(what) + ": unknown node id " + std::to_string(n));
  }

  uint32_t* slot_for(const ObjectKey& key, bool create) {
    check_node(key.node, "object");
    switch (key.kind) {
      case ObjectKind::Attr: return &attr_obj_[key.node];
      case ObjectKind::Parent: return &parent_obj_[key.node];
      case ObjectKind::Mount: return &mount_obj_[key.node];
      case ObjectKind::Entry: {
        const uint64_t k = entry_key(key.node, intern(key.name));
        if (!create) {
          auto it = entry_obj_.find(k);
          return it == entry_obj_.end() ? nullptr : &it->second;
        }
        return &entry_obj_.try_emplace(k, kNone).first->second;
      }
    }
    return nullptr;
  }

  uint32_t add_value(const Value& v, ObjectKind kind) {
    if (kind != ObjectKind::Attr && v.target != kNoNode) check_node(v.target, "value");
    values_.push_back(v);
    return static_cast<uint32_t>(values_.size() - 1);
  }

  // Times within the range the sentinels stay clear of (kMaxTimeNs).
  static void check_times(const char* what, size_t i, TimeNs invoke, TimeNs complete) {
    if (invoke < -kMaxTimeNs || complete > kMaxTimeNs)
      throw HistoryError(std::string(what) + " " + std::to_string(i) +
                         ": time out of range, want [-2^60, 2^60] ns");
  }

  void index_nodes() {
    if (h_.header.epsilon_ns < 0 || h_.header.epsilon_ns > kMaxEpsilonNs)
      throw HistoryError("epsilon_ns " + std::to_string(h_.header.epsilon_ns) +
                         " is out of range, want [0, 2^58]");
    const size_t n = h_.header.nodes.size();
    for (size_t i = 0; i < n; ++i) {
      if (h_.header.nodes[i].id != i)
        throw HistoryError("node " + std::to_string(i) + " has id " + std::to_string(h_.header.nodes[i].id));
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
        throw HistoryError("actor " + std::to_string(i) + " has id " + std::to_string(h_.header.actors[i].id));
    }
  }

  std::vector<uint32_t> split_path(const std::string& path) {
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

  uint32_t new_object(const ObjectKey& key, uint32_t value) {
    objects_.push_back(Object{key, {Version{kTimeMin, kTimeMax, value}}, kNone});
    return static_cast<uint32_t>(objects_.size() - 1);
  }

  void index_initial() {
    for (const auto& set : h_.header.initial) {
      uint32_t* slot = slot_for(set.key, true);
      if (*slot != kNone) throw HistoryError("initial value given twice for " + describe(set.key, h_.header.nodes));
      *slot = new_object(set.key, add_value(set.value, set.key.kind));
    }
    // Directories' entries default to absent and mounts to nothing: those need
    // no initial line. Every directory needs its attributes.
    for (const auto& node : h_.header.nodes) {
      if (node.kind == NodeKind::Dir && attr_obj_[node.id] == kNone)
        throw HistoryError("directory node " + std::to_string(node.id) + " has no initial attr");
    }
  }

  void apply_mutations() {
    // Values of each effect, interned once: records refer to effects by index.
    std::vector<std::vector<uint32_t>> effect_values(h_.effects.size());
    for (size_t e = 0; e < h_.effects.size(); ++e) {
      for (const auto& set : h_.effects[e].sets) effect_values[e].push_back(add_value(set.value, set.key.kind));
    }
    std::vector<uint32_t> order(h_.mutations.size());
    for (uint32_t i = 0; i < order.size(); ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(), [this](uint32_t a, uint32_t b) {
      return h_.mutations[a].invoke < h_.mutations[b].invoke;
    });
    effect_objects_.assign(h_.effects.size(), {});
    for (size_t e = 0; e < h_.effects.size(); ++e) {
      for (const auto& set : h_.effects[e].sets) effect_objects_[e].push_back(describe(set.key, h_.header.nodes));
    }
    for (uint32_t idx : order) {
      const MutationRecord& m = h_.mutations[idx];
      if (m.complete >= m.invoke) longest_mutation_ = std::max(longest_mutation_, m.complete - m.invoke);
    }
    for (uint32_t idx : order) {
      const MutationRecord& m = h_.mutations[idx];
      if (m.effect >= h_.effects.size())
        throw HistoryError("mutation " + std::to_string(idx) + " refers to unknown effect " + std::to_string(m.effect));
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
            throw HistoryError("mutation " + std::to_string(idx) + " sets " + describe(key, h_.header.nodes) +
                               " which has no initial value");
          *slot = new_object(key, add_value(Value{}, key.kind));
        }
        auto& versions = objects_[*slot].versions;
        Version& prev = versions.back();
        // The versions are in invoke order, which is the order they took
        // effect only if each mutation completed before the next began.
        const uint32_t last = objects_[*slot].last_mutation;
        if (last != kNone && h_.mutations[last].complete > m.invoke)
          throw HistoryError(
              "mutations " + std::to_string(last) + " and " + std::to_string(idx) + " of " +
              describe(key, h_.header.nodes) +
              " overlap in time; the mutations of one object must follow each other");
        objects_[*slot].last_mutation = idx;
        prev.end = std::max(prev.start, m.complete);
        versions.push_back(Version{m.invoke, kTimeMax, effect_values[m.effect][s]});
      }
    }
    mutation_order_ = std::move(order);
    mutable_mount_.assign(h_.header.nodes.size(), false);
    for (size_t n = 0; n < mount_obj_.size(); ++n)
      mutable_mount_[n] = mount_obj_[n] != kNone && objects_[mount_obj_[n]].versions.size() > 1;
    mounted_on_.assign(h_.header.nodes.size(), {});
    for (size_t n = 0; n < mount_obj_.size(); ++n) {
      if (mount_obj_[n] == kNone) continue;
      for (const auto& v : objects_[mount_obj_[n]].versions) {
        const NodeId root = values_[v.value].target;
        if (root != kNoNode) mounted_on_[root].push_back(static_cast<NodeId>(n));
      }
    }
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

  void index_queries() {
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

  // ---- the walk -------------------------------------------------------------

  uint32_t push_cell(uint32_t comp, uint32_t below) {
    auto [it, inserted] =
        cell_ids_.try_emplace(uint64_t{comp} << 32 | below, static_cast<uint32_t>(cells_.size()));
    if (inserted) cells_.push_back(Cell{comp, below});
    return it->second;
  }

  // `comps` (first to resolve first) on top of stack `below`.
  uint32_t push_all(uint32_t below, const std::vector<uint32_t>& comps) {
    for (auto it = comps.rbegin(); it != comps.rend(); ++it) below = push_cell(*it, below);
    return below;
  }

  bool grants(uint32_t value, uint32_t actor, uint8_t want) const {
    return (grants_[value * n_actors_ + actor] >> want) & 1u;
  }

  // First version whose window [start, end] reaches t.
  static const Version* first_reaching(const std::vector<Version>& vs, TimeNs t) {
    auto it = std::partition_point(vs.begin(), vs.end(), [t](const Version& v) { return v.end < t; });
    return it == vs.end() ? nullptr : &*it;
  }

  bool matches(NodeId n, const LookupRecord& r) const {
    if (r.dev == 0 && r.ino == 0) return true;  // the op observes no identity (access)
    const NodeIdentity& id = h_.header.nodes[n].identity;
    if (id.any_other_dev) return r.dev != h_.header.base_dev;
    return id.dev == r.dev && id.ino == r.ino;
  }

  struct WalkOutcome {
    uint8_t fail_bits = 0;
    bool matched = false;
    bool touched_mount = false;
    bool overflow = false;
    bool unknown = false;  // walked outside the model (".." above the tree)
    bool can_succeed = false;
    bool escape = false;  // openat2: the observed node, reached only outside the root
  };

  // openat2's scoped walks: where the walk's root is, and which rules apply.
  struct Scope {
    bool openat2 = false;
    bool beneath = false;
    bool in_root = false;
    bool no_xdev = false;
    bool no_symlinks = false;
    bool no_magiclinks = false;
    bool placement = false;  // check that the final node is beneath `root`
    bool scoped() const { return beneath || in_root; }
    NodeId root = kNoNode;
  };

  static Scope scope_of(const Query& q) {
    Scope sc;
    if (!q.openat2) return sc;
    sc.openat2 = true;
    sc.beneath = q.resolve & kResolveBeneath;
    sc.in_root = q.resolve & kResolveInRoot;
    sc.no_xdev = q.resolve & kResolveNoXdev;
    sc.no_symlinks = q.resolve & kResolveNoSymlinks;
    sc.no_magiclinks = q.resolve & kResolveNoMagiclinks;
    sc.root = q.start;
    sc.placement = sc.scoped();
    return sc;
  }

  // Whether directory `n` may be beneath `root` at some time in [a, b]
  // (first), and whether it may not be (second): every possible version of
  // each ".." on the way up, and every mount point of a mounted root, is
  // followed. The versions need not be current together, which admits more
  // of both: an escape is reported only when no chain leads to the root, and
  // EXDEV is allowed as soon as one leads elsewhere.
  std::pair<bool, bool> placement(NodeId n, NodeId root, TimeNs a, TimeNs b) {
    bool inside = false, outside = false;
    ++stamp_;
    up_.clear();
    up_.push_back(n);
    visit_stamp_[n] = stamp_;
    auto visit = [this](NodeId m) {
      if (m == kNoNode || visit_stamp_[m] == stamp_) return;
      visit_stamp_[m] = stamp_;
      up_.push_back(m);
    };
    while (!up_.empty()) {
      const NodeId m = up_.back();
      up_.pop_back();
      if (m == root) {
        inside = true;
        continue;
      }
      const uint32_t pobj = parent_obj_[m];
      if (pobj == kNone) {
        if (mounted_on_[m].empty()) outside = true;  // the top of the model, not the root
        for (NodeId mp : mounted_on_[m]) visit(mp);
        continue;
      }
      const auto& vs = objects_[pobj].versions;
      for (const Version* v = first_reaching(vs, a);
           v && v != vs.data() + vs.size() && v->start <= b; ++v) {
        const NodeId p = values_[v->value].target;
        if (p == kNoNode) outside = true;  // removed: under no directory
        visit(p);
      }
    }
    return {inside, outside};
  }

  // What an entry (or mount, or "..") value leads to, so a timeline can show
  // a name that changes type: file, dir, symlink, or absent; "" for attributes.
  std::string node_kind_of(const Value& value, ObjectKind kind) const {
    if (kind == ObjectKind::Attr) return "";
    return value.target == kNoNode ? "absent" : to_string(h_.header.nodes[value.target].kind);
  }

  std::vector<PossibleVersion> versions_in(uint32_t obj, TimeNs from, TimeNs to) const {
    std::vector<PossibleVersion> out;
    const auto& vs = objects_[obj].versions;
    for (const Version* v = first_reaching(vs, from); v && v != vs.data() + vs.size() && v->start <= to; ++v) {
      PossibleVersion pv{describe(values_[v->value], objects_[obj].key.kind, h_.header.nodes), v->start, v->end};
      pv.node_kind = node_kind_of(values_[v->value], objects_[obj].key.kind);
      out.push_back(std::move(pv));
    }
    return out;
  }

  uint32_t add_trace(uint32_t parent, int step, uint32_t comp, uint32_t obj, TimeNs from, TimeNs to) {
    TraceLink link{parent, StepTrace{step, comp == kNone ? "(final access)" : name_text_[comp],
                                     describe(objects_[obj].key, h_.header.nodes),
                                     versions_in(obj, from, to)}};
    trace_.push_back(std::move(link));
    return static_cast<uint32_t>(trace_.size() - 1);
  }

  void note_end(Ending& best, int step, ViolationKind kind, uint32_t trace, uint32_t comp,
                uint32_t obj, TimeNs from, TimeNs to) {
    if (best.escape || step <= best.step) return;
    best.step = step;
    best.kind = kind;
    best.trace = trace;
    best.component = comp == kNone ? "" : name_text_[comp];
    best.object = obj == kNone ? "" : describe(objects_[obj].key, h_.header.nodes);
    best.versions = obj == kNone ? std::vector<PossibleVersion>{} : versions_in(obj, from, to);
  }

  // Explores every way the lookup could have gone. In explain mode (`best`
  // non-null) it also records where each branch ended and the trace of steps.
  // With `ignore_perms`, a permission check that no version grants is passed
  // anyway and remembered: a walk that then matches the observation shows the
  // result was reached only through a denied step (stale-grant).
  //
  // With `relax_scope`, a scoped walk's own rules for ".." at the root and
  // for absolute symlinks are dropped (it walks as a plain one) while its end
  // is still checked against the root: a walk that then reaches the observed
  // node outside the root shows how the lookup escaped.
  WalkOutcome walk(const LookupRecord& r, const Query& q, uint32_t qi, Ending* best,
                   bool ignore_perms = false, bool relax_scope = false) {
    WalkOutcome res;
    const TimeNs b = r.complete + h_.header.epsilon_ns;
    const bool want_success = r.err == 0;
    const uint8_t want_fail = fail_bit(r.err);
    const uint8_t final_want = q.final_access & 7;
    const uint32_t actor = r.actor;

    Scope sc = scope_of(q);
    if (relax_scope) sc.beneath = sc.in_root = false;
    work_.clear();
    State init{};
    init.node = q.start;
    init.dir = q.start;
    init.t = r.invoke - h_.header.epsilon_ns;
    init.trace = kNone;
    init.denied_step = 0;
    init.denied_trace = kNone;
    init.stack = query_stack_[qi];
    work_.push_back(init);
    size_t expansions = 0;
    // Once the walk has branched, two branches may meet in the same state
    // (an entry that names one of two nodes, whose entries name one of two
    // again): each state is explored once, which keeps the walk polynomial.
    bool branched = false;
    seen_.clear();

    while (!work_.empty()) {
      branched = branched || work_.size() > 1;
      State s = work_.back();
      work_.pop_back();
      if (branched && !seen_.insert(StateKey{s.node, s.dir, s.stack, s.links, s.t}).second)
        continue;
      if (++expansions > opts_.max_expansions) {
        res.overflow = true;
        return res;
      }
      ++out_.steps_checked;

      const Node& node = h_.header.nodes[s.node];
      if (s.stack == kNone) {
        // Final node. A scoped openat2 walk checks that it ended beneath its
        // root (complete_walk: EXDEV otherwise), then the operation's own
        // access check, then the result.
        if (sc.placement) {
          const NodeId holder = node.kind == NodeKind::Dir ? s.node : s.dir;
          const auto [inside, outside] =
              placement(holder, sc.root, r.invoke - h_.header.epsilon_ns, b);
          if (outside) res.fail_bits |= kFailXdev;
          if (!inside) {
            if (want_success && matches(s.node, r)) {
              res.escape = true;
              if (best && !best->escape && !ignore_perms) {
                best->escape = true;
                best->kind = ViolationKind::Escape;
                best->step = s.step;
                best->trace = s.trace;
                const uint32_t pobj = parent_obj_[holder];
                best->object = pobj == kNone ? "" : describe(objects_[pobj].key, h_.header.nodes);
                best->versions = pobj == kNone
                                     ? std::vector<PossibleVersion>{}
                                     : versions_in(pobj, r.invoke - h_.header.epsilon_ns, b);
              }
            }
            if (!want_success && (res.fail_bits & want_fail)) return res;
            continue;
          }
        }
        TimeNs t_final = s.t;
        if (final_want) {
          const uint32_t obj = attr_obj_[s.node];
          if (obj == kNone) {
            res.unknown = true;
            continue;
          }
          const auto& vs = objects_[obj].versions;
          TimeNs earliest = kTimeMax;
          for (const Version* v = first_reaching(vs, s.t); v && v != vs.data() + vs.size() && v->start <= b; ++v) {
            if (grants(v->value, actor, final_want))
              earliest = std::min(earliest, std::max(s.t, v->start));
            else
              res.fail_bits |= kFailAcces;
          }
          if (earliest == kTimeMax && ignore_perms) {
            earliest = s.t;
            if (s.denied_step == 0) {
              s.denied_step = static_cast<uint32_t>(s.step + 1);
              s.denied_trace = best ? add_trace(s.trace, s.step + 1, kNone, obj, s.t, b) : kNone;
            }
          }
          if (earliest == kTimeMax) {
            if (best) note_end(*best, s.step + 1, ViolationKind::StaleGrant, s.trace, kNone, obj, s.t, b);
            if (!want_success && (res.fail_bits & want_fail)) return res;
            continue;
          }
          t_final = earliest;
        }
        if (want_success && r.has_ids && !ids_explained(s, t_final, b, r, res, best, ignore_perms))
          continue;
        res.can_succeed = true;
        if (best && !ignore_perms) best->finals.push_back(s.node);
        if (want_success && matches(s.node, r)) {
          res.matched = true;
          if (best) {
            best->step = s.denied_step;
            best->kind = ViolationKind::StaleGrant;
            best->trace = s.trace;
            if (s.denied_trace != kNone) {
              const StepTrace& st = trace_[s.denied_trace].step;
              best->component = st.component;
              best->object = st.object;
              best->versions = st.versions;
            }
          }
          return res;
        }
        if (best) {
          const ViolationKind k = res.touched_mount ? ViolationKind::WrongMount : ViolationKind::StaleEntry;
          note_end(*best, s.step, k, s.trace, kNone, kNone, 0, 0);
        }
        continue;
      }

      const uint32_t comp = cells_[s.stack].comp;
      s.stack = cells_[s.stack].below;
      const int step = s.step + 1;
      if (node.kind != NodeKind::Dir) {
        res.fail_bits |= kFailNotdir;
        if (best) note_end(*best, step, ViolationKind::StaleEntry, s.trace, comp, kNone, 0, 0);
        if (!want_success && (res.fail_bits & want_fail)) return res;
        continue;
      }

      // Search permission on the directory.
      const uint32_t aobj = attr_obj_[s.node];
      TimeNs t_perm = kTimeMax;
      {
        const auto& vs = objects_[aobj].versions;
        for (const Version* v = first_reaching(vs, s.t); v && v != vs.data() + vs.size() && v->start <= b; ++v) {
          if (grants(v->value, actor, kMayExec))
            t_perm = std::min(t_perm, std::max(s.t, v->start));
          else
            res.fail_bits |= kFailAcces;
        }
      }
      uint32_t trace = s.trace;
      if (best) trace = add_trace(s.trace, step, comp, aobj, s.t, b);
      if (t_perm == kTimeMax && ignore_perms) {
        t_perm = s.t;
        if (s.denied_step == 0) {
          s.denied_step = static_cast<uint32_t>(step);
          s.denied_trace = trace;
        }
      }
      if (t_perm == kTimeMax) {
        if (best) note_end(*best, step, ViolationKind::StaleGrant, trace, comp, aobj, s.t, b);
        if (!want_success && (res.fail_bits & want_fail)) return res;
        continue;
      }

      if (comp == dot_) {
        State n = s;
        n.t = t_perm;
        n.trace = trace;
        work_.push_back(n);
        continue;
      }

      if (comp == dotdot_) {
        // Scoped walks re-check the global rename and mount seqcounts after
        // each "..": any rename or mount on the machine since the walk began
        // gives EAGAIN (handle_dots), so it is legal from here on.
        if (sc.scoped() && s.node == sc.root) {
          if (sc.beneath) {  // ".." at the root: EXDEV
            res.fail_bits |= kFailXdev;
            if (best) note_end(*best, step, ViolationKind::StaleEntry, trace, comp, kNone, 0, 0);
            if (!want_success && (res.fail_bits & want_fail)) return res;
            continue;
          }
          res.fail_bits |= kFailAgain;  // in-root: ".." at the root stays there
          State n = s;
          n.t = t_perm;
          n.step = static_cast<uint32_t>(step);
          n.trace = trace;
          work_.push_back(n);
          if (!want_success && (res.fail_bits & want_fail)) return res;
          continue;
        }
        if (sc.scoped()) res.fail_bits |= kFailAgain;
        const uint32_t pobj = parent_obj_[s.node];
        if (pobj == kNone) {
          res.unknown = true;
          continue;
        }
        if (best) trace = add_trace(trace, step, comp, pobj, t_perm, b);
        const auto& vs = objects_[pobj].versions;
        for (const Version* v = first_reaching(vs, t_perm); v && v != vs.data() + vs.size() && v->start <= b; ++v) {
          State n = s;
          n.node = values_[v->value].target;
          n.dir = n.node;
          n.t = std::max(t_perm, v->start);
          n.step = static_cast<uint32_t>(step);
          n.trace = trace;
          if (n.node == kNoNode) continue;
          work_.push_back(n);
        }
        if (!want_success && (res.fail_bits & want_fail)) return res;
        continue;
      }

      // The directory entry.
      auto it = entry_obj_.find(entry_key(s.node, comp));
      if (it == entry_obj_.end()) {
        res.fail_bits |= kFailNoent;
        if (best) note_end(*best, step, ViolationKind::StaleEntry, trace, comp, kNone, 0, 0);
        if (!want_success && (res.fail_bits & want_fail)) return res;
        continue;
      }
      const uint32_t eobj = it->second;
      if (best) trace = add_trace(trace, step, comp, eobj, t_perm, b);
      const auto& evs = objects_[eobj].versions;
      bool any_present = false;
      for (const Version* v = first_reaching(evs, t_perm); v && v != evs.data() + evs.size() && v->start <= b; ++v) {
        const NodeId child = values_[v->value].target;
        if (child == kNoNode) {
          res.fail_bits |= kFailNoent;
          continue;
        }
        any_present = true;
        const TimeNs t_entry = std::max(t_perm, v->start);
        expand_child(s, child, t_entry, b, step, comp, q, sc, trace, res, best);
      }
      if (!any_present && best) note_end(*best, step, ViolationKind::StaleEntry, trace, comp, eobj, t_perm, b);
      if (!want_success && (res.fail_bits & want_fail)) return res;
    }
    return res;
  }

  // An exec that reported its effective ids (LookupRecord::has_ids): one
  // version of the final node's attributes current no earlier than the
  // permission check must explain them (exec_ids_possible), as the kernel
  // computes the new credentials from one reading of mode, owner and group
  // after that check. In ignore-permissions mode an unexplained gain counts
  // as a denied check (stale-grant).
  bool ids_explained(State& s, TimeNs t, TimeNs b, const LookupRecord& r, WalkOutcome& res,
                     Ending* best, bool ignore_perms) {
    const uint32_t obj = attr_obj_[s.node];
    if (obj == kNone) {
      res.unknown = true;
      return false;
    }
    const Cred& c = h_.header.actors[r.actor].cred;
    const auto& vs = objects_[obj].versions;
    for (const Version* v = first_reaching(vs, t); v && v != vs.data() + vs.size() && v->start <= b;
         ++v) {
      if (exec_ids_possible(values_[v->value].attr, c, r.euid, r.egid)) return true;
    }
    if (ignore_perms) {
      if (s.denied_step == 0) {
        s.denied_step = static_cast<uint32_t>(s.step + 1);
        s.denied_trace = best ? add_trace(s.trace, s.step + 1, kNone, obj, t, b) : kNone;
      }
      return true;
    }
    if (best) note_end(*best, s.step + 1, ViolationKind::StaleGrant, s.trace, kNone, obj, t, b);
    return false;
  }

  // Steps into `child` (crossing a mount and following a symlink if needed).
  void expand_child(const State& s, NodeId child, TimeNs t, TimeNs b, int step, uint32_t comp,
                    const Query& q, const Scope& sc, uint32_t trace, WalkOutcome& res,
                    Ending* best) {
    const uint32_t mobj = mount_obj_[child];
    if (mobj == kNone) {
      push_node(s, child, t, step, q, sc, trace, res);
      return;
    }
    if (mutable_mount_[child]) res.touched_mount = true;
    uint32_t mtrace = trace;
    if (best) mtrace = add_trace(trace, step, comp, mobj, t, b);
    const auto& vs = objects_[mobj].versions;
    for (const Version* v = first_reaching(vs, t); v && v != vs.data() + vs.size() && v->start <= b; ++v) {
      const NodeId target = values_[v->value].target;
      if (target != kNoNode && sc.no_xdev) {  // crossing into a mount
        res.fail_bits |= kFailXdev;
        continue;
      }
      push_node(s, target == kNoNode ? child : target, std::max(t, v->start), step, q, sc, mtrace,
                res);
    }
  }

  void push_node(const State& s, NodeId n, TimeNs t, int step, const Query& q, const Scope& sc,
                 uint32_t trace, WalkOutcome& res) {
    const Node& node = h_.header.nodes[n];
    State next = s;
    next.t = t;
    next.step = static_cast<uint32_t>(step);
    next.trace = trace;
    if (node.kind == NodeKind::Symlink && (s.stack != kNone || q.follow_final)) {
      // The order of pick_link, nd_jump_link and nd_jump_root (fs/namei.c).
      if (sc.no_symlinks || s.links + 1 > kMaxLinks) {
        res.fail_bits |= kFailLoop;
        return;
      }
      if (node.magic_target != kNoNode) {
        if (sc.no_magiclinks) {
          res.fail_bits |= kFailLoop;
          return;
        }
        // A magic link always leaves /proc's mount, and scoped walks refuse it.
        if (sc.no_xdev || sc.scoped()) {
          res.fail_bits |= kFailXdev;
          return;
        }
        next.node = node.magic_target;
        next.dir = node.magic_target;
        next.links = static_cast<uint8_t>(s.links + 1);
        work_.push_back(next);
        return;
      }
      if (link_absolute_[n]) {
        // The model's tree is never on the mount of the process's root, so
        // without RESOLVE_IN_ROOT a jump to "/" crosses a mount.
        if (sc.beneath || (!sc.in_root && sc.no_xdev)) {
          res.fail_bits |= kFailXdev;
          return;
        }
        if (!sc.in_root) {  // resolves from the process's root: outside the model
          res.unknown = true;
          return;
        }
        next.node = sc.root;
        next.dir = sc.root;
      }
      // Resolution continues in the directory holding the link.
      next.stack = push_all(s.stack, link_target_[n]);
      next.links = static_cast<uint8_t>(s.links + 1);
      work_.push_back(next);
      return;
    }
    // A final symlink not followed: open(O_NOFOLLOW) fails ELOOP there (lstat
    // succeeds; both are legal).
    if (node.kind == NodeKind::Symlink) res.fail_bits |= kFailLoop;
    next.node = n;
    next.dir = s.node;
    work_.push_back(next);
  }

  // ---- judging --------------------------------------------------------------

  // Does a successful rename or mount of the history overlap [a, b]?
  bool move_overlaps(TimeNs a, TimeNs b) const {
    auto it = std::partition_point(moves_.begin(), moves_.end(), [&](uint32_t i) {
      return h_.mutations[i].invoke < a - longest_mutation_;
    });
    for (; it != moves_.end() && h_.mutations[*it].invoke <= b; ++it)
      if (h_.mutations[*it].complete >= a) return true;
    return false;
  }

  void check_lookup(size_t i) {
    const LookupRecord& r = h_.lookups[i];
    if (r.query >= h_.queries.size())
      throw HistoryError("lookup " + std::to_string(i) + " refers to unknown query " + std::to_string(r.query));
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
        ++foreign_eagain_;
      return;
    }
    if (w.unknown) {  // part of the walk left the model: cannot judge
      ++out_.unjudged;
      return;
    }
    ++out_.lookups_checked;
    report(i, r, q, w, relaxed);
  }

  void report(size_t i, const LookupRecord& r, const Query& q, const WalkOutcome& w, bool relaxed) {
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
    if (q.resolve & kResolveCached) ++cached_violations_;
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

  // Mutations of v.object around its window (Violation::history).
  std::vector<MutationTrace> mutation_trace(const Violation& v) const {
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
      const bool bounds_version = m.err == 0 && std::any_of(v.versions.begin(), v.versions.end(), [&](const PossibleVersion& pv) {
        return pv.from == m.invoke || pv.to == m.complete;
      });
      const TimeNs distance = bounds_version ? -1
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

  std::string observed_text(const LookupRecord& r) const {
    if (r.err != 0) return std::string("error ") + strerrorname(r.err);
    if (r.has_ids)
      return "success: ran with euid=" + std::to_string(r.euid) + " egid=" + std::to_string(r.egid);
    if (r.dev == 0 && r.ino == 0) return "success";
    for (const auto& n : h_.header.nodes) {
      if (matches(n.id, r)) return "success: reached " + (n.name.empty() ? "#" + std::to_string(n.id) : n.name);
    }
    return "success: dev=" + std::to_string(r.dev) + " ino=" + std::to_string(r.ino);
  }

  static const char* strerrorname(int err) {
    switch (err) {
      case EACCES:
        return "EACCES";
      case ENOENT:
        return "ENOENT";
      case ENOTDIR:
        return "ENOTDIR";
      case ELOOP:
        return "ELOOP";
      case EXDEV:
        return "EXDEV";
      case EAGAIN:
        return "EAGAIN";
      default:
        return "errno";
    }
  }

  std::string expected_text(const WalkOutcome& w, const Ending& best) const {
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

  const History& h_;
  const CheckOptions& opts_;
  CheckResult& out_;
  size_t n_actors_ = 0;

  std::unordered_map<std::string, uint32_t> names_;
  std::vector<std::string> name_text_;
  uint32_t dot_ = 0, dotdot_ = 0;

  std::vector<Value> values_;
  std::vector<Object> objects_;
  std::vector<uint32_t> attr_obj_, parent_obj_, mount_obj_;
  std::vector<bool> mutable_mount_;
  std::unordered_map<uint64_t, uint32_t> entry_obj_;
  std::vector<std::vector<uint32_t>> link_target_;
  std::vector<bool> link_absolute_;
  std::vector<std::vector<NodeId>> mounted_on_;  // fs root -> mount points it is ever mounted on
  std::vector<uint32_t> visit_stamp_;            // placement()'s visited marks
  uint32_t stamp_ = 0;
  std::vector<NodeId> up_;
  std::vector<uint32_t> moves_;  // successful renames and mounts, by invoke
  uint64_t cached_violations_ = 0;
  uint64_t foreign_eagain_ = 0;
  std::vector<uint32_t> query_stack_;  // each query's path as a stack (top cell)
  std::vector<Cell> cells_;
  std::unordered_map<uint64_t, uint32_t> cell_ids_;
  std::unordered_set<StateKey, StateKeyHash> seen_;  // the states one walk has explored
  std::vector<uint8_t> grants_;

  std::vector<State> work_;
  std::vector<TraceLink> trace_;

  // For violations' history excerpts: mutations by invoke, the objects each
  // effect sets (described), and the longest mutation.
  std::vector<uint32_t> mutation_order_;
  std::vector<std::vector<std::string>> effect_objects_;
  TimeNs longest_mutation_ = 0;
};

}  // namespace

std::string unearned_pass_reason(const CheckResult& r) {
  if (r.over_budget)
    return std::to_string(r.over_budget) +
           " lookups exceeded the search budget and were not judged";
  if (r.lookups_checked == 0 && r.offsets_checked == 0)
    return r.unjudged ? "no operation could be judged (" + std::to_string(r.unjudged) + " unjudged)"
                      : "the history holds no lookup or offset operation to judge";
  return "";
}

CheckResult check_history(const History& h, const CheckOptions& opts) {
  CheckResult out;
  Checker(h, opts, out).run();
  check_offsets(h, out, opts);
  return out;
}

}  // namespace leapfrog
