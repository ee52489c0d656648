#pragma once
// The gRPC services' timing: heartbeats, leases and long-poll waits.

#include <chrono>

#include "coordinator/clock.h"

namespace leapfrog::coord {

struct ServiceConfig {
  Duration heartbeat_interval = std::chrono::seconds(2);
  Duration lease_duration = std::chrono::seconds(10);
  Duration max_lease_wait = std::chrono::seconds(5);
};

}  // namespace leapfrog::coord
