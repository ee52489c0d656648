// The oracle on the shapes of mount-move-dotdot and rename-umount, built by
// hand as those scenarios model them: the legal answers of a walk racing a
// mount move or an unmount stay quiet, and the answers a torn lockless walk
// gives (".." at the wrong parent or staying at the moved root, a stray
// ENOENT or EACCES where every version resolves) are flagged.

#include <gtest/gtest.h>

#include <cerrno>
#include <fstream>

#include "scenarios/history_io.h"
#include "scenarios/oracle.h"
#include "scenarios/tree_model.h"

namespace leapfrog {
namespace {

const Attr kOpen{0755, 0, 0, {}};
const Attr kClosed{0700, 0, 0, {}};
const Attr kFile{0644, 0, 0, {}};

// Actor 0 mutates as root, actor 1 observes as nobody. Node n has inode
// 100 + n on dev 1.
class Builder {
 public:
  explicit Builder(TreeModel& t) : t_(t) {
    h_.header.actors = {Actor{0, "mutator", Cred{0, 0, {}}},
                        Actor{1, "observer", Cred{65534, 65534, {}}}};
    h_.header.base_dev = 1;
  }
  void mutate(const Effect& e, TimeNs inv, TimeNs comp) {
    h_.effects.push_back(e);
    h_.mutations.push_back(MutationRecord{0, uint32_t(h_.effects.size() - 1), inv, comp, 0, 0});
  }
  void lookup(NodeId start, const std::string& path, TimeNs inv, TimeNs comp, int err,
              NodeId reached = kNoNode) {
    Query q;
    q.op = "stat";
    q.start = start;
    for (size_t i = 0; i <= path.size();) {
      size_t j = path.find('/', i);
      if (j == std::string::npos) j = path.size();
      q.path.push_back(path.substr(i, j - i));
      i = j + 1;
    }
    h_.queries.push_back(q);
    LookupRecord r{1, uint32_t(h_.queries.size() - 1), inv, comp, err, 0, 0, 0};
    if (reached != kNoNode) {
      r.dev = 1;
      r.ino = 100 + reached;
    }
    h_.lookups.push_back(r);
  }
  CheckResult check() {
    for (const auto& n : t_.nodes()) t_.set_identity(n.id, NodeIdentity{1, 100 + n.id, false});
    t_.fill_header(h_.header);
    return check_history(h_);
  }

 private:
  TreeModel& t_;
  History h_;
};

uint64_t count(const CheckResult& r, ViolationKind k) {
  return r.by_kind[static_cast<size_t>(k)];
}

// mount-move-dotdot with parents=0: pa and pb are tmpfs roots mounted on the
// lookup root's pa and pb; the moved mount's root holds x and the trap k2.
struct MoveShape {
  TreeModel t{kOpen};
  NodeId ra, rb, ma, mb, ga, gb, moved, top_g, k2g;
  MoveShape() {
    top_g = t.add_file(t.root(), "g", kFile);
    const NodeId k2 = t.add_dir(t.root(), "k2", kOpen);
    k2g = t.add_file(k2, "g", kFile);
    auto parent = [this](const std::string& name, NodeId& r, NodeId& m, NodeId& g) {
      const NodeId covered = t.add_dir(t.root(), name, kOpen);
      r = t.add_detached(NodeKind::Dir, "tmpfs:" + name, kOpen);
      t.declare_mounted(covered, r);
      t.declare_parent(r, t.root());
      m = t.add_dir(r, "m", kOpen);
      t.declare_absent(m, "x");
      g = t.add_file(r, "g", kFile);
      t.add_dir(r, "k2", kClosed);
    };
    parent("pa", ra, ma, ga);
    parent("pb", rb, mb, gb);
    moved = t.add_detached(NodeKind::Dir, "moved", kOpen);
    t.declare_mounted(ma, moved);
    t.declare_mount_point(mb);
    t.declare_parent(moved, ra);
    t.add_dir(moved, "x", kOpen);
    t.add_dir(moved, "k2", kClosed);
  }
  Effect move(NodeId from, NodeId to, NodeId to_dir) const {
    return Effect{"mount-move",
                  {ObjectSet{ObjectKey{ObjectKind::Mount, from, ""}, Value{{}, kNoNode}},
                   ObjectSet{ObjectKey{ObjectKind::Mount, to, ""}, Value{{}, moved}},
                   ObjectSet{ObjectKey{ObjectKind::Parent, moved, ""}, Value{{}, to_dir}}}};
  }
};

TEST(OracleMountMove, DotdotFollowsTheMoveAtomically) {
  MoveShape s;
  Builder h(s.t);
  h.mutate(s.move(s.ma, s.mb, s.rb), 100, 200);
  h.lookup(s.moved, "../g", 10, 20, 0, s.ga);
  h.lookup(s.moved, "../g", 150, 160, 0, s.ga);  // the move overlaps: either parent
  h.lookup(s.moved, "../g", 150, 160, 0, s.gb);
  h.lookup(s.moved, "x/../../g", 300, 310, 0, s.gb);
  h.lookup(s.moved, "../../g", 150, 160, 0, s.top_g);
  h.lookup(s.moved, "../../k2/g", 150, 160, 0, s.k2g);
  h.lookup(s.t.root(), "pa/m/x/../../g", 10, 20, 0, s.ga);
  h.lookup(s.t.root(), "pa/m/x/../../g", 300, 310, ENOENT);  // pa/m is uncovered
  h.lookup(s.t.root(), "pb/m/x/../../g", 300, 310, 0, s.gb);
  // Down through pa/m before the move, up after it: ".." is pb by then.
  h.lookup(s.t.root(), "pa/m/x/../../g", 50, 250, 0, s.gb);
  auto r = h.check();
  EXPECT_EQ(r.violation_count, 0u);
  EXPECT_EQ(r.lookups_checked, 10u);
  EXPECT_EQ(r.unjudged, 0u);
}

TEST(OracleMountMove, TornDotdotAnswersAreFlagged) {
  MoveShape s;
  Builder h(s.t);
  h.mutate(s.move(s.ma, s.mb, s.rb), 100, 200);
  h.mutate(s.move(s.mb, s.ma, s.ra), 1000, 1100);
  // The mount point of one moment with the parent of another: pa after the
  // move to pb completed, and pb before it began.
  h.lookup(s.moved, "../g", 300, 310, 0, s.ga);
  h.lookup(s.moved, "../g", 10, 20, 0, s.gb);
  // ".." stayed at the moved root (halfway through the move): g is not there.
  h.lookup(s.moved, "../g", 150, 160, ENOENT);
  // The second ".." stayed at pa's root: its k2 is closed, the top one open.
  h.lookup(s.moved, "../../k2/g", 150, 160, EACCES);
  // Through pb/m while the mount was on pa/m throughout.
  h.lookup(s.t.root(), "pb/m/x/../../g", 1200, 1300, 0, s.gb);
  auto r = h.check();
  EXPECT_EQ(r.violation_count, 5u);
  EXPECT_EQ(count(r, ViolationKind::StaleEntry), 3u);
  EXPECT_EQ(count(r, ViolationKind::StaleDeny), 1u);
  EXPECT_EQ(count(r, ViolationKind::WrongMount), 1u);
  ASSERT_EQ(r.violations.size(), 5u);
  // The timeline names the ".." step and the one parent possible then.
  bool dotdot = false;
  for (const auto& st : r.violations[0].steps)
    if (st.object == "parent(moved)") {
      dotdot = true;
      ASSERT_EQ(st.versions.size(), 1u);
      EXPECT_EQ(st.versions[0].value, "tmpfs:pb");
    }
  EXPECT_TRUE(dotdot);
  EXPECT_EQ(r.violations[0].expected, "success: reached tmpfs:pb/g");
  EXPECT_EQ(r.violations[2].observed, "error ENOENT");
}

// rename-umount: M is bound on D (p/d), its f and g are swapped, it is
// unmounted, and D and E trade places across p and q.
struct UmountShape {
  TreeModel t{kOpen};
  NodeId p, q, d, e, df, ef, m, mf, mg, mx;
  UmountShape() {
    p = t.add_dir(t.root(), "p", kOpen);
    q = t.add_dir(t.root(), "q", kOpen);
    d = t.add_dir(p, "d", kOpen);
    e = t.add_dir(q, "e", kOpen);
    df = t.add_file(d, "f", kFile);
    ef = t.add_file(e, "f", kFile);
    t.declare_absent(d, "x");
    t.declare_absent(e, "x");
    t.declare_mount_point(d);
    m = t.add_detached(NodeKind::Dir, "tmpfs", kOpen);
    mf = t.add_file(m, "f", kFile);
    mg = t.add_file(m, "g", kFile);
    mx = t.add_file(m, "x", kFile);
  }
};

TEST(OracleRenameUmount, EveryTimingResolves) {
  UmountShape s;
  Builder h(s.t);
  TreeModel& t = s.t;
  h.mutate(t.mount(s.d, s.m), 100, 200);
  h.mutate(t.exchange(s.mf, s.m, "f", s.mg, s.m, "g"), 300, 400);
  h.mutate(t.umount(s.d), 500, 600);
  h.mutate(t.exchange(s.d, s.p, "d", s.e, s.q, "e"), 700, 800);
  h.lookup(0, "p/d/f", 10, 20, 0, s.df);
  h.lookup(0, "p/d/f", 150, 160, 0, s.mf);
  h.lookup(0, "p/d/f", 350, 360, 0, s.mg);  // swapped inside the mount
  h.lookup(0, "p/d/f", 250, 550, 0, s.df);  // spans the umount
  h.lookup(0, "p/d/f", 750, 760, 0, s.ef);  // p/d is E from 700
  h.lookup(0, "q/e/f", 900, 910, 0, s.df);
  h.lookup(0, "p/d/x", 10, 20, ENOENT);
  h.lookup(0, "p/d/x", 250, 260, 0, s.mx);
  h.lookup(0, "p/d/x", 450, 550, ENOENT);  // the umount may have happened
  auto r = h.check();
  EXPECT_EQ(r.violation_count, 0u);
  EXPECT_EQ(r.lookups_checked, 9u);
}

TEST(OracleRenameUmount, StrayEnoentAndWrongSideAreFlagged) {
  UmountShape s;
  Builder h(s.t);
  TreeModel& t = s.t;
  h.mutate(t.mount(s.d, s.m), 100, 200);
  h.mutate(t.exchange(s.mf, s.m, "f", s.mg, s.m, "g"), 300, 400);
  h.mutate(t.umount(s.d), 500, 600);
  h.mutate(t.exchange(s.d, s.p, "d", s.e, s.q, "e"), 700, 800);
  // Every version of p/d/f exists: ENOENT is never legal, whatever the window.
  h.lookup(0, "p/d/f", 10, 900, ENOENT);
  h.lookup(0, "q/e/f", 650, 750, ENOENT);
  // x only in the mount: ENOENT while it covered D throughout.
  h.lookup(0, "p/d/x", 250, 260, ENOENT);
  // The covered f while mounted; M's old f after the swap completed.
  h.lookup(0, "p/d/f", 250, 260, 0, s.df);
  h.lookup(0, "p/d/f", 450, 460, 0, s.mf);
  auto r = h.check();
  EXPECT_EQ(r.violation_count, 5u);
  // Every walk of these paths crosses D's mount point.
  EXPECT_EQ(count(r, ViolationKind::WrongMount), 5u);
}

// ---- golden histories (testdata/): the cases above as JSON Lines -----------

CheckResult golden(const std::string& name) {
  std::ifstream in(std::string(LEAPFROG_TESTDATA) + "/" + name);
  EXPECT_TRUE(in.good()) << name;
  return check_history(read_history(in));
}

TEST(OracleMountGolden, LegalHistoriesPass) {
  auto move = golden("mount_move_dotdot_legal.jsonl");
  EXPECT_EQ(move.violation_count, 0u);
  EXPECT_EQ(move.lookups_checked, 10u);
  auto umount = golden("rename_umount_legal.jsonl");
  EXPECT_EQ(umount.violation_count, 0u);
  EXPECT_EQ(umount.lookups_checked, 9u);
}

TEST(OracleMountGolden, IllegalHistoriesAreFlagged) {
  auto move = golden("mount_move_dotdot_illegal.jsonl");
  EXPECT_EQ(move.violation_count, 5u);
  EXPECT_EQ(count(move, ViolationKind::StaleEntry), 3u);
  EXPECT_EQ(count(move, ViolationKind::StaleDeny), 1u);
  EXPECT_EQ(count(move, ViolationKind::WrongMount), 1u);
  auto umount = golden("rename_umount_illegal.jsonl");
  EXPECT_EQ(umount.violation_count, 5u);
  EXPECT_EQ(count(umount, ViolationKind::WrongMount), 5u);
}

}  // namespace
}  // namespace leapfrog
