#pragma once
// GET /metrics on an HTTP server of its own, for a process without the
// coordinator's HTTP server (`leapfrog vm run --metrics-listen`). On a
// loopback address it is open, like the coordinator's reads; on any other
// it needs "Authorization: Bearer <token>". Every other request is 404.

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <thread>

namespace httplib {
class Server;
}

namespace leapfrog::metrics {

class MetricsEndpoint {
 public:
  // Binds `listen` (HOST:PORT; port 0 picks a free one) and serves `render()`
  // on a thread of its own; throws std::runtime_error if it cannot bind.
  MetricsEndpoint(const std::string& listen, std::string token,
                  std::function<std::string()> render);
  // Stops serving.
  ~MetricsEndpoint();
  MetricsEndpoint(const MetricsEndpoint&) = delete;
  MetricsEndpoint& operator=(const MetricsEndpoint&) = delete;

  int port() const { return port_; }
  // "http://HOST:PORT/metrics"
  std::string url() const;

 private:
  std::unique_ptr<httplib::Server> server_;
  std::string host_;
  int port_ = 0;
  std::atomic<bool> ended_{false};  // the serving loop returned
  std::thread thread_;
};

}  // namespace leapfrog::metrics
