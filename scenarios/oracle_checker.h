#pragma once
// The oracle's checker of lookups (oracle.h), shared by the files that
// implement it: oracle.cc indexes a history and judges each lookup,
// oracle_walk.cc explores the ways a lookup could have gone, and
// oracle_report.cc turns an illegal one into a Violation. Internal to the
// oracle library.

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "scenarios/oracle.h"

namespace leapfrog::oracle_detail {

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

inline uint8_t fail_bit(int err) {
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
  uint32_t trace;         // explain mode: index into the trace arena
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
inline bool root_permits(const Attr& attr, NodeKind kind, uint8_t want) {
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

  void run();

 private:
  // ---- indexing -------------------------------------------------------------

  uint32_t intern(const std::string& s) {
    auto [it, inserted] = names_.try_emplace(s, static_cast<uint32_t>(name_text_.size()));
    if (inserted) name_text_.push_back(s);
    return it->second;
  }

  static uint64_t entry_key(NodeId dir, uint32_t name) { return (uint64_t{dir} << 32) | name; }

  void check_node(NodeId n, const char* what) const;

  uint32_t* slot_for(const ObjectKey& key, bool create) {
    check_node(key.node, "object");
    switch (key.kind) {
      case ObjectKind::Attr:
        return &attr_obj_[key.node];
      case ObjectKind::Parent:
        return &parent_obj_[key.node];
      case ObjectKind::Mount:
        return &mount_obj_[key.node];
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

  uint32_t add_value(const Value& v, ObjectKind kind);

  // Times within the range the sentinels stay clear of (kMaxTimeNs).
  static void check_times(const char* what, size_t i, TimeNs invoke, TimeNs complete);

  void index_nodes();

  std::vector<uint32_t> split_path(const std::string& path);

  uint32_t new_object(const ObjectKey& key, uint32_t value);

  void index_initial();

  void apply_mutations();

  void index_queries();

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
    auto it =
        std::partition_point(vs.begin(), vs.end(), [t](const Version& v) { return v.end < t; });
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
  std::pair<bool, bool> placement(NodeId n, NodeId root, TimeNs a, TimeNs b);

  // What an entry (or mount, or "..") value leads to, so a timeline can show
  // a name that changes type: file, dir, symlink, or absent; "" for attributes.
  std::string node_kind_of(const Value& value, ObjectKind kind) const {
    if (kind == ObjectKind::Attr) return "";
    return value.target == kNoNode ? "absent" : to_string(h_.header.nodes[value.target].kind);
  }

  std::vector<PossibleVersion> versions_in(uint32_t obj, TimeNs from, TimeNs to) const;

  uint32_t add_trace(uint32_t parent, int step, uint32_t comp, uint32_t obj, TimeNs from,
                     TimeNs to);

  void note_end(Ending& best, int step, ViolationKind kind, uint32_t trace, uint32_t comp,
                uint32_t obj, TimeNs from, TimeNs to);

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
                   bool ignore_perms = false, bool relax_scope = false);

  // An exec that reported its effective ids (LookupRecord::has_ids): one
  // version of the final node's attributes current no earlier than the
  // permission check must explain them (exec_ids_possible), as the kernel
  // computes the new credentials from one reading of mode, owner and group
  // after that check. In ignore-permissions mode an unexplained gain counts
  // as a denied check (stale-grant).
  bool ids_explained(State& s, TimeNs t, TimeNs b, const LookupRecord& r, WalkOutcome& res,
                     Ending* best, bool ignore_perms);

  // Steps into `child` (crossing a mount and following a symlink if needed).
  void expand_child(const State& s, NodeId child, TimeNs t, TimeNs b, int step, uint32_t comp,
                    const Query& q, const Scope& sc, uint32_t trace, WalkOutcome& res,
                    Ending* best);

  void push_node(const State& s, NodeId n, TimeNs t, int step, const Query& q, const Scope& sc,
                 uint32_t trace, WalkOutcome& res);

  // ---- judging --------------------------------------------------------------

  // Does a successful rename or mount of the history overlap [a, b]?
  bool move_overlaps(TimeNs a, TimeNs b) const;

  void check_lookup(size_t i);

  void report(size_t i, const LookupRecord& r, const Query& q, const WalkOutcome& w, bool relaxed);

  // Mutations of v.object around its window (Violation::history).
  std::vector<MutationTrace> mutation_trace(const Violation& v) const;

  std::string observed_text(const LookupRecord& r) const;

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

  std::string expected_text(const WalkOutcome& w, const Ending& best) const;

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

}  // namespace leapfrog::oracle_detail
