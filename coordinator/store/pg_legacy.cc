// Migrations 18 and 19 (pg_legacy.h).

#include "coordinator/store/pg_legacy.h"

#include <spdlog/spdlog.h>

#include <cctype>
#include <map>
#include <pqxx/pqxx>
#include <string>
#include <vector>

#include "common/ktap/words.h"
#include "common/outcome/legacy.h"
#include "coordinator/store/pg_scale.h"
#include "coordinator/store/pg_util.h"
#include "leapfrog/v1/notify.pb.h"
#include "leapfrog/v1/triage.pb.h"

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

namespace {

// The old fields that held words (reserved in triage.proto and notify.proto).
constexpr int kOldBisectVerdict = 2;    // BisectStep.verdict
constexpr int kOldEventIssueKind = 8;   // Event.issue_kind
constexpr int kOldCellVerdict = 4;      // EventCell.verdict
constexpr int kOldFilterIssueKind = 4;  // SubscriptionFilter.issue_kind

v1::Verdict verdict_from_word(const std::string& word) {
  std::string name = "VERDICT_";
  for (char c : word) name += c == '-' ? '_' : static_cast<char>(std::toupper(c));
  v1::Verdict v = v1::VERDICT_UNSPECIFIED;
  return v1::Verdict_Parse(name, &v) ? v : v1::VERDICT_UNSPECIFIED;
}

// Rewrites, a page at a time by id, each `column` value of `table` that
// `upgrade` changed. Returns the rows rewritten.
template <typename M, typename F>
int rewrite_rows(pqxx::work& txn, const std::string& table, const std::string& column,
                 const std::string& where, F upgrade) {
  int upgraded = 0;
  int64_t after = 0;
  for (;;) {
    const auto rows = txn.exec_params("SELECT id, " + column + " FROM " + table + " WHERE " +
                                          where + " AND id > $1 ORDER BY id LIMIT $2",
                                      after, kPage);
    if (rows.empty()) return upgraded;
    for (const auto& r : rows) {
      after = r[0].as<int64_t>();
      M m;
      const pqxx::binarystring b(r[1]);
      if (!m.ParseFromString(b.str())) continue;  // left as it is: its readers refuse it
      if (!upgrade(m, after)) continue;
      txn.exec_params("UPDATE " + table + " SET " + column + " = $2 WHERE id = $1", after,
                      pqxx::binarystring(m.SerializeAsString()));
      ++upgraded;
    }
  }
}

}  // namespace

WordUpgrade upgrade_stored_words(pqxx::work& txn) {
  WordUpgrade u;
  u.bisects =
      rewrite_rows<v1::Action>(txn, "triage_actions", "action",
                               "kind = " + std::to_string(static_cast<int>(v1::ACTION_KIND_BISECT)),
                               [](v1::Action& a, int64_t) {
                                 bool changed = false;
                                 for (auto& step : *a.mutable_bisect()->mutable_steps()) {
                                   const auto word = take_old_field(step, kOldBisectVerdict);
                                   if (!word) continue;
                                   changed = true;
                                   if (step.verdict() == v1::BISECT_STEP_UNSPECIFIED)
                                     step.set_verdict(ktap::bisect_step_from(*word));
                                 }
                                 return changed;
                               });
  u.events =
      rewrite_rows<v1::Event>(txn, "notify_events", "event", "true", [](v1::Event& e, int64_t) {
        bool changed = false;
        if (const auto kind = take_old_field(e, kOldEventIssueKind)) {
          changed = true;
          if (e.issue_kind() == v1::ISSUE_KIND_UNSPECIFIED)
            e.set_issue_kind(ktap::issue_kind_from(*kind));
        }
        for (auto& c : *e.mutable_cells()) {
          const auto v = take_old_field(c, kOldCellVerdict);
          if (!v) continue;
          changed = true;
          if (c.verdict() == v1::VERDICT_UNSPECIFIED) c.set_verdict(verdict_from_word(*v));
        }
        return changed;
      });
  u.subscriptions = rewrite_rows<v1::Subscription>(
      txn, "subscriptions", "subscription", "true", [](v1::Subscription& s, int64_t id) {
        const auto kind = take_old_field(*s.mutable_filter(), kOldFilterIssueKind);
        if (!kind) return false;
        if (s.filter().issue_kind() == v1::ISSUE_KIND_UNSPECIFIED)
          s.mutable_filter()->set_issue_kind(ktap::issue_kind_from(*kind));
        // The old store took any word; one no issue has matched nothing and
        // now matches every kind: said, since no value says "never".
        if (!kind->empty() && s.filter().issue_kind() == v1::ISSUE_KIND_UNSPECIFIED)
          spdlog::warn(
              "subscription_issue_kind_dropped id={} kind=\"{}\" reason=\"no issue has that "
              "kind: the subscription now takes events about issues of every kind\"",
              id, *kind);
        return true;
      });
  return u;
}

BuildTimeUpgrade upgrade_build_times(pqxx::work& txn) {
  BuildTimeUpgrade u;
  // A few rows per kernel built: no paging needed.
  for (const auto& r : txn.exec("SELECT label, details FROM kernels WHERE details IS NOT NULL")) {
    v1::Kernel k;
    const pqxx::binarystring b(r[1]);
    if (!k.ParseFromString(b.str()) || !upgrade_legacy(k)) continue;
    txn.exec_params("UPDATE kernels SET details = $2 WHERE label = $1", r[0].as<std::string>(),
                    pqxx::binarystring(k.SerializeAsString()));
    ++u.kernels;
  }
  u.outcomes = rewrite_outcome_values(
      txn,
      [](const std::string& stored) -> std::optional<std::string> {
        v1::Outcome o;
        try {
          o = parse_outcome(stored);
        } catch (const StoreError&) {
          return std::nullopt;  // left as it is: its readers refuse it as they did
        }
        if (!o.has_build() || !upgrade_legacy(*o.mutable_build())) return std::nullopt;
        return pack_outcome(o.SerializeAsString());
      },
      "job_id IN (SELECT id FROM jobs WHERE build IS NOT NULL)");
  return u;
}

}  // namespace leapfrog::coord
