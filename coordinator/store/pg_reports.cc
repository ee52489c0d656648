// Report batching and COPY (pg_reports.h).

#include "coordinator/store/pg_reports.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <charconv>
#include <map>
#include <optional>
#include <pqxx/pqxx>
#include <pqxx/tablewriter>
#include <set>
#include <utility>
#include <vector>

#include "common/hex.h"
#include "common/ktap/words.h"
#include "coordinator/store/pg_kernels.h"
#include "coordinator/store/pg_lease_keys.h"
#include "coordinator/store/pg_scale.h"
#include "coordinator/store/pg_summaries.h"
#include "coordinator/store/pg_util.h"
#include "coordinator/store/report_acceptance.h"

namespace leapfrog::coord {

namespace {

// The job row a report is judged against, as locked (and as the batch's
// earlier reports left it).
struct LockedJob {
  std::string state;
  uint32_t attempt;
  int64_t campaign_id;
  int verdict;
  std::string holder;  // the agent holding the lease while state is "leased"
  CellKey cell;        // where its counts go in the summaries
  LeaseHolders keys;   // the key of each attempt's lease
};

// Rows in COPY's text format, sent a chunk at a time through one COPY
// statement. Cheaper than stream_to's tuple path (a string per field,
// escaped into another, a line per row), and the server parses a chunk while
// the next is formatted. One COPY at a time per connection: complete() one
// before the next writes.
class TextCopy {
 public:
  TextCopy(pqxx::work& txn, std::string table, std::vector<std::string> columns)
      : txn_(txn), table_(std::move(table)), columns_(std::move(columns)) {
    buf_.reserve(kChunk + 4096);
  }

  template <class T>
  void number(T v) {
    char digits[24];
    auto end = std::to_chars(digits, digits + sizeof digits, v).ptr;
    buf_.append(digits, end);
    buf_ += '\t';
  }

  // COPY text escapes; NUL bytes are dropped (PostgreSQL text cannot hold them).
  void text(const std::string& s) {
    const char* p = s.data();
    const char* const end = p + s.size();
    while (p < end) {
      const char* plain = p;
      while (p < end && !special(*p)) ++p;
      buf_.append(plain, p);  // the common case: the whole field at once
      if (p == end) break;
      switch (*p++) {
        case '\\': buf_ += "\\\\"; break;
        case '\n': buf_ += "\\n"; break;
        case '\r': buf_ += "\\r"; break;
        case '\t': buf_ += "\\t"; break;
        default: break;  // NUL
      }
    }
    buf_ += '\t';
  }

  // A bytea field (hex; COPY's escape doubles the backslash).
  void bytes(const std::string& b) {
    buf_ += "\\\\x";
    buf_ += hex_encode(b);
    buf_ += '\t';
  }

  void null() { buf_ += "\\N\t"; }

  void end_row() {
    buf_.back() = '\n';  // the last field's tab
    if (buf_.size() >= kChunk) flush();
  }

  // Sends what is left and ends the COPY.
  void complete() {
    flush();
    if (writer_) writer_->complete();
  }

 private:
  static constexpr size_t kChunk = 64 * 1024;

  static bool special(char c) {
    return c == '\\' || c == '\n' || c == '\r' || c == '\t' || c == '\0';
  }

  void flush() {
    if (buf_.empty()) return;
    if (!writer_) {
      // tablewriter is libpqxx 6's only way to send COPY data as is (one
      // PQputCopyData per chunk of whole rows); stream_to escapes what it gets.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
      writer_.emplace(txn_, table_, columns_.begin(), columns_.end());
#pragma GCC diagnostic pop
    }
    writer_->write_raw_line(buf_);  // it drops the last newline; libpqxx adds one
    buf_.clear();
  }

  pqxx::work& txn_;
  std::string table_;
  std::vector<std::string> columns_;
  std::string buf_;
  std::optional<pqxx::tablewriter> writer_;
};

// A violation's row: its columns, its kind as the word (its detail goes
// into the outcome's one violation_details value; `detail` and `detail_pb`
// are what older coordinators stored it in).
void violation_row(TextCopy& copy, int64_t job_id, uint32_t attempt, int idx,
                   const v1::Violation& v) {
  copy.number(job_id);
  copy.number(attempt);
  copy.number(idx);
  copy.text(ktap::violation_kind_word(v.kind()));
  copy.number(v.actor());
  copy.text(v.op());
  copy.text(v.path());
  copy.number(v.step());
  copy.text(v.component());
  copy.text(v.object());
  copy.text(v.observed());
  copy.text(v.expected());
  copy.number(v.invoke_ns());
  copy.number(v.complete_ns());
  copy.text(std::string());
  copy.null();
  copy.end_row();
}

const std::vector<std::string> kViolationColumns = {
    "job_id",    "attempt",     "idx",       "kind",     "actor",    "op",
    "path",      "step",        "component", "object",   "observed", "expected",
    "invoke_ns", "complete_ns", "detail",    "detail_pb"};

// Judges the batch's reports in arrival order, as if each ran alone; stores
// the accepted ones and finishes their jobs (one statement), then their
// violations (one COPY).
std::vector<ReportDecision> store_reports(pqxx::work& txn, const ReportBatch& batch) {
  std::vector<int64_t> ids;
  for (const auto* item : batch) ids.push_back(item->request.job_id);
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  std::map<int64_t, LockedJob> jobs;
  for (const auto& r : txn.exec_prepared("lock_jobs", number_array(ids))) {
    jobs[r[0].as<int64_t>()] = {r[1].as<std::string>(),
                                r[2].as<uint32_t>(),
                                r[3].as<int64_t>(),
                                r[4].as<int>(),
                                r[5].as<std::string>(),
                                CellKey{r[3].as<int64_t>(), r[6].as<std::string>(),
                                        r[7].as<std::string>(), r[8].as<std::string>()},
                                LeaseHolders(r[9].as<int>(), r[10].as<std::string>())};
  }

  std::vector<ReportDecision> decisions(batch.size());
  // The verdict a stored report replaces (a done job's INFRA_FAILURE), or -1.
  std::vector<int> replaces(batch.size(), -1);
  // Accepted, and judged superseded: either may turn out to be a duplicate
  // of an outcome stored before, which store_outcomes tells.
  std::vector<size_t> accepted, superseded;
  std::set<std::pair<int64_t, uint32_t>> accepted_keys;
  for (size_t i = 0; i < batch.size(); ++i) {
    const PgReport& report = batch[i]->request;
    auto job = jobs.find(report.job_id);
    std::optional<ReportedJob> seen;
    if (job != jobs.end()) {
      const LockedJob& j = job->second;
      seen = ReportedJob{j.state,
                         j.attempt,
                         j.verdict,
                         j.holder,
                         j.keys.of(report.attempt),
                         accepted_keys.count({report.job_id, report.attempt}) > 0};
    }
    decisions[i] = judge_report(seen, ReportClaim{clean(report.agent_id), report.job_id,
                                                  report.attempt, report.key,
                                                  carries_violations(report.outcome)});
    if (!decisions[i].result) continue;
    switch (*decisions[i].result) {
      case ReportResult::Duplicate: break;
      case ReportResult::Superseded: superseded.push_back(i); break;
      case ReportResult::KeptSuperseded:
        accepted.push_back(i);
        accepted_keys.emplace(report.job_id, report.attempt);
        break;
      case ReportResult::Stored: {
        accepted.push_back(i);
        accepted_keys.emplace(report.job_id, report.attempt);
        LockedJob& j = job->second;  // as the batch's later reports see it
        if (j.state == "done") replaces[i] = j.verdict;
        j.state = "done";
        j.verdict = static_cast<int>(report.outcome.verdict());
        break;
      }
    }
  }
  if (accepted.empty() && superseded.empty()) return decisions;
  // Columns of store_outcomes, one array each.
  std::vector<int64_t> job_ids, campaign_ids, ops, lookups, offsets, counts, hits, times, ask_ids;
  std::vector<uint32_t> attempts, ask_attempts;
  std::vector<int> verdicts;
  std::vector<bool> extras;
  std::vector<std::string> agents, errors, outcomes;
  for (size_t i : accepted) {
    const PgReport& r = batch[i]->request;
    const v1::Outcome& o = r.outcome;
    extras.push_back(decisions[i].result == ReportResult::KeptSuperseded);
    job_ids.push_back(r.job_id);
    attempts.push_back(r.attempt);
    campaign_ids.push_back(jobs.at(r.job_id).campaign_id);
    agents.push_back(r.agent_id);
    verdicts.push_back(static_cast<int>(o.verdict()));
    ops.push_back(static_cast<int64_t>(o.ops()));
    lookups.push_back(static_cast<int64_t>(o.lookups_checked()));
    offsets.push_back(static_cast<int64_t>(o.offsets_checked()));
    counts.push_back(static_cast<int64_t>(o.violation_count()));
    hits.push_back(static_cast<int64_t>(o.race_window_hits()));
    errors.push_back(o.error());
    outcomes.push_back(hex_encode(pack_outcome(without_violations(o))));
    times.push_back(us(r.now));
  }
  for (size_t i : superseded) {
    ask_ids.push_back(batch[i]->request.job_id);
    ask_attempts.push_back(batch[i]->request.attempt);
  }
  std::set<std::pair<int64_t, uint32_t>> stored, existed;
  for (const auto& row : txn.exec_prepared(
           "store_outcomes", number_array(job_ids), number_array(attempts),
           number_array(campaign_ids), text_array(agents), number_array(verdicts),
           number_array(ops), number_array(lookups), number_array(offsets), number_array(counts),
           number_array(hits), text_array(errors), text_array(outcomes), number_array(times),
           number_array(ask_ids), number_array(ask_attempts), bool_array(extras))) {
    (row[0].as<bool>() ? stored : existed).emplace(row[1].as<int64_t>(), row[2].as<uint32_t>());
  }
  for (size_t i : superseded) {
    const PgReport& r = batch[i]->request;
    if (existed.count({r.job_id, r.attempt})) {
      decisions[i].result = ReportResult::Duplicate;
      continue;
    }
    const LockedJob& j = jobs.at(r.job_id);
    spdlog::info("outcome_superseded job={} attempt={} current={} state={} agent={}", r.job_id,
                 r.attempt, j.attempt, j.state, r.agent_id);
  }
  std::optional<TextCopy> copy;
  struct DetailsRow {
    int64_t job_id;
    uint32_t attempt;
    std::string details;  // v1.ViolationDetails
  };
  std::vector<DetailsRow> details_rows;
  SummaryDelta summary;
  for (size_t i : accepted) {
    const PgReport& r = batch[i]->request;
    // Not inserted: its outcome was stored before (an agent-reported INFRA_FAILURE).
    if (!stored.count({r.job_id, r.attempt})) {
      decisions[i].result = ReportResult::Duplicate;
      continue;
    }
    const CellKey& cell = jobs.at(r.job_id).cell;
    const int verdict = static_cast<int>(r.outcome.verdict());
    summary.outcome(cell, verdict, static_cast<int64_t>(r.outcome.violation_count()));
    if (decisions[i].result == ReportResult::Stored) {  // its job is done (store_outcomes)
      summary.job_done(cell, verdict);
      if (replaces[i] >= 0) summary.job_done(cell, replaces[i], -1);
    }
    if (decisions[i].result == ReportResult::KeptSuperseded) {
      const LockedJob& j = jobs.at(r.job_id);
      spdlog::warn(
          "outcome_kept_superseded job={} attempt={} current={} state={} agent={} violations={}",
          r.job_id, r.attempt, j.attempt, j.state, r.agent_id, r.outcome.violation_count());
    }
    spdlog::debug("outcome_stored job={} attempt={} agent={} verdict={} violations={}", r.job_id,
                  r.attempt, r.agent_id, verdict_key(r.outcome.verdict()),
                  r.outcome.violations_size());
    if (is_scale_run(cell.scenario, verdict)) {
      if (auto run = parse_scale_run(r.outcome)) store_scale_run(txn, r.job_id, r.attempt, *run);
    }
    int idx = 0;
    v1::ViolationDetails details;
    bool typed = false;
    for (const auto& v : r.outcome.violations()) {
      if (!copy) copy.emplace(txn, "violations", kViolationColumns);
      violation_row(*copy, r.job_id, r.attempt, idx++, v);
      *details.add_details() = v.detail();
      typed = typed || v.has_detail();
    }
    if (typed) details_rows.push_back({r.job_id, r.attempt, details.SerializeAsString()});
  }
  if (copy) copy->complete();
  if (!details_rows.empty()) {
    TextCopy d(txn, "violation_details", {"job_id", "attempt", "details"});
    for (const auto& row : details_rows) {
      d.number(row.job_id);
      d.number(row.attempt);
      d.bytes(row.details);
      d.end_row();
    }
    d.complete();
  }
  summary.apply(txn);  // last: its row locks are held until commit
  return decisions;
}

}  // namespace

// Writes `batch` in one transaction and hands each caller its result. A batch
// failing for a reason other than the database being unavailable is written
// again one report at a time, so that only the report at fault fails. A build
// job's report (rare) is a transaction of its own: it also registers its
// kernel and moves the jobs waiting for it.
void write_reports(PgPool& pool, ReportBatch& batch) {
  if (std::any_of(batch.begin(), batch.end(),
                  [](const auto* item) { return item->request.outcome.has_build(); })) {
    ReportBatch tests;
    for (auto* item : batch) {
      if (!item->request.outcome.has_build()) {
        tests.push_back(item);
        continue;
      }
      const PgReport& r = item->request;
      try {
        item->result = run_transaction(pool, "report_build", [&](pqxx::work& txn) {
          return store_build_report(txn, r.agent_id, r.job_id, r.attempt, r.outcome, r.now, r.key);
        });
      } catch (...) {
        item->error = std::current_exception();
      }
    }
    if (!tests.empty()) write_reports(pool, tests);
    return;
  }
  try {
    auto decisions = run_transaction(pool, "report_outcome",
                                     [&](pqxx::work& txn) { return store_reports(txn, batch); });
    for (size_t i = 0; i < batch.size(); ++i) {
      if (decisions[i].result) {
        batch[i]->result = decisions[i].result;
      } else if (decisions[i].wrong_key) {
        batch[i]->error = std::make_exception_ptr(WrongAgentSecret(decisions[i].error));
      } else {
        batch[i]->error = std::make_exception_ptr(StoreError(decisions[i].error, false));
      }
    }
    if (batch.size() > 1) spdlog::debug("outcomes_batch reports={}", batch.size());
  } catch (const StoreError& e) {
    if (!e.unavailable() && batch.size() > 1) {
      for (auto* item : batch) {
        ReportBatch one{item};
        write_reports(pool, one);
      }
      return;
    }
    for (auto* item : batch) item->error = std::make_exception_ptr(e);
  } catch (...) {
    for (auto* item : batch) item->error = std::current_exception();
  }
}

}  // namespace leapfrog::coord
