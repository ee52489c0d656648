// The HTTP routes' error answers over a real PostgreSQL and the real
// HttpServer, all from the one table (error_status.h): 503 for every route
// while the database is away (the triage routes, including the C
// reproducer's file route, which answered 500), 409 for a triage
// precondition, 404 and 400 for the caller's mistakes, and the schedule
// use-cases as the HTTP façade calls them.

#include <gtest/gtest.h>
#include <httplib.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "coordinator/http/http_server.h"
#include "coordinator/pg/test_postgres.h"
#include "coordinator/store/pg_store.h"
#include "coordinator/triage/pg_triage_store.h"
#include "coordinator/triage/triage_engine.h"

namespace leapfrog::coord {
namespace {

using nlohmann::json;

const std::string kToken = "errors-test-token-51c2";

class ErrorsApiTest : public testing::PostgresSuite<ErrorsApiTest> {
 protected:
  void SetUp() override {
    const std::string url = pg_->url(fresh_database("errors"));
    store_ = std::make_unique<PgStore>(url);
    triage_store_ = std::make_unique<triage::PgTriageStore>(url);
    engine_ = std::make_unique<triage::TriageEngine>(*store_, *triage_store_, clock_, nullptr);
    HttpOptions o;
    o.token = kToken;
    http_ = std::make_unique<HttpServer>(*store_, clock_, o, engine_.get());
    client_ = std::make_unique<httplib::Client>("127.0.0.1", http_->port());
    client_->set_read_timeout(60, 0);
  }
  void TearDown() override {
    client_.reset();
    http_.reset();
    engine_.reset();
    triage_store_.reset();
    store_.reset();
    // A test that stopped the database leaves it running for the next.
    if (!pg_->running()) pg_->start(*dir_ / "pg");
  }

  struct Answer {
    int status = 0;
    std::string body;
    std::string error;  // the body's "error", if it is JSON with one
  };
  static Answer answer(const httplib::Result& r, const std::string& what) {
    if (!r) throw std::runtime_error(what + " failed");
    Answer a{r->status, r->body, ""};
    const json j = json::parse(r->body, nullptr, false);
    if (j.is_object() && j.contains("error")) a.error = j["error"].get<std::string>();
    return a;
  }
  Answer get(const std::string& path) { return answer(client_->Get(path.c_str()), "GET " + path); }
  Answer post(const std::string& path, const json& body) {
    const httplib::Headers h{{"Authorization", "Bearer " + kToken}};
    return answer(client_->Post(path.c_str(), h, body.dump(), "application/json"), "POST " + path);
  }

  // One failed outcome on kernel k1, grouped into an issue; its id.
  int64_t issue() {
    v1::Capabilities caps;
    caps.set_kernel_label("k1");
    caps.add_filesystems("tmpfs");
    const std::string agent = store_->register_agent("a", caps, clock_.now());
    v1::CampaignSpec spec;
    spec.set_name("night");
    spec.add_scenarios("setattr-lookup");
    spec.add_kernels("k1");
    spec.add_filesystems("tmpfs");
    NewJob job;
    job.kernel_label = "k1";
    job.spec.set_scenario("setattr-lookup");
    job.spec.set_seed(7);
    job.spec.set_fs("tmpfs");
    store_->create_campaign(spec, {job}, 0, clock_.now());
    auto leased = store_->lease_job(agent, caps, clock_.now(), std::chrono::seconds(30));
    if (!leased) throw std::runtime_error("no lease");
    v1::Outcome o;
    o.set_verdict(v1::VERDICT_VIOLATION);
    o.set_violation_count(1);
    auto* v = o.add_violations();
    v->set_kind(v1::VIOLATION_KIND_STALE_GRANT);
    v->set_op("stat");
    v->set_path("d0/d1/d2/f");
    v->set_step(3);
    v->set_object("attr(d1)");
    if (store_->report_outcome(agent, leased->job_id(), leased->attempt(), o, clock_.now()) !=
        ReportResult::Stored)
      throw std::runtime_error("outcome not stored");
    // The first pass takes the horizon, the second groups up to it.
    engine_->group_failures();
    engine_->group_failures();
    const auto issues = engine_->list_issues({});
    if (issues.issues_size() != 1) throw std::runtime_error("want one issue");
    return issues.issues(0).id();
  }

  ManualClock clock_{TimePoint(std::chrono::seconds(1'800'000'000))};
  std::unique_ptr<PgStore> store_;
  std::unique_ptr<triage::PgTriageStore> triage_store_;
  std::unique_ptr<triage::TriageEngine> engine_;
  std::unique_ptr<HttpServer> http_;
  std::unique_ptr<httplib::Client> client_;
};

TEST_F(ErrorsApiTest, EveryRouteAnswers503WhileTheDatabaseIsAway) {
  const int64_t id = issue();
  const v1::Action action = engine_->start_replay([&] {
    v1::StartReplayRequest r;
    r.set_issue_id(id);
    r.set_runs(1);
    return r;
  }());
  const std::string issue_path = "/api/issues/" + std::to_string(id);
  const std::string repro_path = "/api/actions/" + std::to_string(action.id()) + "/reproducer.c";
  // Positive control: with the database up, the same routes answer.
  EXPECT_EQ(get(issue_path).status, 200);
  EXPECT_EQ(get(repro_path).status, 404) << "a replay has no C reproducer";
  EXPECT_EQ(get("/api/campaigns").status, 200);

  pg_->stop();
  struct Case {
    std::string what;
    Answer a;
  };
  const std::vector<Case> cases = {
      {"list issues", get("/api/issues")},
      {"one issue", get(issue_path)},
      {"list actions", get("/api/actions")},
      {"one action", get("/api/actions/" + std::to_string(action.id()))},
      {"the C reproducer (a file route)", get(repro_path)},
      {"a note", post(issue_path + "/notes", json{{"text", "seen"}})},
      {"a replay", post(issue_path + "/replay", json{{"runs", 1}})},
      {"campaigns", get("/api/campaigns")},
      {"an export (a file route)", get("/api/campaigns/1/export?format=kcidb")},
      {"a schedule",
       post("/api/schedules",
            json{{"name", "n"},
                 {"cron", "0 2 * * *"},
                 {"campaign", {{"scenarios", {"setattr-lookup"}}, {"filesystems", {"tmpfs"}}}}})},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.what);
    EXPECT_EQ(c.a.status, 503) << c.a.body;
    EXPECT_NE(c.a.error.find("database unavailable"), std::string::npos) << c.a.body;
  }
  pg_->start(*dir_ / "pg");
  EXPECT_EQ(get(issue_path).status, 200) << "answers again once the database is back";
}

TEST_F(ErrorsApiTest, ATriagePreconditionIsAConflictAndUnknownIdsAreNotFound) {
  const int64_t id = issue();
  const std::string replay = "/api/issues/" + std::to_string(id) + "/replay";
  EXPECT_EQ(post(replay, json{{"runs", 2}}).status, 200);
  const Answer again = post(replay, json{{"runs", 2}});
  EXPECT_EQ(again.status, 409) << again.body;
  EXPECT_NE(again.error.find("already has a running replay"), std::string::npos) << again.body;

  const Answer no_issue = post("/api/issues/999999/replay", json::object());
  EXPECT_EQ(no_issue.status, 404) << no_issue.body;
  const Answer no_action = get("/api/actions/999999/reproducer.c");
  EXPECT_EQ(no_action.status, 404) << no_action.body;
  EXPECT_NE(no_action.error.find("999999"), std::string::npos) << no_action.body;
  const Answer bad_page = get("/api/issues?page=OFFSET%2010");
  EXPECT_EQ(bad_page.status, 400) << bad_page.body;
  const Answer bad_status =
      post("/api/issues/" + std::to_string(id) + "/status", json{{"status", "closed"}});
  EXPECT_EQ(bad_status.status, 400) << bad_status.body;
}

TEST_F(ErrorsApiTest, SchedulesOverHttpGoThroughTheUseCases) {
  const json campaign{{"scenarios", {"setattr-lookup"}}, {"filesystems", {"tmpfs"}}};
  Answer a =
      post("/api/schedules", json{{"name", ""}, {"cron", "0 2 * * *"}, {"campaign", campaign}});
  EXPECT_EQ(a.status, 400);
  EXPECT_EQ(a.error, "schedule name is empty");
  // As over gRPC, the name is capped.
  a = post("/api/schedules",
           json{{"name", std::string(300, 'n')}, {"cron", "0 2 * * *"}, {"campaign", campaign}});
  EXPECT_EQ(a.status, 400);
  EXPECT_NE(a.error.find("schedule name"), std::string::npos) << a.body;
  a = post("/api/schedules", json{{"name", "n"}, {"cron", "0 25 * * *"}, {"campaign", campaign}});
  EXPECT_EQ(a.status, 400) << a.body;
  a = post("/api/schedules", json{{"name", "n"}, {"cron", "0 2 * * *"}});
  EXPECT_EQ(a.status, 400);
  EXPECT_EQ(a.error, "\"campaign\" is missing");
  EXPECT_TRUE(store_->list_schedules().empty());

  a = post("/api/schedules",
           json{{"name", "nightly"}, {"cron", "0 2 * * *"}, {"campaign", campaign}});
  ASSERT_EQ(a.status, 200) << a.body;
  const int64_t id = std::stoll(json::parse(a.body)["id"].get<std::string>());
  a = post("/api/schedules/" + std::to_string(id + 1000) + "/enabled", json{{"enabled", false}});
  EXPECT_EQ(a.status, 404);
  EXPECT_EQ(a.error, "no schedule \"" + std::to_string(id + 1000) + "\"");
  a = post("/api/schedules/" + std::to_string(id) + "/enabled", json{{"enabled", false}});
  ASSERT_EQ(a.status, 200) << a.body;
  EXPECT_FALSE(store_->list_schedules().at(0).enabled());
  a = get("/api/schedules");
  ASSERT_EQ(a.status, 200);
  EXPECT_EQ(json::parse(a.body)["schedules"].size(), 1u);
  a = get("/api/campaigns/4242");
  EXPECT_EQ(a.status, 404);
  EXPECT_EQ(a.error, "no campaign \"4242\"");

  // The campaign is read by protobuf's JSON mapping, the spelling every
  // answer prints: a Duration, enum names, int64 parameters.
  json typed = campaign;
  typed["duration"] = "1.5s";
  typed["pin"] = "CPU_PINNING_ON";
  typed["params"] = {{"depth", 3}};
  a = post("/api/schedules", json{{"name", "typed"}, {"cron", "0 3 * * *"}, {"campaign", typed}});
  ASSERT_EQ(a.status, 200) << a.body;
  const json stored = json::parse(a.body)["campaign"];
  EXPECT_EQ(stored["duration"], "1.500s") << a.body;
  EXPECT_EQ(stored["pin"], "CPU_PINNING_ON") << a.body;
  EXPECT_EQ(stored["params"]["depth"], "3") << a.body;
  // The old hand-written spelling is a field the message does not have.
  json old = campaign;
  old["duration_s"] = 2;
  a = post("/api/schedules", json{{"name", "old"}, {"cron", "0 3 * * *"}, {"campaign", old}});
  EXPECT_EQ(a.status, 400) << a.body;
  EXPECT_NE(a.error.find("bad campaign"), std::string::npos) << a.body;
  EXPECT_NE(a.error.find("duration_s"), std::string::npos) << a.body;
  a = post("/api/schedules", json{{"name", "n"}, {"cron", "0 3 * * *"}, {"campaign", "tmpfs"}});
  EXPECT_EQ(a.status, 400) << a.body;
  EXPECT_EQ(store_->list_schedules().size(), 2u);
}

}  // namespace
}  // namespace leapfrog::coord
