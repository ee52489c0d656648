// The coordinator's gRPC services end to end: a real PostgreSQL
// (EmbeddedPostgres, one cluster per test process, a fresh database per test),
// a real PgStore, a CoordinatorServer on 127.0.0.1:0 and real stubs. Time is a
// ManualClock: leases expire and schedules fire only when a test moves it. The
// server's maintenance loop runs every few milliseconds of real time, but acts
// on the manual time only; a test that needs it to have acted waits on a
// long-polling Lease, which returns exactly when a job is queued (with the
// clock stopped, its wait never runs out).

#include "coordinator/server.h"

#include <gmock/gmock.h>
#include <google/protobuf/unknown_field_set.h>
#include <grpcpp/generic/generic_stub.h>
#include <gtest/gtest.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cmath>
#include <functional>
#include <latch>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <pqxx/pqxx>
#include <set>
#include <thread>

#include "common/bounds.h"
#include "common/proto_time.h"
#include "coordinator/agent_secret.h"
#include "coordinator/channel.h"
#include "coordinator/pg/embedded_postgres.h"
#include "coordinator/pg/test_postgres.h"
#include "coordinator/schedule/cron.h"
#include "coordinator/store/pg_store.h"

namespace leapfrog::coord {
namespace {

using namespace std::chrono;
using namespace std::chrono_literals;
using ::testing::HasSubstr;

const std::string kToken = "test-token-7f3a";
const std::string kBearer = "Bearer " + kToken;
constexpr sys_days kDay0 = sys_days{year{2024} / March / 10};
const Duration kLease = 10s;        // ServiceConfig's default
const Duration kHeartbeat = 2s;     // ServiceConfig's default
constexpr auto kRpcDeadline = 30s;  // a safety net, never an expectation
constexpr Duration kLongPoll = 5s;  // manual time: never runs out while the clock stands

// `day` days after kDay0, at hh:mm:ss UTC.
TimePoint at(int day, hours h, minutes m = 0min, seconds s = 0s) {
  return time_point_cast<Duration>(kDay0 + days{day} + h + m + s);
}
int64_t us_of(const google::protobuf::Timestamp& ts) {
  return ts.seconds() * 1'000'000 + ts.nanos() / 1000;
}
int64_t us_of(const google::protobuf::Duration& d) {
  return d.seconds() * 1'000'000 + d.nanos() / 1000;
}
int64_t us_of(TimePoint t) {
  return t.time_since_epoch().count();
}

v1::Capabilities caps(const std::string& kernel, const std::vector<std::string>& filesystems) {
  v1::Capabilities c;
  c.set_kernel_label(kernel);
  for (const auto& fs : filesystems) c.add_filesystems(fs);
  c.set_root(true);
  c.set_cpus(2);
  c.set_host("test-host");
  return c;
}

v1::CampaignSpec campaign_spec(const std::vector<std::string>& kernels,
                               const std::vector<std::string>& filesystems, uint32_t seeds = 1,
                               uint32_t max_attempts = 0) {
  v1::CampaignSpec s;
  s.set_name("test");
  s.add_scenarios("setattr-lookup");
  for (const auto& k : kernels) s.add_kernels(k);
  for (const auto& f : filesystems) s.add_filesystems(f);
  s.set_seeds(seeds);
  s.set_max_attempts(max_attempts);
  return s;
}

v1::Outcome outcome(v1::Verdict verdict, uint64_t ops = 1234) {
  v1::Outcome o;
  o.set_verdict(verdict);
  o.set_ops(ops);
  o.set_lookups_checked(ops / 2);
  o.set_clock_source("tsc");
  return o;
}

template <class Resp>
struct Reply {
  grpc::Status status;
  Resp resp;
};

// One unary call with `authorization` as the header ("" sends none).
template <class Stub, class Req, class Resp>
Reply<Resp> call(Stub& stub, grpc::Status (Stub::*rpc)(grpc::ClientContext*, const Req&, Resp*),
                 const Req& req, const std::string& authorization = kBearer) {
  grpc::ClientContext ctx;
  if (!authorization.empty()) ctx.AddMetadata("authorization", authorization);
  ctx.set_deadline(system_clock::now() + kRpcDeadline);
  Reply<Resp> r;
  r.status = (stub.*rpc)(&ctx, req, &r.resp);
  return r;
}

// Helpers that must succeed throw, which fails the test with the status.
template <class Resp>
Resp ok_or_throw(Reply<Resp> r, const char* rpc) {
  if (!r.status.ok())
    throw std::runtime_error(std::string(rpc) + " failed: code " +
                             std::to_string(r.status.error_code()) + " \"" +
                             r.status.error_message() + "\"");
  return std::move(r.resp);
}

std::string bytes_of(const grpc::ByteBuffer& buffer) {
  std::vector<grpc::Slice> slices;
  if (!buffer.Dump(&slices).ok()) throw std::runtime_error("cannot read a ByteBuffer");
  std::string out;
  for (const auto& s : slices) out.append(reinterpret_cast<const char*>(s.begin()), s.size());
  return out;
}
grpc::ByteBuffer buffer_of(const std::string& bytes) {
  grpc::Slice slice(bytes);
  return grpc::ByteBuffer(&slice, 1);
}

// A completion queue for one generic call; drained on destruction.
class Queue {
 public:
  ~Queue() {
    cq_.Shutdown();
    void* tag;
    bool ok;
    while (cq_.Next(&tag, &ok)) {
    }
  }
  grpc::CompletionQueue* get() { return &cq_; }
  // Waits for the operation tagged `tag`; its success.
  bool await(intptr_t tag) {
    void* got = nullptr;
    bool ok = false;
    if (!cq_.Next(&got, &ok)) return false;
    EXPECT_EQ(reinterpret_cast<intptr_t>(got), tag);
    return ok;
  }

 private:
  grpc::CompletionQueue cq_;
};
void* tag(intptr_t t) {
  return reinterpret_cast<void*>(t);
}

// Polls `pred` every few milliseconds until it holds or `timeout` passes.
template <class Pred>
bool poll_until(Pred pred, Duration timeout) {
  const auto deadline = steady_clock::now() + timeout;
  while (!pred()) {
    if (steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(5ms);
  }
  return true;
}

// The status grpc.health.v1.Health/Check answers for "" (1 SERVING, 2
// NOT_SERVING), or -1 when the call fails.
int health_of(const std::shared_ptr<grpc::Channel>& channel) {
  grpc::GenericStub stub(channel);
  Queue cq;
  grpc::ClientContext ctx;
  ctx.set_deadline(system_clock::now() + kRpcDeadline);
  auto rpc = stub.PrepareUnaryCall(&ctx, "/grpc.health.v1.Health/Check", buffer_of(""), cq.get());
  rpc->StartCall();
  grpc::ByteBuffer response;
  grpc::Status status;
  rpc->Finish(&response, &status, tag(1));
  if (!cq.await(1) || !status.ok()) return -1;
  google::protobuf::UnknownFieldSet fields;
  if (!fields.ParseFromString(bytes_of(response))) return -1;
  for (int i = 0; i < fields.field_count(); ++i)
    if (fields.field(i).number() == 1) return static_cast<int>(fields.field(i).varint());
  return 0;  // UNKNOWN, the default
}

// The length-delimited fields numbered `number` of a serialized message.
std::vector<std::string> fields_of(const std::string& message, int number) {
  google::protobuf::UnknownFieldSet set;
  if (!set.ParseFromString(message)) throw std::runtime_error("response does not parse");
  std::vector<std::string> out;
  for (int i = 0; i < set.field_count(); ++i) {
    const auto& f = set.field(i);
    if (f.number() == number && f.type() == google::protobuf::UnknownField::TYPE_LENGTH_DELIMITED)
      out.push_back(f.length_delimited());
  }
  return out;
}

class CoordinatorServerTest : public testing::PostgresSuite<CoordinatorServerTest> {
 protected:
  void SetUp() override {
    url_ = pg_->url(fresh_database("server"));
    store_ = std::make_unique<PgStore>(url_);
    server_ = start_server(*store_);
    agent_ = v1::AgentService::NewStub(channel(*server_));
    control_ = v1::ControlService::NewStub(channel(*server_));
  }

  // No grace after the start unless a test asks for one (ServerOptions::expire_grace).
  std::unique_ptr<CoordinatorServer> start_server(Store& store,
                                                  std::optional<Duration> grace = Duration(0)) {
    ServerOptions opts;
    opts.token = kToken;
    opts.maintenance_every = 5ms;
    opts.expire_grace = grace;
    return std::make_unique<CoordinatorServer>(store, clock_, opts);
  }
  int health_status() { return health_of(channel(*server_)); }
  static std::shared_ptr<grpc::Channel> channel(const CoordinatorServer& server) {
    return grpc::CreateChannel(server.address(), grpc::InsecureChannelCredentials());
  }

  // ---- agent calls ----
  std::string register_agent(const std::string& name, const v1::Capabilities& c,
                             v1::AgentService::Stub* stub = nullptr) {
    v1::RegisterRequest req;
    req.set_name(name);
    *req.mutable_capabilities() = c;
    auto resp = ok_or_throw(call(stub ? *stub : *agent_, &v1::AgentService::Stub::Register, req),
                            "Register");
    std::lock_guard<std::mutex> lock(secrets_mu_);
    secrets_[resp.agent_id()] = resp.agent_secret();
    return resp.agent_id();
  }
  // The agent's latest secret, as a real agent keeps it ("" if unknown).
  std::string secret(const std::string& agent) {
    std::lock_guard<std::mutex> lock(secrets_mu_);
    auto it = secrets_.find(agent);
    return it == secrets_.end() ? "" : it->second;
  }
  // The secret (job, attempt) was leased with, else the agent's latest.
  std::string lease_secret(const std::string& agent, int64_t job_id, uint32_t attempt) {
    {
      std::lock_guard<std::mutex> lock(secrets_mu_);
      auto it = lease_secrets_.find({job_id, attempt});
      if (it != lease_secrets_.end()) return it->second;
    }
    return secret(agent);
  }
  Reply<v1::LeaseResponse> try_lease(const std::string& agent, Duration wait = 0s,
                                     v1::AgentService::Stub* stub = nullptr) {
    v1::LeaseRequest req;
    req.set_agent_id(agent);
    req.set_agent_secret(secret(agent));
    *req.mutable_wait() = to_proto(wait);
    auto r = call(stub ? *stub : *agent_, &v1::AgentService::Stub::Lease, req);
    if (r.resp.has_job()) {
      std::lock_guard<std::mutex> lock(secrets_mu_);
      lease_secrets_[{r.resp.job().job_id(), r.resp.job().attempt()}] = req.agent_secret();
    }
    return r;
  }
  // A job, or nullopt when none matched (within `wait` of manual time).
  std::optional<v1::Job> lease(const std::string& agent, Duration wait = 0s,
                               v1::AgentService::Stub* stub = nullptr) {
    auto resp = ok_or_throw(try_lease(agent, wait, stub), "Lease");
    if (!resp.has_job()) return std::nullopt;
    return resp.job();
  }
  // Waits (on real time, bounded by the RPC deadline) until a job is queued for `agent`.
  v1::Job lease_when_queued(const std::string& agent) {
    auto job = lease(agent, kLongPoll);
    if (!job) throw std::runtime_error("long-polling Lease returned no job");
    return *job;
  }
  Reply<v1::HeartbeatResponse> heartbeat(const std::string& agent, int64_t job_id,
                                         uint32_t attempt) {
    v1::HeartbeatRequest req;
    req.set_agent_id(agent);
    req.set_agent_secret(lease_secret(agent, job_id, attempt));
    req.set_job_id(job_id);
    req.set_attempt(attempt);
    return call(*agent_, &v1::AgentService::Stub::Heartbeat, req);
  }
  Reply<v1::ReportOutcomeResponse> report(const std::string& agent, int64_t job_id,
                                          uint32_t attempt, const v1::Outcome& o) {
    v1::ReportOutcomeRequest req;
    req.set_agent_id(agent);
    req.set_agent_secret(lease_secret(agent, job_id, attempt));
    req.set_job_id(job_id);
    req.set_attempt(attempt);
    *req.mutable_outcome() = o;
    return call(*agent_, &v1::AgentService::Stub::ReportOutcome, req);
  }
  Reply<v1::ReleaseJobResponse> release(const std::string& agent, int64_t job_id,
                                        uint32_t attempt) {
    v1::ReleaseJobRequest req;
    req.set_agent_id(agent);
    req.set_agent_secret(lease_secret(agent, job_id, attempt));
    req.set_job_id(job_id);
    req.set_attempt(attempt);
    req.set_reason("test");
    return call(*agent_, &v1::AgentService::Stub::ReleaseJob, req);
  }

  // ---- control calls ----
  Reply<v1::Campaign> try_create_campaign(const v1::CampaignSpec& spec) {
    v1::CreateCampaignRequest req;
    *req.mutable_spec() = spec;
    return call(*control_, &v1::ControlService::Stub::CreateCampaign, req);
  }
  v1::Campaign create_campaign(const v1::CampaignSpec& spec) {
    return ok_or_throw(try_create_campaign(spec), "CreateCampaign");
  }
  Reply<v1::Campaign> try_get_campaign(int64_t id) {
    v1::GetCampaignRequest req;
    req.set_id(id);
    return call(*control_, &v1::ControlService::Stub::GetCampaign, req);
  }
  v1::Campaign get_campaign(int64_t id) { return ok_or_throw(try_get_campaign(id), "GetCampaign"); }
  Reply<v1::ListJobsResponse> try_list_jobs(int64_t campaign) {
    v1::ListJobsRequest req;
    req.set_campaign_id(campaign);
    return call(*control_, &v1::ControlService::Stub::ListJobs, req);
  }
  v1::JobInfo job_info(int64_t campaign, int64_t job_id) {
    const auto resp = ok_or_throw(try_list_jobs(campaign), "ListJobs");
    for (const auto& j : resp.jobs())
      if (j.job_id() == job_id) return j;
    throw std::runtime_error("ListJobs lacks job " + std::to_string(job_id));
  }
  std::vector<v1::OutcomeRecord> outcomes(int64_t campaign, bool failed_only = false) {
    v1::ListOutcomesRequest req;
    req.set_campaign_id(campaign);
    req.set_failed_only(failed_only);
    auto resp =
        ok_or_throw(call(*control_, &v1::ControlService::Stub::ListOutcomes, req), "ListOutcomes");
    return {resp.outcomes().begin(), resp.outcomes().end()};
  }
  std::map<std::string, v1::AgentInfo> agents() {
    auto resp =
        ok_or_throw(call(*control_, &v1::ControlService::Stub::ListAgents, v1::ListAgentsRequest{}),
                    "ListAgents");
    std::map<std::string, v1::AgentInfo> out;
    for (const auto& a : resp.agents()) out[a.agent_id()] = a;
    return out;
  }
  // Outcome rows of a job, counted in the database itself.
  int outcome_rows(int64_t job_id) {
    pqxx::connection conn(url_);
    pqxx::work txn(conn);
    return txn.exec_params1("SELECT count(*) FROM outcomes WHERE job_id = $1", job_id)[0].as<int>();
  }

  std::string url_;
  ManualClock clock_{at(0, 1h)};
  std::unique_ptr<PgStore> store_;
  std::unique_ptr<CoordinatorServer> server_;
  std::unique_ptr<v1::AgentService::Stub> agent_;
  std::unique_ptr<v1::ControlService::Stub> control_;
  std::mutex secrets_mu_;
  std::map<std::string, std::string> secrets_;  // agent id -> its latest secret
  std::map<std::pair<int64_t, uint32_t>, std::string> lease_secrets_;
};


// ---- auth, health, reflection ----

TEST_F(CoordinatorServerTest, CallsWithoutTheTokenAreRejected) {
  v1::RegisterRequest reg;
  reg.set_name("agent");
  *reg.mutable_capabilities() = caps("host", {"tmpfs"});
  const v1::ListCampaignsRequest list;

  for (const auto& [authorization, want] : std::vector<std::pair<std::string, std::string>>{
           {"", "missing token"},
           {"Bearer wrong-token", "wrong token"},
           {"Bearer " + kToken + "x", "wrong token"},
           {"Bearer ", "wrong token"},
           {kToken, "malformed authorization header"}}) {
    SCOPED_TRACE("authorization: \"" + authorization + "\"");
    auto r = call(*agent_, &v1::AgentService::Stub::Register, reg, authorization);
    EXPECT_EQ(r.status.error_code(), grpc::StatusCode::UNAUTHENTICATED);
    EXPECT_THAT(r.status.error_message(), HasSubstr(want));
    auto c = call(*control_, &v1::ControlService::Stub::ListCampaigns, list, authorization);
    EXPECT_EQ(c.status.error_code(), grpc::StatusCode::UNAUTHENTICATED);
    EXPECT_THAT(c.status.error_message(), HasSubstr(want));
  }
  EXPECT_TRUE(store_->list_agents(clock_.now()).empty())
      << "a rejected Register must store nothing";

  // The right token passes on both services.
  EXPECT_TRUE(call(*agent_, &v1::AgentService::Stub::Register, reg).status.ok());
  EXPECT_TRUE(call(*control_, &v1::ControlService::Stub::ListCampaigns, list).status.ok());
}

TEST_F(CoordinatorServerTest, HealthServiceAnswersServing) {
  grpc::GenericStub stub(channel(*server_));
  Queue cq;
  grpc::ClientContext ctx;
  ctx.set_deadline(system_clock::now() + kRpcDeadline);
  // HealthCheckRequest{service: ""} serializes to nothing.
  auto rpc = stub.PrepareUnaryCall(&ctx, "/grpc.health.v1.Health/Check", buffer_of(""), cq.get());
  rpc->StartCall();
  grpc::ByteBuffer response;
  grpc::Status status;
  rpc->Finish(&response, &status, tag(1));
  ASSERT_TRUE(cq.await(1));
  ASSERT_TRUE(status.ok()) << status.error_code() << " " << status.error_message();

  // HealthCheckResponse{status = 1}: SERVING.
  google::protobuf::UnknownFieldSet fields;
  ASSERT_TRUE(fields.ParseFromString(bytes_of(response)));
  ASSERT_EQ(fields.field_count(), 1);
  EXPECT_EQ(fields.field(0).number(), 1);
  ASSERT_EQ(fields.field(0).type(), google::protobuf::UnknownField::TYPE_VARINT);
  EXPECT_EQ(fields.field(0).varint(), 1u);
}

TEST_F(CoordinatorServerTest, HealthIsNotServingWhileTheDatabaseIsAway) {
  EXPECT_EQ(health_status(), 1);  // SERVING
  pg_->stop();
  EXPECT_TRUE(poll_until([&] { return health_status() == 2; }, 30s))  // NOT_SERVING
      << "health stays " << health_status() << " with the database stopped";
  pg_->start(*dir_ / "pg");
  EXPECT_TRUE(poll_until([&] { return health_status() == 1; }, 30s))
      << "health stays " << health_status() << " with the database back";
}

// Agents cannot heartbeat while the database is away either: when it
// answers again, the leases that ran out meanwhile get the grace too.
TEST_F(CoordinatorServerTest, LeasesThatRanOutWhileTheDatabaseWasAwayWaitForTheGrace) {
  server_ = start_server(*store_, std::nullopt);
  agent_ = v1::AgentService::NewStub(channel(*server_));
  control_ = v1::ControlService::NewStub(channel(*server_));
  const Duration grace = kLease + kHeartbeat + kAgentMaxBackoff;
  clock_.advance(grace + 1s);  // past the start's grace
  const std::string a = register_agent("a", caps("host", {"tmpfs"}));
  const std::string b = register_agent("b", caps("host", {"tmpfs"}));
  const v1::Campaign c = create_campaign(campaign_spec({}, {"tmpfs"}));
  auto j = lease(a);
  ASSERT_TRUE(j);

  pg_->stop();
  ASSERT_TRUE(poll_until([&] { return health_status() == 2; }, 30s));
  clock_.advance(kLease + 1s);
  pg_->start(*dir_ / "pg");
  ASSERT_TRUE(poll_until([&] { return health_status() == 1; }, 30s));
  const uint64_t passes = server_->maintenance_passes();
  ASSERT_TRUE(poll_until([&] { return server_->maintenance_passes() >= passes + 3; }, 30s));
  EXPECT_FALSE(lease(b).has_value()) << "a lease expired as soon as the database was back";
  auto r = report(a, j->job_id(), j->attempt(), outcome(v1::VERDICT_PASS));
  ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  EXPECT_EQ(job_info(c.id(), j->job_id()).attempt(), 1u);
}

TEST_F(CoordinatorServerTest, ReflectionListsTheServices) {
  grpc::GenericStub stub(channel(*server_));
  Queue cq;
  grpc::ClientContext ctx;
  ctx.set_deadline(system_clock::now() + kRpcDeadline);
  auto rpc = stub.PrepareCall(
      &ctx, "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo", cq.get());
  ASSERT_NE(rpc, nullptr);
  rpc->StartCall(tag(1));
  ASSERT_TRUE(cq.await(1));
  // ServerReflectionRequest{list_services (field 7): "*"}.
  rpc->Write(buffer_of(std::string("\x3a\x01*", 3)), tag(2));
  ASSERT_TRUE(cq.await(2));
  rpc->WritesDone(tag(3));
  ASSERT_TRUE(cq.await(3));
  grpc::ByteBuffer response;
  rpc->Read(&response, tag(4));
  ASSERT_TRUE(cq.await(4)) << "no reflection response";
  grpc::Status status;
  rpc->Finish(&status, tag(5));
  ASSERT_TRUE(cq.await(5));
  ASSERT_TRUE(status.ok()) << status.error_code() << " " << status.error_message();

  // ServerReflectionResponse.list_services_response (6) -> service (1) -> name (1).
  const auto lists = fields_of(bytes_of(response), 6);
  ASSERT_EQ(lists.size(), 1u) << "no list_services_response";
  std::set<std::string> names;
  for (const auto& service : fields_of(lists[0], 1))
    for (const auto& name : fields_of(service, 1)) names.insert(name);
  EXPECT_TRUE(names.count("leapfrog.v1.AgentService")) << ::testing::PrintToString(names);
  EXPECT_TRUE(names.count("leapfrog.v1.ControlService")) << ::testing::PrintToString(names);
}

// ---- agents ----

TEST_F(CoordinatorServerTest, RegisterValidatesItsInput) {
  v1::RegisterRequest req;
  *req.mutable_capabilities() = caps("host", {"tmpfs"});
  auto r = call(*agent_, &v1::AgentService::Stub::Register, req);
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(r.status.error_message(), "agent name is empty");

  req.set_name("agent");
  req.clear_capabilities();
  r = call(*agent_, &v1::AgentService::Stub::Register, req);
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(r.status.error_message(), "capabilities are missing");

  *req.mutable_capabilities() = caps("", {"tmpfs"});
  r = call(*agent_, &v1::AgentService::Stub::Register, req);
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(r.status.error_message(), HasSubstr("kernel_label"));
  EXPECT_TRUE(store_->list_agents(clock_.now()).empty());

  *req.mutable_capabilities() = caps("host", {});
  r = call(*agent_, &v1::AgentService::Stub::Register, req);
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(r.status.error_message(), HasSubstr("filesystems"));

  *req.mutable_capabilities() = caps("host", {"tmpfs"});
  r = call(*agent_, &v1::AgentService::Stub::Register, req);
  ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  EXPECT_FALSE(r.resp.agent_id().empty());
  EXPECT_EQ(us_of(r.resp.heartbeat_interval()), kHeartbeat.count());
  EXPECT_EQ(us_of(r.resp.lease_duration()), kLease.count());
  // Idempotent on the name, and the new capabilities win.
  EXPECT_EQ(register_agent("agent", caps("host", {"ext4"})), r.resp.agent_id());
  auto all = agents();
  ASSERT_EQ(all.size(), 1u);
  EXPECT_THAT(all.begin()->second.capabilities().filesystems(), ::testing::ElementsAre("ext4"));
}

TEST_F(CoordinatorServerTest, LeaseForAnUnknownAgentIsNotFound) {
  auto r = try_lease("no-such-agent");
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_THAT(r.status.error_message(), HasSubstr("\"no-such-agent\""));
  // Known to the database but never registered with this replica: the agent
  // must register again (after a coordinator restart, say).
  const std::string id = store_->register_agent("elsewhere", caps("host", {"tmpfs"}), clock_.now());
  EXPECT_EQ(try_lease(id).status.error_code(), grpc::StatusCode::NOT_FOUND);
}

TEST_F(CoordinatorServerTest, ListAgentsTellsWhoIsOnline) {
  const std::string quiet = register_agent("quiet", caps("host", {"tmpfs"}));
  const std::string busy = register_agent("busy", caps("host", {"tmpfs"}));
  auto all = agents();
  ASSERT_EQ(all.size(), 2u);
  EXPECT_TRUE(all[quiet].online());
  EXPECT_TRUE(all[busy].online());
  EXPECT_EQ(all[quiet].name(), "quiet");

  const v1::Campaign c = create_campaign(campaign_spec({}, {"tmpfs"}));
  clock_.advance(4s);
  auto job = lease(busy);  // seen at +4 s
  ASSERT_TRUE(job.has_value());
  clock_.advance(3s);  // +7 s: online means seen within 3 heartbeats (6 s)
  all = agents();
  EXPECT_FALSE(all[quiet].online());
  EXPECT_TRUE(all[busy].online());
  EXPECT_EQ(all[busy].current_job(), job->job_id());
  EXPECT_EQ(all[quiet].current_job(), 0);
  EXPECT_EQ(us_of(all[quiet].last_seen()), us_of(at(0, 1h)));
  EXPECT_EQ(us_of(all[busy].last_seen()), us_of(at(0, 1h, 0min, 4s)));

  // A heartbeat counts as being seen.
  ASSERT_TRUE(heartbeat(busy, job->job_id(), job->attempt()).status.ok());
  clock_.advance(4s);  // +11 s; the lease was renewed at +7 s
  all = agents();
  EXPECT_FALSE(all[quiet].online());
  EXPECT_TRUE(all[busy].online());
  EXPECT_EQ(c.jobs(), 1u);
}

// ---- campaigns whose jobs no agent can run ----

TEST_F(CoordinatorServerTest, CampaignsSayWhichJobsNoAgentCanRunUntilOneCan) {
  register_agent("a", caps("host", {"tmpfs"}));
  // Served: no warning.
  const v1::Campaign served = create_campaign(campaign_spec({"host"}, {"tmpfs"}));
  EXPECT_EQ(served.warnings_size(), 0);
  EXPECT_EQ(get_campaign(served.id()).warnings_size(), 0);

  // A label nothing runs (a typo), and a file system the host agents lack.
  const v1::Campaign c = create_campaign(campaign_spec({"host", "6.1-tset"}, {"tmpfs", "ext4"}));
  EXPECT_EQ(c.jobs(), 4u) << "the jobs are still queued";
  ASSERT_EQ(c.warnings_size(), 2) << c.DebugString();
  EXPECT_THAT(c.warnings(0),
              HasSubstr("kernel \"host\": none of its agents offers file system \"ext4\""));
  EXPECT_THAT(c.warnings(1), HasSubstr("kernel \"6.1-tset\": no agent runs it"));
  EXPECT_EQ(get_campaign(c.id()).warnings_size(), 2)
      << "GetCampaign tells it while jobs are queued";

  // Agents that can run them register: the warnings go.
  register_agent("b", caps("host", {"ext4"}));
  EXPECT_EQ(get_campaign(c.id()).warnings_size(), 1);
  register_agent("vm", caps("6.1-tset", {"tmpfs", "ext4"}));
  EXPECT_EQ(get_campaign(c.id()).warnings_size(), 0);

  // All the agents of a label go quiet: the campaign says so.
  clock_.advance(3 * kHeartbeat + 1s);
  const v1::Campaign offline = get_campaign(c.id());
  ASSERT_EQ(offline.warnings_size(), 2) << offline.DebugString();
  EXPECT_THAT(offline.warnings(0), HasSubstr("are all offline"));
}

// ---- the job life cycle ----

TEST_F(CoordinatorServerTest, RegisterCampaignLeaseHeartbeatReport) {
  const std::string a = register_agent("a", caps("host", {"tmpfs", "ext4"}));
  const std::string other_kernel =
      register_agent("other-kernel", caps("5.10-other", {"tmpfs", "ext4"}));
  const std::string other_fs = register_agent("other-fs", caps("host", {"tmpfs", "xfs"}));
  const std::string d = register_agent("d", caps("6.1-test", {"ext4"}));

  const v1::Campaign c = create_campaign(campaign_spec({"host", "6.1-test"}, {"ext4"}));
  EXPECT_GT(c.id(), 0);
  EXPECT_EQ(c.jobs(), 2u);
  EXPECT_EQ(c.state(), v1::CAMPAIGN_STATE_RUNNING);
  EXPECT_EQ(c.by_state().at("queued"), 2u);
  EXPECT_EQ(c.schedule_id(), 0);
  EXPECT_EQ(c.spec().max_attempts(), 3u) << "stored normalized";

  EXPECT_FALSE(lease(other_kernel).has_value()) << "no job for kernel 5.10-other";
  EXPECT_FALSE(lease(other_fs).has_value()) << "the host job needs ext4";
  auto job = lease(a);
  ASSERT_TRUE(job.has_value());
  EXPECT_EQ(job->campaign_id(), c.id());
  EXPECT_EQ(job->kernel_label(), "host");
  EXPECT_EQ(job->spec().fs(), "ext4");
  EXPECT_EQ(job->spec().scenario(), "setattr-lookup");
  EXPECT_EQ(job->attempt(), 1u);
  EXPECT_EQ(us_of(job->lease_deadline()), us_of(clock_.now() + kLease));

  auto d_job = lease(d);
  ASSERT_TRUE(d_job.has_value());
  EXPECT_EQ(d_job->kernel_label(), "6.1-test");
  EXPECT_NE(d_job->job_id(), job->job_id());
  EXPECT_FALSE(lease(a).has_value()) << "every job is leased";

  // Heartbeats renew the lease from now.
  clock_.advance(5s);
  auto hb = heartbeat(a, job->job_id(), job->attempt());
  ASSERT_TRUE(hb.status.ok()) << hb.status.error_message();
  EXPECT_EQ(us_of(hb.resp.lease_deadline()), us_of(clock_.now() + kLease));
  ASSERT_TRUE(heartbeat(d, d_job->job_id(), d_job->attempt()).status.ok());
  clock_.advance(8s);  // past the first deadlines, before the renewed ones
  hb = heartbeat(a, job->job_id(), job->attempt());
  ASSERT_TRUE(hb.status.ok()) << hb.status.error_message();
  EXPECT_EQ(us_of(hb.resp.lease_deadline()), us_of(clock_.now() + kLease));
  v1::JobInfo info = job_info(c.id(), job->job_id());
  EXPECT_EQ(info.state(), v1::JOB_STATE_LEASED);
  EXPECT_EQ(info.agent_id(), a);
  // Someone else's heartbeat for the job is refused.
  EXPECT_EQ(heartbeat(d, job->job_id(), job->attempt()).status.error_code(),
            grpc::StatusCode::FAILED_PRECONDITION);

  auto r = report(a, job->job_id(), job->attempt(), outcome(v1::VERDICT_PASS));
  ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  EXPECT_FALSE(r.resp.duplicate());

  info = job_info(c.id(), job->job_id());
  EXPECT_EQ(info.state(), v1::JOB_STATE_DONE);
  EXPECT_EQ(info.verdict(), v1::VERDICT_PASS);
  EXPECT_EQ(info.attempt(), 1u);
  EXPECT_EQ(info.agent_id(), a);
  auto stored = outcomes(c.id());
  ASSERT_EQ(stored.size(), 1u);
  EXPECT_EQ(stored[0].job_id(), job->job_id());
  EXPECT_EQ(stored[0].attempt(), 1u);
  EXPECT_EQ(stored[0].agent_id(), a);
  EXPECT_EQ(stored[0].kernel_label(), "host");
  EXPECT_EQ(stored[0].spec().fs(), "ext4");
  EXPECT_EQ(stored[0].outcome().verdict(), v1::VERDICT_PASS);
  EXPECT_EQ(stored[0].outcome().ops(), 1234u);
  EXPECT_EQ(us_of(stored[0].reported_at()), us_of(clock_.now()));
  EXPECT_TRUE(outcomes(c.id(), /*failed_only=*/true).empty());
  v1::Campaign now = get_campaign(c.id());
  EXPECT_EQ(now.by_verdict().at("pass"), 1u);
  EXPECT_EQ(now.by_state().at("done"), 1u);
  EXPECT_EQ(now.by_state().at("leased"), 1u);
  EXPECT_EQ(now.state(), v1::CAMPAIGN_STATE_RUNNING);

  // The lease ended with the report.
  EXPECT_EQ(heartbeat(a, job->job_id(), job->attempt()).status.error_code(),
            grpc::StatusCode::FAILED_PRECONDITION);

  // A retried report (the acknowledgement was lost) is acknowledged, not stored again,
  // even when its content differs.
  r = report(a, job->job_id(), job->attempt(), outcome(v1::VERDICT_PASS));
  ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  EXPECT_TRUE(r.resp.duplicate());
  r = report(a, job->job_id(), job->attempt(), outcome(v1::VERDICT_VIOLATION, 99));
  ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  EXPECT_TRUE(r.resp.duplicate());
  stored = outcomes(c.id());
  ASSERT_EQ(stored.size(), 1u);
  EXPECT_EQ(stored[0].outcome().verdict(), v1::VERDICT_PASS);
  EXPECT_EQ(outcome_rows(job->job_id()), 1);
  EXPECT_EQ(job_info(c.id(), job->job_id()).verdict(), v1::VERDICT_PASS);

  // The other job finishes the campaign.
  ASSERT_TRUE(
      report(d, d_job->job_id(), d_job->attempt(), outcome(v1::VERDICT_VIOLATION)).status.ok());
  now = get_campaign(c.id());
  EXPECT_EQ(now.state(), v1::CAMPAIGN_STATE_DONE);
  EXPECT_EQ(now.by_verdict().at("violation"), 1u);
  EXPECT_EQ(outcomes(c.id(), /*failed_only=*/true).size(), 1u);
}

// Issue 41 §5, the values an agent sent on its own lease: each is refused
// with INVALID_ARGUMENT naming the field, nothing is stored, and the lists
// and pages that printed such rows still answer; a sound outcome then stores
// (the control).
TEST_F(CoordinatorServerTest, ReportOutcomeRefusesValuesNoReaderCanPrint) {
  const std::string a = register_agent("a", caps("host", {"tmpfs"}));
  const v1::Campaign c = create_campaign(campaign_spec({}, {"tmpfs"}));
  auto job = lease(a);
  ASSERT_TRUE(job.has_value());
  auto refused = [&](const std::function<void(v1::Outcome&)>& poison, const std::string& field) {
    v1::Outcome o = outcome(v1::VERDICT_PASS);
    poison(o);
    const auto r = report(a, job->job_id(), job->attempt(), o);
    EXPECT_EQ(r.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << field;
    EXPECT_THAT(r.status.error_message(), HasSubstr(field));
  };
  const int64_t big = int64_t{1} << 62;
  refused([&](v1::Outcome& o) { o.mutable_elapsed()->set_seconds(big); }, "outcome.elapsed");
  refused([&](v1::Outcome& o) { o.mutable_finished_at()->set_seconds(big); }, "outcome.finished_at");
  refused([](v1::Outcome& o) { o.mutable_run()->mutable_setup()->set_nanos(2'000'000'000); }, "outcome.run.setup");
  refused([](v1::Outcome& o) {
    o.mutable_elapsed()->set_seconds(5);
    o.mutable_elapsed()->set_nanos(-5);
  }, "outcome.elapsed");
  refused([](v1::Outcome& o) { o.set_violation_count(~uint64_t{0}); }, "outcome.violation_count");
  refused([](v1::Outcome& o) { o.set_ops_per_sec(std::nan("")); }, "outcome.ops_per_sec");
  refused([](v1::Outcome& o) { o.set_ops_per_sec(INFINITY); }, "outcome.ops_per_sec");
  refused([](v1::Outcome& o) { o.set_epsilon_ns(std::numeric_limits<int64_t>::min()); }, "outcome.epsilon_ns");
  refused([](v1::Outcome& o) { (*o.mutable_violations_by_kind())["stale-grant"] = ~uint64_t{0}; },
          "outcome.violations_by_kind");
  refused([](v1::Outcome& o) {
    o.set_verdict(v1::VERDICT_VIOLATION);
    o.add_violations()->set_kind(v1::VIOLATION_KIND_STALE_GRANT);
  }, "outcome.violation_count 0 is less than the 1 violations listed");
  EXPECT_EQ(outcome_rows(job->job_id()), 0);
  // The control: the same outcome, sound, stores; the lists print it.
  v1::Outcome good = outcome(v1::VERDICT_PASS);
  good.mutable_elapsed()->set_seconds(5);
  good.set_ops_per_sec(1000.5);
  good.set_epsilon_ns(-1);
  ASSERT_TRUE(report(a, job->job_id(), job->attempt(), good).status.ok());
  EXPECT_EQ(outcome_rows(job->job_id()), 1);
  EXPECT_EQ(outcomes(c.id(), /*failed_only=*/false).size(), 1u);
}

TEST_F(CoordinatorServerTest, ReportOutcomeValidatesItsInput) {
  const std::string a = register_agent("a", caps("host", {"tmpfs"}));
  const v1::Campaign c = create_campaign(campaign_spec({}, {"tmpfs"}));
  auto job = lease(a);
  ASSERT_TRUE(job.has_value());

  auto r = report(a, 0, 1, outcome(v1::VERDICT_PASS));
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  r = report(a, job->job_id(), 0, outcome(v1::VERDICT_PASS));
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  r = report(a, job->job_id(), 1, outcome(v1::VERDICT_UNSPECIFIED));
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(r.status.error_message(), HasSubstr("verdict"));
  // A verdict no reader could name, and an outcome no list could carry.
  r = report(a, job->job_id(), 1, outcome(static_cast<v1::Verdict>(99)));
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(r.status.error_message(), HasSubstr("outcome.verdict 99 is not a known verdict"));
  // A violation without a kind: what an agent from before the enum sends.
  v1::Outcome kindless = outcome(v1::VERDICT_VIOLATION);
  kindless.add_violations()->set_kind(v1::VIOLATION_KIND_STALE_GRANT);
  kindless.add_violations()->set_op("stat");
  r = report(a, job->job_id(), 1, kindless);
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(r.status.error_message(), HasSubstr("outcome.violations[1].kind 0 is not a known"));
  v1::Outcome huge = outcome(v1::VERDICT_ERROR);
  huge.set_error(std::string(10 << 20, 'e'));
  r = report(a, job->job_id(), 1, huge);
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(r.status.error_message(), HasSubstr("want at most 1048576"));
  EXPECT_LT(r.status.error_message().size(), 400u);
  // An attempt never handed out, and a job that does not exist.
  r = report(a, job->job_id(), 2, outcome(v1::VERDICT_PASS));
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(r.status.error_message(), HasSubstr("no attempt 2"));
  r = report(a, job->job_id() + 1000, 1, outcome(v1::VERDICT_PASS));
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(r.status.error_message(), HasSubstr("unknown job"));

  EXPECT_EQ(outcome_rows(job->job_id()), 0);
  EXPECT_EQ(job_info(c.id(), job->job_id()).state(), v1::JOB_STATE_LEASED);
}

TEST_F(CoordinatorServerTest, ExpiredLeaseIsLeasedAgainAndTheOldAttemptSuperseded) {
  const std::string a = register_agent("a", caps("host", {"tmpfs"}));
  const std::string b = register_agent("b", caps("host", {"tmpfs"}));
  const v1::Campaign c = create_campaign(campaign_spec({}, {"tmpfs"}));
  auto first = lease(a);
  ASSERT_TRUE(first.has_value());
  EXPECT_FALSE(lease(b).has_value());

  clock_.advance(kLease + 1s);  // a's agent went quiet
  const v1::Job second = lease_when_queued(b);
  EXPECT_EQ(second.job_id(), first->job_id());
  EXPECT_EQ(second.attempt(), 2u);
  EXPECT_EQ(us_of(second.lease_deadline()), us_of(clock_.now() + kLease));

  auto hb = heartbeat(a, first->job_id(), first->attempt());
  EXPECT_EQ(hb.status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(hb.status.error_message(), HasSubstr("no longer leased"));
  EXPECT_TRUE(heartbeat(b, second.job_id(), second.attempt()).status.ok());

  // a comes back and reports attempt 1 late.
  auto late = report(a, first->job_id(), first->attempt(), outcome(v1::VERDICT_PASS));
  EXPECT_EQ(late.status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(late.status.error_message(), HasSubstr("superseded"));
  EXPECT_EQ(outcome_rows(first->job_id()), 0);

  auto r = report(b, second.job_id(), second.attempt(), outcome(v1::VERDICT_PASS));
  ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  EXPECT_FALSE(r.resp.duplicate());
  auto stored = outcomes(c.id());
  ASSERT_EQ(stored.size(), 1u);
  EXPECT_EQ(stored[0].attempt(), 2u);
  EXPECT_EQ(stored[0].agent_id(), b);
  const v1::JobInfo info = job_info(c.id(), first->job_id());
  EXPECT_EQ(info.state(), v1::JOB_STATE_DONE);
  EXPECT_EQ(info.attempt(), 2u);
  EXPECT_EQ(info.verdict(), v1::VERDICT_PASS);
  // Still superseded after the job is done.
  EXPECT_EQ(
      report(a, first->job_id(), first->attempt(), outcome(v1::VERDICT_PASS)).status.error_code(),
      grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_EQ(outcome_rows(first->job_id()), 1);

  // A late report that found a violation is kept, as an extra outcome.
  v1::Outcome found = outcome(v1::VERDICT_VIOLATION);
  found.set_violation_count(1);
  found.add_violations()->set_kind(v1::VIOLATION_KIND_STALE_ENTRY);
  auto kept = report(a, first->job_id(), first->attempt(), found);
  ASSERT_TRUE(kept.status.ok()) << kept.status.error_message();
  EXPECT_TRUE(kept.resp.kept_superseded());
  EXPECT_EQ(outcome_rows(first->job_id()), 2);
  const auto failed = outcomes(c.id(), /*failed_only=*/true);
  ASSERT_EQ(failed.size(), 1u);
  EXPECT_TRUE(failed[0].superseded());
  EXPECT_EQ(failed[0].attempt(), 1u);
  EXPECT_EQ(job_info(c.id(), first->job_id()).verdict(), v1::VERDICT_PASS);
}

// After a start, leases past their deadline wait for the grace period: the
// agent that held one through the outage heartbeats and reports it.
TEST_F(CoordinatorServerTest, LeasesOutlivingAnOutageWaitForTheGraceAfterAStart) {
  const std::string a = register_agent("a", caps("host", {"tmpfs"}));
  const std::string b = register_agent("b", caps("host", {"tmpfs"}));
  const v1::Campaign c = create_campaign(campaign_spec({}, {"tmpfs"}, 2));
  auto j1 = lease(a);
  auto j2 = lease(a);
  ASSERT_TRUE(j1 && j2);
  // The coordinator restarts with the default grace; the outage outlasted the leases.
  server_.reset();
  clock_.advance(kLease + 1s);
  server_ = start_server(*store_, std::nullopt);
  agent_ = v1::AgentService::NewStub(channel(*server_));
  control_ = v1::ControlService::NewStub(channel(*server_));
  register_agent("a", caps("host", {"tmpfs"}));
  register_agent("b", caps("host", {"tmpfs"}));
  const uint64_t passes = server_->maintenance_passes();
  ASSERT_TRUE(poll_until([&] { return server_->maintenance_passes() >= passes + 3; }, 30s));
  EXPECT_FALSE(lease(b).has_value()) << "a lease expired before the grace ran out";
  EXPECT_TRUE(heartbeat(a, j1->job_id(), j1->attempt()).status.ok());
  auto r = report(a, j2->job_id(), j2->attempt(), outcome(v1::VERDICT_PASS));
  ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  EXPECT_EQ(job_info(c.id(), j2->job_id()).state(), v1::JOB_STATE_DONE);

  // Past the grace (lease + heartbeat + the agents' backoff), a renewed lease
  // holds, and one a no longer renews expires as usual.
  const Duration grace = kLease + kHeartbeat + kAgentMaxBackoff;
  clock_.advance(grace / 2);
  EXPECT_TRUE(heartbeat(a, j1->job_id(), j1->attempt()).status.ok());
  clock_.advance(grace / 2 + 1s);
  EXPECT_TRUE(heartbeat(a, j1->job_id(), j1->attempt()).status.ok());
  const uint64_t later = server_->maintenance_passes();
  ASSERT_TRUE(poll_until([&] { return server_->maintenance_passes() >= later + 3; }, 30s));
  EXPECT_FALSE(lease(b).has_value()) << "a renewed lease expired";
  clock_.advance(kLease + 1s);
  const v1::Job again = lease_when_queued(b);
  EXPECT_EQ(again.job_id(), j1->job_id());
  EXPECT_EQ(again.attempt(), 2u);
}

TEST_F(CoordinatorServerTest, JobEndsAsInfraFailureAfterItsLastAttempt) {
  // Two jobs of two attempts each, one per file system, and an agent for
  // each. j2 starts one round later, so it is requeued when j1's last lease
  // expires; one pass of the maintenance loop expires every lease past its
  // deadline in one transaction, so b's lease of j2 again shows that j1's
  // last expiry has been committed too.
  const std::string a = register_agent("a", caps("host", {"tmpfs"}));
  const std::string b = register_agent("b", caps("host", {"ext4"}));
  const v1::Campaign c =
      create_campaign(campaign_spec({}, {"tmpfs", "ext4"}, 1, /*max_attempts=*/2));
  auto j1 = lease(a);
  ASSERT_TRUE(j1.has_value());
  EXPECT_EQ(j1->attempt(), 1u);
  clock_.advance(kLease + 1s);
  const v1::Job j1_again = lease_when_queued(a);
  ASSERT_EQ(j1_again.job_id(), j1->job_id());
  EXPECT_EQ(j1_again.attempt(), 2u);
  auto j2 = lease(b);
  ASSERT_TRUE(j2.has_value());
  EXPECT_NE(j2->job_id(), j1->job_id());
  EXPECT_EQ(j2->attempt(), 1u);

  clock_.advance(kLease + 1s);
  const v1::Job j2_again = lease_when_queued(b);
  EXPECT_EQ(j2_again.job_id(), j2->job_id());
  EXPECT_EQ(j2_again.attempt(), 2u);

  const v1::JobInfo info = job_info(c.id(), j1->job_id());
  EXPECT_EQ(info.state(), v1::JOB_STATE_DONE);
  EXPECT_EQ(info.verdict(), v1::VERDICT_INFRA_FAILURE);
  EXPECT_EQ(info.attempt(), 2u);
  EXPECT_THAT(info.reason(), HasSubstr("lease expired after 2 attempts"));
  EXPECT_THAT(info.reason(), HasSubstr(a));
  v1::Campaign now = get_campaign(c.id());
  EXPECT_EQ(now.by_verdict().at("infra-failure"), 1u);
  EXPECT_EQ(now.by_state().at("done"), 1u);
  EXPECT_EQ(now.by_state().at("leased"), 1u);
  EXPECT_EQ(now.state(), v1::CAMPAIGN_STATE_RUNNING);
  EXPECT_FALSE(lease(a).has_value()) << "a job past its last attempt is never leased again";
  EXPECT_EQ(heartbeat(a, j1->job_id(), 2).status.error_code(),
            grpc::StatusCode::FAILED_PRECONDITION);

  ASSERT_TRUE(
      report(b, j2_again.job_id(), j2_again.attempt(), outcome(v1::VERDICT_PASS)).status.ok());
  now = get_campaign(c.id());
  EXPECT_EQ(now.state(), v1::CAMPAIGN_STATE_DONE);
  EXPECT_EQ(now.by_verdict().at("infra-failure"), 1u);
  EXPECT_EQ(now.by_verdict().at("pass"), 1u);

  // a was slow, not dead: its report of the last attempt replaces the
  // infrastructure failure, so nothing it measured is lost.
  auto late = report(a, j1_again.job_id(), j1_again.attempt(), outcome(v1::VERDICT_VIOLATION));
  ASSERT_TRUE(late.status.ok()) << late.status.error_message();
  EXPECT_FALSE(late.resp.duplicate());
  const v1::JobInfo replaced = job_info(c.id(), j1->job_id());
  EXPECT_EQ(replaced.verdict(), v1::VERDICT_VIOLATION);
  EXPECT_EQ(replaced.reason(), "");
  now = get_campaign(c.id());
  EXPECT_EQ(now.by_verdict().count("infra-failure"), 0u);
  EXPECT_EQ(now.by_verdict().at("violation"), 1u);
  EXPECT_EQ(outcome_rows(j1->job_id()), 1);
}

TEST_F(CoordinatorServerTest, ReleaseJobRequeuesWithoutSpendingAnAttempt) {
  const std::string a = register_agent("a", caps("host", {"tmpfs"}));
  const std::string b = register_agent("b", caps("host", {"tmpfs"}));
  const v1::Campaign c = create_campaign(campaign_spec({}, {"tmpfs"}, 1, /*max_attempts=*/2));
  auto first = lease(a);
  ASSERT_TRUE(first.has_value());

  // Only the holder of the lease can give it back: another agent, with its
  // own secret, is refused and changes nothing.
  const auto refused = release(b, first->job_id(), first->attempt());
  EXPECT_EQ(refused.status.error_code(), grpc::StatusCode::PERMISSION_DENIED) << refused.status.error_message();
  EXPECT_THAT(refused.status.error_message(), HasSubstr("is not leased to agent"));
  v1::JobInfo info = job_info(c.id(), first->job_id());
  EXPECT_EQ(info.state(), v1::JOB_STATE_LEASED);
  EXPECT_EQ(info.agent_id(), a);

  ASSERT_TRUE(release(a, first->job_id(), first->attempt()).status.ok());
  info = job_info(c.id(), first->job_id());
  EXPECT_EQ(info.state(), v1::JOB_STATE_QUEUED);
  EXPECT_EQ(info.agent_id(), "");
  EXPECT_EQ(heartbeat(a, first->job_id(), first->attempt()).status.error_code(),
            grpc::StatusCode::FAILED_PRECONDITION);

  auto second = lease(b);  // no waiting: the job is queued at once
  ASSERT_TRUE(second.has_value());
  EXPECT_EQ(second->job_id(), first->job_id());
  EXPECT_EQ(second->attempt(), 2u);
  // This lease expires. Had the release counted, that would be the second and
  // last attempt; it is not, so the job is queued once more.
  clock_.advance(kLease + 1s);
  const v1::Job third = lease_when_queued(a);
  EXPECT_EQ(third.job_id(), first->job_id());
  EXPECT_EQ(third.attempt(), 3u);
  ASSERT_TRUE(report(a, third.job_id(), third.attempt(), outcome(v1::VERDICT_PASS)).status.ok());
  EXPECT_EQ(get_campaign(c.id()).state(), v1::CAMPAIGN_STATE_DONE);
}

TEST_F(CoordinatorServerTest, PendingLeaseGetsWorkQueuedLater) {
  const std::string a = register_agent("a", caps("host", {"tmpfs"}));
  std::optional<v1::Job> got;
  std::string error;
  std::thread waiter([&] {
    try {
      got = lease_when_queued(a);
    } catch (const std::exception& e) {
      error = e.what();
    }
  });
  const v1::Campaign c = create_campaign(campaign_spec({}, {"tmpfs"}));
  waiter.join();
  ASSERT_EQ(error, "");
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->campaign_id(), c.id());
  EXPECT_EQ(got->attempt(), 1u);
}

// A long-polling Lease whose caller went away (its VM stopped) is handed no
// job: the job queued after it stays queued for the next agent, at attempt 1,
// instead of waiting out a lease no one holds. Before, the waiting handler
// woke on the new work and leased it to the cancelled call.
TEST_F(CoordinatorServerTest, ALeaseWhoseCallerWentAwayHandsOutNoJob) {
  const std::string gone = register_agent("gone", caps("host", {"tmpfs"}));
  const std::string next = register_agent("next", caps("host", {"tmpfs"}));
  grpc::ClientContext ctx;
  ctx.AddMetadata("authorization", kBearer);
  ctx.set_deadline(system_clock::now() + kRpcDeadline);
  v1::LeaseRequest req;
  req.set_agent_id(gone);
  req.set_agent_secret(secret(gone));
  *req.mutable_wait() = to_proto(kLongPoll);
  v1::LeaseResponse resp;
  grpc::Status status;
  std::thread caller([&] { status = agent_->Lease(&ctx, req, &resp); });
  std::this_thread::sleep_for(300ms);  // the call waits on the server
  ctx.TryCancel();
  caller.join();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::CANCELLED);
  std::this_thread::sleep_for(20ms);  // the cancellation reaches the server
  const v1::Campaign c = create_campaign(campaign_spec({}, {"tmpfs"}));
  std::this_thread::sleep_for(500ms);  // the waiting handler wakes on the work
  const auto job = lease(next);
  ASSERT_TRUE(job) << "the job went to the call that was gone";
  EXPECT_EQ(job->campaign_id(), c.id());
  EXPECT_EQ(job->attempt(), 1u);
}

// ---- campaigns ----

TEST_F(CoordinatorServerTest, CreateCampaignRejectsBadInput) {
  struct Case {
    const char* what;
    v1::CampaignSpec spec;
    std::string want;
  };
  std::vector<Case> cases;
  {
    v1::CampaignSpec s = campaign_spec({}, {"tmpfs"});
    s.set_scenarios(0, "no-such-scenario");
    cases.push_back({"unknown scenario", s, "unknown scenario \"no-such-scenario\""});
  }
  {
    v1::CampaignSpec s = campaign_spec({}, {"tmpfs"});
    (*s.mutable_params())["depth"] = 100;
    cases.push_back(
        {"parameter out of limits", s, "parameter \"depth\" = 100 is out of limits, want [3, 8]"});
  }
  {
    v1::CampaignSpec s = campaign_spec({}, {"tmpfs"});
    (*s.mutable_params())["no_such_param"] = 1;
    cases.push_back(
        {"unknown parameter", s, "no scenario of the campaign has a parameter \"no_such_param\""});
  }
  cases.push_back({"unknown file system", campaign_spec({}, {"tmpfs", "zfs"}),
                   "unknown file system kind 'zfs'"});
  {
    v1::CampaignSpec s = campaign_spec({}, {"tmpfs"});
    s.clear_scenarios();
    cases.push_back({"no scenarios", s, "campaign has no scenarios"});
  }
  cases.push_back({"too many jobs", campaign_spec({}, {"tmpfs"}, 100'001),
                   "campaign expands to 100001 jobs, want at most 100000"});
  // Issue 18 item 10: values past their bounds, and messages that quote only
  // the start of a value.
  {
    v1::CampaignSpec s = campaign_spec({}, {"tmpfs"});
    s.mutable_duration()->set_seconds((int64_t{1} << 55) + 1);  // * 1e9 wraps to 1.5 s
    cases.push_back({"duration past int64 nanoseconds", s, "bad duration"});
  }
  {
    v1::CampaignSpec s = campaign_spec({}, {"tmpfs"});
    s.mutable_duration()->set_seconds(-1);
    cases.push_back({"negative duration", s, "bad duration"});
  }
  {
    v1::CampaignSpec s = campaign_spec({}, {"tmpfs"});
    s.set_name(std::string(5 << 20, 'n'));
    cases.push_back({"5 MiB name", s, "(5242880 bytes) is too long, want at most 200 bytes"});
  }
  {
    v1::CampaignSpec s = campaign_spec({}, {"tmpfs"});
    s.set_scenarios(0, std::string(9000, 's'));
    cases.push_back({"8 KB scenario name", s, "scenario \"sss"});
  }
  {
    v1::CampaignSpec s = campaign_spec({}, {"tmpfs"});
    s.set_pin(static_cast<v1::CpuPinning>(99));
    cases.push_back({"unknown pin", s, "bad pin 99"});
  }
  {
    v1::CampaignSpec s = campaign_spec({}, {"tmpfs"});
    for (int i = 0; i < 65; ++i) s.add_filesystems("tmpfs");
    cases.push_back({"65 file systems", s, "campaign has 66 file systems, want at most 64"});
  }
  for (const auto& tc : cases) {
    SCOPED_TRACE(tc.what);
    auto r = try_create_campaign(tc.spec);
    EXPECT_EQ(r.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT)
        << r.status.error_message().substr(0, 300);
    EXPECT_THAT(r.status.error_message(), HasSubstr(tc.want));
    EXPECT_LT(r.status.error_message().size(), 400u) << "the message quotes the whole value";
  }
  // A schedule's name and a kernel label are capped too.
  v1::AddScheduleRequest sched;
  sched.set_name(std::string(1 << 20, 'x'));
  sched.set_cron("0 2 * * *");
  *sched.mutable_campaign() = campaign_spec({}, {"tmpfs"});
  auto sr = call(*control_, &v1::ControlService::Stub::AddSchedule, sched);
  EXPECT_EQ(sr.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(sr.status.error_message(), HasSubstr("schedule name"));
  EXPECT_LT(sr.status.error_message().size(), 400u);
  EXPECT_TRUE(store_->list_schedules().empty());
  EXPECT_TRUE(store_->list_campaigns(0).empty()) << "a rejected campaign must store nothing";
}

TEST_F(CoordinatorServerTest, UnknownCampaignIsNotFound) {
  auto g = try_get_campaign(424242);
  EXPECT_EQ(g.status.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_THAT(g.status.error_message(), HasSubstr("\"424242\""));
  auto l = try_list_jobs(424242);
  EXPECT_EQ(l.status.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_THAT(l.status.error_message(), HasSubstr("\"424242\""));

  const v1::Campaign c = create_campaign(campaign_spec({}, {"tmpfs"}, 3));
  EXPECT_EQ(get_campaign(c.id()).jobs(), 3u);
  EXPECT_EQ(ok_or_throw(try_list_jobs(c.id()), "ListJobs").jobs_size(), 3);
}

// ---- schedules ----

TEST_F(CoordinatorServerTest, Schedules) {
  v1::AddScheduleRequest add;
  add.set_name("nightly");
  add.set_cron("0 25 * * *");
  *add.mutable_campaign() = campaign_spec({}, {"tmpfs"});
  std::string parser_says;
  try {
    CronExpr::parse(add.cron());
  } catch (const CronError& e) {
    parser_says = e.what();
  }
  ASSERT_FALSE(parser_says.empty());
  auto r = call(*control_, &v1::ControlService::Stub::AddSchedule, add);
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(r.status.error_message(), parser_says);

  add.set_cron("every night");
  r = call(*control_, &v1::ControlService::Stub::AddSchedule, add);
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_FALSE(r.status.error_message().empty());

  add.set_cron("0 2 * * *");
  add.mutable_campaign()->set_scenarios(0, "no-such-scenario");
  r = call(*control_, &v1::ControlService::Stub::AddSchedule, add);
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(r.status.error_message(), HasSubstr("no-such-scenario"));
  EXPECT_TRUE(store_->list_schedules().empty());

  add.mutable_campaign()->set_scenarios(0, "setattr-lookup");
  const v1::Schedule s =
      ok_or_throw(call(*control_, &v1::ControlService::Stub::AddSchedule, add), "AddSchedule");
  EXPECT_TRUE(s.enabled());
  EXPECT_EQ(us_of(s.next_run()), us_of(at(0, 2h)));  // added at 01:00
  EXPECT_EQ(s.campaign().max_attempts(), 3u) << "stored normalized";

  v1::SetScheduleEnabledRequest set;
  set.set_id(s.id() + 1000);
  set.set_enabled(false);
  auto e = call(*control_, &v1::ControlService::Stub::SetScheduleEnabled, set);
  EXPECT_EQ(e.status.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_THAT(e.status.error_message(), HasSubstr("\"" + std::to_string(s.id() + 1000) + "\""));
  v1::RemoveScheduleRequest remove;
  remove.set_id(s.id() + 1000);
  auto rm = call(*control_, &v1::ControlService::Stub::RemoveSchedule, remove);
  EXPECT_EQ(rm.status.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_THAT(rm.status.error_message(), HasSubstr("\"" + std::to_string(s.id() + 1000) + "\""));

  set.set_id(s.id());
  EXPECT_FALSE(
      ok_or_throw(call(*control_, &v1::ControlService::Stub::SetScheduleEnabled, set), "Disable")
          .enabled());
  // Disabled for two nights; re-enabling starts from now.
  clock_.set(at(2, 1h));
  set.set_enabled(true);
  const v1::Schedule on =
      ok_or_throw(call(*control_, &v1::ControlService::Stub::SetScheduleEnabled, set), "Enable");
  EXPECT_TRUE(on.enabled());
  EXPECT_EQ(us_of(on.next_run()), us_of(at(2, 2h)));
  EXPECT_TRUE(store_->list_campaigns(0).empty()) << "nothing fired while disabled";

  // The server's maintenance loop fires it at 02:00.
  const std::string a = register_agent("a", caps("host", {"tmpfs"}));
  clock_.set(at(2, 2h, 0min, 30s));
  const v1::Job job = lease_when_queued(a);
  const v1::Campaign fired = get_campaign(job.campaign_id());
  EXPECT_EQ(fired.schedule_id(), s.id());
  EXPECT_EQ(fired.spec().name(), "test");

  remove.set_id(s.id());
  EXPECT_TRUE(call(*control_, &v1::ControlService::Stub::RemoveSchedule, remove).status.ok());
  auto list = ok_or_throw(
      call(*control_, &v1::ControlService::Stub::ListSchedules, v1::ListSchedulesRequest{}),
      "ListSchedules");
  EXPECT_EQ(list.schedules_size(), 0);
  EXPECT_EQ(call(*control_, &v1::ControlService::Stub::RemoveSchedule, remove).status.error_code(),
            grpc::StatusCode::NOT_FOUND);

  add.set_name("");
  r = call(*control_, &v1::ControlService::Stub::AddSchedule, add);
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(r.status.error_message(), "schedule name is empty");
}

// ---- replicas ----

TEST_F(CoordinatorServerTest, AgentLeasesFromAReplicaAfterRegisteringThere) {
  PgStore store_b(url_);
  auto server_b = start_server(store_b);
  auto agent_b = v1::AgentService::NewStub(channel(*server_b));
  ASSERT_NE(server_b->port(), server_->port());

  const std::string id = register_agent("roamer", caps("host", {"tmpfs"}));
  const v1::Campaign c = create_campaign(campaign_spec({}, {"tmpfs"}, 2));
  auto r = try_lease(id, 0s, agent_b.get());
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::NOT_FOUND)
      << "replica B has not met the agent";
  EXPECT_EQ(register_agent("roamer", caps("host", {"tmpfs"}), agent_b.get()), id);
  auto on_b = lease(id, 0s, agent_b.get());
  ASSERT_TRUE(on_b.has_value());
  EXPECT_EQ(on_b->campaign_id(), c.id());
  auto on_a = lease(id);
  ASSERT_TRUE(on_a.has_value());
  EXPECT_NE(on_a->job_id(), on_b->job_id());
  // A job leased through B is reported through A.
  ASSERT_TRUE(report(id, on_b->job_id(), on_b->attempt(), outcome(v1::VERDICT_PASS)).status.ok());
  EXPECT_EQ(job_info(c.id(), on_b->job_id()).state(), v1::JOB_STATE_DONE);
}

TEST_F(CoordinatorServerTest, ConcurrentLeasesFromTwoReplicasHandOutEachJobOnce) {
  PgStore store_b(url_);
  auto server_b = start_server(store_b);
  constexpr int kJobs = 100;
  constexpr int kThreadsPerReplica = 4;
  const v1::Campaign c = create_campaign(campaign_spec({}, {"tmpfs"}, kJobs));
  ASSERT_EQ(c.jobs(), static_cast<uint32_t>(kJobs));

  struct Lease {
    int64_t job_id;
    uint32_t attempt;
    std::string agent;
    std::string secret;
  };
  std::mutex mu;
  std::vector<Lease> leases;
  std::vector<std::string> errors;
  std::latch start(2 * kThreadsPerReplica);
  std::vector<std::thread> threads;
  for (int replica = 0; replica < 2; ++replica) {
    auto ch = channel(replica == 0 ? *server_ : *server_b);
    for (int t = 0; t < kThreadsPerReplica; ++t) {
      threads.emplace_back([&, ch, replica, t] {
        auto stub = v1::AgentService::NewStub(ch);
        v1::RegisterRequest reg;
        reg.set_name("agent-" + std::to_string(replica) + "-" + std::to_string(t));
        *reg.mutable_capabilities() = caps("host", {"tmpfs"});
        auto r = call(*stub, &v1::AgentService::Stub::Register, reg);
        start.arrive_and_wait();
        if (!r.status.ok()) {
          std::lock_guard<std::mutex> lock(mu);
          errors.push_back("Register: " + r.status.error_message());
          return;
        }
        v1::LeaseRequest req;
        req.set_agent_id(r.resp.agent_id());
        req.set_agent_secret(r.resp.agent_secret());
        for (;;) {
          auto l = call(*stub, &v1::AgentService::Stub::Lease, req);
          std::lock_guard<std::mutex> lock(mu);
          if (!l.status.ok()) {
            errors.push_back("Lease: " + l.status.error_message());
            return;
          }
          if (!l.resp.has_job()) return;
          leases.push_back({l.resp.job().job_id(), l.resp.job().attempt(), r.resp.agent_id(),
                            r.resp.agent_secret()});
        }
      });
    }
  }
  for (auto& t : threads) t.join();
  EXPECT_TRUE(errors.empty()) << ::testing::PrintToString(errors);

  std::map<int64_t, Lease> by_job;
  for (const auto& l : leases) {
    EXPECT_TRUE(by_job.emplace(l.job_id, l).second) << "job " << l.job_id << " handed out twice";
    EXPECT_EQ(l.attempt, 1u);
  }
  EXPECT_EQ(leases.size(), static_cast<size_t>(kJobs));
  const auto jobs = ok_or_throw(try_list_jobs(c.id()), "ListJobs");
  ASSERT_EQ(jobs.jobs_size(), kJobs);
  for (const auto& j : jobs.jobs()) {
    EXPECT_EQ(j.state(), v1::JOB_STATE_LEASED) << "job " << j.job_id();
    ASSERT_TRUE(by_job.count(j.job_id())) << "job " << j.job_id() << " was never handed out";
    EXPECT_EQ(j.agent_id(), by_job[j.job_id()].agent);
  }
  // Leases served together (group lease) each record their own caller's key.
  for (const auto& l : leases) {
    v1::HeartbeatRequest hb;
    hb.set_agent_id(l.agent);
    hb.set_job_id(l.job_id);
    hb.set_attempt(l.attempt);
    hb.set_agent_secret(l.secret);
    EXPECT_TRUE(call(*agent_, &v1::AgentService::Stub::Heartbeat, hb).status.ok())
        << "job " << l.job_id;
    const Lease& other = leases[(&l - leases.data() + 1) % leases.size()];
    if (other.secret == l.secret) continue;
    hb.set_agent_secret(other.secret);
    EXPECT_EQ(call(*agent_, &v1::AgentService::Stub::Heartbeat, hb).status.error_code(),
              grpc::StatusCode::PERMISSION_DENIED)
        << "job " << l.job_id;
  }
}

// ---- agent secrets (issue 18 item 16) ----

// Agent ids are not secret (ListAgents shows them): another token holder
// sends calls with the holder's id, with its own secret or none. Each is
// refused, the lease stays the holder's, and the holder's result is stored.
TEST_F(CoordinatorServerTest, CallsWithAnotherAgentsIdAreRefusedWithoutItsSecret) {
  const std::string a = register_agent("holder", caps("host", {"tmpfs"}));
  const std::string b = register_agent("forger", caps("host", {"tmpfs"}));
  const v1::Campaign c = create_campaign(campaign_spec({}, {"tmpfs"}));
  auto job = lease(a);
  ASSERT_TRUE(job.has_value());
  v1::Outcome forged = outcome(v1::VERDICT_VIOLATION);
  forged.set_violation_count(1);
  forged.add_violations()->set_kind(v1::VIOLATION_KIND_STALE_ENTRY);
  forged.set_error("forged");

  for (const std::string& with : {secret(b), std::string()}) {
    SCOPED_TRACE(with.empty() ? "no secret" : "the forger's own secret");
    v1::ReportOutcomeRequest rep;
    rep.set_agent_id(a);
    rep.set_agent_secret(with);
    rep.set_job_id(job->job_id());
    rep.set_attempt(job->attempt());
    *rep.mutable_outcome() = forged;
    auto r = call(*agent_, &v1::AgentService::Stub::ReportOutcome, rep);
    EXPECT_EQ(r.status.error_code(), grpc::StatusCode::PERMISSION_DENIED)
        << r.status.error_message();
    EXPECT_THAT(r.status.error_message(), HasSubstr("agent_secret"));
    EXPECT_LT(r.status.error_message().size(), 200u);

    v1::HeartbeatRequest hb;
    hb.set_agent_id(a);
    hb.set_agent_secret(with);
    hb.set_job_id(job->job_id());
    hb.set_attempt(job->attempt());
    EXPECT_EQ(call(*agent_, &v1::AgentService::Stub::Heartbeat, hb).status.error_code(),
              grpc::StatusCode::PERMISSION_DENIED);
    v1::ReleaseJobRequest rel;
    rel.set_agent_id(a);
    rel.set_agent_secret(with);
    rel.set_job_id(job->job_id());
    rel.set_attempt(job->attempt());
    EXPECT_EQ(call(*agent_, &v1::AgentService::Stub::ReleaseJob, rel).status.error_code(),
              grpc::StatusCode::PERMISSION_DENIED);
    v1::LeaseRequest lr;
    lr.set_agent_id(a);
    lr.set_agent_secret(with);
    EXPECT_EQ(call(*agent_, &v1::AgentService::Stub::Lease, lr).status.error_code(),
              grpc::StatusCode::PERMISSION_DENIED);
  }
  EXPECT_EQ(outcome_rows(job->job_id()), 0) << "a forged report was stored";
  const v1::JobInfo info = job_info(c.id(), job->job_id());
  EXPECT_EQ(info.state(), v1::JOB_STATE_LEASED) << "a forged release requeued the job";
  EXPECT_EQ(info.agent_id(), a);

  auto mine = report(a, job->job_id(), job->attempt(), outcome(v1::VERDICT_PASS));
  ASSERT_TRUE(mine.status.ok()) << mine.status.error_message();
  EXPECT_FALSE(mine.resp.duplicate()) << "the holder's result was dropped for the forged one";
  const auto stored = outcomes(c.id());
  ASSERT_EQ(stored.size(), 1u);
  EXPECT_EQ(stored[0].outcome().verdict(), v1::VERDICT_PASS);
}

// A late report of a superseded attempt is kept when it found violations
// (item 5): only from the holder of that attempt, not from whoever holds
// the job now, nor from anyone else.
TEST_F(CoordinatorServerTest, OnlyAnAttemptsHolderReportsItLate) {
  const std::string a = register_agent("a", caps("host", {"tmpfs"}));
  const std::string b = register_agent("b", caps("host", {"tmpfs"}));
  create_campaign(campaign_spec({}, {"tmpfs"}));
  auto first = lease(a);
  ASSERT_TRUE(first.has_value());
  clock_.advance(kLease + 1s);
  const v1::Job second = lease_when_queued(b);
  ASSERT_EQ(second.attempt(), 2u);
  v1::Outcome found = outcome(v1::VERDICT_VIOLATION);
  found.set_violation_count(1);
  found.add_violations()->set_kind(v1::VIOLATION_KIND_STALE_ENTRY);
  v1::ReportOutcomeRequest rep;
  rep.set_agent_id(a);
  rep.set_agent_secret(secret(b));
  rep.set_job_id(first->job_id());
  rep.set_attempt(first->attempt());
  *rep.mutable_outcome() = found;
  auto r = call(*agent_, &v1::AgentService::Stub::ReportOutcome, rep);
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::PERMISSION_DENIED) << r.status.error_message();
  EXPECT_EQ(outcome_rows(first->job_id()), 0);
  auto kept = report(a, first->job_id(), first->attempt(), found);
  ASSERT_TRUE(kept.status.ok()) << kept.status.error_message();
  EXPECT_TRUE(kept.resp.kept_superseded());
  EXPECT_EQ(outcome_rows(first->job_id()), 1);
}

// An agent registers again (a coordinator restart made it NOT_FOUND, or it
// restarted itself): its new secret leases from now on, while the lease it
// took before, and the outcome it spooled for it, keep the old one. Through
// a restarted coordinator too (nothing lost: issue 18 item 5).
TEST_F(CoordinatorServerTest, ALeaseKeepsTheSecretItWasTakenWithAcrossRegistrations) {
  const std::string a = register_agent("a", caps("host", {"tmpfs"}));
  const v1::Campaign c = create_campaign(campaign_spec({}, {"tmpfs"}, 2));
  auto job = lease(a);
  ASSERT_TRUE(job.has_value());
  const std::string old_secret = secret(a);

  server_->shutdown();
  server_ = start_server(*store_);
  agent_ = v1::AgentService::NewStub(channel(*server_));
  control_ = v1::ControlService::NewStub(channel(*server_));
  EXPECT_EQ(try_lease(a).status.error_code(), grpc::StatusCode::NOT_FOUND)
      << "the restarted coordinator has not met the agent";
  ASSERT_EQ(register_agent("a", caps("host", {"tmpfs"})), a);
  ASSERT_NE(secret(a), old_secret);

  // The old lease answers to the old secret only.
  v1::HeartbeatRequest hb;
  hb.set_agent_id(a);
  hb.set_agent_secret(secret(a));
  hb.set_job_id(job->job_id());
  hb.set_attempt(job->attempt());
  EXPECT_EQ(call(*agent_, &v1::AgentService::Stub::Heartbeat, hb).status.error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
  ASSERT_TRUE(heartbeat(a, job->job_id(), job->attempt()).status.ok());  // its lease secret
  // The old secret no longer leases.
  v1::LeaseRequest lr;
  lr.set_agent_id(a);
  lr.set_agent_secret(old_secret);
  EXPECT_EQ(call(*agent_, &v1::AgentService::Stub::Lease, lr).status.error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
  auto next = lease(a);
  ASSERT_TRUE(next.has_value());

  // The spooled report carries the secret of the registration that leased its job.
  v1::ReportOutcomeRequest spooled;
  spooled.set_agent_id(a);
  spooled.set_agent_secret(old_secret);
  spooled.set_job_id(job->job_id());
  spooled.set_attempt(job->attempt());
  *spooled.mutable_outcome() = outcome(v1::VERDICT_PASS);
  auto r = call(*agent_, &v1::AgentService::Stub::ReportOutcome, spooled);
  ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  EXPECT_FALSE(r.resp.duplicate());
  ASSERT_TRUE(report(a, next->job_id(), next->attempt(), outcome(v1::VERDICT_PASS)).status.ok());
  EXPECT_EQ(get_campaign(c.id()).state(), v1::CAMPAIGN_STATE_DONE);
}

// The database keeps only a hash of each secret.
TEST_F(CoordinatorServerTest, TheDatabaseKeepsNoAgentSecret) {
  const std::string a = register_agent("a", caps("host", {"tmpfs"}));
  create_campaign(campaign_spec({}, {"tmpfs"}));
  ASSERT_TRUE(lease(a).has_value());
  const std::string s = secret(a);
  ASSERT_EQ(s.size(), 64u);
  pqxx::connection conn(url_);
  pqxx::work txn(conn);
  const auto row = txn.exec_params1(
      "SELECT a.secret_sha256,"
      "  (SELECT replace(array_to_string(holders, ','), '-', '') FROM jobs LIMIT 1)"
      " FROM agents a WHERE a.id = $1",
      a);
  const std::string stored = row[0].as<std::string>(), holders = row[1].as<std::string>();
  EXPECT_EQ(stored, agent_key_of(s));
  EXPECT_EQ(holders, agent_key_of(s).substr(0, 32));
  EXPECT_EQ(stored.find(s.substr(0, 16)), std::string::npos);
  EXPECT_EQ(holders.find(s.substr(0, 16)), std::string::npos);
}

// ---- ReportOutcome through the callback API ----

TEST_F(CoordinatorServerTest, ReportOutcomeWithoutTheTokenIsRejected) {
  const std::string a = register_agent("a", caps("host", {"tmpfs"}));
  create_campaign(campaign_spec({}, {"tmpfs"}));
  auto job = lease(a);
  ASSERT_TRUE(job.has_value());
  v1::ReportOutcomeRequest req;
  req.set_agent_id(a);
  req.set_agent_secret(secret(a));
  req.set_job_id(job->job_id());
  req.set_attempt(job->attempt());
  *req.mutable_outcome() = outcome(v1::VERDICT_PASS);
  for (const auto& [authorization, want] : std::vector<std::pair<std::string, std::string>>{
           {"", "missing token"}, {"Bearer wrong-token", "wrong token"}, {kToken, "malformed"}}) {
    SCOPED_TRACE("authorization: \"" + authorization + "\"");
    auto r = call(*agent_, &v1::AgentService::Stub::ReportOutcome, req, authorization);
    EXPECT_EQ(r.status.error_code(), grpc::StatusCode::UNAUTHENTICATED);
    EXPECT_THAT(r.status.error_message(), HasSubstr(want));
  }
  EXPECT_EQ(outcome_rows(job->job_id()), 0) << "a rejected report was stored";
  auto r = call(*agent_, &v1::AgentService::Stub::ReportOutcome, req);
  ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  EXPECT_EQ(outcome_rows(job->job_id()), 1);
}

// The agent keeps its outcome spooled while the coordinator answers
// UNAVAILABLE, and is acknowledged once PostgreSQL is back.
TEST_F(CoordinatorServerTest, ReportOutcomeWhileTheDatabaseIsDownIsUnavailableThenStored) {
  const std::string a = register_agent("a", caps("host", {"tmpfs"}));
  const v1::Campaign c = create_campaign(campaign_spec({}, {"tmpfs"}));
  auto job = lease(a);
  ASSERT_TRUE(job.has_value());
  pg_->stop();
  auto r = report(a, job->job_id(), job->attempt(), outcome(v1::VERDICT_PASS));
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::UNAVAILABLE) << r.status.error_message();
  EXPECT_THAT(r.status.error_message(), HasSubstr("database unavailable"));
  pg_->start(*dir_ / "pg");
  r = report(a, job->job_id(), job->attempt(), outcome(v1::VERDICT_PASS));
  ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  EXPECT_FALSE(r.resp.duplicate());
  r = report(a, job->job_id(), job->attempt(), outcome(v1::VERDICT_PASS));
  ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  EXPECT_TRUE(r.resp.duplicate());
  EXPECT_EQ(outcome_rows(job->job_id()), 1);
  EXPECT_EQ(job_info(c.id(), job->job_id()).state(), v1::JOB_STATE_DONE);
}

// Many reports in flight at once (they share batches): every job reported
// twice at the same time gets one stored answer and one duplicate.
TEST_F(CoordinatorServerTest, ConcurrentReportsEachGetTheirOwnAnswer) {
  constexpr int kJobs = 40;
  const std::string a = register_agent("a", caps("host", {"tmpfs"}));
  const v1::Campaign c = create_campaign(campaign_spec({}, {"tmpfs"}, kJobs));
  std::vector<v1::Job> jobs;
  for (int i = 0; i < kJobs; ++i) {
    auto j = lease(a);
    ASSERT_TRUE(j.has_value());
    jobs.push_back(*j);
  }
  struct Call {
    grpc::ClientContext ctx;
    v1::ReportOutcomeRequest req;
    v1::ReportOutcomeResponse resp;
    grpc::Status status;
  };
  std::vector<std::unique_ptr<Call>> calls;
  for (int copy = 0; copy < 2; ++copy) {
    for (const auto& j : jobs) {
      auto call = std::make_unique<Call>();
      call->ctx.AddMetadata("authorization", kBearer);
      call->ctx.set_deadline(system_clock::now() + kRpcDeadline);
      call->req.set_agent_id(a);
      call->req.set_agent_secret(secret(a));
      call->req.set_job_id(j.job_id());
      call->req.set_attempt(j.attempt());
      *call->req.mutable_outcome() = outcome(copy ? v1::VERDICT_VIOLATION : v1::VERDICT_PASS);
      calls.push_back(std::move(call));
    }
  }
  std::latch done(static_cast<std::ptrdiff_t>(calls.size()));
  for (auto& call : calls) {
    Call* p = call.get();
    agent_->async()->ReportOutcome(&p->ctx, &p->req, &p->resp, [p, &done](grpc::Status status) {
      p->status = std::move(status);
      done.count_down();
    });
  }
  done.wait();
  std::map<int64_t, int> stored, duplicates;
  for (const auto& call : calls) {
    ASSERT_TRUE(call->status.ok()) << call->status.error_message();
    ++(call->resp.duplicate() ? duplicates : stored)[call->req.job_id()];
  }
  for (const auto& j : jobs) {
    EXPECT_EQ(stored[j.job_id()], 1) << "job " << j.job_id();
    EXPECT_EQ(duplicates[j.job_id()], 1) << "job " << j.job_id();
    EXPECT_EQ(outcome_rows(j.job_id()), 1) << "job " << j.job_id();
  }
  EXPECT_EQ(get_campaign(c.id()).state(), v1::CAMPAIGN_STATE_DONE);
}

// Retention runs from the maintenance loop: an outcome reported more than
// retain_for ago loses its agent JSON once the loop reaches it, and not before.
TEST_F(CoordinatorServerTest, MaintenanceAppliesRetentionOnceOutcomesAreOldEnough) {
  ServerOptions opts;
  opts.token = kToken;
  opts.maintenance_every = 5ms;
  opts.expire_grace = Duration(0);
  opts.retain_for = 24h * 30;
  opts.retention_every = 1ms;
  server_ = std::make_unique<CoordinatorServer>(*store_, clock_, opts);
  agent_ = v1::AgentService::NewStub(channel(*server_));
  control_ = v1::ControlService::NewStub(channel(*server_));
  const std::string a = register_agent("a", caps("host", {"tmpfs"}));
  const v1::Campaign c = create_campaign(campaign_spec({}, {"tmpfs"}));
  auto j = lease(a);
  ASSERT_TRUE(j);
  v1::Outcome o = outcome(v1::VERDICT_PASS);
  o.mutable_run()->add_notes("kept until retention");
  ASSERT_TRUE(report(a, j->job_id(), j->attempt(), o).status.ok());
  auto untrimmed = [&] {
    pqxx::connection conn(url_);
    return pqxx::work(conn).exec("SELECT count(*) FROM outcomes WHERE NOT trimmed")[0][0].as<int>();
  };
  const uint64_t passes = server_->maintenance_passes();
  ASSERT_TRUE(poll_until([&] { return server_->maintenance_passes() >= passes + 3; }, 30s));
  EXPECT_EQ(untrimmed(), 1) << "a fresh outcome was trimmed";
  clock_.advance(24h * 31);
  ASSERT_TRUE(poll_until([&] { return untrimmed() == 0; }, 30s));
  const auto stored = store_->find_outcomes({.campaign_id = c.id(), .limit = 10});
  ASSERT_EQ(stored.size(), 1u);
  EXPECT_EQ(stored[0].outcome().run().notes_size(), 0);
  EXPECT_EQ(stored[0].outcome().ops(), o.ops());
}


// ---- sizes (issue 41 §6) ----

// Issue 41 §6, what the tester sent: strings of 40 MiB in an agent's
// registration, a kernel and a launcher, and a 5 MB widen in a campaign and
// a schedule. Each is refused with INVALID_ARGUMENT naming the field and its
// size, nothing is stored, and the lists that could no longer be sent
// (RESOURCE_EXHAUSTED) answer; the same requests with sound values are
// taken (the control).
TEST_F(CoordinatorServerTest, EveryOversizedStringARequestCarriesIsRefusedNamingTheField) {
  const std::string huge(40u << 20, 'x');
  const std::string widen(5'000'000, 'w');
  auto refused = [](const grpc::Status& s, const std::string& field, size_t bytes) {
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << field << ": " << s.error_message();
    EXPECT_THAT(s.error_message(), HasSubstr(field));
    EXPECT_THAT(s.error_message(), HasSubstr("(" + std::to_string(bytes) + " bytes) is too long"));
    EXPECT_LT(s.error_message().size(), 400u) << "the message quotes only the value's start";
  };

  for (auto poison : std::vector<std::pair<std::string, std::function<void(v1::Capabilities&)>>>{
           {"capabilities.host", [&](v1::Capabilities& c) { c.set_host(huge); }},
           {"capabilities.uname", [&](v1::Capabilities& c) { c.set_uname(huge); }},
           {"capabilities.filesystems[1]", [&](v1::Capabilities& c) { c.add_filesystems(huge); }}}) {
    v1::RegisterRequest req;
    req.set_name("big");
    *req.mutable_capabilities() = caps("host", {"tmpfs"});
    poison.second(*req.mutable_capabilities());
    refused(call(*agent_, &v1::AgentService::Stub::Register, req).status, poison.first, huge.size());
  }
  v1::RegisterLauncherRequest launcher;
  launcher.set_name("l");
  launcher.set_kernel_label(huge);
  refused(call(*agent_, &v1::AgentService::Stub::RegisterLauncher, launcher).status, "kernel_label",
          huge.size());

  for (auto poison : std::vector<std::pair<std::string, std::function<void(v1::Kernel&)>>>{
           {"kernel.version", [&](v1::Kernel& k) { k.set_version(huge); }},
           {"kernel.cmdline", [&](v1::Kernel& k) { k.set_cmdline(huge); }},
           {"kernel.build_log_tail", [&](v1::Kernel& k) { k.set_build_log_tail(huge); }},
           {"kernel.patches[0].subject", [&](v1::Kernel& k) { k.add_patches()->set_subject(huge); }}}) {
    v1::AddKernelRequest req;
    req.mutable_kernel()->set_label("6.1-big");
    poison.second(*req.mutable_kernel());
    refused(call(*control_, &v1::ControlService::Stub::AddKernel, req).status, poison.first,
            huge.size());
  }

  v1::CampaignSpec spec = campaign_spec({}, {"tmpfs"});
  spec.set_widen(widen);
  refused(try_create_campaign(spec).status, "widen", widen.size());
  v1::AddScheduleRequest schedule;
  schedule.set_name("nightly");
  schedule.set_cron("0 3 * * *");
  *schedule.mutable_campaign() = spec;
  refused(call(*control_, &v1::ControlService::Stub::AddSchedule, schedule).status, "widen",
          widen.size());
  v1::ListOutcomesRequest list;
  list.set_scenario(huge);
  refused(call(*control_, &v1::ControlService::Stub::ListOutcomes, list).status, "scenario",
          huge.size());

  // The control: the same requests, sound, are taken, and every list answers.
  const std::string a = register_agent("a", caps("host", {"tmpfs"}));
  v1::AddKernelRequest kernel;
  kernel.mutable_kernel()->set_label("6.1-test");
  kernel.mutable_kernel()->set_version("6.1.0-18-amd64");
  ASSERT_TRUE(call(*control_, &v1::ControlService::Stub::AddKernel, kernel).status.ok());
  spec.set_widen("off");
  const v1::Campaign c = create_campaign(spec);
  auto job = lease(a);
  ASSERT_TRUE(job.has_value());
  v1::ReleaseJobRequest release;
  release.set_agent_id(a);
  release.set_agent_secret(secret(a));
  release.set_job_id(job->job_id());
  release.set_attempt(job->attempt());
  release.set_reason(huge);
  refused(call(*agent_, &v1::AgentService::Stub::ReleaseJob, release).status, "reason", huge.size());
  EXPECT_EQ(job_info(c.id(), job->job_id()).state(), v1::JOB_STATE_LEASED) << "nothing released";

  const auto agents_now = agents();
  ASSERT_EQ(agents_now.size(), 1u) << "no refused registration was stored";
  EXPECT_EQ(agents_now.begin()->second.capabilities().host(), "test-host");
  const auto kernels =
      call(*control_, &v1::ControlService::Stub::ListKernels, v1::ListKernelsRequest{});
  ASSERT_TRUE(kernels.status.ok()) << kernels.status.error_message();
  ASSERT_EQ(kernels.resp.kernels_size(), 1);
  EXPECT_EQ(kernels.resp.kernels(0).version(), "6.1.0-18-amd64");
  EXPECT_EQ(get_campaign(c.id()).spec().widen(), "off");
}

// Issue 41 §6: seventy outcomes of nearly kMaxOutcomeBytes each, every one
// within the per-outcome cap and reported on its own lease, made
// ListOutcomes at its default limit larger than a message may be. Pages are
// cut by bytes too: each stays within kMaxPageBytes, says more follow, and
// every outcome is reached exactly once.
TEST_F(CoordinatorServerTest, SeventyOutcomesOfAMebibyteEachAreListedInPagesUnderTheByteBudget) {
  constexpr int kOutcomes = 70;
  const std::string a = register_agent("a", caps("host", {"tmpfs"}));
  const v1::Campaign c = create_campaign(campaign_spec({}, {"tmpfs"}, kOutcomes));
  std::set<int64_t> reported;
  for (int i = 0; i < kOutcomes; ++i) {
    auto job = lease(a);
    ASSERT_TRUE(job.has_value()) << i;
    v1::Outcome o = outcome(v1::VERDICT_ERROR);
    // Varied bytes, so that the store's packing cannot shrink them away.
    std::string tail(kMaxOutcomeBytes - 4096, '\0');
    uint64_t x = 0x9e3779b97f4a7c15ull * static_cast<uint64_t>(i + 1);
    for (char& ch : tail) {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      ch = static_cast<char>('!' + x % 90);
    }
    o.set_console_tail(tail);
    ASSERT_LE(o.ByteSizeLong(), kMaxOutcomeBytes);
    const auto r = report(a, job->job_id(), job->attempt(), o);
    ASSERT_TRUE(r.status.ok()) << r.status.error_message();
    reported.insert(job->job_id());
  }

  // A page may pass gRPC's default 4 MiB: read as the CLI reads (channel.h).
  auto control = v1::ControlService::NewStub(coordinator_channel(server_->address()));
  std::set<int64_t> listed;
  v1::ListOutcomesRequest req;
  req.set_campaign_id(c.id());
  int pages = 0;
  do {
    const auto page = call(*control, &v1::ControlService::Stub::ListOutcomes, req);
    ASSERT_TRUE(page.status.ok()) << "page " << pages << ": " << page.status.error_message();
    ASSERT_GT(page.resp.outcomes_size(), 0) << "a page holds one outcome at least";
    EXPECT_LE(page.resp.ByteSizeLong(), kMaxPageBytes) << "page " << pages;
    for (const auto& o : page.resp.outcomes()) {
      EXPECT_TRUE(listed.insert(o.job_id()).second) << "job " << o.job_id() << " listed twice";
      EXPECT_EQ(o.outcome().console_tail().size(), kMaxOutcomeBytes - 4096);
    }
    req.set_page_token(page.resp.next_page_token());
    ++pages;
  } while (!req.page_token().empty() && pages < 100);
  EXPECT_EQ(listed, reported);
  EXPECT_GE(pages, kOutcomes * static_cast<int>(kMaxOutcomeBytes) / static_cast<int>(kMaxPageBytes));
}

}  // namespace
}  // namespace leapfrog::coord
