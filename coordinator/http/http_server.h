#pragma once
// The coordinator's HTTP side: the JSON API under /api/ (docs/api.md) and the
// built dashboard's static files. Reads are open on a loopback address;
// actions, and reads on any other address, need "Authorization: Bearer
// <token>", the gRPC token, checked before a body is read; /metrics is a
// read, while the probes /healthz and /readyz never need the token and
// skip the Host check. Only requests
// naming this server in their Host header are answered (no DNS rebinding).

#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "coordinator/clock.h"
#include "coordinator/http/connection_limits.h"
#include "coordinator/store/store.h"

namespace httplib {
struct Request;
struct Response;
}  // namespace httplib

namespace leapfrog::metrics {
class CoordinatorMetrics;
}

namespace leapfrog::coord {

class ConnectionServer;
class ApiRouter;
class HttpRoutes;

namespace triage {
class TriageEngine;
}

struct HttpOptions {
  // host:port; port 0 picks a free one.
  std::string listen = "127.0.0.1:0";
  std::string token;
  // Folder of the built dashboard (index.html, assets/); empty or missing:
  // "/" says the dashboard was not built, the API still works.
  std::string assets_dir;
  // Agents not seen for this long are offline (three heartbeats).
  Duration offline_after = std::chrono::seconds(6);
  // Cache roots whose kbuild/out/ holds build logs the kernel page may show
  // (`leapfrog serve`: vm::default_cache_dir() and each --build-cache); a
  // log anywhere else is not read.
  std::vector<std::string> build_caches;
  // Host header values answered besides 127.0.0.1, localhost and [::1] with
  // this server's port (and the listen host): "name" (with or without the
  // port) or "name:port". Others get 421.
  std::vector<std::string> allowed_hosts;
  ConnectionLimits limits;
  // Reads need the token too. Always so when `listen` is not a loopback
  // address (listens_beyond_loopback), whatever this says.
  bool reads_need_token = false;
  // KCIDB origin of /api/campaigns/{id}/export when the request names none.
  std::string export_origin = "leapfrog";
  // Where export links start (serve --link-base); empty: the request's Host.
  std::string link_base;
  // Route groups of other folders (coordinator/notify/ ...), registered
  // after the built-in ones.
  std::vector<std::function<void(ApiRouter&)>> extra_api;
};

// Whether a server bound to `host` can be reached from other machines
// (anything but 127.0.0.0/8, ::1 and localhost; 0.0.0.0 and :: included).
bool listens_beyond_loopback(const std::string& host);

class HttpServer {
 public:
  // Binds and starts serving on a thread of its own; throws
  // std::runtime_error if the address cannot be bound. Without `triage`
  // the triage endpoints answer 404; without `metrics` /metrics does, and
  // /readyz asks the store.
  HttpServer(Store& store, const Clock& clock, HttpOptions opts,
             triage::TriageEngine* triage = nullptr,
             metrics::CoordinatorMetrics* metrics = nullptr);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  int port() const { return port_; }
  // Whether reads need the token too (the server listens beyond loopback).
  bool reads_need_token() const { return reads_need_token_; }
  // "http://127.0.0.1:PORT"
  std::string url() const;
  // Stops accepting requests and joins the serving thread.
  void shutdown();

 private:
  // Host, path, range, token and body-size checks, before routing and before
  // the body is read; true if the request is refused (the answer in `res`).
  bool refused(const httplib::Request& req, httplib::Response& res) const;

  HttpOptions opts_;
  std::unique_ptr<HttpRoutes> routes_;
  std::unique_ptr<ConnectionServer> server_;
  std::string host_;
  int port_ = 0;
  bool reads_need_token_ = false;
  std::vector<std::string> hosts_;  // lowercase Host values answered
  std::thread thread_;
};

}  // namespace leapfrog::coord
