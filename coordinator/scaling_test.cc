// The overview's scaling flag (scaling_regressions) on a real PostgreSQL:
// nightly lookup-scale campaigns of a few runs each, stored through the
// store's report path, with known samples. A significant drop of a night's
// runs against the night before's is flagged with its points; the same runs,
// a rise, a night of a single run or a failed run are not.

#include "coordinator/scaling.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <pqxx/pqxx>

#include "common/outcome/legacy.h"
#include "common/outcome/scale_proto.h"
#include "coordinator/pg/test_postgres.h"
#include "coordinator/store/pg_store.h"

namespace leapfrog::coord {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;

const TimePoint kT0 = TimePoint(Duration(1'800'000'000'000'000));

// How a test outcome carries its run.
enum class Shape {
  Typed,    // Outcome.scale, as agents report today
  JsonOnly  // the JSON alone (old field 14), as old agents sent it
};

// A lookup-scale outcome: lseek1 processes at 1 and 2 tasks, five samples
// around `ops` each (2 % apart), as the agent writes them.
v1::Outcome scale_outcome(double ops1, double ops2, v1::Verdict verdict = v1::VERDICT_PASS,
                          Shape shape = Shape::Typed) {
  json points = json::array();
  for (const auto& [tasks, ops] : {std::pair{1, ops1}, std::pair{2, ops2}}) {
    json samples = json::array();
    for (double f : {0.98, 0.99, 1.0, 1.01, 1.02}) samples.push_back(ops * f);
    points.push_back({{"test", "lseek1"},
                      {"mode", "processes"},
                      {"tasks", tasks},
                      {"ops_per_sec", ops},
                      {"samples", samples}});
  }
  v1::Outcome o;
  o.set_verdict(verdict);
  o.set_ops(100);
  const json j{{"verdict", "pass"},
               {"scale", points},
               {"scale_host", {{"cpus", 2}, {"sample_s", 0.02}, {"warnings", {"busy"}}}}};
  if (shape == Shape::Typed) {
    *o.mutable_scale() = scale_run_from_json(j).value();
    return o;
  }
  v1::Outcome old;
  EXPECT_TRUE(old.ParseFromString(with_old_field(o, 14, j.dump())));
  return old;
}

class ScalingRegressionsTest : public testing::PostgresSuite<ScalingRegressionsTest> {
 protected:
  void SetUp() override {
    url_ = pg_->url(fresh_database("scaling"));
    store_ = std::make_unique<PgStore>(url_);
  }

  // Runs migration 18 again, as on a database that old agents wrote to.
  void migrate_again() {
    store_.reset();
    {
      pqxx::connection c(url_);
      pqxx::work txn(c);
      txn.exec("DELETE FROM schema_migrations WHERE version = 18");
      txn.commit();
    }
    store_ = std::make_unique<PgStore>(url_);
  }

  // One nightly campaign on `kernel`, `day` days after kT0: a job per
  // outcome, each leased and reported with it.
  void night(const std::string& kernel, int day, const std::vector<v1::Outcome>& runs) {
    std::vector<NewJob> jobs(runs.size());
    for (auto& j : jobs) {
      j.spec.set_scenario("lookup-scale");
      j.spec.set_fs("tmpfs");
      j.kernel_label = kernel;
    }
    v1::CampaignSpec spec;
    spec.set_name("scale-" + kernel);
    spec.set_max_attempts(1);
    const TimePoint at = kT0 + 24h * day;
    store_->create_campaign(spec, jobs, 0, at);
    v1::Capabilities caps;
    caps.set_kernel_label(kernel);
    caps.add_filesystems("tmpfs");
    for (const auto& o : runs) {
      const auto leased = store_->lease_job("a", caps, at, 30s);
      ASSERT_TRUE(leased);
      ASSERT_EQ(store_->report_outcome("a", leased->job_id(), leased->attempt(), o, at),
                ReportResult::Stored);
    }
  }
  // Three runs (boots) around ops1 and ops2: 1 % below, at, 1 % above.
  static std::vector<v1::Outcome> three(double ops1, double ops2,
                                        v1::Verdict verdict = v1::VERDICT_PASS) {
    std::vector<v1::Outcome> out;
    for (double f : {0.99, 1.0, 1.01}) out.push_back(scale_outcome(ops1 * f, ops2 * f, verdict));
    return out;
  }
  // `runs` passing runs on `kernel`, one campaign, `day` days after kT0.
  void many(const std::string& kernel, int day, int runs, const v1::Outcome& o) {
    std::vector<NewJob> jobs(static_cast<size_t>(runs));
    for (auto& j : jobs) {
      j.spec.set_scenario("lookup-scale");
      j.spec.set_fs("tmpfs");
      j.kernel_label = kernel;
    }
    v1::CampaignSpec spec;
    spec.set_name("busy");
    const TimePoint at = kT0 + 24h * day;
    store_->create_campaign(spec, jobs, 0, at);
    v1::Capabilities caps;
    caps.set_kernel_label(kernel);
    caps.add_filesystems("tmpfs");
    for (int i = 0; i < runs; ++i) {
      const auto leased = store_->lease_job("a", caps, at, 30s);
      ASSERT_TRUE(leased);
      ASSERT_EQ(store_->report_outcome("a", leased->job_id(), leased->attempt(), o, at),
                ReportResult::Stored);
    }
  }
  std::string url_;
  std::unique_ptr<PgStore> store_;
};

TEST_F(ScalingRegressionsTest, ASignificantDropAgainstTheNightBeforeIsFlagged) {
  EXPECT_TRUE(scaling_regressions(*store_).empty());
  night("steady", 0, three(1e6, 2e6));
  night("steady", 1, three(1e6, 2e6));  // the same runs: within noise
  night("faster", 0, three(1e6, 2e6));
  night("faster", 1, three(1.3e6, 2.6e6));  // significant, but a rise
  night("once", 0, three(1e6, 2e6));        // one night: nothing to compare
  night("slower", 0, three(1e6, 2e6));
  night("slower", 1, three(1e6, 1.5e6));                     // 2 tasks: -25 %
  night("slower", 2, three(1e6, 1.5e6, v1::VERDICT_ERROR));  // no passing run
  const auto flagged = scaling_regressions(*store_);
  ASSERT_EQ(flagged.size(), 1u);
  EXPECT_EQ(flagged[0].kernel, "slower");
  EXPECT_EQ(flagged[0].before_runs, 3u);
  EXPECT_EQ(flagged[0].after_runs, 3u);
  ASSERT_EQ(flagged[0].drops.size(), 1u);
  EXPECT_EQ(flagged[0].drops[0].tasks, 2u);
  EXPECT_EQ(flagged[0].drops[0].change.after.n, 3u);  // three boots a side
  EXPECT_NEAR(flagged[0].drops[0].change.change_pct, -25.0, 0.01);
  EXPECT_LT(flagged[0].before.job_id(), flagged[0].after.job_id());

  // The next night recovers: the flag goes, although the answer was cached.
  night("slower", 3, three(1e6, 2e6));
  EXPECT_TRUE(scaling_regressions(*store_).empty());
}

// A night of a single run says nothing of the noise between boots: a drop
// of 25 % from one run to one run is not flagged, while the same drop over
// two runs a night is (the control).
TEST_F(ScalingRegressionsTest, SingleRunNightsAreNotFlagged) {
  night("single", 0, {scale_outcome(1e6, 2e6)});
  night("single", 1, {scale_outcome(1e6, 1.5e6)});
  night("pairs", 0, {scale_outcome(1e6, 2e6), scale_outcome(1.01e6, 2.02e6)});
  night("pairs", 1, {scale_outcome(1e6, 1.5e6), scale_outcome(1.01e6, 1.51e6)});
  const auto flagged = scaling_regressions(*store_);
  ASSERT_EQ(flagged.size(), 1u);
  EXPECT_EQ(flagged[0].kernel, "pairs");
  // Against the runs' samples alone, the single runs' drop is significant.
  const ScalingRuns latest = latest_scaling_runs(*store_, {"single"});
  const auto sets = scaling_sets(*store_, {"single"}, 2);
  ASSERT_EQ(sets[0].size(), 2u);
  const auto by_samples = compare_points(scale_points(sets[0][1]), scale_points(sets[0][0]));
  EXPECT_EQ(by_samples.at(1).change.significance, stats::Significance::Significant);
  const auto by_runs = compare_runs({run_points(sets[0][1])}, {run_points(sets[0][0])});
  EXPECT_EQ(by_runs.at(1).change.significance, stats::Significance::TooFewRuns);
  EXPECT_EQ(latest.runs[0].job_id(), sets[0][0].job_id());
}

// A kernel's run set is its latest campaign's runs; `last` takes its newest
// runs across campaigns instead.
TEST_F(ScalingRegressionsTest, SetsAreTheLatestCampaignOrTheNewestRuns) {
  night("k", 0, three(1e6, 2e6));
  night("k", 1, three(1e6, 2e6));
  night("k", 2, {scale_outcome(1e6, 2e6)});
  night("j", 0, three(1e6, 2e6));
  const auto sets = scaling_sets(*store_, {"k", "j"});
  ASSERT_EQ(sets.size(), 2u);
  EXPECT_EQ(sets[0].size(), 1u);
  EXPECT_EQ(sets[1].size(), 3u);
  EXPECT_GT(sets[1][0].job_id(), sets[1][2].job_id());  // newest first
  EXPECT_EQ(scaling_sets(*store_, {"k"}, 5)[0].size(), 5u);
  EXPECT_THROW(scaling_sets(*store_, {"k", "never"}), NoScalingRun);
}

}  // namespace
}  // namespace leapfrog::coord

namespace leapfrog::coord {
namespace {

// Before the runs were rows, only the latest 500 lookup-scale outcomes were
// read: a kernel whose runs were older was "not found" and never flagged.
TEST_F(ScalingRegressionsTest, AKernelWhoseRunsAreOlderThan600OthersIsFoundAndFlagged) {
  night("old", 0, three(1e6, 2e6));
  night("old", 1, three(1e6, 1.5e6));  // 2 tasks: -25 %
  many("busy", 2, 600, scale_outcome(1e6, 2e6));
  const ScalingRuns found = latest_scaling_runs(*store_, {"old"});
  ASSERT_EQ(found.runs.size(), 1u);
  EXPECT_EQ(found.runs[0].kernel_label(), "old");
  EXPECT_EQ(scale_points(found.runs[0]).at(1).ops_per_sec, 1.5e6 * 1.01);
  EXPECT_EQ(found.available, (std::vector<std::string>{"busy", "old"}));
  const ScalingRuns every = latest_scaling_runs(*store_, {});
  ASSERT_EQ(every.runs.size(), 2u);
  EXPECT_EQ(every.runs[1].job_id(), found.runs[0].job_id());
  EXPECT_THROW(latest_scaling_runs(*store_, {"never"}), NoScalingRun);

  const auto flagged = scaling_regressions(*store_);
  ASSERT_EQ(flagged.size(), 1u);
  EXPECT_EQ(flagged[0].kernel, "old");
  EXPECT_EQ(flagged[0].after.job_id(), found.runs[0].job_id());
  ASSERT_EQ(flagged[0].drops.size(), 1u);
  EXPECT_NEAR(flagged[0].drops[0].change.change_pct, -25.0, 0.01);
}

// A run stored before Outcome.scale existed (its JSON alone), once migration
// 18 converted it, reads as the same run stored typed.
TEST_F(ScalingRegressionsTest, ARunStoredBeforeTypedScaleReadsAsTheTypedOne) {
  night("old", 0, {scale_outcome(1e6, 2e6, v1::VERDICT_PASS, Shape::JsonOnly)});
  night("typed", 0, {scale_outcome(1e6, 2e6)});
  EXPECT_THROW(latest_scaling_runs(*store_, {"old"}), NoScalingRun);  // no reader takes JSON
  migrate_again();
  const ScalingRuns found = latest_scaling_runs(*store_, {"old", "typed"});
  ASSERT_EQ(found.runs.size(), 2u);
  EXPECT_TRUE(found.runs[0].outcome().has_scale());
  const auto old_points = scale_points(found.runs[0]);
  const auto typed_points = scale_points(found.runs[1]);
  ASSERT_EQ(old_points.size(), 2u);
  ASSERT_EQ(typed_points.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(to_json(old_points[i]), to_json(typed_points[i]));
    EXPECT_EQ(typed_points[i].mode, "processes");
    EXPECT_EQ(typed_points[i].samples.size(), 5u);
  }
  EXPECT_EQ(old_points[1].ops_per_sec, 2e6);
  const json old_host = scale_host(found.runs[0]);
  EXPECT_EQ(old_host, scale_host(found.runs[1]));
  EXPECT_EQ(old_host["cpus"], 2);
  EXPECT_EQ(old_host["sample_s"], 0.02);
  EXPECT_EQ(old_host["load_average"], -1.0);  // the default of a field it lacks
  EXPECT_EQ(old_host["warnings"], json::array({"busy"}));
  // The rows the store kept agree with both.
  ScaleRunQuery q;
  q.kernels = {"old", "typed"};
  const auto rows = store_->scale_runs(q);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(json::parse(rows[0].host_json), json::parse(rows[1].host_json));
  ASSERT_EQ(rows[1].points.size(), 2u);
  EXPECT_EQ(rows[1].points[1].samples, typed_points[1].samples);
  // No run: no points, no host.
  v1::OutcomeRecord none;
  EXPECT_TRUE(scale_points(none).empty());
  EXPECT_TRUE(scale_host(none).is_null());
}

}  // namespace
}  // namespace leapfrog::coord
