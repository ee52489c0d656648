// The outcome routes print an OutcomeRecord by protobuf's JSON mapping: an
// outcome stored before its parts were typed (only its JSON, old field 14,
// carried them), once converted as migration 18 converts it
// (upgrade_legacy), prints as one stored with the typed fields, and the
// typed fields alone are enough.

#include <gtest/gtest.h>

#include "common/outcome/legacy.h"
#include "common/proto_time.h"
#include "coordinator/http/proto_json.h"
#include "leapfrog/v1/control.pb.h"
#include "scenarios/outcome.h"

namespace leapfrog::coord {
namespace {

using nlohmann::json;

// A run as the child reports it, with every part that once lived only in
// the old JSON set to a value of its own.
Outcome a_run() {
  Outcome o;
  o.scenario = "setattr-lookup";
  o.seed = 7;
  o.fs = "tmpfs";
  o.verdict = "inconclusive";
  o.error = "1 lookups exceeded the search budget and were not judged";
  o.ops = 1200;
  o.mutations = 40;
  o.rounds = 400;
  o.check.lookups_checked = 1100;
  o.check.steps_checked = 3300;
  o.check.unjudged = 3;
  o.check.over_budget = 1;
  o.duration_s = 2.5;
  o.setup_s = 0.25;
  o.timing = {1500, 2500, 4000, 8};
  o.notes = {"NOT JUDGED: 1 lookups exceeded the search budget",
             "3 records had results outside the model and were not judged"};
  return o;
}

// The wire outcome's counters, as the agent has always sent them.
v1::OutcomeRecord record_of(const Outcome& run) {
  v1::OutcomeRecord r;
  r.set_job_id(5);
  r.set_attempt(1);
  v1::Outcome& o = *r.mutable_outcome();
  o.set_verdict(v1::VERDICT_INCONCLUSIVE);
  o.set_error(run.error);
  o.set_ops(run.ops);
  o.set_lookups_checked(run.check.lookups_checked);
  *o.mutable_elapsed() = duration_of_seconds(run.duration_s);
  return r;
}

// `r` as a row stored by an old coordinator with `old_json` as its
// outcome's JSON, converted as migration 18 converts it.
v1::OutcomeRecord upgraded(v1::OutcomeRecord r, const std::string& old_json) {
  v1::Outcome o;
  EXPECT_TRUE(o.ParseFromString(with_old_field(r.outcome(), 14, old_json)));
  EXPECT_TRUE(upgrade_legacy(o));
  *r.mutable_outcome() = o;
  return r;
}

TEST(OutcomeJson, AnOldRowWithOnlyOutcomeJsonPrintsAsANewTypedRow) {
  const Outcome run = a_run();
  const v1::OutcomeRecord old_row = upgraded(record_of(run), to_json(run).dump());

  v1::OutcomeRecord new_row = record_of(run);
  v1::RunDetail& d = *new_row.mutable_outcome()->mutable_run();
  d.set_mutations(40);
  d.set_rounds(400);
  d.set_steps_checked(3300);
  d.set_unjudged(3);
  d.set_over_budget(1);
  d.mutable_setup()->set_nanos(250'000'000);
  d.mutable_timing()->mutable_mutator_mean()->set_nanos(1500);
  d.mutable_timing()->mutable_observer_mean()->set_nanos(2500);
  d.mutable_timing()->mutable_delay_span()->set_nanos(4000);
  d.mutable_timing()->set_warmup_rounds(8);
  for (const auto& n : run.notes) d.add_notes(n);

  // As the outcome routes print it: protobuf's JSON mapping.
  const json printed = proto_json(new_row);
  EXPECT_EQ(proto_json(old_row), printed);
  const json& o = printed["outcome"];
  EXPECT_EQ(o["verdict"], "VERDICT_INCONCLUSIVE");
  EXPECT_EQ(o["elapsed"], "2.500s");
  const json& r = o["run"];
  EXPECT_EQ(r["rounds"], "400");
  EXPECT_EQ(r["mutations"], "40");
  EXPECT_EQ(r["steps_checked"], "3300");
  EXPECT_EQ(r["unjudged"], "3");
  EXPECT_EQ(r["over_budget"], "1");
  EXPECT_EQ(r["setup"], "0.250s");
  EXPECT_EQ(r["timing"], (json{{"mutator_mean", "0.000001500s"},
                               {"observer_mean", "0.000002500s"},
                               {"delay_span", "0.000004s"},
                               {"warmup_rounds", 8},
                               {"backpressure_waits", "0"}}));
  EXPECT_EQ(r["notes"], json(run.notes));

  // The typed fields win over an old JSON that says otherwise.
  EXPECT_EQ(proto_json(upgraded(new_row, json{{"rounds", 1}, {"notes", {"stale"}}}.dump())),
            printed);
}

TEST(OutcomeJson, AnOutcomeWithNeitherPrintsNoRunAndABrokenJsonIsNoDetail) {
  v1::OutcomeRecord r = record_of(a_run());
  const json none = proto_json(r);
  EXPECT_FALSE(none["outcome"].contains("run"));
  EXPECT_EQ(proto_json(upgraded(r, "not json")), none);
  // Mistyped parts of an old row read as nothing, never as garbage.
  const json odd = proto_json(upgraded(
      r, json{{"rounds", "many"}, {"mutations", 1e300}, {"notes", {1, "kept"}}, {"timing", 3}}
             .dump()));
  const json& run = odd["outcome"]["run"];
  EXPECT_EQ(run["rounds"], "0");
  EXPECT_EQ(run["mutations"], "0");
  EXPECT_EQ(run["notes"], json::array({"kept"}));
  EXPECT_EQ(run.value("timing", json::object()),
            (json{{"warmup_rounds", 0}, {"backpressure_waits", "0"}}));
}

}  // namespace
}  // namespace leapfrog::coord
