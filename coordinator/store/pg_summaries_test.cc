// The summaries kept as outcomes arrive (pg_summaries.h), against a recount
// from the jobs and outcomes they count, on a real PostgreSQL: through every
// way a job ends (a report, a batch of reports, a superseded report kept for
// its violations, a lease expired for the last time and its late report,
// builds that succeed and fail, waiting jobs settled), and after migration 6
// fills them in for data stored before it.

#include "coordinator/store/pg_summaries.h"

#include <gtest/gtest.h>

#include <pqxx/pqxx>
#include <set>
#include <thread>

#include "coordinator/pg/test_postgres.h"
#include "coordinator/store/migrations.h"
#include "coordinator/store/pg_store.h"

namespace leapfrog::coord {
namespace {

using namespace std::chrono_literals;

const TimePoint kT0 = TimePoint(Duration(1'700'000'000'123'456));
const Duration kLease = 30s;

using Rows = std::multiset<std::vector<std::string>>;

Rows rows_of(const std::string& url, const std::string& query) {
  pqxx::connection c(url);
  pqxx::work txn(c);
  Rows out;
  for (const auto& r : txn.exec(query)) {
    std::vector<std::string> row;
    for (const auto& f : r) row.push_back(f.is_null() ? "NULL" : f.c_str());
    out.insert(row);
  }
  return out;
}

NewJob test_job(const std::string& scenario, const std::string& fs, uint64_t seed,
                const std::string& kernel = "host") {
  NewJob j;
  j.spec.set_scenario(scenario);
  j.spec.set_fs(fs);
  j.spec.set_seed(seed);
  j.kernel_label = kernel;
  return j;
}

NewJob build_job(const std::string& label) {
  NewJob j = test_job("kernel-build", "kernel-build", 0, label);
  v1::KernelBuild b;
  b.set_label(label);
  b.set_source("/src/linux");
  j.build = b;
  return j;
}

v1::CampaignSpec spec_of(const std::string& name, uint32_t max_attempts) {
  v1::CampaignSpec s;
  s.set_name(name);
  s.add_scenarios("setattr-lookup");
  s.set_max_attempts(max_attempts);
  return s;
}

v1::Outcome outcome_of(v1::Verdict verdict, int violations = 0) {
  v1::Outcome o;
  o.set_verdict(verdict);
  o.set_ops(100);
  o.set_violation_count(static_cast<uint64_t>(violations));
  for (int i = 0; i < violations; ++i) o.add_violations()->set_kind(v1::VIOLATION_KIND_STALE_GRANT);
  return o;
}

v1::Capabilities caps_of(const std::string& kernel, const std::vector<std::string>& fs) {
  v1::Capabilities c;
  c.set_kernel_label(kernel);
  for (const auto& f : fs) c.add_filesystems(f);
  return c;
}

class PgSummariesTest : public testing::PostgresSuite<PgSummariesTest> {
 protected:
  void SetUp() override {
    url_ = pg_->url(fresh_database("summaries"));
    store_ = std::make_unique<PgStore>(url_);
  }

  // The kept summaries equal a recount, cell by cell and campaign by campaign.
  void expect_summaries_match_a_recount(const std::string& when) {
    const Rows kept = rows_of(url_, kKeptCellVerdicts);
    EXPECT_EQ(kept, rows_of(url_, kRecountCellVerdicts)) << when;
    EXPECT_EQ(rows_of(url_, kKeptCampaignVerdicts), rows_of(url_, kRecountCampaignVerdicts))
        << when;
    EXPECT_FALSE(kept.empty()) << when << ": nothing counted, the comparison proves nothing";
  }

  // The campaign's counters as they were computed before the summaries: from
  // every job and outcome.
  void expect_counters_as_recounted(int64_t campaign) {
    const auto c = store_->get_campaign(campaign);
    ASSERT_TRUE(c);
    const std::string id = std::to_string(campaign);
    std::map<std::string, uint32_t> by_state, by_verdict;
    for (const auto& r : rows_of(url_,
                                 "SELECT state, coalesce(verdict, 0)::text, count(*)::text"
                                 " FROM jobs WHERE campaign_id = " +
                                     id + " GROUP BY 1, 2")) {
      by_state[r[0]] += std::stoul(r[2]);
      if (r[0] == "done") {
        std::string name = v1::Verdict_Name(static_cast<v1::Verdict>(std::stoi(r[1])));
        name = name.substr(8);
        for (char& ch : name) ch = ch == '_' ? '-' : static_cast<char>(std::tolower(ch));
        by_verdict[name] += std::stoul(r[2]);
      }
    }
    for (const char* s : {"queued", "leased", "done"}) by_state.emplace(s, 0);
    using Counts = std::map<std::string, uint32_t>;
    EXPECT_EQ(Counts(c->by_state().begin(), c->by_state().end()), by_state);
    EXPECT_EQ(Counts(c->by_verdict().begin(), c->by_verdict().end()), by_verdict);
    const auto v = rows_of(url_,
                           "SELECT coalesce(sum(violation_count), 0)::text FROM outcomes"
                           " WHERE campaign_id = " +
                               id);
    EXPECT_EQ(std::to_string(c->violations()), v.begin()->at(0));
    EXPECT_EQ(c->state() == v1::CAMPAIGN_STATE_DONE, by_state["done"] == c->jobs());
  }

  std::string url_;
  std::unique_ptr<PgStore> store_;
};

TEST_F(PgSummariesTest, EveryWayAJobEndsIsCountedInTheSameTransaction) {
  // Two scenarios x two file systems on host, one attempt each.
  std::vector<NewJob> jobs;
  for (const char* scenario : {"setattr-lookup", "rename-lookup"})
    for (const char* fs : {"tmpfs", "ext4"})
      for (uint64_t seed = 0; seed < 6; ++seed) jobs.push_back(test_job(scenario, fs, seed));
  const int64_t c1 = store_->create_campaign(spec_of("one", 1), jobs, 0, kT0);
  // A second campaign: two attempts per job.
  const int64_t c2 = store_->create_campaign(
      spec_of("two", 2),
      {test_job("setattr-lookup", "tmpfs", 1), test_job("setattr-lookup", "tmpfs", 2)}, 0, kT0);
  const auto all = caps_of("host", {"tmpfs", "ext4"});
  expect_counters_as_recounted(c1);

  // Plain reports, one at a time.
  for (int i = 0; i < 5; ++i) {
    auto j = store_->lease_job("a", all, kT0, kLease);
    ASSERT_TRUE(j);
    const v1::Verdict v = i == 1   ? v1::VERDICT_VIOLATION
                          : i == 2 ? v1::VERDICT_ERROR
                                   : v1::VERDICT_PASS;
    EXPECT_EQ(
        store_->report_outcome("a", j->job_id(), j->attempt(), outcome_of(v, i == 1 ? 3 : 0), kT0),
        ReportResult::Stored);
  }
  expect_summaries_match_a_recount("after single reports");

  // One batch (group commit) of many reports, a duplicate among them.
  std::vector<v1::Job> leased;
  for (int i = 0; i < 12; ++i) leased.push_back(*store_->lease_job("a", all, kT0, kLease));
  std::vector<v1::Outcome> outcomes;
  for (size_t i = 0; i < leased.size(); ++i)
    outcomes.push_back(outcome_of(i % 3 ? v1::VERDICT_PASS : v1::VERDICT_VIOLATION, i % 3 ? 0 : 2));
  std::atomic<int> pending{0};
  for (size_t i = 0; i <= leased.size(); ++i) {
    const size_t k = i == leased.size() ? 0 : i;  // the last one repeats the first
    ++pending;
    store_->report_outcome_async("a", leased[k].job_id(), leased[k].attempt(), outcomes[k], kT0,
                                 [&](ReportResult, std::exception_ptr e) {
                                   EXPECT_FALSE(e);
                                   --pending;
                                 });
  }
  while (pending > 0) std::this_thread::yield();
  expect_summaries_match_a_recount("after a batch");

  // A lease lost for the last time: INFRA_FAILURE; its late report replaces it.
  auto lost = store_->lease_job("a", all, kT0, kLease);
  auto lost2 = store_->lease_job("a", all, kT0, kLease);
  ASSERT_TRUE(lost && lost2);
  EXPECT_GE(store_->expire_leases(kT0 + kLease + 1s), 2);
  expect_summaries_match_a_recount("after leases expired");
  EXPECT_EQ(store_->report_outcome("a", lost->job_id(), lost->attempt(),
                                   outcome_of(v1::VERDICT_VIOLATION, 1), kT0 + kLease + 2s),
            ReportResult::Stored);
  expect_summaries_match_a_recount("after a late report replaced an infra-failure");

  // Campaign two: attempt 1 expires and is requeued, attempt 2 passes, then
  // attempt 1 reports violations: kept as an extra outcome.
  const auto tmpfs = caps_of("host", {"tmpfs"});
  std::optional<v1::Job> first;
  for (;;) {  // the rest of campaign one on tmpfs, passed, until campaign two's job comes
    auto j = store_->lease_job("b", tmpfs, kT0 + 1min, kLease);
    ASSERT_TRUE(j);
    if (j->campaign_id() == c2) {
      first = j;
      break;
    }
    store_->report_outcome("b", j->job_id(), j->attempt(), outcome_of(v1::VERDICT_PASS),
                           kT0 + 1min);
  }
  store_->expire_leases(kT0 + 1min + kLease + 1s);
  std::optional<v1::Job> second;
  while (!second || second->job_id() != first->job_id()) {
    second = store_->lease_job("b", tmpfs, kT0 + 2min, kLease);
    ASSERT_TRUE(second);
    if (second->job_id() != first->job_id())
      store_->report_outcome("b", second->job_id(), second->attempt(), outcome_of(v1::VERDICT_PASS),
                             kT0 + 2min);
  }
  EXPECT_EQ(store_->report_outcome("b", second->job_id(), second->attempt(),
                                   outcome_of(v1::VERDICT_PASS), kT0 + 2min),
            ReportResult::Stored);
  EXPECT_EQ(store_->report_outcome("b", first->job_id(), first->attempt(),
                                   outcome_of(v1::VERDICT_VIOLATION, 4), kT0 + 2min),
            ReportResult::KeptSuperseded);
  expect_summaries_match_a_recount("after an extra outcome");

  // Builds: one fails (its waiting jobs end), one is lost on its only attempt
  // (settled), one succeeds (its waiting job is queued, then passes).
  const int64_t c3 = store_->create_campaign(
      spec_of("builds", 1),
      {test_job("setattr-lookup", "tmpfs", 1, "bad"), test_job("setattr-lookup", "tmpfs", 2, "bad"),
       build_job("bad"), test_job("setattr-lookup", "tmpfs", 1, "lost"), build_job("lost"),
       test_job("setattr-lookup", "tmpfs", 1, "good"), build_job("good")},
      0, kT0);
  auto b_bad = store_->lease_build_job("builder", kT0 + 3min, kLease);
  auto b_lost = store_->lease_build_job("builder", kT0 + 3min, kLease);
  auto b_good = store_->lease_build_job("builder", kT0 + 3min, kLease);
  ASSERT_TRUE(b_bad && b_lost && b_good);
  v1::Outcome failed = outcome_of(v1::VERDICT_BUILD_FAILURE);
  failed.mutable_build()->set_ok(false);
  failed.mutable_build()->set_failed_stage("make");
  EXPECT_EQ(
      store_->report_outcome("builder", b_bad->job_id(), b_bad->attempt(), failed, kT0 + 3min),
      ReportResult::Stored);
  v1::Outcome built = outcome_of(v1::VERDICT_PASS);
  built.mutable_build()->set_ok(true);
  built.mutable_build()->set_release("6.1.0-lf");
  EXPECT_EQ(
      store_->report_outcome("builder", b_good->job_id(), b_good->attempt(), built, kT0 + 3min),
      ReportResult::Stored);
  store_->expire_leases(kT0 + 3min + kLease + 1s);  // the lost build, then its waiting job
  expect_summaries_match_a_recount("after builds");
  v1::Capabilities good = caps_of("good", {"tmpfs"});
  good.set_uname("6.1.0-lf #1");
  auto j = store_->lease_job("g", good, kT0 + 4min, kLease);
  ASSERT_TRUE(j);
  store_->report_outcome("g", j->job_id(), j->attempt(), outcome_of(v1::VERDICT_PASS), kT0 + 4min);
  expect_summaries_match_a_recount("at the end");
  for (int64_t c : {c1, c2, c3}) expect_counters_as_recounted(c);

  // The matrix from the summaries: campaign three's cells, a test cell and
  // a build cell per label.
  const auto cells = store_->campaign_cells(c3);
  ASSERT_EQ(cells.size(), 6u);
  std::map<std::string, CellSummary> by_name;
  for (const auto& cell : cells) by_name[cell.scenario + "/" + cell.kernel_label] = cell;
  const CellSummary& bad = by_name.at("setattr-lookup/bad");
  EXPECT_EQ(bad.jobs, 2u);
  EXPECT_EQ(bad.done, (std::map<v1::Verdict, uint32_t>{{v1::VERDICT_BUILD_FAILURE, 2}}));
  EXPECT_TRUE(bad.pending.empty());
  EXPECT_EQ(by_name.at("kernel-build/lost").done,
            (std::map<v1::Verdict, uint32_t>{{v1::VERDICT_INFRA_FAILURE, 1}}));
  EXPECT_EQ(by_name.at("setattr-lookup/good").outcomes, 1u);
  // Campaign one still has jobs queued: the cells say which.
  uint32_t queued = 0;
  for (const auto& cell : store_->campaign_cells(c1)) {
    uint32_t done = 0;
    for (const auto& [v, n] : cell.done) done += n;
    uint32_t pending = 0;
    for (const auto& [st, n] : cell.pending) pending += n;
    EXPECT_EQ(done + pending, cell.jobs) << cell.scenario << "/" << cell.fs;
    queued += cell.pending.count(v1::JOB_STATE_QUEUED) ? cell.pending.at(v1::JOB_STATE_QUEUED) : 0;
  }
  EXPECT_GT(queued, 0u);
  EXPECT_TRUE(store_->campaign_cells(c3 + 100).empty());
}

TEST_F(PgSummariesTest, MigrationSixCountsWhatWasStoredBeforeIt) {
  const int64_t c = store_->create_campaign(
      spec_of("before", 1),
      {test_job("setattr-lookup", "tmpfs", 1), test_job("setattr-lookup", "tmpfs", 2),
       test_job("rename-lookup", "tmpfs", 3)},
      0, kT0);
  const auto all = caps_of("host", {"tmpfs"});
  for (int i = 0; i < 2; ++i) {
    auto j = store_->lease_job("a", all, kT0, kLease);
    store_->report_outcome("a", j->job_id(), j->attempt(),
                           outcome_of(i ? v1::VERDICT_PASS : v1::VERDICT_VIOLATION, i ? 0 : 5),
                           kT0);
  }
  const Rows before = rows_of(url_, kKeptCellVerdicts);
  store_.reset();
  {  // Back to schema 5, as a database made before the summaries is.
    pqxx::connection conn(url_);
    pqxx::work txn(conn);
    txn.exec(
        "DROP TABLE campaign_verdicts, cell_verdicts, cells; DROP INDEX jobs_pending;"
        " DELETE FROM schema_migrations WHERE version = 6");
    txn.commit();
    EXPECT_EQ(apply_migrations(conn), 1);
  }
  store_ = std::make_unique<PgStore>(url_);
  EXPECT_EQ(rows_of(url_, kKeptCellVerdicts), before);
  expect_summaries_match_a_recount("after migration 6");
  expect_counters_as_recounted(c);
}

}  // namespace
}  // namespace leapfrog::coord
