// Retention (pg_retention.cc) on a real PostgreSQL: outcomes stored through
// the store's own report path, some a year old, then apply_retention. What
// it may drop goes (history excerpts, passing outcomes' agent JSON); what a
// violation, an issue, the scaling page or the summaries need stays, and a
// second pass finds nothing left to do.

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <pqxx/pqxx>
#include <string>

#include "coordinator/pg/test_postgres.h"
#include "coordinator/store/pg_layout_test_util.h"
#include "coordinator/store/pg_store.h"
#include "coordinator/store/pg_summaries.h"
#include "coordinator/store/pg_util.h"

namespace leapfrog::coord {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;

const TimePoint kOld = TimePoint(Duration(1'700'000'000'000'000));
const TimePoint kNow = kOld + 24h * 365;
const Duration kLease = 30s;

std::string one(const std::string& url, const std::string& query) {
  pqxx::connection c(url);
  pqxx::work txn(c);
  const auto r = txn.exec(query);
  return r.empty() || r[0][0].is_null() ? "" : r[0][0].c_str();
}

std::string summaries(const std::string& url) {
  pqxx::connection c(url);
  pqxx::work txn(c);
  std::string out;
  for (const auto& r : txn.exec(std::string(kKeptCellVerdicts) + " ORDER BY 1, 2, 3, 4, 5"))
    for (const auto& f : r) out += std::string(f.is_null() ? "NULL" : f.c_str()) + ",";
  return out;
}

// An outcome as an agent sends it: counters, the run's notes, and
// violations whose typed detail carries versions, steps and a history
// excerpt.
v1::Outcome outcome_of(v1::Verdict verdict, int violations, const std::string& scenario) {
  v1::Outcome o;
  o.set_verdict(verdict);
  o.set_ops(1000);
  o.set_lookups_checked(900);
  o.set_violation_count(static_cast<uint64_t>(violations));
  o.mutable_widening()->add_control_checks("acl_fetched probability \"-1\": refused");
  o.mutable_run()->set_rounds(77);
  o.mutable_run()->add_notes("a note");
  o.mutable_run()->mutable_timing()->set_warmup_rounds(3);
  if (scenario == "lookup-scale") {
    v1::ScalePoint* p = o.mutable_scale()->add_points();
    p->set_tasks(1);
    p->set_ops_per_sec(5.0);
  }
  for (int i = 0; i < violations; ++i) {
    v1::Violation* v = o.add_violations();
    v->set_kind(v1::VIOLATION_KIND_STALE_GRANT);
    v->set_path("d/f");
    v->set_observed("ok");
    v1::ViolationDetail* d = v->mutable_detail();
    d->add_versions()->set_value("mode=0700");
    d->add_steps()->set_component("d");
    d->add_history()->set_value(std::string(4000, 'h'));
  }
  return o;
}

// The outcome's violation details (its violation_details value) that
// satisfy `has`, counted.
template <class Has>
std::string details_with(const std::string& url, int64_t job, Has has) {
  pqxx::connection c(url);
  pqxx::work txn(c);
  int n = 0;
  for (const auto& r :
       txn.exec("SELECT details FROM violation_details WHERE job_id = " + std::to_string(job))) {
    const auto all = parse<v1::ViolationDetails>(r[0], "details");
    for (const auto& d : all.details()) n += has(d);
  }
  return std::to_string(n);
}

class PgRetentionTest : public testing::PostgresSuite<PgRetentionTest> {
 protected:
  void SetUp() override {
    url_ = pg_->url(fresh_database("retention"));
    store_ = std::make_unique<PgStore>(url_);
  }
  std::string url_;
  std::unique_ptr<PgStore> store_;
};

TEST_F(PgRetentionTest, OldOutcomesLoseExcerptsAndPassingDetailsAndKeepWhatIsNeeded) {
  // Job 1: an old pass; 2: an old violation; 3: an old violation that is an
  // issue's example; 4: an old lookup-scale pass; 5: a recent violation.
  const std::vector<std::string> scenarios = {"setattr-lookup", "setattr-lookup", "setattr-lookup",
                                              "lookup-scale", "setattr-lookup"};
  std::vector<NewJob> jobs;
  for (size_t i = 0; i < scenarios.size(); ++i) {
    NewJob j;
    j.spec.set_scenario(scenarios[i]);
    j.spec.set_fs("tmpfs");
    j.spec.set_seed(i);
    j.kernel_label = "host";
    jobs.push_back(j);
  }
  v1::CampaignSpec spec;
  spec.set_name("retention");
  spec.set_max_attempts(1);
  store_->create_campaign(spec, jobs, 0, kOld);
  v1::Capabilities caps;
  caps.set_kernel_label("host");
  caps.add_filesystems("tmpfs");
  std::map<uint64_t, int64_t> job_of_seed;
  for (size_t i = 0; i < scenarios.size(); ++i) {
    const auto j = store_->lease_job("a", caps, kOld, kLease);
    ASSERT_TRUE(j);
    const uint64_t seed = j->spec().seed();
    job_of_seed[seed] = j->job_id();
    const bool pass = seed == 0 || seed == 3;
    const TimePoint at = seed == 4 ? kNow - 1h : kOld;
    ASSERT_EQ(store_->report_outcome("a", j->job_id(), j->attempt(),
                                     outcome_of(pass ? v1::VERDICT_PASS : v1::VERDICT_VIOLATION,
                                                pass ? 0 : 2, scenarios[seed]),
                                     at),
              ReportResult::Stored);
  }
  const std::string example = std::to_string(job_of_seed[2]);
  {
    pqxx::connection c(url_);
    pqxx::work txn(c);
    txn.exec(
        "INSERT INTO issues (signature, kind, scenario, title, status, first_seen, last_seen,"
        " count, example_job, example_attempt, example_kernel, example_spec, example_violation)"
        " VALUES ('violation|x', 'violation', 'setattr-lookup', 'x', 1, now(), now(), 1, " +
        example + ", 1, 'host', '', '')");
    txn.commit();
  }
  auto excerpts = [&](int64_t job) {
    return details_with(url_, job,
                        [](const v1::ViolationDetail& d) { return d.history_size() > 0; });
  };
  auto outcome = [&](int64_t job) {
    v1::Outcome o;
    pqxx::connection c(url_);
    pqxx::work txn(c);
    const auto r = txn.exec("SELECT outcome FROM outcomes WHERE job_id = " + std::to_string(job));
    EXPECT_EQ(r.size(), 1u);
    if (r.size() == 1) o = parse_outcome(r[0][0]);  // packed or not (pg_util.h)
    return o;
  };
  // Control: before retention every violation carries its excerpt, so the
  // checks below can fail.
  for (uint64_t seed : {1, 2, 4}) ASSERT_EQ(excerpts(job_of_seed[seed]), "2");
  ASSERT_EQ(outcome(job_of_seed[0]).run().notes_size(), 1);
  ASSERT_TRUE(outcome(job_of_seed[0]).run().has_timing());
  const std::string counted = summaries(url_);
  const std::string rows_before = one(url_, "SELECT count(*) FROM violations");
  const std::string counters_before =
      one(url_,
          "SELECT string_agg(concat_ws(':', job_id, verdict, ops, lookups_checked,"
          " violation_count), ',' ORDER BY job_id) FROM outcomes");

  const RetentionPass pass = store_->apply_retention(kNow - 24h * 30, 100);
  EXPECT_EQ(pass.outcomes, 4);  // the recent one is not looked at
  EXPECT_EQ(pass.examples_kept, 1);
  EXPECT_EQ(pass.excerpts_dropped, 2);
  EXPECT_GT(pass.bytes_freed, 8000u);

  // The old pass lost its notes, timing and control checks; the old
  // violation its excerpts, but not its versions or notes.
  EXPECT_EQ(outcome(job_of_seed[0]).widening().control_checks_size(), 0);
  EXPECT_EQ(outcome(job_of_seed[0]).run().notes_size(), 0);
  EXPECT_FALSE(outcome(job_of_seed[0]).run().has_timing());
  EXPECT_EQ(outcome(job_of_seed[0]).run().rounds(), 77u);  // counts stay
  EXPECT_EQ(outcome(job_of_seed[1]).run().notes(0), "a note");
  EXPECT_EQ(excerpts(job_of_seed[1]), "0");
  EXPECT_EQ(details_with(url_, job_of_seed[1],
                         [](const v1::ViolationDetail& d) {
                           return d.versions_size() == 1 && d.steps_size() == 1;
                         }),
            "2");
  // The example, the scaling run and the recent outcome are whole.
  EXPECT_EQ(excerpts(job_of_seed[2]), "2");
  EXPECT_EQ(outcome(job_of_seed[3]).scale().points_size(), 1);
  EXPECT_EQ(outcome(job_of_seed[3]).run().notes_size(), 1);
  EXPECT_EQ(excerpts(job_of_seed[4]), "2");
  // Nothing counted changed: rows, counters, summaries.
  EXPECT_EQ(one(url_, "SELECT count(*) FROM violations"), rows_before);
  EXPECT_EQ(one(url_,
                "SELECT string_agg(concat_ws(':', job_id, verdict, ops, lookups_checked,"
                " violation_count), ',' ORDER BY job_id) FROM outcomes"),
            counters_before);
  EXPECT_EQ(summaries(url_), counted);
  // The outcomes still read back through the store.
  const auto listed = store_->find_outcomes({.limit = 10});
  EXPECT_EQ(listed.size(), 5u);

  // A second pass finds nothing; a year later, the recent one goes too.
  EXPECT_EQ(store_->apply_retention(kNow - 24h * 30, 100).outcomes, 0);
  const RetentionPass later = store_->apply_retention(kNow + 24h * 365, 100);
  EXPECT_EQ(later.outcomes, 1);
  EXPECT_EQ(excerpts(job_of_seed[4]), "0");
}

TEST_F(PgRetentionTest, BatchesTakeTheOldestFirstAndEachOutcomeOnce) {
  std::vector<NewJob> jobs;
  for (uint64_t i = 0; i < 7; ++i) {
    NewJob j;
    j.spec.set_scenario("setattr-lookup");
    j.spec.set_fs("tmpfs");
    j.spec.set_seed(i);
    j.kernel_label = "host";
    jobs.push_back(j);
  }
  v1::CampaignSpec spec;
  spec.set_name("batches");
  spec.set_max_attempts(1);
  store_->create_campaign(spec, jobs, 0, kOld);
  v1::Capabilities caps;
  caps.set_kernel_label("host");
  caps.add_filesystems("tmpfs");
  for (int i = 0; i < 7; ++i) {
    const auto j = store_->lease_job("a", caps, kOld, kLease);
    ASSERT_TRUE(j);
    store_->report_outcome("a", j->job_id(), j->attempt(),
                           outcome_of(v1::VERDICT_PASS, 0, "setattr-lookup"), kOld + 1min * i);
  }
  int seen = 0;
  for (int pass = 0; pass < 4; ++pass) seen += store_->apply_retention(kNow, 3).outcomes;
  EXPECT_EQ(seen, 7);
  EXPECT_EQ(one(url_, "SELECT count(*) FROM outcomes WHERE NOT trimmed"), "0");
  EXPECT_EQ(one(url_, "SELECT count(*) FROM outcomes WHERE length(outcome) > 200"), "0");
}

// A violation reported with its typed detail loses its history excerpt
// from the one copy kept (the outcome's violation_details value, or in an
// outcome stored before it, the row's detail_pb), and keeps its versions
// and steps.
class PgRetentionLayoutTest : public PgRetentionTest, public ::testing::WithParamInterface<bool> {};

TEST_P(PgRetentionLayoutTest, ATypedDetailLosesItsExcerptAndKeepsTheRest) {
  const bool in_rows = GetParam();
  NewJob job;
  job.spec.set_scenario("setattr-lookup");
  job.spec.set_fs("tmpfs");
  job.kernel_label = "host";
  v1::CampaignSpec spec;
  spec.set_name("typed");
  spec.set_max_attempts(1);
  store_->create_campaign(spec, {job}, 0, kOld);
  v1::Capabilities caps;
  caps.set_kernel_label("host");
  caps.add_filesystems("tmpfs");
  const auto j = store_->lease_job("a", caps, kOld, kLease);
  ASSERT_TRUE(j);
  v1::Outcome o;
  o.set_verdict(v1::VERDICT_VIOLATION);
  o.set_violation_count(2);
  for (int i = 0; i < 2; ++i) {
    v1::Violation* v = o.add_violations();
    v->set_kind(v1::VIOLATION_KIND_STALE_GRANT);
    v->mutable_detail()->add_versions()->set_value("mode=0700");
    v->mutable_detail()->add_steps()->set_component("d");
    v->mutable_detail()->add_history()->set_value(std::string(4000, 'h'));
  }
  ASSERT_EQ(store_->report_outcome("a", j->job_id(), j->attempt(), o, kOld), ReportResult::Stored);
  if (in_rows) {
    ASSERT_EQ(move_details_into_rows(url_, j->job_id(), j->attempt(), o), 1u);
  }
  auto stored = [&] {
    return store_->find_outcomes({.limit = 1}).at(0).outcome().violations(1).detail();
  };
  ASSERT_EQ(stored().history_size(), 1);  // control: the excerpt is there to drop
  const RetentionPass pass = store_->apply_retention(kNow, 100);
  EXPECT_EQ(pass.excerpts_dropped, 2);
  EXPECT_GT(pass.bytes_freed, 8000u);
  EXPECT_EQ(stored().history_size(), 0);
  EXPECT_EQ(stored().versions(0).value(), "mode=0700");
  EXPECT_EQ(stored().steps(0).component(), "d");
  EXPECT_EQ(one(url_, "SELECT count(*) FROM violations WHERE detail_pb IS NOT NULL"),
            in_rows ? "2" : "0");
  EXPECT_EQ(one(url_, "SELECT count(*) FROM violation_details"), in_rows ? "0" : "1");
}

INSTANTIATE_TEST_SUITE_P(Layouts, PgRetentionLayoutTest, ::testing::Values(false, true),
                         [](const auto& info) {
                           return info.param ? "DetailInEachRow" : "OneValuePerOutcome";
                         });

}  // namespace
}  // namespace leapfrog::coord
