// The report-acceptance rule, case by case (no database): every way a report
// can end, and the order in which the rule's checks apply.

#include "coordinator/store/report_acceptance.h"

#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

namespace leapfrog::coord {
namespace {

const std::string kKeyA = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";  // 32 hex digits, as recorded
const std::string kKeyB = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";

ReportedJob leased_by(const std::string& holder, uint32_t attempt, const std::string& key = "") {
  return ReportedJob{"leased", attempt, 0, holder, key, false};
}

struct Case {
  const char* name;
  std::optional<ReportedJob> job;
  ReportClaim report;
  std::optional<ReportResult> want;  // nullopt: refused
  bool wrong_key = false;            // refused as WrongAgentSecret
  std::string error = "";            // part of the refusal's message
};

TEST(ReportAcceptance, JudgesEachCase) {
  auto done = [](int verdict, uint32_t attempt, bool stored = false) {
    return ReportedJob{"done", attempt, verdict, "", "", stored};
  };
  auto with_key = [](ReportedJob j, const std::string& key) {
    j.attempt_key = key;
    return j;
  };
  auto stored = [](ReportedJob j) {
    j.already_stored = true;
    return j;
  };
  // clang-format off
  const std::vector<Case> cases = {
      {"unknown job", std::nullopt, {"a", 7, 1, "", false}, std::nullopt, false,
       "report outcome: unknown job 7"},
      {"attempt never handed out", leased_by("a", 2), {"a", 7, 3, "", false}, std::nullopt, false,
       "job 7 has no attempt 3 (latest 2)"},
      {"holder reports its lease", leased_by("a", 1), {"a", 7, 1, "", false},
       ReportResult::Stored},
      {"another agent, no keys", leased_by("a", 1), {"b", 7, 1, "", false}, std::nullopt, false,
       "job 7 attempt 1 is leased by agent \"a\", not by \"b\""},
      {"another agent, key only on the report", leased_by("a", 1), {"b", 7, 1, kKeyA, false},
       std::nullopt, false, "is leased by agent \"a\""},
      {"another agent, key only on the lease", leased_by("a", 1, kKeyA), {"b", 7, 1, "", false},
       std::nullopt, false, "is leased by agent \"a\""},
      {"the key decides, not the agent id", leased_by("a", 1, kKeyA),
       {"b", 7, 1, kKeyA + "-rest-of-secret", false}, ReportResult::Stored},
      {"wrong key", leased_by("a", 1, kKeyA), {"a", 7, 1, kKeyB, false}, std::nullopt, true,
       "report outcome: job 7 attempt 1 was leased with another agent_secret"},
      {"wrong key on an old attempt", with_key(leased_by("b", 2), kKeyA),
       {"a", 7, 1, kKeyB, true}, std::nullopt, true, "attempt 1 was leased with another"},
      {"wrong key on a stored attempt", stored(with_key(done(v1::VERDICT_PASS, 1), kKeyA)),
       {"a", 7, 1, kKeyB, false}, std::nullopt, true, "another agent_secret"},
      {"requeued: the current attempt is still taken",
       ReportedJob{"queued", 1, 0, "", "", false}, {"a", 7, 1, "", false}, ReportResult::Stored},
      {"replaces the lease's INFRA_FAILURE", done(v1::VERDICT_INFRA_FAILURE, 3),
       {"a", 7, 3, "", false}, ReportResult::Stored},
      {"done by another report", done(v1::VERDICT_PASS, 1), {"a", 7, 1, "", false},
       ReportResult::Superseded},
      {"done by another, with violations", done(v1::VERDICT_PASS, 1), {"a", 7, 1, "", true},
       ReportResult::KeptSuperseded},
      {"an old attempt", leased_by("b", 2), {"a", 7, 1, "", false}, ReportResult::Superseded},
      {"an old attempt from any agent", leased_by("b", 2), {"c", 7, 1, "", false},
       ReportResult::Superseded},
      {"an old attempt with violations", leased_by("b", 2), {"a", 7, 1, "", true},
       ReportResult::KeptSuperseded},
      {"stored before", stored(done(v1::VERDICT_PASS, 1)), {"a", 7, 1, "", false},
       ReportResult::Duplicate},
      {"stored before, with violations", stored(done(v1::VERDICT_VIOLATION, 1)),
       {"a", 7, 1, "", true}, ReportResult::Duplicate},
      {"an old attempt kept before", stored(leased_by("b", 2)), {"a", 7, 1, "", true},
       ReportResult::Duplicate},
      {"an agent-reported INFRA_FAILURE, again", stored(done(v1::VERDICT_INFRA_FAILURE, 1)),
       {"a", 7, 1, "", false}, ReportResult::Duplicate},
  };
  // clang-format on
  for (const auto& c : cases) {
    const ReportDecision d = judge_report(c.job, c.report);
    EXPECT_EQ(d.result, c.want) << c.name;
    EXPECT_EQ(d.wrong_key, c.wrong_key) << c.name;
    if (c.want) {
      EXPECT_EQ(d.error, "") << c.name;
    } else {
      EXPECT_NE(d.error.find(c.error), std::string::npos) << c.name << ": " << d.error;
    }
  }
}

TEST(ReportAcceptance, TheRefusalNamesAtMostEightyCharactersOfTheAgent) {
  const std::string long_agent(200, 'x');
  const auto d = judge_report(leased_by("a", 1), {long_agent, 7, 1, "", false});
  ASSERT_FALSE(d.result);
  EXPECT_NE(d.error.find("not by \"" + std::string(80, 'x') + "\""), std::string::npos) << d.error;
}

TEST(ReportAcceptance, ViolationsAreWorthKeeping) {
  v1::Outcome o;
  o.set_verdict(v1::VERDICT_PASS);
  EXPECT_FALSE(carries_violations(o));
  o.set_verdict(v1::VERDICT_VIOLATION);
  EXPECT_TRUE(carries_violations(o));
  o.set_verdict(v1::VERDICT_ERROR);
  o.set_violation_count(1);
  EXPECT_TRUE(carries_violations(o));
  o.set_violation_count(0);
  o.add_violations()->set_kind(v1::VIOLATION_KIND_STALE_GRANT);
  EXPECT_TRUE(carries_violations(o));
}

}  // namespace
}  // namespace leapfrog::coord
