// The oracle's the walk: every way a lookup could have gone
// (oracle_checker.h).

#include <algorithm>
#include <cerrno>

#include "scenarios/oracle_checker.h"

namespace leapfrog::oracle_detail {

std::pair<bool, bool> Checker::placement(NodeId n, NodeId root, TimeNs a, TimeNs b) {
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
    for (const Version* v = first_reaching(vs, a); v && v != vs.data() + vs.size() && v->start <= b;
         ++v) {
      const NodeId p = values_[v->value].target;
      if (p == kNoNode) outside = true;  // removed: under no directory
      visit(p);
    }
  }
  return {inside, outside};
}

std::vector<PossibleVersion> Checker::versions_in(uint32_t obj, TimeNs from, TimeNs to) const {
  std::vector<PossibleVersion> out;
  const auto& vs = objects_[obj].versions;
  for (const Version* v = first_reaching(vs, from);
       v && v != vs.data() + vs.size() && v->start <= to; ++v) {
    PossibleVersion pv{describe(values_[v->value], objects_[obj].key.kind, h_.header.nodes),
                       v->start, v->end};
    pv.node_kind = node_kind_of(values_[v->value], objects_[obj].key.kind);
    out.push_back(std::move(pv));
  }
  return out;
}

uint32_t Checker::add_trace(uint32_t parent, int step, uint32_t comp, uint32_t obj, TimeNs from,
                            TimeNs to) {
  TraceLink link{
      parent, StepTrace{step, comp == kNone ? "(final access)" : name_text_[comp],
                        describe(objects_[obj].key, h_.header.nodes), versions_in(obj, from, to)}};
  trace_.push_back(std::move(link));
  return static_cast<uint32_t>(trace_.size() - 1);
}

void Checker::note_end(Ending& best, int step, ViolationKind kind, uint32_t trace, uint32_t comp,
                       uint32_t obj, TimeNs from, TimeNs to) {
  if (best.escape || step <= best.step) return;
  best.step = step;
  best.kind = kind;
  best.trace = trace;
  best.component = comp == kNone ? "" : name_text_[comp];
  best.object = obj == kNone ? "" : describe(objects_[obj].key, h_.header.nodes);
  best.versions = obj == kNone ? std::vector<PossibleVersion>{} : versions_in(obj, from, to);
}

Checker::WalkOutcome Checker::walk(const LookupRecord& r, const Query& q, uint32_t qi, Ending* best,
                                   bool ignore_perms, bool relax_scope) {
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
    if (branched && !seen_.insert(StateKey{s.node, s.dir, s.stack, s.links, s.t}).second) continue;
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
        for (const Version* v = first_reaching(vs, s.t);
             v && v != vs.data() + vs.size() && v->start <= b; ++v) {
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
          if (best)
            note_end(*best, s.step + 1, ViolationKind::StaleGrant, s.trace, kNone, obj, s.t, b);
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
        const ViolationKind k =
            res.touched_mount ? ViolationKind::WrongMount : ViolationKind::StaleEntry;
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
      for (const Version* v = first_reaching(vs, s.t);
           v && v != vs.data() + vs.size() && v->start <= b; ++v) {
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
      for (const Version* v = first_reaching(vs, t_perm);
           v && v != vs.data() + vs.size() && v->start <= b; ++v) {
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
    for (const Version* v = first_reaching(evs, t_perm);
         v && v != evs.data() + evs.size() && v->start <= b; ++v) {
      const NodeId child = values_[v->value].target;
      if (child == kNoNode) {
        res.fail_bits |= kFailNoent;
        continue;
      }
      any_present = true;
      const TimeNs t_entry = std::max(t_perm, v->start);
      expand_child(s, child, t_entry, b, step, comp, q, sc, trace, res, best);
    }
    if (!any_present && best)
      note_end(*best, step, ViolationKind::StaleEntry, trace, comp, eobj, t_perm, b);
    if (!want_success && (res.fail_bits & want_fail)) return res;
  }
  return res;
}

bool Checker::ids_explained(State& s, TimeNs t, TimeNs b, const LookupRecord& r, WalkOutcome& res,
                            Ending* best, bool ignore_perms) {
  const uint32_t obj = attr_obj_[s.node];
  if (obj == kNone) {
    res.unknown = true;
    return false;
  }
  const Cred& c = h_.header.actors[r.actor].cred;
  const auto& vs = objects_[obj].versions;
  // A set-id gain must come from a version that also lets the caller execute
  // the file: the kernel reloads the mode under the inode lock and checks
  // MAY_EXEC again there (f50733b45d86), so ids from a version the caller
  // could not execute mean the exec mixed two versions.
  const bool gain = r.euid != c.uid || r.egid != c.gid;
  for (const Version* v = first_reaching(vs, t); v && v != vs.data() + vs.size() && v->start <= b;
       ++v) {
    if (exec_ids_possible(values_[v->value].attr, c, r.euid, r.egid) &&
        (!gain || grants(v->value, r.actor, kMayExec)))
      return true;
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

void Checker::expand_child(const State& s, NodeId child, TimeNs t, TimeNs b, int step,
                           uint32_t comp, const Query& q, const Scope& sc, uint32_t trace,
                           WalkOutcome& res, Ending* best) {
  const uint32_t mobj = mount_obj_[child];
  if (mobj == kNone) {
    push_node(s, child, t, step, q, sc, trace, res);
    return;
  }
  if (mutable_mount_[child]) res.touched_mount = true;
  uint32_t mtrace = trace;
  if (best) mtrace = add_trace(trace, step, comp, mobj, t, b);
  const auto& vs = objects_[mobj].versions;
  for (const Version* v = first_reaching(vs, t); v && v != vs.data() + vs.size() && v->start <= b;
       ++v) {
    const NodeId target = values_[v->value].target;
    if (target != kNoNode && sc.no_xdev) {  // crossing into a mount
      res.fail_bits |= kFailXdev;
      continue;
    }
    push_node(s, target == kNoNode ? child : target, std::max(t, v->start), step, q, sc, mtrace,
              res);
  }
}

void Checker::push_node(const State& s, NodeId n, TimeNs t, int step, const Query& q,
                        const Scope& sc, uint32_t trace, WalkOutcome& res) {
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

}  // namespace leapfrog::oracle_detail
