#pragma once
// The summaries PgStore keeps as outcomes arrive (schema migration 6): for
// each (campaign, scenario, kernel, file system) cell and for each campaign,
// counts by verdict of the jobs done, of the outcomes stored and of their
// violations. Every transaction that stores an outcome or ends a job adds its
// changes (a SummaryDelta) before it commits, so a summary is never ahead of
// or behind what it counts, whatever is killed when. Reads (campaign counters,
// the matrix) come from them, not from the jobs and outcomes they count.

#include <cstdint>
#include <map>
#include <pqxx/pqxx>
#include <string>
#include <tuple>
#include <vector>

#include "coordinator/store/pg_pool.h"
#include "coordinator/store/store.h"

namespace leapfrog::coord {

struct CellKey {
  int64_t campaign_id = 0;
  std::string scenario;
  std::string kernel_label;
  std::string fs;
  bool operator<(const CellKey& o) const {
    return std::tie(campaign_id, scenario, kernel_label, fs) <
           std::tie(o.campaign_id, o.scenario, o.kernel_label, o.fs);
  }
};

// What one transaction changes in the summaries.
class SummaryDelta {
 public:
  // A job of `cell` became done with `verdict` (n = -1: a done job's verdict
  // is replaced, the old one counted out).
  void job_done(const CellKey& cell, int verdict, int n = 1);
  // An outcome with `verdict` and `violations` was stored for a job of `cell`.
  void outcome(const CellKey& cell, int verdict, int64_t violations);
  bool empty() const { return cells_.empty(); }
  // Writes the changes: the cells', then the campaigns', each statement in
  // key order. Call it as the transaction's last statement: the rows stay
  // locked until commit, and a transaction that waits for them then holds
  // no lock another summary writer waits for, so writers never deadlock.
  void apply(pqxx::work& txn) const;

 private:
  struct Counts {
    int64_t done = 0, outcomes = 0, violations = 0;
  };
  std::map<std::pair<CellKey, int>, Counts> cells_;
};

// The statements apply() runs, prepared on every pooled connection.
std::vector<PgStatement> summary_statements();

// Counters of `campaigns` (by_state, by_verdict, violations, state) from
// the summaries, and the jobs not done yet of those still running.
void add_campaign_counts(pqxx::work& txn, std::vector<v1::Campaign>& campaigns);

// The cells of a campaign, with their counts.
std::vector<CellSummary> read_cells(pqxx::work& txn, int64_t campaign_id);

// The summaries as a recount from jobs and outcomes would make them: rows
// (campaign_id, scenario, kernel_label, fs, verdict, done, outcomes,
// violations) with a count other than 0. Migration 6 fills the summaries of
// existing data with it; tests compare the kept summaries with it.
extern const char* const kRecountCellVerdicts;
// The kept summaries in the same shape (rows of cell_verdicts).
extern const char* const kKeptCellVerdicts;
// Per campaign: campaign_verdicts, and the recount as the sum of its cells.
extern const char* const kRecountCampaignVerdicts;
extern const char* const kKeptCampaignVerdicts;

}  // namespace leapfrog::coord
