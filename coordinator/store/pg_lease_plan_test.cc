// The group lease runs its statements with generic plans (PgStore's lease
// pool, plan_cache_mode = force_generic_plan). Those plans must still take
// the oldest queued jobs through the jobs_queued index, whatever share of
// the jobs is queued: a plan that walks the table costs every lease the
// campaign's length.

#include <gtest/gtest.h>

#include <pqxx/pqxx>
#include <string>

#include "coordinator/pg/test_postgres.h"
#include "coordinator/store/pg_store.h"

namespace leapfrog::coord {
namespace {

const TimePoint kT0 = TimePoint(Duration(1'700'000'000'123'456));

class PgLeasePlanTest : public testing::PostgresSuite<PgLeasePlanTest> {
 protected:
  void SetUp() override {
    url_ = pg_->url(fresh_database("lease_plan"));
    store_ = std::make_unique<PgStore>(url_);
  }

  void queue(int n) {
    v1::CampaignSpec spec;
    spec.set_name("plan");
    std::vector<NewJob> jobs(static_cast<size_t>(n));
    for (size_t i = 0; i < jobs.size(); ++i) {
      jobs[i].spec.set_scenario("setattr-lookup");
      jobs[i].spec.set_fs("tmpfs");
      jobs[i].spec.set_seed(i);
      jobs[i].kernel_label = "host";
    }
    store_->create_campaign(spec, jobs, 0, kT0);
  }

  // The generic plan of the store's statement `name`, run with `args`.
  static std::string generic_plan(pqxx::dbtransaction& txn, const std::string& name,
                                  const std::string& args) {
    txn.exec("SET LOCAL plan_cache_mode = force_generic_plan");
    txn.exec("PREPARE " + name + " AS " + PgStore::statement_sql(name));
    std::string plan;
    for (const auto& row : txn.exec("EXPLAIN EXECUTE " + name + "(" + args + ")"))
      plan += row[0].as<std::string>() + "\n";
    txn.exec("DEALLOCATE " + name);
    return plan;
  }

  // The two lease statements' generic plans, joined.
  static std::string lease_plans(pqxx::dbtransaction& txn) {
    return generic_plan(txn, "lease_job", "'a', 1, 'host', '{tmpfs}', '', ''") +
           generic_plan(txn, "lease_jobs",
                        "'{a,b,c}', '{1,2,3}', 'host', '{tmpfs}', 3, '', '{\"\",\"\",\"\"}'");
  }

  static bool takes_jobs_queued(const std::string& plan) {
    return plan.find("Index Scan using jobs_queued on jobs") != std::string::npos &&
           plan.find("Seq Scan on jobs") == std::string::npos;
  }

  std::string url_;
  std::unique_ptr<PgStore> store_;
};

TEST_F(PgLeasePlanTest, GenericLeasePlansTakeTheQueuedIndex) {
  queue(20000);
  pqxx::connection conn(url_);
  {
    pqxx::nontransaction(conn).exec("ANALYZE jobs");
    pqxx::work txn(conn);
    const std::string plans = lease_plans(txn);
    EXPECT_TRUE(takes_jobs_queued(plans)) << "every job queued:\n" << plans;
  }
  {
    pqxx::nontransaction(conn).exec(
        "UPDATE jobs SET state = 'done' WHERE id < (SELECT max(id) - 100 FROM jobs)");
    pqxx::nontransaction(conn).exec("ANALYZE jobs");
    pqxx::work txn(conn);
    const std::string plans = lease_plans(txn);
    EXPECT_TRUE(takes_jobs_queued(plans)) << "most jobs done:\n" << plans;
  }
  // Positive control: without the index the check fires.
  pqxx::work txn(conn);
  txn.exec("DROP INDEX jobs_queued");
  const std::string plans = lease_plans(txn);
  EXPECT_FALSE(takes_jobs_queued(plans)) << plans;
}

}  // namespace
}  // namespace leapfrog::coord
