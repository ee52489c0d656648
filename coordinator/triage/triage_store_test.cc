// Grouping and issue state over a real PostgreSQL: outcomes reported through
// PgStore as an agent would, grouped by the engine's maintenance step.

#include <algorithm>
#include <gtest/gtest.h>

#include <pqxx/pqxx>

#include "coordinator/pg/test_postgres.h"
#include "coordinator/store/pg_store.h"
#include "coordinator/triage/pg_triage_store.h"
#include "coordinator/triage/spec_as_run.h"
#include "coordinator/triage/triage_engine.h"

namespace leapfrog::coord::triage {
namespace {

class TriageStoreTest : public coord::testing::PostgresSuite<TriageStoreTest> {
 protected:
  void SetUp() override {
    url_ = pg_->url(fresh_database("triage"));
    store_ = std::make_unique<PgStore>(url_);
    triage_ = std::make_unique<PgTriageStore>(url_);
    engine_ = std::make_unique<TriageEngine>(*store_, *triage_, clock_, nullptr);
    v1::Capabilities caps;
    caps.set_kernel_label("k1");
    caps.add_filesystems("tmpfs");
    agent_ = store_->register_agent("a", caps, clock_.now());
  }

  static v1::Outcome violation_outcome(const std::string& op) {
    v1::Outcome o;
    o.set_verdict(v1::VERDICT_VIOLATION);
    o.set_violation_count(1);
    auto* v = o.add_violations();
    v->set_kind(v1::VIOLATION_KIND_STALE_GRANT);
    v->set_op(op);
    v->set_path("d0/d1/d2/f");
    v->set_step(3);
    v->set_object("attr(d1)");
    v->mutable_detail()->add_versions()->set_value("mode=0700 uid=0 gid=0");
    return o;
  }

  // One campaign of one job on `kernel` (a "night"), reported with `o`.
  int64_t night(const std::string& kernel, const v1::Outcome& o,
                const std::string& name = "nightly") {
    v1::CampaignSpec spec;
    spec.set_name(name);
    spec.add_scenarios("setattr-lookup");
    spec.add_kernels(kernel);
    spec.add_filesystems("tmpfs");
    NewJob job;
    job.kernel_label = kernel;
    job.spec.set_scenario("setattr-lookup");
    job.spec.set_seed(7);
    job.spec.set_fs("tmpfs");
    job.spec.set_iterations(100);
    const int64_t id = store_->create_campaign(spec, {job}, 0, clock_.now());
    v1::Capabilities caps;
    caps.set_kernel_label(kernel);
    caps.add_filesystems("tmpfs");
    auto leased = store_->lease_job(agent_, caps, clock_.now(), std::chrono::seconds(30));
    EXPECT_TRUE(leased);
    EXPECT_EQ(store_->report_outcome(agent_, leased->job_id(), leased->attempt(), o, clock_.now()),
              ReportResult::Stored);
    return id;
  }

  void add_kernel(const std::string& label) {
    v1::Kernel k;
    k.set_label(label);
    store_->add_kernel(k, clock_.now());
  }

  // An issue of one failure on the registered kernel "k1", marked fixed an
  // hour later; returns its id.
  int64_t fixed_issue_on_k1() {
    add_kernel("k1");
    night("k1", violation_outcome("stat"));
    group();
    const int64_t id = issues()[0].id();
    clock_.advance(std::chrono::hours(1));
    v1::SetIssueStatusRequest fix;
    fix.set_id(id);
    fix.set_status(v1::ISSUE_STATUS_FIXED);
    EXPECT_EQ(engine_->set_issue_status(fix).status(), v1::ISSUE_STATUS_FIXED);
    return id;
  }

  // Two ticks: the first takes the horizon, the second groups up to it.
  void group() {
    engine_->group_failures();
    engine_->group_failures();
  }

  std::vector<v1::Issue> issues() {
    const auto r = engine_->list_issues({});
    return {r.issues().begin(), r.issues().end()};
  }

  std::string url_;
  ManualClock clock_{TimePoint(std::chrono::seconds(1'800'000'000))};
  std::unique_ptr<PgStore> store_;
  std::unique_ptr<PgTriageStore> triage_;
  std::unique_ptr<TriageEngine> engine_;
  std::string agent_;
};

TEST_F(TriageStoreTest, TwoNightsOfTheSameFailureAreOneIssueCountTwo) {
  night("k1", violation_outcome("stat"));
  group();
  ASSERT_EQ(issues().size(), 1u);
  EXPECT_EQ(issues()[0].count(), 1u);
  clock_.advance(std::chrono::hours(24));
  night("k1", violation_outcome("stat"));
  group();
  const auto all = issues();
  ASSERT_EQ(all.size(), 1u);
  const v1::Issue& i = all[0];
  EXPECT_EQ(i.count(), 2u);
  EXPECT_EQ(i.status(), v1::ISSUE_STATUS_NEW);
  EXPECT_EQ(i.scenario(), "setattr-lookup");
  EXPECT_EQ(i.last_seen().seconds() - i.first_seen().seconds(), 24 * 3600);
  ASSERT_EQ(i.kernels_size(), 1);
  EXPECT_EQ(i.kernels(0).count(), 2u);
  EXPECT_EQ(i.example_spec().seed(), 7u);
  // Lists carry no violation details; the issue itself does.
  EXPECT_FALSE(i.has_example_violation());
  EXPECT_EQ(engine_->get_issue(i.id()).example_violation().op(), "stat");
  // Grouping again finds nothing new: the watermark moved past both.
  group();
  EXPECT_EQ(issues()[0].count(), 2u);
}

TEST_F(TriageStoreTest, DifferentSignaturesAreDifferentIssuesAndPassesNone) {
  night("k1", violation_outcome("stat"));
  night("k1", violation_outcome("open"));
  v1::Outcome pass;
  pass.set_verdict(v1::VERDICT_PASS);
  night("k1", pass);
  v1::Outcome error;
  error.set_verdict(v1::VERDICT_ERROR);
  error.set_error("no FUSE");
  night("k1", error);
  group();
  EXPECT_EQ(issues().size(), 2u);
}

TEST_F(TriageStoreTest, ActionCampaignsAreNotCounted) {
  night("k1", violation_outcome("stat"));
  night("k1", violation_outcome("stat"), std::string(kActionCampaignPrefix) + "action-1/replay/k1");
  group();
  ASSERT_EQ(issues().size(), 1u);
  EXPECT_EQ(issues()[0].count(), 1u);
}

TEST_F(TriageStoreTest, AFixedIssueReopensOnANewerKernelOnly) {
  const int64_t id = fixed_issue_on_k1();
  // The old kernel still fails: expected, not a regression.
  clock_.advance(std::chrono::hours(1));
  night("k1", violation_outcome("stat"));
  group();
  EXPECT_EQ(engine_->get_issue(id).status(), v1::ISSUE_STATUS_FIXED);
  // A kernel added after the fix fails: regression.
  add_kernel("k2");
  night("k2", violation_outcome("stat"));
  group();
  const v1::Issue i = engine_->get_issue(id);
  EXPECT_EQ(i.status(), v1::ISSUE_STATUS_REGRESSION);
  EXPECT_EQ(i.regressions(), 1u);
  EXPECT_EQ(i.count(), 3u);
  EXPECT_EQ(i.kernels_size(), 2);
  ASSERT_EQ(i.notes_size(), 1);
  EXPECT_NE(i.notes(0).text().find("k2"), std::string::npos);
}

// One grouping pass counts a batch's failures of one signature together: the
// totals, the per-kernel counts and times, and the reopening must be what
// counting them one at a time in report order gives.
TEST_F(TriageStoreTest, ABatchCountsAsOneFailureAtATimeInReportOrder) {
  const int64_t id = fixed_issue_on_k1();
  clock_.advance(std::chrono::hours(1));
  add_kernel("k2");
  // In one batch: the old kernel (no regression), then the new one twice
  // (the first of those reopens), and another signature.
  night("k1", violation_outcome("stat"));
  clock_.advance(std::chrono::hours(1));
  const int64_t reopening = night("k2", violation_outcome("stat"));
  clock_.advance(std::chrono::hours(1));
  const int64_t second_at =
      std::chrono::duration_cast<std::chrono::seconds>(clock_.now().time_since_epoch()).count();
  night("k2", violation_outcome("stat"));
  night("k1", violation_outcome("open"));
  group();
  const v1::Issue i = engine_->get_issue(id);
  EXPECT_EQ(i.count(), 4u);
  EXPECT_EQ(i.status(), v1::ISSUE_STATUS_REGRESSION);
  EXPECT_EQ(i.regressions(), 1u);
  EXPECT_EQ(i.last_seen().seconds(), second_at);
  ASSERT_EQ(i.kernels_size(), 2);
  for (const auto& kc : i.kernels()) {
    EXPECT_EQ(kc.count(), 2u) << kc.kernel_label();
    if (kc.kernel_label() == "k2") {
      EXPECT_EQ(kc.last_seen().seconds(), second_at);
      EXPECT_EQ(kc.last_seen().seconds() - kc.first_seen().seconds(), 3600);
    }
  }
  // The note names the first failure on the newer kernel.
  pqxx::connection c(url_);
  pqxx::work txn(c);
  const auto job =
      txn.exec_params1("SELECT id FROM jobs WHERE campaign_id = $1", reopening)[0].as<int64_t>();
  ASSERT_EQ(i.notes_size(), 1);
  EXPECT_NE(i.notes(0).text().find("\"k2\" (outcome " + std::to_string(job) + ".1)"),
            std::string::npos)
      << i.notes(0).text();
  // The other signature is a new issue of one failure.
  const auto all = issues();
  ASSERT_EQ(all.size(), 2u);
  for (const auto& other : all) {
    if (other.id() != id) {
      EXPECT_EQ(other.count(), 1u);
    }
  }
}

TEST_F(TriageStoreTest, StatusNotesAndErrors) {
  night("k1", violation_outcome("stat"));
  night("k1", violation_outcome("open"));
  group();
  const auto all = issues();
  ASSERT_EQ(all.size(), 2u);
  v1::SetIssueStatusRequest dup;
  dup.set_id(all[0].id());
  dup.set_status(v1::ISSUE_STATUS_DUPLICATE);
  EXPECT_THROW(engine_->set_issue_status(dup), TriageError);  // duplicate of what?
  dup.set_duplicate_of(all[0].id());
  EXPECT_THROW(engine_->set_issue_status(dup), TriageError);  // of itself
  dup.set_duplicate_of(999);
  EXPECT_THROW(engine_->set_issue_status(dup), TriageError);  // of nothing
  dup.set_duplicate_of(all[1].id());
  const v1::Issue d = engine_->set_issue_status(dup);
  EXPECT_EQ(d.status(), v1::ISSUE_STATUS_DUPLICATE);
  EXPECT_EQ(d.duplicate_of(), all[1].id());
  v1::AddIssueNoteRequest note;
  note.set_id(all[1].id());
  note.set_text("FUSE attribute cache, known");
  EXPECT_EQ(engine_->add_issue_note(note).notes(0).text(), "FUSE attribute cache, known");
  note.set_id(12345);
  try {
    engine_->add_issue_note(note);
    FAIL() << "no error for a missing issue";
  } catch (const TriageError& e) {
    EXPECT_EQ(e.code(), TriageError::Code::NotFound);
    EXPECT_STREQ(e.what(), "no issue \"12345\"");
  }
  v1::ListIssuesRequest only_dups;
  only_dups.add_statuses(v1::ISSUE_STATUS_DUPLICATE);
  EXPECT_EQ(engine_->list_issues(only_dups).issues_size(), 1);
}

TEST_F(TriageStoreTest, ActionsOnMissingIssuesOrOutcomesFailClearly) {
  v1::StartReplayRequest replay;
  replay.set_issue_id(77);
  EXPECT_THROW(engine_->start_replay(replay), TriageError);
  replay.mutable_outcome()->set_job_id(5);
  try {
    engine_->start_replay(replay);
    FAIL();
  } catch (const TriageError& e) {
    EXPECT_EQ(e.code(), TriageError::Code::NotFound);
    EXPECT_STREQ(e.what(), "no outcome \"5.0\"");
  }
  v1::Outcome pass;
  pass.set_verdict(v1::VERDICT_PASS);
  night("k1", pass);
  const auto outcome = store_->find_outcomes({.limit = 1}).at(0);
  replay.mutable_outcome()->set_job_id(outcome.job_id());
  replay.mutable_outcome()->set_attempt(outcome.attempt());
  try {
    engine_->start_replay(replay);
    FAIL();
  } catch (const TriageError& e) {
    EXPECT_EQ(e.code(), TriageError::Code::FailedPrecondition);
  }
  v1::StartBisectRequest bisect;
  bisect.set_issue_id(77);
  bisect.add_kernels("k1");
  bisect.add_kernels("k2");
  EXPECT_THROW(engine_->start_bisect(bisect), TriageError);
  v1::StartMinimizeRequest minimize;
  minimize.set_issue_id(77);
  EXPECT_THROW(engine_->start_minimize(minimize), TriageError);
}

TEST_F(TriageStoreTest, ASecondActionOfAKindWaitsForTheFirst) {
  night("k1", violation_outcome("stat"));
  group();
  v1::StartReplayRequest replay;
  replay.set_issue_id(issues()[0].id());
  replay.set_runs(2);
  const v1::Action a = engine_->start_replay(replay);
  EXPECT_EQ(a.state(), v1::ACTION_STATE_RUNNING);
  ASSERT_EQ(a.campaign_ids_size(), 1);
  EXPECT_EQ(store_->list_jobs(a.campaign_ids(0)).size(), 2u);
  EXPECT_EQ(store_->list_jobs(a.campaign_ids(0))[0].spec().seed(), 7u);
  EXPECT_EQ(a.kernel_label(), "k1");
  try {
    engine_->start_replay(replay);
    FAIL();
  } catch (const TriageError& e) {
    EXPECT_EQ(e.code(), TriageError::Code::FailedPrecondition);
    EXPECT_NE(std::string(e.what()).find("already has a running replay"), std::string::npos);
  }
}

// The job left the strategy to the seed; the outcome says how it raced. The
// issue's example and every replay (of the issue, of the outcome) carry those
// values explicitly. Positive control: an outcome
// without a strategy leaves the spec open.
TEST_F(TriageStoreTest, ReplayRacesWithTheStrategyTheOutcomeReported) {
  v1::Outcome o = violation_outcome("stat");
  v1::RaceStrategy* st = o.mutable_strategy();
  st->set_alignment(v1::ALIGNMENT_BOTH);
  st->set_observers(3);
  st->set_aligned_observers(2);
  st->set_pinned(false);
  st->add_chosen_by_seed("alignment");
  night("k1", o);
  group();
  ASSERT_EQ(issues().size(), 1u);
  const v1::ScenarioSpec example = issues()[0].example_spec();
  EXPECT_EQ(example.align(), "both");
  EXPECT_EQ(example.observers(), 3u);
  EXPECT_EQ(example.pin(), v1::CPU_PINNING_OFF);
  EXPECT_EQ(example.seed(), 7u);

  v1::StartReplayRequest replay;
  replay.set_issue_id(issues()[0].id());
  replay.set_runs(2);
  const v1::Action a = engine_->start_replay(replay);
  ASSERT_EQ(a.campaign_ids_size(), 1);
  for (const auto& j : store_->list_jobs(a.campaign_ids(0))) {
    EXPECT_EQ(j.spec().align(), "both");
    EXPECT_EQ(j.spec().observers(), 3u);
    EXPECT_EQ(j.spec().pin(), v1::CPU_PINNING_OFF);
    EXPECT_EQ(j.spec().seed(), 7u);
  }

  // A replay of the outcome itself, once the replay's campaign is out of the way.
  const auto first = store_->find_outcomes({.limit = 10}).back();
  ASSERT_TRUE(first.outcome().has_strategy());
  const v1::ScenarioSpec as_run = spec_as_run(first.spec(), first.outcome());
  EXPECT_EQ(as_run.align(), "both");
  EXPECT_EQ(as_run.observers(), 3u);
  EXPECT_EQ(as_run.pin(), v1::CPU_PINNING_OFF);
  EXPECT_EQ(first.spec().align(), "");  // the job itself left it to the seed

  const v1::ScenarioSpec open = spec_as_run(first.spec(), violation_outcome("stat"));
  EXPECT_EQ(open.align(), "");
  EXPECT_EQ(open.observers(), 0u);
  EXPECT_EQ(open.pin(), v1::CPU_PINNING_UNSPECIFIED);
}

// Minimize keeps the example's pinning; one observer cannot be both, so it
// takes the alignment of the observer that saw the violation (here actor 3:
// observer 2 of 3, past the ceil(3/2) = 2 aligned ones, so free).
TEST_F(TriageStoreTest, MinimizeKeepsThePinningAndGivesOneObserverTheViolatorsAlignment) {
  v1::Outcome o = violation_outcome("stat");
  o.mutable_violations(0)->set_actor(3);
  v1::RaceStrategy* st = o.mutable_strategy();
  st->set_alignment(v1::ALIGNMENT_BOTH);
  st->set_observers(3);
  st->set_aligned_observers(2);
  st->set_pinned(false);
  night("k1", o);
  group();
  ASSERT_EQ(issues().size(), 1u);
  v1::StartMinimizeRequest req;
  req.set_issue_id(issues()[0].id());
  v1::Action a = engine_->start_minimize(req);
  ASSERT_EQ(a.campaign_ids_size(), 1);
  v1::Capabilities caps;
  caps.set_kernel_label("k1");
  caps.add_filesystems("tmpfs");
  size_t measured = 0;
  while (auto leased = store_->lease_job(agent_, caps, clock_.now(), std::chrono::seconds(30))) {
    EXPECT_EQ(leased->spec().align(), "both");  // the measurement races as the example did
    EXPECT_EQ(leased->spec().pin(), v1::CPU_PINNING_OFF);
    ASSERT_EQ(store_->report_outcome(agent_, leased->job_id(), leased->attempt(), o, clock_.now()),
              ReportResult::Stored);
    ++measured;
  }
  ASSERT_GT(measured, 0u);
  engine_->advance_actions();
  a = engine_->get_action(a.id());
  ASSERT_EQ(a.campaign_ids_size(), 2) << a.ShortDebugString();
  const auto jobs = store_->list_jobs(a.campaign_ids(1));
  ASSERT_FALSE(jobs.empty());
  for (const auto& j : jobs) {
    EXPECT_EQ(j.spec().observers(), 1u);
    EXPECT_EQ(j.spec().align(), "free");
    EXPECT_EQ(j.spec().pin(), v1::CPU_PINNING_OFF);
  }
  EXPECT_NE(a.progress().find("alignment both -> free"), std::string::npos) << a.progress();
}

// The run set two delay points; the issue's example, its replays and
// minimize carry them explicitly. Minimize tries every point off first, then
// each point alone; here the bug needs acl_fetched (the "agent" reproduces
// only when it is set), so off and "without acl_fetched" are dropped and
// "without step_into" is kept. Positive control: an outcome whose run had
// no widening replays with the points off, and one with no widening block
// leaves it to the seed.
TEST_F(TriageStoreTest, ReplayAndMinimizeCarryTheDelayPointsAndMinimizeTurnsThemOff) {
  v1::Outcome o = violation_outcome("stat");
  v1::RaceStrategy* st = o.mutable_strategy();
  st->set_alignment(v1::ALIGNMENT_FUZZY);
  st->set_observers(1);
  st->set_pinned(true);
  v1::Widening* w = o.mutable_widening();
  w->set_on(true);
  w->set_reason("chosen by seed 7");
  auto* p1 = w->add_points();
  p1->set_name("acl_fetched");
  p1->set_probability_ppm(500000);
  p1->set_delay_ns(100000);
  p1->set_uid("65534");
  p1->set_hits(12);
  auto* p2 = w->add_points();
  p2->set_name("step_into");
  p2->set_probability_ppm(200000);
  p2->set_delay_ns(20000);
  p2->set_uid("any");
  night("k1", o);
  group();
  ASSERT_EQ(issues().size(), 1u);
  const std::string both = "acl_fetched:500000:100000:65534,step_into:200000:20000:any";
  EXPECT_EQ(issues()[0].example_spec().widen(), both);

  v1::Outcome off = o;
  off.mutable_widening()->set_on(false);
  off.mutable_widening()->clear_points();
  EXPECT_EQ(spec_as_run(v1::ScenarioSpec(), off).widen(), "off");
  EXPECT_EQ(spec_as_run(v1::ScenarioSpec(), violation_outcome("stat")).widen(), "");

  v1::StartMinimizeRequest req;
  req.set_issue_id(issues()[0].id());
  req.set_max_runs(2);
  v1::Action a = engine_->start_minimize(req);
  v1::Outcome pass;
  pass.set_verdict(v1::VERDICT_PASS);
  v1::Capabilities caps;
  caps.set_kernel_label("k1");
  caps.add_filesystems("tmpfs");
  std::vector<std::string> widens;
  for (int round = 0; round < 40 && a.state() != v1::ACTION_STATE_DONE && a.state() != v1::ACTION_STATE_FAILED;
       ++round) {
    while (auto leased = store_->lease_job(agent_, caps, clock_.now(), std::chrono::seconds(30))) {
      const std::string& wd = leased->spec().widen();
      if (widens.empty() || widens.back() != wd) widens.push_back(wd);
      const bool bug = wd.find("acl_fetched") != std::string::npos;
      ASSERT_EQ(store_->report_outcome(agent_, leased->job_id(), leased->attempt(), bug ? o : pass, clock_.now()),
                ReportResult::Stored);
    }
    engine_->advance_actions();
    a = engine_->get_action(a.id());
  }
  ASSERT_EQ(a.state(), v1::ACTION_STATE_DONE) << a.ShortDebugString();
  EXPECT_EQ(a.minimize().minimal_spec().widen(), "acl_fetched:500000:100000:65534") << a.ShortDebugString();
  EXPECT_NE(std::find(widens.begin(), widens.end(), "off"), widens.end());
  EXPECT_NE(std::find(widens.begin(), widens.end(), "step_into:200000:20000:any"), widens.end());
  EXPECT_EQ(widens.front(), both);  // the measurement races as the example did
  std::string log;
  for (const auto& l : a.minimize().log()) log += l + "\n";
  EXPECT_NE(log.find("widening " + both + " -> off"), std::string::npos) << log;
  EXPECT_NE(log.find("widening without step_into -> acl_fetched:500000:100000:65534"), std::string::npos) << log;
}

TEST_F(TriageStoreTest, ASecondReplicaDoesNotGroupAtTheSameTime) {
  night("k1", violation_outcome("stat"));
  pqxx::connection other(url_);
  pqxx::nontransaction(other).exec("SELECT pg_advisory_lock(" + std::to_string(0x747269616765LL) +
                                   ")");
  const IngestResult r = engine_->group_failures();
  EXPECT_TRUE(r.locked_out);
  pqxx::nontransaction(other).exec("SELECT pg_advisory_unlock_all()");
  group();
  EXPECT_EQ(issues().size(), 1u);
}

}  // namespace
}  // namespace leapfrog::coord::triage
