// PgStore's counts for monitoring (pg_stats.h). Every read here is bounded
// by something other than the number of outcomes: the per-campaign
// summaries, the jobs not done yet (partial index jobs_pending), issues,
// agents.

#include <pqxx/pqxx>

#include "coordinator/store/migrations.h"
#include "coordinator/store/pg_pool.h"
#include "coordinator/store/pg_store.h"

namespace leapfrog::coord {

PgStoreStats PgStore::stats(TimePoint online_since) {
  return run_transaction(*pool_, "stats", [&](pqxx::work& txn) {
    PgStoreStats s;
    for (const char* state : {"queued", "leased", "waiting", "done"}) s.jobs_by_state[state] = 0;
    for (const auto& r :
         txn.exec("SELECT state, count(*) FROM jobs WHERE state <> 'done' GROUP BY 1"))
      s.jobs_by_state[r[0].as<std::string>()] = r[1].as<uint64_t>();
    for (const auto& r :
         txn.exec("SELECT verdict, sum(done)::bigint, sum(outcomes)::bigint FROM campaign_verdicts"
                  " GROUP BY 1")) {
      s.jobs_by_state["done"] += r[1].as<uint64_t>();
      s.outcomes_by_verdict[r[0].as<int>()] = r[2].as<uint64_t>();
    }
    for (const auto& r : txn.exec("SELECT status, count(*) FROM issues GROUP BY 1"))
      s.issues_by_status[r[0].as<int>()] = r[1].as<uint64_t>();
    const auto agents = txn.exec_params1(
        "SELECT count(*), count(*) FILTER (WHERE last_seen >= lf_ts($1)) FROM agents",
        std::chrono::duration_cast<std::chrono::microseconds>(online_since.time_since_epoch())
            .count());
    s.agents = agents[0].as<uint64_t>();
    s.agents_online = agents[1].as<uint64_t>();
    s.schema_version =
        txn.exec1("SELECT coalesce(max(version), 0) FROM schema_migrations")[0].as<int>();
    s.schema_wanted = schema_migrations().back().version;
    return s;
  });
}

std::vector<PgPoolUse> PgStore::pool_use() {
  return {pool_->use("store"), report_pool_->use("reports"), lease_pool_->use("leases")};
}

}  // namespace leapfrog::coord
