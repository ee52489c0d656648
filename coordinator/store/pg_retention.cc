// Retention (PgStore::apply_retention): outcomes older than a cutoff lose
// what only their own page ever shows, in batches, oldest first:
//   - a passing outcome drops its run's notes and timing (Outcome.run; its
//     counts stay) and its widening control checks;
//     lookup-scale outcomes keep theirs;
//   - any other outcome keeps every violation row, and loses the history
//     excerpt of each violation (in the outcome's violation_details value,
//     or in older rows' detail_pb), which the timeline draws; the versions
//     and steps stay;
//   - an outcome that is an issue's example when retention reaches it is
//     kept whole: the issue page draws its timeline.
// Counters, verdicts, violation rows and the summaries are never touched.
// Each outcome is looked at once (outcomes.trimmed, migration 9).

#include <optional>
#include <pqxx/pqxx>
#include <string>
#include <vector>

#include "coordinator/store/pg_pool.h"
#include "coordinator/store/pg_store.h"
#include "coordinator/store/pg_util.h"

namespace leapfrog::coord {
namespace {

constexpr int kPass = v1::VERDICT_PASS;

}  // namespace

RetentionPass PgStore::apply_retention(TimePoint cutoff, uint32_t batch) {
  return run_transaction(*pool_, "apply_retention", [&](pqxx::work& txn) {
    RetentionPass pass;
    const auto rows = txn.exec_params(
        "SELECT o.job_id, o.attempt, o.verdict, o.outcome, j.scenario,"
        "  EXISTS (SELECT 1 FROM issues i"
        "          WHERE i.example_job = o.job_id AND i.example_attempt = o.attempt)"
        " FROM outcomes o JOIN jobs j ON j.id = o.job_id"
        " WHERE NOT o.trimmed AND o.reported_at < lf_ts($1)"
        " ORDER BY o.reported_at LIMIT $2 FOR UPDATE OF o SKIP LOCKED",
        cutoff.time_since_epoch().count(), static_cast<int64_t>(batch));
    for (const auto& r : rows) {
      const int64_t job = r[0].as<int64_t>();
      const int attempt = r[1].as<int>();
      const int verdict = r[2].as<int>();
      const bool scale = r[4].as<std::string>() == "lookup-scale";
      const bool example = r[5].as<bool>();
      ++pass.outcomes;
      if (!example) {
        const pqxx::binarystring blob(r[3]);
        std::optional<v1::Outcome> parsed;
        try {
          parsed = parse_outcome(blob.str());
        } catch (const StoreError&) {
          // Left as it is: nothing to trim in what does not parse.
        }
        if (parsed) {
          v1::Outcome& o = *parsed;
          const size_t before = blob.size();
          bool changed = false;
          if (verdict == kPass && !scale) {
            changed = o.widening().control_checks_size() > 0 || o.run().notes_size() > 0 ||
                      o.run().has_timing();
            o.mutable_widening()->clear_control_checks();
            if (o.has_run()) {
              o.mutable_run()->clear_notes();
              o.mutable_run()->clear_timing();
            }
          }
          if (changed) {
            const std::string after = pack_outcome(o.SerializeAsString());
            txn.exec_params("UPDATE outcomes SET outcome = $3 WHERE job_id = $1 AND attempt = $2",
                            job, attempt, pqxx::binarystring(after));
            pass.bytes_freed += before > after.size() ? before - after.size() : 0;
            ++pass.outcomes_trimmed;
          }
        }
        if (verdict != kPass) {
          // The outcome's one value of typed details (violation_details).
          for (const auto& d : txn.exec_params(
                   "SELECT details FROM violation_details WHERE job_id = $1 AND attempt = $2", job,
                   attempt)) {
            const pqxx::binarystring blob(d[0]);
            v1::ViolationDetails all;
            if (!all.ParseFromString(blob.str())) continue;
            int dropped = 0;
            for (auto& one : *all.mutable_details()) {
              if (one.history_size() == 0) continue;
              one.clear_history();
              ++dropped;
            }
            if (dropped == 0) continue;
            const std::string kept = all.SerializeAsString();
            txn.exec_params(
                "UPDATE violation_details SET details = $3 WHERE job_id = $1 AND attempt = $2", job,
                attempt, pqxx::binarystring(kept));
            pass.bytes_freed += blob.size() - std::min(blob.size(), kept.size());
            pass.excerpts_dropped += dropped;
          }
          // Rows stored between migrations 14 and 15 hold their own.
          for (const auto& v : txn.exec_params("SELECT idx, detail_pb FROM violations"
                                               " WHERE job_id = $1 AND attempt = $2"
                                               " AND detail_pb IS NOT NULL",
                                               job, attempt)) {
            const pqxx::binarystring blob(v[1]);
            v1::ViolationDetail d;
            if (!d.ParseFromString(blob.str()) || d.history_size() == 0) continue;
            d.clear_history();
            const std::string kept = d.SerializeAsString();
            txn.exec_params(
                "UPDATE violations SET detail_pb = $4 WHERE job_id = $1 AND attempt = $2"
                " AND idx = $3",
                job, attempt, v[0].as<int>(), pqxx::binarystring(kept));
            pass.bytes_freed += blob.size() - std::min(blob.size(), kept.size());
            ++pass.excerpts_dropped;
          }
        }
      } else {
        ++pass.examples_kept;
      }
      txn.exec_params("UPDATE outcomes SET trimmed = true WHERE job_id = $1 AND attempt = $2", job,
                      attempt);
    }
    return pass;
  });
}

}  // namespace leapfrog::coord
