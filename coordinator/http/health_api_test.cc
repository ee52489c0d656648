// /healthz, /readyz and /metrics on the real HttpServer with a real
// PostgreSQL: /metrics is a read (its token policy), the probes never need
// the token, and /readyz follows the serving state the gRPC health service
// sets. The whole coordinator with agents: tests/metrics_e2e_test.cc.

#include <gtest/gtest.h>
#include <httplib.h>

#include <memory>
#include <string>

#include "coordinator/http/http_server.h"
#include "coordinator/metrics/coordinator_metrics.h"
#include "coordinator/metrics/promtool_check.h"
#include "coordinator/pg/test_postgres.h"
#include "coordinator/store/pg_store.h"

namespace leapfrog::coord {
namespace {

const std::string kToken = "health-test-token-93ab";

class HealthApiTest : public testing::PostgresSuite<HealthApiTest> {
 protected:
  void SetUp() override {
    store_ = std::make_unique<PgStore>(pg_->url(fresh_database("health")));
    metrics_ = std::make_unique<metrics::CoordinatorMetrics>(store_.get(), clock_);
  }
  void start(bool reads_need_token) {
    HttpOptions o;
    o.token = kToken;
    o.reads_need_token = reads_need_token;
    http_ = std::make_unique<HttpServer>(*store_, clock_, o, nullptr, metrics_.get());
  }
  httplib::Result get(const std::string& path, const std::string& token = "",
                      const std::string& host = "") {
    httplib::Client c("127.0.0.1", http_->port());
    httplib::Headers h;
    if (!token.empty()) h.emplace("Authorization", "Bearer " + token);
    if (!host.empty()) h.emplace("Host", host);
    return c.Get(path.c_str(), h);
  }

  SystemClock clock_;
  std::unique_ptr<PgStore> store_;
  std::unique_ptr<metrics::CoordinatorMetrics> metrics_;
  std::unique_ptr<HttpServer> http_;
};

TEST_F(HealthApiTest, MetricsAreAReadAndTheProbesNeedNoToken) {
  start(true);
  auto r = get("/metrics");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 401) << r->body;
  r = get("/metrics", "wrong-token");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 401);
  r = get("/metrics", kToken);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->get_header_value("Content-Type"), "text/plain; version=0.0.4; charset=utf-8");
  const auto check = metrics::testing::promtool_check(r->body);
  EXPECT_EQ(check.exit, 0) << check.output << r->body;
  EXPECT_EQ(metrics::testing::sample(r->body, "leapfrog_database_up"), 1) << r->body;
  EXPECT_EQ(metrics::testing::sample(r->body, R"(leapfrog_jobs{state="queued"})"), 0);
  EXPECT_EQ(metrics::testing::sample(r->body, R"(leapfrog_db_pool_max_connections{pool="store"})"),
            8);
  for (const char* probe : {"/healthz", "/readyz"}) {
    r = get(probe);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 200) << probe << ": " << r->body;
  }
  // The policy of every other read is unchanged.
  r = get("/api/agents");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 401);
}

TEST_F(HealthApiTest, OnLoopbackMetricsAreOpenLikeEveryRead) {
  start(false);
  auto r = get("/metrics");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200) << r->body;
}

// A kubelet dials the pod's address: the probes answer any Host, /metrics
// (data) does not.
TEST_F(HealthApiTest, ProbesAnswerAnyHostAndMetricsOnlyTheirOwn) {
  start(false);
  for (const char* probe : {"/healthz", "/readyz"}) {
    auto r = get(probe, "", "10.1.2.3:7080");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 200) << probe << ": " << r->body;
  }
  auto r = get("/metrics", "", "10.1.2.3:7080");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 421) << r->body;
  r = get("/api/agents", "", "10.1.2.3:7080");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 421);
}

TEST_F(HealthApiTest, ReadyzFollowsTheServingStateAndTheDatabase) {
  start(false);
  auto r = get("/readyz");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->body, "ready\n");
  // What CoordinatorServer::update_health sets when the database is away.
  metrics_->set_serving(false);
  r = get("/readyz");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 503);
  EXPECT_EQ(r->body, "not ready: the database does not answer\n");
  EXPECT_EQ(get("/healthz")->status, 200);
  metrics_->set_serving(true);
  EXPECT_EQ(get("/readyz")->status, 200);
  // Without metrics, /readyz asks the store, and /metrics is not there.
  http_.reset();
  HttpOptions o;
  o.token = kToken;
  http_ = std::make_unique<HttpServer>(*store_, clock_, o);
  EXPECT_EQ(get("/readyz")->status, 200);
  EXPECT_EQ(get("/metrics")->status, 404);
  pg_->stop();
  r = get("/readyz");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 503) << r->body;
  pg_->start(*dir_ / "pg");
}

}  // namespace
}  // namespace leapfrog::coord
