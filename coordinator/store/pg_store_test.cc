// PgStore against a real PostgreSQL (EmbeddedPostgres, one cluster per test
// process, one fresh database per test). Times are injected: no test reads
// the wall clock to decide anything.

#include "coordinator/store/pg_layout_test_util.h"
#include "coordinator/store/pg_store.h"

#include <google/protobuf/util/json_util.h>
#include <gtest/gtest.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <limits>
#include <condition_variable>
#include <map>
#include <mutex>
#include <optional>
#include <pqxx/pqxx>
#include <set>
#include <thread>

#include "coordinator/pg/embedded_postgres.h"
#include "coordinator/pg/test_postgres.h"
#include "coordinator/store/migrations.h"

namespace leapfrog::coord {
namespace {

using namespace std::chrono_literals;

// 2023-11-14T22:13:20.123456Z: microseconds on purpose, to catch rounding.
const TimePoint kT0 = TimePoint(Duration(1'700'000'000'123'456));
const Duration kLease = 30s;

int64_t us_of(const google::protobuf::Timestamp& ts) {
  return ts.seconds() * 1'000'000 + ts.nanos() / 1000;
}
int64_t us_of(TimePoint t) {
  return t.time_since_epoch().count();
}

v1::Capabilities caps(const std::string& kernel, const std::vector<std::string>& filesystems) {
  v1::Capabilities c;
  c.set_kernel_label(kernel);
  for (const auto& fs : filesystems) c.add_filesystems(fs);
  c.set_root(true);
  c.set_cpus(4);
  c.set_host("test-host");
  return c;
}

NewJob job(const std::string& scenario, const std::string& fs, uint64_t seed,
           const std::string& kernel = "host") {
  NewJob j;
  j.spec.set_scenario(scenario);
  j.spec.set_fs(fs);
  j.spec.set_seed(seed);
  j.spec.set_iterations(1000);
  (*j.spec.mutable_params())["depth"] = 3;
  j.kernel_label = kernel;
  return j;
}

std::vector<NewJob> jobs(int n, const std::string& fs = "tmpfs") {
  std::vector<NewJob> out;
  out.reserve(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) out.push_back(job("setattr-lookup", fs, static_cast<uint64_t>(i)));
  return out;
}

v1::CampaignSpec campaign_spec(const std::string& name, uint32_t max_attempts = 0) {
  v1::CampaignSpec s;
  s.set_name(name);
  s.add_scenarios("setattr-lookup");
  s.add_filesystems("tmpfs");
  s.set_seeds(1);
  s.set_max_attempts(max_attempts);
  return s;
}

v1::Outcome outcome(v1::Verdict verdict) {
  v1::Outcome o;
  o.set_verdict(verdict);
  o.set_ops(1000);
  o.set_lookups_checked(800);
  o.set_clock_source("tsc");
  o.mutable_finished_at()->set_seconds(1'700'000'000);
  return o;
}

class PgStoreTest : public testing::PostgresSuite<PgStoreTest> {
 protected:
  // A fresh database per test.
  void SetUp() override {
    db_ = fresh_database("test");
    url_ = pg_->url(db_);
    store_ = std::make_unique<PgStore>(url_);
  }

  // Leases one job as `agent` with the default test capabilities.
  std::optional<v1::Job> lease(const std::string& agent, TimePoint now,
                               const v1::Capabilities& c = caps("host", {"tmpfs"})) {
    return store_->lease_job(agent, c, now, kLease);
  }

  v1::JobInfo job_info(int64_t campaign, int64_t job_id) {
    for (auto& j : store_->list_jobs(campaign)) {
      if (j.job_id() == job_id) return j;
    }
    ADD_FAILURE() << "no job " << job_id;
    return {};
  }

  // With a store of one report writer: makes that writer wait, for a row
  // lock `lock` takes on `job_id`, while writing a report of that job (the
  // returned thread), so that the reports made next queue up as one batch.
  std::thread hold_report_writer(pqxx::work& lock, int64_t job_id, uint32_t attempt) {
    lock.exec_params("SELECT 1 FROM jobs WHERE id = $1 FOR UPDATE", job_id);
    std::thread writer([this, job_id, attempt] {
      EXPECT_EQ(store_->report_outcome("a", job_id, attempt, outcome(v1::VERDICT_PASS), kT0 + 3s),
                ReportResult::Stored);
    });
    pqxx::connection probe(url_);
    for (int i = 0;; ++i) {
      pqxx::nontransaction q(probe);
      if (!q.exec("SELECT 1 FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
                  " AND datname = current_database()")
               .empty())
        break;
      if (i == 100'000) {
        ADD_FAILURE() << "the report writer never waited for the lock";
        break;
      }
      std::this_thread::yield();
    }
    return writer;
  }

  // Waits until `n` report_outcome calls are queued.
  void wait_queued(size_t n) {
    for (int i = 0; store_->queued_reports() < n; ++i) {
      ASSERT_LT(i, 100'000'000) << "report " << n << " never queued";
      std::this_thread::yield();
    }
  }

  std::string db_;
  std::string url_;
  std::unique_ptr<PgStore> store_;
};

TEST_F(PgStoreTest, MigrationsAreIdempotent) {
  pqxx::connection conn(url_);
  EXPECT_EQ(apply_migrations(conn), 0);  // the store applied them already
  EXPECT_EQ(apply_migrations(conn), 0);
  auto versions = pqxx::work(conn).exec("SELECT count(*) FROM schema_migrations")[0][0].as<int>();
  EXPECT_EQ(versions, static_cast<int>(schema_migrations().size()));
  // A second store (another replica) on the same database.
  PgStore again(url_);
  EXPECT_TRUE(again.list_campaigns(10).empty());
}

TEST_F(PgStoreTest, ReplicasMigratingTogetherApplyOnce) {
  pqxx::connection admin(pg_->url());
  pqxx::nontransaction(admin).exec("CREATE DATABASE " + db_ + "_fresh");
  std::string url = pg_->url(db_ + "_fresh");
  std::atomic<int> applied{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([&] {
      pqxx::connection conn(url);
      applied += apply_migrations(conn);
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(applied.load(), static_cast<int>(schema_migrations().size()));
}

TEST_F(PgStoreTest, NewerSchemaIsRefused) {
  pqxx::connection conn(url_);
  pqxx::work txn(conn);
  txn.exec("INSERT INTO schema_migrations (version, name) VALUES (999, 'from the future')");
  txn.commit();
  try {
    PgStore old(url_);
    FAIL() << "a store opened a database with a newer schema";
  } catch (const StoreError& e) {
    EXPECT_FALSE(e.unavailable());
    EXPECT_NE(std::string(e.what()).find("version 999"), std::string::npos) << e.what();
  }
}

TEST_F(PgStoreTest, AgentsRegisterTouchAndList) {
  std::string a = store_->register_agent("alpha", caps("host", {"tmpfs", "ext4"}), kT0);
  std::string b = store_->register_agent("beta", caps("v6.1", {"xfs"}), kT0 + 1s);
  EXPECT_FALSE(a.empty());
  EXPECT_NE(a, b);
  // Registering again under the same name keeps the id and updates capabilities.
  EXPECT_EQ(store_->register_agent("alpha", caps("host", {"btrfs"}), kT0 + 2s), a);

  EXPECT_TRUE(store_->touch_agent(b, kT0 + 100s));
  EXPECT_FALSE(store_->touch_agent("no-such-agent", kT0));

  auto agents = store_->list_agents(kT0 + 50s);
  ASSERT_EQ(agents.size(), 2u);
  EXPECT_EQ(agents[0].name(), "alpha");
  EXPECT_EQ(agents[0].agent_id(), a);
  EXPECT_EQ(agents[0].capabilities().filesystems_size(), 1);
  EXPECT_EQ(agents[0].capabilities().filesystems(0), "btrfs");
  EXPECT_EQ(us_of(agents[0].registered_at()), us_of(kT0));  // microseconds survive
  EXPECT_EQ(us_of(agents[0].last_seen()), us_of(kT0 + 2s));
  EXPECT_FALSE(agents[0].online());
  EXPECT_TRUE(agents[1].online());
  EXPECT_EQ(agents[1].current_job(), 0);

  // current_job follows the lease.
  auto c = store_->create_campaign(campaign_spec("c"), {job("s", "xfs", 1, "v6.1")}, 0, kT0);
  auto leased = lease(b, kT0, caps("v6.1", {"xfs"}));
  ASSERT_TRUE(leased);
  agents = store_->list_agents(kT0);
  EXPECT_EQ(agents[1].current_job(), leased->job_id());
  EXPECT_EQ(leased->campaign_id(), c);
}

TEST_F(PgStoreTest, KernelsAreUniqueByLabel) {
  v1::Kernel k;
  k.set_label("v6.1-patched");
  k.set_version("6.1.0-13-amd64");
  k.set_sha256("ab12");
  k.set_source("/boot/vmlinuz");
  auto added = store_->add_kernel(k, kT0);
  EXPECT_EQ(us_of(added.added_at()), us_of(kT0));
  try {
    store_->add_kernel(k, kT0 + 1s);
    FAIL() << "a second kernel with the same label";
  } catch (const StoreError& e) {
    EXPECT_FALSE(e.unavailable());
    EXPECT_NE(std::string(e.what()).find("'v6.1-patched'"), std::string::npos) << e.what();
  }
  auto all = store_->list_kernels();
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all[0].version(), "6.1.0-13-amd64");
  EXPECT_EQ(all[0].source(), "/boot/vmlinuz");
}

TEST_F(PgStoreTest, BuiltKernelsKeepTheirPatchesAndCanBeReplaced) {
  v1::Kernel k;
  k.set_label("planted");
  k.set_version("6.1.192-lfabcd1234");
  k.set_sha256("cd34");
  k.set_source("build /usr/src/linux-source-6.1.tar.xz");
  k.set_cmdline("leapfrog_planted=1");
  auto* p = k.add_patches();
  p->set_name("0001-planted.patch");
  p->set_sha256("ef56");
  p->set_subject("[PATCH] namei: planted");
  store_->add_kernel(k, kT0);
  auto all = store_->list_kernels();
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all[0].status(), v1::KERNEL_STATUS_READY)
      << "an added kernel is ready unless it says otherwise";
  EXPECT_EQ(all[0].cmdline(), "leapfrog_planted=1");
  ASSERT_EQ(all[0].patches_size(), 1);
  EXPECT_EQ(all[0].patches(0).subject(), "[PATCH] namei: planted");

  k.set_status(v1::KERNEL_STATUS_BUILD_FAILURE);
  k.set_build_log_tail("fs/namei.c:1: error: oops");
  k.clear_patches();
  EXPECT_THROW(store_->add_kernel(k, kT0 + 1s), StoreError);
  auto replaced = store_->put_kernel(k, kT0 + 2s);
  EXPECT_EQ(us_of(replaced.added_at()), us_of(kT0 + 2s));
  all = store_->list_kernels();
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all[0].status(), v1::KERNEL_STATUS_BUILD_FAILURE);
  EXPECT_EQ(all[0].build_log_tail(), "fs/namei.c:1: error: oops");
  EXPECT_EQ(all[0].patches_size(), 0);
  EXPECT_EQ(us_of(all[0].added_at()), us_of(kT0 + 2s));
}

TEST_F(PgStoreTest, CampaignsStoreTheirJobs) {
  auto first = store_->create_campaign(campaign_spec("first"), jobs(60), 0, kT0);
  auto second = store_->create_campaign(campaign_spec("second"), jobs(2), 0, kT0 + 1s);
  auto empty = store_->create_campaign(campaign_spec("empty"), {}, 0, kT0 + 2s);

  auto c = store_->get_campaign(first);
  ASSERT_TRUE(c);
  EXPECT_EQ(c->spec().name(), "first");
  EXPECT_EQ(c->jobs(), 60u);
  EXPECT_EQ(c->by_state().at("queued"), 60u);
  EXPECT_EQ(c->by_state().at("leased"), 0u);
  EXPECT_EQ(c->state(), v1::CAMPAIGN_STATE_RUNNING);
  EXPECT_EQ(us_of(c->created_at()), us_of(kT0));
  EXPECT_EQ(store_->get_campaign(empty)->state(), v1::CAMPAIGN_STATE_DONE);
  EXPECT_FALSE(store_->get_campaign(12345));

  auto listed = store_->list_jobs(first);
  ASSERT_EQ(listed.size(), 60u);
  for (size_t i = 0; i < listed.size(); ++i) {
    EXPECT_EQ(listed[i].spec().seed(), i);
    EXPECT_EQ(listed[i].spec().params().at("depth"), 3);
    EXPECT_EQ(listed[i].state(), v1::JOB_STATE_QUEUED);
    EXPECT_EQ(listed[i].attempt(), 0u);
    EXPECT_EQ(listed[i].kernel_label(), "host");
  }

  auto recent = store_->list_campaigns(2);
  ASSERT_EQ(recent.size(), 2u);
  EXPECT_EQ(recent[0].id(), empty);
  EXPECT_EQ(recent[1].id(), second);
  EXPECT_EQ(recent[1].by_state().at("queued"), 2u);
  EXPECT_EQ(store_->list_campaigns(0).size(), 3u);
}

TEST_F(PgStoreTest, ConcurrentLeasesHandEachJobOnce) {
  auto campaign = store_->create_campaign(campaign_spec("race"), jobs(60), 0, kT0);
  std::mutex mu;
  std::map<int64_t, int> leased;  // job -> times leased
  std::map<std::string, int> per_agent;
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      std::string agent = t % 2 ? "agent-a" : "agent-b";
      while (auto j = lease(agent, kT0)) {
        std::lock_guard<std::mutex> lock(mu);
        ++leased[j->job_id()];
        ++per_agent[agent];
        EXPECT_EQ(j->attempt(), 1u);
        EXPECT_EQ(j->campaign_id(), campaign);
        EXPECT_EQ(us_of(j->lease_deadline()), us_of(kT0 + kLease));
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(leased.size(), 60u);
  for (auto& [job_id, times] : leased) EXPECT_EQ(times, 1) << "job " << job_id;
  EXPECT_EQ(per_agent["agent-a"] + per_agent["agent-b"], 60);
  EXPECT_EQ(store_->get_campaign(campaign)->by_state().at("leased"), 60u);
  EXPECT_FALSE(lease("agent-a", kT0));
}

TEST_F(PgStoreTest, LeasesMatchKernelAndFilesystem) {
  std::string odd_fs = "fuse \"cached\",{x}\\";  // quotes, comma, braces, backslash
  store_->create_campaign(campaign_spec("matrix"),
                          {job("s", "tmpfs", 1, "host"), job("s", "ext4", 2, "host"),
                           job("s", "tmpfs", 3, "v6.1"), job("s", odd_fs, 4, "host")},
                          0, kT0);
  EXPECT_FALSE(lease("a", kT0, caps("host", {})));
  EXPECT_FALSE(lease("a", kT0, caps("v6.2", {"tmpfs", "ext4"})));
  EXPECT_FALSE(lease("a", kT0, caps("host", {"xfs", "fuse"})));

  auto v61 = lease("a", kT0, caps("v6.1", {"tmpfs", "ext4"}));
  ASSERT_TRUE(v61);
  EXPECT_EQ(v61->spec().seed(), 3u);
  EXPECT_EQ(v61->kernel_label(), "v6.1");

  auto ext4 = lease("a", kT0, caps("host", {"ext4", "xfs"}));
  ASSERT_TRUE(ext4);
  EXPECT_EQ(ext4->spec().seed(), 2u);

  auto odd = lease("a", kT0, caps("host", {odd_fs}));
  ASSERT_TRUE(odd);
  EXPECT_EQ(odd->spec().fs(), odd_fs);

  // Oldest first among the rest.
  auto any = lease("a", kT0, caps("host", {"ext4", "tmpfs"}));
  ASSERT_TRUE(any);
  EXPECT_EQ(any->spec().seed(), 1u);
  EXPECT_FALSE(lease("a", kT0, caps("host", {"ext4", "tmpfs", odd_fs})));
}

TEST_F(PgStoreTest, HeartbeatsRenewTheLease) {
  auto campaign = store_->create_campaign(campaign_spec("hb"), jobs(1), 0, kT0);
  auto j = lease("a", kT0);
  ASSERT_TRUE(j);
  auto deadline = store_->renew_lease("a", j->job_id(), j->attempt(), kT0 + 20s, kLease);
  ASSERT_TRUE(deadline);
  EXPECT_EQ(*deadline, kT0 + 50s);
  EXPECT_FALSE(store_->renew_lease("b", j->job_id(), j->attempt(), kT0 + 20s, kLease));
  EXPECT_FALSE(store_->renew_lease("a", j->job_id(), j->attempt() + 1, kT0 + 20s, kLease));
  EXPECT_FALSE(store_->renew_lease("a", j->job_id() + 1, j->attempt(), kT0 + 20s, kLease));

  EXPECT_EQ(store_->expire_leases(kT0 + 40s), 0);  // renewed past the first deadline
  EXPECT_EQ(job_info(campaign, j->job_id()).state(), v1::JOB_STATE_LEASED);
  EXPECT_EQ(store_->expire_leases(kT0 + 51s), 1);
  EXPECT_EQ(job_info(campaign, j->job_id()).state(), v1::JOB_STATE_QUEUED);
  // The lease is gone: the agent's next heartbeat fails.
  EXPECT_FALSE(store_->renew_lease("a", j->job_id(), j->attempt(), kT0 + 52s, kLease));
}

// Issue 47: a heartbeat's counts are kept with the job for its attempt, a
// heartbeat without them leaves them as they were, and a new attempt starts
// with none.
TEST_F(PgStoreTest, HeartbeatsKeepTheRunsProgressForTheirAttempt) {
  auto campaign = store_->create_campaign(campaign_spec("progress", 3), jobs(1), 0, kT0);
  auto j = lease("a", kT0);
  ASSERT_TRUE(j);
  EXPECT_FALSE(job_info(campaign, j->job_id()).has_progress());
  v1::JobProgress p;
  p.set_operations(1000);
  p.set_lookups_judged(900);
  p.set_violations(2);
  ASSERT_TRUE(store_->renew_lease("a", j->job_id(), j->attempt(), kT0 + 5s, kLease, kTrustedCaller, &p));
  v1::JobInfo info = job_info(campaign, j->job_id());
  ASSERT_TRUE(info.has_progress());
  EXPECT_EQ(info.progress().operations(), 1000u);
  EXPECT_EQ(info.progress().lookups_judged(), 900u);
  EXPECT_EQ(info.progress().violations(), 2u);
  EXPECT_EQ(info.progress().updated_at().seconds(),
            std::chrono::duration_cast<std::chrono::seconds>((kT0 + 5s).time_since_epoch()).count());
  ASSERT_TRUE(store_->renew_lease("a", j->job_id(), j->attempt(), kT0 + 10s, kLease));
  EXPECT_EQ(job_info(campaign, j->job_id()).progress().operations(), 1000u);
  // Through get_job too (the job's page).
  ASSERT_TRUE(store_->get_job(j->job_id()));
  EXPECT_EQ(store_->get_job(j->job_id())->progress().lookups_judged(), 900u);
  // Expired and leased again: the new attempt has reported nothing yet.
  EXPECT_EQ(store_->expire_leases(kT0 + 41s), 1);
  auto again = lease("b", kT0 + 42s);
  ASSERT_TRUE(again);
  ASSERT_EQ(again->job_id(), j->job_id());
  EXPECT_FALSE(job_info(campaign, j->job_id()).has_progress());
}

TEST_F(PgStoreTest, ExpiredLeasesRequeueThenEndAsInfraFailure) {
  auto campaign = store_->create_campaign(campaign_spec("lossy", 3), jobs(1), 0, kT0);
  TimePoint now = kT0;
  std::string last_agent;
  for (uint32_t attempt = 1; attempt <= 3; ++attempt) {
    last_agent = "agent-" + std::to_string(attempt);
    auto j = lease(last_agent, now);
    ASSERT_TRUE(j) << "attempt " << attempt;
    EXPECT_EQ(j->attempt(), attempt);
    EXPECT_EQ(store_->expire_leases(now + kLease - 1us), 0);
    EXPECT_EQ(store_->expire_leases(now + kLease + 1us), 1);
    now += kLease + 1s;
  }
  EXPECT_FALSE(lease("agent-4", now));
  auto info = store_->list_jobs(campaign).at(0);
  EXPECT_EQ(info.state(), v1::JOB_STATE_DONE);
  EXPECT_EQ(info.verdict(), v1::VERDICT_INFRA_FAILURE);
  EXPECT_EQ(info.attempt(), 3u);
  EXPECT_EQ(info.reason(), "lease expired after 3 attempts (last agent " + last_agent + ")");
  auto c = store_->get_campaign(campaign);
  EXPECT_EQ(c->state(), v1::CAMPAIGN_STATE_DONE);
  EXPECT_EQ(c->by_verdict().at("infra-failure"), 1u);
}

// Issue 47: a run the OOM killer killed is an INFRA_FAILURE the agent
// reports; the job's reason (the campaign page's column) is its error.
TEST_F(PgStoreTest, AnOutOfMemoryReportSaysWhyInTheJobsReason) {
  auto campaign = store_->create_campaign(campaign_spec("oom", 1), jobs(1), 0, kT0);
  auto j = lease("a", kT0);
  ASSERT_TRUE(j);
  v1::Outcome o = outcome(v1::VERDICT_INFRA_FAILURE);
  o.set_error("out of memory: the OOM killer killed the run (Out of memory: Killed process 72 (leapfrog-agent))");
  o.mutable_killed()->set_reason(v1::RUN_KILL_OUT_OF_MEMORY);
  EXPECT_EQ(store_->report_outcome("a", j->job_id(), j->attempt(), o, kT0 + 1s), ReportResult::Stored);
  const v1::JobInfo info = job_info(campaign, j->job_id());
  EXPECT_EQ(info.verdict(), v1::VERDICT_INFRA_FAILURE);
  EXPECT_EQ(info.reason(), o.error());
  // Another verdict's error stays in its outcome.
  auto campaign2 = store_->create_campaign(campaign_spec("err", 1), jobs(1), 0, kT0);
  auto k = lease("a", kT0);
  ASSERT_TRUE(k);
  v1::Outcome e = outcome(v1::VERDICT_ERROR);
  e.set_error("no FUSE");
  EXPECT_EQ(store_->report_outcome("a", k->job_id(), k->attempt(), e, kT0 + 1s), ReportResult::Stored);
  EXPECT_EQ(job_info(campaign2, k->job_id()).reason(), "");
}

// Issue 41 item 5: a row an older coordinator stored with values no reader
// can print (ReportOutcome refuses them now: report_check.h) is shown with
// a note saying what was cleared, and never fails a list, a page or the
// campaign's counts. The damage is written as such a coordinator left it:
// the outcome's bytes, and the counters' -1 (2^64-1 as bigint).
TEST_F(PgStoreTest, ARowStoredWithValuesNoReaderCanPrintIsShownWithANote) {
  const auto campaign = store_->create_campaign(campaign_spec("old", 1), jobs(1), 0, kT0);
  auto j = lease("a", kT0);
  ASSERT_TRUE(j);
  v1::Outcome o = outcome(v1::VERDICT_VIOLATION);
  o.set_lookups_checked(1000);
  o.set_violation_count(1);
  ASSERT_EQ(store_->report_outcome("a", j->job_id(), j->attempt(), o, kT0 + 1s), ReportResult::Stored);
  o.mutable_elapsed()->set_seconds(int64_t{1} << 62);
  o.mutable_finished_at()->set_seconds(int64_t{1} << 62);
  o.mutable_run()->mutable_setup()->set_nanos(2'000'000'000);
  o.set_ops_per_sec(std::nan(""));
  o.set_violation_count(~uint64_t{0});
  o.set_epsilon_ns(std::numeric_limits<int64_t>::min());
  {
    pqxx::connection conn(url_);
    pqxx::work w(conn);
    w.exec_params("UPDATE outcomes SET outcome = $1, violation_count = -1 WHERE job_id = $2",
                  pqxx::binarystring(o.SerializeAsString()), j->job_id());
    w.exec_params("UPDATE campaign_verdicts SET violations = -1 WHERE campaign_id = $1", campaign);
    w.exec_params("UPDATE cell_verdicts SET violations = -1 WHERE campaign_id = $1", campaign);
    w.commit();
  }

  OutcomeQuery q;
  q.campaign_id = campaign;
  const auto page = store_->page_outcomes(q);
  ASSERT_EQ(page.items.size(), 1u);
  const v1::Outcome& back = page.items[0].outcome();
  EXPECT_FALSE(back.has_elapsed());
  EXPECT_FALSE(back.has_finished_at());
  EXPECT_FALSE(back.run().has_setup());
  EXPECT_EQ(back.ops_per_sec(), 0);
  EXPECT_EQ(back.violation_count(), 0u);
  EXPECT_EQ(back.epsilon_ns(), 0);
  EXPECT_EQ(back.lookups_checked(), 1000u);  // what was sound stays
  ASSERT_EQ(back.run().notes_size(), 1);
  const std::string& note = back.run().notes(0);
  EXPECT_NE(note.find("stored with values no reader can print"), std::string::npos) << note;
  for (const char* field : {"outcome.elapsed", "outcome.finished_at", "outcome.run.setup", "outcome.ops_per_sec",
                            "outcome.violation_count", "outcome.epsilon_ns"})
    EXPECT_NE(note.find(field), std::string::npos) << field << ": " << note;
  std::string json;
  EXPECT_TRUE(google::protobuf::util::MessageToJsonString(page.items[0], &json).ok());

  // The campaign's counts and its cells read the -1 as nothing counted.
  const auto c = store_->get_campaign(campaign);
  ASSERT_TRUE(c);
  EXPECT_EQ(c->violations(), 0u);
  const auto cells = store_->campaign_cells(campaign);
  ASSERT_EQ(cells.size(), 1u);
  EXPECT_EQ(cells[0].violations, 0u);
  EXPECT_EQ(store_->list_campaigns(10).size(), 1u);
}

TEST_F(PgStoreTest, ReleasedLeasesDoNotCountAsAttempts) {
  auto campaign = store_->create_campaign(campaign_spec("released", 1), jobs(1), 0, kT0);
  auto j = lease("a", kT0);
  ASSERT_TRUE(j);
  store_->release_job("b", j->job_id(), j->attempt());  // not b's: ignored
  EXPECT_EQ(job_info(campaign, j->job_id()).state(), v1::JOB_STATE_LEASED);
  store_->release_job("a", j->job_id(), j->attempt());
  EXPECT_EQ(job_info(campaign, j->job_id()).state(), v1::JOB_STATE_QUEUED);

  // The next lease gets a new attempt number, but it is the first one that
  // counts against max_attempts 1.
  auto again = lease("b", kT0 + 1s);
  ASSERT_TRUE(again);
  EXPECT_EQ(again->attempt(), 2u);
  // The released attempt cannot report over the new lease.
  EXPECT_EQ(
      store_->report_outcome("a", j->job_id(), j->attempt(), outcome(v1::VERDICT_PASS), kT0 + 2s),
      ReportResult::Superseded);
  EXPECT_EQ(store_->expire_leases(kT0 + 1h), 1);
  auto info = job_info(campaign, j->job_id());
  EXPECT_EQ(info.verdict(), v1::VERDICT_INFRA_FAILURE);
  EXPECT_EQ(info.reason(), "lease expired after 1 attempts (last agent b)");
}

TEST_F(PgStoreTest, RepeatedReportIsStoredOnce) {
  auto campaign = store_->create_campaign(campaign_spec("dup"), jobs(1), 0, kT0);
  auto j = lease("a", kT0);
  ASSERT_TRUE(j);
  auto o = outcome(v1::VERDICT_VIOLATION);
  o.set_violation_count(1);
  o.add_violations()->set_kind(v1::VIOLATION_KIND_STALE_GRANT);
  EXPECT_EQ(store_->report_outcome("a", j->job_id(), j->attempt(), o, kT0 + 1s),
            ReportResult::Stored);
  EXPECT_EQ(store_->report_outcome("a", j->job_id(), j->attempt(), o, kT0 + 2s),
            ReportResult::Duplicate);
  EXPECT_EQ(store_->find_outcomes({.campaign_id = campaign}).size(), 1u);
  auto info = job_info(campaign, j->job_id());
  EXPECT_EQ(info.state(), v1::JOB_STATE_DONE);
  EXPECT_EQ(info.verdict(), v1::VERDICT_VIOLATION);
  EXPECT_EQ(info.agent_id(), "a");
  auto c = store_->get_campaign(campaign);
  EXPECT_EQ(c->state(), v1::CAMPAIGN_STATE_DONE);
  EXPECT_EQ(c->by_verdict().at("violation"), 1u);
  EXPECT_EQ(c->violations(), 1u);
  // Heartbeats for a finished job fail.
  EXPECT_FALSE(store_->renew_lease("a", j->job_id(), j->attempt(), kT0 + 3s, kLease));
}

TEST_F(PgStoreTest, ConcurrentRepeatedReportsStoreOnce) {
  auto campaign = store_->create_campaign(campaign_spec("dup"), jobs(1), 0, kT0);
  auto j = lease("a", kT0);
  ASSERT_TRUE(j);
  std::atomic<int> stored{0};
  std::atomic<int> duplicate{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 6; ++t) {
    threads.emplace_back([&] {
      auto r = store_->report_outcome("a", j->job_id(), j->attempt(), outcome(v1::VERDICT_PASS),
                                      kT0 + 1s);
      (r == ReportResult::Stored ? stored : duplicate)++;
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(stored.load(), 1);
  EXPECT_EQ(duplicate.load(), 5);
  EXPECT_EQ(store_->find_outcomes({.campaign_id = campaign}).size(), 1u);
}

TEST_F(PgStoreTest, LateReportIsTakenUntilTheJobIsLeasedAgain) {
  auto campaign = store_->create_campaign(campaign_spec("late"), jobs(2), 0, kT0);
  auto first = lease("a", kT0);
  auto second = lease("a", kT0);
  ASSERT_TRUE(first && second);
  ASSERT_EQ(store_->expire_leases(kT0 + 1h), 2);

  // Job 1: requeued but not leased again; a's late report still counts.
  EXPECT_EQ(
      store_->report_outcome("a", first->job_id(), 1, outcome(v1::VERDICT_PASS), kT0 + 1h + 1s),
      ReportResult::Stored);
  EXPECT_EQ(job_info(campaign, first->job_id()).state(), v1::JOB_STATE_DONE);

  // Job 2: leased again by b (attempt 2): a's report of attempt 1 is superseded.
  auto retry = lease("b", kT0 + 1h + 2s);
  ASSERT_TRUE(retry);
  EXPECT_EQ(retry->job_id(), second->job_id());
  EXPECT_EQ(retry->attempt(), 2u);
  EXPECT_EQ(
      store_->report_outcome("a", second->job_id(), 1, outcome(v1::VERDICT_PASS), kT0 + 1h + 3s),
      ReportResult::Superseded);
  EXPECT_EQ(
      store_->report_outcome("b", second->job_id(), 2, outcome(v1::VERDICT_ERROR), kT0 + 1h + 4s),
      ReportResult::Stored);
  EXPECT_EQ(
      store_->report_outcome("a", second->job_id(), 1, outcome(v1::VERDICT_PASS), kT0 + 1h + 5s),
      ReportResult::Superseded);
  EXPECT_EQ(store_->find_outcomes({.campaign_id = campaign}).size(), 2u);
  EXPECT_EQ(job_info(campaign, second->job_id()).verdict(), v1::VERDICT_ERROR);

  // Unknown jobs and attempts never handed out are the caller's error.
  try {
    store_->report_outcome("a", 999999, 1, outcome(v1::VERDICT_PASS), kT0);
    FAIL() << "stored an outcome of an unknown job";
  } catch (const StoreError& e) {
    EXPECT_FALSE(e.unavailable());
  }
  EXPECT_THROW(store_->report_outcome("b", second->job_id(), 7, outcome(v1::VERDICT_PASS), kT0),
               StoreError);
}

TEST_F(PgStoreTest, SupersededReportWithViolationsIsKeptAsAnExtraOutcome) {
  auto campaign = store_->create_campaign(campaign_spec("extra"), jobs(1), 0, kT0);
  auto first = lease("a", kT0);
  ASSERT_TRUE(first);
  ASSERT_EQ(store_->expire_leases(kT0 + 1h), 1);
  auto retry = lease("b", kT0 + 1h + 1s);
  ASSERT_TRUE(retry);
  ASSERT_EQ(retry->attempt(), 2u);

  // a's late report of attempt 1 found a violation: kept, marked, the job untouched.
  auto found = outcome(v1::VERDICT_VIOLATION);
  found.set_violation_count(1);
  found.add_violations()->set_kind(v1::VIOLATION_KIND_STALE_GRANT);
  EXPECT_EQ(store_->report_outcome("a", first->job_id(), 1, found, kT0 + 1h + 2s),
            ReportResult::KeptSuperseded);
  EXPECT_EQ(store_->report_outcome("a", first->job_id(), 1, found, kT0 + 1h + 3s),
            ReportResult::Duplicate);
  auto info = job_info(campaign, first->job_id());
  EXPECT_EQ(info.state(), v1::JOB_STATE_LEASED);
  EXPECT_EQ(info.attempt(), 2u);
  // The holder of attempt 2 still reports; a passing late report is still dropped.
  EXPECT_EQ(
      store_->report_outcome("b", first->job_id(), 2, outcome(v1::VERDICT_PASS), kT0 + 1h + 4s),
      ReportResult::Stored);
  EXPECT_EQ(
      store_->report_outcome("a", first->job_id(), 1, outcome(v1::VERDICT_PASS), kT0 + 1h + 5s),
      ReportResult::Duplicate);
  EXPECT_EQ(job_info(campaign, first->job_id()).verdict(), v1::VERDICT_PASS);

  auto all = store_->find_outcomes({.campaign_id = campaign});
  ASSERT_EQ(all.size(), 2u);
  std::map<uint32_t, v1::OutcomeRecord> by_attempt;
  for (const auto& o : all) by_attempt[o.attempt()] = o;
  EXPECT_TRUE(by_attempt.at(1).superseded());
  EXPECT_EQ(by_attempt.at(1).outcome().verdict(), v1::VERDICT_VIOLATION);
  ASSERT_EQ(by_attempt.at(1).outcome().violations_size(), 1);
  EXPECT_EQ(by_attempt.at(1).outcome().violations(0).kind(), v1::VIOLATION_KIND_STALE_GRANT);
  EXPECT_FALSE(by_attempt.at(2).superseded());
  auto failed = store_->find_outcomes({.campaign_id = campaign, .failed_only = true});
  ASSERT_EQ(failed.size(), 1u);
  EXPECT_TRUE(failed[0].superseded());

  // A job done by another attempt keeps a late violation too.
  auto c2 = store_->create_campaign(campaign_spec("extra-done"), jobs(1), 0, kT0);
  auto j1 = lease("a", kT0 + 2h);
  ASSERT_TRUE(j1);
  ASSERT_EQ(store_->expire_leases(kT0 + 3h), 1);
  auto j2 = lease("b", kT0 + 3h);
  ASSERT_TRUE(j2);
  ASSERT_EQ(store_->report_outcome("b", j2->job_id(), 2, outcome(v1::VERDICT_PASS), kT0 + 3h + 1s),
            ReportResult::Stored);
  EXPECT_EQ(store_->report_outcome("a", j1->job_id(), 1, found, kT0 + 3h + 2s),
            ReportResult::KeptSuperseded);
  EXPECT_EQ(job_info(c2, j1->job_id()).verdict(), v1::VERDICT_PASS);
  EXPECT_EQ(store_->find_outcomes({.campaign_id = c2}).size(), 2u);
}

TEST_F(PgStoreTest, RealOutcomeReplacesInfraFailureOfTheSameAttempt) {
  auto campaign = store_->create_campaign(campaign_spec("slow", 1), jobs(1), 0, kT0);
  auto j = lease("a", kT0);
  ASSERT_TRUE(j);
  ASSERT_EQ(store_->expire_leases(kT0 + 1h), 1);
  EXPECT_EQ(job_info(campaign, j->job_id()).verdict(), v1::VERDICT_INFRA_FAILURE);
  EXPECT_EQ(store_->report_outcome("a", j->job_id(), 1, outcome(v1::VERDICT_PASS), kT0 + 2h),
            ReportResult::Stored);
  auto info = job_info(campaign, j->job_id());
  EXPECT_EQ(info.verdict(), v1::VERDICT_PASS);
  EXPECT_EQ(info.reason(), "");
  EXPECT_EQ(store_->report_outcome("a", j->job_id(), 1, outcome(v1::VERDICT_PASS), kT0 + 3h),
            ReportResult::Duplicate);
}

// One batch (group commit) holding a new report, its repeat, a repeat of an
// outcome stored before, a superseded report, a repeat of an agent's own
// INFRA_FAILURE outcome and an unknown job: each caller gets what it would
// have got alone, and only the new outcome is stored.
TEST_F(PgStoreTest, MixedBatchJudgesEachReportAsIfAlone) {
  PgStoreOptions options;
  options.report_writers = 1;
  store_ = std::make_unique<PgStore>(url_, options);
  auto campaign = store_->create_campaign(campaign_spec("mixed"), jobs(5), 0, kT0);
  // stale: its lease expires, and b leases it again (attempt 2).
  auto stale = lease("a", kT0 - 1h);
  auto fresh = lease("a", kT0);
  auto stored_before = lease("a", kT0);
  auto infra = lease("a", kT0);  // the agent itself reports INFRA_FAILURE
  auto held = lease("a", kT0);   // locked below, to hold the writer
  ASSERT_TRUE(stale && fresh && stored_before && infra && held);
  ASSERT_EQ(store_->expire_leases(kT0), 1);
  auto again = lease("b", kT0 + 1s);
  ASSERT_TRUE(again);
  ASSERT_EQ(again->job_id(), stale->job_id());
  ASSERT_EQ(again->attempt(), 2u);
  ASSERT_EQ(
      store_->report_outcome("a", stored_before->job_id(), 1, outcome(v1::VERDICT_PASS), kT0 + 1s),
      ReportResult::Stored);
  ASSERT_EQ(
      store_->report_outcome("a", infra->job_id(), 1, outcome(v1::VERDICT_INFRA_FAILURE), kT0 + 1s),
      ReportResult::Stored);

  pqxx::connection blocker(url_);
  pqxx::work lock(blocker);
  std::thread first = hold_report_writer(lock, held->job_id(), 1);
  auto with_violation = outcome(v1::VERDICT_VIOLATION);
  with_violation.set_violation_count(1);
  with_violation.add_violations()->set_kind(v1::VIOLATION_KIND_STALE_GRANT);
  struct Call {
    int64_t job_id;
    v1::Outcome outcome;
    std::optional<ReportResult> want;  // nullopt: an error
    std::optional<ReportResult> got = std::nullopt;
    bool failed = false;
  };
  std::vector<Call> calls = {
      {fresh->job_id(), with_violation, ReportResult::Stored},
      {fresh->job_id(), with_violation, ReportResult::Duplicate},
      {stored_before->job_id(), outcome(v1::VERDICT_PASS), ReportResult::Duplicate},
      {stale->job_id(), outcome(v1::VERDICT_PASS), ReportResult::Superseded},
      {infra->job_id(), outcome(v1::VERDICT_INFRA_FAILURE), ReportResult::Duplicate},
      {999999, outcome(v1::VERDICT_PASS), std::nullopt},
  };
  std::vector<std::thread> threads;
  for (size_t i = 0; i < calls.size(); ++i) {
    threads.emplace_back([&, i] {
      try {
        calls[i].got = store_->report_outcome("a", calls[i].job_id, 1, calls[i].outcome, kT0 + 4s);
      } catch (const StoreError& e) {
        EXPECT_FALSE(e.unavailable()) << e.what();
        calls[i].failed = true;
      }
    });
    wait_queued(i + 1);  // one at a time, so that the batch keeps this order
  }
  lock.commit();
  first.join();
  for (auto& t : threads) t.join();
  for (size_t i = 0; i < calls.size(); ++i) {
    EXPECT_EQ(calls[i].got, calls[i].want) << "report " << i;
    EXPECT_EQ(calls[i].failed, !calls[i].want.has_value()) << "report " << i;
  }
  // Before: stored_before and infra; now fresh (with its violation) and held.
  EXPECT_EQ(store_->find_outcomes({.campaign_id = campaign}).size(), 4u);
  EXPECT_EQ(job_info(campaign, fresh->job_id()).verdict(), v1::VERDICT_VIOLATION);
  EXPECT_EQ(job_info(campaign, stale->job_id()).state(), v1::JOB_STATE_LEASED);
  EXPECT_EQ(job_info(campaign, infra->job_id()).verdict(), v1::VERDICT_INFRA_FAILURE);
  pqxx::connection conn(url_);
  EXPECT_EQ(pqxx::work(conn).exec("SELECT count(*) FROM violations")[0][0].as<int>(), 1);
}

// Two attempts of one job in one batch (the agent of the expired attempt
// reports late, the new one on time), each repeated: judged per attempt.
TEST_F(PgStoreTest, BatchJudgesEachAttemptOfOneJob) {
  PgStoreOptions options;
  options.report_writers = 1;
  store_ = std::make_unique<PgStore>(url_, options);
  auto campaign = store_->create_campaign(campaign_spec("attempts"), jobs(2), 0, kT0);
  auto stale = lease("a", kT0 - 1h);
  auto held = lease("a", kT0);
  ASSERT_TRUE(stale && held);
  ASSERT_EQ(store_->expire_leases(kT0), 1);
  auto again = lease("b", kT0 + 1s);
  ASSERT_TRUE(again);
  ASSERT_EQ(again->job_id(), stale->job_id());
  ASSERT_EQ(again->attempt(), 2u);

  pqxx::connection blocker(url_);
  pqxx::work lock(blocker);
  std::thread first = hold_report_writer(lock, held->job_id(), 1);
  auto with_violation = outcome(v1::VERDICT_VIOLATION);
  with_violation.set_violation_count(1);
  with_violation.add_violations()->set_kind(v1::VIOLATION_KIND_STALE_GRANT);
  struct Call {
    uint32_t attempt;
    std::optional<ReportResult> want;  // nullopt: an error
    std::optional<ReportResult> got = std::nullopt;
    bool failed = false;
  };
  std::vector<Call> calls = {
      // The superseded attempt found a violation: kept once, as an extra outcome.
      {1, ReportResult::KeptSuperseded}, {2, ReportResult::Stored}, {1, ReportResult::Duplicate},
      {2, ReportResult::Duplicate},      {3, std::nullopt},
  };
  std::vector<std::thread> threads;
  for (size_t i = 0; i < calls.size(); ++i) {
    threads.emplace_back([&, i] {
      try {
        calls[i].got = store_->report_outcome("b", stale->job_id(), calls[i].attempt,
                                              with_violation, kT0 + 4s);
      } catch (const StoreError& e) {
        EXPECT_FALSE(e.unavailable()) << e.what();
        calls[i].failed = true;
      }
    });
    wait_queued(i + 1);
  }
  lock.commit();
  first.join();
  for (auto& t : threads) t.join();
  for (size_t i = 0; i < calls.size(); ++i) {
    EXPECT_EQ(calls[i].got, calls[i].want) << "report " << i;
    EXPECT_EQ(calls[i].failed, !calls[i].want.has_value()) << "report " << i;
  }
  EXPECT_EQ(job_info(campaign, stale->job_id()).state(), v1::JOB_STATE_DONE);
  EXPECT_EQ(job_info(campaign, stale->job_id()).verdict(), v1::VERDICT_VIOLATION);
  pqxx::connection conn(url_);
  pqxx::work txn(conn);
  EXPECT_EQ(txn.exec_params("SELECT count(*) FROM outcomes WHERE job_id = $1 AND attempt = 2",
                            stale->job_id())[0][0]
                .as<int>(),
            1);
  EXPECT_EQ(txn.exec_params("SELECT count(*) FROM outcomes WHERE job_id = $1 AND attempt = 1"
                            " AND superseded",
                            stale->job_id())[0][0]
                .as<int>(),
            1);
  EXPECT_EQ(
      txn.exec_params("SELECT count(*) FROM outcomes WHERE job_id = $1", stale->job_id())[0][0]
          .as<int>(),
      2);
  EXPECT_EQ(
      txn.exec_params("SELECT count(*) FROM violations WHERE job_id = $1", stale->job_id())[0][0]
          .as<int>(),
      2);
}

// A report the database refuses (a violation that is not UTF-8) fails the
// batch's transaction; the batch is then written one report at a time, and
// only that report fails.
TEST_F(PgStoreTest, RefusedReportFailsAloneInItsBatch) {
  PgStoreOptions options;
  options.report_writers = 1;
  store_ = std::make_unique<PgStore>(url_, options);
  auto campaign = store_->create_campaign(campaign_spec("refused"), jobs(4), 0, kT0);
  std::vector<v1::Job> leased;
  for (int i = 0; i < 4; ++i) {
    auto j = lease("a", kT0);
    ASSERT_TRUE(j);
    leased.push_back(*j);
  }
  pqxx::connection blocker(url_);
  pqxx::work lock(blocker);
  std::thread first = hold_report_writer(lock, leased[3].job_id(), 1);
  std::vector<std::thread> threads;
  std::atomic<int> stored{0};
  std::atomic<int> refused{0};
  for (size_t i = 0; i < 3; ++i) {
    auto o = outcome(v1::VERDICT_VIOLATION);
    o.set_violation_count(2);
    o.add_violations()->set_path("d0/ok\tab");
    o.add_violations()->set_path(i == 1 ? "d0/\xff\xfe" : "d0/fine");
    threads.emplace_back([&, i, o] {
      try {
        EXPECT_EQ(store_->report_outcome("a", leased[i].job_id(), 1, o, kT0 + 4s),
                  ReportResult::Stored);
        ++stored;
      } catch (const StoreError& e) {
        EXPECT_FALSE(e.unavailable()) << e.what();
        EXPECT_EQ(i, 1u) << e.what();
        ++refused;
      }
    });
    wait_queued(i + 1);
  }
  lock.commit();
  first.join();
  for (auto& t : threads) t.join();
  EXPECT_EQ(stored.load(), 2);
  EXPECT_EQ(refused.load(), 1);
  EXPECT_EQ(store_->find_outcomes({.campaign_id = campaign}).size(), 3u);
  EXPECT_EQ(job_info(campaign, leased[1].job_id()).state(), v1::JOB_STATE_LEASED);
  pqxx::connection conn(url_);
  EXPECT_EQ(pqxx::work(conn).exec("SELECT count(*) FROM violations")[0][0].as<int>(), 4);
}

TEST_F(PgStoreTest, FiveHundredViolationsRoundTrip) {
  auto campaign = store_->create_campaign(campaign_spec("evidence"), jobs(1), 0, kT0);
  auto j = lease("a", kT0);
  ASSERT_TRUE(j);
  auto o = outcome(v1::VERDICT_VIOLATION);
  o.set_violation_count(1234);  // the list is capped at 500
  (*o.mutable_violations_by_kind())["stale-grant"] = 1234;
  o.mutable_elapsed()->set_seconds(5);
  for (int i = 0; i < 500; ++i) {
    auto* v = o.add_violations();
    v->set_kind(i % 2 ? v1::VIOLATION_KIND_STALE_GRANT : v1::VIOLATION_KIND_STALE_ENTRY);
    v->set_actor(static_cast<uint32_t>(i % 7));
    v->set_op("openat");
    v->set_path("a/b\tc\nd\\e \"q\" ü/" + std::to_string(i));  // COPY's special characters
    v->set_invoke_ns(1'000'000'000'000LL + i);
    v->set_complete_ns(1'000'000'000'500LL + i);
    v->set_step(i % 4 - 1);
    v->set_component("b");
    v->set_object("dir:/b");
    v->set_observed("granted");
    v->set_expected("EACCES");
    if (i % 3) continue;                           // one without a detail: its entry stays empty
    v1::ViolationDetail* d = v->mutable_detail();  // typed, with COPY's special bytes too
    d->set_record(static_cast<uint64_t>(i));
    d->set_epsilon_ns(-5);
    auto* initial = d->add_versions();
    initial->set_value("mode=0700\t\\ \n");
    initial->set_to_ns(i);
    auto* current = d->add_versions();
    current->set_value("mode=0755");
    current->set_from_ns(i);
    current->set_node_kind(v1::NODE_KIND_DIR);
    auto* step = d->add_steps();
    step->set_step(1);
    step->set_object("attr(b)");
    *step->add_versions() = *current;
    auto* m = d->add_history();
    m->set_op("chmod");
    m->set_invoke_ns(i);
    m->set_err(13);
  }
  ASSERT_EQ(store_->report_outcome("a", j->job_id(), j->attempt(), o, kT0 + 5s),
            ReportResult::Stored);
  auto listed = store_->find_outcomes({.campaign_id = campaign, .limit = 10});
  ASSERT_EQ(listed.size(), 1u);
  const auto& r = listed[0];
  EXPECT_EQ(r.job_id(), j->job_id());
  EXPECT_EQ(r.attempt(), 1u);
  EXPECT_EQ(r.campaign_id(), campaign);
  EXPECT_EQ(r.agent_id(), "a");
  EXPECT_EQ(r.kernel_label(), "host");
  EXPECT_EQ(r.spec().scenario(), "setattr-lookup");
  EXPECT_EQ(us_of(r.reported_at()), us_of(kT0 + 5s));
  ASSERT_EQ(r.outcome().violations_size(), 500);
  EXPECT_EQ(r.outcome().SerializeAsString(), o.SerializeAsString());
  EXPECT_EQ(store_->get_campaign(campaign)->violations(), 1234u);

  pqxx::connection conn(url_);
  EXPECT_EQ(pqxx::work(conn).exec("SELECT count(*) FROM violations")[0][0].as<int>(), 500);
  // A typed detail is kept once, in the outcome's one violation_details
  // value; the rows keep none.
  EXPECT_EQ(
      pqxx::work(conn)
          .exec("SELECT count(*) FROM violations WHERE detail_pb IS NULL AND detail = ''")[0][0]
          .as<int>(),
      500);
  EXPECT_EQ(pqxx::work(conn).exec("SELECT count(*) FROM violation_details")[0][0].as<int>(), 1);
  // Stored compressed: the 167 details share most of their bytes.
  const auto sizes = pqxx::work(conn).exec(
      "SELECT pg_column_size(details), octet_length(details) FROM violation_details")[0];
  EXPECT_LT(sizes[0].as<int>() * 3, sizes[1].as<int>())
      << "stored " << sizes[0].as<int>() << " of " << sizes[1].as<int>() << " bytes";
}

// An outcome stored before violation_details existed keeps each typed
// detail in its row (detail_pb), and reads back the same.
TEST_F(PgStoreTest, ADetailInItsOwnRowStillReads) {
  store_->create_campaign(campaign_spec("old"), jobs(1), 0, kT0);
  auto j = lease("a", kT0);
  ASSERT_TRUE(j);
  auto o = outcome(v1::VERDICT_VIOLATION);
  o.set_violation_count(2);
  for (int i = 0; i < 2; ++i) {
    auto* v = o.add_violations();
    v->set_kind(v1::VIOLATION_KIND_STALE_GRANT);
    v->mutable_detail()->add_versions()->set_value("mode=070" + std::to_string(i));
    v->mutable_detail()->add_history()->set_op("chmod");
  }
  ASSERT_EQ(store_->report_outcome("a", j->job_id(), j->attempt(), o, kT0 + 5s),
            ReportResult::Stored);
  ASSERT_EQ(move_details_into_rows(url_, j->job_id(), j->attempt(), o), 1u);
  const auto listed = store_->find_outcomes({.limit = 1});
  ASSERT_EQ(listed.size(), 1u);
  EXPECT_EQ(listed[0].outcome().SerializeAsString(), o.SerializeAsString());
}

TEST_F(PgStoreTest, FindOutcomesNewestFirstByCampaignAndFailedOnly) {
  auto c1 = store_->create_campaign(campaign_spec("one"), jobs(4), 0, kT0);
  auto c2 = store_->create_campaign(campaign_spec("two"), jobs(2), 0, kT0);
  std::vector<v1::Verdict> verdicts = {v1::VERDICT_PASS, v1::VERDICT_VIOLATION,
                                       v1::VERDICT_PASS, v1::VERDICT_ERROR,
                                       v1::VERDICT_PASS, v1::VERDICT_KERNEL_CRASH};
  std::vector<int64_t> order;
  for (size_t i = 0; i < verdicts.size(); ++i) {
    auto j = lease("a", kT0);
    ASSERT_TRUE(j);
    order.push_back(j->job_id());
    ASSERT_EQ(store_->report_outcome("a", j->job_id(), j->attempt(), outcome(verdicts[i]),
                                     kT0 + std::chrono::seconds(i)),
              ReportResult::Stored);
  }
  auto all = store_->find_outcomes({});
  ASSERT_EQ(all.size(), 6u);
  EXPECT_EQ(all.front().job_id(), order.back());
  EXPECT_EQ(all.back().job_id(), order.front());

  auto failed = store_->find_outcomes({.failed_only = true});
  ASSERT_EQ(failed.size(), 3u);
  EXPECT_EQ(failed[0].outcome().verdict(), v1::VERDICT_KERNEL_CRASH);
  EXPECT_EQ(failed[1].outcome().verdict(), v1::VERDICT_ERROR);
  EXPECT_EQ(failed[2].outcome().verdict(), v1::VERDICT_VIOLATION);

  EXPECT_EQ(store_->find_outcomes({.campaign_id = c1}).size(), 4u);
  EXPECT_EQ(store_->find_outcomes({.campaign_id = c1, .failed_only = true}).size(), 2u);
  auto c2_failed = store_->find_outcomes({.campaign_id = c2, .failed_only = true});
  ASSERT_EQ(c2_failed.size(), 1u);
  EXPECT_EQ(c2_failed[0].campaign_id(), c2);
  EXPECT_EQ(store_->find_outcomes({.limit = 2}).size(), 2u);

  auto counts = store_->get_campaign(c1);
  EXPECT_EQ(counts->by_verdict().at("pass"), 2u);
  EXPECT_EQ(counts->by_verdict().at("violation"), 1u);
  EXPECT_EQ(counts->by_verdict().at("error"), 1u);
  EXPECT_EQ(store_->get_campaign(c2)->by_verdict().at("kernel-crash"), 1u);
}

TEST_F(PgStoreTest, FindOutcomesFiltersByJobScenarioAndVerdict) {
  std::vector<NewJob> js = {job("setattr-lookup", "tmpfs", 1), job("lookup-scale", "tmpfs", 2),
                            job("lookup-scale", "tmpfs", 3)};
  auto c = store_->create_campaign(campaign_spec("mixed"), js, 0, kT0);
  std::vector<v1::Verdict> verdicts = {v1::VERDICT_VIOLATION, v1::VERDICT_PASS, v1::VERDICT_ERROR};
  std::vector<int64_t> ids;
  for (auto verdict : verdicts) {
    auto j = lease("a", kT0);
    ASSERT_TRUE(j);
    ids.push_back(j->job_id());
    v1::Outcome o = outcome(verdict);
    if (verdict == v1::VERDICT_VIOLATION)
      o.add_violations()->set_kind(v1::VIOLATION_KIND_STALE_GRANT);
    ASSERT_EQ(store_->report_outcome("a", j->job_id(), j->attempt(), o, kT0), ReportResult::Stored);
  }
  OutcomeFilter by_job;
  by_job.job_id = ids[0];
  auto one = store_->find_outcomes(by_job);
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(one[0].job_id(), ids[0]);
  ASSERT_EQ(one[0].outcome().violations_size(), 1);
  EXPECT_EQ(one[0].outcome().violations(0).kind(), v1::VIOLATION_KIND_STALE_GRANT);

  OutcomeFilter scale;
  scale.scenario = "lookup-scale";
  EXPECT_EQ(store_->find_outcomes(scale).size(), 2u);
  scale.failed_only = true;
  auto failed = store_->find_outcomes(scale);
  ASSERT_EQ(failed.size(), 1u);
  EXPECT_EQ(failed[0].outcome().verdict(), v1::VERDICT_ERROR);

  OutcomeFilter other;
  other.campaign_id = c + 1;
  EXPECT_TRUE(store_->find_outcomes(other).empty());
  other.campaign_id = c;
  other.limit = 2;
  EXPECT_EQ(store_->find_outcomes(other).size(), 2u);

  auto info = store_->get_job(ids[1]);
  ASSERT_TRUE(info);
  EXPECT_EQ(info->spec().scenario(), "lookup-scale");
  EXPECT_EQ(info->verdict(), v1::VERDICT_PASS);
  EXPECT_EQ(info->state(), v1::JOB_STATE_DONE);
  EXPECT_FALSE(store_->get_job(ids.back() + 100));
}

TEST_F(PgStoreTest, SchedulesAddListEnableRemove) {
  auto spec = campaign_spec("nightly");
  auto s = store_->add_schedule("nightly", "0 2 * * *", spec, kT0 + 1h);
  EXPECT_GT(s.id(), 0);
  EXPECT_TRUE(s.enabled());
  auto other = store_->add_schedule("hourly", "0 * * * *", campaign_spec("hourly"), kT0 + 5min);

  auto listed = store_->list_schedules();
  ASSERT_EQ(listed.size(), 2u);
  EXPECT_EQ(listed[0].name(), "nightly");
  EXPECT_EQ(listed[0].cron(), "0 2 * * *");
  EXPECT_EQ(listed[0].campaign().name(), "nightly");
  EXPECT_EQ(us_of(listed[0].next_run()), us_of(kT0 + 1h));
  EXPECT_FALSE(listed[0].has_last_run());

  auto disabled = store_->set_schedule_enabled(s.id(), false, kT0 + 2h);
  ASSERT_TRUE(disabled);
  EXPECT_FALSE(disabled->enabled());
  EXPECT_EQ(us_of(disabled->next_run()), us_of(kT0 + 2h));
  EXPECT_FALSE(store_->set_schedule_enabled(99999, true, kT0));

  EXPECT_TRUE(store_->remove_schedule(other.id()));
  EXPECT_FALSE(store_->remove_schedule(other.id()));
  listed = store_->list_schedules();
  ASSERT_EQ(listed.size(), 1u);
  EXPECT_FALSE(listed[0].enabled());
}

TEST_F(PgStoreTest, ScheduleFiresOnceAcrossCallers) {
  auto s = store_->add_schedule("nightly", "0 2 * * *", campaign_spec("nightly"), kT0);
  std::atomic<int> fired{0};
  std::atomic<int64_t> campaign{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 6; ++t) {
    threads.emplace_back([&] {
      auto id = store_->fire_schedule(s.id(), kT0, kT0 + 24h, jobs(5), kT0 + 1s);
      if (id) {
        ++fired;
        campaign = *id;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(fired.load(), 1);
  EXPECT_EQ(store_->list_campaigns(10).size(), 1u);
  auto c = store_->get_campaign(campaign.load());
  ASSERT_TRUE(c);
  EXPECT_EQ(c->schedule_id(), s.id());
  EXPECT_EQ(c->jobs(), 5u);
  EXPECT_EQ(c->spec().name(), "nightly");
  auto after = store_->list_schedules().at(0);
  EXPECT_EQ(us_of(after.next_run()), us_of(kT0 + 24h));
  EXPECT_EQ(us_of(after.last_run()), us_of(kT0));

  // A stale due time, or a disabled schedule, fires nothing.
  EXPECT_FALSE(store_->fire_schedule(s.id(), kT0, kT0 + 24h, jobs(5), kT0 + 2s));
  store_->set_schedule_enabled(s.id(), false, kT0 + 24h);
  EXPECT_FALSE(store_->fire_schedule(s.id(), kT0 + 24h, kT0 + 48h, jobs(5), kT0 + 24h));
  EXPECT_EQ(store_->list_campaigns(10).size(), 1u);
}

TEST_F(PgStoreTest, RecoversAfterPostgresRestart) {
  auto campaign = store_->create_campaign(campaign_spec("restart"), jobs(3), 0, kT0);
  ASSERT_TRUE(lease("a", kT0));  // the pool now holds a connection

  pg_->stop();
  try {
    lease("a", kT0);
    FAIL() << "leased with the database down";
  } catch (const StoreError& e) {
    EXPECT_TRUE(e.unavailable()) << e.what();
  }
  try {
    store_->list_campaigns(10);
    FAIL() << "listed with the database down";
  } catch (const StoreError& e) {
    EXPECT_TRUE(e.unavailable()) << e.what();
  }
  pg_->start(*dir_ / "pg");
  ASSERT_EQ(pg_->url(db_), url_);

  // The same store, without recreating it.
  auto j = lease("a", kT0);
  ASSERT_TRUE(j);
  EXPECT_EQ(
      store_->report_outcome("a", j->job_id(), j->attempt(), outcome(v1::VERDICT_PASS), kT0 + 1s),
      ReportResult::Stored);
  EXPECT_EQ(store_->get_campaign(campaign)->by_state().at("done"), 1u);

  // Pooled connections opened before a restart are replaced transparently.
  pg_->restart();
  EXPECT_EQ(store_->list_jobs(campaign).size(), 3u);
  EXPECT_EQ(store_->get_campaign(campaign)->by_state().at("leased"), 1u);
}

// Agents keep leasing and reporting while PostgreSQL restarts twice; every job
// ends with exactly one stored outcome.
TEST_F(PgStoreTest, NothingIsLostAcrossRestartsUnderLoad) {
  spdlog::set_level(spdlog::level::err);  // each failed call logs a warning
  constexpr int kJobs = 600;
  auto campaign = store_->create_campaign(campaign_spec("load"), jobs(kJobs), 0, kT0);
  std::atomic<int> stored{0};
  std::atomic<int> unavailable{0};
  std::atomic<bool> stop{false};
  // An agent's loop: lease, report until acknowledged; back off briefly when
  // the database is unavailable (as the agent's spool does).
  auto agent = [&](const std::string& name, TimePoint now) {
    while (!stop) {
      std::optional<v1::Job> j;
      try {
        j = lease(name, now);
      } catch (const StoreError& e) {
        EXPECT_TRUE(e.unavailable()) << e.what();
        ++unavailable;
        std::this_thread::sleep_for(2ms);
        continue;
      }
      if (!j) return;
      for (;;) {
        try {
          auto r = store_->report_outcome(name, j->job_id(), j->attempt(),
                                          outcome(v1::VERDICT_PASS), now);
          EXPECT_NE(r, ReportResult::Superseded);
          if (r == ReportResult::Stored) ++stored;
          break;
        } catch (const StoreError& e) {
          EXPECT_TRUE(e.unavailable()) << e.what();
          ++unavailable;
          std::this_thread::sleep_for(2ms);
        }
      }
    }
  };
  auto run_agents = [&](TimePoint now) {
    std::vector<std::thread> threads;
    for (int t = 0; t < 6; ++t) threads.emplace_back(agent, "agent-" + std::to_string(t), now);
    return threads;
  };

  auto t0 = std::chrono::steady_clock::now();
  auto threads = run_agents(kT0);
  for (int restart = 1; restart <= 2; ++restart) {
    while (stored < restart * kJobs / 3 && stored < kJobs) std::this_thread::yield();
    pg_->restart();
  }
  for (auto& t : threads) t.join();
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  // A lease whose commit was cut by the restart may be held by nobody: it
  // expires and is handed out again.
  auto c = store_->get_campaign(campaign);
  if (c->by_state().at("leased") > 0) {
    EXPECT_EQ(store_->expire_leases(kT0 + 1h), static_cast<int>(c->by_state().at("leased")));
    threads = run_agents(kT0 + 1h);
    for (auto& t : threads) t.join();
  }
  c = store_->get_campaign(campaign);
  EXPECT_EQ(c->by_state().at("done"), static_cast<uint32_t>(kJobs));
  EXPECT_EQ(c->by_verdict().at("pass"), static_cast<uint32_t>(kJobs));
  EXPECT_EQ(store_->find_outcomes({.campaign_id = campaign, .limit = kJobs + 10}).size(),
            static_cast<size_t>(kJobs));
  EXPECT_GT(unavailable.load(), 0) << "no call met a restart; the test proved nothing";
  std::printf("lease+report cycles: %d in %.2f s (%.0f/s) with 2 restarts; %d calls unavailable\n",
              kJobs, seconds, kJobs / seconds, unavailable.load());
  spdlog::set_level(spdlog::level::warn);
}

// Kernel build jobs in the store: only a builder lease takes them, jobs on the
// label wait, a success queues them for the built release, a report repeated
// is a duplicate, and a build lost on every attempt ends its waiting jobs.
NewJob build_job(const std::string& label) {
  NewJob j;
  j.kernel_label = label;
  j.spec.set_scenario("kernel-build");
  j.spec.set_fs("kernel-build");
  v1::KernelBuild b;
  b.set_label(label);
  b.set_source("linux");
  auto* f = b.add_patch_files();
  f->set_name("0001-fix.patch");
  f->set_content("--- a/x\n+++ b/x\n");
  f->set_sha256("ab12");
  j.build = b;
  return j;
}

TEST_F(PgStoreTest, BuildJobQueuesItsWaitingJobsForTheBuiltRelease) {
  std::vector<NewJob> all = {job("setattr-lookup", "tmpfs", 1, "nightly"),
                             job("setattr-lookup", "tmpfs", 2, "nightly"),
                             job("setattr-lookup", "tmpfs", 3, "host"), build_job("nightly")};
  const int64_t c = store_->create_campaign(campaign_spec("rebuild"), all, 0, kT0);
  const v1::Capabilities nightly = caps("nightly", {"tmpfs", "kernel-build"});
  EXPECT_FALSE(lease("a", kT0, nightly)) << "a waiting job or the build job went to a test lease";
  auto host = lease("h", kT0);
  ASSERT_TRUE(host);  // jobs on other labels do not wait
  auto build = store_->lease_build_job("b", kT0, kLease);
  ASSERT_TRUE(build);
  ASSERT_TRUE(build->has_build());
  ASSERT_EQ(build->build().patch_files_size(), 1);
  EXPECT_EQ(build->build().patch_files(0).content(), "--- a/x\n+++ b/x\n") << "the lease carries the bytes";
  // Lists show the file by name and sha256, without its bytes.
  bool listed = false;
  for (const auto& info : store_->list_jobs(c)) {
    if (!info.has_build() || info.build().patch_files_size() == 0) continue;
    listed = true;
    EXPECT_EQ(info.build().patch_files(0).name(), "0001-fix.patch");
    EXPECT_EQ(info.build().patch_files(0).sha256(), "ab12");
    EXPECT_TRUE(info.build().patch_files(0).content().empty());
  }
  EXPECT_TRUE(listed) << "the build job is not in the campaign's list";
  EXPECT_FALSE(store_->lease_build_job("b2", kT0, kLease));

  v1::Outcome o = outcome(v1::VERDICT_PASS);
  auto* r = o.mutable_build();
  r->set_ok(true);
  r->set_release("6.1.0-lfabcdef12");
  r->set_vmlinux_sha256(std::string(64, 'a'));
  r->set_version("6.1.0-lfabcdef12 #1");
  r->add_patches()->set_name("0001-fix.patch");
  EXPECT_EQ(store_->report_outcome("b", build->job_id(), build->attempt(), o, kT0 + 1s), ReportResult::Stored);
  EXPECT_EQ(store_->report_outcome("b", build->job_id(), build->attempt(), o, kT0 + 2s), ReportResult::Duplicate);
  const auto kernels = store_->list_kernels();
  ASSERT_EQ(kernels.size(), 1u);
  EXPECT_EQ(kernels[0].label(), "nightly");
  EXPECT_EQ(kernels[0].status(), v1::KERNEL_STATUS_READY);
  EXPECT_EQ(kernels[0].release(), "6.1.0-lfabcdef12");
  EXPECT_EQ(kernels[0].source(), "build of linux + 0001-fix.patch");

  EXPECT_FALSE(lease("a", kT0 + 2s, nightly)) << "an agent without the built release leased";
  v1::Capabilities built = nightly;
  built.set_uname("6.1.0-lfabcdef12 #1 SMP");
  auto first = lease("n", kT0 + 2s, built);
  ASSERT_TRUE(first);
  EXPECT_EQ(first->kernel_label(), "nightly");
  EXPECT_EQ(job_info(c, first->job_id()).release(), "6.1.0-lfabcdef12");
}

TEST_F(PgStoreTest, BuildLostOnEveryAttemptEndsItsWaitingJobs) {
  const int64_t c = store_->create_campaign(campaign_spec("rebuild", 1),
                                            {job("setattr-lookup", "tmpfs", 1, "nightly"), build_job("nightly")},
                                            0, kT0);
  auto build = store_->lease_build_job("b", kT0, kLease);
  ASSERT_TRUE(build);
  EXPECT_EQ(store_->expire_leases(kT0 + kLease - 1s), 0);
  EXPECT_EQ(store_->expire_leases(kT0 + kLease + 1s), 2);  // the build job, and the job waiting for it
  for (const auto& j : store_->list_jobs(c)) {
    EXPECT_EQ(j.state(), v1::JOB_STATE_DONE) << j.job_id();
    if (j.has_build()) {
      EXPECT_EQ(j.verdict(), v1::VERDICT_INFRA_FAILURE);
    } else {
      EXPECT_EQ(j.verdict(), v1::VERDICT_BUILD_FAILURE);
      EXPECT_NE(j.reason().find("kernel nightly was not built: build job " + std::to_string(build->job_id())),
                std::string::npos)
          << j.reason();
    }
  }
  EXPECT_EQ(store_->get_campaign(c)->state(), v1::CAMPAIGN_STATE_DONE);
}

// What report_outcome_async handed to its callback, and how often.
struct AsyncReply {
  std::mutex mu;
  std::condition_variable cv;
  int calls = 0;
  std::optional<ReportResult> result;
  std::exception_ptr error;

  ReportDone callback() {
    return [this](ReportResult r, std::exception_ptr e) {
      std::lock_guard<std::mutex> lock(mu);
      ++calls;
      if (e) {
        error = e;
      } else {
        result = r;
      }
      cv.notify_all();
    };
  }
  // Waits for the callback (a safety net of 60 s, never an expectation).
  bool wait() {
    std::unique_lock<std::mutex> lock(mu);
    return cv.wait_for(lock, std::chrono::seconds(60), [&] { return calls > 0; });
  }
  int count() {
    std::lock_guard<std::mutex> lock(mu);
    return calls;
  }
  // The StoreError passed, if any.
  std::optional<StoreError> store_error() {
    std::lock_guard<std::mutex> lock(mu);
    if (!error) return std::nullopt;
    try {
      std::rethrow_exception(error);
    } catch (const StoreError& e) {
      return e;
    } catch (...) {
      return StoreError("not a StoreError", false);
    }
  }
};

// report_outcome_async queues without waiting (the writer is held), and the
// batch it joins answers each report as report_outcome would: stored,
// duplicate, superseded, an unknown job's error, and a build job's report
// (written in a transaction of its own, registering its kernel).
TEST_F(PgStoreTest, AsyncReportsAnswerAsReportOutcome) {
  PgStoreOptions options;
  options.report_writers = 1;
  store_ = std::make_unique<PgStore>(url_, options);
  auto campaign =
      store_->create_campaign(campaign_spec("async"),
                              {job("setattr-lookup", "tmpfs", 1), job("setattr-lookup", "tmpfs", 2),
                               job("setattr-lookup", "tmpfs", 3), build_job("nightly")},
                              0, kT0);
  auto stale = lease("a", kT0 - 1h);
  auto fresh = lease("a", kT0);
  auto held = lease("a", kT0);
  auto build = store_->lease_build_job("b", kT0, kLease);
  ASSERT_TRUE(stale && fresh && held && build);
  ASSERT_EQ(store_->expire_leases(kT0), 1);
  ASSERT_EQ(lease("b", kT0 + 1s)->attempt(), 2u);

  pqxx::connection blocker(url_);
  pqxx::work lock(blocker);
  std::thread first = hold_report_writer(lock, held->job_id(), 1);
  v1::Outcome built = outcome(v1::VERDICT_PASS);
  built.mutable_build()->set_ok(true);
  built.mutable_build()->set_release("6.1.0-lfasync");
  built.mutable_build()->set_vmlinux_sha256(std::string(64, 'b'));
  built.mutable_build()->set_version("6.1.0-lfasync #1");
  const v1::Outcome pass = outcome(v1::VERDICT_PASS);
  const std::string agent = "a", builder = "b";
  struct Call {
    int64_t job_id;
    const v1::Outcome* outcome;
    std::optional<ReportResult> want;  // nullopt: an error
  };
  const std::vector<Call> calls = {
      {fresh->job_id(), &pass, ReportResult::Stored},
      {fresh->job_id(), &pass, ReportResult::Duplicate},
      {stale->job_id(), &pass, ReportResult::Superseded},
      {999999, &pass, std::nullopt},
      {build->job_id(), &built, ReportResult::Stored},
  };
  std::vector<AsyncReply> replies(calls.size());
  for (size_t i = 0; i < calls.size(); ++i) {
    // The build job is b's lease: only its holder may report on it. (The
    // store keeps a reference to the agent id until the report is written.)
    const std::string& by = calls[i].job_id == build->job_id() ? builder : agent;
    store_->report_outcome_async(by, calls[i].job_id, 1, *calls[i].outcome, kT0 + 4s,
                                 replies[i].callback());
  }
  EXPECT_EQ(store_->queued_reports(), calls.size()) << "an async report waited for the database";
  for (auto& r : replies) EXPECT_EQ(r.count(), 0) << "answered before its batch was written";
  lock.commit();
  first.join();
  for (size_t i = 0; i < calls.size(); ++i) {
    ASSERT_TRUE(replies[i].wait()) << "report " << i << " never answered";
    EXPECT_EQ(replies[i].count(), 1) << "report " << i;
    EXPECT_EQ(replies[i].result, calls[i].want) << "report " << i;
    if (!calls[i].want) {
      auto e = replies[i].store_error();
      ASSERT_TRUE(e) << "report " << i;
      EXPECT_FALSE(e->unavailable());
      EXPECT_NE(std::string(e->what()).find("unknown job 999999"), std::string::npos) << e->what();
    }
  }
  EXPECT_EQ(job_info(campaign, fresh->job_id()).state(), v1::JOB_STATE_DONE);
  EXPECT_EQ(job_info(campaign, stale->job_id()).state(), v1::JOB_STATE_LEASED);
  ASSERT_EQ(store_->list_kernels().size(), 1u);
  EXPECT_EQ(store_->list_kernels()[0].release(), "6.1.0-lfasync");
  // held, fresh and the build job.
  EXPECT_EQ(store_->find_outcomes({.campaign_id = campaign}).size(), 3u);
}

// With the database down an async report fails as unavailable (the agent
// keeps it spooled); once it is back the same store stores it, once.
TEST_F(PgStoreTest, AsyncReportWhileTheDatabaseIsDownIsUnavailableThenStored) {
  auto campaign = store_->create_campaign(campaign_spec("down"), jobs(1), 0, kT0);
  auto j = lease("a", kT0);
  ASSERT_TRUE(j);
  const v1::Outcome pass = outcome(v1::VERDICT_PASS);
  const std::string agent = "a";

  pg_->stop();
  AsyncReply down;
  store_->report_outcome_async(agent, j->job_id(), j->attempt(), pass, kT0 + 1s, down.callback());
  ASSERT_TRUE(down.wait());
  auto e = down.store_error();
  ASSERT_TRUE(e) << "stored with the database down";
  EXPECT_TRUE(e->unavailable()) << e->what();
  pg_->start(*dir_ / "pg");

  AsyncReply back, again;
  store_->report_outcome_async(agent, j->job_id(), j->attempt(), pass, kT0 + 2s, back.callback());
  ASSERT_TRUE(back.wait());
  EXPECT_EQ(back.result, ReportResult::Stored);
  store_->report_outcome_async(agent, j->job_id(), j->attempt(), pass, kT0 + 3s, again.callback());
  ASSERT_TRUE(again.wait());
  EXPECT_EQ(again.result, ReportResult::Duplicate);
  EXPECT_EQ(store_->find_outcomes({.campaign_id = campaign}).size(), 1u);
}

// Reports still queued when the store is destroyed are written first: none
// is dropped, and each caller hears back once.
TEST_F(PgStoreTest, DestroyedStoreWritesItsQueuedReportsFirst) {
  PgStoreOptions options;
  options.report_writers = 1;
  store_ = std::make_unique<PgStore>(url_, options);
  constexpr int kJobs = 40;
  auto campaign = store_->create_campaign(campaign_spec("drain"), jobs(kJobs), 0, kT0);
  std::vector<v1::Job> leased;
  for (int i = 0; i < kJobs; ++i) {
    auto j = lease("a", kT0);
    ASSERT_TRUE(j);
    leased.push_back(*j);
  }
  const v1::Outcome pass = outcome(v1::VERDICT_PASS);
  const std::string agent = "a";
  std::vector<AsyncReply> replies(kJobs);
  pqxx::connection blocker(url_);
  pqxx::work lock(blocker);
  std::thread first = hold_report_writer(lock, leased[0].job_id(), 1);
  for (int i = 1; i < kJobs; ++i) {
    store_->report_outcome_async(agent, leased[i].job_id(), 1, pass, kT0 + 1s,
                                 replies[i].callback());
  }
  ASSERT_EQ(store_->queued_reports(), static_cast<size_t>(kJobs - 1));
  // The destructor starts while the reports wait (it waits for them); the
  // held writer goes on once the lock is released.
  std::atomic<bool> destroying{false};
  std::thread destroyer([&] {
    destroying = true;
    store_.reset();
  });
  while (!destroying) std::this_thread::yield();
  lock.commit();
  destroyer.join();
  first.join();
  for (int i = 1; i < kJobs; ++i) {
    EXPECT_EQ(replies[i].count(), 1) << "report " << i;
    EXPECT_EQ(replies[i].result, ReportResult::Stored) << "report " << i;
  }
  PgStore reopened(url_);
  EXPECT_EQ(reopened.find_outcomes({.campaign_id = campaign}).size(), static_cast<size_t>(kJobs));
}

}  // namespace
}  // namespace leapfrog::coord
