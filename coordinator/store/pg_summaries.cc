#include "coordinator/store/pg_summaries.h"

#include "coordinator/store/pg_util.h"

namespace leapfrog::coord {

#define LF_RECOUNT_CELLS                                                                       \
  "SELECT campaign_id, scenario, kernel_label, fs, verdict, coalesce(d.done, 0)::int AS done," \
  "  coalesce(o.outcomes, 0)::bigint AS outcomes,"                                             \
  "  coalesce(o.violations, 0)::bigint AS violations"                                          \
  " FROM (SELECT campaign_id, scenario, kernel_label, fs, coalesce(verdict, 0) AS verdict,"    \
  "   count(*) AS done FROM jobs WHERE state = 'done' GROUP BY 1, 2, 3, 4, 5) d"               \
  " FULL JOIN (SELECT j.campaign_id, j.scenario, j.kernel_label, j.fs, o.verdict,"             \
  "   count(*) AS outcomes, sum(o.violation_count) AS violations"                              \
  "   FROM outcomes o JOIN jobs j ON j.id = o.job_id GROUP BY 1, 2, 3, 4, 5) o"                \
  "  USING (campaign_id, scenario, kernel_label, fs, verdict)"                                 \
  " WHERE coalesce(d.done, 0) <> 0 OR coalesce(o.outcomes, 0) <> 0"                            \
  "  OR coalesce(o.violations, 0) <> 0"

const char* const kRecountCellVerdicts = LF_RECOUNT_CELLS;
const char* const kKeptCellVerdicts =
    "SELECT campaign_id, scenario, kernel_label, fs, verdict, done, outcomes, violations"
    " FROM cell_verdicts WHERE done <> 0 OR outcomes <> 0 OR violations <> 0";
const char* const kRecountCampaignVerdicts =
    "SELECT campaign_id, verdict, sum(done)::int, sum(outcomes)::bigint, sum(violations)::bigint"
    " FROM (" LF_RECOUNT_CELLS ") c GROUP BY 1, 2";
const char* const kKeptCampaignVerdicts =
    "SELECT campaign_id, verdict, done, outcomes, violations FROM campaign_verdicts"
    " WHERE done <> 0 OR outcomes <> 0 OR violations <> 0";

#undef LF_RECOUNT_CELLS

void SummaryDelta::job_done(const CellKey& cell, int verdict, int n) {
  cells_[{cell, verdict}].done += n;
}

void SummaryDelta::outcome(const CellKey& cell, int verdict, int64_t violations) {
  Counts& c = cells_[{cell, verdict}];
  c.outcomes += 1;
  c.violations += violations;
}

std::vector<PgStatement> summary_statements() {
  // ORDER BY: concurrent writers lock the rows they share in one order. The
  // deltas come summed per key, so no statement touches a row twice.
  return {
      {"bump_cells",
       "INSERT INTO cell_verdicts AS s (campaign_id, scenario, kernel_label, fs, verdict, done,"
       "  outcomes, violations)"
       " SELECT * FROM unnest($1::bigint[], $2::text[], $3::text[], $4::text[], $5::int[],"
       "  $6::int[], $7::bigint[], $8::bigint[])"
       "  AS d(campaign_id, scenario, kernel_label, fs, verdict, done, outcomes, violations)"
       " ORDER BY campaign_id, scenario, kernel_label, fs, verdict"
       " ON CONFLICT (campaign_id, scenario, kernel_label, fs, verdict) DO UPDATE SET"
       "  done = s.done + excluded.done, outcomes = s.outcomes + excluded.outcomes,"
       "  violations = s.violations + excluded.violations"},
      {"bump_campaigns",
       "INSERT INTO campaign_verdicts AS s (campaign_id, verdict, done, outcomes, violations)"
       " SELECT * FROM unnest($1::bigint[], $2::int[], $3::int[], $4::bigint[], $5::bigint[])"
       "  AS d(campaign_id, verdict, done, outcomes, violations)"
       " ORDER BY campaign_id, verdict"
       " ON CONFLICT (campaign_id, verdict) DO UPDATE SET"
       "  done = s.done + excluded.done, outcomes = s.outcomes + excluded.outcomes,"
       "  violations = s.violations + excluded.violations"},
  };
}

void SummaryDelta::apply(pqxx::work& txn) const {
  if (cells_.empty()) return;
  std::vector<int64_t> campaigns, done, outcomes, violations;
  std::vector<std::string> scenarios, kernels, filesystems;
  std::vector<int> verdicts;
  std::map<std::pair<int64_t, int>, Counts> by_campaign;
  for (const auto& [key, c] : cells_) {
    const auto& [cell, verdict] = key;
    if (c.done == 0 && c.outcomes == 0 && c.violations == 0) continue;
    campaigns.push_back(cell.campaign_id);
    scenarios.push_back(cell.scenario);
    kernels.push_back(cell.kernel_label);
    filesystems.push_back(cell.fs);
    verdicts.push_back(verdict);
    done.push_back(c.done);
    outcomes.push_back(c.outcomes);
    violations.push_back(c.violations);
    Counts& t = by_campaign[{cell.campaign_id, verdict}];
    t.done += c.done;
    t.outcomes += c.outcomes;
    t.violations += c.violations;
  }
  if (campaigns.empty()) return;
  txn.exec_prepared("bump_cells", number_array(campaigns), text_array(scenarios),
                    text_array(kernels), text_array(filesystems), number_array(verdicts),
                    number_array(done), number_array(outcomes), number_array(violations));
  std::vector<int64_t> c_ids, c_done, c_outcomes, c_violations;
  std::vector<int> c_verdicts;
  for (const auto& [key, c] : by_campaign) {
    c_ids.push_back(key.first);
    c_verdicts.push_back(key.second);
    c_done.push_back(c.done);
    c_outcomes.push_back(c.outcomes);
    c_violations.push_back(c.violations);
  }
  txn.exec_prepared("bump_campaigns", number_array(c_ids), number_array(c_verdicts),
                    number_array(c_done), number_array(c_outcomes), number_array(c_violations));
}

void add_campaign_counts(pqxx::work& txn, std::vector<v1::Campaign>& campaigns) {
  if (campaigns.empty()) return;
  std::map<int64_t, v1::Campaign*> by_id;
  std::vector<int64_t> ids;
  for (auto& c : campaigns) {
    for (const char* state : {"queued", "leased", "done"}) (*c.mutable_by_state())[state] = 0;
    by_id[c.id()] = &c;
    ids.push_back(c.id());
  }
  for (const auto& r :
       txn.exec_params("SELECT campaign_id, verdict, done, violations FROM campaign_verdicts"
                       " WHERE campaign_id = ANY($1::bigint[])",
                       number_array(ids))) {
    v1::Campaign& c = *by_id.at(r[0].as<int64_t>());
    const auto done = r[2].as<uint32_t>();
    (*c.mutable_by_state())["done"] += done;
    if (done != 0) (*c.mutable_by_verdict())[verdict_key(r[1].as<int>())] += done;
    c.set_violations(c.violations() + count_of(r[3]));
  }
  // Only campaigns still running have jobs that are not done (jobs_pending).
  std::vector<int64_t> running;
  for (auto& c : campaigns) {
    const bool done = c.by_state().at("done") >= c.jobs();
    c.set_state(done ? v1::CAMPAIGN_STATE_DONE : v1::CAMPAIGN_STATE_RUNNING);
    if (!done) running.push_back(c.id());
  }
  if (running.empty()) return;
  for (const auto& r :
       txn.exec_params("SELECT campaign_id, state, count(*) FROM jobs"
                       " WHERE campaign_id = ANY($1::bigint[]) AND state <> 'done' GROUP BY 1, 2",
                       number_array(running)))
    (*by_id.at(r[0].as<int64_t>())->mutable_by_state())[r[1].as<std::string>()] +=
        r[2].as<uint32_t>();
}

std::vector<CellSummary> read_cells(pqxx::work& txn, int64_t campaign_id) {
  std::vector<CellSummary> out;
  std::map<std::tuple<std::string, std::string, std::string>, size_t> index;
  uint32_t pending_jobs = 0;
  for (const auto& r :
       txn.exec_params("SELECT scenario, kernel_label, fs, jobs FROM cells WHERE campaign_id = $1"
                       " ORDER BY scenario, kernel_label, fs",
                       campaign_id)) {
    CellSummary c;
    c.scenario = r[0].as<std::string>();
    c.kernel_label = r[1].as<std::string>();
    c.fs = r[2].as<std::string>();
    c.jobs = r[3].as<uint32_t>();
    pending_jobs += c.jobs;
    index[{c.scenario, c.kernel_label, c.fs}] = out.size();
    out.push_back(std::move(c));
  }
  for (const auto& r :
       txn.exec_params("SELECT scenario, kernel_label, fs, verdict, done, outcomes, violations"
                       " FROM cell_verdicts WHERE campaign_id = $1",
                       campaign_id)) {
    CellSummary& c =
        out.at(index.at({r[0].as<std::string>(), r[1].as<std::string>(), r[2].as<std::string>()}));
    const auto done = r[4].as<uint32_t>();
    if (done != 0) c.done[static_cast<v1::Verdict>(r[3].as<int>())] += done;
    pending_jobs -= std::min(pending_jobs, done);
    c.outcomes += count_of(r[5]);
    c.violations += count_of(r[6]);
  }
  if (pending_jobs == 0) return out;  // every job done: nothing to read from jobs
  for (const auto& r :
       txn.exec_params("SELECT scenario, kernel_label, fs, state, count(*) FROM jobs"
                       " WHERE campaign_id = $1 AND state <> 'done' GROUP BY 1, 2, 3, 4",
                       campaign_id)) {
    auto it = index.find({r[0].as<std::string>(), r[1].as<std::string>(), r[2].as<std::string>()});
    if (it == index.end()) continue;  // cannot be: cells are written with the jobs
    out[it->second].pending[job_state(r[3].as<std::string>())] += r[4].as<uint32_t>();
  }
  return out;
}

}  // namespace leapfrog::coord
