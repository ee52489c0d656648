// Oracle unit tests of openat2(2) walks on hand-built histories: each RESOLVE_
// flag's EXDEV / ELOOP / EAGAIN rule, legal and illegal, and escapes.

#include <gtest/gtest.h>

#include <cerrno>
#include <fstream>
#include <sstream>

#include "scenarios/history_io.h"
#include "scenarios/oracle.h"
#include "scenarios/tree_model.h"

namespace leapfrog {
namespace {

const Attr kOpen{0755, 0, 0, {}};
const Attr kClosed{0700, 0, 0, {}};
const Attr kFile{0644, 0, 0, {}};

// beneath-lookup's tree: the top w with the lookup root r and an outside
// folder o; r/a/m/f, r/a/s, o/s, o/f; r/l -> a/m (swappable to "../o" and
// "/a/m"); a tmpfs mounted on r/mnt holding f; /proc/self/fd/3 -> r.
struct Tree {
  TreeModel t{kOpen};
  NodeId r, o, a, m, mnt, mf, as, os, of, l, l_out, l_abs, fsroot, fsf, procfd;
  Tree() {
    r = t.add_dir(t.root(), "r", kOpen);
    o = t.add_dir(t.root(), "o", kOpen);
    a = t.add_dir(r, "a", kOpen);
    m = t.add_dir(a, "m", kOpen);
    mnt = t.add_dir(r, "mnt", kOpen);
    mf = t.add_file(m, "f", kFile);
    as = t.add_file(a, "s", kFile);
    os = t.add_file(o, "s", kFile);
    of = t.add_file(o, "f", kFile);
    l = t.add_symlink(r, "l", "a/m");
    l_out = t.add_detached(NodeKind::Symlink, "l->../o", kOpen, "../o");
    l_abs = t.add_detached(NodeKind::Symlink, "l->/a/m", kOpen, "/a/m");
    t.declare_absent(o, "m");
    t.declare_absent(r, "o");
    fsroot = t.add_detached(NodeKind::Dir, "tmpfs", kOpen);
    fsf = t.add_file(fsroot, "f", kFile);
    t.declare_mounted(mnt, fsroot);
    procfd = t.add_detached(NodeKind::Dir, "/proc/self/fd", Attr{0555, 0, 0, {}});
    t.set_magic(t.add_symlink(procfd, "3", "/proc/self/fd/3"), r);
    for (const auto& n : t.nodes()) t.set_identity(n.id, NodeIdentity{1, 100 + n.id, false});
    t.set_identity(fsroot, NodeIdentity{0, 0, true});
    t.set_identity(fsf, NodeIdentity{0, 0, true});
  }
  Effect move_out() const { return t.rename(m, a, "m", o, "m"); }
  Effect swap(NodeId link) const {
    return Effect{"rename", {ObjectSet{ObjectKey{ObjectKind::Entry, r, "l"}, Value{{}, link}}}};
  }
  Effect chmod_a() const { return t.chmod(a, kClosed); }
};

class Hist {
 public:
  explicit Hist(Tree& tree) : tree_(tree) {
    h_.header.actors = {Actor{0, "mutator", Cred{0, 0, {}}},
                        Actor{1, "observer", Cred{65534, 65534, {}}}};
    h_.header.base_dev = 1;
  }
  void mutate(const Effect& e, TimeNs inv, TimeNs comp) {
    h_.effects.push_back(e);
    h_.mutations.push_back(MutationRecord{0, uint32_t(h_.effects.size() - 1), inv, comp, 0, 0});
  }
  // openat2 from a dirfd of r (or `start`) with `resolve`; `reached` on success.
  void open2(const std::string& path, uint8_t resolve, TimeNs inv, TimeNs comp, int err,
             NodeId reached = kNoNode, NodeId start = kNoNode) {
    Query q;
    q.op = resolve & kResolveCached ? "openat2-cached" : "openat2";
    q.start = start == kNoNode ? tree_.r : start;
    q.final_access = kMayRead;
    q.openat2 = true;
    q.resolve = resolve;
    std::istringstream in(path);
    for (std::string c; std::getline(in, c, '/');) q.path.push_back(c);
    h_.queries.push_back(q);
    LookupRecord rec{1, uint32_t(h_.queries.size() - 1), inv, comp, err, 0, 0, 0};
    if (err == 0 && reached != kNoNode) {
      const auto& id = tree_.t.nodes()[reached].identity;
      rec.dev = id.any_other_dev ? 99 : id.dev;
      rec.ino = id.ino;
    }
    h_.lookups.push_back(rec);
  }
  CheckResult check() {
    tree_.t.fill_header(h_.header);
    return check_history(h_);
  }
  History& history() {
    tree_.t.fill_header(h_.header);
    return h_;
  }

 private:
  Tree& tree_;
  History h_;
};

uint64_t kind_count(const CheckResult& r, ViolationKind k) {
  return r.by_kind[static_cast<size_t>(k)];
}

// ---- RESOLVE_BENEATH --------------------------------------------------------

TEST(OracleOpenat2, BeneathDotdotAtTheRootIsExdev) {
  Tree t;
  Hist h(t);
  h.open2("../o/f", kResolveBeneath, 10, 20, EXDEV);
  h.open2("../o/f", 0, 30, 40, 0, t.of);  // a plain walk climbs out
  h.open2("../o/f", 0, 50, 60, EXDEV);    // ...and never gives EXDEV
  h.open2("../o/f", kResolveBeneath, 70, 80, ENOENT);
  auto r = h.check();
  EXPECT_EQ(r.lookups_checked, 4u);
  EXPECT_EQ(r.violation_count, 2u);
  EXPECT_EQ(kind_count(r, ViolationKind::StaleEntry), 2u);
  ASSERT_EQ(r.violations.size(), 2u);
  EXPECT_EQ(r.violations[0].record, 2u);
  EXPECT_NE(r.violations[1].expected.find("EXDEV"), std::string::npos) << r.violations[1].expected;
}

TEST(OracleOpenat2, BeneathAbsoluteSymlinkIsExdev) {
  Tree t;
  Hist h(t);
  h.mutate(t.swap(t.l_abs), 100, 200);
  h.open2("l/f", kResolveBeneath, 300, 400, EXDEV);
  h.open2("l/f", kResolveBeneath, 500, 600, 0, t.mf);  // only IN_ROOT resolves "/" from the root
  h.open2("l/f", kResolveBeneath, 10, 20, EXDEV);      // still l -> a/m
  auto r = h.check();
  EXPECT_EQ(r.violation_count, 2u);
  EXPECT_EQ(r.violations.at(0).record, 1u);
  EXPECT_EQ(r.violations.at(1).record, 2u);
}

// ---- RESOLVE_IN_ROOT --------------------------------------------------------

TEST(OracleOpenat2, InRootStaysAtTheRootAndResolvesAbsoluteLinksFromIt) {
  Tree t;
  Hist h(t);
  h.open2("../o/f", kResolveInRoot, 10, 20, ENOENT);  // r/o/f
  h.open2("../o/f", kResolveInRoot, 30, 40, EXDEV);   // illegal: nothing left the root
  h.mutate(t.swap(t.l_abs), 100, 200);
  h.open2("l/f", kResolveInRoot, 300, 400, 0, t.mf);  // /a/m/f from r
  h.open2("l/f", kResolveInRoot, 500, 600, EXDEV);    // illegal
  h.open2("l/f", 0, 700, 800, ENOENT);                // plain: from the real "/": not judged
  auto r = h.check();
  EXPECT_EQ(r.violation_count, 2u);
  EXPECT_EQ(r.unjudged, 1u);
  EXPECT_EQ(r.violations.at(0).record, 1u);
  EXPECT_EQ(r.violations.at(1).record, 3u);
}

// ---- RESOLVE_NO_XDEV, RESOLVE_NO_SYMLINKS, RESOLVE_NO_MAGICLINKS ------------

TEST(OracleOpenat2, NoXdevRefusesEveryMountCrossing) {
  Tree t;
  Hist h(t);
  h.open2("mnt/f", kResolveNoXdev, 10, 20, EXDEV);
  h.open2("mnt/f", 0, 30, 40, 0, t.fsf);
  h.open2("mnt/f", kResolveNoXdev, 50, 60, 0, t.fsf);  // illegal: crossed
  h.open2("mnt/f", kResolveBeneath, 70, 80, EXDEV);    // illegal: only NO_XDEV refuses it
  h.open2("3/a/m/f", kResolveNoXdev, 90, 95, EXDEV, kNoNode,
          t.procfd);  // a magic link leaves /proc
  auto r = h.check();
  EXPECT_EQ(r.violation_count, 2u);
  EXPECT_EQ(r.violations.at(0).record, 2u);
  EXPECT_EQ(r.violations.at(1).record, 3u);
}

TEST(OracleOpenat2, NoSymlinksGivesEloopForAnySymlink) {
  Tree t;
  Hist h(t);
  h.open2("l/f", kResolveNoSymlinks, 10, 20, ELOOP);
  h.open2("l/f", kResolveNoSymlinks, 30, 40, 0, t.mf);  // illegal
  h.open2("a/m/f", kResolveNoSymlinks, 50, 60, ELOOP);  // illegal: no symlink on the path
  h.open2("3/a/m/f", kResolveNoSymlinks, 70, 80, ELOOP, kNoNode, t.procfd);
  auto r = h.check();
  EXPECT_EQ(r.violation_count, 2u);
  EXPECT_EQ(r.violations.at(0).record, 1u);
  EXPECT_EQ(r.violations.at(1).record, 2u);
}

TEST(OracleOpenat2, NoMagiclinksGivesEloopOnlyForMagicLinks) {
  Tree t;
  Hist h(t);
  h.open2("3/a/m/f", kResolveNoMagiclinks, 10, 20, ELOOP, kNoNode, t.procfd);
  h.open2("3/a/m/f", 0, 30, 40, 0, t.mf, t.procfd);                     // a plain walk jumps to r
  h.open2("3/a/m/f", kResolveNoMagiclinks, 50, 60, 0, t.mf, t.procfd);  // illegal
  h.open2("l/f", kResolveNoMagiclinks, 70, 80, 0, t.mf);                // an ordinary symlink
  h.open2("l/f", kResolveNoMagiclinks, 90, 95, ELOOP);                  // illegal
  auto r = h.check();
  EXPECT_EQ(r.violation_count, 2u);
  EXPECT_EQ(r.violations.at(0).record, 2u);
  EXPECT_EQ(r.violations.at(1).record, 4u);
}

// ---- EAGAIN and EXDEV from the scoped walks' checks -------------------------

TEST(OracleOpenat2, EagainNeedsAScopedDotdotOrACachedWalk) {
  Tree t;
  Hist h(t);
  h.mutate(t.move_out(), 100, 200);
  h.open2("a/m/../s", kResolveBeneath, 150, 250, EAGAIN);  // a rename during the walk
  h.open2("../o/f", kResolveInRoot, 500, 600, EAGAIN);     // legal, but no rename of the run: noted
  h.open2("a/m/f", kResolveBeneath, 150, 250, EAGAIN);     // illegal: no ".."
  h.open2("a/m/../s", kResolveNoXdev, 150, 250, EAGAIN);   // illegal: not scoped
  h.open2("a/m/f", kResolveCached, 700, 800, EAGAIN);      // the lockless walk may give up
  h.open2("a/m/f", kResolveCached | kResolveBeneath, 900, 950, EAGAIN);
  auto r = h.check();
  EXPECT_EQ(r.lookups_checked, 6u);
  EXPECT_EQ(r.violation_count, 2u);
  EXPECT_EQ(r.violations.at(0).record, 2u);
  EXPECT_EQ(r.violations.at(1).record, 3u);
  bool noted = false;
  for (const auto& n : r.notes)
    noted = noted || n.find("1 scoped openat2 walks gave EAGAIN") != std::string::npos;
  EXPECT_TRUE(noted);
}

TEST(OracleOpenat2, ScopedWalkEndingOutsideTheRootIsExdev) {
  Tree t;
  Hist h(t);
  h.mutate(t.move_out(), 100, 200);
  h.open2("a/m/f", kResolveBeneath, 50, 150, EXDEV);  // m moved out before complete_walk
  h.open2("a/m/f", kResolveInRoot, 50, 150, 0, t.mf);
  h.open2("a/m/f", kResolveBeneath, 10, 20, EXDEV);    // illegal: m was inside throughout
  h.open2("a/m/f", kResolveBeneath, 300, 400, EXDEV);  // illegal: a/m is gone: ENOENT
  h.open2("a/m/f", 0, 10, 20, EXDEV);                  // openat2 without flags: judged, illegal
  auto r = h.check();
  EXPECT_EQ(r.violation_count, 3u);
  EXPECT_EQ(r.violations.at(0).record, 2u);
  EXPECT_EQ(r.violations.at(1).record, 3u);
  EXPECT_EQ(r.violations.at(2).record, 4u);
}

TEST(OracleOpenat2, ExdevAndEagainOfOtherCallsStayUnjudged) {
  Tree t;
  History h;
  h.header.actors = {Actor{0, "mutator", Cred{0, 0, {}}},
                     Actor{1, "observer", Cred{65534, 65534, {}}}};
  t.t.fill_header(h.header);
  Query q;
  q.op = "stat";
  q.start = t.r;
  q.path = {"a", "m", "f"};
  h.queries.push_back(q);
  h.lookups.push_back(LookupRecord{1, 0, 10, 20, EXDEV, 0, 0, 0});
  h.lookups.push_back(LookupRecord{1, 0, 30, 40, EAGAIN, 0, 0, 0});
  const auto r = check_history(h);
  EXPECT_EQ(r.unjudged, 2u);
  EXPECT_EQ(r.violation_count, 0u);
}

// ---- escape -----------------------------------------------------------------

TEST(OracleOpenat2, RenameAttackThatSucceedsOutsideTheRootIsAnEscape) {
  Tree t;
  Hist h(t);
  h.open2("a/m/../s", kResolveBeneath, 10, 20, 0, t.as);
  h.mutate(t.move_out(), 100, 200);
  h.open2("a/m/../s", kResolveBeneath, 150, 250, 0, t.os);  // ".." of m, moved to o: o/s
  h.open2("a/m/../s", 0, 150, 250, 0, t.os);                // without a scope: legal
  h.open2("a/m/../s", kResolveInRoot, 150, 250, 0, t.os);
  auto r = h.check();
  EXPECT_EQ(r.violation_count, 2u);
  EXPECT_EQ(kind_count(r, ViolationKind::Escape), 2u);
  const Violation& v = r.violations.at(0);
  EXPECT_EQ(v.kind, ViolationKind::Escape);
  EXPECT_STREQ(to_string(v.kind), "escape");
  EXPECT_EQ(v.record, 1u);
  EXPECT_EQ(v.object, "parent(o)");
  EXPECT_FALSE(v.steps.empty());
  EXPECT_NE(v.observed.find("o/s"), std::string::npos) << v.observed;
}

TEST(OracleOpenat2, ClimbingAboveTheRootIsAnEscape) {
  Tree t;
  Hist h(t);
  h.open2("../o/f", kResolveBeneath, 10, 20, 0, t.of);
  h.open2("../o/f", kResolveInRoot, 30, 40, 0, t.of);
  h.mutate(t.swap(t.l_out), 100, 200);
  h.open2("l/f", kResolveBeneath, 300, 400, 0, t.of);
  h.open2("l/f", kResolveBeneath, 300, 400, 0, t.mf);  // not an escape: l -> a/m is over
  auto r = h.check();
  EXPECT_EQ(r.violation_count, 4u);
  EXPECT_EQ(kind_count(r, ViolationKind::Escape), 3u);
  EXPECT_EQ(kind_count(r, ViolationKind::StaleEntry), 1u);
}

// ---- RESOLVE_CACHED ---------------------------------------------------------

TEST(OracleOpenat2, CachedWalkViolationIsToldApart) {
  Tree t;
  Hist h(t);
  h.mutate(t.chmod_a(), 100, 200);
  h.open2("a/m/f", 0, 300, 400, EACCES);
  h.open2("a/m/f", kResolveCached, 300, 400, 0, t.mf);  // the fast path alone granted it
  auto r = h.check();
  ASSERT_EQ(r.violation_count, 1u);
  const Violation& v = r.violations.at(0);
  EXPECT_EQ(v.kind, ViolationKind::StaleGrant);
  EXPECT_EQ(v.op, "openat2-cached");
  EXPECT_NE(v.expected.find("RESOLVE_CACHED"), std::string::npos) << v.expected;
  bool noted = false;
  for (const auto& n : r.notes)
    noted = noted || n.find("RESOLVE_CACHED walks") != std::string::npos;
  EXPECT_TRUE(noted);
}

// ---- the history format -----------------------------------------------------

TEST(OracleOpenat2, ResolveFlagsAndMagicLinksRoundTrip) {
  Tree t;
  Hist h(t);
  h.open2("a/m/f", kResolveBeneath | kResolveNoXdev | kResolveCached, 10, 20, 0, t.mf);
  h.open2("3/a/m/f", 0, 30, 40, 0, t.mf, t.procfd);
  std::stringstream s;
  write_history(h.history(), s);
  EXPECT_NE(s.str().find(R"("resolve":["beneath","no-xdev","cached"])"), std::string::npos);
  EXPECT_NE(s.str().find(R"("resolve":[])"), std::string::npos);
  const History back = read_history(s);
  ASSERT_EQ(back.queries.size(), 2u);
  EXPECT_TRUE(back.queries[0].openat2);
  EXPECT_EQ(back.queries[0].resolve, kResolveBeneath | kResolveNoXdev | kResolveCached);
  EXPECT_TRUE(back.queries[1].openat2);
  EXPECT_EQ(back.queries[1].resolve, 0);
  EXPECT_EQ(back.header.nodes.at(t.l_abs).symlink_target, "/a/m");
  EXPECT_EQ(back.header.nodes.back().magic_target, t.r);
  EXPECT_EQ(check_history(back).violation_count, 0u);
  std::istringstream bad(
      s.str().substr(0, s.str().find('\n') + 1) +
      R"({"type":"lookup","actor":1,"op":"openat2","start":1,"path":"a","resolve":["upward"],)"
      R"("invoke":1,"complete":2,"result":"ok"})"
      "\n");
  EXPECT_THROW(read_history(bad), HistoryFormatError);
}

// ---- golden histories -------------------------------------------------------

CheckResult check_file(const std::string& name) {
  std::ifstream in(std::string(LEAPFROG_TESTDATA) + "/" + name);
  EXPECT_TRUE(in) << name;
  return check_history(read_history(in));
}

TEST(OracleOpenat2, GoldenLegalHistoryIsClean) {
  const auto r = check_file("openat2_legal.jsonl");
  EXPECT_EQ(r.violation_count, 0u);
  EXPECT_EQ(r.unjudged, 0u);
  EXPECT_EQ(r.lookups_checked, 14u);
}

TEST(OracleOpenat2, GoldenIllegalHistoryFiresEachRule) {
  const auto r = check_file("openat2_illegal.jsonl");
  EXPECT_EQ(r.lookups_checked, 9u);
  EXPECT_EQ(r.violation_count, 9u);
  EXPECT_EQ(kind_count(r, ViolationKind::StaleEntry), 8u);
  EXPECT_EQ(kind_count(r, ViolationKind::StaleGrant), 1u);
}

TEST(OracleOpenat2, GoldenEscapeHistoryIsAnEscape) {
  const auto r = check_file("escape.jsonl");
  EXPECT_EQ(r.violation_count, 1u);
  EXPECT_EQ(kind_count(r, ViolationKind::Escape), 1u);
}

}  // namespace
}  // namespace leapfrog
