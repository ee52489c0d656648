#pragma once
// Expected failures of the gRPC services' handlers, turned into statuses.

#include <grpcpp/grpcpp.h>
#include <spdlog/spdlog.h>

#include <exception>

#include "coordinator/campaign.h"
#include "coordinator/store/page.h"
#include "coordinator/store/store.h"

namespace leapfrog::coord {

// Runs a handler body, mapping expected failures to statuses:
// WrongAgentSecret -> PERMISSION_DENIED, StoreError -> UNAVAILABLE (database
// down) or FAILED_PRECONDITION, SpecError, BadPageToken -> INVALID_ARGUMENT; anything else -> INTERNAL (and logged).
template <typename Body>
grpc::Status guarded(const char* rpc, Body&& body) {
  try {
    return body();
  } catch (const WrongAgentSecret& e) {
    spdlog::warn("rpc.wrong_agent_secret rpc={} error=\"{}\"", rpc, e.what());
    return grpc::Status(grpc::StatusCode::PERMISSION_DENIED, e.what());
  } catch (const StoreError& e) {
    spdlog::warn("rpc.store_error rpc={} unavailable={} error=\"{}\"", rpc, e.unavailable(), e.what());
    return grpc::Status(e.unavailable() ? grpc::StatusCode::UNAVAILABLE : grpc::StatusCode::FAILED_PRECONDITION,
                        e.what());
  } catch (const SpecError& e) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, e.what());
  } catch (const BadPageToken& e) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, e.what());
  } catch (const std::exception& e) {
    spdlog::error("rpc.internal rpc={} error=\"{}\"", rpc, e.what());
    return grpc::Status(grpc::StatusCode::INTERNAL, e.what());
  }
}

// The status guarded() gives a handler body that throws `error`.
inline grpc::Status status_of(const char* rpc, std::exception_ptr error) {
  return guarded(rpc, [&]() -> grpc::Status { std::rethrow_exception(error); });
}

}  // namespace leapfrog::coord
