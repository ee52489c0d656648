#pragma once
// Small helpers shared by the gRPC services: time conversion and turning
// expected failures into statuses.

#include <google/protobuf/duration.pb.h>
#include <google/protobuf/timestamp.pb.h>
#include <grpcpp/grpcpp.h>
#include <spdlog/spdlog.h>

#include <condition_variable>
#include <mutex>

#include "coordinator/campaign.h"
#include "coordinator/clock.h"
#include "coordinator/store/store.h"

namespace leapfrog::coord {

inline google::protobuf::Timestamp to_proto(TimePoint t) {
  google::protobuf::Timestamp ts;
  const int64_t us = t.time_since_epoch().count();
  ts.set_seconds(us / 1'000'000);
  ts.set_nanos(static_cast<int32_t>((us % 1'000'000) * 1000));
  return ts;
}

inline TimePoint from_proto(const google::protobuf::Timestamp& ts) {
  return TimePoint(Duration(ts.seconds() * 1'000'000 + ts.nanos() / 1000));
}

inline google::protobuf::Duration to_proto(Duration d) {
  google::protobuf::Duration out;
  out.set_seconds(d.count() / 1'000'000);
  out.set_nanos(static_cast<int32_t>((d.count() % 1'000'000) * 1000));
  return out;
}

inline Duration from_proto(const google::protobuf::Duration& d) {
  return Duration(d.seconds() * 1'000'000 + d.nanos() / 1000);
}

// Runs a handler body, mapping expected failures to statuses:
// StoreError -> UNAVAILABLE (database down) or FAILED_PRECONDITION,
// SpecError, BadPageToken -> INVALID_ARGUMENT; anything else -> INTERNAL (and logged).
template <typename Body>
grpc::Status guarded(const char* rpc, Body&& body) {
  try {
    return body();
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

// Wakes long-polling leases when new work is queued in this process.
class WorkSignal {
 public:
  void notify() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++generation_;
    }
    cv_.notify_all();
  }
  // Waits until notified or `timeout` passes.
  void wait_for(std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> lock(mu_);
    const uint64_t g = generation_;
    cv_.wait_for(lock, timeout, [&] { return generation_ != g; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  uint64_t generation_ = 0;
};

struct ServiceConfig {
  Duration heartbeat_interval = std::chrono::seconds(2);
  Duration lease_duration = std::chrono::seconds(10);
  Duration max_lease_wait = std::chrono::seconds(5);
};

}  // namespace leapfrog::coord
