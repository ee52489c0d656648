// PgTriageStore: issues, notes, rates and actions in the tables of migration
// 2. Grouping reads failed outcomes in seq order past a watermark; see
// ingest_failures for why it trails the newest outcomes by one tick.

#include "coordinator/triage/pg_triage_store.h"

#include "common/bounds.h"
#include "common/ktap/words.h"
#include "coordinator/triage/spec_as_run.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <map>
#include <optional>
#include <pqxx/pqxx>
#include <tuple>

#include "coordinator/notify/outbox.h"
#include "coordinator/store/pg_pool.h"
#include "coordinator/store/pg_rows.h"
#include "coordinator/store/pg_util.h"

namespace leapfrog::coord::triage {

namespace {

// Advisory lock held while grouping ("triage" in ASCII).
constexpr long long kIngestLock = 0x747269616765LL;

const char* const kIssueColumns =
    "i.id, i.signature, i.kind, i.scenario, i.title, i.status, coalesce(i.duplicate_of, 0),"
    " lf_us(i.first_seen), lf_us(i.last_seen), i.count, lf_us(i.fixed_at), i.regressions,"
    " i.example_job, i.example_attempt, i.example_kernel, i.example_spec, i.example_violation";

v1::Issue issue_from_row(const pqxx::row& r) {
  v1::Issue i;
  i.set_id(r[0].as<int64_t>());
  i.set_signature(r[1].as<std::string>());
  i.set_kind(ktap::issue_kind_from(r[2].as<std::string>()));
  i.set_scenario(r[3].as<std::string>());
  i.set_title(r[4].as<std::string>());
  i.set_status(static_cast<v1::IssueStatus>(r[5].as<int>()));
  i.set_duplicate_of(r[6].as<int64_t>());
  *i.mutable_first_seen() = proto_timestamp(r[7].as<int64_t>());
  *i.mutable_last_seen() = proto_timestamp(r[8].as<int64_t>());
  i.set_count(r[9].as<uint64_t>());
  if (!r[10].is_null()) *i.mutable_fixed_at() = proto_timestamp(r[10].as<int64_t>());
  i.set_regressions(r[11].as<uint32_t>());
  i.set_example_job_id(r[12].as<int64_t>());
  i.set_example_attempt(r[13].as<uint32_t>());
  i.set_example_kernel(r[14].as<std::string>());
  *i.mutable_example_spec() = parse<v1::ScenarioSpec>(r[15], "scenario spec");
  *i.mutable_example_violation() = parse<v1::Violation>(r[16], "violation");
  return i;
}

std::string id_array(const std::vector<int64_t>& ids) {
  std::string s = "{";
  for (size_t k = 0; k < ids.size(); ++k) s += (k ? "," : "") + std::to_string(ids[k]);
  return s + "}";
}

// Fills each issue's kernels.
void add_kernels(pqxx::work& txn, std::vector<v1::Issue>& issues) {
  if (issues.empty()) return;
  std::map<int64_t, v1::Issue*> by_id;
  std::vector<int64_t> ids;
  for (auto& i : issues) {
    by_id[i.id()] = &i;
    ids.push_back(i.id());
  }
  for (const auto& r :
       txn.exec_params("SELECT issue_id, kernel_label, count, lf_us(first_seen), lf_us(last_seen)"
                       " FROM issue_kernels WHERE issue_id = ANY($1::bigint[]) ORDER BY "
                       "first_seen, kernel_label",
                       id_array(ids))) {
    auto* k = by_id.at(r[0].as<int64_t>())->add_kernels();
    k->set_kernel_label(r[1].as<std::string>());
    k->set_count(r[2].as<uint64_t>());
    *k->mutable_first_seen() = proto_timestamp(r[3].as<int64_t>());
    *k->mutable_last_seen() = proto_timestamp(r[4].as<int64_t>());
  }
}

void add_violations(pqxx::work& txn, int64_t job, uint32_t attempt, v1::Outcome& o) {
  for (const auto& r : txn.exec_params(
           "SELECT kind, actor, op, path, step, component, object, observed, expected, invoke_ns,"
           " complete_ns, detail, detail_pb FROM violations WHERE job_id = $1 AND attempt = $2"
           " ORDER BY idx",
           job, attempt)) {
    violation_from_row(r, 0, o.add_violations());
  }
  for (const auto& r :
       txn.exec_params("SELECT details FROM violation_details WHERE job_id = $1 AND attempt = $2",
                       job, attempt))
    attach_violation_details(r[0], o);
}

v1::Action action_from_row(const pqxx::field& f) {
  return parse<v1::Action>(f, "action");
}

// Where a failure was found, for its notification.
struct FailureContext {
  int64_t campaign_id = 0;
  int64_t schedule_id = 0;
  std::string schedule_name;
};

// One failure: an outcome found with one signature.
struct Failure {
  int64_t job = 0;
  uint32_t attempt = 0;
  std::string kernel;
  int64_t reported_us = 0;
  FailureContext where;
};

// A batch's failures of one signature, in report order. The first one is the
// issue's example if the batch creates it.
struct SignatureGroup {
  Signature sig;
  v1::ScenarioSpec spec;  // the first failure's, as it ran
  v1::Violation example;  // the first failure's violation with this key
  std::vector<Failure> failures;
};

// What counting a group did.
struct Counted {
  bool created = false;
  bool reopened = false;
};

// The notification of a new or reopened issue (coordinator/notify/), stored
// in the transaction that counted the failure.
void publish_issue_event(pqxx::work& txn, bool created, int64_t id, uint32_t regressions,
                         const Signature& sig, const std::string& scenario, const Failure& f) {
  v1::Event e;
  e.set_kind(created ? v1::EVENT_KIND_NEW_ISSUE : v1::EVENT_KIND_REGRESSION);
  e.set_key((created ? "issue-new:" : "issue-regression:") + std::to_string(id) +
            (created ? "" : ":" + std::to_string(regressions)));
  e.set_issue_id(id);
  e.set_issue_title(clean(sig.title));
  e.set_issue_kind(ktap::issue_kind_from(sig.kind));
  e.set_scenario(clean(sig.scenario.empty() ? scenario : sig.scenario));
  e.set_kernel_label(clean(f.kernel));
  e.set_campaign_id(f.where.campaign_id);
  e.set_schedule_id(f.where.schedule_id);
  e.set_schedule_name(clean(f.where.schedule_name));
  e.set_summary((created ? "new issue #" : "regression of issue #") + std::to_string(id) + " on " +
                clean(f.kernel) + ": " + clean(sig.title) + " (job " + std::to_string(f.job) + ")");
  notify::publish(txn, e);
}

// Counts a group's failures into its issue with one upsert of the issue and
// one per kernel, as counting them one by one would: the first failure
// creates the issue (its example, first_seen and notification), every one
// adds to the counts, last_seen is the latest. A FIXED issue is reopened by
// the first failure (in report order) on a kernel newer than the fix; the
// ones after it find it reopened. (One row per failure made each batch
// update the same few issue rows hundreds of times in one transaction.)
Counted count_group(pqxx::work& txn, const SignatureGroup& g,
                    std::map<std::string, std::optional<int64_t>>& kernel_added) {
  const Failure& first = g.failures.front();
  int64_t latest = first.reported_us;
  for (const auto& f : g.failures) latest = std::max(latest, f.reported_us);
  const auto r = txn.exec_params1(
      "INSERT INTO issues (signature, kind, scenario, title, status, first_seen, last_seen, count,"
      "  example_job, example_attempt, example_kernel, example_spec, example_violation)"
      " VALUES ($1, $2, $3, $4, $5, lf_ts($6), lf_ts($7), $8, $9, $10, $11, $12, $13)"
      " ON CONFLICT (signature) DO UPDATE SET count = issues.count + EXCLUDED.count,"
      "  last_seen = greatest(issues.last_seen, EXCLUDED.last_seen)"
      " RETURNING id, status, lf_us(fixed_at), xmax = 0",
      clean(g.sig.key), g.sig.kind, clean(g.sig.scenario), clean(g.sig.title),
      static_cast<int>(v1::ISSUE_STATUS_NEW), first.reported_us, latest,
      static_cast<int64_t>(g.failures.size()), first.job, first.attempt, clean(first.kernel),
      bytes(g.spec), bytes(g.example));
  const int64_t id = r[0].as<int64_t>();
  Counted c;
  c.created = r[3].as<bool>();
  if (c.created) publish_issue_event(txn, true, id, 0, g.sig, g.spec.scenario(), first);
  // Per kernel, in order of first appearance: its count, first and last time.
  std::vector<std::string> order;
  std::map<std::string, std::tuple<int64_t, int64_t, int64_t>> per_kernel;
  for (const auto& f : g.failures) {
    const std::string k = clean(f.kernel);
    auto [it, fresh] = per_kernel.try_emplace(k, 0, f.reported_us, f.reported_us);
    if (fresh) order.push_back(k);
    auto& [count, first_us, last_us] = it->second;
    ++count;
    last_us = std::max(last_us, f.reported_us);
  }
  for (const auto& k : order) {
    const auto& [count, first_us, last_us] = per_kernel.at(k);
    txn.exec_params(
        "INSERT INTO issue_kernels (issue_id, kernel_label, count, first_seen, last_seen)"
        " VALUES ($1, $2, $3, lf_ts($4), lf_ts($5)) ON CONFLICT (issue_id, kernel_label) DO UPDATE"
        " SET count = issue_kernels.count + EXCLUDED.count,"
        "  last_seen = greatest(issue_kernels.last_seen, EXCLUDED.last_seen)",
        id, k, count, first_us, last_us);
  }
  if (r[1].as<int>() != v1::ISSUE_STATUS_FIXED || r[2].is_null()) return c;
  const int64_t fixed_us = r[2].as<int64_t>();
  // A kernel registered after the fix is newer than the fix; a label never
  // registered (e.g. "host") has no age, so the failure's time decides.
  const Failure* reopener = nullptr;
  for (const auto& f : g.failures) {
    auto it = kernel_added.find(f.kernel);
    if (it == kernel_added.end()) {
      const auto k =
          txn.exec_params("SELECT lf_us(added_at) FROM kernels WHERE label = $1", f.kernel);
      it = kernel_added
               .emplace(f.kernel,
                        k.empty() ? std::nullopt : std::optional<int64_t>(k[0][0].as<int64_t>()))
               .first;
    }
    if (it->second ? *it->second > fixed_us : f.reported_us > fixed_us) {
      reopener = &f;
      break;
    }
  }
  if (!reopener) return c;
  const auto reopened = txn.exec_params1(
      "UPDATE issues SET status = $2, regressions = regressions + 1 WHERE id = $1"
      " RETURNING regressions",
      id, static_cast<int>(v1::ISSUE_STATUS_REGRESSION));
  publish_issue_event(txn, false, id, reopened[0].as<uint32_t>(), g.sig, g.spec.scenario(),
                      *reopener);
  txn.exec_params("INSERT INTO issue_notes (issue_id, at, text) VALUES ($1, lf_ts($2), $3)", id,
                  reopener->reported_us,
                  "reopened as a regression: failed again on kernel \"" + clean(reopener->kernel) +
                      "\" (outcome " + std::to_string(reopener->job) + "." +
                      std::to_string(reopener->attempt) + ") after it was marked fixed");
  spdlog::warn("triage.regression issue={} kernel={} job={} attempt={}", id, reopener->kernel,
               reopener->job, reopener->attempt);
  c.reopened = true;
  return c;
}

// The notification of a finished action, stored with its last state.
void publish_action_event(pqxx::work& txn, const v1::Action& a) {
  static const char* const kKinds[] = {"action", "replay", "minimize", "bisect"};
  const char* kind = a.kind() >= 0 && a.kind() <= 3 ? kKinds[a.kind()] : "action";
  v1::Event e;
  e.set_kind(v1::EVENT_KIND_ACTION_RESULT);
  e.set_key("action:" + std::to_string(a.id()));
  e.set_action_id(a.id());
  e.set_action_kind(a.kind());
  e.set_action_state(a.state());
  e.set_issue_id(a.issue_id());
  std::string result;
  if (a.state() == v1::ACTION_STATE_FAILED) {
    result = "failed: " + a.error();
  } else if (a.kind() == v1::ACTION_KIND_REPLAY) {
    e.set_kernel_label(a.kernel_label());
    e.set_scenario(a.spec().scenario());
    result = "reproduced " + std::to_string(a.rate().reproduced()) + " of " +
             std::to_string(a.rate().runs()) + " runs on " + a.kernel_label();
  } else if (a.kind() == v1::ACTION_KIND_BISECT) {
    e.set_kernel_label(a.bisect().first_bad());
    result =
        a.bisect().first_bad().empty()
            ? "no first bad kernel found"
            : "first bad kernel " + a.bisect().first_bad() +
                  (a.bisect().last_good().empty() ? ""
                                                  : " (last good " + a.bisect().last_good() + ")");
  } else if (a.kind() == v1::ACTION_KIND_MINIMIZE) {
    e.set_scenario(a.minimize().minimal_spec().scenario());
    result = "minimal spec kept " + std::to_string(a.minimize().kept()) + " of " +
             std::to_string(a.minimize().tried()) + " candidates" +
             (a.minimize().c_reproducer().empty() ? "" : ", with a C reproducer");
  }
  if (a.issue_id() > 0) {
    const auto i =
        txn.exec_params("SELECT title, kind, scenario FROM issues WHERE id = $1", a.issue_id());
    if (!i.empty()) {
      e.set_issue_title(i[0][0].as<std::string>());
      e.set_issue_kind(ktap::issue_kind_from(i[0][1].as<std::string>()));
      if (e.scenario().empty()) e.set_scenario(i[0][2].as<std::string>());
    }
  }
  e.set_result(clean(result));
  e.set_summary(std::string(kind) + " " + std::to_string(a.id()) +
                (a.issue_id() > 0 ? " of issue #" + std::to_string(a.issue_id()) : "") + " " +
                (a.state() == v1::ACTION_STATE_FAILED ? "failed" : "done") + ": " + clean(result));
  notify::publish(txn, e);
}

}  // namespace

PgTriageStore::PgTriageStore(const std::string& url, int pool_size)
    : pool_(std::make_unique<PgPool>(url, pool_size, std::vector<PgStatement>{})) {}

PgTriageStore::~PgTriageStore() = default;

IngestResult PgTriageStore::ingest_failures(const SignatureFn& signatures, uint32_t batch) {
  return run_transaction(*pool_, "ingest_failures", [&](pqxx::work& txn) {
    IngestResult res;
    if (!txn.exec_params1("SELECT pg_try_advisory_xact_lock($1)", kIngestLock)[0].as<bool>()) {
      res.locked_out = true;
      return res;
    }
    // Outcome seqs are handed out before their transactions commit, so an
    // outcome with a smaller seq may become visible after a larger one. The
    // scan therefore reads only up to the horizon (the newest seq) seen by
    // the previous tick, and only once every transaction that was running
    // then has ended: nothing below the horizon can appear later.
    const auto w = txn.exec1(
        "SELECT seq, horizon_seq,"
        "  horizon_xmax IS NULL OR pg_snapshot_xmin(pg_current_snapshot()) >= horizon_xmax"
        " FROM triage_watermark WHERE id = 1 FOR UPDATE");
    const int64_t watermark = w[0].as<int64_t>();
    const int64_t horizon = w[1].as<int64_t>();
    const bool settled = w[2].as<bool>();
    int64_t last = watermark;
    if (settled && horizon > watermark) {
      const auto rows = txn.exec_params(
          "SELECT o.seq, o.job_id, o.attempt, j.spec, j.kernel_label, o.outcome,"
          "  lf_us(o.reported_at), c.name, o.campaign_id, c.schedule_id, coalesce(s.name, '')"
          " FROM outcomes o JOIN jobs j ON j.id = o.job_id JOIN campaigns c ON c.id = o.campaign_id"
          "  LEFT JOIN schedules s ON s.id = c.schedule_id"
          " WHERE o.verdict <> 1 AND o.seq > $1 AND o.seq <= $2 ORDER BY o.seq LIMIT $3",
          watermark, horizon, batch);
      // The batch's failures grouped by signature, each group counted at once.
      std::vector<SignatureGroup> groups;
      std::map<std::string, size_t> group_of;
      for (const auto& r : rows) {
        last = r[0].as<int64_t>();
        ++res.outcomes;
        if (r[7].as<std::string>().rfind(kActionCampaignPrefix, 0) == 0) continue;
        const int64_t job = r[1].as<int64_t>();
        const auto attempt = r[2].as<uint32_t>();
        const auto spec = parse<v1::ScenarioSpec>(r[3], "scenario spec");
        auto outcome = parse_outcome(r[5]);
        add_violations(txn, job, attempt, outcome);
        const Failure f{
            job, attempt, r[4].as<std::string>(), r[6].as<int64_t>(),
            FailureContext{r[8].as<int64_t>(), r[9].as<int64_t>(), r[10].as<std::string>()}};
        for (auto& sig : signatures(spec, outcome)) {
          auto [it, fresh] = group_of.try_emplace(sig.key, groups.size());
          if (fresh) {
            SignatureGroup g;
            // The example replays as it raced (spec_as_run).
            g.spec = spec_as_run(spec, outcome);
            if (sig.violation_index >= 0 && sig.violation_index < outcome.violations_size())
              g.example = outcome.violations(sig.violation_index);
            g.sig = std::move(sig);
            groups.push_back(std::move(g));
          }
          groups[it->second].failures.push_back(f);
          ++res.failures;
        }
      }
      std::map<std::string, std::optional<int64_t>> kernel_added;
      for (const auto& g : groups) {
        const Counted c = count_group(txn, g, kernel_added);
        res.new_issues += c.created;
        res.regressions += c.reopened;
      }
      // A short batch read everything up to the horizon.
      if (rows.size() < batch) last = horizon;
    }
    if (last != watermark || settled) {
      // The next horizon, once this one is consumed.
      const bool consumed = last >= horizon;
      txn.exec_params(
          "UPDATE triage_watermark SET seq = $1,"
          " horizon_seq = CASE WHEN $2 THEN (SELECT coalesce(max(seq), 0) FROM outcomes)"
          "  ELSE horizon_seq END,"
          " horizon_xmax = CASE WHEN $2 THEN pg_snapshot_xmax(pg_current_snapshot())"
          "  ELSE horizon_xmax END WHERE id = 1",
          last, consumed);
    }
    if (res.failures > 0)
      spdlog::info("triage.grouped outcomes={} failures={} new_issues={} regressions={}",
                   res.outcomes, res.failures, res.new_issues, res.regressions);
    return res;
  });
}

std::vector<v1::Issue> PgTriageStore::list_issues(const std::vector<v1::IssueStatus>& statuses,
                                                  uint32_t limit) {
  return run_transaction(*pool_, "list_issues", [&](pqxx::work& txn) {
    std::vector<int64_t> st;
    for (auto s : statuses) st.push_back(s);
    std::vector<v1::Issue> out;
    for (const auto& r : txn.exec_params(
             std::string("SELECT ") + kIssueColumns +
                 " FROM issues i WHERE cardinality($1::int[]) = 0 OR i.status = ANY($1::int[])"
                 " ORDER BY i.last_seen DESC, i.id DESC LIMIT $2",
             id_array(st), limit))
      out.push_back(issue_from_row(r));
    add_kernels(txn, out);
    return out;
  });
}

Page<v1::Issue> PgTriageStore::page_issues(const IssueQuery& q) {
  const uint32_t limit = kIssuePage.resolve(q.limit);
  const auto after = parse_page_token("issues", 2, q.page_token);
  return run_transaction(*pool_, "page_issues", [&](pqxx::work& txn) {
    std::vector<int64_t> st;
    for (auto s : q.statuses) st.push_back(s);
    Page<v1::Issue> page;
    // The filters before the LIMIT; one row more says whether more follow.
    // The key (last_seen, id) is the order's, so a page starts where the
    // last one ended.
    for (const auto& r : txn.exec_params(
             std::string("SELECT ") + kIssueColumns +
                 " FROM issues i WHERE (cardinality($1::int[]) = 0 OR i.status = ANY($1::int[]))"
                 "  AND ($3::text = '' OR i.scenario = $3::text)"
                 "  AND ($4::text = '' OR i.kind = $4::text)"
                 "  AND ($5::text = '' OR EXISTS (SELECT 1 FROM issue_kernels k"
                 "   WHERE k.issue_id = i.id AND k.kernel_label = $5::text))"
                 "  AND (NOT $6::bool OR (i.last_seen, i.id) < (lf_ts($7::bigint), $8::bigint))"
                 " ORDER BY i.last_seen DESC, i.id DESC LIMIT $2",
             id_array(st), static_cast<int64_t>(limit) + 1, clean(q.scenario), clean(q.kind),
             clean(q.kernel_label), !after.empty(), after.empty() ? int64_t{0} : after[0],
             after.empty() ? int64_t{0} : after[1])) {
      page.items.push_back(issue_from_row(r));
      page.items.back().clear_example_violation();  // lists carry no violation details
    }
    add_kernels(txn, page.items);
    return cut_page(std::move(page.items), limit, kMaxPageBytes, [](const v1::Issue& last, size_t) {
      return make_page_token(
          "issues", {last.last_seen().seconds() * 1000000 + last.last_seen().nanos() / 1000, last.id()});
    });
  });
}

std::optional<v1::Issue> PgTriageStore::get_issue(int64_t id) {
  return run_transaction(*pool_, "get_issue", [&](pqxx::work& txn) -> std::optional<v1::Issue> {
    const auto rows = txn.exec_params(
        std::string("SELECT ") + kIssueColumns + " FROM issues i WHERE i.id = $1", id);
    if (rows.empty()) return std::nullopt;
    std::vector<v1::Issue> one{issue_from_row(rows[0])};
    add_kernels(txn, one);
    v1::Issue& i = one[0];
    for (const auto& r : txn.exec_params(
             "SELECT lf_us(at), text FROM issue_notes WHERE issue_id = $1 ORDER BY id", id)) {
      auto* n = i.add_notes();
      *n->mutable_at() = proto_timestamp(r[0].as<int64_t>());
      n->set_text(r[1].as<std::string>());
    }
    for (const auto& r : txn.exec_params(
             "SELECT rate FROM issue_rates WHERE issue_id = $1 ORDER BY kernel_label", id))
      *i.add_rates() = parse<v1::ReproRate>(r[0], "rate");
    return std::move(i);
  });
}

std::optional<int64_t> PgTriageStore::find_issue(const std::string& signature) {
  return run_transaction(*pool_, "find_issue", [&](pqxx::work& txn) -> std::optional<int64_t> {
    const auto r = txn.exec_params("SELECT id FROM issues WHERE signature = $1", clean(signature));
    if (r.empty()) return std::nullopt;
    return r[0][0].as<int64_t>();
  });
}

std::optional<v1::Issue> PgTriageStore::set_issue_status(int64_t id, v1::IssueStatus status,
                                                         int64_t duplicate_of, TimePoint now) {
  const bool found = run_transaction(*pool_, "set_issue_status", [&](pqxx::work& txn) {
    const bool dup = status == v1::ISSUE_STATUS_DUPLICATE;
    return txn.exec_params(
                  "UPDATE issues SET status = $2::int, duplicate_of = NULLIF($3::bigint, 0),"
                  " fixed_at = CASE WHEN $2::int = $5::int THEN lf_ts($4) ELSE fixed_at END"
                  " WHERE id = $1",
                  id, static_cast<int>(status), dup ? duplicate_of : int64_t{0}, us(now),
                  static_cast<int>(v1::ISSUE_STATUS_FIXED))
               .affected_rows() > 0;
  });
  if (!found) return std::nullopt;
  return get_issue(id);
}

bool PgTriageStore::add_issue_note(int64_t id, const std::string& text, TimePoint now) {
  return run_transaction(*pool_, "add_issue_note", [&](pqxx::work& txn) {
    return txn.exec_params(
                  "INSERT INTO issue_notes (issue_id, at, text)"
                  " SELECT id, lf_ts($2), $3 FROM issues WHERE id = $1",
                  id, us(now), clean(text))
               .affected_rows() > 0;
  });
}

void PgTriageStore::put_rate(int64_t issue_id, const v1::ReproRate& rate) {
  run_transaction(*pool_, "put_rate", [&](pqxx::work& txn) {
    txn.exec_params(
        "INSERT INTO issue_rates (issue_id, kernel_label, rate)"
        " SELECT id, $2, $3 FROM issues WHERE id = $1"
        " ON CONFLICT (issue_id, kernel_label) DO UPDATE SET rate = EXCLUDED.rate",
        issue_id, clean(rate.kernel_label()), bytes(rate));
  });
}

std::optional<v1::OutcomeRecord> PgTriageStore::get_outcome(int64_t job_id, uint32_t attempt) {
  return run_transaction(
      *pool_, "get_outcome", [&](pqxx::work& txn) -> std::optional<v1::OutcomeRecord> {
        // Attempt 0: the job's latest outcome.
        const auto rows = txn.exec_params(
            "SELECT o.job_id, o.attempt, o.campaign_id, j.spec, j.kernel_label, o.agent_id,"
            "  o.outcome, lf_us(o.reported_at)"
            " FROM outcomes o JOIN jobs j ON j.id = o.job_id"
            " WHERE o.job_id = $1 AND ($2::int = 0 OR o.attempt = $2::int)"
            " ORDER BY o.attempt DESC LIMIT 1",
            job_id, attempt);
        if (rows.empty()) return std::nullopt;
        const auto& r = rows[0];
        v1::OutcomeRecord o;
        o.set_job_id(r[0].as<int64_t>());
        o.set_attempt(r[1].as<uint32_t>());
        o.set_campaign_id(r[2].as<int64_t>());
        *o.mutable_spec() = parse<v1::ScenarioSpec>(r[3], "scenario spec");
        o.set_kernel_label(r[4].as<std::string>());
        o.set_agent_id(r[5].as<std::string>());
        *o.mutable_outcome() = parse_outcome(r[6]);
        *o.mutable_reported_at() = proto_timestamp(r[7].as<int64_t>());
        add_violations(txn, o.job_id(), o.attempt(), *o.mutable_outcome());
        return o;
      });
}

v1::Action PgTriageStore::create_action(const v1::Action& action, const std::string& machine,
                                        TimePoint now) {
  return run_transaction(*pool_, "create_action", [&](pqxx::work& txn) {
    v1::Action a = action;
    a.set_id(txn.exec1("SELECT nextval('triage_actions_id_seq')")[0].as<int64_t>());
    a.set_state(v1::ACTION_STATE_RUNNING);
    *a.mutable_created_at() = proto_timestamp(us(now));
    *a.mutable_updated_at() = proto_timestamp(us(now));
    txn.exec_params(
        "INSERT INTO triage_actions (id, kind, issue_id, state, action, machine, created_at,"
        " updated_at) VALUES ($1, $2, $3, $4, $5, $6, lf_ts($7), lf_ts($7))",
        a.id(), static_cast<int>(a.kind()), a.issue_id(), static_cast<int>(a.state()), bytes(a),
        machine, us(now));
    spdlog::info("triage.action_created action={} kind={} issue={}", a.id(),
                 v1::ActionKind_Name(a.kind()), a.issue_id());
    return a;
  });
}

std::optional<v1::Action> PgTriageStore::get_action(int64_t id) {
  return run_transaction(*pool_, "get_action", [&](pqxx::work& txn) -> std::optional<v1::Action> {
    const auto r = txn.exec_params("SELECT action FROM triage_actions WHERE id = $1", id);
    if (r.empty()) return std::nullopt;
    return action_from_row(r[0][0]);
  });
}

std::vector<v1::Action> PgTriageStore::list_actions(int64_t issue_id, uint32_t limit) {
  return run_transaction(*pool_, "list_actions", [&](pqxx::work& txn) {
    std::vector<v1::Action> out;
    for (const auto& r : txn.exec_params(
             "SELECT action FROM triage_actions WHERE $1::bigint = 0 OR issue_id = $1::bigint"
             " ORDER BY id DESC LIMIT $2",
             issue_id, limit))
      out.push_back(action_from_row(r[0]));
    return out;
  });
}

Page<v1::Action> PgTriageStore::page_actions(int64_t issue_id, uint32_t limit,
                                             const std::string& page_token) {
  limit = kActionPage.resolve(limit);
  const auto after = parse_page_token("actions", 1, page_token);
  return run_transaction(*pool_, "page_actions", [&](pqxx::work& txn) {
    std::vector<v1::Action> rows;
    for (const auto& r : txn.exec_params(
             "SELECT action FROM triage_actions WHERE ($1::bigint = 0 OR issue_id = $1::bigint)"
             " AND ($3::bigint = 0 OR id < $3::bigint) ORDER BY id DESC LIMIT $2",
             issue_id, static_cast<int64_t>(limit) + 1, after.empty() ? int64_t{0} : after[0]))
      rows.push_back(action_from_row(r[0]));
    return cut_page(std::move(rows), limit, kMaxPageBytes,
                    [](const v1::Action& a, size_t) { return make_page_token("actions", {a.id()}); });
  });
}

std::vector<int64_t> PgTriageStore::running_actions(int64_t issue_id, v1::ActionKind kind) {
  return run_transaction(*pool_, "running_actions", [&](pqxx::work& txn) {
    std::vector<int64_t> out;
    for (const auto& r : txn.exec_params(
             "SELECT id FROM triage_actions WHERE state = $1 AND issue_id = $2 AND kind = $3"
             " ORDER BY id",
             static_cast<int>(v1::ACTION_STATE_RUNNING), issue_id, static_cast<int>(kind)))
      out.push_back(r[0].as<int64_t>());
    return out;
  });
}

std::vector<int64_t> PgTriageStore::all_running_actions() {
  return run_transaction(*pool_, "all_running_actions", [&](pqxx::work& txn) {
    std::vector<int64_t> out;
    for (const auto& r :
         txn.exec_params("SELECT id FROM triage_actions WHERE state = $1 ORDER BY id",
                         static_cast<int>(v1::ACTION_STATE_RUNNING)))
      out.push_back(r[0].as<int64_t>());
    return out;
  });
}

bool PgTriageStore::advance_action(int64_t id, TimePoint now,
                                   const std::function<void(v1::Action&, std::string&)>& step) {
  return run_transaction(*pool_, "advance_action", [&](pqxx::work& txn) {
    const auto r = txn.exec_params(
        "SELECT action, machine FROM triage_actions WHERE id = $1 AND state = $2"
        " FOR UPDATE SKIP LOCKED",
        id, static_cast<int>(v1::ACTION_STATE_RUNNING));
    if (r.empty()) return false;
    v1::Action a = action_from_row(r[0][0]);
    std::string machine = r[0][1].as<std::string>();
    const std::string before = a.SerializeAsString() + machine;
    step(a, machine);
    if (a.SerializeAsString() + machine == before) return true;
    if (a.state() != v1::ACTION_STATE_RUNNING) publish_action_event(txn, a);
    *a.mutable_updated_at() = proto_timestamp(us(now));
    txn.exec_params(
        "UPDATE triage_actions SET state = $2, issue_id = $3, action = $4, machine = $5,"
        " updated_at = lf_ts($6) WHERE id = $1",
        id, static_cast<int>(a.state()), a.issue_id(), bytes(a), machine, us(now));
    return true;
  });
}

}  // namespace leapfrog::coord::triage
