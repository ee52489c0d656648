// The summaries kept as outcomes arrive (issue 23), end to end: real agents
// run real jobs against `leapfrog serve` on a PostgreSQL started by the test,
// the coordinator is killed with SIGKILL in the middle of writing a batch of
// reports, and the summaries must still equal a recount of the jobs and
// outcomes, before and after a restart finishes the campaign. Needs root.

#include <gtest/gtest.h>
#include <libpq-fe.h>
#include <signal.h>

#include <algorithm>
#include <string>
#include <utility>

#include "coordinator/store/pg_summaries.h"
#include "tests/coordinator_fixture.h"

namespace {

using namespace leapfrog::testing;

// A connection held open across calls, for a transaction that outlives one query.
class HeldConnection {
 public:
  explicit HeldConnection(const std::string& url) : conn_(PQconnectdb(url.c_str())) {
    if (PQstatus(conn_) != CONNECTION_OK)
      throw std::runtime_error("cannot connect: " + std::string(PQerrorMessage(conn_)));
  }
  ~HeldConnection() { PQfinish(conn_); }
  HeldConnection(const HeldConnection&) = delete;
  HeldConnection& operator=(const HeldConnection&) = delete;
  void exec(const std::string& command) {
    PGresult* r = PQexec(conn_, command.c_str());
    const bool ok = PQresultStatus(r) == PGRES_COMMAND_OK || PQresultStatus(r) == PGRES_TUPLES_OK;
    const std::string error = PQresultErrorMessage(r);
    PQclear(r);
    if (!ok) throw std::runtime_error(command + ": " + error);
  }

 private:
  PGconn* conn_;
};

class SummariesE2E : public CoordinatorE2E {
 protected:
  Rows sorted(Rows rows) {
    std::sort(rows.begin(), rows.end());
    return rows;
  }
  // The kept rows and the recount's, read in one statement: one snapshot, so
  // a batch of reports that commits while the test reads cannot split them.
  std::pair<Rows, Rows> kept_and_recount(const std::string& kept, const std::string& recount) {
    Rows kept_rows, recount_rows;
    for (auto& row : sql(url(), "SELECT 'k', * FROM (" + kept + ") k UNION ALL SELECT 'r', * FROM (" +
                                    recount + ") r")) {
      const bool is_kept = row.front() == "k";
      row.erase(row.begin());
      (is_kept ? kept_rows : recount_rows).push_back(std::move(row));
    }
    return {sorted(std::move(kept_rows)), sorted(std::move(recount_rows))};
  }
  // The kept summaries equal a recount, per cell and per campaign.
  void expect_summaries_match_a_recount(const std::string& when) {
    const auto [kept, recount] = kept_and_recount(leapfrog::coord::kKeptCellVerdicts,
                                                  leapfrog::coord::kRecountCellVerdicts);
    EXPECT_EQ(kept, recount) << when;
    const auto [kept_campaigns, recount_campaigns] = kept_and_recount(
        leapfrog::coord::kKeptCampaignVerdicts, leapfrog::coord::kRecountCampaignVerdicts);
    EXPECT_EQ(kept_campaigns, recount_campaigns) << when;
    EXPECT_FALSE(kept.empty()) << when << ": nothing counted, the comparison proves nothing";
  }
};

TEST_F(SummariesE2E, SummariesMatchARecountAfterTheCoordinatorIsKilledMidBatch) {
  start_postgres();
  // A lease long enough that the restart's grace covers the agents' retries.
  const char* lease_ms = "4000";
  const Coordinator first = start_serve("serve-1", 0, "", lease_ms);
  start_agent("agent-a", first.address);
  start_agent("agent-b", first.address);
  const int jobs = 40;
  const int64_t campaign = queue_campaign(first.address, jobs, "200ms");
  wait_outcomes(campaign, 4);
  expect_summaries_match_a_recount("while the campaign runs");

  // Hold the campaign summaries' table: the next batch of reports stores its
  // outcomes, finishes its jobs and counts its cells, then waits to count
  // the campaign, in the middle of its transaction. Kill the coordinator
  // then.
  {
    HeldConnection lock(url());
    lock.exec("BEGIN");
    lock.exec("LOCK TABLE campaign_verdicts IN EXCLUSIVE MODE");
    const std::string waiting =
        "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
        " AND query LIKE '%INSERT INTO campaign_verdicts%'";
    ASSERT_TRUE(poll_until([&] { return sql_int(url(), waiting) > 0; }, 60s, 20ms))
        << "no batch of reports came to count its campaign";
    const int64_t stored = outcome_count(campaign);
    first.proc->kill9();
    lock.exec("ROLLBACK");
    // The batch's backend finds its client gone and rolls back.
    ASSERT_TRUE(poll_until([&] { return sql_int(url(), waiting) == 0; }, 30s, 20ms));
    EXPECT_TRUE(poll_until(
        [&] {
          return sql_int(url(),
                         "SELECT count(*) FROM pg_stat_activity WHERE datname ="
                         " current_database() AND state LIKE 'idle in transaction%'") == 0;
        },
        30s, 20ms));
    EXPECT_EQ(outcome_count(campaign), stored) << "the killed batch committed";
  }
  expect_summaries_match_a_recount("after kill -9 mid-batch");

  // A new coordinator on the same port; the agents' spooled reports arrive.
  start_serve("serve-2", first.port, first.data_dir, lease_ms);
  wait_done(campaign);
  expect_one_outcome_per_job(campaign, jobs);
  expect_summaries_match_a_recount("after the restart, campaign done");
  // The campaign's counters (from the summaries) say so too.
  const Result r = cli(first.address, {"campaign", "show", std::to_string(campaign), "--json"});
  ASSERT_EQ(r.exit, 0) << r.err;
  const json c = json::parse(r.out);
  EXPECT_EQ(c.at("state"), "CAMPAIGN_STATE_DONE") << r.out;
  EXPECT_EQ(c.at("by_verdict").at("pass"), jobs) << r.out;
  EXPECT_EQ(c.at("jobs_detail").size(), static_cast<size_t>(jobs)) << r.out;

  // The CLI's lists page through, and say when --limit cut them short.
  Result o = cli(first.address, {"outcomes", "--limit", "7", "--json"});
  ASSERT_EQ(o.exit, 0) << o.err;
  EXPECT_EQ(json::parse(o.out).size(), 7u);
  EXPECT_NE(o.err.find("more outcomes than --limit 7"), std::string::npos) << o.err;
  o = cli(first.address,
          {"outcomes", "--campaign", std::to_string(campaign), "--limit", "1000", "--json"});
  ASSERT_EQ(o.exit, 0) << o.err;
  EXPECT_EQ(json::parse(o.out).size(), static_cast<size_t>(jobs));
  EXPECT_EQ(o.err.find("more outcomes"), std::string::npos) << o.err;
}

}  // namespace
