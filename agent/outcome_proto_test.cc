// outcome_from_json(): the run's JSON, as scenarios' to_json(Outcome) writes
// it, becomes the typed wire Outcome (scale run, violation details), every
// part of it read back equal.

#include "agent/outcome_proto.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "common/outcome/run_proto.h"
#include "common/outcome/scale_proto.h"
#include "common/outcome/violation_proto.h"
#include "scenarios/outcome.h"

namespace leapfrog {
namespace {

using nlohmann::json;

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
  // scale_run_of reads the typed run, and an old row's JSON the same way.
  EXPECT_TRUE(o.outcome_json().empty());
  v1::Outcome old = o;
  old.clear_scale();
  old.set_outcome_json(to_json(run).dump());
  ASSERT_TRUE(scale_run_of(old));
  EXPECT_EQ(scale_run_of(old)->SerializeAsString(), o.scale().SerializeAsString());
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
  ASSERT_EQ(d.notes_size(), 2);
  EXPECT_EQ(d.notes(1), "second");
  // run_detail_of reads the typed detail, and an old row's JSON the same way.
  EXPECT_EQ(run_detail_of(o).SerializeAsString(), d.SerializeAsString());
  EXPECT_TRUE(run_detail_of(v1::Outcome()).SerializeAsString().empty());
  v1::Outcome old = o;
  old.clear_run();
  old.set_outcome_json(to_json(run).dump());
  EXPECT_EQ(run_detail_of(old).SerializeAsString(), d.SerializeAsString());
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
  EXPECT_TRUE(v.detail_json().empty());  // kept once
  EXPECT_EQ(v.detail().record(), 41u);
  ASSERT_EQ(v.detail().versions_size(), 2);
  EXPECT_FALSE(v.detail().versions(0).has_from_ns());  // the initial version
  EXPECT_EQ(v.detail().versions(1).node_kind(), v1::NODE_KIND_ABSENT);
  EXPECT_EQ(v.detail().history(1).err(), 17);
  EXPECT_EQ(detail_json_of(v), to_json(run.check.violations[0]));
  // No JSON carries a second copy of the violations.
  EXPECT_TRUE(o.outcome_json().empty());
  // A violation sent before the typed detail is read from its JSON.
  v1::Violation old = v;
  old.clear_detail();
  old.set_detail_json(to_json(run.check.violations[0]).dump());
  EXPECT_EQ(detail_json_of(old), detail_json_of(v));
  old.set_detail_json("not json");
  EXPECT_TRUE(detail_json_of(old).is_null());
}

}  // namespace
}  // namespace leapfrog
