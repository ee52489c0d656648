// Migrations 18 and 19 against a real PostgreSQL. 18: rows written in the shape older
// coordinators stored (an outcome's JSON as field 14 of its value, a
// violation's detail as JSON text in its row, an issue's example violation
// with a string kind and a JSON detail) read back, once migrated, exactly as
// the typed rows the current store writes; before the migration they do not
// (the positive control: no reader falls back on the old shape any more).
// 19: a bisect action whose steps carry their verdicts as words (old
// BisectStep field 2), an event with its issue kind and cell verdict as
// words, and a subscription filtering on a word read back typed.

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <pqxx/pqxx>
#include <string>
#include <vector>

#include "common/ktap/words.h"
#include "common/outcome/legacy.h"
#include "common/outcome/run_proto.h"
#include "common/outcome/scale_proto.h"
#include "common/outcome/violation_proto.h"
#include "common/proto_time.h"
#include "coordinator/pg/test_postgres.h"
#include "coordinator/store/pg_legacy.h"
#include "coordinator/store/pg_store.h"
#include "coordinator/store/pg_util.h"
#include "leapfrog/v1/notify.pb.h"
#include "leapfrog/v1/triage.pb.h"
#include "scenarios/outcome.h"

namespace leapfrog::coord {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;

const TimePoint kT0 = TimePoint(Duration(1'700'000'000'123'456));

v1::Capabilities host_caps() {
  v1::Capabilities c;
  c.set_kernel_label("host");
  c.add_filesystems("tmpfs");
  return c;
}

// The JSON an old agent kept as outcome_json: the run's detail, and for
// `scaled` a lookup-scale run's points and host.
json old_outcome_json(bool scaled, int salt) {
  json j = {{"verdict", scaled ? "pass" : "violation"},
            {"mutations", 40 + salt},
            {"rounds", 400 + salt},
            {"steps_checked", 3300},
            {"unjudged", salt % 2},
            {"over_budget", 0},
            {"setup_s", 0.25},
            {"timing",
             {{"mutator_mean_ns", 1500},
              {"observer_mean_ns", 2500},
              {"delay_span_ns", 4000},
              {"warmup_rounds", 8}}},
            {"notes", {"note " + std::to_string(salt)}}};
  if (scaled) {
    ScalePoint p;
    p.test = "lseek1";
    p.mode = "threads";
    p.tasks = 2;
    p.ops_per_sec = 1e6 / 3;
    p.samples = {1e6 / 3, 1e6 / 7};
    p.ci_low = 1;
    p.ci_high = 2;
    ScaleHost h;
    h.cpus = 2;
    h.sample_s = 0.5;
    h.warnings = {"3 tasks on 2 CPUs"};
    j["scale"] = json::array({to_json(p)});
    j["scale_host"] = to_json(h);
  }
  return j;
}

// A typed violation as the agent sends it now; `detailed` false: one that
// came without a detail (its old row's JSON did not parse).
v1::Violation a_violation(int i, bool detailed) {
  v1::Violation v;
  v.set_kind(i % 2 ? v1::VIOLATION_KIND_STALE_GRANT : v1::VIOLATION_KIND_ESCAPE);
  v.set_actor(static_cast<uint32_t>(i % 3));
  v.set_op("openat");
  v.set_path("a/b/" + std::to_string(i));
  v.set_step(2);
  v.set_component("b");
  v.set_object("attr(a/b)");
  v.set_observed("granted");
  v.set_expected("EACCES");
  v.set_invoke_ns(1'000'000 + i);
  v.set_complete_ns(1'000'500 + i);
  if (detailed) {
    v1::ViolationDetail* d = v.mutable_detail();
    d->set_record(static_cast<uint64_t>(i));
    d->set_epsilon_ns(50);
    v1::PossibleVersion* first = d->add_versions();
    first->set_value("mode=0700");
    first->set_to_ns(1'000'200);
    v1::PossibleVersion* second = d->add_versions();
    second->set_value("mode=0755");
    second->set_from_ns(1'000'100);
    second->set_node_kind(v1::NODE_KIND_DIR);
    v1::StepTrace* s = d->add_steps();
    s->set_step(1);
    s->set_component("a");
    s->set_object("attr(a)");
    *s->add_versions() = *first;
    v1::MutationTrace* m = d->add_history();
    m->set_op("chmod");
    m->set_object("attr(a/b)");
    m->set_value("mode=0755");
    m->set_invoke_ns(1'000'100);
    m->set_complete_ns(1'000'200);
    m->set_err(i);
  }
  return v;
}

class PgLegacyTest : public testing::PostgresSuite<PgLegacyTest> {
 protected:
  void SetUp() override {
    url_ = pg_->url(fresh_database("legacy"));
    store_ = std::make_unique<PgStore>(url_);
  }

  std::string one(const std::string& statement) {
    pqxx::connection c(url_);
    pqxx::work txn(c);
    const auto r = txn.exec(statement);
    return r.empty() || r[0][0].is_null() ? "" : r[0][0].as<std::string>();
  }

  // Every outcome of the campaign with its violations, as the store reads
  // them: the list and a page of the outcome filter (deterministic bytes:
  // violations_by_kind is a map).
  std::string read_back(int64_t campaign) {
    std::string out;
    auto add = [&out](const v1::OutcomeRecord& r) {
      google::protobuf::io::StringOutputStream stream(&out);
      google::protobuf::io::CodedOutputStream coded(&stream);
      coded.SetSerializationDeterministic(true);
      r.SerializeToCodedStream(&coded);
    };
    for (const auto& o : store_->find_outcomes({.campaign_id = campaign, .limit = 100})) add(o);
    OutcomeQuery q;
    q.campaign_id = campaign;
    q.with_violations = true;
    for (const auto& o : store_->page_outcomes(q).items) add(o);
    return out;
  }

  std::string url_;
  std::unique_ptr<PgStore> store_;
};

TEST_F(PgLegacyTest, OldOutcomeJsonViolationDetailsAndKindsMigrateToTheTypedFields) {
  std::vector<NewJob> jobs;
  for (int i = 0; i < 3; ++i) {
    NewJob j;
    j.spec.set_scenario(i == 0 ? "lookup-scale" : "setattr-lookup");
    j.spec.set_fs("tmpfs");
    j.spec.set_seed(static_cast<uint64_t>(i));
    j.kernel_label = "host";
    jobs.push_back(j);
  }
  v1::CampaignSpec spec;
  spec.set_name("legacy");
  const int64_t campaign = store_->create_campaign(spec, jobs, 0, kT0);
  // What old readers made of each old JSON is what the agent types now:
  // run_detail_from_json and scale_run_from_json, the same functions.
  std::vector<json> old_json;
  std::vector<int64_t> ids;
  for (int i = 0; i < 3; ++i) {
    auto job = store_->lease_job("a", host_caps(), kT0, 30s);
    ASSERT_TRUE(job);
    const bool scaled = job->spec().scenario() == "lookup-scale";
    old_json.push_back(old_outcome_json(scaled, i));
    v1::Outcome o;
    o.set_verdict(scaled ? v1::VERDICT_PASS : v1::VERDICT_VIOLATION);
    o.set_ops(1000 + static_cast<uint64_t>(i));
    *o.mutable_run() = run_detail_from_json(old_json.back());
    if (auto scale = scale_run_from_json(old_json.back())) *o.mutable_scale() = *scale;
    if (!scaled) {
      o.set_violation_count(3);
      (*o.mutable_violations_by_kind())["stale-grant"] = 2;
      (*o.mutable_violations_by_kind())["escape"] = 1;
      for (int k = 0; k < 3; ++k) *o.add_violations() = a_violation(k, k != 2);
    }
    ASSERT_EQ(store_->report_outcome("a", job->job_id(), job->attempt(), o, kT0 + 1s),
              ReportResult::Stored);
    ids.push_back(job->job_id());
  }
  const std::string before = read_back(campaign);
  ASSERT_FALSE(before.empty());
  // An issue whose example is one of those violations.
  const v1::Violation example = a_violation(1, true);

  // The rows as an older coordinator stored them.
  store_.reset();
  {
    pqxx::connection c(url_);
    pqxx::work txn(c);
    for (size_t i = 0; i < ids.size(); ++i) {
      const auto r = txn.exec_params("SELECT outcome FROM outcomes WHERE job_id = $1", ids[i]);
      v1::Outcome o = parse_outcome(r[0][0]);
      ASSERT_TRUE(o.has_run());
      o.clear_run();
      o.clear_scale();
      const std::string old = with_old_field(o, 14, old_json[i].dump());
      txn.exec_params("UPDATE outcomes SET outcome = $2 WHERE job_id = $1", ids[i],
                      pqxx::binarystring(pack_outcome(old)));
    }
    // Each row's detail as the agent's JSON (what violation_json renders
    // from the typed one), or text that is not JSON; no typed details.
    for (const auto& r :
         txn.exec_params("SELECT job_id, idx FROM violations WHERE job_id = ANY($1::bigint[])",
                         number_array(ids))) {
      const int idx = r[1].as<int>();
      const std::string text =
          idx == 2 ? std::string("{not json") : violation_json(a_violation(idx, true)).dump();
      txn.exec_params("UPDATE violations SET detail = $3 WHERE job_id = $1 AND idx = $2",
                      r[0].as<int64_t>(), idx, text);
    }
    txn.exec("DELETE FROM violation_details");
    v1::Violation bare = example;
    bare.clear_kind();
    bare.clear_detail();
    v1::Violation with_kind;
    ASSERT_TRUE(with_kind.ParseFromString(with_old_field(bare, 1, "stale-grant")));
    const std::string old_example = with_old_field(with_kind, 12, violation_json(example).dump());
    v1::ScenarioSpec example_spec;
    example_spec.set_scenario("setattr-lookup");
    txn.exec_params(
        "INSERT INTO issues (signature, kind, scenario, title, status, first_seen, last_seen,"
        " count, example_job, example_attempt, example_kernel, example_spec, example_violation)"
        " VALUES ('sig', 'violation', 'setattr-lookup', 't', 1, now(), now(), 1, $1, 1, 'host',"
        " $2, $3)",
        ids[1], pqxx::binarystring(example_spec.SerializeAsString()),
        pqxx::binarystring(old_example));
    txn.commit();
  }
  // Positive control: with migration 18 taken as applied, the readers see
  // no run, no scale and no details in the old rows.
  store_ = std::make_unique<PgStore>(url_);
  const std::string unmigrated = read_back(campaign);
  EXPECT_NE(unmigrated, before);
  for (const auto& r : store_->find_outcomes({.campaign_id = campaign, .limit = 100})) {
    EXPECT_FALSE(r.outcome().has_run());
    EXPECT_FALSE(r.outcome().has_scale());
  }
  store_.reset();

  {
    pqxx::connection c(url_);
    pqxx::work txn(c);
    txn.exec("DELETE FROM schema_migrations WHERE version = 18");
    txn.commit();
  }
  store_ = std::make_unique<PgStore>(url_);  // applies 18
  EXPECT_EQ(one("SELECT count(*) FROM schema_migrations WHERE version = 18"), "1");
  EXPECT_EQ(read_back(campaign), before);
  const auto records = store_->find_outcomes({.campaign_id = campaign, .limit = 100});
  ASSERT_EQ(records.size(), 3u);
  for (const auto& r : records) {
    EXPECT_TRUE(r.outcome().has_run());
    EXPECT_EQ(r.outcome().has_scale(), r.spec().scenario() == "lookup-scale");
  }
  // No value keeps the old JSON, no row its JSON detail; the kind column
  // keeps the word.
  {
    pqxx::connection c(url_);
    pqxx::work txn(c);
    for (const auto& r : txn.exec("SELECT outcome FROM outcomes")) {
      const v1::Outcome o = parse_outcome(r[0]);
      EXPECT_EQ(o.GetReflection()->GetUnknownFields(o).field_count(), 0);
    }
    EXPECT_EQ(txn.exec1("SELECT count(*) FROM violations WHERE detail <> ''")[0].as<int>(), 0);
    EXPECT_EQ(txn.exec1("SELECT count(*) FROM violations WHERE kind = 'escape'")[0].as<int>(), 4);
    v1::Violation migrated =
        parse<v1::Violation>(txn.exec1("SELECT example_violation FROM issues")[0], "example");
    EXPECT_EQ(migrated.SerializeAsString(), example.SerializeAsString());
    EXPECT_EQ(ktap::violation_kind_word(migrated.kind()), "stale-grant");
    // Idempotent: nothing is left to convert.
    const LegacyUpgrade again = upgrade_legacy_rows(txn);
    EXPECT_EQ(again.outcomes, 0);
    EXPECT_EQ(again.violations, 0);
    EXPECT_EQ(again.examples, 0);
  }
}

TEST_F(PgLegacyTest, OldWordsOfBisectsEventsAndSubscriptionsMigrateToTheEnums) {
  const std::vector<std::string> words = {"measure", "bad", "good", "skipped"};
  v1::Action old;
  old.set_kind(v1::ACTION_KIND_BISECT);
  old.set_state(v1::ACTION_STATE_DONE);
  old.mutable_bisect()->set_first_bad("k3");
  for (size_t i = 0; i < words.size(); ++i) {
    v1::BisectStep base;
    base.set_kernel_label("k" + std::to_string(i));
    base.set_runs(10);
    base.set_reproduced(i == 1 ? 4 : 0);
    ASSERT_TRUE(
        old.mutable_bisect()->add_steps()->ParseFromString(with_old_field(base, 2, words[i])));
  }
  v1::Action replay;  // not a bisect: left alone
  replay.set_kind(v1::ACTION_KIND_REPLAY);
  v1::Event event;
  event.set_kind(v1::EVENT_KIND_NIGHTLY_FAILED);
  event.set_issue_id(3);
  v1::EventCell cell;
  cell.set_scenario("setattr-lookup");
  cell.set_failed_jobs(2);
  ASSERT_TRUE(event.add_cells()->ParseFromString(with_old_field(cell, 4, "kernel-crash")));
  ASSERT_TRUE(event.ParseFromString(with_old_field(event, 8, "crash")));
  v1::Subscription sub, typo;
  sub.set_name("crashes");
  sub.mutable_filter()->set_kernel("6.*");
  ASSERT_TRUE(
      sub.ParseFromString(with_old_field(sub, 3, with_old_field(sub.filter(), 4, "crash"))));
  typo.set_name("typo");
  ASSERT_TRUE(
      typo.ParseFromString(with_old_field(typo, 3, with_old_field(typo.filter(), 4, "crashes"))));
  {
    pqxx::connection c(url_);
    pqxx::work txn(c);
    txn.exec_params(
        "INSERT INTO notify_events (key, kind, event, created_at) VALUES ('e', $1, $2, now())",
        static_cast<int>(event.kind()), pqxx::binarystring(event.SerializeAsString()));
    for (const auto* s : {&sub, &typo})
      txn.exec_params(
          "INSERT INTO subscriptions (name, subscription, created_at) VALUES ($1, $2, now())",
          s->name(), pqxx::binarystring(s->SerializeAsString()));
    for (const auto* a : {&old, &replay})
      txn.exec_params(
          "INSERT INTO triage_actions (kind, issue_id, state, action, machine, created_at,"
          " updated_at) VALUES ($1, 1, $2, $3, '{}', now(), now())",
          static_cast<int>(a->kind()), static_cast<int>(a->state()),
          pqxx::binarystring(a->SerializeAsString()));
    txn.commit();
  }
  auto stored = [this] {
    pqxx::connection c(url_);
    pqxx::work txn(c);
    return parse<v1::Action>(txn.exec1("SELECT action FROM triage_actions WHERE kind = " +
                                       std::to_string(static_cast<int>(v1::ACTION_KIND_BISECT)))[0],
                             "action");
  };
  auto stored_event = [this] {
    pqxx::connection c(url_);
    pqxx::work txn(c);
    return parse<v1::Event>(txn.exec1("SELECT event FROM notify_events")[0], "event");
  };
  auto stored_filters = [this] {
    pqxx::connection c(url_);
    pqxx::work txn(c);
    std::vector<v1::SubscriptionFilter> out;
    for (const auto& r : txn.exec("SELECT subscription FROM subscriptions ORDER BY id"))
      out.push_back(parse<v1::Subscription>(r[0], "subscription").filter());
    return out;
  };
  // Positive control: unmigrated, no reader sees a verdict or a kind.
  const v1::Action unmigrated = stored();  // a range over a temporary's member would dangle
  ASSERT_EQ(unmigrated.bisect().steps_size(), 4);
  for (const auto& s : unmigrated.bisect().steps())
    EXPECT_EQ(s.verdict(), v1::BISECT_STEP_UNSPECIFIED) << s.kernel_label();
  EXPECT_EQ(stored_event().issue_kind(), v1::ISSUE_KIND_UNSPECIFIED);
  EXPECT_EQ(stored_event().cells(0).verdict(), v1::VERDICT_UNSPECIFIED);
  EXPECT_EQ(stored_filters()[0].issue_kind(), v1::ISSUE_KIND_UNSPECIFIED);

  {
    pqxx::connection c(url_);
    pqxx::work txn(c);
    txn.exec("DELETE FROM schema_migrations WHERE version = 19");
    txn.commit();
  }
  store_ = std::make_unique<PgStore>(url_);  // applies 19
  EXPECT_EQ(one("SELECT count(*) FROM schema_migrations WHERE version = 19"), "1");
  const v1::Action migrated = stored();
  ASSERT_EQ(migrated.bisect().steps_size(), 4);
  const v1::BisectStepVerdict want[] = {v1::BISECT_STEP_MEASURE, v1::BISECT_STEP_BAD,
                                        v1::BISECT_STEP_GOOD, v1::BISECT_STEP_SKIPPED};
  for (int i = 0; i < 4; ++i) {
    const auto& s = migrated.bisect().steps(i);
    EXPECT_EQ(s.verdict(), want[i]) << s.kernel_label();
    EXPECT_EQ(ktap::bisect_step_word(s.verdict()), words[i]);
    EXPECT_EQ(s.GetReflection()->GetUnknownFields(s).field_count(), 0);
    EXPECT_EQ(s.kernel_label(), "k" + std::to_string(i));
  }
  EXPECT_EQ(migrated.bisect().steps(1).reproduced(), 4u);
  EXPECT_EQ(migrated.bisect().first_bad(), "k3");
  const v1::Event e = stored_event();
  EXPECT_EQ(e.issue_kind(), v1::ISSUE_KIND_CRASH);
  EXPECT_EQ(e.cells(0).verdict(), v1::VERDICT_KERNEL_CRASH);
  EXPECT_EQ(e.cells(0).failed_jobs(), 2u);
  EXPECT_EQ(e.GetReflection()->GetUnknownFields(e).field_count(), 0);
  const auto filters = stored_filters();
  ASSERT_EQ(filters.size(), 2u);
  EXPECT_EQ(filters[0].issue_kind(), v1::ISSUE_KIND_CRASH);
  EXPECT_EQ(filters[0].kernel(), "6.*");
  EXPECT_EQ(filters[1].issue_kind(), v1::ISSUE_KIND_UNSPECIFIED) << "a word no kind has";
  EXPECT_EQ(filters[1].GetReflection()->GetUnknownFields(filters[1]).field_count(), 0);
  pqxx::connection c(url_);
  pqxx::work txn(c);
  const WordUpgrade again = upgrade_stored_words(txn);
  EXPECT_EQ(again.bisects + again.events + again.subscriptions, 0) << "idempotent";
}

// Migration 20: a kernel's build time and a build job's outcome's, stored as
// doubles of seconds (old Kernel field 13, KernelBuildResult field 7), read
// back as Durations once migrated, and not before (the positive control).
TEST_F(PgLegacyTest, OldBuildSecondsMigrateToDurations) {
  NewJob build;
  build.kernel_label = "nightly";
  build.spec.set_scenario("kernel-build");
  build.spec.set_fs("kernel-build");
  v1::KernelBuild b;
  b.set_label("nightly");
  b.set_source("/src/linux");
  build.build = b;
  NewJob plain;  // an ordinary job's outcome is not read
  plain.kernel_label = "host";
  plain.spec.set_scenario("setattr-lookup");
  plain.spec.set_fs("tmpfs");
  v1::CampaignSpec spec;
  spec.set_name("built");
  store_->create_campaign(spec, {build, plain}, 0, kT0);
  const auto job = store_->lease_build_job("b", kT0, 30s);
  ASSERT_TRUE(job);
  v1::Outcome o;
  o.set_verdict(v1::VERDICT_PASS);
  v1::KernelBuildResult* r = o.mutable_build();
  r->set_ok(true);
  r->set_release("6.1.0-lfabcdef12");
  r->set_vmlinux_sha256(std::string(64, 'a'));
  r->set_version("6.1.0-lfabcdef12 #1");
  ASSERT_EQ(store_->report_outcome("b", job->job_id(), job->attempt(), o, kT0 + 1s),
            ReportResult::Stored);
  {
    // What an older coordinator stored: the seconds as doubles.
    v1::Outcome old = o;
    ASSERT_TRUE(old.mutable_build()->ParseFromString(with_old_double(o.build(), 7, 812.5)));
    const v1::Kernel k = store_->list_kernels().at(0);
    pqxx::connection c(url_);
    pqxx::work txn(c);
    txn.exec_params("UPDATE outcomes SET outcome = $2 WHERE job_id = $1", job->job_id(),
                    pqxx::binarystring(pack_outcome(old.SerializeAsString())));
    txn.exec_params("UPDATE kernels SET details = $1 WHERE label = 'nightly'",
                    pqxx::binarystring(with_old_double(k, 13, 812.5)));
    txn.commit();
  }
  auto kernel = [this] { return store_->list_kernels().at(0); };
  auto outcome = [this, &job] {
    for (const auto& rec : store_->find_outcomes({.limit = 10}))
      if (rec.job_id() == job->job_id()) return rec.outcome();
    return v1::Outcome();
  };
  EXPECT_FALSE(kernel().has_build_time()) << "no reader takes the old double";
  EXPECT_FALSE(outcome().build().has_build_time());
  ASSERT_TRUE(outcome().build().ok());
  {
    pqxx::connection c(url_);
    pqxx::work txn(c);
    txn.exec("DELETE FROM schema_migrations WHERE version = 20");
    txn.commit();
  }
  store_ = std::make_unique<PgStore>(url_);  // applies 20
  EXPECT_EQ(one("SELECT count(*) FROM schema_migrations WHERE version = 20"), "1");
  const v1::Kernel k = kernel();
  EXPECT_EQ(ns_of(k.build_time()), 812'500'000'000);
  EXPECT_EQ(k.GetReflection()->GetUnknownFields(k).field_count(), 0);
  EXPECT_EQ(k.release(), "6.1.0-lfabcdef12");
  const v1::Outcome migrated = outcome();
  EXPECT_EQ(ns_of(migrated.build().build_time()), 812'500'000'000);
  EXPECT_EQ(migrated.build().GetReflection()->GetUnknownFields(migrated.build()).field_count(), 0);
  EXPECT_EQ(migrated.build().release(), "6.1.0-lfabcdef12");
  pqxx::connection c(url_);
  pqxx::work txn(c);
  const BuildTimeUpgrade again = upgrade_build_times(txn);
  EXPECT_EQ(again.kernels + again.outcomes, 0) << "idempotent";
}

}  // namespace
}  // namespace leapfrog::coord
