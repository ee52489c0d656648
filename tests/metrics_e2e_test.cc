// GET /metrics, /healthz and /readyz of a real `leapfrog serve` (issue 21
// §3) on a PostgreSQL started here, with real agents running a small
// campaign: the exposition passes `promtool check metrics` before and after,
// and its counters and gauges move with the jobs; promtool refuses the same
// exposition once broken (the checker fires); /readyz answers 503 while the
// database is stopped and 200 again once it is back. Needs root, like the agent.

#include <gtest/gtest.h>

#include <chrono>
#include <optional>
#include <string>

#include "coordinator/metrics/promtool_check.h"
#include "tests/coordinator_fixture.h"
#include "tests/http_util.h"

namespace {

using namespace leapfrog::testing;
using leapfrog::metrics::testing::promtool_check;
using leapfrog::metrics::testing::sample;

class MetricsE2E : public CoordinatorE2E {
 protected:
  // The HTTP port `serve` wrote to its data folder (http://127.0.0.1:PORT).
  int http_port(const Coordinator& c) {
    std::string url;
    EXPECT_TRUE(poll_until([&] { return !(url = slurp(c.data_dir + "/http")).empty(); }, 30s));
    return std::stoi(url.substr(url.rfind(':') + 1));
  }

  // A scrape that must pass promtool.
  std::string scrape(int port) {
    const Answer a = http_get(port, "/metrics");
    EXPECT_EQ(a.status, 200) << a.head << a.body;
    EXPECT_NE(a.head.find("Content-Type: text/plain; version=0.0.4"), std::string::npos) << a.head;
    const auto r = promtool_check(a.body);
    EXPECT_EQ(r.exit, 0) << r.output << "\n" << a.body;
    EXPECT_EQ(r.output, "");
    return a.body;
  }

  // Waits until a scrape shows `series` at `want` (database counts are cached for seconds).
  void wait_sample(int port, const std::string& series, double want) {
    std::optional<double> got;
    EXPECT_TRUE(
        poll_until([&] { return (got = sample(http_get(port, "/metrics").body, series)) == want; },
                   30s, 200ms))
        << series << " is " << (got ? std::to_string(*got) : "absent") << ", want " << want;
  }
};

TEST_F(MetricsE2E, MetricsPassPromtoolAndMoveAsACampaignRuns) {
  start_postgres();
  const Coordinator c = start_serve("serve");
  const int port = http_port(c);
  const std::string before = scrape(port);
  EXPECT_EQ(sample(before, R"(leapfrog_leases_total{kind="test"})"), 0) << before;
  EXPECT_EQ(sample(before, R"(leapfrog_outcomes_total{verdict="pass"})"), 0);
  EXPECT_EQ(sample(before, "leapfrog_report_store_seconds_count"), 0);
  EXPECT_EQ(sample(before, "leapfrog_serving"), 1);
  EXPECT_EQ(sample(before, "leapfrog_database_up"), 1);
  EXPECT_EQ(sample(before, R"(leapfrog_jobs{state="done"})"), 0);
  EXPECT_EQ(sample(before, R"(leapfrog_db_pool_max_connections{pool="store"})"), 8);
  EXPECT_EQ(sample(before, R"(leapfrog_issues{status="new"})"), 0);
  EXPECT_GT(sample(before, "leapfrog_schema_version").value_or(0), 0);

  start_agent("agent-a", c.address);
  start_agent("agent-b", c.address);
  const int jobs = 6;
  const int64_t campaign = queue_campaign(c.address, jobs, "200ms");
  wait_done(campaign);
  expect_one_outcome_per_job(campaign, jobs);

  // The counters move as the jobs are leased and reported (a report is
  // counted just after its commit, which wait_done may see first)...
  wait_sample(port, "leapfrog_report_store_seconds_count", jobs);
  const std::string after = scrape(port);
  EXPECT_EQ(sample(after, R"(leapfrog_leases_total{kind="test"})"), jobs) << after;
  EXPECT_EQ(sample(after, R"(leapfrog_leases_total{kind="build"})"), 0);
  EXPECT_EQ(sample(after, R"(leapfrog_outcomes_total{verdict="pass"})"), jobs);
  EXPECT_EQ(sample(after, R"(leapfrog_reports_total{result="stored"})"), jobs);
  EXPECT_GT(sample(after, "leapfrog_report_store_seconds_sum").value_or(0), 0);
  EXPECT_EQ(sample(after, R"(leapfrog_report_store_seconds_bucket{le="+Inf"})"), jobs);
  EXPECT_GE(sample(after, R"(leapfrog_agent_registrations_total{vm="false"})").value_or(0), 2);
  // ... and the database counts follow within their cache time.
  wait_sample(port, R"(leapfrog_jobs{state="done"})", jobs);
  wait_sample(port, R"(leapfrog_jobs{state="queued"})", 0);
  wait_sample(port, R"(leapfrog_stored_outcomes{verdict="pass"})", jobs);
  wait_sample(port, "leapfrog_agents_online", 2);
  wait_sample(port, "leapfrog_agents_registered", 2);
  const std::string last = scrape(port);
  EXPECT_GT(sample(last, R"(leapfrog_db_pool_connections{pool="store",state="idle"})").value_or(0),
            0)
      << last;

  // The positive control: the same exposition, broken, fails promtool.
  const std::string series = R"(leapfrog_leases_total{kind="test"})";
  std::string broken = last;
  broken.replace(broken.find(series), series.size(), R"(leapfrog_leases_total{kind="test})");
  EXPECT_NE(promtool_check(broken).exit, 0) << broken;
}

TEST_F(MetricsE2E, ReadyzIs503WhileTheDatabaseIsStoppedAndHealthzStays200) {
  start_postgres();
  const Coordinator c = start_serve("serve");
  const int port = http_port(c);
  EXPECT_EQ(http_get(port, "/healthz").status, 200);
  Answer ready = http_get(port, "/readyz");
  EXPECT_EQ(ready.status, 200) << ready.body;
  EXPECT_EQ(ready.body, "ready\n");

  pg_->stop();
  EXPECT_TRUE(poll_until([&] { return (ready = http_get(port, "/readyz")).status == 503; }, 30s))
      << ready.status << " " << ready.body;
  EXPECT_NE(ready.body.find("the database does not answer"), std::string::npos) << ready.body;
  EXPECT_EQ(http_get(port, "/healthz").status, 200) << "the process is alive";
  // Metrics still answer, say why the database counts are missing, and pass promtool.
  const std::string down = scrape(port);
  EXPECT_EQ(sample(down, "leapfrog_serving"), 0) << down;
  EXPECT_EQ(sample(down, "leapfrog_database_up"), 0);
  EXPECT_FALSE(sample(down, R"(leapfrog_jobs{state="done"})").has_value()) << down;

  pg_->start(*dir_ / "pg");
  EXPECT_TRUE(poll_until([&] { return (ready = http_get(port, "/readyz")).status == 200; }, 30s))
      << ready.status << " " << ready.body;
  EXPECT_EQ(sample(scrape(port), "leapfrog_serving"), 1);
}

}  // namespace
