#pragma once
// The coordinator's gRPC server: agent and control services, the standard
// health service and server reflection, and the maintenance loop (expired
// leases, schedules). Health is NOT_SERVING while the database does not
// answer (checked at every maintenance pass), SERVING otherwise.

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "coordinator/agent_service.h"
#include "coordinator/control_service.h"
#include "coordinator/scheduler.h"
#include "coordinator/triage/triage_service.h"

namespace leapfrog::coord {

namespace notify {
class EventSink;
}

struct ServerOptions {
  // host:port; port 0 picks a free one. Binds 127.0.0.1 unless told otherwise.
  std::string listen = "127.0.0.1:0";
  std::string token;
  ServiceConfig service;
  Duration maintenance_every = std::chrono::seconds(1);
  // Triage tables; when set, the server serves TriageService and groups
  // failures and advances actions in its maintenance loop.
  triage::TriageStore* triage_store = nullptr;
  // Idle handler threads kept for the next calls. gRPC's default (2) ends
  // the thread of nearly every call and starts a new one for the next when
  // more calls run at once (report_outcome waits for its group commit): that
  // thread churn was a third of the server's CPU under concurrent reports.
  int idle_threads = 64;
  // No lease expires until this long after the server starts, or after the
  // database answers again: after an outage longer than a lease, agents
  // first reconnect, resume their heartbeats and report the outcomes they
  // spooled meanwhile, instead of finding their jobs handed to others.
  // nullopt: lease + heartbeat + the agents' longest reconnect backoff
  // (kAgentMaxBackoff).
  std::optional<Duration> expire_grace;
  // Retention (Store::apply_retention): outcomes older than this lose what
  // only their own page shows, checked every retention_every. Zero keeps
  // everything (the default).
  Duration retain_for = Duration::zero();
  Duration retention_every = std::chrono::minutes(10);
  // Counts what the services do and says whether this replica serves
  // (coordinator/metrics/); null: nothing is counted. Must outlive the server.
  leapfrog::metrics::CoordinatorMetrics* metrics = nullptr;
  // More services to serve (NotifyService); they check the token themselves.
  std::vector<grpc::Service*> extra_services;
  // Where the scheduler reports nightlies that did not run (null: nowhere).
  notify::EventSink* events = nullptr;
};

// The longest pause between an agent's reconnection attempts (agent/connect.cc).
inline constexpr Duration kAgentMaxBackoff = std::chrono::seconds(5);

class CoordinatorServer {
 public:
  // Starts serving; throws std::runtime_error if the address cannot be bound.
  CoordinatorServer(Store& store, const Clock& clock, ServerOptions opts);
  ~CoordinatorServer();
  CoordinatorServer(const CoordinatorServer&) = delete;
  CoordinatorServer& operator=(const CoordinatorServer&) = delete;

  int port() const { return port_; }
  // The triage engine (for the HTTP API), null without a triage store.
  triage::TriageEngine* triage() const { return triage_.get(); }
  // "127.0.0.1:PORT"
  std::string address() const;
  // Stops accepting calls, finishes the running ones, stops maintenance.
  void shutdown();
  // Blocks until shutdown().
  void wait();
  // Passes of the maintenance loop so far (tests wait on it).
  uint64_t maintenance_passes() const { return passes_.load(); }
  // Long-polling Lease calls parked now, waiting for work.
  size_t parked_leases() const { return agent_service_.parked_leases(); }

 private:
  void maintenance_loop();
  // Sets the health service's status from the database; true if it answers.
  bool update_health();
  // Expires leases (after the start's grace), fires schedules, runs triage.
  void maintenance_pass();

  Store& store_;
  const Clock& clock_;
  ServerOptions opts_;
  TokenAuth auth_;
  WorkSignal work_;
  AgentServiceImpl agent_service_;
  ControlServiceImpl control_service_;
  Scheduler scheduler_;
  std::unique_ptr<triage::TriageEngine> triage_;
  std::unique_ptr<triage::TriageServiceImpl> triage_service_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
  Duration grace_{};  // expire_grace as resolved
  // No lease is expired before this: the start, or the database's return, + grace_.
  TimePoint expire_from_;
  TimePoint next_retention_{};
  void retain();
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  std::atomic<uint64_t> passes_{0};
  // What the health service says: the database answered at the last pass.
  bool serving_ = true;
  std::thread maintenance_;
};

}  // namespace leapfrog::coord
