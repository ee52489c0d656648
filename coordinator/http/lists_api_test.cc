// The lists of the HTTP API and of the gRPC control service over a real
// PostgreSQL (issue 23, issue 18 item 11): gRPC answers past 4 MiB that reach
// a client on the coordinator's channel.

#include <gtest/gtest.h>
#include <httplib.h>

#include "coordinator/channel.h"
#include "coordinator/http/http_server.h"
#include "coordinator/pg/test_postgres.h"
#include "coordinator/server.h"
#include "coordinator/store/pg_store.h"
#include "coordinator/triage/pg_triage_store.h"

namespace leapfrog::coord {
namespace {

using namespace std::chrono_literals;

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

  std::string url_;
  SystemClock clock_;
  std::unique_ptr<PgStore> store_;
  std::unique_ptr<triage::PgTriageStore> triage_store_;
  std::unique_ptr<CoordinatorServer> grpc_;
  std::unique_ptr<HttpServer> http_;
  std::unique_ptr<httplib::Client> client_;
};

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
