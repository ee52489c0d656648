// The lists of the HTTP API and of the gRPC control service over a real
// PostgreSQL (issue 23, issue 18 item 11): filters applied before the limit,
// answers that say when more follow, pages that walk a list whole, no
// violation details in lists, and gRPC answers past 4 MiB that reach a client
// on the coordinator's channel.

#include <gtest/gtest.h>
#include <httplib.h>

#include <nlohmann/json.hpp>
#include <pqxx/pqxx>
#include <set>

#include "coordinator/channel.h"
#include "coordinator/http/http_server.h"
#include "coordinator/pg/test_postgres.h"
#include "coordinator/server.h"
#include "coordinator/store/pg_store.h"
#include "coordinator/triage/pg_triage_store.h"

namespace leapfrog::coord {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;

const std::string kToken = "lists-test-token-7d1e";

class ListsApiTest : public testing::PostgresSuite<ListsApiTest> {
 protected:
  void SetUp() override {
    url_ = pg_->url(fresh_database("lists"));
    store_ = std::make_unique<PgStore>(url_);
    triage_store_ = std::make_unique<triage::PgTriageStore>(url_);
    ServerOptions so;
    so.token = kToken;
    so.triage_store = triage_store_.get();
    grpc_ = std::make_unique<CoordinatorServer>(*store_, clock_, so);
    HttpOptions o;
    o.token = kToken;
    http_ = std::make_unique<HttpServer>(*store_, clock_, o, grpc_->triage());
    client_ = std::make_unique<httplib::Client>("127.0.0.1", http_->port());
    client_->set_read_timeout(60, 0);
  }
  void TearDown() override {
    client_.reset();
    http_.reset();
    grpc_.reset();
    triage_store_.reset();
    store_.reset();
  }

  // GET `path`: the status and the JSON body.
  std::pair<int, json> get(const std::string& path) {
    auto res = client_->Get(path.c_str());
    if (!res) throw std::runtime_error("GET " + path + " failed");
    return {res->status, json::parse(res->body)};
  }

  void sql(const std::string& statement) {
    pqxx::connection c(url_);
    pqxx::work txn(c);
    txn.exec(statement);
    txn.commit();
  }

  // A campaign of `n` jobs on `kernel`, each with an outcome of `verdict`
  // (stored as the store stores them, in one statement), oldest first.
  int64_t campaign_with_outcomes(int n, const std::string& kernel, int verdict) {
    std::vector<NewJob> jobs(static_cast<size_t>(n));
    for (auto& j : jobs) {
      j.spec.set_scenario("setattr-lookup");
      j.spec.set_fs("tmpfs");
      j.kernel_label = kernel;
    }
    v1::CampaignSpec spec;
    spec.set_name("c");
    const int64_t c = store_->create_campaign(spec, jobs, 0, clock_.now());
    sql("INSERT INTO outcomes (job_id, attempt, campaign_id, agent_id, verdict, ops,"
        " lookups_checked, offsets_checked, violation_count, race_window_hits, error, outcome,"
        " reported_at) SELECT id, 1, campaign_id, 'a', " +
        std::to_string(verdict) + ", 0, 0, 0, 0, 0, '', '', now() FROM jobs WHERE campaign_id = " +
        std::to_string(c) + " ORDER BY id");
    return c;
  }

  std::string url_;
  SystemClock clock_;
  std::unique_ptr<PgStore> store_;
  std::unique_ptr<triage::PgTriageStore> triage_store_;
  std::unique_ptr<CoordinatorServer> grpc_;
  std::unique_ptr<HttpServer> http_;
  std::unique_ptr<httplib::Client> client_;
};

TEST_F(ListsApiTest, IssueFiltersApplyBeforeTheLimitAndPagesWalkThemWhole) {
  // 1200 issues; the 30 crashes are the oldest, past any scan of the latest
  // 1000, and 3 of them were found on kernel k9.
  sql("INSERT INTO issues (signature, kind, scenario, title, status, first_seen, last_seen, count,"
      " example_job, example_attempt, example_kernel, example_spec, example_violation)"
      " SELECT 'sig-' || g, CASE WHEN g <= 30 THEN 'crash' ELSE 'violation' END, 'setattr-lookup',"
      " 'issue ' || g, 1, now() - interval '1 day', now() - (1300 - g) * interval '1 second', 1,"
      " 1, 1, 'host', '', '' FROM generate_series(1, 1200) g");
  sql("INSERT INTO issue_kernels SELECT id, 'k9', 1, now(), now() FROM issues"
      " WHERE signature IN ('sig-3', 'sig-7', 'sig-11')");

  std::set<int64_t> crashes;
  std::string page;
  int pages = 0;
  do {
    auto [status, body] =
        get("/api/issues?kind=crash&limit=12" + (page.empty() ? "" : "&page=" + page));
    ASSERT_EQ(status, 200) << body.dump();
    for (const auto& i : body["issues"]) {
      EXPECT_EQ(i["kind"], "crash");
      EXPECT_TRUE(crashes.insert(i["id"].get<int64_t>()).second) << "issue listed twice";
      EXPECT_TRUE(i["example_violation"].is_null()) << "lists carry no violation details";
    }
    page = body["next_page"].is_null() ? "" : body["next_page"].get<std::string>();
    ++pages;
  } while (!page.empty() && pages < 100);
  EXPECT_EQ(crashes.size(), 30u);
  EXPECT_EQ(pages, 3);

  auto [status, body] = get("/api/issues?kernel=k9");
  ASSERT_EQ(status, 200);
  EXPECT_EQ(body["issues"].size(), 3u);
  EXPECT_TRUE(body["next_page"].is_null());
  // A full page with more behind says so.
  std::tie(status, body) = get("/api/issues?limit=1000");
  EXPECT_EQ(body["issues"].size(), 1000u);
  EXPECT_FALSE(body["next_page"].is_null()) << "1200 issues listed as if 1000 were all";
  // A token of another list, or none at all, is the caller's mistake.
  EXPECT_EQ(get("/api/issues?page=outcomes:5").first, 400);
  EXPECT_EQ(get("/api/issues?page=%27%3B").first, 400);
  EXPECT_EQ(get("/api/issues?limit=1001").first, 400);
}

TEST_F(ListsApiTest, OutcomeListsPageAndFindAKernelsOutcomesBehindOthers) {
  // One outcome on k2, then 2100 on host: a kernel page that scanned the
  // latest 2000 and filtered them found none.
  campaign_with_outcomes(1, "k2", v1::VERDICT_VIOLATION);
  const int64_t c = campaign_with_outcomes(2100, "host", v1::VERDICT_PASS);
  v1::Kernel k;
  k.set_label("k2");
  store_->add_kernel(k, clock_.now());

  auto [status, body] = get("/api/kernels/k2");
  ASSERT_EQ(status, 200) << body.dump();
  EXPECT_EQ(body["outcomes"].size(), 1u);
  EXPECT_TRUE(body["outcomes_next_page"].is_null());

  std::tie(status, body) = get("/api/outcomes?failed=1&limit=1");
  ASSERT_EQ(status, 200);
  ASSERT_EQ(body["outcomes"].size(), 1u);
  EXPECT_EQ(body["outcomes"][0]["kernel"], "k2");
  EXPECT_TRUE(body["next_page"].is_null());

  // Every outcome of the campaign once, page by page.
  std::set<int64_t> jobs;
  std::string page;
  int pages = 0;
  do {
    std::tie(status, body) = get("/api/outcomes?campaign=" + std::to_string(c) + "&limit=1000" +
                                 (page.empty() ? "" : "&page=" + page));
    ASSERT_EQ(status, 200);
    for (const auto& o : body["outcomes"]) jobs.insert(o["job_id"].get<int64_t>());
    page = body["next_page"].is_null() ? "" : body["next_page"].get<std::string>();
    ++pages;
  } while (!page.empty() && pages < 10);
  EXPECT_EQ(jobs.size(), 2100u);
  EXPECT_EQ(pages, 3);
  EXPECT_EQ(get("/api/outcomes?limit=1001").first, 400);
  EXPECT_EQ(get("/api/outcomes?page=issues:1.2").first, 400);

  // Campaigns and a campaign's jobs page too.
  std::tie(status, body) = get("/api/campaigns?limit=1");
  ASSERT_EQ(body["campaigns"].size(), 1u);
  std::tie(status, body) =
      get("/api/campaigns?limit=1&page=" + body["next_page"].get<std::string>());
  ASSERT_EQ(body["campaigns"].size(), 1u);
  EXPECT_TRUE(body["next_page"].is_null());
  std::tie(status, body) = get("/api/campaigns/" + std::to_string(c) + "?limit=2000");
  EXPECT_EQ(body["jobs"].size(), 2000u);
  EXPECT_FALSE(body["jobs_next_page"].is_null());
  EXPECT_EQ(body["matrix"]["cells"][0]["counts"]["queued"], 2100) << body["matrix"].dump();
}

TEST_F(ListsApiTest, TheOverviewFindsTheNightlyBehindManyCampaignsMadeByHand) {
  v1::CampaignSpec spec;
  spec.set_name("nightly");
  NewJob j;
  j.spec.set_scenario("setattr-lookup");
  j.spec.set_fs("tmpfs");
  j.kernel_label = "host";
  const int64_t nightly = store_->create_campaign(spec, {j}, 3, clock_.now());
  spec.set_name("by hand");
  for (int i = 0; i < 210; ++i) store_->create_campaign(spec, {j}, 0, clock_.now());
  auto [status, body] = get("/api/overview");
  ASSERT_EQ(status, 200) << body.dump();
  EXPECT_TRUE(body["scheduled"].get<bool>()) << "the nightly was not among the latest campaigns";
  EXPECT_EQ(body["campaign"]["id"], nightly);
  EXPECT_EQ(body["trend"].size(), 1u);
  EXPECT_EQ(body["running"].size(), 211u);
  EXPECT_TRUE(body["running_next_page"].is_null());
  EXPECT_EQ(body["matrix"]["cells"][0]["counts"]["queued"], 1) << body["matrix"].dump();
}

// gRPC answers over 4 MiB (gRPC's default limit) reach a client on the
// coordinator's channel; a default channel refuses them (the control).
TEST_F(ListsApiTest, GrpcAnswersPastFourMebibytesReachTheCoordinatorsChannel) {
  v1::CampaignSpec spec;
  spec.set_name("big");
  std::vector<NewJob> jobs(8);
  for (auto& j : jobs) {
    j.spec.set_scenario("setattr-lookup");
    j.spec.set_fs("tmpfs");
    j.kernel_label = "host";
  }
  store_->create_campaign(spec, jobs, 0, clock_.now());
  v1::Capabilities caps;
  caps.set_kernel_label("host");
  caps.add_filesystems("tmpfs");
  for (int i = 0; i < 8; ++i) {
    auto job = store_->lease_job("a", caps, clock_.now(), 30s);
    ASSERT_TRUE(job);
    v1::Outcome o;
    o.set_verdict(v1::VERDICT_ERROR);
    o.set_console_tail(std::string(900 << 10, 'x'));  // within an outcome's 1 MiB
    ASSERT_EQ(store_->report_outcome("a", job->job_id(), job->attempt(), o, clock_.now()),
              ReportResult::Stored);
  }
  auto list = [&](std::shared_ptr<grpc::Channel> channel, v1::ListOutcomesResponse& resp) {
    auto stub = v1::ControlService::NewStub(channel);
    grpc::ClientContext ctx;
    ctx.AddMetadata("authorization", "Bearer " + kToken);
    ctx.set_deadline(std::chrono::system_clock::now() + 60s);
    v1::ListOutcomesRequest req;
    req.set_failed_only(true);
    return stub->ListOutcomes(&ctx, req, &resp);
  };
  v1::ListOutcomesResponse resp;
  const grpc::Status ok = list(coordinator_channel(grpc_->address()), resp);
  ASSERT_TRUE(ok.ok()) << ok.error_message();
  EXPECT_EQ(resp.outcomes_size(), 8);
  EXPECT_GT(resp.ByteSizeLong(), size_t{4} << 20);
  v1::ListOutcomesResponse refused;
  const grpc::Status s =
      list(grpc::CreateChannel(grpc_->address(), grpc::InsecureChannelCredentials()), refused);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << s.error_message();
}

}  // namespace
}  // namespace leapfrog::coord
