// The JSON Lines history format: round trip, golden file, malformed input.

#include "scenarios/history_io.h"

#include <gtest/gtest.h>

#include <cerrno>
#include <fstream>
#include <sstream>

#include "scenarios/oracle.h"
#include "scenarios/tree_model.h"

namespace leapfrog {
namespace {

History sample() {
  TreeModel tree(Attr{0755, 0, 0, {}});
  NodeId a = tree.add_dir(tree.root(), "a", Attr{0755, 0, 0, {}});
  NodeId f = tree.add_file(a, "f", Attr{0644, 0, 0, {}});
  tree.add_symlink(tree.root(), "l", "a");
  Attr deny{0755, 0, 0, {AclEntry{AclEntry::Tag::User, 65534, 0}}};
  for (const auto& n : tree.nodes()) tree.set_identity(n.id, NodeIdentity{7, 50 + n.id, false});
  History h;
  tree.fill_header(h.header);
  h.header.scenario = "sample";
  h.header.seed = 42;
  h.header.base_dev = 7;
  h.header.actors = {Actor{0, "mutator", Cred{0, 0, {}}}, Actor{1, "observer", Cred{65534, 65534, {100}}}};
  h.effects.push_back(tree.chmod(a, deny));
  h.queries.push_back(Query{"stat", 0, {"l", "f"}, 0, true});
  h.mutations.push_back(MutationRecord{0, 0, 100, 200, 0, 1});
  h.lookups.push_back(LookupRecord{1, 0, 10, 20, 0, 0, 7, 50 + f});
  h.lookups.push_back(LookupRecord{1, 0, 300, 400, 0, 2, 7, 50 + f});  // stale-grant
  h.lookups.push_back(LookupRecord{1, 0, 300, 400, EACCES, 2, 0, 0});
  return h;
}

TEST(HistoryIo, RoundTripKeepsVerdict) {
  History h = sample();
  std::stringstream ss;
  write_history(h, ss);
  History back = read_history(ss);
  EXPECT_EQ(back.header.scenario, "sample");
  EXPECT_EQ(back.header.seed, 42u);
  EXPECT_EQ(back.header.nodes.size(), h.header.nodes.size());
  EXPECT_EQ(back.header.nodes[3].symlink_target, "a");
  EXPECT_EQ(back.header.actors[1].cred.groups, std::vector<uint32_t>{100});
  EXPECT_EQ(back.mutations.size(), 1u);
  EXPECT_EQ(back.lookups.size(), 3u);
  EXPECT_EQ(back.effects[0].sets[0].value.attr.acl.size(), 1u);
  auto a = check_history(h);
  auto b = check_history(back);
  EXPECT_EQ(a.violation_count, 1u);
  EXPECT_EQ(b.violation_count, a.violation_count);
  EXPECT_EQ(b.by_kind, a.by_kind);
  EXPECT_EQ(b.lookups_checked, a.lookups_checked);
}

TEST(HistoryIo, GoldenHandWrittenHistory) {
  std::ifstream in(std::string(LEAPFROG_TESTDATA) + "/stale_grant.jsonl");
  ASSERT_TRUE(in.good());
  History h = read_history(in);
  auto r = check_history(h);
  EXPECT_EQ(r.lookups_checked, 4u);
  ASSERT_EQ(r.violation_count, 1u);
  EXPECT_EQ(r.violations[0].kind, ViolationKind::StaleGrant);
  EXPECT_EQ(r.violations[0].invoke, 3000);
  EXPECT_EQ(r.violations[0].step, 2);
  EXPECT_EQ(r.violations[0].object, "attr(a)");
}

TEST(HistoryIo, ExecIdsRoundTrip) {
  std::ifstream in(std::string(LEAPFROG_TESTDATA) + "/exec_setid_illegal.jsonl");
  ASSERT_TRUE(in.good());
  History h = read_history(in);
  size_t with_ids = 0;
  for (const auto& l : h.lookups) with_ids += l.has_ids;
  EXPECT_EQ(with_ids, 6u);  // the successful execs; a failed one reports none
  std::stringstream ss;
  write_history(h, ss);
  History back = read_history(ss);
  ASSERT_EQ(back.lookups.size(), h.lookups.size());
  for (size_t i = 0; i < h.lookups.size(); ++i) {
    EXPECT_EQ(back.lookups[i].has_ids, h.lookups[i].has_ids) << i;
    EXPECT_EQ(back.lookups[i].euid, h.lookups[i].euid) << i;
    EXPECT_EQ(back.lookups[i].egid, h.lookups[i].egid) << i;
  }
  EXPECT_EQ(check_history(back).by_kind, check_history(h).by_kind);
}

void expect_error(const std::string& text, const std::string& want) {
  std::stringstream ss(text);
  try {
    read_history(ss);
    FAIL() << "no error for: " << text;
  } catch (const HistoryFormatError& e) {
    EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << e.what();
  }
}

TEST(HistoryIo, MalformedLinesNameTheLine) {
  std::stringstream ss;
  write_history(sample(), ss);
  const std::string good = ss.str();
  const std::string header = good.substr(0, good.find('\n') + 1);
  expect_error("", "line 1: empty history");
  expect_error("{\"format\":\"other\"}\n", "line 1: not a history header");
  expect_error(header + "\n{not json\n", "line 3: not valid JSON");
  expect_error(header + "{\"type\":\"lookup\"}\n", "line 2: missing field");
  expect_error(header + "{\"type\":\"bogus\",\"actor\":0,\"invoke\":1,\"complete\":2,\"result\":\"ok\"}\n",
               "line 2: unknown record type");
  expect_error(header + "{\"type\":\"lookup\",\"actor\":9,\"invoke\":1,\"complete\":2,\"result\":\"ok\"}\n",
               "line 2: actor 9 is not declared");
  expect_error(header + "{\"type\":\"lookup\",\"actor\":1,\"invoke\":5,\"complete\":2,\"result\":\"ok\"}\n",
               "line 2: \"complete\" is before \"invoke\"");
  expect_error(header + "{\"type\":\"lookup\",\"actor\":1,\"op\":\"stat\",\"start\":99,\"path\":\"a\",\"invoke\":1,"
                        "\"complete\":2,\"result\":\"ok\"}\n",
               "line 2: start node 99");
  expect_error(header + "[1,2]\n", "line 2: want a JSON object");
}

TEST(HistoryIo, ErrnoNames) {
  EXPECT_EQ(errno_name(0), "ok");
  EXPECT_EQ(errno_name(EACCES), "EACCES");
  EXPECT_EQ(errno_from_name("ENOENT"), ENOENT);
  EXPECT_EQ(errno_from_name("EWHATEVER"), -1);
}

}  // namespace
}  // namespace leapfrog
