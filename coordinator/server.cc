#include "coordinator/server.h"

#include <absl/synchronization/mutex.h>
#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/health_check_service_interface.h>

#include <algorithm>

#include "coordinator/parse_error_interceptor.h"

namespace leapfrog::coord {

CoordinatorServer::CoordinatorServer(Store& store, const Clock& clock, ServerOptions opts)
    : store_(store),
      clock_(clock),
      opts_(std::move(opts)),
      auth_(opts_.token),
      agent_service_(store, clock, auth_, opts_.service, work_),
      control_service_(store, clock, auth_, opts_.service, work_),
      scheduler_(store, clock, work_) {
  // Debian's Abseil is built with deadlock detection on: every absl::Mutex
  // gRPC locks then updates a process-wide lock graph (measured: a few
  // percent of the coordinator's CPU per report). gRPC's locks are not ours
  // to debug.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  builder.AddListeningPort(opts_.listen, grpc::InsecureServerCredentials(), &port_);
  builder.RegisterService(&agent_service_);
  builder.RegisterService(&control_service_);
  if (opts_.triage_store) {
    triage_ = std::make_unique<triage::TriageEngine>(store, *opts_.triage_store, clock, &work_);
    triage_service_ = std::make_unique<triage::TriageServiceImpl>(*triage_, auth_);
    builder.RegisterService(triage_service_.get());
  }
  builder.SetMaxReceiveMessageSize(64 << 20);
  // Requests that do not parse: INVALID_ARGUMENT with a reason.
  std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> interceptors;
  interceptors.push_back(std::make_unique<ParseErrorInterceptorFactory>());
  builder.experimental().SetInterceptorCreators(std::move(interceptors));
  builder.SetSyncServerOption(grpc::ServerBuilder::SyncServerOption::MAX_POLLERS,
                              std::max(opts_.idle_threads, 2));
  server_ = builder.BuildAndStart();
  if (!server_ || port_ == 0) throw std::runtime_error("cannot listen on \"" + opts_.listen + "\"");
  spdlog::info("coordinator.listen address={}", address());
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

void CoordinatorServer::maintenance_loop() {
  for (;;) {
    try {
      if (store_.expire_leases(clock_.now()) > 0) work_.notify();
      scheduler_.tick();
      if (triage_) triage_->tick();
    } catch (const StoreError& e) {
      spdlog::warn("maintenance.store_error unavailable={} error=\"{}\"", e.unavailable(), e.what());
    } catch (const std::exception& e) {
      spdlog::error("maintenance.error error=\"{}\"", e.what());
    }
    std::unique_lock<std::mutex> lock(mu_);
    if (cv_.wait_for(lock, opts_.maintenance_every, [this] { return stopping_; })) return;
  }
}

}  // namespace leapfrog::coord
