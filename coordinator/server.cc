#include "coordinator/server.h"

#include <absl/synchronization/mutex.h>
#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/health_check_service_interface.h>
#include <spdlog/spdlog.h>

#include <algorithm>

#include "common/bounds.h"
#include "coordinator/metrics/coordinator_metrics.h"
#include "coordinator/parse_error_interceptor.h"

namespace leapfrog::coord {

CoordinatorServer::CoordinatorServer(Store& store, const Clock& clock, ServerOptions opts)
    : store_(store),
      clock_(clock),
      opts_(std::move(opts)),
      auth_(opts_.token),
      agent_service_(store, clock, auth_, opts_.service, work_),
      control_service_(store, clock, auth_, opts_.service, work_),
      scheduler_(store, clock, work_, opts_.events) {
  // Debian's Abseil is built with deadlock detection on: every absl::Mutex
  // gRPC locks then updates a process-wide lock graph (measured: a few
  // percent of the coordinator's CPU per report). gRPC's locks are not ours
  // to debug.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  // A second coordinator on a port in use must fail, not share it.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder.AddListeningPort(opts_.listen, grpc::InsecureServerCredentials(), &port_);
  agent_service_.set_metrics(opts_.metrics);
  builder.RegisterService(&agent_service_);
  builder.RegisterService(&control_service_);
  if (opts_.triage_store) {
    triage_ = std::make_unique<triage::TriageEngine>(store, *opts_.triage_store, clock, &work_);
    triage_service_ = std::make_unique<triage::TriageServiceImpl>(*triage_, auth_);
    builder.RegisterService(triage_service_.get());
  }
  for (auto* service : opts_.extra_services) builder.RegisterService(service);
  // The limits every client uses too (coordinator/channel.h).
  builder.SetMaxReceiveMessageSize(kMaxMessageBytes);
  builder.SetMaxSendMessageSize(kMaxMessageBytes);
  // Requests that do not parse: INVALID_ARGUMENT with a reason.
  std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> interceptors;
  interceptors.push_back(std::make_unique<ParseErrorInterceptorFactory>());
  builder.experimental().SetInterceptorCreators(std::move(interceptors));
  builder.SetSyncServerOption(grpc::ServerBuilder::SyncServerOption::MAX_POLLERS,
                              std::max(opts_.idle_threads, 2));
  server_ = builder.BuildAndStart();
  if (!server_ || port_ == 0) throw std::runtime_error("cannot listen on \"" + opts_.listen + "\"");
  spdlog::info("coordinator.listen address={}", address());
  grace_ = opts_.expire_grace.value_or(opts_.service.lease_duration +
                                       opts_.service.heartbeat_interval + kAgentMaxBackoff);
  expire_from_ = clock_.now() + grace_;
  maintenance_ = std::thread([this] { maintenance_loop(); });
}

CoordinatorServer::~CoordinatorServer() { shutdown(); }

std::string CoordinatorServer::address() const {
  const auto colon = opts_.listen.rfind(':');
  return opts_.listen.substr(0, colon) + ":" + std::to_string(port_);
}

void CoordinatorServer::shutdown() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return;
    stopping_ = true;
  }
  cv_.notify_all();
  if (maintenance_.joinable()) maintenance_.join();
  server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
}

void CoordinatorServer::wait() { server_->Wait(); }

bool CoordinatorServer::update_health() {
  // The database decides whether this replica can serve: a load balancer or
  // a health probe then sends agents to another one.
  const bool reachable = store_.reachable();
  if (opts_.metrics) opts_.metrics->set_serving(reachable);
  if (reachable == serving_) return reachable;
  serving_ = reachable;
  // Agents could not heartbeat or report while the database was away: they
  // get the same grace as after a start before their leases expire.
  if (reachable) expire_from_ = std::max(expire_from_, clock_.now() + grace_);
  server_->GetHealthCheckService()->SetServingStatus(reachable);
  if (reachable)
    spdlog::info("coordinator.serving database=reachable");
  else
    spdlog::warn("coordinator.not_serving database=unreachable");
  return reachable;
}

void CoordinatorServer::maintenance_pass() {
  try {
    if (clock_.now() >= expire_from_ && store_.expire_leases(clock_.now()) > 0) work_.notify();
    scheduler_.tick();
    if (triage_) triage_->tick();
    if (opts_.retain_for > Duration::zero() && clock_.now() >= next_retention_) {
      next_retention_ = clock_.now() + opts_.retention_every;
      retain();
    }
  } catch (const StoreError& e) {
    spdlog::warn("maintenance.store_error unavailable={} error=\"{}\"", e.unavailable(), e.what());
  } catch (const std::exception& e) {
    spdlog::error("maintenance.error error=\"{}\"", e.what());
  }
}

// Batches of 500 until the backlog is done or 20 batches ran: a first pass
// over a year of nightlies takes several maintenance rounds, not one long one.
void CoordinatorServer::retain() {
  RetentionPass total;
  for (int i = 0; i < 20; ++i) {
    const RetentionPass p = store_.apply_retention(clock_.now() - opts_.retain_for, 500);
    total.outcomes += p.outcomes;
    total.outcomes_trimmed += p.outcomes_trimmed;
    total.excerpts_dropped += p.excerpts_dropped;
    total.examples_kept += p.examples_kept;
    total.bytes_freed += p.bytes_freed;
    if (p.outcomes < 500) break;
  }
  if (total.outcomes > 0)
    spdlog::info(
        "retention.pass outcomes={} trimmed={} excerpts_dropped={} examples_kept={} bytes_freed={}",
        total.outcomes, total.outcomes_trimmed, total.excerpts_dropped, total.examples_kept,
        total.bytes_freed);
}

void CoordinatorServer::maintenance_loop() {
  for (;;) {
    if (update_health()) maintenance_pass();
    passes_.fetch_add(1);
    std::unique_lock<std::mutex> lock(mu_);
    if (cv_.wait_for(lock, opts_.maintenance_every, [this] { return stopping_; })) return;
  }
}

}  // namespace leapfrog::coord
