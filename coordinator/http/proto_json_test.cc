// The API's one JSON rendering (proto_json.h): the options it prints with,
// and the 400 that a body the mapping cannot read gets.

#include "coordinator/http/proto_json.h"

#include <gtest/gtest.h>

#include "coordinator/http/api.h"
#include "leapfrog/v1/http.pb.h"

namespace leapfrog::coord {
namespace {

using nlohmann::json;

TEST(ApiProtoJson, SpellsFieldsAsTheProtoAndPrintsDefaults) {
  v1::JobInfo j;
  j.set_job_id(7);
  j.set_kernel_label("host");
  j.set_verdict(v1::VERDICT_KERNEL_CRASH);
  j.mutable_spec()->set_scenario("setattr-lookup");
  j.mutable_spec()->mutable_duration()->set_seconds(2);
  const json out = proto_json(j);
  EXPECT_EQ(out["kernel_label"], "host") << out.dump();  // not "kernelLabel"
  EXPECT_EQ(out["job_id"], "7") << "64-bit integers are strings in the mapping";
  EXPECT_EQ(out["verdict"], "VERDICT_KERNEL_CRASH");
  EXPECT_EQ(out["spec"]["duration"], "2s");
  // Defaults are printed: a reader never needs proto3's defaults.
  EXPECT_EQ(out["attempt"], 0);
  EXPECT_EQ(out["reason"], "");
  EXPECT_EQ(out["state"], "JOB_STATE_UNSPECIFIED");
  EXPECT_EQ(out["spec"]["params"], json::object());
  // An unset message is absent, not null.
  EXPECT_FALSE(out.contains("build")) << out.dump();
}

TEST(ApiProtoJson, UnsetOptionalIsAbsentAndTimesAreRfc3339) {
  v1::PointChange c;
  c.set_change_pct(-12.5);
  v1::AgentsPage page;
  page.mutable_now()->set_seconds(1'796'000'000);
  page.mutable_now()->set_nanos(250'000'000);
  const json cj = proto_json(c), pj = proto_json(page);
  EXPECT_EQ(cj["change_pct"], -12.5);
  EXPECT_FALSE(cj.contains("p_value")) << cj.dump();
  EXPECT_EQ(pj["now"], "2026-11-30T00:53:20.250Z");
  EXPECT_EQ(pj["agents"], json::array());
}

TEST(ApiProtoJson, DropsBytesThatAreNotUtf8) {
  v1::BuildLog log;
  log.set_text("ok \xff\xfe end \xc3\xa9");
  const json out = proto_json(log);  // nlohmann would throw on invalid UTF-8
  EXPECT_EQ(out["text"], "ok  end \xc3\xa9");
}

TEST(ApiProtoJson, ABodyTheMappingCannotReadIsA400) {
  v1::Schedule s;
  proto_from_json(json{{"name", "n"}, {"enabled", true}}, s, "schedule");
  EXPECT_EQ(s.name(), "n");
  try {
    proto_from_json(json{{"name", "n"}, {"no_such_field", 1}}, s, "schedule");
    FAIL() << "an unknown field was taken";
  } catch (const RequestError& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("bad schedule"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace leapfrog::coord
