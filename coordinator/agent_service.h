#pragma once
// The AgentService (proto/leapfrog/v1/agent.proto): register, lease,
// heartbeat, report, release; and the VM launchers' calls, which end the jobs
// of the VM agents they launched.

#include <google/protobuf/arena.h>
#include <grpcpp/support/message_allocator.h>

#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <thread>

#include "common/token.h"
#include "coordinator/clock.h"
#include "coordinator/service_config.h"
#include "coordinator/store/store.h"
#include "coordinator/work_signal.h"
#include "leapfrog/v1/agent.grpc.pb.h"

namespace leapfrog::metrics {
class CoordinatorMetrics;
}

namespace leapfrog::coord {

// ReportOutcome's request and response on a protobuf arena: a report's
// violations and their strings parse into one block instead of hundreds of
// allocations, and are freed at once when the call ends.
class ReportArenaAllocator final
    : public grpc::MessageAllocator<v1::ReportOutcomeRequest, v1::ReportOutcomeResponse> {
 public:
  grpc::MessageHolder<v1::ReportOutcomeRequest, v1::ReportOutcomeResponse>* AllocateMessages()
      override {
    return new Holder();
  }

 private:
  class Holder final
      : public grpc::MessageHolder<v1::ReportOutcomeRequest, v1::ReportOutcomeResponse> {
   public:
    Holder() : arena_(options()) {
      set_request(google::protobuf::Arena::CreateMessage<v1::ReportOutcomeRequest>(&arena_));
      set_response(google::protobuf::Arena::CreateMessage<v1::ReportOutcomeResponse>(&arena_));
    }
    void Release() override { delete this; }

   private:
    static google::protobuf::ArenaOptions options() {
      google::protobuf::ArenaOptions o;
      o.start_block_size = 16 << 10;  // a typical report (~30 violations) in one block
      o.max_block_size = 256 << 10;
      return o;
    }
    google::protobuf::Arena arena_;
  };
};

// ReportOutcome and Lease use gRPC's callback API, so no gRPC thread blocks
// on the database: the store's report writers finish a report once its batch
// is committed (a handler thread blocked per call, woken per call, cost ~3 us
// of coordinator CPU per stored row in coordinator_bench), and the group
// lease's writers finish a lease. A long-polling Lease that found no job
// holds no thread either: it is parked until new work is signalled or its
// next poll is due, and a caller that goes away is answered at once.
class AgentServiceImpl final
    : public v1::AgentService::WithCallbackMethod_ReportOutcome<
          v1::AgentService::WithCallbackMethod_Lease<v1::AgentService::Service>> {
 public:
  // Starts the thread that wakes parked Lease calls.
  AgentServiceImpl(Store& store, const Clock& clock, const TokenAuth& auth,
                   const ServiceConfig& cfg, WorkSignal& work);
  // Stops that thread; the server must be shut down first (no call parked).
  ~AgentServiceImpl() override;

  grpc::Status Register(grpc::ServerContext* ctx, const v1::RegisterRequest* req, v1::RegisterResponse* resp) override;
  grpc::ServerUnaryReactor* Lease(grpc::CallbackServerContext* ctx, const v1::LeaseRequest* req,
                                  v1::LeaseResponse* resp) override;
  grpc::Status Heartbeat(grpc::ServerContext* ctx, const v1::HeartbeatRequest* req,
                         v1::HeartbeatResponse* resp) override;
  grpc::ServerUnaryReactor* ReportOutcome(grpc::CallbackServerContext* ctx,
                                          const v1::ReportOutcomeRequest* req,
                                          v1::ReportOutcomeResponse* resp) override;
  grpc::Status ReleaseJob(grpc::ServerContext* ctx, const v1::ReleaseJobRequest* req,
                          v1::ReleaseJobResponse* resp) override;
  grpc::Status FailAgentJob(grpc::ServerContext* ctx, const v1::FailAgentJobRequest* req,
                            v1::FailAgentJobResponse* resp) override;
  grpc::Status RegisterLauncher(grpc::ServerContext* ctx, const v1::RegisterLauncherRequest* req,
                                v1::RegisterLauncherResponse* resp) override;
  grpc::Status ClaimAgentName(grpc::ServerContext* ctx, const v1::ClaimAgentNameRequest* req,
                              v1::ClaimAgentNameResponse* resp) override;
  // Counts leases, reports and registrations there from now on (before serving; may be null).
  void set_metrics(metrics::CoordinatorMetrics* m) { metrics_ = m; }
  // Long-polling Lease calls parked now, waiting for work (none holds a thread).
  size_t parked_leases() const;

 private:
  // ReportOutcome's status (and response) for what the store answered.
  static grpc::Status report_status(const v1::ReportOutcomeRequest* req,
                                    v1::ReportOutcomeResponse* resp, ReportResult result,
                                    std::exception_ptr error);
  // An agent registered with this replica, as Lease needs it.
  struct KnownAgent {
    v1::Capabilities caps;
    std::string key;  // of its latest secret, as this replica last saw it
  };
  // OK with the agent's capabilities in `out` when `key` is its latest key;
  // NOT_FOUND if it never registered with this replica; PERMISSION_DENIED
  // for no key, or another (once the database confirms: another replica may
  // have registered it since).
  grpc::Status check_agent(const std::string& agent_id, const std::string& key,
                           v1::Capabilities& out);
  // OK with the launcher in `out` when `secret` is launcher `id`'s;
  // PERMISSION_DENIED otherwise (no secret, unknown launcher, another key).
  grpc::Status check_launcher(const std::string& id, const std::string& secret,
                              LauncherRecord& out);
  // FailAgentJob once the caller is known to have launched the agent: the
  // verdict's job ended (BOOT_FAILURE: a queued job of the launcher's kernel).
  grpc::Status end_launched_job(const LauncherRecord& launcher, const v1::FailAgentJobRequest& req,
                                v1::FailAgentJobResponse& resp);
  // Records that the agent was seen, at most once per heartbeat interval,
  // without waiting for the database (Store::touch_agent_async).
  void seen(const std::string& agent_id);

  class LeaseCall;  // one Lease call (agent_service.cc)
  using Parked = std::multimap<std::chrono::steady_clock::time_point, LeaseCall*>;
  // Parks `call` until work is signalled or `due`; false (not parked) when
  // its caller went away.
  bool park(LeaseCall* call, std::chrono::steady_clock::time_point due);
  // Takes `call` out of the parked calls; false if it was not parked.
  bool unpark(LeaseCall* call);
  // The parked calls' thread: attempts them again when work is signalled or
  // their poll is due.
  void poll_loop();

  Store& store_;
  const Clock& clock_;
  const TokenAuth& auth_;
  ServiceConfig cfg_;
  WorkSignal& work_;
  ReportArenaAllocator report_allocator_;
  metrics::CoordinatorMetrics* metrics_ = nullptr;
  std::mutex mu_;
  std::map<std::string, KnownAgent> agents_;
  std::map<std::string, TimePoint> last_touch_;
  mutable std::mutex poll_mu_;  // guards the rest, and each LeaseCall's place in parked_
  std::condition_variable poll_cv_;
  Parked parked_;
  bool signalled_ = false;  // work was signalled since the poll thread last looked
  bool stopping_ = false;
  uint64_t work_subscription_ = 0;
  std::thread poller_;  // last: started once the rest is initialised
};

}  // namespace leapfrog::coord
