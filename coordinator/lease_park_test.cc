// A long-polling Lease that finds no job is parked on the server without a
// thread (issue 18: a thousand agents waiting must not cost a thousand
// threads). Real gRPC over loopback and a real embedded PostgreSQL; the
// agents' calls use gRPC's callback client, so they add no thread either.
#include <dirent.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <condition_variable>
#include <latch>
#include <memory>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "common/proto_time.h"
#include "coordinator/clock.h"
#include "coordinator/pg/test_postgres.h"
#include "coordinator/server.h"
#include "coordinator/store/pg_store.h"
#include "leapfrog/v1/agent.grpc.pb.h"
#include "leapfrog/v1/control.grpc.pb.h"

namespace leapfrog::coord {
namespace {

using namespace std::chrono;
using namespace std::chrono_literals;

const std::string kToken = "park-token-51c2";
constexpr int kAgents = 200;        // the paced lease bench's fleet
constexpr int kThreadSlack = 32;    // gRPC's own pools may grow a little
constexpr auto kRpcDeadline = 60s;  // a safety net, never an expectation
constexpr Duration kLongPoll = 5s;  // manual time: never runs out while the clock stands

// Threads of this process now.
int threads_now() {
  DIR* dir = opendir("/proc/self/task");
  if (dir == nullptr) throw std::runtime_error("cannot open /proc/self/task");
  int n = 0;
  while (const dirent* e = readdir(dir))
    if (e->d_name[0] != '.') ++n;
  closedir(dir);
  return n;
}

// Polls `pred` every few milliseconds until it holds or `timeout` passes.
template <class Pred>
bool poll_until(Pred pred, std::chrono::steady_clock::duration timeout) {
  const auto deadline = steady_clock::now() + timeout;
  while (!pred()) {
    if (steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(5ms);
  }
  return true;
}

class LeaseParkTest : public testing::PostgresSuite<LeaseParkTest> {
 protected:
  void SetUp() override {
    store_ = std::make_unique<PgStore>(pg_->url(fresh_database("park")));
    ServerOptions opts;
    opts.token = kToken;
    opts.maintenance_every = 50ms;
    opts.expire_grace = Duration(0);
    server_ = std::make_unique<CoordinatorServer>(*store_, clock_, opts);
    auto channel = grpc::CreateChannel(server_->address(), grpc::InsecureChannelCredentials());
    agent_ = v1::AgentService::NewStub(channel);
    control_ = v1::ControlService::NewStub(channel);
  }
  void context(grpc::ClientContext& ctx) {
    ctx.AddMetadata("authorization", "Bearer " + kToken);
    ctx.set_deadline(system_clock::now() + kRpcDeadline);
  }
  // A host agent for tmpfs jobs: its id and secret.
  std::pair<std::string, std::string> register_agent(const std::string& name) {
    v1::RegisterRequest req;
    req.set_name(name);
    auto* c = req.mutable_capabilities();
    c->set_kernel_label("host");
    c->add_filesystems("tmpfs");
    c->set_root(true);
    c->set_cpus(2);
    c->set_host("test-host");
    grpc::ClientContext ctx;
    context(ctx);
    v1::RegisterResponse resp;
    const grpc::Status s = agent_->Register(&ctx, req, &resp);
    if (!s.ok()) throw std::runtime_error("Register: " + s.error_message());
    return {resp.agent_id(), resp.agent_secret()};
  }

  ManualClock clock_{time_point_cast<Duration>(sys_days{year{2024} / March / 10})};
  std::unique_ptr<PgStore> store_;
  std::unique_ptr<CoordinatorServer> server_;
  std::unique_ptr<v1::AgentService::Stub> agent_;
  std::unique_ptr<v1::ControlService::Stub> control_;
};

// The instrument's positive control: threads that wait are counted.
TEST(ThreadCount, SeesThreadsThatWait) {
  const int before = threads_now();
  std::latch release(1);
  std::vector<std::thread> waiting;
  for (int i = 0; i < kAgents; ++i) waiting.emplace_back([&] { release.wait(); });
  EXPECT_GE(threads_now(), before + kAgents);
  release.count_down();
  for (auto& t : waiting) t.join();
}

// 200 agents long-poll an empty queue: all 200 calls are parked on the
// server while the process gains at most a few threads (a thread per waiting
// call would add 200). A campaign of 200 jobs then answers every one of them
// with its own job, and none stays parked.
TEST_F(LeaseParkTest, ParkedLeasesHoldNoThreadAndEachGetsAJob) {
  std::vector<std::pair<std::string, std::string>> agents;
  for (int i = 0; i < kAgents; ++i) agents.push_back(register_agent("a" + std::to_string(i)));
  {  // one lease that finds nothing starts gRPC's and the store's threads
    v1::LeaseRequest req;
    req.set_agent_id(agents[0].first);
    req.set_agent_secret(agents[0].second);
    v1::LeaseResponse resp;
    grpc::ClientContext ctx;
    context(ctx);
    ASSERT_TRUE(agent_->Lease(&ctx, req, &resp).ok());
    ASSERT_FALSE(resp.has_job());
  }
  std::this_thread::sleep_for(200ms);
  const int before = threads_now();

  struct Call {
    grpc::ClientContext ctx;
    v1::LeaseRequest req;
    v1::LeaseResponse resp;
    grpc::Status status;
  };
  std::vector<std::unique_ptr<Call>> calls;
  std::mutex mu;
  std::condition_variable done_cv;
  int done = 0;
  for (const auto& [id, secret] : agents) {
    auto call = std::make_unique<Call>();
    context(call->ctx);
    call->req.set_agent_id(id);
    call->req.set_agent_secret(secret);
    *call->req.mutable_wait() = to_proto(kLongPoll);
    Call* c = call.get();
    agent_->async()->Lease(&c->ctx, &c->req, &c->resp, [&, c](grpc::Status s) {
      std::lock_guard<std::mutex> lock(mu);
      c->status = std::move(s);
      ++done;
      done_cv.notify_all();
    });
    calls.push_back(std::move(call));
  }
  ASSERT_TRUE(poll_until([&] { return server_->parked_leases() == kAgents; }, 30s))
      << server_->parked_leases() << " of " << kAgents << " calls parked";
  const int parked_threads = threads_now();
  EXPECT_LE(parked_threads - before, kThreadSlack)
      << kAgents << " parked leases took " << parked_threads - before << " threads";
  {
    std::lock_guard<std::mutex> lock(mu);
    EXPECT_EQ(done, 0) << "a call was answered with no work queued";
  }

  v1::CreateCampaignRequest create;
  auto* spec = create.mutable_spec();
  spec->set_name("park");
  spec->add_scenarios("setattr-lookup");
  spec->add_filesystems("tmpfs");
  spec->set_seeds(kAgents);
  v1::Campaign campaign;
  grpc::ClientContext cctx;
  context(cctx);
  ASSERT_TRUE(control_->CreateCampaign(&cctx, create, &campaign).ok());

  {
    std::unique_lock<std::mutex> lock(mu);
    ASSERT_TRUE(done_cv.wait_for(lock, kRpcDeadline, [&] { return done == kAgents; }))
        << done << " of " << kAgents << " parked calls answered";
  }
  std::set<int64_t> jobs;
  for (const auto& c : calls) {
    ASSERT_TRUE(c->status.ok()) << c->status.error_message();
    ASSERT_TRUE(c->resp.has_job()) << "agent " << c->req.agent_id() << " got no job";
    EXPECT_EQ(c->resp.job().campaign_id(), campaign.id());
    jobs.insert(c->resp.job().job_id());
  }
  EXPECT_EQ(jobs.size(), static_cast<size_t>(kAgents)) << "a job was leased twice";
  EXPECT_EQ(server_->parked_leases(), 0u);
}

}  // namespace
}  // namespace leapfrog::coord
