// Issue 19 §1: inputs at the edges of the format, where the oracle once gave
// a verdict it had not earned. Each test failed before its fix.

#include <gtest/gtest.h>

#include <cerrno>
#include <sstream>
#include <streambuf>
#include <string>

#include "scenarios/history_io.h"
#include "scenarios/oracle.h"
#include "scenarios/tree_model.h"

namespace leapfrog {
namespace {

const Attr kOpen{0755, 0, 0, {}};

// A header line (no newline) for a tree root/a/f with dev 5, ino 10 + id,
// a mutator (actor 0) and an observer (actor 1) of uid `observer_uid`.
std::string header(uint64_t observer_uid = 65534, const std::string& extra = "") {
  return R"({"format":"leapfrog-history","version":1,"epsilon_ns":0,"base_dev":5,)"
         R"("nodes":[{"id":0,"kind":"dir","dev":5,"ino":10},{"id":1,"kind":"dir","name":"a","dev":5,"ino":11},)"
         R"({"id":2,"kind":"file","name":"a/f","dev":5,"ino":12}],)"
         R"("initial":[{"object":{"kind":"attr","node":0},"value":{"mode":493,"uid":0,"gid":0}},)"
         R"({"object":{"kind":"attr","node":1},"value":{"mode":493,"uid":0,"gid":0}},)"
         R"({"object":{"kind":"attr","node":2},"value":{"mode":420,"uid":0,"gid":0}},)"
         R"({"object":{"kind":"entry","dir":0,"name":"a"},"value":{"node":1}},)"
         R"({"object":{"kind":"entry","dir":1,"name":"f"},"value":{"node":2}}],)"
         R"("actors":[{"id":0,"role":"mutator","uid":0,"gid":0},{"id":1,"role":"observer","uid":)" +
         std::to_string(observer_uid) + R"(,"gid":65534}])" + extra + "}";
}

std::string chmod_a(TimeNs invoke, TimeNs complete, int mode) {
  return R"({"type":"mutate","actor":0,"op":"chmod","invoke":)" + std::to_string(invoke) +
         R"(,"complete":)" + std::to_string(complete) +
         R"(,"result":"ok","sets":[{"object":{"kind":"attr","node":1},"value":{"mode":)" +
         std::to_string(mode) + R"(,"uid":0,"gid":0}}]})";
}

std::string lookup(const std::string& invoke, const std::string& complete,
                   const std::string& result, const std::string& path = "a/f", int access = 0) {
  std::string s = R"({"type":"lookup","actor":1,"op":"stat","start":0,"path":")" + path +
                  R"(","access":)" + std::to_string(access) + R"(,"invoke":)" + invoke +
                  R"(,"complete":)" + complete + R"(,"result":")" + result + "\"";
  if (result == "ok") s += R"(,"dev":5,"ino":12)";
  return s + "}";
}

History parse(const std::string& text, const ReadLimits& limits = {}) {
  std::istringstream in(text);
  return read_history(in, limits);
}

// The message of the HistoryFormatError `text` gives ("" if it parses).
std::string format_error(const std::string& text, const ReadLimits& limits = {}) {
  try {
    parse(text, limits);
  } catch (const HistoryFormatError& e) {
    return e.what();
  }
  return "";
}

#define EXPECT_REFUSED(text, want)                         \
  do {                                                     \
    const std::string err_ = format_error(text);           \
    EXPECT_NE(err_.find(want), std::string::npos) << err_; \
  } while (0)

// §1.1: two chmods of one directory whose windows overlap could have taken
// effect in either order; judging them in invoke order gave a false
// stale-deny. Refused, naming both lines.
TEST(OracleEdges, OverlappingMutationsOfOneObjectAreRefused) {
  const std::string text = header() + "\n" + chmod_a(100, 500, 448) + "\n" +
                           chmod_a(200, 300, 493) + "\n" + lookup("600", "700", "EACCES") + "\n";
  EXPECT_REFUSED(text, "line 2 and line 3: mutations of attr(node 1) overlap in time");
  // Touching windows are sequential: accepted.
  const History h = parse(header() + "\n" + chmod_a(100, 200, 448) + "\n" + chmod_a(200, 300, 493) +
                          "\n" + lookup("600", "700", "ok") + "\n");
  EXPECT_EQ(check_history(h).violation_count, 0u);
  // A failed mutation changes nothing, so it overlaps nothing.
  std::string failed = chmod_a(150, 250, 448);
  failed.replace(failed.find("\"ok\""), 4, "\"EPERM\"");
  EXPECT_EQ(format_error(header() + "\n" + chmod_a(100, 200, 448) + "\n" + failed + "\n"), "");

  // The oracle refuses it too, for histories that never were a file.
  History bad = h;
  bad.mutations[1].invoke = 150;
  EXPECT_THROW(check_history(bad), HistoryError);
}

// §1.2: times are integers within ±2^60 ns; beyond, they met the oracle's
// sentinels (every lookup flagged) or wrapped around.
TEST(OracleEdges, TimesOutsideTheRangeAreRefused) {
  const std::string h = header() + "\n";
  EXPECT_REFUSED(h + lookup("2305843009213693952", "2305843009213693953", "ok"),
                 "line 2: field \"invoke\"");
  EXPECT_REFUSED(h + lookup("100", "2305843009213693952", "ok"),
                 "is out of range, want an integer in [-2^60, 2^60]");
  EXPECT_REFUSED(h + lookup("-4611686018427387904", "100", "ok"), "line 2: field \"invoke\"");
  EXPECT_REFUSED(h + lookup("9223372036854775808", "9223372036854775808", "ok"),
                 "is out of range, want an integer in [-2^60, 2^60] ns");
  EXPECT_REFUSED(h + lookup("100", "18446744073709551615", "ok"),
                 "is out of range, want an integer in [-2^60, 2^60] ns");
  EXPECT_REFUSED(h + lookup("100.5", "200", "ok"),
                 "line 2: field \"invoke\" = 100.5 is out of range");
  EXPECT_REFUSED(h + lookup("1e3", "2000", "ok"), "want an integer");
  // The edges themselves are judged, and judged legal.
  const History edge = parse(h + lookup("1152921504606846975", "1152921504606846976", "ok") + "\n" +
                             lookup("-1152921504606846976", "-1152921504606846975", "ok") + "\n");
  const CheckResult r = check_history(edge);
  EXPECT_EQ(r.lookups_checked, 2u);
  EXPECT_EQ(r.violation_count, 0u);
  // The oracle refuses them as well.
  History far = edge;
  far.lookups[0].invoke = kTimeMax;
  far.lookups[0].complete = kTimeMax;
  EXPECT_THROW(check_history(far), HistoryError);
  // Other integer fields do not wrap either.
  EXPECT_REFUSED(header(4294967296) + "\n",
                 "line 1: field \"uid\" must be an integer in [0, 4294967295]");
}

// §1.3: epsilon_ns is at most 2^58; INT64_MAX overflowed into a false
// stale-deny.
TEST(OracleEdges, EpsilonIsBounded) {
  std::string h = header();
  h.replace(h.find("\"epsilon_ns\":0"), 14, "\"epsilon_ns\":9223372036854775807");
  EXPECT_REFUSED(h + "\n" + lookup("100", "200", "EACCES"),
                 "line 1: \"epsilon_ns\" = 9223372036854775807 is out of range");
  History ok = parse(header() + "\n" + lookup("100", "200", "ok") + "\n");
  ok.header.epsilon_ns = kMaxEpsilonNs;  // the largest allowed still judges
  EXPECT_EQ(check_history(ok).violation_count, 0u);
  ok.header.epsilon_ns = kMaxEpsilonNs + 1;
  EXPECT_THROW(check_history(ok), HistoryError);
}

// §1.4: uid 0 searches every directory and reads every file (DAC override);
// it execs a file only if some x bit is set.
TEST(OracleEdges, RootObserverHasTheDacOverride) {
  // Directory a becomes 0700 owned by uid 1000: root still passes it.
  std::string mutation = chmod_a(100, 200, 448);
  mutation.replace(mutation.find("\"uid\":0"), 7, "\"uid\":1000");
  const std::string body = "\n" + mutation + "\n" + lookup("300", "400", "ok", "a/f", 4) + "\n";
  CheckResult r = check_history(parse(header(0) + body));
  EXPECT_EQ(r.lookups_checked, 1u);
  EXPECT_EQ(r.violation_count, 0u) << (r.violations.empty() ? "" : r.violations[0].expected);
  // The positive control: nobody would have been denied.
  r = check_history(parse(header(65534) + body));
  EXPECT_EQ(r.violation_count, 1u);
  EXPECT_EQ(r.by_kind[static_cast<size_t>(ViolationKind::StaleGrant)], 1u);

  // a/f is 0644: no x bit, so root's exec is denied and a success is a stale-grant.
  const std::string exec_ok = "\n" + lookup("300", "400", "ok", "a/f", 1) + "\n";
  r = check_history(parse(header(0) + exec_ok));
  EXPECT_EQ(r.by_kind[static_cast<size_t>(ViolationKind::StaleGrant)], 1u);
  EXPECT_EQ(check_history(parse(header(0) + "\n" + lookup("300", "400", "EACCES", "a/f", 1) + "\n"))
                .violation_count,
            0u);
  // With any x bit (0601: other may exec) root execs it.
  std::string with_x = header(0);
  with_x.replace(with_x.find("\"mode\":420"), 10, "\"mode\":385");
  EXPECT_EQ(check_history(parse(with_x + exec_ok)).violation_count, 0u);
}

// A chain of `levels` directories in which every entry may name either of
// two directories during [10, 20]: 2^levels walks, but 2 nodes a level.
History branching_history(int levels) {
  TreeModel tree(kOpen);
  std::vector<NodeId> a{tree.root()}, b{tree.root()};
  for (int i = 1; i <= levels; ++i) {
    a.push_back(tree.add_detached(NodeKind::Dir, "a" + std::to_string(i), kOpen));
    b.push_back(tree.add_detached(NodeKind::Dir, "b" + std::to_string(i), kOpen));
  }
  const NodeId fa = tree.add_file(a[levels], "f", Attr{0644, 0, 0, {}});
  const NodeId fb = tree.add_file(b[levels], "f", Attr{0644, 0, 0, {}});
  const NodeId stray = tree.add_detached(NodeKind::File, "stray", Attr{0644, 0, 0, {}});
  for (const auto& n : tree.nodes()) tree.set_identity(n.id, NodeIdentity{5, 100 + n.id, false});
  History h;
  // Entries "n" of level i-1 name a[i] initially, then b[i].
  std::vector<Effect> effects;
  for (int i = 1; i <= levels; ++i) {
    for (NodeId dir :
         i == 1 ? std::vector<NodeId>{a[0]} : std::vector<NodeId>{a[i - 1], b[i - 1]}) {
      Effect e{"rename", {ObjectSet{ObjectKey{ObjectKind::Entry, dir, "n"}, Value{{}, b[i]}}}};
      h.header.initial.push_back(
          ObjectSet{ObjectKey{ObjectKind::Entry, dir, "n"}, Value{{}, a[i]}});
      h.effects.push_back(e);
    }
  }
  std::vector<ObjectSet> initial = h.header.initial;
  tree.fill_header(h.header);
  h.header.initial.insert(h.header.initial.end(), initial.begin(), initial.end());
  h.header.base_dev = 5;
  h.header.actors = {Actor{0, "mutator", Cred{0, 0, {}}, ""},
                     Actor{1, "observer", Cred{65534, 65534, {}}, ""}};
  for (uint32_t e = 0; e < h.effects.size(); ++e)
    h.mutations.push_back(MutationRecord{0, e, 10, 20, 0, 0});
  Query q{"stat", tree.root(), {}, 0, true};
  for (int i = 0; i < levels; ++i) q.path.push_back("n");
  q.path.push_back("f");
  h.queries.push_back(q);
  h.lookups.push_back(LookupRecord{1, 0, 0, 100, 0, 0, 5, 100 + fb});     // legal
  h.lookups.push_back(LookupRecord{1, 0, 0, 100, 0, 0, 5, 100 + stray});  // certainly illegal
  (void)fa;
  return h;
}

// §1.5: the walk explores each (node, components left, time) once, so 2^20
// branches that meet again stay cheap; a budget that is still hit says so and
// is never a pass.
TEST(OracleEdges, BranchingWalksAreJudged) {
  const History h = branching_history(20);
  CheckResult r = check_history(h);
  EXPECT_EQ(r.unjudged, 0u);
  EXPECT_EQ(r.over_budget, 0u);
  EXPECT_EQ(r.lookups_checked, 2u);
  ASSERT_EQ(r.violation_count, 1u);
  EXPECT_EQ(r.violations[0].record, 1u);
  EXPECT_EQ(r.by_kind[static_cast<size_t>(ViolationKind::StaleEntry)], 1u);
  EXPECT_LT(r.steps_checked, 2000u);
  EXPECT_EQ(unearned_pass_reason(r), "");

  // The positive control: a tiny budget is hit, and said so first.
  CheckOptions tight;
  tight.max_expansions = 10;
  r = check_history(h, tight);
  EXPECT_EQ(r.over_budget, 2u);
  EXPECT_EQ(r.unjudged, 2u);
  EXPECT_EQ(r.violation_count, 0u);
  ASSERT_FALSE(r.notes.empty());
  EXPECT_EQ(r.notes[0].rfind("NOT JUDGED: 2 lookups exceeded the search budget", 0), 0u)
      << r.notes[0];
  EXPECT_NE(unearned_pass_reason(r).find("search budget"), std::string::npos);
}

// An input stream that never ends: /dev/zero without the device.
class Zeros : public std::streambuf {
 public:
  Zeros(char c) { buf_.assign(4096, c); }

 protected:
  int_type underflow() override {
    setg(buf_.data(), buf_.data(), buf_.data() + buf_.size());
    return traits_type::to_int_type(buf_[0]);
  }

 private:
  std::string buf_;
};

// §1.6: a header and nothing else is not a pass; input that never ends is
// refused at the line or size limit.
TEST(OracleEdges, NothingJudgedIsNoPassAndEndlessInputIsRefused) {
  const CheckResult empty = check_history(parse(header() + "\n"));
  EXPECT_EQ(empty.violation_count, 0u);
  EXPECT_EQ(unearned_pass_reason(empty),
            "the history holds no lookup or offset operation to judge");
  // Only unjudged lookups (an errno outside the model): not a pass either.
  const CheckResult unjudged =
      check_history(parse(header() + "\n" + lookup("1", "2", "EIO") + "\n"));
  EXPECT_EQ(unearned_pass_reason(unjudged), "no operation could be judged (1 unjudged)");
  // One judged lookup earns it.
  EXPECT_EQ(
      unearned_pass_reason(check_history(parse(header() + "\n" + lookup("1", "2", "ok") + "\n"))),
      "");
  // The verdict live runs and `check` both take from it.
  std::string why;
  EXPECT_EQ(earned_verdict(empty, why), "inconclusive");
  EXPECT_EQ(why, "the history holds no lookup or offset operation to judge");
  why.clear();
  EXPECT_EQ(
      earned_verdict(check_history(parse(header() + "\n" + lookup("1", "2", "ok") + "\n")), why),
      "pass");
  EXPECT_EQ(why, "");
  CheckResult budget = unjudged;
  budget.lookups_checked = 5;
  budget.over_budget = 1;
  EXPECT_EQ(earned_verdict(budget, why), "inconclusive");
  budget.violation_count = 1;  // a violation found stands, whatever else went unjudged
  EXPECT_EQ(earned_verdict(budget, why), "violation");

  ReadLimits limits;
  limits.max_line_bytes = 1 << 20;
  limits.max_bytes = 8 << 20;
  Zeros zeros('\0');
  std::istream endless_line(&zeros);
  try {
    read_history(endless_line, limits);
    FAIL() << "read an endless line";
  } catch (const HistoryFormatError& e) {
    EXPECT_NE(std::string(e.what()).find("line 1: longer than 1048576 bytes"), std::string::npos)
        << e.what();
  }
  Zeros newlines('\n');  // `yes ''`: endless blank lines
  std::istream endless_file(&newlines);
  try {
    read_history(endless_file, limits);
    FAIL() << "read an endless file";
  } catch (const HistoryFormatError& e) {
    EXPECT_NE(std::string(e.what()).find("input longer than 8388608 bytes"), std::string::npos)
        << e.what();
  }
  // A file of exactly the size limit is read.
  const std::string text = header() + "\n" + lookup("1", "2", "ok") + "\n";
  limits.max_bytes = text.size();
  EXPECT_EQ(parse(text, limits).lookups.size(), 1u);
  limits.max_bytes = text.size() - 1;
  EXPECT_NE(format_error(text, limits).find("the size limit"), std::string::npos);
}

// §1.7: no limit on path components (a walk was refused past 32).
TEST(OracleEdges, LongPathsAreJudged) {
  std::string path = "a";
  for (int i = 0; i < 100; ++i) path += "/.";
  path += "/f";
  const std::string body =
      "\n" + lookup("1", "2", "ok", path) + "\n" + lookup("1", "2", "ENOENT", path) + "\n";
  const CheckResult r = check_history(parse(header() + body));
  EXPECT_EQ(r.lookups_checked, 2u);
  EXPECT_EQ(r.violation_count, 1u);  // the ENOENT: every entry is present
  // Through a symlink whose target is longer than 32 components, too.
  TreeModel tree(kOpen);
  const NodeId a = tree.add_dir(tree.root(), "a", kOpen);
  const NodeId f = tree.add_file(a, "f", Attr{0644, 0, 0, {}});
  std::string target = "a";
  for (int i = 0; i < 50; ++i) target += "/.";
  tree.add_symlink(tree.root(), "l", target);
  for (const auto& n : tree.nodes()) tree.set_identity(n.id, NodeIdentity{5, 100 + n.id, false});
  History h;
  tree.fill_header(h.header);
  h.header.base_dev = 5;
  h.header.actors = {Actor{0, "observer", Cred{65534, 65534, {}}}};
  h.queries.push_back(Query{"stat", tree.root(), {"l", ".", "f"}, 0, true});
  h.lookups.push_back(LookupRecord{0, 0, 1, 2, 0, 0, 5, 100 + f});
  const CheckResult s = check_history(h);
  EXPECT_EQ(s.lookups_checked, 1u);
  EXPECT_EQ(s.violation_count, 0u);
}

// §1.8: every refusal names the line (here the header is line 2).
TEST(OracleEdges, HeaderErrorsNameTheLine) {
  auto with = [](const std::string& from, const std::string& to) {
    std::string h = header();
    const size_t at = h.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    if (at != std::string::npos) h.replace(at, from.size(), to);
    return "\n" + h + "\n";
  };
  EXPECT_REFUSED(with(R"("kind":"attr","node":1})", R"("kind":"attr","node":9})"),
                 "line 2: initial[1]: attr(node 9) refers to unknown node 9");
  EXPECT_REFUSED(with(R"("value":{"node":2})", R"("value":{"node":7})"),
                 "line 2: initial[4]: the value of entry(dir 1, \"f\") is unknown node 7");
  EXPECT_REFUSED(with(R"({"id":1,"kind":"dir")", R"({"id":2,"kind":"dir")"),
                 "line 2: nodes[1] has id 2, want 1");
  EXPECT_REFUSED(
      with(R"({"object":{"kind":"attr","node":1},"value":{"mode":493,"uid":0,"gid":0}},)", ""),
      "line 2: directory node 1 has no initial attr");
  EXPECT_REFUSED(with(R"({"object":{"kind":"attr","node":1},"value")",
                      R"({"object":{"kind":"attr","node":0},"value")"),
                 "line 2: initial[1]: initial value given twice for attr(node 0)");
  EXPECT_REFUSED(with(R"({"id":1,"role")", R"({"id":2,"role")"),
                 "line 2: actors[1] has id 2, want 1");
  EXPECT_REFUSED(
      with(R"({"id":2,"kind":"file","name":"a/f")", R"({"id":2,"kind":"symlink","target":"")"),
      "line 2: node 2: a symlink's \"target\" must not be empty");
  EXPECT_REFUSED(with(R"({"id":2,"kind":"file","name":"a/f")",
                      R"({"id":2,"kind":"symlink","target":"x","magic":9)"),
                 "line 2: node 2: magic link to unknown node 9");
  // Records: an unknown node in a mutation, an absolute lookup path.
  const std::string h = header() + "\n";
  std::string m = chmod_a(1, 2, 448);
  EXPECT_REFUSED(h + "\n" + m.replace(m.find("\"node\":1"), 8, "\"node\":5"),
                 "line 3: sets[0]: attr(node 5) refers to unknown node 5");
  EXPECT_REFUSED(
      h + R"({"type":"mutate","actor":0,"op":"rename","invoke":1,"complete":2,"result":"ok",)"
          R"("sets":[{"object":{"kind":"parent","node":1},"value":{"node":0}}]})",
      "line 2: sets[0]: parent(node 1) has no initial value");
  EXPECT_REFUSED(h + lookup("1", "2", "ok", "/a/f"), "line 2: path \"/a/f\" is absolute");
}

// ".." is of a directory and leads to one, and entries live in directories:
// a history that says otherwise describes a state no kernel can be in, so
// it has no right answer and is refused. The differential fuzzer found one
// (testdata/fuzz/differential_fuzz/dotdot-to-a-symlink): ".." of n0 led to
// a symlink whose target is "..", and the oracle and the naive judge gave
// different verdicts for the ELOOP it observed.
TEST(OracleEdges, DotdotAndEntriesNameDirectories) {
  auto with = [](const std::string& extra_initial) {
    std::string h = header();
    const std::string end = R"({"object":{"kind":"entry","dir":1,"name":"f"},"value":{"node":2}})";
    h.replace(h.find(end), end.size(), end + "," + extra_initial);
    return h + "\n";
  };
  EXPECT_REFUSED(with(R"({"object":{"kind":"parent","node":1},"value":{"node":2}})"),
                 "line 1: initial[5]: parent(node 1) leads to node 2, which is not a directory");
  EXPECT_REFUSED(with(R"({"object":{"kind":"parent","node":2},"value":{"node":1}})"),
                 "line 1: initial[5]: parent(node 2) is of node 2, which is not a directory");
  EXPECT_REFUSED(with(R"({"object":{"kind":"entry","dir":2,"name":"x"},"value":{"node":1}})"),
                 "line 1: initial[5]: entry(dir 2, \"x\") is of node 2, which is not a directory");
  // In a mutation too.
  const std::string ok = with(R"({"object":{"kind":"parent","node":1},"value":{"node":0}})");
  EXPECT_EQ(parse(ok).header.initial.size(), 6u);
  EXPECT_REFUSED(
      ok + R"({"type":"mutate","actor":0,"op":"rename","invoke":1,"complete":2,"result":"ok",)"
           R"("sets":[{"object":{"kind":"parent","node":1},"value":{"node":2}}]})",
      "line 2: sets[0]: parent(node 1) leads to node 2, which is not a directory");
}

}  // namespace
}  // namespace leapfrog
