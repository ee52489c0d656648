#pragma once
// The coordinator's HTTP side: the JSON API under /api/ (docs/api.md) and the
// built dashboard's static files. Reads are open (the server binds loopback);
// actions need "Authorization: Bearer <token>", the gRPC token.

#include <memory>
#include <string>
#include <thread>

#include "coordinator/clock.h"
#include "coordinator/store/store.h"

namespace httplib {
class Server;
}

namespace leapfrog::coord {

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
};

class HttpServer {
 public:
  // Binds and starts serving on a thread of its own; throws
  // std::runtime_error if the address cannot be bound. Without `triage`
  // the triage endpoints answer 404.
  HttpServer(Store& store, const Clock& clock, HttpOptions opts,
             triage::TriageEngine* triage = nullptr);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  int port() const { return port_; }
  // "http://127.0.0.1:PORT"
  std::string url() const;
  // Stops accepting requests and joins the serving thread.
  void shutdown();

 private:
  HttpOptions opts_;
  std::unique_ptr<httplib::Server> server_;
  std::string host_;
  int port_ = 0;
  std::thread thread_;
};

}  // namespace leapfrog::coord
