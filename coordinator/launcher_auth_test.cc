// Who may end a VM agent's job (FailAgentJob, issue 18): only the VM launcher
// that claimed the agent's name before booting its VM. Every call is sent
// over gRPC to a real CoordinatorServer on a real PostgreSQL (a fresh
// database per test), and what happened to the job is read back from the
// database.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <pqxx/pqxx>
#include <string>

#include "coordinator/pg/test_postgres.h"
#include "coordinator/server.h"
#include "coordinator/store/pg_store.h"
#include "leapfrog/v1/agent.grpc.pb.h"
#include "leapfrog/v1/control.grpc.pb.h"

namespace leapfrog::coord {
namespace {

using namespace std::chrono_literals;
using ::testing::HasSubstr;

const std::string kToken = "launcher-test-token-51c2";

class LauncherAuthTest : public testing::PostgresSuite<LauncherAuthTest> {
 protected:
  void SetUp() override {
    url_ = pg_->url(fresh_database("launcher"));
    store_ = std::make_unique<PgStore>(url_);
    ServerOptions opts;
    opts.token = kToken;
    opts.maintenance_every = 5ms;
    opts.expire_grace = Duration(0);
    server_ = std::make_unique<CoordinatorServer>(*store_, clock_, opts);
    auto channel = grpc::CreateChannel(server_->address(), grpc::InsecureChannelCredentials());
    agent_ = v1::AgentService::NewStub(channel);
    control_ = v1::ControlService::NewStub(channel);
  }

  std::unique_ptr<grpc::ClientContext> ctx() {
    auto c = std::make_unique<grpc::ClientContext>();
    c->AddMetadata("authorization", "Bearer " + kToken);
    c->set_deadline(std::chrono::system_clock::now() + 30s);
    return c;
  }

  // An agent registered as `name`; returns (id, secret).
  v1::RegisterResponse register_agent(const std::string& name, const std::string& kernel, bool vm) {
    v1::RegisterRequest req;
    req.set_name(name);
    auto* caps = req.mutable_capabilities();
    caps->set_kernel_label(kernel);
    caps->add_filesystems("tmpfs");
    caps->set_root(true);
    caps->set_vm(vm);
    v1::RegisterResponse resp;
    const auto s = agent_->Register(ctx().get(), req, &resp);
    if (!s.ok()) throw std::runtime_error("Register: " + s.error_message());
    return resp;
  }

  v1::RegisterLauncherResponse register_launcher(const std::string& kernel) {
    v1::RegisterLauncherRequest req;
    req.set_name("test-launcher");
    req.set_kernel_label(kernel);
    v1::RegisterLauncherResponse resp;
    const auto s = agent_->RegisterLauncher(ctx().get(), req, &resp);
    if (!s.ok()) throw std::runtime_error("RegisterLauncher: " + s.error_message());
    return resp;
  }

  grpc::Status claim(const v1::RegisterLauncherResponse& launcher, const std::string& name) {
    v1::ClaimAgentNameRequest req;
    req.set_launcher_id(launcher.launcher_id());
    req.set_launcher_secret(launcher.launcher_secret());
    req.set_agent_name(name);
    v1::ClaimAgentNameResponse resp;
    return agent_->ClaimAgentName(ctx().get(), req, &resp);
  }

  v1::Job lease(const v1::RegisterResponse& agent) {
    v1::LeaseRequest req;
    req.set_agent_id(agent.agent_id());
    req.set_agent_secret(agent.agent_secret());
    v1::LeaseResponse resp;
    const auto s = agent_->Lease(ctx().get(), req, &resp);
    if (!s.ok() || !resp.has_job()) throw std::runtime_error("Lease: no job " + s.error_message());
    return resp.job();
  }

  int64_t campaign(const std::string& kernel, uint32_t seeds) {
    v1::CreateCampaignRequest req;
    auto* spec = req.mutable_spec();
    spec->set_name("test");
    spec->add_scenarios("setattr-lookup");
    spec->add_kernels(kernel);
    spec->add_filesystems("tmpfs");
    spec->set_seeds(seeds);
    v1::Campaign resp;
    const auto s = control_->CreateCampaign(ctx().get(), req, &resp);
    if (!s.ok()) throw std::runtime_error("CreateCampaign: " + s.error_message());
    return resp.id();
  }

  // FailAgentJob as `launcher_id`/`secret` send it ("" sends none).
  std::pair<grpc::Status, v1::FailAgentJobResponse> fail(const std::string& agent_name,
                                                         int64_t job_id, v1::Verdict verdict,
                                                         const std::string& launcher_id,
                                                         const std::string& secret) {
    v1::FailAgentJobRequest req;
    req.set_agent_name(agent_name);
    req.set_job_id(job_id);
    req.mutable_outcome()->set_verdict(verdict);
    req.mutable_outcome()->set_error("forged or real: " + v1::Verdict_Name(verdict));
    req.set_launcher_id(launcher_id);
    req.set_launcher_secret(secret);
    v1::FailAgentJobResponse resp;
    const auto s = agent_->FailAgentJob(ctx().get(), req, &resp);
    return {s, resp};
  }

  // (state, verdict or -1) of a job, from the database.
  std::pair<std::string, int> job_state(int64_t job_id) {
    pqxx::connection conn(url_);
    pqxx::work txn(conn);
    const auto r =
        txn.exec_params1("SELECT state, coalesce(verdict, -1) FROM jobs WHERE id = $1", job_id);
    return {r[0].as<std::string>(), r[1].as<int>()};
  }
  int64_t count(const std::string& sql) {
    pqxx::connection conn(url_);
    pqxx::work txn(conn);
    return txn.exec1(sql)[0].as<int64_t>();
  }

  std::string url_;
  ManualClock clock_{TimePoint(std::chrono::hours(24 * 365 * 54))};
  std::unique_ptr<PgStore> store_;
  std::unique_ptr<CoordinatorServer> server_;
  std::unique_ptr<v1::AgentService::Stub> agent_;
  std::unique_ptr<v1::ControlService::Stub> control_;
};

// The hole of issue 18: any agent holds the token, and FailAgentJob was
// trusted on it alone. Now an ordinary agent, with the token only, with its
// own agent secret, or with a launcher of its own that did not launch the
// VM, is refused, and the job runs on; the launcher that booted the VM still
// ends it (positive control).
TEST_F(LauncherAuthTest, AnAgentCannotEndAnotherAgentsJob) {
  const auto launcher = register_launcher("k");
  ASSERT_TRUE(claim(launcher, "vm-k-1").ok());
  const auto vm = register_agent("vm-k-1", "k", true);
  const auto forger = register_agent("forger", "k", false);
  campaign("k", 1);
  const v1::Job job = lease(vm);

  const auto other = register_launcher("k");
  struct Try {
    const char* what;
    std::string id, secret;
  };
  for (const Try& t : {Try{"the token only", "", ""},
                       Try{"its own agent secret", forger.agent_id(), forger.agent_secret()},
                       Try{"another launcher", other.launcher_id(), other.launcher_secret()},
                       Try{"the launcher's id with a wrong secret", launcher.launcher_id(),
                           forger.agent_secret()}}) {
    SCOPED_TRACE(t.what);
    for (const v1::Verdict v : {v1::VERDICT_KERNEL_CRASH, v1::VERDICT_HANG}) {
      const auto [status, resp] = fail("vm-k-1", job.job_id(), v, t.id, t.secret);
      EXPECT_EQ(status.error_code(), grpc::StatusCode::PERMISSION_DENIED) << status.error_message();
      EXPECT_EQ(resp.job_id(), 0);
    }
    EXPECT_EQ(job_state(job.job_id()), std::make_pair(std::string("leased"), -1))
        << "a forged FailAgentJob ended the job";
  }
  EXPECT_EQ(count("SELECT count(*) FROM outcomes"), 0);
  // Nor can the other launcher take the name over.
  const auto taken = claim(other, "vm-k-1");
  EXPECT_EQ(taken.error_code(), grpc::StatusCode::ALREADY_EXISTS) << taken.error_message();
  EXPECT_THAT(taken.error_message(), HasSubstr("vm-k-1"));

  const auto [status, resp] = fail("vm-k-1", job.job_id(), v1::VERDICT_KERNEL_CRASH,
                                   launcher.launcher_id(), launcher.launcher_secret());
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(resp.job_id(), job.job_id());
  EXPECT_EQ(resp.attempt(), job.attempt());
  EXPECT_EQ(job_state(job.job_id()),
            std::make_pair(std::string("done"), static_cast<int>(v1::VERDICT_KERNEL_CRASH)));
}

// A launcher is the token's, so any agent can register one: it still
// cannot reach the jobs of an agent that registered before its claim (the
// claim is refused), nor of an agent outside a VM that registers later under
// a name it claimed first (a guessed host name).
TEST_F(LauncherAuthTest, ALauncherCannotClaimItsWayToOtherAgentsJobs) {
  const auto rogue = register_launcher("k");
  const auto early = register_agent("vm-early", "k", true);
  const auto refused = claim(rogue, "vm-early");
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::ALREADY_EXISTS) << refused.error_message();

  ASSERT_TRUE(claim(rogue, "host-1234").ok());
  const auto host = register_agent("host-1234", "k", false);
  campaign("k", 2);
  const v1::Job early_job = lease(early);
  const v1::Job host_job = lease(host);
  for (const auto& [name, job] : {std::make_pair(std::string("vm-early"), early_job),
                                  std::make_pair(std::string("host-1234"), host_job)}) {
    SCOPED_TRACE(name);
    const auto [status, resp] = fail(name, job.job_id(), v1::VERDICT_KERNEL_CRASH,
                                     rogue.launcher_id(), rogue.launcher_secret());
    EXPECT_EQ(status.error_code(), grpc::StatusCode::PERMISSION_DENIED) << status.error_message();
    EXPECT_EQ(job_state(job.job_id()), std::make_pair(std::string("leased"), -1));
  }
  EXPECT_EQ(count("SELECT count(*) FROM outcomes"), 0);
}

// A VM that did not boot has no agent: its launcher's FailAgentJob ends one
// queued job of the launcher's kernel as BOOT_FAILURE, and nothing registers
// as the VM's agent. Without the launcher's secret, nothing ends.
TEST_F(LauncherAuthTest, ABootFailureEndsOneQueuedJobOfTheLaunchersKernel) {
  const auto launcher = register_launcher("broken");
  ASSERT_TRUE(claim(launcher, "vm-broken-0").ok());
  const int64_t c = campaign("broken", 2);
  const int64_t elsewhere = campaign("other", 1);

  const auto forged = fail("vm-broken-0", 0, v1::VERDICT_BOOT_FAILURE, "", "");
  EXPECT_EQ(forged.first.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_THAT(forged.first.error_message(), HasSubstr("launcher_secret"));
  const auto unclaimed = fail("vm-broken-9", 0, v1::VERDICT_BOOT_FAILURE, launcher.launcher_id(),
                              launcher.launcher_secret());
  EXPECT_EQ(unclaimed.first.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(count("SELECT count(*) FROM jobs WHERE state <> 'queued'"), 0);

  const auto [status, resp] = fail("vm-broken-0", 0, v1::VERDICT_BOOT_FAILURE,
                                   launcher.launcher_id(), launcher.launcher_secret());
  ASSERT_TRUE(status.ok()) << status.error_message();
  ASSERT_NE(resp.job_id(), 0);
  EXPECT_EQ(job_state(resp.job_id()),
            std::make_pair(std::string("done"), static_cast<int>(v1::VERDICT_BOOT_FAILURE)));
  const std::string cid = std::to_string(c);
  EXPECT_EQ(count("SELECT count(*) FROM jobs WHERE state = 'queued' AND campaign_id = " + cid), 1);
  EXPECT_EQ(count("SELECT count(*) FROM jobs WHERE state = 'queued' AND campaign_id = " +
                  std::to_string(elsewhere)),
            1)
      << "a job of another kernel ended";
  EXPECT_EQ(count("SELECT count(*) FROM outcomes WHERE verdict = " +
                  std::to_string(v1::VERDICT_BOOT_FAILURE)),
            1);
  EXPECT_EQ(count("SELECT count(*) FROM agents"), 0) << "the launcher posed as the VM's agent";
}

}  // namespace
}  // namespace leapfrog::coord
