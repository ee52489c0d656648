#include "coordinator/store/pg_agents.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <map>
#include <set>

#include "coordinator/store/pg_lease_keys.h"
#include "coordinator/store/pg_util.h"

namespace leapfrog::coord {

std::vector<PgStatement> agent_statements() {
  // The counts of a heartbeat that carried them (r.ops >= 0), for the
  // attempt it renews.
  static constexpr const char* kProgressSet =
      "  progress_attempt = CASE WHEN r.ops >= 0 THEN j.attempt ELSE j.progress_attempt END,"
      "  progress_operations = CASE WHEN r.ops >= 0 THEN r.ops ELSE j.progress_operations END,"
      "  progress_lookups = CASE WHEN r.ops >= 0 THEN r.lookups ELSE j.progress_lookups END,"
      "  progress_violations = CASE WHEN r.ops >= 0 THEN r.violations"
      "   ELSE j.progress_violations END,"
      "  progress_at = CASE WHEN r.ops >= 0 THEN lf_ts(r.progress_us) ELSE j.progress_at END";
  return {
      {"touch_agents",
       "UPDATE agents a SET last_seen = greatest(a.last_seen,"
       "  timestamptz 'epoch' + t.us * interval '1 microsecond')"
       " FROM unnest($1::text[], $2::bigint[]) AS t(id, us) WHERE a.id = t.id"},
      // renew_lease for several callers, each on a job of its own.
      {"renew_leases",
       "UPDATE jobs j SET lease_deadline = timestamptz 'epoch' + r.deadline * interval '1 microsecond',"
       + std::string(kProgressSet) +
       " FROM unnest($1::bigint[], $2::int[], $3::text[], $4::bigint[], $5::text[],"
       "  $6::bigint[], $7::bigint[], $8::bigint[], $9::bigint[])"
       "  WITH ORDINALITY AS r(job_id, attempt, agent_id, deadline, key, ops, lookups, violations,"
       "  progress_us, n)"
       " WHERE j.id = r.job_id AND j.attempt = r.attempt AND j.agent_id = r.agent_id"
       "  AND j.state = 'leased' AND " +
           key_matches_sql("r.attempt", "r.key") +  // holders: j's, unnest has none
           " RETURNING r.n, (extract(epoch FROM j.lease_deadline) * 1000000)::bigint"},
  };
}

void write_touches(PgPool& pool, PgTouchWriter::Batch& batch) {
  std::map<std::string, int64_t> latest;
  for (auto* item : batch) {
    item->result = true;
    if (item->request.barrier) continue;
    int64_t& at = latest[item->request.agent_id];
    at = std::max(at, item->request.at_us);
  }
  if (latest.empty()) return;
  std::vector<std::string> ids;
  std::vector<int64_t> times;
  for (const auto& [id, at] : latest) {
    ids.push_back(id);
    times.push_back(at);
  }
  try {
    run_autocommit(pool, "touch_agents", [&](pqxx::nontransaction& txn) {
      txn.exec_prepared("touch_agents", text_array(ids), number_array(times));
    });
  } catch (const StoreError& e) {
    // A touch only says the agent was seen: the next one comes within a
    // heartbeat interval.
    spdlog::warn("agents_touch_failed agents={} error=\"{}\"", ids.size(), e.what());
  }
}

void write_renewals(PgPool& pool, PgRenewals::Batch& batch) {
  // One statement updates a row once: a job asked for twice (a retried
  // heartbeat) waits for the next round.
  std::vector<PgRenewals::Item*> left(batch.begin(), batch.end());
  while (!left.empty()) {
    std::vector<PgRenewals::Item*> round, later;
    std::set<int64_t> jobs;
    for (auto* item : left) (jobs.insert(item->request.job_id).second ? round : later).push_back(item);
    left = std::move(later);
    std::vector<int64_t> job_ids, deadlines, ops, lookups, violations, progress_us;
    std::vector<uint32_t> attempts;
    std::vector<std::string> agents, keys;
    for (const auto* item : round) {
      job_ids.push_back(item->request.job_id);
      attempts.push_back(item->request.attempt);
      agents.push_back(item->request.agent_id);
      deadlines.push_back(item->request.deadline_us);
      keys.push_back(item->request.key);
      ops.push_back(item->request.operations);
      lookups.push_back(item->request.lookups_judged);
      violations.push_back(item->request.violations);
      progress_us.push_back(item->request.progress_us);
    }
    try {
      auto renewed = run_autocommit(pool, "renew_lease", [&](pqxx::nontransaction& txn) {
        std::vector<std::optional<TimePoint>> out(round.size());
        if (round.size() == 1) {
          const PgRenew& r = round[0]->request;
          auto rows = txn.exec_prepared("renew_lease", r.job_id, r.attempt, r.agent_id,
                                        r.deadline_us, r.key, r.operations, r.lookups_judged,
                                        r.violations, r.progress_us);
          if (!rows.empty()) out[0] = TimePoint(Duration(rows[0][0].as<int64_t>()));
          return out;
        }
        for (const auto& row : txn.exec_prepared("renew_leases", number_array(job_ids),
                                                 number_array(attempts), text_array(agents),
                                                 number_array(deadlines), text_array(keys),
                                                 number_array(ops), number_array(lookups),
                                                 number_array(violations),
                                                 number_array(progress_us)))
          out.at(row[0].as<size_t>() - 1) = TimePoint(Duration(row[1].as<int64_t>()));
        return out;
      });
      for (size_t i = 0; i < round.size(); ++i) round[i]->result = renewed[i];
    } catch (...) {
      for (auto* item : round) item->error = std::current_exception();
    }
  }
}

}  // namespace leapfrog::coord
