// lookup-scale runs kept as rows (pg_scale.h) on a real PostgreSQL: written
// with the outcome (passing lookup-scale runs with a valid point only), read
// back exactly, backfilled by migration 11 for outcomes stored before it, and
// equal to a recount from the stored JSON.

#include "coordinator/store/pg_scale.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <pqxx/pqxx>
#include <set>

#include "common/outcome/legacy.h"
#include "common/outcome/scale_proto.h"
#include "coordinator/pg/test_postgres.h"
#include "coordinator/store/migrations.h"
#include "coordinator/store/pg_store.h"

namespace leapfrog::coord {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;

const TimePoint kT0 = TimePoint(Duration(1'700'000'000'123'456));

// Every kept row of both tables, as text, in key order.
std::vector<std::vector<std::string>> kept_rows(pqxx::work& txn) {
  std::vector<std::vector<std::string>> out;
  for (const char* q : {"SELECT * FROM scale_runs ORDER BY job_id, attempt",
                        "SELECT * FROM scale_points ORDER BY job_id, attempt, idx"}) {
    for (const auto& r : txn.exec(q)) {
      std::vector<std::string> row;
      for (const auto& f : r) row.push_back(f.is_null() ? "NULL" : f.c_str());
      out.push_back(std::move(row));
    }
  }
  return out;
}

// A run's JSON: lseek1 at 1 and 2 tasks with samples that do not print
// short (1/3), one point without its required "mode" (skipped), a host.
json scale_json(double ops) {
  return json{
      {"verdict", "pass"},
      {"scale",
       json::array(
           {{{"test", "lseek1"},
             {"mode", "processes"},
             {"tasks", 1},
             {"ops_per_sec", ops / 3},
             {"samples", {ops / 3, ops / 7, 0.1 + 0.2}},
             {"stddev", 1.5},
             {"host_load", 0.25}},
            {{"test", "lseek1"}, {"tasks", 4}, {"ops_per_sec", 9.0}},
            {{"test", "access-same"}, {"mode", "threads"}, {"tasks", 2}, {"ops_per_sec", ops}}})},
      {"scale_host", {{"cpus", 2}, {"warnings", {"3 tasks on 2 CPUs"}}}}};
}

class PgScaleTest : public testing::PostgresSuite<PgScaleTest> {
 protected:
  void SetUp() override {
    url_ = pg_->url(fresh_database("scale"));
    store_ = std::make_unique<PgStore>(url_);
  }

  // One job of `scenario` on `kernel`, leased and reported with `o`.
  void run(const std::string& scenario, const std::string& kernel, const v1::Outcome& o) {
    NewJob j;
    j.spec.set_scenario(scenario);
    j.spec.set_fs("tmpfs");
    j.kernel_label = kernel;
    v1::CampaignSpec spec;
    spec.set_name("scale");
    spec.set_max_attempts(1);
    store_->create_campaign(spec, {j}, 0, kT0);
    v1::Capabilities caps;
    caps.set_kernel_label(kernel);
    caps.add_filesystems("tmpfs");
    const auto leased = store_->lease_job("a", caps, kT0, 30s);
    ASSERT_TRUE(leased);
    ASSERT_EQ(store_->report_outcome("a", leased->job_id(), leased->attempt(), o, kT0),
              ReportResult::Stored);
  }

  // An outcome as the agent reports it today (the typed run only) or,
  // without typed_, as an old agent did (the JSON alone, as old field 14).
  v1::Outcome outcome(const json& j, v1::Verdict verdict = v1::VERDICT_PASS) const {
    v1::Outcome o;
    o.set_verdict(verdict);
    if (!typed_) {
      v1::Outcome old;
      EXPECT_TRUE(old.ParseFromString(with_old_field(o, 14, j.dump())));
      return old;
    }
    if (auto run = scale_run_from_json(j)) {
      *o.mutable_scale() = std::move(*run);
    }
    return o;
  }

  // One campaign of `jobs` lookup-scale jobs on each of `kernels`, every one
  // leased and passed; returns their job ids.
  std::vector<int64_t> campaign(const std::vector<std::string>& kernels, int jobs) {
    std::vector<NewJob> all;
    for (const auto& k : kernels)
      for (int i = 0; i < jobs; ++i) {
        NewJob j;
        j.spec.set_scenario("lookup-scale");
        j.spec.set_fs("tmpfs");
        j.kernel_label = k;
        all.push_back(j);
      }
    v1::CampaignSpec spec;
    spec.set_name("repeats");
    store_->create_campaign(spec, all, 0, kT0);
    std::vector<int64_t> ids;
    for (const auto& k : kernels) {
      v1::Capabilities caps;
      caps.set_kernel_label(k);
      caps.add_filesystems("tmpfs");
      for (int i = 0; i < jobs; ++i) {
        const auto leased = store_->lease_job("a", caps, kT0, 30s);
        EXPECT_TRUE(leased);
        if (!leased) return ids;
        EXPECT_EQ(store_->report_outcome("a", leased->job_id(), leased->attempt(),
                                         outcome(scale_json(3e6)), kT0),
                  ReportResult::Stored);
        ids.push_back(leased->job_id());
      }
    }
    return ids;
  }

  // Runs that are kept, and outcomes that are not.
  void store_a_mix() {
    run("lookup-scale", "k1", outcome(scale_json(3e6)));
    run("lookup-scale", "k1", outcome(scale_json(4e6)));
    run("lookup-scale", "k2", outcome(scale_json(5e6)));
    run("lookup-scale", "k3", outcome(scale_json(6e6), v1::VERDICT_ERROR));  // failed
    run("lookup-scale", "k4", outcome(json{{"verdict", "pass"}, {"scale", json::array()}}));
    run("lookup-scale", "k5",
        outcome(json{{"scale", json::array({{{"test", "x"}}})}}));  // no valid point
    run("setattr-lookup", "k6", outcome(scale_json(7e6)));          // not lookup-scale
  }

  std::string url_;
  std::unique_ptr<PgStore> store_;
  bool typed_ = true;
};

TEST_F(PgScaleTest, PassingRunsAreKeptWithTheirValidPointsExactly) {
  store_a_mix();
  EXPECT_EQ(store_->scale_kernels(), (std::vector<std::string>{"k1", "k2"}));
  ScaleRunQuery q;
  q.per_kernel = 5;
  const auto runs = store_->scale_runs(q);
  ASSERT_EQ(runs.size(), 3u);
  EXPECT_EQ(runs[0].record.kernel_label(), "k1");
  EXPECT_GT(runs[0].record.job_id(), runs[1].record.job_id());  // newest first
  EXPECT_EQ(runs[2].record.kernel_label(), "k2");
  const ScaleRun& r = runs[0];
  EXPECT_EQ(r.record.outcome().verdict(), v1::VERDICT_PASS);
  EXPECT_EQ(r.record.spec().scenario(), "lookup-scale");
  EXPECT_EQ(json::parse(r.host_json)["cpus"], 2);
  ASSERT_EQ(r.points.size(), 2u);  // the point without a mode is skipped
  EXPECT_EQ(r.points[0].test, "lseek1");
  EXPECT_EQ(r.points[0].mode, "processes");
  EXPECT_EQ(r.points[0].tasks, 1u);
  EXPECT_EQ(r.points[0].ops_per_sec, 4e6 / 3);  // exactly, not to 6 digits
  EXPECT_EQ(r.points[0].samples, (std::vector<double>{4e6 / 3, 4e6 / 7, 0.1 + 0.2}));
  EXPECT_EQ(r.points[0].stddev, 1.5);
  EXPECT_EQ(r.points[0].host_load, 0.25);
  // Defaults as scenarios' reader has them.
  EXPECT_EQ(r.points[1].test, "access-same");
  EXPECT_TRUE(r.points[1].samples.empty());
  EXPECT_EQ(r.points[1].ci_low, 4e6);
  EXPECT_EQ(r.points[1].ci_high, 4e6);
  EXPECT_EQ(r.points[1].idle_pct, -1);
  EXPECT_EQ(r.points[1].other_load, -1);
  EXPECT_EQ(r.points[1].host_load, -1);

  q.kernels = {"k2", "k3", "nope"};
  q.per_kernel = 1;
  q.details = false;
  const auto only = store_->scale_runs(q);
  ASSERT_EQ(only.size(), 1u);
  EXPECT_EQ(only[0].record.kernel_label(), "k2");
  EXPECT_TRUE(only[0].points.empty());
  EXPECT_FALSE(only[0].record.has_outcome());
}

// A kernel's run sets: every run of its newest campaigns, however many runs
// each has; a campaign of several kernels gives each its own set.
TEST_F(PgScaleTest, ByCampaignGivesEveryRunOfTheNewestCampaigns) {
  const auto old = campaign({"k1"}, 2);
  const auto mid = campaign({"k1", "k2"}, 3);
  const auto last = campaign({"k1"}, 1);
  ASSERT_EQ(old.size() + mid.size() + last.size(), 9u);
  ScaleRunQuery q;
  q.by_campaign = true;
  q.per_kernel = 1;
  q.details = false;
  auto ids = [](const std::vector<ScaleRun>& runs, const std::string& kernel) {
    std::vector<int64_t> out;
    for (const auto& r : runs)
      if (r.record.kernel_label() == kernel) out.push_back(r.record.job_id());
    return out;
  };
  const auto newest = store_->scale_runs(q);
  EXPECT_EQ(ids(newest, "k1"), (std::vector<int64_t>{last[0]}));
  EXPECT_EQ(ids(newest, "k2"), (std::vector<int64_t>{mid[5], mid[4], mid[3]}));
  q.per_kernel = 2;
  q.kernels = {"k1"};
  q.details = true;
  const auto two = store_->scale_runs(q);
  EXPECT_EQ(ids(two, "k1"), (std::vector<int64_t>{last[0], mid[2], mid[1], mid[0]}));
  ASSERT_EQ(two.size(), 4u);
  EXPECT_EQ(two[1].record.campaign_id(), two[3].record.campaign_id());
  EXPECT_NE(two[0].record.campaign_id(), two[1].record.campaign_id());
  EXPECT_EQ(two[2].points.size(), 2u);
  // Counting runs instead: the newest two, whatever their campaign.
  q.by_campaign = false;
  EXPECT_EQ(ids(store_->scale_runs(q), "k1"), (std::vector<int64_t>{last[0], mid[2]}));
}

// Runs stored by old agents (the JSON alone) get their rows from migration
// 18, the same rows as the same runs reported typed.
TEST_F(PgScaleTest, TypedRunsKeepTheRowsTheirJsonKept) {
  typed_ = false;
  store_a_mix();
  std::vector<std::vector<std::string>> from_json;
  {
    pqxx::connection conn(url_);
    {
      pqxx::work txn(conn);
      EXPECT_TRUE(kept_rows(txn).empty());  // the store reads no JSON
      txn.exec("DELETE FROM schema_migrations WHERE version = 18");
      txn.commit();
    }
    EXPECT_EQ(apply_migrations(conn), 1);
    pqxx::work txn(conn);
    from_json = kept_rows(txn);
  }
  ASSERT_FALSE(from_json.empty());
  url_ = pg_->url(fresh_database("scale_typed"));
  store_ = std::make_unique<PgStore>(url_);
  typed_ = true;
  store_a_mix();
  pqxx::connection conn(url_);
  pqxx::work txn(conn);
  EXPECT_EQ(kept_rows(txn), from_json);
  // The backfill reads the typed runs too.
  txn.exec("DELETE FROM scale_runs");
  EXPECT_EQ(backfill_scale_runs(txn), 3);
  EXPECT_EQ(kept_rows(txn), from_json);
}

TEST_F(PgScaleTest, KeptRowsMatchARecountFromTheStoredRuns) {
  store_a_mix();
  pqxx::connection conn(url_);
  pqxx::work txn(conn);
  const auto kept = kept_rows(txn);
  ASSERT_EQ(txn.exec("SELECT 1 FROM scale_runs").size(), 3u);
  txn.exec("DELETE FROM scale_runs");
  EXPECT_EQ(backfill_scale_runs(txn), 3);
  EXPECT_EQ(kept_rows(txn), kept);
  EXPECT_EQ(backfill_scale_runs(txn), 0);  // each run once
}

TEST_F(PgScaleTest, MigrationTenBackfillsRunsStoredBeforeIt) {
  store_a_mix();
  std::vector<std::vector<std::string>> before;
  {
    pqxx::connection conn(url_);
    pqxx::work txn(conn);
    before = kept_rows(txn);
  }
  ASSERT_FALSE(before.empty());
  store_.reset();
  {  // Back to before the scale rows (migration 11), as a database made before the rows is.
    pqxx::connection conn(url_);
    {
      pqxx::work txn(conn);
      txn.exec(
          "DROP TABLE scale_points, scale_runs; DELETE FROM schema_migrations"
          " WHERE version = 11");
      txn.commit();
    }
    EXPECT_EQ(apply_migrations(conn), 1);
    pqxx::work txn(conn);
    EXPECT_EQ(kept_rows(txn), before);
  }
  store_ = std::make_unique<PgStore>(url_);
  EXPECT_EQ(store_->scale_kernels(), (std::vector<std::string>{"k1", "k2"}));
}

}  // namespace
}  // namespace leapfrog::coord
