// fit_outcome(): an outcome over the coordinator's cap keeps its verdict and
// counts, loses details in a fixed order, and says what it lost.

#include <gtest/gtest.h>

#include "agent/outcome_proto.h"
#include "common/bounds.h"

namespace leapfrog {
namespace {

// A violation outcome with `n` violations, each with a history excerpt of
// `history_bytes`.
v1::Outcome big(int n, size_t history_bytes) {
  v1::Outcome o;
  o.mutable_run()->add_notes("a note of the run");
  o.set_verdict(v1::VERDICT_VIOLATION);
  o.set_lookups_checked(1000);
  o.set_violation_count(5000);
  (*o.mutable_violations_by_kind())["stale-entry"] = 5000;
  for (int i = 0; i < n; ++i) {
    auto* v = o.add_violations();
    v->set_kind(v1::VIOLATION_KIND_STALE_ENTRY);
    v->set_path("l/f");
    v->set_observed("error ENOENT");
    v->set_invoke_ns(i);
    v->mutable_detail()->set_record(static_cast<uint64_t>(i));
    v->mutable_detail()->add_history()->set_value(std::string(history_bytes, 'h'));
  }
  return o;
}

std::vector<std::string> notes_of(const v1::Outcome& o) {
  return {o.run().notes().begin(), o.run().notes().end()};
}

TEST(FitOutcome, AnOutcomeThatFitsIsLeftAlone) {
  v1::Outcome o = big(3, 100);
  const std::string before = o.SerializeAsString();
  EXPECT_FALSE(fit_outcome(o, kMaxOutcomeBytes));
  EXPECT_EQ(o.SerializeAsString(), before);
}

TEST(FitOutcome, HistoriesGoFirstAndEveryViolationStays) {
  // 50 violations of 24 KB each: ~1.2 MB.
  v1::Outcome o = big(50, 24 << 10);
  ASSERT_GT(o.ByteSizeLong(), kMaxOutcomeBytes);
  EXPECT_TRUE(fit_outcome(o, kMaxOutcomeBytes));
  EXPECT_LE(o.ByteSizeLong(), kMaxOutcomeBytes);
  EXPECT_EQ(o.violations_size(), 50);
  EXPECT_EQ(o.verdict(), v1::VERDICT_VIOLATION);
  EXPECT_EQ(o.violation_count(), 5000u);
  EXPECT_EQ(o.violations_by_kind().at("stale-entry"), 5000u);
  const auto notes = notes_of(o);
  ASSERT_EQ(notes.size(), 2u);
  EXPECT_EQ(notes[0], "a note of the run");
  EXPECT_NE(notes[1].find("violations dropped their history excerpts"), std::string::npos)
      << notes[1];
}

TEST(FitOutcome, ThenTheLastViolationsGoAndTheCountsStay) {
  // Each history alone is 40 KB: 50 of them do not fit even once.
  v1::Outcome o = big(50, 40 << 10);
  EXPECT_TRUE(fit_outcome(o, kMaxOutcomeBytes));
  EXPECT_LE(o.ByteSizeLong(), kMaxOutcomeBytes);
  EXPECT_EQ(o.violations_size(), 50) << "dropping histories should have been enough";
  // The histories went from the last violation backwards: the first kept theirs.
  EXPECT_EQ(o.violations(0).detail().history_size(), 1);
  EXPECT_EQ(o.violations(49).detail().history_size(), 0);

  // Violations too big without their history: the last ones are dropped.
  v1::Outcome fat;
  fat.set_verdict(v1::VERDICT_VIOLATION);
  fat.set_violation_count(300);
  for (int i = 0; i < 300; ++i) {
    auto* v = fat.add_violations();
    v->set_kind(v1::VIOLATION_KIND_STALE_GRANT);
    v->set_invoke_ns(i);
    v->mutable_detail()->add_steps()->set_component(std::string(8 << 10, 's'));
  }
  EXPECT_TRUE(fit_outcome(fat, kMaxOutcomeBytes));
  EXPECT_LE(fat.ByteSizeLong(), kMaxOutcomeBytes);
  EXPECT_GT(fat.violations_size(), 1);
  EXPECT_LT(fat.violations_size(), 300);
  EXPECT_EQ(fat.violations(0).invoke_ns(), 0) << "the first violations are the ones kept";
  EXPECT_EQ(fat.violation_count(), 300u);
  const auto notes = notes_of(fat);
  ASSERT_FALSE(notes.empty());
  EXPECT_NE(notes.back().find("violations were dropped (" + std::to_string(fat.violations_size()) +
                              " kept; violation_count still counts all 300)"),
            std::string::npos)
      << notes.back();
}

// The rest of a detail stays when its history goes.
TEST(FitOutcome, TypedHistoriesGoFromTheLastViolationBackwards) {
  v1::Outcome o;
  o.set_verdict(v1::VERDICT_VIOLATION);
  o.set_violation_count(50);
  for (int i = 0; i < 50; ++i) {
    auto* v = o.add_violations();
    v->set_kind(v1::VIOLATION_KIND_STALE_ENTRY);
    v->mutable_detail()->set_record(static_cast<uint64_t>(i));
    v->mutable_detail()->add_versions()->set_value("#0");
    v->mutable_detail()->add_history()->set_value(std::string(40 << 10, 'h'));
  }
  ASSERT_GT(o.ByteSizeLong(), kMaxOutcomeBytes);
  EXPECT_TRUE(fit_outcome(o, kMaxOutcomeBytes));
  EXPECT_LE(o.ByteSizeLong(), kMaxOutcomeBytes);
  EXPECT_EQ(o.violations_size(), 50);
  EXPECT_EQ(o.violations(0).detail().history_size(), 1);
  EXPECT_EQ(o.violations(49).detail().history_size(), 0);
  EXPECT_EQ(o.violations(49).detail().versions(0).value(), "#0");  // the rest stays
  const auto notes = notes_of(o);
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_NE(notes[0].find("violations dropped their history excerpts"), std::string::npos)
      << notes[0];
}

TEST(FitOutcome, AHugeErrorKeepsItsTail) {
  v1::Outcome o;
  o.set_verdict(v1::VERDICT_ERROR);
  o.set_error(std::string(3 << 20, 'e') + "the end of the error");
  EXPECT_TRUE(fit_outcome(o, kMaxOutcomeBytes));
  EXPECT_LE(o.ByteSizeLong(), kMaxOutcomeBytes);
  EXPECT_EQ(o.verdict(), v1::VERDICT_ERROR);
  EXPECT_NE(o.error().find("the end of the error"), std::string::npos);
  EXPECT_EQ(o.error().rfind("[", 0), 0u) << o.error().substr(0, 40);
  EXPECT_NE(notes_of(o).back().find("error and console_tail keep their last 64 KiB"),
            std::string::npos);
}

}  // namespace
}  // namespace leapfrog
