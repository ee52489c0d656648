// The campaign and schedule use-cases over a real PostgreSQL, for the
// branches the façades' tests (server_test.cc over gRPC, errors_api_test.cc
// over HTTP) leave out: the typed error of each refusal, and what a call
// stores.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>

#include "coordinator/campaign.h"
#include "coordinator/error_status.h"
#include "coordinator/pg/test_postgres.h"
#include "coordinator/store/pg_store.h"
#include "coordinator/usecases/campaigns.h"
#include "coordinator/usecases/schedules.h"
#include "coordinator/work_signal.h"

namespace leapfrog::coord::usecases {
namespace {

using namespace std::chrono_literals;
using ::testing::HasSubstr;

v1::CampaignSpec spec(uint32_t seeds = 1) {
  v1::CampaignSpec s;
  s.set_name("uc");
  s.add_scenarios("setattr-lookup");
  s.add_filesystems("tmpfs");
  s.set_seeds(seeds);
  return s;
}

// The kind of RequestError `f` throws; fails the test if it throws none.
template <class F>
ErrorKind request_error_of(F&& f, std::string* message = nullptr) {
  try {
    f();
  } catch (const RequestError& e) {
    if (message) *message = e.what();
    return e.kind();
  }
  ADD_FAILURE() << "no RequestError";
  return ErrorKind::kInternal;
}

class UseCasesTest : public coord::testing::PostgresSuite<UseCasesTest> {
 protected:
  void SetUp() override { store_ = std::make_unique<PgStore>(pg_->url(fresh_database("uc"))); }

  ManualClock clock_{TimePoint(std::chrono::seconds(1'800'000'000))};
  std::unique_ptr<PgStore> store_;
  WorkSignal work_;
};

TEST_F(UseCasesTest, AScheduleNeedsAShortNameAShortCronAndAGoodOne) {
  Schedules s(*store_, clock_);
  std::string why;
  EXPECT_EQ(request_error_of([&] { s.add("", "0 2 * * *", spec()); }, &why),
            ErrorKind::kInvalidArgument);
  EXPECT_EQ(why, "schedule name is empty");
  EXPECT_EQ(request_error_of([&] { s.add(std::string(201, 'n'), "0 2 * * *", spec()); }, &why),
            ErrorKind::kInvalidArgument);
  EXPECT_THAT(why, HasSubstr("schedule name"));
  EXPECT_EQ(
      request_error_of([&] { s.add("n", "0 2 * * * " + std::string(100, '*'), spec()); }, &why),
      ErrorKind::kInvalidArgument);
  EXPECT_THAT(why, HasSubstr("cron"));
  EXPECT_THROW(s.add("n", "0 25 * * *", spec()), SpecError);
  v1::CampaignSpec bad = spec();
  bad.set_scenarios(0, "no-such-scenario");
  EXPECT_THROW(s.add("n", "0 2 * * *", bad), SpecError);
  EXPECT_TRUE(s.list(0, "").items.empty()) << "a refused schedule stores nothing";

  const v1::Schedule added = s.add("nightly", "0 2 * * *", spec());
  EXPECT_TRUE(added.enabled());
  EXPECT_EQ(added.campaign().max_attempts(), kDefaultMaxAttempts) << "stored normalized";
  const int64_t now_s = 1'800'000'000;
  EXPECT_GT(added.next_run().seconds(), now_s);
  EXPECT_LE(added.next_run().seconds(), now_s + 24 * 3600);
  ASSERT_EQ(s.list(0, "").items.size(), 1u);
  EXPECT_EQ(s.list(0, "").items[0].name(), "nightly");
}

TEST_F(UseCasesTest, ReEnablingAScheduleSkipsTheFiringsMissedMeanwhile) {
  Schedules s(*store_, clock_);
  const v1::Schedule added = s.add("nightly", "0 2 * * *", spec());
  EXPECT_FALSE(s.set_enabled(added.id(), false).enabled());
  clock_.advance(72h);
  const v1::Schedule on = s.set_enabled(added.id(), true);
  EXPECT_TRUE(on.enabled());
  EXPECT_EQ(on.next_run().seconds() - added.next_run().seconds(), 3 * 24 * 3600);
}

TEST_F(UseCasesTest, AnUnknownScheduleIsNotFoundAndNamedByItsId) {
  Schedules s(*store_, clock_);
  std::string why;
  EXPECT_EQ(request_error_of([&] { s.set_enabled(4242, true); }, &why), ErrorKind::kNotFound);
  EXPECT_EQ(why, "no schedule \"4242\"");
  EXPECT_EQ(request_error_of([&] { s.remove(4242); }, &why), ErrorKind::kNotFound);
  EXPECT_EQ(why, "no schedule \"4242\"");
  const v1::Schedule added = s.add("nightly", "0 2 * * *", spec());
  s.remove(added.id());
  EXPECT_TRUE(s.list(0, "").items.empty());
  EXPECT_EQ(request_error_of([&] { s.set_enabled(added.id(), true); }), ErrorKind::kNotFound);
}

TEST_F(UseCasesTest, ACampaignIsStoredExpandedWithWhyNoAgentRunsIt) {
  Campaigns c(*store_, clock_, 6s, &work_);
  EXPECT_THROW(c.create(v1::CampaignSpec{}), SpecError);
  EXPECT_TRUE(store_->list_campaigns(0).empty());
  const v1::Campaign made = c.create(spec(3));
  EXPECT_EQ(made.jobs(), 3u);
  ASSERT_EQ(made.warnings_size(), 1) << "no agent runs kernel \"host\"";
  EXPECT_THAT(made.warnings(0), HasSubstr("host"));
  EXPECT_EQ(c.get(made.id()).warnings_size(), 1);

  // An agent that runs it: no warning while it is online, one again once
  // it has not been seen for offline_after.
  v1::Capabilities caps;
  caps.set_kernel_label("host");
  caps.add_filesystems("tmpfs");
  store_->register_agent("a", caps, clock_.now());
  EXPECT_EQ(c.get(made.id()).warnings_size(), 0);
  clock_.advance(7s);
  EXPECT_EQ(c.get(made.id()).warnings_size(), 1);
}

TEST_F(UseCasesTest, AnUnknownCampaignIsNotFoundForItsJobsToo) {
  Campaigns c(*store_, clock_, 6s);
  std::string why;
  EXPECT_EQ(request_error_of([&] { c.get(77); }, &why), ErrorKind::kNotFound);
  EXPECT_EQ(why, "no campaign \"77\"");
  EXPECT_EQ(request_error_of([&] { c.jobs(77, 10, ""); }, &why), ErrorKind::kNotFound);
  EXPECT_EQ(why, "no campaign \"77\"");

  const v1::Campaign made = c.create(spec(5));
  const auto first = c.jobs(made.id(), 2, "");
  ASSERT_EQ(first.items.size(), 2u);
  ASSERT_FALSE(first.next_page_token.empty());
  const auto rest = c.jobs(made.id(), 10, first.next_page_token);
  EXPECT_EQ(rest.items.size(), 3u);
  EXPECT_TRUE(rest.next_page_token.empty());
  CampaignQuery q;
  q.limit = 10;
  EXPECT_EQ(c.list(q).items.size(), 1u);
  EXPECT_THROW(c.jobs(made.id(), 10, "OFFSET 10"), BadPageToken);
}

}  // namespace
}  // namespace leapfrog::coord::usecases
