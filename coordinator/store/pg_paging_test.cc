// Keyset paging of the store's lists against a real PostgreSQL: a fixed
// order, no duplicates and no gaps across pages while outcomes arrive, the
// filters applied before the limit, and tokens of another list refused.

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <pqxx/pqxx>
#include <set>
#include <thread>

#include "common/bounds.h"
#include "coordinator/pg/test_postgres.h"
#include "coordinator/store/migrations.h"
#include "coordinator/store/pg_store.h"

namespace leapfrog::coord {
namespace {

using namespace std::chrono_literals;

const TimePoint kT0 = TimePoint(Duration(1'700'000'000'123'456));
using Key = std::pair<int64_t, uint32_t>;  // (job, attempt)

v1::CampaignSpec spec_named(const std::string& name) {
  v1::CampaignSpec s;
  s.set_name(name);
  s.add_scenarios("setattr-lookup");
  s.add_filesystems("tmpfs");
  return s;
}

std::vector<NewJob> jobs_of(int n, const std::string& scenario = "setattr-lookup",
                            const std::string& kernel = "host") {
  std::vector<NewJob> out;
  for (int i = 0; i < n; ++i) {
    NewJob j;
    j.spec.set_scenario(scenario);
    j.spec.set_fs("tmpfs");
    j.spec.set_seed(static_cast<uint64_t>(i));
    j.kernel_label = kernel;
    out.push_back(j);
  }
  return out;
}

class PgPagingTest : public testing::PostgresSuite<PgPagingTest> {
 protected:
  void SetUp() override {
    url_ = pg_->url(fresh_database("paging"));
    store_ = std::make_unique<PgStore>(url_);
  }

  // Leases one job of `kernel` as `agent` and reports `verdict`; its key.
  Key run_one(const std::string& agent, v1::Verdict verdict, const std::string& kernel = "host") {
    v1::Capabilities c;
    c.set_kernel_label(kernel);
    c.add_filesystems("tmpfs");
    auto job = store_->lease_job(agent, c, kT0, 30s);
    if (!job) throw std::runtime_error("no job left to lease");
    v1::Outcome o;
    o.set_verdict(verdict);
    o.set_ops(10);
    if (verdict == v1::VERDICT_VIOLATION) {
      o.set_violation_count(1);
      o.add_violations()->set_kind(v1::VIOLATION_KIND_STALE_GRANT);
    }
    EXPECT_EQ(store_->report_outcome(agent, job->job_id(), job->attempt(), o, kT0),
              ReportResult::Stored);
    return {job->job_id(), job->attempt()};
  }

  // Every outcome as the database has it now, most recent first.
  std::vector<Key> all_outcomes() {
    pqxx::connection c(url_);
    pqxx::work txn(c);
    std::vector<Key> out;
    for (const auto& r : txn.exec("SELECT job_id, attempt FROM outcomes ORDER BY seq DESC"))
      out.emplace_back(r[0].as<int64_t>(), r[1].as<uint32_t>());
    return out;
  }

  // Walks every page of `q`, calling `between` after each page.
  std::vector<Key> walk(OutcomeQuery q, const std::function<void()>& between = {}) {
    std::vector<Key> out;
    for (int pages = 0;; ++pages) {
      if (pages > 10000) throw std::runtime_error("paging does not end");
      const auto page = store_->page_outcomes(q);
      EXPECT_LE(page.items.size(), q.limit);
      for (const auto& o : page.items) out.emplace_back(o.job_id(), o.attempt());
      if (page.next_page_token.empty()) break;
      EXPECT_EQ(page.items.size(), q.limit) << "a page short of its limit says more follow";
      q.page_token = page.next_page_token;
      if (between) between();
    }
    return out;
  }

  std::string url_;
  std::unique_ptr<PgStore> store_;
};

// Every item of `before` appears in `pages` once, in the same order; nothing
// appears twice. (Outcomes that arrive during the walk may show up or not.)
void expect_complete_walk(const std::vector<Key>& before, const std::vector<Key>& pages) {
  std::set<Key> seen;
  for (const auto& k : pages)
    EXPECT_TRUE(seen.insert(k).second) << "job " << k.first << " attempt " << k.second << " twice";
  size_t at = 0;
  for (const auto& k : pages)
    if (at < before.size() && k == before[at]) ++at;
  EXPECT_EQ(at, before.size()) << "the pages lost an outcome stored before the walk: job "
                               << (at < before.size() ? before[at].first : 0);
}

TEST_F(PgPagingTest, PagesHoldEveryOutcomeOnceWhileOutcomesArrive) {
  store_->create_campaign(spec_named("c"), jobs_of(400), 0, kT0);
  store_->create_campaign(spec_named("meanwhile"), jobs_of(2000, "setattr-lookup", "k2"), 0, kT0);
  for (int i = 0; i < 150; ++i) run_one("a", i % 5 == 0 ? v1::VERDICT_VIOLATION : v1::VERDICT_PASS);
  const auto before = all_outcomes();
  ASSERT_EQ(before.size(), 150u);

  // Between pages (deterministic) and meanwhile from another thread.
  std::atomic<bool> stop{false};
  std::atomic<int> arrived{0};
  std::thread writer([&] {
    PgStore other(url_);
    v1::Capabilities c;
    c.set_kernel_label("k2");
    c.add_filesystems("tmpfs");
    while (!stop) {
      auto job = other.lease_job("b", c, kT0, 30s);
      if (!job) break;
      v1::Outcome o;
      o.set_verdict(v1::VERDICT_PASS);
      other.report_outcome("b", job->job_id(), job->attempt(), o, kT0);
      ++arrived;
    }
  });
  while (arrived < 3) std::this_thread::yield();  // the writer is at work
  OutcomeQuery q;
  q.limit = 4;
  const auto pages = walk(q, [&] { run_one("a", v1::VERDICT_PASS); });
  stop = true;
  writer.join();
  std::printf("outcomes that arrived from another thread: %d\n", arrived.load());
  expect_complete_walk(before, pages);

  // A walk with nothing arriving is the database's list exactly.
  const auto now = all_outcomes();
  EXPECT_EQ(walk(q), now);
  q.limit = 1000;
  EXPECT_EQ(walk(q), now);
}

TEST_F(PgPagingTest, FiltersApplyBeforeTheLimit) {
  store_->create_campaign(spec_named("c1"), jobs_of(60), 0, kT0);
  const int64_t c2 =
      store_->create_campaign(spec_named("c2"), jobs_of(5, "rename-lookup", "k2"), 0, kT0);
  // One failure among many passes, found past the limit of a scan.
  const Key failed = run_one("a", v1::VERDICT_VIOLATION);
  for (int i = 0; i < 50; ++i) run_one("a", v1::VERDICT_PASS);
  const Key other = run_one("a", v1::VERDICT_PASS, "k2");

  OutcomeQuery q;
  q.failed_only = true;
  q.limit = 1;
  auto page = store_->page_outcomes(q);
  ASSERT_EQ(page.items.size(), 1u);
  EXPECT_EQ(Key(page.items[0].job_id(), page.items[0].attempt()), failed);
  EXPECT_EQ(page.next_page_token, "") << "one failure: nothing more";
  // Lists carry no violation details, unless asked (exports).
  EXPECT_EQ(page.items[0].outcome().violations_size(), 0);
  EXPECT_EQ(page.items[0].outcome().violation_count(), 1u);
  q.with_violations = true;
  EXPECT_EQ(store_->page_outcomes(q).items.at(0).outcome().violations_size(), 1);

  OutcomeQuery by_kernel;
  by_kernel.kernel_label = "k2";
  by_kernel.limit = 1;
  page = store_->page_outcomes(by_kernel);
  ASSERT_EQ(page.items.size(), 1u);
  EXPECT_EQ(page.items[0].job_id(), other.first);
  EXPECT_EQ(page.next_page_token, "");
  OutcomeQuery by_scenario;
  by_scenario.scenario = "rename-lookup";
  by_scenario.campaign_id = c2;
  EXPECT_EQ(store_->page_outcomes(by_scenario).items.size(), 1u);

  // A full page with more behind says so; the last page does not.
  OutcomeQuery passes;
  passes.limit = 51;
  page = store_->page_outcomes(passes);
  EXPECT_EQ(page.items.size(), 51u);
  EXPECT_NE(page.next_page_token, "");
  passes.page_token = page.next_page_token;
  page = store_->page_outcomes(passes);
  EXPECT_EQ(page.items.size(), 1u);
  EXPECT_EQ(page.next_page_token, "");
}

TEST_F(PgPagingTest, LimitsHaveADefaultAndAMaximum) {
  store_->create_campaign(spec_named("c"), jobs_of(1200), 0, kT0);
  pqxx::connection c(url_);
  pqxx::work txn(c);
  // Outcomes of 1100 jobs at once, as COPY would: the limits, not the rows, matter here.
  txn.exec(
      "INSERT INTO outcomes (job_id, attempt, campaign_id, agent_id, verdict, ops,"
      " lookups_checked, offsets_checked, violation_count, race_window_hits, error, outcome,"
      " reported_at) SELECT id, 1, campaign_id, 'a', 1, 0, 0, 0, 0, 0, '', '', now()"
      " FROM jobs ORDER BY id LIMIT 1100");
  txn.commit();
  OutcomeQuery q;
  auto page = store_->page_outcomes(q);
  EXPECT_EQ(page.items.size(), kOutcomePage.fallback);
  q.limit = 5000;
  page = store_->page_outcomes(q);
  EXPECT_EQ(page.items.size(), kOutcomePage.max);
  EXPECT_NE(page.next_page_token, "") << "a capped page must not look complete";
  q.with_violations = true;
  EXPECT_EQ(store_->page_outcomes(q).items.size(), kOutcomePageWithViolations.max);
}

TEST_F(PgPagingTest, JobsAndCampaignsPageByIdAndTokensOfAnotherListAreRefused) {
  std::vector<int64_t> campaigns;
  for (int i = 0; i < 5; ++i)
    campaigns.push_back(store_->create_campaign(spec_named("c" + std::to_string(i)),
                                                jobs_of(i == 4 ? 25 : 1), 0, kT0));
  std::vector<int64_t> seen;
  std::string token;
  do {
    CampaignQuery q;
    q.limit = 2;
    q.page_token = token;
    auto page = store_->page_campaigns(q);
    EXPECT_LE(page.items.size(), 2u);
    for (const auto& c : page.items) seen.push_back(c.id());
    token = page.next_page_token;
  } while (!token.empty());
  EXPECT_EQ(seen, std::vector<int64_t>(campaigns.rbegin(), campaigns.rend()));

  std::vector<int64_t> job_ids;
  token.clear();
  do {
    auto page = store_->page_jobs(campaigns.back(), 10, token);
    for (const auto& j : page.items) job_ids.push_back(j.job_id());
    token = page.next_page_token;
  } while (!token.empty());
  std::vector<int64_t> all;
  for (const auto& j : store_->list_jobs(campaigns.back())) all.push_back(j.job_id());
  EXPECT_EQ(job_ids, all);
  EXPECT_EQ(job_ids.size(), 25u);

  const std::string jobs_token = store_->page_jobs(campaigns.back(), 10, "").next_page_token;
  OutcomeQuery q;
  q.page_token = jobs_token;
  EXPECT_THROW(store_->page_outcomes(q), BadPageToken);
  CampaignQuery bad;
  bad.page_token = "campaigns:12x";
  EXPECT_THROW(store_->page_campaigns(bad), BadPageToken);
  bad.page_token = "campaigns:";
  EXPECT_THROW(store_->page_campaigns(bad), BadPageToken);
  EXPECT_THROW(store_->page_jobs(campaigns.back(), 0, "OFFSET 10"), BadPageToken);
}

// A nightly's jobs are one run of ids after every older campaign's. The
// latest campaign's first page must be a walk of its own jobs: a plan that
// walks the primary key and filters by campaign reads every older job first
// (at 10^7 outcomes, 9.97 M rows and 5.7 s for a page of 200).
TEST_F(PgPagingTest, TheLatestCampaignsJobPageReadsOnlyItsOwnJobs) {
  store_->create_campaign(spec_named("older"), jobs_of(30000), 0, kT0);
  const int64_t latest = store_->create_campaign(spec_named("latest"), jobs_of(30000), 0, kT0);
  pqxx::connection conn(url_);
  pqxx::nontransaction(conn).exec("ANALYZE jobs");
  // The statement's plan, custom (the campaign known) and generic, as run.
  for (const char* mode : {"force_custom_plan", "force_generic_plan"}) {
    pqxx::work txn(conn);
    txn.exec(std::string("SET LOCAL plan_cache_mode = ") + mode);
    txn.exec("PREPARE page AS " + PgStore::statement_sql("page_jobs"));
    std::string plan;
    for (const auto& row : txn.exec("EXPLAIN (ANALYZE, COSTS OFF) EXECUTE page(" +
                                    std::to_string(latest) + ", 0, 201)"))
      plan += row[0].as<std::string>() + "\n";
    txn.exec("DEALLOCATE page");
    EXPECT_NE(plan.find("Index Scan using jobs_campaign_id"), std::string::npos) << mode << ":\n"
                                                                                 << plan;
    EXPECT_EQ(plan.find("Rows Removed by Filter"), std::string::npos) << mode << ":\n" << plan;
  }
  const auto page = store_->page_jobs(latest, 200, "");
  ASSERT_EQ(page.items.size(), 200u);
  const auto all = store_->list_jobs(latest);
  for (size_t i = 0; i < page.items.size(); ++i) {
    EXPECT_EQ(page.items[i].campaign_id(), latest);
    EXPECT_EQ(page.items[i].job_id(), all[i].job_id());
  }
}

// A kernel retired long ago: its outcomes are all older than every other
// kernel's. Its list must walk its own outcomes (outcomes_kernel), not every
// outcome in seq order filtered by kernel, which reads all the newer ones
// first. Told by the heap rows that index scans of outcomes fetched.
TEST_F(PgPagingTest, ARetiredKernelsOutcomeListReadsOnlyItsOwnOutcomes) {
  store_->create_campaign(spec_named("retired"), jobs_of(20000, "setattr-lookup", "old"), 0, kT0);
  store_->create_campaign(spec_named("current"), jobs_of(40000, "setattr-lookup", "k2"), 0, kT0);
  pqxx::connection conn(url_);
  // One passing outcome per job, in job order (the trigger adds the cell).
  pqxx::nontransaction(conn).exec(
      "INSERT INTO outcomes (job_id, attempt, campaign_id, agent_id, verdict, ops,"
      " lookups_checked, offsets_checked, violation_count, race_window_hits, error, outcome,"
      " reported_at) SELECT id, 1, campaign_id, 'a', 1, 1, 0, 0, 0, 0, '', '', now()"
      " FROM jobs ORDER BY id");
  pqxx::nontransaction(conn).exec("ANALYZE outcomes");
  auto fetched = [&] {
    pqxx::nontransaction n(conn);
    n.exec("SELECT pg_stat_clear_snapshot()");
    return n
        .exec(
            "SELECT coalesce(idx_tup_fetch, 0) FROM pg_stat_user_tables"
            " WHERE relname = 'outcomes'")[0][0]
        .as<int64_t>();
  };
  const int64_t before = fetched();
  OutcomeQuery q;
  q.kernel_label = "old";
  q.limit = 50;
  const auto page = store_->page_outcomes(q);
  ASSERT_EQ(page.items.size(), 50u);
  // The newest outcome of 'old' is its newest job's (one outcome per job).
  // Asked of jobs, not outcomes: a max over outcomes may walk the newer
  // kernel's 40000 outcomes by job_id, and the counters would blame the page.
  int64_t newest_old = 0;
  for (const auto& r : pqxx::nontransaction(conn).exec(
           "SELECT max(id) FROM jobs WHERE kernel_label = 'old'"))
    newest_old = r[0].as<int64_t>();
  EXPECT_EQ(page.items[0].job_id(), newest_old);
  for (size_t i = 1; i < page.items.size(); ++i)
    EXPECT_EQ(page.items[i].job_id(), page.items[i - 1].job_id() - 1);
  // The store's backend reports its counters when idle (within a second or two).
  int64_t read = 0;
  for (int i = 0; i < 100 && read < 51; ++i) {
    std::this_thread::sleep_for(100ms);
    read = fetched() - before;
  }
  EXPECT_GE(read, 51) << "the counters never arrived: nothing is told";
  EXPECT_LT(read, 1000) << "the page read " << read << " outcomes for 51";
}

// Issue 41 item 6: campaigns and jobs are paged by bytes as well as by
// count. Twelve campaigns of 1 MiB specs, each with twelve jobs of 1 MiB
// (what an older coordinator let in; the request bounds refuse them now)
// come in pages of at most kMaxPageBytes, and a walk of the pages reaches
// every one once, in order.
TEST_F(PgPagingTest, CampaignAndJobPagesEndAtTheirBytes) {
  v1::CampaignSpec big = spec_named("big");
  big.set_widen(std::string(1 << 20, 'w'));
  std::vector<NewJob> big_jobs = jobs_of(12);
  for (auto& j : big_jobs) j.spec.set_widen(std::string(1 << 20, 'w'));
  std::vector<int64_t> ids;
  for (int i = 0; i < 12; ++i) ids.push_back(store_->create_campaign(big, big_jobs, 0, kT0));
  std::reverse(ids.begin(), ids.end());  // newest first

  auto walk = [](auto page_of, auto id_of) {
    std::vector<int64_t> seen;
    std::string token;
    size_t pages = 0;
    do {
      const auto page = page_of(token);
      EXPECT_FALSE(page.items.empty());
      size_t bytes = 0;
      for (const auto& item : page.items) {
        bytes += item.ByteSizeLong();
        seen.push_back(id_of(item));
      }
      EXPECT_LE(bytes, kMaxPageBytes);
      token = page.next_page_token;
      ++pages;
    } while (!token.empty() && pages < 100);
    EXPECT_GE(pages, 2u) << "one page held them all";
    return seen;
  };
  EXPECT_EQ(walk(
                [&](const std::string& token) {
                  CampaignQuery q;
                  q.limit = 100;
                  q.page_token = token;
                  return store_->page_campaigns(q);
                },
                [](const v1::Campaign& c) { return c.id(); }),
            ids);
  std::vector<int64_t> job_ids;
  for (const auto& j : store_->list_jobs(ids.front())) job_ids.push_back(j.job_id());
  EXPECT_EQ(walk([&](const std::string& token) { return store_->page_jobs(ids.front(), 100, token); },
                 [](const v1::JobInfo& j) { return j.job_id(); }),
            job_ids);
}

TEST_F(PgPagingTest, CampaignFiltersApplyBeforeTheLimit) {
  // Three scheduled campaigns, then ten made by hand: the overview's nightly
  // is not among the latest ten.
  std::vector<int64_t> scheduled;
  for (int i = 0; i < 3; ++i)
    scheduled.push_back(store_->create_campaign(spec_named("nightly"), jobs_of(1), 7, kT0));
  for (int i = 0; i < 10; ++i) store_->create_campaign(spec_named("by hand"), jobs_of(1), 0, kT0);
  CampaignQuery q;
  q.scheduled_only = true;
  q.limit = 2;
  auto page = store_->page_campaigns(q);
  ASSERT_EQ(page.items.size(), 2u);
  EXPECT_EQ(page.items[0].id(), scheduled[2]);
  EXPECT_EQ(page.items[1].id(), scheduled[1]);
  ASSERT_NE(page.next_page_token, "");
  q.page_token = page.next_page_token;
  page = store_->page_campaigns(q);
  ASSERT_EQ(page.items.size(), 1u);
  EXPECT_EQ(page.items[0].id(), scheduled[0]);
  EXPECT_EQ(page.next_page_token, "");

  // Finish the oldest campaign's only job: it is no longer running.
  run_one("a", v1::VERDICT_PASS);
  CampaignQuery running;
  running.running_only = true;
  running.limit = 500;
  page = store_->page_campaigns(running);
  EXPECT_EQ(page.items.size(), 12u);
  for (const auto& c : page.items) {
    EXPECT_NE(c.id(), scheduled[0]);
    EXPECT_EQ(c.state(), v1::CAMPAIGN_STATE_RUNNING);
  }
}

// Each outcome carries its job's scenario and kernel (migration 13), however
// it was stored: through a report, by a plain INSERT (as COPY and the test
// fixtures store), and in a database made before the columns, which the
// migration fills. The failed outcomes of one cell are then exactly those
// the join to jobs finds, page by page.
TEST_F(PgPagingTest, OutcomesCarryTheirJobsCellHoweverTheyAreStored) {
  const int64_t c1 =
      store_->create_campaign(spec_named("a"), jobs_of(6, "setattr-lookup", "k1"), 0, kT0);
  store_->create_campaign(spec_named("b"), jobs_of(6, "rename-lookup", "k2"), 0, kT0);
  for (int i = 0; i < 3; ++i) run_one("r", i % 2 ? v1::VERDICT_PASS : v1::VERDICT_VIOLATION, "k1");
  for (int i = 0; i < 3; ++i) run_one("r", v1::VERDICT_VIOLATION, "k2");
  auto sql = [&](const std::string& statement) {
    pqxx::connection c(url_);
    pqxx::work txn(c);
    auto r = txn.exec(statement);
    txn.commit();
    return r;
  };
  sql("INSERT INTO outcomes (job_id, attempt, campaign_id, agent_id, verdict, ops,"
      " lookups_checked, offsets_checked, violation_count, race_window_hits, error, outcome,"
      " reported_at) SELECT id, 1, campaign_id, 'a', 2, 0, 0, 0, 0, 0, '', '', now() FROM jobs"
      " WHERE state = 'queued' ORDER BY id");
  // The cell of every outcome is its job's: a recount by join.
  auto mismatched = [&] {
    return sql("SELECT count(*) FROM outcomes o JOIN jobs j ON j.id = o.job_id"
               " WHERE o.scenario IS DISTINCT FROM j.scenario"
               "  OR o.kernel_label IS DISTINCT FROM j.kernel_label")[0][0]
        .as<int>();
  };
  ASSERT_EQ(sql("SELECT count(*) FROM outcomes")[0][0].as<int>(), 12);
  EXPECT_EQ(mismatched(), 0);
  // The failed outcomes of one cell, two a page, against the join's answer.
  auto walk = [&](const std::string& scenario, const std::string& kernel) {
    std::vector<Key> got;
    OutcomeQuery q;
    q.scenario = scenario;
    q.kernel_label = kernel;
    q.failed_only = true;
    q.limit = 2;
    do {
      auto page = store_->page_outcomes(q);
      for (const auto& o : page.items) got.emplace_back(o.job_id(), o.attempt());
      q.page_token = page.next_page_token;
    } while (!q.page_token.empty());
    return got;
  };
  auto expected = [&](const std::string& scenario, const std::string& kernel) {
    std::vector<Key> out;
    for (const auto& r :
         sql("SELECT o.job_id, o.attempt FROM outcomes o JOIN jobs j"
             " ON j.id = o.job_id WHERE o.verdict <> 1"
             " AND ('" +
             scenario + "' = '' OR j.scenario = '" + scenario + "') AND ('" + kernel +
             "' = '' OR j.kernel_label = '" + kernel + "') ORDER BY o.seq DESC"))
      out.emplace_back(r[0].as<int64_t>(), r[1].as<uint32_t>());
    return out;
  };
  for (const auto& [scenario, kernel] : std::vector<std::pair<std::string, std::string>>{
           {"setattr-lookup", "k1"}, {"rename-lookup", ""}, {"", "k2"}, {"setattr-lookup", "k2"}}) {
    const auto want = expected(scenario, kernel);
    EXPECT_EQ(walk(scenario, kernel), want) << scenario << "/" << kernel;
    if (scenario == "setattr-lookup" && kernel == "k1") {
      EXPECT_EQ(want.size(), 5u);
    }
  }
  OutcomeFilter f;
  f.scenario = "rename-lookup";
  f.campaign_id = c1;
  EXPECT_TRUE(store_->find_outcomes(f).empty()) << "campaign a has no rename-lookup job";

  // A database made before the columns: the migration fills them.
  store_.reset();
  sql("DROP TRIGGER outcomes_cell ON outcomes; DROP FUNCTION lf_outcome_cell();"
      " ALTER TABLE outcomes DROP COLUMN scenario, DROP COLUMN kernel_label;"
      " DELETE FROM schema_migrations WHERE version = 13");
  {
    pqxx::connection conn(url_);
    EXPECT_EQ(apply_migrations(conn), 1);
  }
  store_ = std::make_unique<PgStore>(url_);
  EXPECT_EQ(mismatched(), 0);
  EXPECT_EQ(sql("SELECT count(*) FROM outcomes WHERE scenario IS NULL")[0][0].as<int>(), 0);
  EXPECT_EQ(walk("setattr-lookup", "k1"), expected("setattr-lookup", "k1"));
}

}  // namespace
}  // namespace leapfrog::coord
