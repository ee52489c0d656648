// Oracle unit tests on hand-built histories: legal interleavings stay quiet,
// and each violation kind fires on an illegal one.

#include "scenarios/oracle.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cerrno>
#include <fstream>

#include "scenarios/history_io.h"
#include "scenarios/outcome.h"
#include "scenarios/tree_model.h"

namespace leapfrog {
namespace {

constexpr uint32_t kNobody = 65534;
const Attr kOpen{0755, 0, 0, {}};
const Attr kClosed{0700, 0, 0, {}};

// A history under construction: actor 0 mutates as root, actor 1 observes as
// nobody, actor 2 observes as uid 1000.
class Hist {
 public:
  explicit Hist(TreeModel& tree) : tree_(tree) {
    h_.header.actors = {Actor{0, "mutator", Cred{0, 0, {}}}, Actor{1, "observer", Cred{kNobody, kNobody, {}}},
                        Actor{2, "observer", Cred{1000, 1000, {}}}};
    h_.header.base_dev = 1;
  }
  void mutate(const Effect& e, TimeNs inv, TimeNs comp, int err = 0) {
    h_.effects.push_back(e);
    h_.mutations.push_back(MutationRecord{0, uint32_t(h_.effects.size() - 1), inv, comp, err, 0});
  }
  // A lookup of `path` from `start`; `reached` is the node observed on success.
  void lookup(const std::string& path, TimeNs inv, TimeNs comp, int err, NodeId reached = kNoNode,
              uint32_t actor = 1, NodeId start = 0, uint8_t access = 0, const std::string& op = "stat") {
    Query q;
    q.op = op;
    q.start = start;
    q.final_access = access;
    size_t i = 0;
    while (i < path.size()) {
      size_t j = path.find('/', i);
      if (j == std::string::npos) j = path.size();
      q.path.push_back(path.substr(i, j - i));
      i = j + 1;
    }
    h_.queries.push_back(q);
    LookupRecord r{actor, uint32_t(h_.queries.size() - 1), inv, comp, err, 0, 0, 0};
    if (err == 0 && reached != kNoNode) {
      const auto& id = tree_.nodes()[reached].identity;
      r.dev = id.any_other_dev ? 99 : id.dev;
      r.ino = id.ino;
    }
    h_.lookups.push_back(r);
  }
  CheckResult check() {
    tree_.fill_header(h_.header);
    return check_history(h_);
  }
  History& history() { return h_; }

 private:
  TreeModel& tree_;
  History h_;
};

// root/a/b/c/f with inode numbers 100 + node id on dev 1.
struct Chain {
  TreeModel tree{kOpen};
  NodeId a, b, c, f;
  Chain() {
    a = tree.add_dir(tree.root(), "a", kOpen);
    b = tree.add_dir(a, "b", kOpen);
    c = tree.add_dir(b, "c", kOpen);
    f = tree.add_file(c, "f", Attr{0644, 0, 0, {}});
    identify(tree);
  }
  static void identify(TreeModel& t) {
    for (const auto& n : t.nodes())
      if (!t.nodes()[n.id].identity.any_other_dev) t.set_identity(n.id, NodeIdentity{1, 100 + n.id, false});
  }
};

uint64_t kind_count(const CheckResult& r, ViolationKind k) { return r.by_kind[static_cast<size_t>(k)]; }

TEST(Oracle, StaticTreeIsClean) {
  Chain t;
  Hist h(t.tree);
  h.lookup("a/b/c/f", 10, 20, 0, t.f);
  h.lookup("a/b/c/g", 30, 40, ENOENT);
  auto r = h.check();
  EXPECT_EQ(r.violation_count, 0u);
  EXPECT_EQ(r.lookups_checked, 2u);
}

// Detection power: the first violation ends at the stale lookup's completion,
// counted from the first recorded operation, after the lookups completed by then.
TEST(Oracle, DetectionTimeIsTheFirstViolationsCompletion) {
  Chain t;
  Hist h(t.tree);
  h.lookup("a/b/c/f", 50, 60, 0, t.f);  // before the revoke: fine
  h.mutate(t.tree.chmod(t.b, kClosed), 100, 200);
  h.lookup("a/b/c/f", 700, 800, 0, t.f);  // stale, but later
  h.lookup("a/b/c/f", 300, 400, 0, t.f);  // stale, the first one
  const auto r = h.check();
  ASSERT_EQ(r.violation_count, 2u);
  EXPECT_EQ(r.first_violation_at, 400);
  Outcome o;
  o.check = r;
  note_detection(o, h.history());
  EXPECT_EQ(o.first_violation_ns, 350);
  EXPECT_EQ(o.ops_to_first_violation, 2u);
  Chain clean;
  Hist g(clean.tree);
  g.lookup("a/b/c/f", 10, 20, 0, clean.f);
  Outcome none;
  none.check = g.check();
  note_detection(none, g.history());
  EXPECT_EQ(none.first_violation_ns, -1);
}

TEST(Oracle, GrantAfterCompletedRevokeIsStaleGrant) {
  Chain t;
  Hist h(t.tree);
  h.mutate(t.tree.chmod(t.b, kClosed), 100, 200);
  h.lookup("a/b/c/f", 300, 400, 0, t.f);
  auto r = h.check();
  ASSERT_EQ(r.violation_count, 1u);
  const Violation& v = r.violations.at(0);
  EXPECT_EQ(v.kind, ViolationKind::StaleGrant);
  EXPECT_EQ(v.step, 3);  // resolving "c" needs search permission on b
  EXPECT_EQ(v.component, "c");
  EXPECT_EQ(v.object, "attr(a/b)");
  ASSERT_EQ(v.versions.size(), 1u);
  EXPECT_EQ(v.versions[0].from, 100);
  EXPECT_NE(v.versions[0].value.find("mode=0700"), std::string::npos);
  // Each step shows the directory's attributes, then the entry it followed,
  // down to the observed file.
  ASSERT_EQ(v.steps.size(), 8u);
  EXPECT_EQ(v.steps[4].step, 3);
  EXPECT_EQ(v.steps[4].object, "attr(a/b)");
  EXPECT_EQ(v.steps.back().object, "entry(a/b/c, \"f\")");
  EXPECT_EQ(v.steps[1].object, "entry(., \"a\")");
}

TEST(Oracle, ViolationCarriesTheMutationsAroundItsWindow) {
  Chain t;
  Hist h(t.tree);
  // Far before: outside every possible version's span, not reported.
  h.mutate(t.tree.chmod(t.b, kOpen), 10, 20);
  h.mutate(t.tree.chmod(t.b, kClosed), 100, 200);  // the revoke the lookup missed
  h.mutate(t.tree.chmod(t.c, kClosed), 250, 260);  // another object: not reported
  h.mutate(t.tree.chmod(t.b, kOpen), 290, 310, EPERM);  // failed, overlaps the window
  h.mutate(t.tree.chmod(t.b, kOpen), 5000, 5100);  // ends the possible version: reported
  h.mutate(t.tree.chmod(t.b, kClosed), 9000, 9100);  // after everything: not reported
  h.lookup("a/b/c", 300, 400, 0, t.c);
  auto r = h.check();
  ASSERT_EQ(r.violation_count, 1u);
  const Violation& v = r.violations.at(0);
  ASSERT_EQ(v.object, "attr(a/b)");
  ASSERT_EQ(v.history.size(), 3u);
  EXPECT_EQ(v.history[0].invoke, 100);
  EXPECT_EQ(v.history[0].complete, 200);
  EXPECT_EQ(v.history[0].op, "chmod");
  EXPECT_EQ(v.history[0].object, "attr(a/b)");
  EXPECT_NE(v.history[0].value.find("mode=0700"), std::string::npos);
  EXPECT_EQ(v.history[0].err, 0);
  EXPECT_EQ(v.history[1].invoke, 290);
  EXPECT_EQ(v.history[1].err, EPERM);
  EXPECT_EQ(v.history[2].invoke, 5000);
}

TEST(Oracle, ViolationHistoryIsBounded) {
  Chain t;
  Hist h(t.tree);
  // Many failed chmods overlapping the window: only the nearest are kept.
  for (int i = 0; i < 100; ++i) h.mutate(t.tree.chmod(t.b, kOpen), 100 + 10 * i, 105 + 10 * i, EPERM);
  h.mutate(t.tree.chmod(t.b, kClosed), 50, 60);
  h.lookup("a/b/c", 600, 700, 0, t.c);
  auto r = h.check();
  ASSERT_EQ(r.violation_count, 1u);
  const auto& hist = r.violations.at(0).history;
  ASSERT_EQ(hist.size(), kMaxMutationTrace);
  for (size_t i = 1; i < hist.size(); ++i) EXPECT_LE(hist[i - 1].invoke, hist[i].invoke);
  // The revoke that made the stale version, and the ones overlapping the
  // window [600, 700], are all in.
  EXPECT_EQ(hist.front().invoke, 50);
  for (TimeNs inv = 600; inv < 700; inv += 10)
    EXPECT_TRUE(std::any_of(hist.begin(), hist.end(), [&](const MutationTrace& m) { return m.invoke == inv; })) << inv;
}

TEST(Oracle, OverlappingRevokeAllowsEitherAnswer) {
  Chain t;
  Hist h(t.tree);
  h.mutate(t.tree.chmod(t.b, kClosed), 100, 200);
  h.lookup("a/b/c/f", 150, 250, 0, t.f);
  h.lookup("a/b/c/f", 150, 250, EACCES);
  h.lookup("a/b/c/f", 50, 120, EACCES);  // the revoke may have taken effect at its invoke
  EXPECT_EQ(h.check().violation_count, 0u);
}

TEST(Oracle, EqualTimestampsAreInclusive) {
  Chain t;
  Hist h(t.tree);
  h.mutate(t.tree.chmod(t.b, kClosed), 100, 200);
  h.lookup("a/b/c/f", 200, 200, 0, t.f);      // old version possible up to the revoke's completion
  h.lookup("a/b/c/f", 100, 100, EACCES);      // new version possible from its invoke
  h.lookup("a/b/c/f", 201, 201, 0, t.f);      // one nanosecond later it is not
  auto r = h.check();
  EXPECT_EQ(r.violation_count, 1u);
  EXPECT_EQ(r.violations.at(0).record, 2u);
}

TEST(Oracle, DenyWhileGrantedThroughoutIsStaleDeny) {
  Chain t;
  Hist h(t.tree);
  h.mutate(t.tree.chmod(t.b, kClosed), 100, 200);
  h.mutate(t.tree.chmod(t.b, kOpen), 300, 400);
  h.lookup("a/b/c/f", 500, 600, EACCES);
  auto r = h.check();
  ASSERT_EQ(r.violation_count, 1u);
  EXPECT_EQ(r.violations[0].kind, ViolationKind::StaleDeny);
  EXPECT_EQ(kind_count(r, ViolationKind::StaleDeny), 1u);
}

TEST(Oracle, SeveralMutatedComponentsNeedOrderedSteps) {
  // a opens late, b closes early: each alone is possible inside the window,
  // but the walk must pass a (at t1 >= 500) before b (at t2 <= 200).
  Chain t;
  t.tree = TreeModel(kOpen);
  t.a = t.tree.add_dir(t.tree.root(), "a", kClosed);
  t.b = t.tree.add_dir(t.a, "b", kOpen);
  t.c = t.tree.add_dir(t.b, "c", kOpen);
  t.f = t.tree.add_file(t.c, "f", Attr{0644, 0, 0, {}});
  Chain::identify(t.tree);
  Hist h(t.tree);
  h.mutate(t.tree.chmod(t.b, kClosed), 100, 200);
  h.mutate(t.tree.chmod(t.a, kOpen), 500, 600);
  h.lookup("a/b/c/f", 50, 700, 0, t.f);
  auto r = h.check();
  ASSERT_EQ(r.violation_count, 1u);
  EXPECT_EQ(r.violations[0].kind, ViolationKind::StaleGrant);
  EXPECT_EQ(r.violations[0].step, 3);

  // The reverse order is fine: a opens early, b closes late.
  Chain u;
  u.tree = TreeModel(kOpen);
  u.a = u.tree.add_dir(u.tree.root(), "a", kClosed);
  u.b = u.tree.add_dir(u.a, "b", kOpen);
  u.c = u.tree.add_dir(u.b, "c", kOpen);
  u.f = u.tree.add_file(u.c, "f", Attr{0644, 0, 0, {}});
  Chain::identify(u.tree);
  Hist g(u.tree);
  g.mutate(u.tree.chmod(u.a, kOpen), 100, 200);
  g.mutate(u.tree.chmod(u.b, kClosed), 500, 600);
  g.lookup("a/b/c/f", 50, 700, 0, u.f);
  g.lookup("a/b/c/f", 50, 700, EACCES);  // may fail at a (before 200) or at b (after 500)
  EXPECT_EQ(g.check().violation_count, 0u);
}

TEST(Oracle, FailureAtStepJ) {
  Chain t;
  Hist h(t.tree);
  h.mutate(t.tree.chmod(t.c, kClosed), 100, 200);
  h.lookup("a/b/c/f", 300, 400, EACCES);  // fails at step 4 (search on c)
  h.lookup("a/b/x/f", 300, 400, ENOENT);  // fails at step 3
  h.lookup("a/b/c/f/g", 10, 20, ENOTDIR);  // f is a file
  h.lookup("a/b/c/f/g", 10, 20, EACCES);   // not possible: every directory is open then
  auto r = h.check();
  ASSERT_EQ(r.violation_count, 1u);
  EXPECT_EQ(r.violations[0].record, 3u);
  EXPECT_EQ(r.violations[0].kind, ViolationKind::StaleDeny);
}

TEST(Oracle, FinalAccessCheck) {
  Chain t;
  Hist h(t.tree);
  h.mutate(t.tree.chmod(t.f, Attr{0600, 0, 0, {}}), 100, 200);
  h.lookup("a/b/c/f", 10, 20, 0, kNoNode, 1, 0, kMayRead, "access");
  h.lookup("a/b/c/f", 300, 400, EACCES, kNoNode, 1, 0, kMayRead, "access");
  h.lookup("a/b/c/f", 300, 400, 0, kNoNode, 1, 0, kMayRead, "access");
  auto r = h.check();
  ASSERT_EQ(r.violation_count, 1u);
  EXPECT_EQ(r.violations[0].record, 2u);
  EXPECT_EQ(r.violations[0].kind, ViolationKind::StaleGrant);
}

TEST(Oracle, RenameBetweenParents) {
  TreeModel tree(kOpen);
  NodeId p1 = tree.add_dir(tree.root(), "p1", kOpen);
  NodeId p2 = tree.add_dir(tree.root(), "p2", kClosed);
  NodeId x = tree.add_dir(p1, "x", kOpen);
  NodeId f = tree.add_file(x, "f", Attr{0644, 0, 0, {}});
  tree.declare_absent(p2, "x");
  Chain::identify(tree);
  Hist h(tree);
  h.mutate(tree.rename(x, p1, "x", p2, "x"), 100, 200);
  h.lookup("p1/x/f", 50, 150, 0, f);      // legal: rename may not have happened
  h.lookup("p1/x/f", 300, 400, ENOENT);   // legal
  h.lookup("p2/x/f", 300, 400, EACCES);   // legal: p2 is closed
  h.lookup("p1/x/f", 300, 400, 0, f);     // stale-entry: found a name a completed rename removed
  h.lookup("p2/x/f", 300, 400, 0, f);     // stale-grant: p2 denies search
  h.lookup("p2/x/f", 10, 20, 0, f);       // stale-entry: x was not in p2 yet (p2 is closed too)
  auto r = h.check();
  EXPECT_EQ(r.violation_count, 3u);
  EXPECT_EQ(kind_count(r, ViolationKind::StaleEntry), 2u);
  EXPECT_EQ(kind_count(r, ViolationKind::StaleGrant), 1u);
  EXPECT_EQ(r.violations.at(0).record, 3u);
  EXPECT_EQ(r.violations.at(0).step, 2);
}

TEST(Oracle, MissedCreatedEntryIsStaleEntry) {
  TreeModel tree(kOpen);
  NodeId p1 = tree.add_dir(tree.root(), "p1", kOpen);
  NodeId p2 = tree.add_dir(tree.root(), "p2", kOpen);
  NodeId x = tree.add_dir(p1, "x", kOpen);
  tree.declare_absent(p2, "x");
  Chain::identify(tree);
  Hist h(tree);
  h.mutate(tree.rename(x, p1, "x", p2, "x"), 100, 200);
  h.lookup("p2/x", 150, 160, ENOENT);  // legal
  h.lookup("p2/x", 300, 400, ENOENT);  // missed the name a completed rename created
  auto r = h.check();
  ASSERT_EQ(r.violation_count, 1u);
  EXPECT_EQ(r.violations[0].kind, ViolationKind::StaleEntry);
}

TEST(Oracle, ExchangeIsToldByInode) {
  TreeModel tree(kOpen);
  NodeId p = tree.add_dir(tree.root(), "p", kOpen);
  NodeId d1 = tree.add_dir(p, "d1", kOpen);
  NodeId d2 = tree.add_dir(p, "d2", kOpen);
  NodeId f1 = tree.add_file(d1, "f", Attr{0644, 0, 0, {}});
  NodeId f2 = tree.add_file(d2, "f", Attr{0644, 0, 0, {}});
  Chain::identify(tree);
  Hist h(tree);
  h.mutate(tree.exchange(d1, p, "d1", d2, p, "d2"), 100, 200);
  h.lookup("p/d1/f", 10, 20, 0, f1);
  h.lookup("p/d1/f", 150, 160, 0, f2);
  h.lookup("p/d1/f", 300, 310, 0, f2);
  h.lookup("p/d1/f", 300, 310, 0, f1);  // stale: d1 names d2's old directory since 200
  auto r = h.check();
  ASSERT_EQ(r.violation_count, 1u);
  EXPECT_EQ(r.violations[0].kind, ViolationKind::StaleEntry);
  EXPECT_EQ(r.violations[0].record, 3u);
}

TEST(Oracle, MountCoversAndUncovers) {
  TreeModel tree(kOpen);
  NodeId m = tree.add_dir(tree.root(), "m", kOpen);
  NodeId under = tree.add_file(m, "f", Attr{0644, 0, 0, {}});
  NodeId closed_root = tree.add_detached(NodeKind::Dir, "tmpfs(0700)", kClosed);
  NodeId open_root = tree.add_detached(NodeKind::Dir, "tmpfs(0755)", kOpen);
  NodeId marker = tree.add_detached(NodeKind::File, "tmpfs/f", Attr{0644, 0, 0, {}});
  // Both mounted roots hold the marker file "f".
  tree.declare_absent(closed_root, "f");
  Chain::identify(tree);
  tree.set_identity(closed_root, NodeIdentity{0, 0, true});
  tree.set_identity(open_root, NodeIdentity{0, 0, true});
  tree.set_identity(marker, NodeIdentity{0, 0, true});
  tree.declare_mount_point(m);
  Hist h(tree);
  TreeModel& t = tree;
  h.mutate(t.mount(m, closed_root), 100, 200);
  h.mutate(t.umount(m), 300, 400);
  h.mutate(t.mount(m, open_root), 500, 600);
  h.lookup("m/f", 10, 20, 0, under);       // legal: not mounted yet
  h.lookup("m/f", 250, 260, EACCES);       // legal: closed root mounted
  h.lookup("m/f", 250, 260, 0, under);     // wrong-mount: saw the covered file after mount completed
  h.lookup("m/f", 450, 460, EACCES);       // wrong-mount: saw the mounted root after umount completed
  h.lookup("m/f", 450, 460, 0, under);     // legal
  auto r = h.check();
  EXPECT_EQ(r.violation_count, 2u);
  EXPECT_EQ(kind_count(r, ViolationKind::WrongMount), 2u);
}

TEST(Oracle, MountedMarkerSeenByDevice) {
  TreeModel tree(kOpen);
  NodeId m = tree.add_dir(tree.root(), "m", kOpen);
  NodeId under = tree.add_file(m, "f", Attr{0644, 0, 0, {}});
  NodeId root = tree.add_detached(NodeKind::Dir, "tmpfs", kOpen);
  Chain::identify(tree);
  tree.declare_mount_point(m);
  // The mounted root and its marker match any device other than the base one.
  tree.set_identity(root, NodeIdentity{0, 0, true});
  Hist h(tree);
  // Link the marker into the mounted root as part of the model.
  NodeId marker = tree.add_file(root, "f", Attr{0644, 0, 0, {}});
  tree.set_identity(marker, NodeIdentity{0, 0, true});
  h.mutate(tree.mount(m, root), 100, 200);
  h.lookup("m/f", 300, 400, 0, marker);
  h.lookup("m/f", 10, 20, 0, marker);  // wrong-mount: the mount had not started
  h.lookup("m/f", 300, 400, 0, under);  // wrong-mount: covered file after mount completed
  auto r = h.check();
  EXPECT_EQ(r.violation_count, 2u);
  EXPECT_EQ(kind_count(r, ViolationKind::WrongMount), 2u);
}

TEST(Oracle, DotDotFollowsRenamedParent) {
  TreeModel tree(kOpen);
  NodeId p1 = tree.add_dir(tree.root(), "p1", kOpen);
  NodeId p2 = tree.add_dir(tree.root(), "p2", kOpen);
  NodeId x = tree.add_dir(p1, "x", kOpen);
  NodeId g1 = tree.add_file(p1, "g", Attr{0644, 0, 0, {}});
  NodeId g2 = tree.add_file(p2, "g", Attr{0644, 0, 0, {}});
  tree.declare_absent(p2, "x");
  Chain::identify(tree);
  Hist h(tree);
  h.mutate(tree.rename(x, p1, "x", p2, "x"), 100, 200);
  h.lookup("../g", 10, 20, 0, g1, 1, x, 0, "openat");
  h.lookup("../g", 150, 160, 0, g1, 1, x, 0, "openat");
  h.lookup("../g", 150, 160, 0, g2, 1, x, 0, "openat");
  h.lookup("../g", 300, 400, 0, g2, 1, x, 0, "openat");
  h.lookup("../g", 300, 400, 0, g1, 1, x, 0, "openat");  // stale: x's parent is p2 since 200
  h.lookup("p1/x/../g", 10, 20, 0, g1);
  auto r = h.check();
  ASSERT_EQ(r.violation_count, 1u);
  EXPECT_EQ(r.violations[0].record, 4u);
  EXPECT_EQ(r.violations[0].kind, ViolationKind::StaleEntry);
}

TEST(Oracle, SymlinkReplacedByRename) {
  TreeModel tree(kOpen);
  NodeId open = tree.add_dir(tree.root(), "open", kOpen);
  NodeId closed = tree.add_dir(tree.root(), "closed", kClosed);
  NodeId fo = tree.add_file(open, "f", Attr{0644, 0, 0, {}});
  NodeId fc = tree.add_file(closed, "f", Attr{0644, 0, 0, {}});
  NodeId to_open = tree.add_symlink(tree.root(), "l", "open");
  NodeId to_closed = tree.add_detached(NodeKind::Symlink, "l(closed)", Attr{0777, 0, 0, {}}, "closed");
  NodeId staging = tree.add_dir(tree.root(), "s", kOpen);
  (void)to_open;
  Chain::identify(tree);
  Hist h(tree);
  h.mutate(tree.rename(to_closed, staging, "l", tree.root(), "l"), 100, 200);
  h.lookup("l/f", 10, 20, 0, fo);
  h.lookup("l/f", 300, 400, EACCES);
  h.lookup("l/f", 300, 400, 0, fo);  // stale: the link now points into closed
  h.lookup("l/f", 300, 400, 0, fc);  // stale-grant: closed denies search
  auto r = h.check();
  EXPECT_EQ(r.violation_count, 2u);
  EXPECT_EQ(kind_count(r, ViolationKind::StaleEntry), 1u);
  EXPECT_EQ(kind_count(r, ViolationKind::StaleGrant), 1u);
}

TEST(Oracle, SymlinkLoopIsEloop) {
  TreeModel tree(kOpen);
  tree.add_symlink(tree.root(), "l", "l");
  Chain::identify(tree);
  Hist h(tree);
  h.lookup("l", 10, 20, ELOOP);
  h.lookup("l", 10, 20, ENOENT);
  auto r = h.check();
  ASSERT_EQ(r.violation_count, 1u);
  EXPECT_EQ(r.violations[0].record, 1u);
}

TEST(Oracle, UnfollowedFinalSymlinkMayBeEloop) {
  // open(O_NOFOLLOW) of a symlink fails ELOOP; lstat of it succeeds.
  TreeModel tree(kOpen);
  tree.add_dir(tree.root(), "d", kOpen);
  tree.add_symlink(tree.root(), "l", "d");
  Chain::identify(tree);
  Hist h(tree);
  h.lookup("l", 10, 20, ELOOP);
  h.history().queries.back().follow_final = false;
  h.lookup("l", 10, 20, ELOOP);  // followed: reaches d, never ELOOP
  auto r = h.check();
  ASSERT_EQ(r.violation_count, 1u);
  EXPECT_EQ(r.violations[0].record, 1u);
}

TEST(Oracle, FileOnThePathIsEnotdirOnlyWhileItIsThere) {
  // The entry names a file, then a directory: its node's kind changes
  // between versions.
  TreeModel tree(kOpen);
  const NodeId file = tree.add_file(tree.root(), "n", Attr{0644, 0, 0, {}});
  const NodeId dir = tree.add_detached(NodeKind::Dir, "n(dir)", kOpen);
  Chain::identify(tree);
  Hist h(tree);
  const Effect to_dir{"rename", {ObjectSet{ObjectKey{ObjectKind::Entry, 0, "n"}, Value{{}, dir}}}};
  h.mutate(to_dir, 100, 200);
  h.lookup("n/f", 10, 90, ENOTDIR);    // the file
  h.lookup("n/f", 150, 250, ENOTDIR);  // either
  h.lookup("n/f", 150, 250, ENOENT);   // either: the directory is empty
  h.lookup("n/.", 300, 400, 0, dir);   // the directory
  h.lookup("n/f", 300, 400, ENOTDIR);  // stale: the file was replaced
  h.lookup("n/.", 10, 90, 0, file);    // never: "." of a file is ENOTDIR
  auto r = h.check();
  ASSERT_EQ(r.violation_count, 2u);
  EXPECT_EQ(kind_count(r, ViolationKind::StaleEntry), 2u);
  EXPECT_EQ(r.violations[0].record, 4u);
  EXPECT_EQ(r.violations[1].record, 5u);
}

// ---- exec of set-id programs (LookupRecord::has_ids) ------------------------

struct ExecTree {
  TreeModel tree{kOpen};
  NodeId bin, helper;
  ExecTree() {
    bin = tree.add_dir(tree.root(), "bin", kOpen);
    helper = tree.add_file(bin, "helper", kOpen);
    Chain::identify(tree);
  }
};

void exec_lookup(Hist& h, TimeNs inv, TimeNs comp, int err, uint32_t euid = kNobody,
                 uint32_t egid = kNobody) {
  h.lookup("bin/helper", inv, comp, err, kNoNode, 1, 0, kMayExec, "execve");
  LookupRecord& r = h.history().lookups.back();
  r.has_ids = err == 0;
  r.euid = euid;
  r.egid = egid;
}

TEST(Oracle, SetuidGainNeedsTheBitAndTheOwnerInOneVersion) {
  ExecTree t;
  Hist h(t.tree);
  h.mutate(t.tree.chmod(t.helper, Attr{04755, 0, 0, {}}), 100, 200);
  h.mutate(t.tree.chmod(t.helper, Attr{0755, 0, 0, {}}), 300, 400);
  h.mutate(t.tree.chown_effect(t.helper, Attr{0755, 1000, 0, {}}), 500, 600);
  h.mutate(t.tree.chmod(t.helper, Attr{04755, 1000, 0, {}}), 700, 800);
  exec_lookup(h, 210, 290, 0, 0);           // set-uid root
  exec_lookup(h, 210, 290, 0);              // no gain is always explained (nosuid)
  exec_lookup(h, 350, 450, 0, 0);           // the revoke may not have happened yet
  exec_lookup(h, 810, 890, 0, 1000);        // set-uid to the new owner
  exec_lookup(h, 410, 490, 0, 0);           // gain after the revoke completed
  exec_lookup(h, 550, 750, 0, 0);           // the bit of one version, the owner of another
  exec_lookup(h, 810, 890, 0, 1000, 1000);  // a set-gid gain that no version has
  auto r = h.check();
  EXPECT_EQ(r.lookups_checked, 7u);
  ASSERT_EQ(r.violation_count, 3u);
  EXPECT_EQ(kind_count(r, ViolationKind::StaleGrant), 3u);
  EXPECT_EQ(r.violations[0].record, 4u);
  EXPECT_EQ(r.violations[1].record, 5u);
  EXPECT_EQ(r.violations[2].record, 6u);
  EXPECT_EQ(r.violations[0].observed, "success: ran with euid=0 egid=65534");
  EXPECT_EQ(r.violations[0].object, "attr(bin/helper)");
  EXPECT_EQ(r.violations[0].expected, "success: ran with euid=65534 egid=65534");
}

TEST(Oracle, SetgidNeedsGroupExec) {
  ExecTree t;
  Hist h(t.tree);
  h.mutate(t.tree.chmod(t.helper, Attr{02745, 0, 7, {}}), 100,
           200);  // g-x: a lock marker, not set-gid
  h.mutate(t.tree.chmod(t.helper, Attr{02755, 0, 7, {}}), 300, 400);
  exec_lookup(h, 210, 290, 0, kNobody, 7);
  exec_lookup(h, 410, 490, 0, kNobody, 7);
  auto r = h.check();
  ASSERT_EQ(r.violation_count, 1u);
  EXPECT_EQ(r.violations[0].record, 0u);
}

TEST(Oracle, ExecPermissionIsJudgedWithIds) {
  ExecTree t;
  Hist h(t.tree);
  h.mutate(t.tree.chmod(t.helper, Attr{04754, 0, 0, {}}), 100, 200);
  exec_lookup(h, 10, 90, EACCES);    // stale-deny
  exec_lookup(h, 210, 290, 0, 0);    // exec passed a revoked check: stale-grant
  exec_lookup(h, 210, 290, EACCES);  // legal
  auto r = h.check();
  ASSERT_EQ(r.violation_count, 2u);
  EXPECT_EQ(kind_count(r, ViolationKind::StaleDeny), 1u);
  EXPECT_EQ(kind_count(r, ViolationKind::StaleGrant), 1u);
}

// ---- golden histories (testdata/) ------------------------------------------

CheckResult check_golden(const std::string& name) {
  std::ifstream in(std::string(LEAPFROG_TESTDATA) + "/" + name);
  EXPECT_TRUE(in.good()) << name;
  return check_history(read_history(in));
}

TEST(OracleGolden, TypeflipLegal) {
  auto r = check_golden("typeflip_legal.jsonl");
  EXPECT_EQ(r.violation_count, 0u);
  EXPECT_EQ(r.lookups_checked, 13u);
  EXPECT_EQ(r.unjudged, 0u);
}

TEST(OracleGolden, TypeflipIllegalIsStaleEntry) {
  auto r = check_golden("typeflip_illegal.jsonl");
  EXPECT_EQ(r.lookups_checked, 5u);
  EXPECT_EQ(r.violation_count, 5u);
  EXPECT_EQ(kind_count(r, ViolationKind::StaleEntry), 5u);
  ASSERT_EQ(r.violations.size(), 5u);
  EXPECT_EQ(r.violations[0].observed, "error ENOTDIR");
  EXPECT_EQ(r.violations[0].expected, "ENOENT");
  EXPECT_EQ(r.violations[1].expected, "ENOENT");
  // In the file's order: ENOTDIR through the symlink, then t/f through the
  // file, then ENOENT through the directory holding f.
  EXPECT_EQ(r.violations[2].expected, "success: reached t/f");
  EXPECT_EQ(r.violations[3].observed, "success: reached t/f");
  EXPECT_EQ(r.violations[3].expected, "ENOTDIR");
  EXPECT_EQ(r.violations[4].expected, "success: reached staging/D/f");
}

TEST(OracleGolden, ExecSetidLegal) {
  auto r = check_golden("exec_setid_legal.jsonl");
  EXPECT_EQ(r.violation_count, 0u);
  EXPECT_EQ(r.lookups_checked, 11u);
  EXPECT_EQ(r.unjudged, 0u);
}

TEST(OracleGolden, ExecSetidIllegal) {
  auto r = check_golden("exec_setid_illegal.jsonl");
  EXPECT_EQ(r.lookups_checked, 7u);
  EXPECT_EQ(r.violation_count, 7u);
  EXPECT_EQ(kind_count(r, ViolationKind::StaleGrant), 6u);
  EXPECT_EQ(kind_count(r, ViolationKind::StaleDeny), 1u);
}

// f50733b45d86's shape: the exec's permission check saw one version and its
// set-uid came from another, which the caller could not execute. A set-id
// gain must come from a version that also lets the caller execute the file
// (the kernel reloads the mode under the inode lock and rechecks MAY_EXEC
// there); the fixed kernel's answer to the same race, its own ids, is legal.
TEST(OracleGolden, ExecSetidGainMustComeFromAnExecutableVersion) {
  auto r = check_golden("exec_setid_toctou.jsonl");
  EXPECT_EQ(r.lookups_checked, 4u);
  ASSERT_EQ(r.violation_count, 1u);
  EXPECT_EQ(kind_count(r, ViolationKind::StaleGrant), 1u);
  EXPECT_EQ(r.violations[0].invoke, 50);
}

TEST(Oracle, AclDenyEntryHoldsForOneUserOnly) {
  TreeModel tree(kOpen);
  Attr deny = kOpen;
  deny.acl.push_back(AclEntry{AclEntry::Tag::User, kNobody, 0});
  NodeId d = tree.add_dir(tree.root(), "d", kOpen);
  NodeId f = tree.add_file(d, "f", Attr{0644, 0, 0, {}});
  Chain::identify(tree);
  Hist h(tree);
  h.mutate(tree.chmod(d, deny), 100, 200);
  h.lookup("d/f", 300, 400, EACCES, kNoNode, 1);
  h.lookup("d/f", 300, 400, 0, f, 2);  // uid 1000 has no entry: other bits allow
  h.lookup("d/f", 300, 400, 0, f, 1);  // stale-grant: the deny entry must hold
  h.lookup("d/f", 300, 400, EACCES, kNoNode, 2);  // stale-deny for the second observer
  auto r = h.check();
  EXPECT_EQ(r.violation_count, 2u);
  EXPECT_EQ(kind_count(r, ViolationKind::StaleGrant), 1u);
  EXPECT_EQ(kind_count(r, ViolationKind::StaleDeny), 1u);
}

TEST(Oracle, EpsilonWidensWindows) {
  Chain t;
  Hist h(t.tree);
  h.mutate(t.tree.chmod(t.b, kClosed), 100, 200);
  h.lookup("a/b/c/f", 210, 300, 0, t.f);
  h.history().header.epsilon_ns = 20;
  EXPECT_EQ(h.check().violation_count, 0u);
  h.history().header.epsilon_ns = 5;
  EXPECT_EQ(h.check().violation_count, 1u);
}

TEST(Oracle, FailedMutationChangesNothing) {
  Chain t;
  Hist h(t.tree);
  h.mutate(t.tree.chmod(t.b, kClosed), 100, 200, EPERM);
  h.lookup("a/b/c/f", 300, 400, 0, t.f);
  EXPECT_EQ(h.check().violation_count, 0u);
}

TEST(Oracle, UnknownErrnoIsUnjudged) {
  Chain t;
  Hist h(t.tree);
  h.lookup("a/b/c/f", 10, 20, EIO);
  auto r = h.check();
  EXPECT_EQ(r.violation_count, 0u);
  EXPECT_EQ(r.unjudged, 1u);
}

TEST(Oracle, MalformedHistoryIsAnError) {
  Chain t;
  Hist h(t.tree);
  h.lookup("a/b/c/f", 10, 20, 0, t.f);
  h.history().lookups[0].query = 7;
  EXPECT_THROW(h.check(), HistoryError);
  Hist g(t.tree);
  g.mutate(t.tree.chmod(t.b, kClosed), 100, 200);
  g.history().mutations[0].effect = 3;
  EXPECT_THROW(g.check(), HistoryError);
}

TEST(Oracle, ReportsAreCappedButCounted) {
  Chain t;
  Hist h(t.tree);
  h.mutate(t.tree.chmod(t.b, kClosed), 100, 200);
  for (int i = 0; i < 80; ++i) h.lookup("a/b/c/f", 300 + i, 301 + i, 0, t.f);
  auto r = h.check();
  EXPECT_EQ(r.violation_count, 80u);
  EXPECT_EQ(r.violations.size(), 50u);
}

}  // namespace
}  // namespace leapfrog
