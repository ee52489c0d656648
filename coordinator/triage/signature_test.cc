#include "coordinator/triage/signature.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <set>

#include "common/ktap/words.h"
#include "common/outcome/violation_proto.h"

namespace leapfrog::coord::triage {
namespace {

// The violation's typed detail from the JSON the run writes (the agent's
// detail_from_json); none when `text` is not a JSON object.
void set_detail(v1::Violation& v, const std::string& text) {
  const auto j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_object())
    *v.mutable_detail() = detail_from_json(j);
  else
    v.clear_detail();
}

v1::Violation chmod_violation(const std::string& op, int step, int64_t invoke) {
  v1::Violation v;
  v.set_kind(v1::VIOLATION_KIND_STALE_GRANT);
  v.set_op(op);
  v.set_path("d0/d1/d2/f");
  v.set_step(step);
  v.set_object("attr(d1)");
  v.set_invoke_ns(invoke);
  v.set_complete_ns(invoke + 500);
  set_detail(v, R"({"versions":[{"value":"mode=0700 uid=0 gid=0","from":10,"to":null}],)"
                R"("steps":[{"step":1},{"step":2},{"step":3}]})");
  return v;
}

TEST(Signature, IgnoresTiming) {
  const auto a = violation_signature("setattr-lookup", chmod_violation("stat", 3, 100));
  const auto b = violation_signature("setattr-lookup", chmod_violation("stat", 3, 987654));
  EXPECT_EQ(a.key, b.key);
  EXPECT_EQ(a.key, "violation|setattr-lookup|stale-grant|stat/chmod|step=3|via=names");
}

TEST(Signature, DiffersByOpStepKindAndScenario) {
  const auto base = violation_signature("setattr-lookup", chmod_violation("stat", 3, 1));
  EXPECT_NE(base.key, violation_signature("setattr-lookup", chmod_violation("open", 3, 1)).key);
  EXPECT_NE(base.key, violation_signature("setattr-lookup", chmod_violation("stat", 2, 1)).key);
  EXPECT_NE(base.key, violation_signature("chown-lookup", chmod_violation("stat", 3, 1)).key);
  auto deny = chmod_violation("stat", 3, 1);
  deny.set_kind(v1::VIOLATION_KIND_STALE_DENY);
  EXPECT_NE(base.key, violation_signature("setattr-lookup", deny).key);
}

TEST(Signature, NamesTheMutatorFromTheVersions) {
  auto v = chmod_violation("stat", 3, 1);
  set_detail(
      v, R"({"versions":[{"value":"mode=0755 uid=0 gid=0"},{"value":"mode=0700 uid=0 gid=0"}]})");
  EXPECT_NE(violation_signature("s", v).key.find("|stat/chmod|"), std::string::npos);
  set_detail(
      v,
      R"({"versions":[{"value":"mode=0075 uid=0 gid=0"},{"value":"mode=0075 uid=65534 gid=0"}]})");
  EXPECT_NE(violation_signature("s", v).key.find("|stat/chown|"), std::string::npos);
  set_detail(
      v,
      R"({"versions":[{"value":"mode=0755 uid=0 gid=0"},{"value":"mode=0755 uid=0 gid=0 user:65534:---"}]})");
  EXPECT_NE(violation_signature("s", v).key.find("|stat/setfacl|"), std::string::npos);
  v.set_object("entry(p1, \"x\")");
  EXPECT_NE(violation_signature("s", v).key.find("|stat/rename|"), std::string::npos);
  v.set_object("mount(m)");
  EXPECT_NE(violation_signature("s", v).key.find("|stat/mount|"), std::string::npos);
  EXPECT_NE(violation_signature("s", v).key.find("|via=mount"), std::string::npos);
}

// beneath-lookup's escape, and the lockless walk's violations apart from the plain walk's.
// A stale ACL deny shows at the entry's step (EACCES where every version
// of the walk allows it): the signature names the attribute the mutator
// changed in the window, not a rename. A real ENOENT at an entry stays one.
TEST(Signature, APermissionErrorAtAnEntryNamesTheChangedAttribute) {
  v1::Violation v;
  v.set_kind(v1::VIOLATION_KIND_STALE_DENY);
  v.set_op("access");
  v.set_path("d0/d1/d2/f");
  v.set_step(4);
  v.set_object("entry(d0/d1/d2, \"f\")");
  v.set_observed("error EACCES");
  v.set_expected("success: reached d0/d1/d2/f");
  set_detail(
      v,
      R"j({"steps":[{"step":3,"object":"attr(d0)","versions":[{"value":"mode=0755 uid=0 gid=0","from":null,"to":null}]},)j"
      R"j({"step":3,"object":"attr(d0/d1)","versions":[{"value":"mode=0755 uid=0 gid=0","from":57535576528,"to":57545014148}]},)j"
      R"j({"step":4,"object":"entry(d0/d1/d2, \"f\")","versions":[{"value":"d0/d1/d2/f","from":null,"to":null}]}]})j");
  const auto s = violation_signature("acl-exec-deny", v);
  EXPECT_EQ(s.key, "violation|acl-exec-deny|stale-deny|access/setfacl|step=4|via=names");
  EXPECT_NE(s.title.find("access raced setfacl"), std::string::npos) << s.title;
  v.set_observed("error ENOENT");
  v.set_expected("success: reached d0/d1/d2/f");
  EXPECT_NE(violation_signature("acl-exec-deny", v).key.find("access/rename"), std::string::npos);
}

TEST(Signature, EscapeAndCachedWalks) {
  v1::Violation v;
  v.set_kind(v1::VIOLATION_KIND_ESCAPE);
  v.set_op("openat2");
  v.set_path("a/m/../s");
  v.set_step(3);
  v.set_object("parent(o)");
  set_detail(v, R"({"versions":[{"value":"#0","from":null,"to":null}]})");
  const auto e = violation_signature("beneath-lookup", v);
  EXPECT_EQ(e.key, "violation|beneath-lookup|escape|openat2/rename|step=3|via=dotdot");
  EXPECT_NE(e.title.find("escape in beneath-lookup: openat2 raced rename, out of the root after step 3"),
            std::string::npos)
      << e.title;
  v.set_op("openat2-cached");
  EXPECT_NE(violation_signature("beneath-lookup", v).key, e.key);
}

TEST(Signature, PathShape) {
  auto v = chmod_violation("stat", 2, 1);
  v.set_path("d0/../d0/f");
  EXPECT_NE(violation_signature("s", v).key.find("via=dotdot"), std::string::npos);
  set_detail(v,  // the real trace: two objects per step, four steps for four names
             R"({"steps":[{"step":1},{"step":1},{"step":2},{"step":2},{"step":3},{"step":3},)"
             R"({"step":4},{"step":4}]})");
  v.set_path("d0/d1/d2/f");
  EXPECT_NE(violation_signature("s", v).key.find("via=names"), std::string::npos);
  v.set_path("link/f");  // two names, four steps: a symlink was followed
  EXPECT_NE(violation_signature("s", v).key.find("via=symlink"), std::string::npos);
  v.set_path("d1/d2/d3/f");
  v.set_op("openat");
  EXPECT_NE(violation_signature("s", v).key.find("via=dirfd"), std::string::npos);
  set_detail(v, "not json");  // still a signature, without the walk
  EXPECT_NE(violation_signature("s", v).key.find("via=dirfd"), std::string::npos);
}

TEST(Signature, CrashTitlesNormalise) {
  const std::string a = normalize_crash_title(
      "[   12.345678] BUG: KASAN: use-after-free in ext4_xattr_set_entry+0x1a/0x30 [ext4]\nmore");
  const std::string b = normalize_crash_title(
      "[ 9999.000001] BUG: KASAN: use-after-free in ext4_xattr_set_entry+0x2b/0x30 [ext4]");
  EXPECT_EQ(a, "BUG: KASAN: use-after-free in ext4_xattr_set_entry [ext4]");
  EXPECT_EQ(a, b);
  EXPECT_EQ(normalize_crash_title("BUG: unable to handle page fault for address: ffff888012345678"),
            "BUG: unable to handle page fault for address: ADDR");
  EXPECT_EQ(normalize_crash_title("INFO: task kworker/0:1:123 blocked for more than 120 seconds."),
            normalize_crash_title("INFO: task kworker/1:2:456 blocked for more than 120 seconds."));
  EXPECT_NE(normalize_crash_title("WARNING: CPU: 1 PID: 77 at fs/namei.c:100 lookup"),
            normalize_crash_title("WARNING: CPU: 1 PID: 77 at fs/dcache.c:100 lookup"));
  EXPECT_EQ(normalize_crash_title(""), "unknown");
}

TEST(Signature, OutcomesWithoutKernelBugsHaveNone) {
  v1::ScenarioSpec spec;
  spec.set_scenario("setattr-lookup");
  v1::Outcome o;
  for (auto verdict : {v1::VERDICT_PASS, v1::VERDICT_ERROR, v1::VERDICT_INFRA_FAILURE}) {
    o.set_verdict(verdict);
    o.set_error("mount failed");
    EXPECT_TRUE(outcome_signatures(spec, o).empty()) << v1::Verdict_Name(verdict);
  }
}

TEST(Signature, OneOutcomeOneSignaturePerDistinctKey) {
  v1::ScenarioSpec spec;
  spec.set_scenario("setattr-lookup");
  v1::Outcome o;
  o.set_verdict(v1::VERDICT_VIOLATION);
  *o.add_violations() = chmod_violation("stat", 3, 1);
  *o.add_violations() = chmod_violation("stat", 3, 2);
  *o.add_violations() = chmod_violation("open", 3, 3);
  const auto sigs = outcome_signatures(spec, o);
  ASSERT_EQ(sigs.size(), 2u);
  EXPECT_EQ(sigs[0].violation_index, 0);
  EXPECT_EQ(sigs[1].violation_index, 2);
  EXPECT_TRUE(outcome_has_signature(spec, o, sigs[1].key));
  EXPECT_FALSE(outcome_has_signature(spec, o, "crash|x"));
}

TEST(Signature, CrashTakesItsTitleFromError) {
  v1::ScenarioSpec spec;
  v1::Outcome o;
  o.set_verdict(v1::VERDICT_KERNEL_CRASH);
  o.set_error("BUG: kernel NULL pointer dereference, address: 0000000000000008");
  o.set_console_tail("long console\n...");
  const auto sigs = outcome_signatures(spec, o);
  ASSERT_EQ(sigs.size(), 1u);
  EXPECT_EQ(sigs[0].key, "crash|BUG: kernel NULL pointer dereference, address: ADDR");
  o.set_verdict(v1::VERDICT_BOOT_FAILURE);
  EXPECT_EQ(outcome_signatures(spec, o)[0].key, "boot-failure");
}

// The store keeps an issue's kind as its signature's word; Issue.kind is
// the enum. Every kind a signature can have has an enum value, both ways,
// and every enum value but UNSPECIFIED has a word.
TEST(Signature, EveryKindASignatureHasIsAnIssueKind) {
  v1::ScenarioSpec spec;
  spec.set_scenario("setattr-lookup");
  std::set<std::string> words;
  v1::Outcome o;
  o.set_verdict(v1::VERDICT_VIOLATION);
  *o.add_violations() = chmod_violation("stat", 3, 1);
  for (auto verdict : {v1::VERDICT_VIOLATION, v1::VERDICT_KERNEL_CRASH, v1::VERDICT_HANG,
                       v1::VERDICT_BOOT_FAILURE}) {
    o.set_verdict(verdict);
    o.set_error("BUG: oops");
    for (const auto& sig : outcome_signatures(spec, o)) words.insert(sig.kind);
  }
  EXPECT_EQ(words, (std::set<std::string>{"violation", "crash", "hang", "boot-failure"}));
  for (const auto& w : words) {
    const v1::IssueKind k = ktap::issue_kind_from(w);
    EXPECT_NE(k, v1::ISSUE_KIND_UNSPECIFIED) << w;
    EXPECT_EQ(ktap::issue_kind_word(k), w);
    EXPECT_EQ(ktap::issue_kind_from(v1::IssueKind_Name(k)), k);
  }
  const auto* e = v1::IssueKind_descriptor();
  for (int i = 0; i < e->value_count(); ++i) {
    const auto k = static_cast<v1::IssueKind>(e->value(i)->number());
    EXPECT_EQ(ktap::issue_kind_word(k).empty(), k == v1::ISSUE_KIND_UNSPECIFIED)
        << e->value(i)->name();
  }
  EXPECT_EQ(e->value_count(), static_cast<int>(words.size()) + 1);
  EXPECT_EQ(ktap::issue_kind_from("kernel-crash"), v1::ISSUE_KIND_UNSPECIFIED);
  EXPECT_EQ(ktap::issue_kind_from(""), v1::ISSUE_KIND_UNSPECIFIED);
}

}  // namespace
}  // namespace leapfrog::coord::triage
