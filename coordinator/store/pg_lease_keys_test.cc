// The keys leases are taken with (Store's `key`), against a real PostgreSQL:
// a lease answers to its own key only, in every call that acts on it and
// for every attempt, in the group paths (one statement for concurrent
// leases, one transaction for a batch of reports) as alone; kTrustedCaller
// and leases recorded without a key fall back to the agent id.

#include <gtest/gtest.h>

#include <latch>
#include <pqxx/pqxx>
#include <thread>

#include "coordinator/pg/test_postgres.h"
#include "coordinator/store/pg_store.h"

namespace leapfrog::coord {
namespace {

using namespace std::chrono_literals;

const TimePoint kT0 = TimePoint(Duration(1'700'000'000'123'456));
// Hex SHA-256 values, as the agent service passes them.
const std::string kKeyA(64, 'a'), kKeyB(64, 'b');

class PgLeaseKeysTest : public testing::PostgresSuite<PgLeaseKeysTest> {
 protected:
  void SetUp() override {
    url_ = pg_->url(fresh_database("lease_keys"));
    store_ = std::make_unique<PgStore>(url_);
    caps_.set_kernel_label("host");
    caps_.add_filesystems("tmpfs");
  }

  void queue(int n) {
    v1::CampaignSpec spec;
    spec.set_name("keys");
    std::vector<NewJob> jobs(static_cast<size_t>(n));
    for (size_t i = 0; i < jobs.size(); ++i) {
      jobs[i].spec.set_scenario("setattr-lookup");
      jobs[i].spec.set_fs("tmpfs");
      jobs[i].spec.set_seed(i);
      jobs[i].kernel_label = "host";
    }
    store_->create_campaign(spec, jobs, 0, kT0);
  }

  static v1::Outcome outcome(v1::Verdict v) {
    v1::Outcome o;
    o.set_verdict(v);
    if (v == v1::VERDICT_VIOLATION) {
      o.set_violation_count(1);
      o.add_violations()->set_kind(v1::VIOLATION_KIND_STALE_ENTRY);
    }
    return o;
  }

  std::string url_;
  std::unique_ptr<PgStore> store_;
  v1::Capabilities caps_;
};

TEST_F(PgLeaseKeysTest, EveryCallOnALeaseNeedsItsKey) {
  queue(1);
  auto job = store_->lease_job("a", caps_, kT0, 30s, kKeyA);
  ASSERT_TRUE(job);
  EXPECT_THROW(store_->renew_lease("a", job->job_id(), job->attempt(), kT0, 30s, kKeyB),
               WrongAgentSecret);
  EXPECT_TRUE(store_->renew_lease("a", job->job_id(), job->attempt(), kT0, 30s, kKeyA));
  EXPECT_TRUE(store_->renew_lease("a", job->job_id(), job->attempt(), kT0, 30s, kTrustedCaller));
  // Not the agent's lease at all: no lease, whatever the key.
  EXPECT_FALSE(store_->renew_lease("b", job->job_id(), job->attempt(), kT0, 30s, kKeyB));
  EXPECT_THROW(store_->release_job("a", job->job_id(), job->attempt(), kKeyB), WrongAgentSecret);
  EXPECT_EQ(store_->get_job(job->job_id())->state(), v1::JOB_STATE_LEASED);
  EXPECT_THROW(store_->report_outcome("a", job->job_id(), job->attempt(), outcome(v1::VERDICT_PASS),
                                      kT0, kKeyB),
               WrongAgentSecret);
  EXPECT_EQ(store_->report_outcome("a", job->job_id(), job->attempt(), outcome(v1::VERDICT_PASS),
                                   kT0, kKeyA),
            ReportResult::Stored);
}

// One batch of reports (group commit): the report with the wrong key fails
// alone, and the others are stored.
TEST_F(PgLeaseKeysTest, AWrongKeyFailsOnlyItsOwnReportInABatch) {
  constexpr int kJobs = 8;
  queue(kJobs);
  std::vector<v1::Job> jobs;
  for (int i = 0; i < kJobs; ++i) jobs.push_back(*store_->lease_job("a", caps_, kT0, 30s, kKeyA));
  std::latch done(kJobs);
  std::vector<std::optional<ReportResult>> results(kJobs);
  std::vector<std::exception_ptr> errors(kJobs);
  std::vector<v1::Outcome> outcomes(kJobs, outcome(v1::VERDICT_PASS));
  const std::string agent = "a";
  for (int i = 0; i < kJobs; ++i) {
    store_->report_outcome_async(
        agent, jobs[i].job_id(), jobs[i].attempt(), outcomes[i], kT0,
        [&, i](ReportResult r, std::exception_ptr e) {
          if (e)
            errors[i] = e;
          else
            results[i] = r;
          done.count_down();
        },
        i == 3 ? kKeyB : kKeyA);
  }
  done.wait();
  for (int i = 0; i < kJobs; ++i) {
    if (i == 3) {
      ASSERT_TRUE(errors[i]);
      EXPECT_THROW(std::rethrow_exception(errors[i]), WrongAgentSecret);
    } else {
      EXPECT_FALSE(errors[i]) << "job " << i;
      EXPECT_EQ(results[i], ReportResult::Stored) << "job " << i;
    }
  }
}

// Leases served together by one statement record each caller's own key.
TEST_F(PgLeaseKeysTest, GroupLeasesRecordEachCallersKey) {
  constexpr int kThreads = 16;
  queue(kThreads);
  std::vector<std::string> keys;
  // Distinct within their first 128 bits, which is what a lease records.
  for (int i = 0; i < kThreads; ++i) keys.push_back(std::string(64, "0123456789abcdef"[i]));
  std::vector<std::optional<v1::Job>> got(kThreads);
  std::latch start(kThreads);
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i)
    threads.emplace_back([&, i] {
      start.arrive_and_wait();
      got[i] = store_->lease_job("agent-" + std::to_string(i), caps_, kT0, 30s, keys[i]);
    });
  for (auto& t : threads) t.join();
  for (int i = 0; i < kThreads; ++i) {
    ASSERT_TRUE(got[i]) << i;
    const std::string agent = "agent-" + std::to_string(i);
    const std::string other = keys[(i + 1) % kThreads];
    EXPECT_TRUE(store_->renew_lease(agent, got[i]->job_id(), got[i]->attempt(), kT0, 30s, keys[i]));
    EXPECT_THROW(store_->renew_lease(agent, got[i]->job_id(), got[i]->attempt(), kT0, 30s, other),
                 WrongAgentSecret);
  }
}

// A late report of an earlier attempt answers to that attempt's key, not to
// the key of whoever holds the job now.
TEST_F(PgLeaseKeysTest, EachAttemptKeepsItsOwnKey) {
  queue(1);
  auto first = store_->lease_job("a", caps_, kT0, 30s, kKeyA);
  ASSERT_TRUE(first);
  ASSERT_EQ(store_->expire_leases(kT0 + 31s), 1);
  auto second = store_->lease_job("b", caps_, kT0 + 32s, 30s, kKeyB);
  ASSERT_TRUE(second);
  ASSERT_EQ(second->attempt(), 2u);
  EXPECT_THROW(store_->report_outcome("a", first->job_id(), 1, outcome(v1::VERDICT_VIOLATION),
                                      kT0 + 33s, kKeyB),
               WrongAgentSecret);
  EXPECT_EQ(store_->report_outcome("a", first->job_id(), 1, outcome(v1::VERDICT_VIOLATION),
                                   kT0 + 33s, kKeyA),
            ReportResult::KeptSuperseded);
  EXPECT_THROW(
      store_->report_outcome("b", second->job_id(), 2, outcome(v1::VERDICT_PASS), kT0 + 34s, kKeyA),
      WrongAgentSecret);
  EXPECT_EQ(
      store_->report_outcome("b", second->job_id(), 2, outcome(v1::VERDICT_PASS), kT0 + 34s, kKeyB),
      ReportResult::Stored);
}

// Leases recorded without a key (taken before migration 7, or by a trusted
// caller): the agent id decides, whatever key comes.
TEST_F(PgLeaseKeysTest, ALeaseWithoutAKeyGoesByTheAgentId) {
  queue(1);
  auto job = store_->lease_job("a", caps_, kT0, 30s, kTrustedCaller);
  ASSERT_TRUE(job);
  EXPECT_TRUE(store_->renew_lease("a", job->job_id(), job->attempt(), kT0, 30s, kKeyB));
  EXPECT_FALSE(store_->renew_lease("b", job->job_id(), job->attempt(), kT0, 30s, kKeyB));
  EXPECT_THROW(store_->report_outcome("b", job->job_id(), job->attempt(), outcome(v1::VERDICT_PASS),
                                      kT0, kKeyB),
               StoreError);
  EXPECT_EQ(store_->report_outcome("a", job->job_id(), job->attempt(), outcome(v1::VERDICT_PASS),
                                   kT0, kKeyB),
            ReportResult::Stored);
}

}  // namespace
}  // namespace leapfrog::coord
