// The Scheduler against a real PgStore (EmbeddedPostgres, one cluster per test
// process, a fresh database per test), with time driven by a ManualClock.

#include "coordinator/scheduler.h"

#include <gtest/gtest.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <latch>
#include <map>
#include <memory>
#include <pqxx/pqxx>
#include <set>
#include <thread>

#include "common/proto_time.h"
#include "coordinator/campaign.h"
#include "coordinator/control_service.h"
#include "coordinator/pg/embedded_postgres.h"
#include "coordinator/pg/test_postgres.h"
#include "coordinator/schedule/next_firing.h"
#include "coordinator/store/pg_store.h"

namespace leapfrog::coord {
namespace {

using namespace std::chrono;
using namespace std::chrono_literals;

constexpr sys_days kDay0 = sys_days{year{2024} / March / 10};
const std::string kNightly = "0 2 * * *";

// `day` days after kDay0, at hh:mm:ss UTC.
TimePoint at(int day, hours h, minutes m = 0min, seconds s = 0s) {
  return time_point_cast<Duration>(kDay0 + days{day} + h + m + s);
}

int64_t us_of(const google::protobuf::Timestamp& ts) {
  return ts.seconds() * 1'000'000 + ts.nanos() / 1000;
}
int64_t us_of(TimePoint t) {
  return t.time_since_epoch().count();
}

v1::CampaignSpec nightly_spec(const std::string& name) {
  v1::CampaignSpec s;
  s.set_name(name);
  s.add_scenarios("setattr-lookup");
  s.add_filesystems("tmpfs");
  s.add_filesystems("ext4");
  s.set_seeds(2);
  return s;
}

class SchedulerTest : public testing::PostgresSuite<SchedulerTest> {
 protected:
  void SetUp() override {
    url_ = pg_->url(fresh_database("sched"));
    store_ = std::make_unique<PgStore>(url_);
    scheduler_ = std::make_unique<Scheduler>(*store_, clock_, work_);
  }

  // Adds a schedule the way ControlService::AddSchedule does.
  v1::Schedule add(const std::string& name, const std::string& cron = kNightly) {
    return store_->add_schedule(name, cron, normalize(nightly_spec(name)),
                                next_firing(cron, clock_.now()));
  }

  v1::Schedule schedule(int64_t id) {
    for (auto& s : store_->list_schedules())
      if (s.id() == id) return s;
    ADD_FAILURE() << "no schedule " << id;
    return {};
  }

  std::vector<v1::Campaign> campaigns() { return store_->list_campaigns(100'000); }

  std::string url_;
  ManualClock clock_{at(0, 1h)};
  WorkSignal work_;
  std::unique_ptr<PgStore> store_;
  std::unique_ptr<Scheduler> scheduler_;
};


TEST_F(SchedulerTest, NightlyFiresOnceAtTwo) {
  const v1::Schedule s = add("nightly");  // at 01:00
  EXPECT_EQ(us_of(s.next_run()), us_of(at(0, 2h)));

  clock_.set(at(0, 1h, 59min, 59s));
  EXPECT_TRUE(scheduler_->tick().empty());
  EXPECT_TRUE(campaigns().empty());

  clock_.set(at(0, 2h, 0min, 30s));
  const auto created = scheduler_->tick();
  ASSERT_EQ(created.size(), 1u);
  auto c = store_->get_campaign(created[0]);
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->schedule_id(), s.id());
  EXPECT_EQ(c->spec().name(), "nightly");
  EXPECT_EQ(c->jobs(), 4u);  // 1 scenario x 1 kernel x 2 file systems x 2 seeds
  EXPECT_EQ(store_->list_jobs(c->id()).size(), 4u);
  EXPECT_EQ(us_of(c->created_at()), us_of(at(0, 2h, 0min, 30s)));

  const v1::Schedule after = schedule(s.id());
  EXPECT_EQ(us_of(after.next_run()), us_of(at(1, 2h)));
  ASSERT_TRUE(after.has_last_run());
  EXPECT_EQ(us_of(after.last_run()), us_of(at(0, 2h)));

  EXPECT_TRUE(scheduler_->tick().empty());
  clock_.set(at(0, 2h, 59min));
  EXPECT_TRUE(scheduler_->tick().empty());
  EXPECT_EQ(campaigns().size(), 1u);

  // And again the next night.
  clock_.set(at(1, 2h, 0min, 1s));
  EXPECT_EQ(scheduler_->tick().size(), 1u);
  EXPECT_EQ(campaigns().size(), 2u);
}

TEST_F(SchedulerTest, MissedFiringsFireOnceAfterDowntime) {
  const v1::Schedule s = add("nightly");
  // The coordinator was down from day 0 01:00 to day 3 10:00: three firings missed.
  clock_.set(at(3, 10h));
  const auto created = scheduler_->tick();
  ASSERT_EQ(created.size(), 1u);
  EXPECT_EQ(campaigns().size(), 1u);
  const v1::Schedule after = schedule(s.id());
  EXPECT_EQ(us_of(after.next_run()), us_of(at(4, 2h))) << "next run is the first firing after now";
  EXPECT_EQ(us_of(after.last_run()), us_of(at(0, 2h))) << "the firing that was due";

  EXPECT_TRUE(scheduler_->tick().empty());
  clock_.set(at(4, 1h, 59min));
  EXPECT_TRUE(scheduler_->tick().empty());
  EXPECT_EQ(campaigns().size(), 1u);
}

TEST_F(SchedulerTest, DisabledScheduleNeverFires) {
  const v1::Schedule off = add("off");
  const v1::Schedule on = add("on");  // the same schedule, left enabled, as a control
  auto disabled = store_->set_schedule_enabled(off.id(), false, from_proto(off.next_run()));
  ASSERT_TRUE(disabled.has_value());
  EXPECT_FALSE(disabled->enabled());

  std::map<int64_t, int> fired;  // schedule id -> campaigns
  for (int day = 0; day < 3; ++day) {
    for (auto t : {at(day, 2h), at(day, 2h, 0min, 30s), at(day, 23h)}) {
      clock_.set(t);
      scheduler_->tick();
    }
  }
  for (const auto& c : campaigns()) ++fired[c.schedule_id()];
  EXPECT_EQ(fired.count(off.id()), 0u);
  EXPECT_EQ(fired[on.id()], 3);
  EXPECT_FALSE(schedule(off.id()).has_last_run());
}

TEST_F(SchedulerTest, OtherCronExpressions) {
  const v1::Schedule quarter = add("quarter", "*/15 * * * *");
  const v1::Schedule weekly = add("weekly", "30 4 * * MON");  // day 0 is a Sunday
  EXPECT_EQ(us_of(quarter.next_run()), us_of(at(0, 1h, 15min)));
  EXPECT_EQ(us_of(weekly.next_run()), us_of(at(1, 4h, 30min)));

  clock_.set(at(0, 1h, 15min));  // exactly due
  EXPECT_EQ(scheduler_->tick().size(), 1u);
  EXPECT_EQ(us_of(schedule(quarter.id()).next_run()), us_of(at(0, 1h, 30min)));
  clock_.set(at(1, 4h, 29min, 59s));
  EXPECT_EQ(scheduler_->tick().size(), 1u);  // quarter only
  clock_.set(at(1, 4h, 30min));
  EXPECT_EQ(scheduler_->tick().size(), 2u);  // both
  EXPECT_EQ(us_of(schedule(weekly.id()).next_run()), us_of(at(8, 4h, 30min)));
}

TEST_F(SchedulerTest, InvalidStoredSpecDoesNotStopOthers) {
  // Stored without normalize: the catalogue no longer knows the scenario.
  v1::CampaignSpec bad = nightly_spec("bad");
  bad.set_scenarios(0, "retired-scenario");
  const v1::Schedule broken = store_->add_schedule("broken", kNightly, bad, at(0, 2h));
  const v1::Schedule good = add("good");
  clock_.set(at(0, 2h, 1min));
  const auto created = scheduler_->tick();
  ASSERT_EQ(created.size(), 1u);
  EXPECT_EQ(store_->get_campaign(created[0])->schedule_id(), good.id());
  EXPECT_FALSE(schedule(broken.id()).has_last_run());
  // It can never fire, so it is disabled rather than retried every tick.
  EXPECT_FALSE(schedule(broken.id()).enabled());
}

TEST_F(SchedulerTest, ReplicasTickingTogetherFireOnce) {
  // Two replicas: each its own store (own connections) and scheduler.
  PgStore other_store(url_);
  WorkSignal other_work;
  Scheduler other(other_store, clock_, other_work);

  constexpr int kSchedules = 10;
  constexpr int kNights = 5;
  std::set<int64_t> ids;
  for (int i = 0; i < kSchedules; ++i) ids.insert(add("s" + std::to_string(i)).id());

  for (int night = 0; night < kNights; ++night) {
    clock_.set(at(night, 2h, 0min, 30s));
    std::latch start(2);
    std::vector<int64_t> a, b;
    std::thread ta([&] {
      start.arrive_and_wait();
      a = scheduler_->tick();
    });
    std::thread tb([&] {
      start.arrive_and_wait();
      b = other.tick();
    });
    ta.join();
    tb.join();
    EXPECT_EQ(a.size() + b.size(), static_cast<size_t>(kSchedules)) << "night " << night;
    std::set<int64_t> all(a.begin(), a.end());
    all.insert(b.begin(), b.end());
    EXPECT_EQ(all.size(), a.size() + b.size()) << "a campaign id reported by both replicas";
  }

  std::map<int64_t, int> per_schedule;
  for (const auto& c : campaigns()) ++per_schedule[c.schedule_id()];
  ASSERT_EQ(per_schedule.size(), ids.size());
  for (const auto& [id, n] : per_schedule) {
    EXPECT_TRUE(ids.count(id)) << id;
    EXPECT_EQ(n, kNights) << "schedule " << id;
  }
  // Exactly the jobs of one campaign per firing, no half-made campaigns.
  pqxx::connection conn(url_);
  const auto jobs = pqxx::work(conn).exec1("SELECT count(*) FROM jobs")[0].as<int>();
  EXPECT_EQ(jobs, kSchedules * kNights * 4);
}

}  // namespace
}  // namespace leapfrog::coord
