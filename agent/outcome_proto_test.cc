// outcome_from_json(): the run's JSON, as scenarios' to_json(Outcome) writes
// it, becomes the typed wire Outcome (scale run, violation details), every
// part of it read back equal.

#include "agent/outcome_proto.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "common/ktap/words.h"
#include "common/outcome/legacy.h"
#include "common/outcome/run_proto.h"
#include "common/outcome/scale_proto.h"
#include "common/outcome/violation_proto.h"
#include "common/proto_time.h"
#include "scenarios/outcome.h"

namespace leapfrog {
namespace {

using nlohmann::json;

template <class M>
M parsed(const std::string& bytes) {
  M m;
  EXPECT_TRUE(m.ParseFromString(bytes));
  return m;
}

Outcome scale_run() {
  Outcome o;
  o.scenario = "lookup-scale";
  ScalePoint p;
  p.test = "lseek1";
  p.mode = "threads";
  p.tasks = 2;
  p.ops_per_sec = 1e6 / 3;
  p.samples = {1e6 / 3, 1e6 / 7, 0.1 + 0.2};
  p.stddev = 12.5;
  p.ci_low = 1e6 / 3 - 1;
  p.ci_high = 1e6 / 3 + 1;
  p.idle_pct = 40;
  p.other_load = 0.125;
  p.task_cpu_s = 0.75;
  p.window_s = 0.06;
  p.host_load = -1;
  o.scale = {p, p};
  o.scale[1].mode = "processes";
  o.scale[1].samples.clear();
  o.scale_host.cpus = 2;
  o.scale_host.sample_s = 0.02;
  o.scale_host.warmup_s = 1.5;
  o.scale_host.max_other_load = 0.125;
  o.scale_host.load_average = 0.5;
  o.scale_host.vcpus = 2;
  o.scale_host.vcpu_pinning = "0,1";
  o.scale_host.warnings = {"3 tasks on 2 CPUs"};
  return o;
}

TEST(OutcomeProto, AScaleRunIsTypedAndReadsBackAsWritten) {
  const Outcome run = scale_run();
  const v1::Outcome o = outcome_from_json(to_json(run).dump());
  ASSERT_TRUE(o.has_scale());
  ASSERT_EQ(o.scale().points_size(), 2);
  EXPECT_EQ(o.scale().points(0).mode(), v1::SCALE_MODE_THREADS);
  EXPECT_EQ(o.scale().points(1).mode(), v1::SCALE_MODE_PROCESSES);
  EXPECT_EQ(o.scale().host().sample().nanos(), 20'000'000);
  EXPECT_EQ(o.scale().host().warmup().seconds(), 1);
  for (int i = 0; i < 2; ++i)  // every field, exactly
    EXPECT_EQ(to_json(from_proto(o.scale().points(i))), to_json(run.scale[i]));
  EXPECT_EQ(to_json(from_proto(o.scale().host())), to_json(run.scale_host));
  // An old outcome's JSON (field 14) upgrades to the same typed run.
  v1::Outcome bare = o;
  bare.clear_scale();
  bare.clear_run();
  v1::Outcome old = parsed<v1::Outcome>(with_old_field(bare, 14, to_json(run).dump()));
  EXPECT_FALSE(old.has_scale());
  EXPECT_TRUE(upgrade_legacy(old));
  ASSERT_TRUE(scale_run_of(old));
  EXPECT_EQ(scale_run_of(old)->SerializeAsString(), o.scale().SerializeAsString());
  EXPECT_EQ(old.GetReflection()->GetUnknownFields(old).field_count(), 0);  // the JSON went
  EXPECT_FALSE(upgrade_legacy(old));                                       // nothing left to do
}

TEST(OutcomeProto, AnOutcomeWithoutPointsHasNoScale) {
  Outcome run = scale_run();
  run.scale.clear();
  EXPECT_FALSE(outcome_from_json(to_json(run).dump()).has_scale());
  json j = to_json(scale_run());
  j["scale"] = json::array({{{"test", "x"}}});  // no valid point
  EXPECT_FALSE(outcome_from_json(j.dump()).has_scale());
  EXPECT_FALSE(scale_run_of(outcome_from_json(j.dump())));
}

TEST(OutcomeProto, TheRunsDetailIsTypedAndTheOldJsonReadsTheSame) {
  Outcome run;
  run.verdict = "pass";
  run.mutations = 40;
  run.rounds = 400;
  run.check.steps_checked = 3300;
  run.check.unjudged = 3;
  run.check.over_budget = 1;
  run.setup_s = 1.25;
  run.timing = {1500, 2500, 4'000'000'123, 8};
  run.backpressure_s = 1.5;
  run.backpressure_waits = 12;
  run.notes = {"first", "second"};
  const v1::Outcome o = outcome_from_json(to_json(run).dump());
  ASSERT_TRUE(o.has_run());
  const v1::RunDetail& d = o.run();
  EXPECT_EQ(d.mutations(), 40u);
  EXPECT_EQ(d.rounds(), 400u);
  EXPECT_EQ(d.steps_checked(), 3300u);
  EXPECT_EQ(d.unjudged(), 3u);
  EXPECT_EQ(d.over_budget(), 1u);
  EXPECT_EQ(d.setup().seconds(), 1);
  EXPECT_EQ(d.setup().nanos(), 250'000'000);
  EXPECT_EQ(d.timing().mutator_mean().nanos(), 1500);
  EXPECT_EQ(d.timing().observer_mean().nanos(), 2500);
  EXPECT_EQ(d.timing().delay_span().seconds(), 4);
  EXPECT_EQ(d.timing().delay_span().nanos(), 123);
  EXPECT_EQ(d.timing().warmup_rounds(), 8u);
  EXPECT_EQ(d.timing().backpressure().seconds(), 1);
  EXPECT_EQ(d.timing().backpressure().nanos(), 500'000'000);
  EXPECT_EQ(d.timing().backpressure_waits(), 12u);
  ASSERT_EQ(d.notes_size(), 2);
  EXPECT_EQ(d.notes(1), "second");
  // An old outcome's JSON (field 14) upgrades to the same typed detail; one
  // whose `run` is set keeps it.
  v1::Outcome bare = o;
  bare.clear_run();
  v1::Outcome old = parsed<v1::Outcome>(with_old_field(bare, 14, to_json(run).dump()));
  EXPECT_TRUE(upgrade_legacy(old));
  EXPECT_EQ(old.run().SerializeAsString(), d.SerializeAsString());
  v1::Outcome both = parsed<v1::Outcome>(with_old_field(o, 14, json{{"rounds", 1}}.dump()));
  EXPECT_TRUE(upgrade_legacy(both));
  EXPECT_EQ(both.run().SerializeAsString(), d.SerializeAsString());
  v1::Outcome garbled = parsed<v1::Outcome>(with_old_field(bare, 14, "not json"));
  EXPECT_TRUE(upgrade_legacy(garbled));
  EXPECT_FALSE(garbled.has_run());
}

Violation a_violation() {
  Violation v;
  v.kind = ViolationKind::StaleEntry;
  v.actor = 3;
  v.record = 41;
  v.op = "openat";
  v.path = "a/b";
  v.invoke = 1000;
  v.complete = 2000;
  v.epsilon = 50;
  v.step = 2;
  v.component = "b";
  v.object = "entry(a/b)";
  v.observed = "success";
  v.expected = "error ENOENT";
  v.versions = {{"#0", kTimeMin, 1500, "file"}, {"(none)", 1400, kTimeMax, "absent"}};
  v.steps = {{1, "a", "attr(a)", {{"mode=0755", kTimeMin, kTimeMax, ""}}},
             {2, "b", "entry(a/b)", v.versions}};
  v.history = {{0, "unlink", "entry(a/b)", "(none)", 1400, 1600, 0, "absent"},
               {0, "create", "entry(a/b)", "#1", 1700, 1800, 17, "file"}};
  return v;
}

TEST(OutcomeProto, AViolationsDetailIsTypedAndReadsBackAsTheRunWroteIt) {
  Outcome run;
  run.verdict = "violation";
  run.check.violation_count = 1;
  run.check.violations = {a_violation()};
  const v1::Outcome o = outcome_from_json(to_json(run).dump());
  ASSERT_EQ(o.violations_size(), 1);
  const v1::Violation& v = o.violations(0);
  ASSERT_TRUE(v.has_detail());
  EXPECT_EQ(v.kind(), v1::VIOLATION_KIND_STALE_ENTRY);
  EXPECT_EQ(v.detail().record(), 41u);
  ASSERT_EQ(v.detail().versions_size(), 2);
  EXPECT_FALSE(v.detail().versions(0).has_from_ns());  // the initial version
  EXPECT_EQ(v.detail().versions(1).node_kind(), v1::NODE_KIND_ABSENT);
  EXPECT_EQ(v.detail().history(1).err(), 17);
  EXPECT_EQ(violation_json(v), to_json(run.check.violations[0]));
  // No unknown field carries a second copy of anything.
  EXPECT_EQ(o.GetReflection()->GetUnknownFields(o).field_count(), 0);
  // A violation of the old shape (string kind 1, detail_json 12) upgrades
  // to the same typed one.
  v1::Violation bare = v;
  bare.clear_detail();
  bare.clear_kind();
  const std::string word = to_json(run.check.violations[0]).at("kind");
  v1::Violation old =
      parsed<v1::Violation>(with_old_field(parsed<v1::Violation>(with_old_field(bare, 1, word)), 12,
                                           to_json(run.check.violations[0]).dump()));
  EXPECT_EQ(old.kind(), v1::VIOLATION_KIND_UNSPECIFIED);
  EXPECT_TRUE(upgrade_legacy(old));
  EXPECT_EQ(old.SerializeAsString(), v.SerializeAsString());
  EXPECT_EQ(violation_json(old), violation_json(v));
  // A detail that is not JSON leaves none, as the old readers showed none.
  v1::Violation garbled = parsed<v1::Violation>(with_old_field(bare, 12, "not json"));
  EXPECT_TRUE(upgrade_legacy(garbled));
  EXPECT_FALSE(garbled.has_detail());
  EXPECT_TRUE(violation_json(garbled).is_null());
}

// A build's time as an older agent spooled it (a double of seconds, old
// KernelBuildResult field 7) becomes the Duration when the spool is read
// back (agent/spool.cc runs upgrade_legacy), and a kernel's likewise.
TEST(LegacyBuildTime, OldSecondsBecomeADuration) {
  v1::KernelBuildResult r;
  r.set_ok(true);
  r.set_release("6.1.0-lf1");
  v1::Outcome old;
  old.set_verdict(v1::VERDICT_PASS);
  ASSERT_TRUE(old.mutable_build()->ParseFromString(with_old_double(r, 7, 812.25)));
  EXPECT_FALSE(old.build().has_build_time());
  EXPECT_TRUE(upgrade_legacy(old));
  EXPECT_EQ(ns_of(old.build().build_time()), 812'250'000'000);
  EXPECT_EQ(old.build().GetReflection()->GetUnknownFields(old.build()).field_count(), 0);
  EXPECT_FALSE(upgrade_legacy(old)) << "nothing left to do";
  // A cached build took 0 s: no time, as new builders leave it.
  ASSERT_TRUE(old.mutable_build()->ParseFromString(with_old_double(r, 7, 0)));
  EXPECT_TRUE(upgrade_legacy(old));
  EXPECT_FALSE(old.build().has_build_time());
  v1::Kernel k;
  ASSERT_TRUE(k.ParseFromString(with_old_double(v1::Kernel(), 13, 3.5)));
  EXPECT_TRUE(upgrade_legacy(k));
  EXPECT_EQ(ns_of(k.build_time()), 3'500'000'000);
}

// What an agent reads from its run child (`run --format proto`): the message
// as the child serialized it, and a clear refusal of anything else, never a
// default outcome (whose verdict would be unset).
TEST(OutcomeOfRun, ReadsTheChildsMessageAndRefusesAnythingElse) {
  Outcome run = scale_run();
  run.verdict = "violation";
  const v1::Outcome sent = outcome_from_json(to_json(run).dump());
  const v1::Outcome got = outcome_of_run(sent.SerializeAsString());
  EXPECT_EQ(got.SerializeAsString(), sent.SerializeAsString());
  EXPECT_EQ(got.verdict(), v1::VERDICT_VIOLATION);
  auto refusal = [](const std::string& bytes) {
    try {
      outcome_of_run(bytes);
    } catch (const std::runtime_error& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  EXPECT_EQ(refusal(""), "the run wrote no outcome");
  EXPECT_NE(refusal("\xff\xff\xff").find("is not a v1.Outcome"), std::string::npos);
  // The JSON an older child printed is not the message.
  EXPECT_NE(refusal(to_json(run).dump()), "accepted");
  v1::Outcome unset = sent;
  unset.clear_verdict();
  EXPECT_NE(refusal(unset.SerializeAsString()).find("has no verdict"), std::string::npos);
}

TEST(ViolationKindWords, EveryKindTheOracleReportsHasOneWordBothWays) {
  for (int k = 0; k < kViolationKinds; ++k) {
    const std::string word = to_string(static_cast<ViolationKind>(k));
    const v1::ViolationKind kind = ktap::violation_kind_from(word);
    EXPECT_NE(kind, v1::VIOLATION_KIND_UNSPECIFIED) << word;
    EXPECT_EQ(ktap::violation_kind_word(kind), word);
  }
  // Every enum value but UNSPECIFIED has a word.
  const auto* e = v1::ViolationKind_descriptor();
  for (int i = 0; i < e->value_count(); ++i) {
    const auto kind = static_cast<v1::ViolationKind>(e->value(i)->number());
    EXPECT_EQ(ktap::violation_kind_word(kind).empty(), kind == v1::VIOLATION_KIND_UNSPECIFIED)
        << e->value(i)->name();
  }
  EXPECT_EQ(e->value_count(), kViolationKinds + 1);
  EXPECT_EQ(ktap::violation_kind_from("stale"), v1::VIOLATION_KIND_UNSPECIFIED);
  EXPECT_EQ(ktap::violation_kind_word(static_cast<v1::ViolationKind>(99)), "");
}

}  // namespace
}  // namespace leapfrog
