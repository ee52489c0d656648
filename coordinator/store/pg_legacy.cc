// Migration 18 (pg_legacy.h).

#include "coordinator/store/pg_legacy.h"

#include <map>
#include <pqxx/pqxx>
#include <string>
#include <vector>

#include "common/outcome/legacy.h"
#include "coordinator/store/pg_scale.h"
#include "coordinator/store/pg_util.h"

namespace leapfrog::coord {
namespace {

int upgrade_outcomes(pqxx::work& txn) {
  return rewrite_outcome_values(txn, [](const std::string& stored) -> std::optional<std::string> {
    v1::Outcome o;
    try {
      o = parse_outcome(stored);
    } catch (const StoreError&) {
      return std::nullopt;  // left as it is: its readers refuse it as they did
    }
    if (!upgrade_legacy(o)) return std::nullopt;
    return pack_outcome(o.SerializeAsString());
  });
}

// Rows per page: at 10⁷ outcomes the rows do not fit in memory at once.
constexpr int kPage = 1000;

// The JSON details of one outcome's rows, typed into its violation_details
// value (merged into the one it has, if any: an entry set there stays).
int upgrade_details(pqxx::work& txn, int64_t job, int64_t attempt) {
  v1::ViolationDetails all;
  const auto have = txn.exec_params(
      "SELECT details FROM violation_details WHERE job_id = $1 AND attempt = $2", job, attempt);
  if (!have.empty()) {
    const pqxx::binarystring b(have[0][0]);
    if (!all.ParseFromString(b.str())) all.Clear();  // replaced: its readers refused it
  }
  int typed = 0;
  for (const auto& r :
       txn.exec_params("SELECT idx, detail FROM violations WHERE job_id = $1 AND attempt = $2"
                       " AND detail <> '' AND detail_pb IS NULL",
                       job, attempt)) {
    const int idx = r[0].as<int>();
    if (idx < 0) continue;
    while (all.details_size() <= idx) all.add_details();
    if (all.details(idx).ByteSizeLong() > 0) continue;
    auto d = legacy_detail(r[1].as<std::string>());
    if (!d) continue;  // not JSON: the old readers showed no detail either
    *all.mutable_details(idx) = std::move(*d);
    ++typed;
  }
  if (typed > 0)
    txn.exec_params(
        "INSERT INTO violation_details (job_id, attempt, details) VALUES ($1, $2, $3)"
        " ON CONFLICT (job_id, attempt) DO UPDATE SET details = excluded.details",
        job, attempt, pqxx::binarystring(all.SerializeAsString()));
  txn.exec_params(
      "UPDATE violations SET detail = '' WHERE job_id = $1 AND attempt = $2"
      " AND detail <> ''",
      job, attempt);
  return typed;
}

int upgrade_violations(pqxx::work& txn) {
  int upgraded = 0;
  int64_t after_job = -1;
  int64_t after_attempt = -1;
  for (;;) {
    const auto rows = txn.exec_params(
        "SELECT DISTINCT job_id, attempt FROM violations"
        " WHERE detail <> '' AND (job_id, attempt) > ($1, $2)"
        " ORDER BY job_id, attempt LIMIT $3",
        after_job, after_attempt, kPage);
    if (rows.empty()) return upgraded;
    for (const auto& r : rows) {
      after_job = r[0].as<int64_t>();
      after_attempt = r[1].as<int64_t>();
      upgraded += upgrade_details(txn, after_job, after_attempt);
    }
  }
}

int upgrade_examples(pqxx::work& txn) {
  int upgraded = 0;
  int64_t after = 0;
  for (;;) {
    const auto rows = txn.exec_params(
        "SELECT id, example_violation FROM issues WHERE id > $1 ORDER BY id LIMIT $2", after,
        kPage);
    if (rows.empty()) return upgraded;
    for (const auto& r : rows) {
      after = r[0].as<int64_t>();
      v1::Violation v;
      const pqxx::binarystring b(r[1]);
      if (!v.ParseFromString(b.str()) || !upgrade_legacy(v)) continue;
      txn.exec_params("UPDATE issues SET example_violation = $2 WHERE id = $1", after,
                      pqxx::binarystring(v.SerializeAsString()));
      ++upgraded;
    }
  }
}

}  // namespace

LegacyUpgrade upgrade_legacy_rows(pqxx::work& txn) {
  LegacyUpgrade u;
  u.outcomes = upgrade_outcomes(txn);
  // A lookup-scale run whose points were only in its JSON gets its rows.
  if (u.outcomes > 0) u.scale_runs = backfill_scale_runs(txn);
  u.violations = upgrade_violations(txn);
  u.examples = upgrade_examples(txn);
  return u;
}

}  // namespace leapfrog::coord
