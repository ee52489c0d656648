#include "coordinator/metrics/metrics_endpoint.h"

#include <httplib.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <stdexcept>

#include "coordinator/metrics/exposition.h"

namespace leapfrog::metrics {

namespace {

bool loopback(std::string host) {
  std::transform(host.begin(), host.end(), host.begin(),
                 [](unsigned char c) { return std::tolower(c); });
  return host.rfind("127.", 0) == 0 || host == "::1" || host == "[::1]" || host == "localhost";
}

// Whether the request carries "Authorization: Bearer <token>" (compared in
// constant time).
bool has_token(const httplib::Request& req, const std::string& token) {
  const std::string value = req.get_header_value("Authorization");
  const std::string prefix = "Bearer ";
  if (value.rfind(prefix, 0) != 0) return false;
  const std::string given = value.substr(prefix.size());
  unsigned char diff = given.size() != token.size();
  for (size_t i = 0; i < given.size() && i < token.size(); ++i) diff |= given[i] ^ token[i];
  return diff == 0;
}

}  // namespace

MetricsEndpoint::MetricsEndpoint(const std::string& listen, std::string token,
                                 std::function<std::string()> render)
    : server_(std::make_unique<httplib::Server>()) {
  const auto colon = listen.rfind(':');
  int port = -1;
  if (colon != std::string::npos) {
    try {
      port = std::stoi(listen.substr(colon + 1));
    } catch (const std::exception&) {
      port = -1;
    }
  }
  if (port < 0 || port > 65535)
    throw std::runtime_error("bad metrics address \"" + listen + "\", want HOST:PORT");
  host_ = listen.substr(0, colon);
  const bool need_token = !loopback(host_);
  if (need_token && token.empty())
    throw std::runtime_error("metrics on \"" + listen + "\" (not loopback) need a token");
  server_->Get("/metrics", [need_token, token = std::move(token), render = std::move(render)](
                               const httplib::Request& req, httplib::Response& res) {
    if (need_token && !has_token(req, token)) {
      res.status = 401;
      res.set_content("send \"Authorization: Bearer <token>\"\n", "text/plain");
      return;
    }
    res.set_content(render(), kContentType);
  });
  port_ = port == 0 ? server_->bind_to_any_port(host_)
                    : (server_->bind_to_port(host_, port) ? port : -1);
  if (port_ <= 0) throw std::runtime_error("cannot listen on \"" + listen + "\" for metrics");
  thread_ = std::thread([this] {
    server_->listen_after_bind();
    ended_ = true;
  });
  // stop() before the loop runs would be lost, and the destructor would
  // wait for ever: return once it runs (it starts at once).
  while (!server_->is_running() && !ended_) std::this_thread::yield();
  spdlog::info("metrics.listen url={}", url());
}

MetricsEndpoint::~MetricsEndpoint() {
  server_->stop();
  if (thread_.joinable()) thread_.join();
}

std::string MetricsEndpoint::url() const {
  const bool v6 = host_.find(':') != std::string::npos && host_.front() != '[';
  return "http://" + (v6 ? "[" + host_ + "]" : host_) + ":" + std::to_string(port_) + "/metrics";
}

}  // namespace leapfrog::metrics
