#pragma once
// HTTP/1.1 connections on Boost.Beast and Asio. One I/O thread holds every
// connection and Beast parses and frames each request strictly: a head must
// be whole within a deadline, a body is capped and read within a deadline,
// and any request whose framing a proxy could read differently
// (Content-Length with Transfer-Encoding, two lengths, a body on GET, HEAD
// or OPTIONS, an unknown method) is answered 400 and its connection closed,
// as is every refused head. Handlers run on a small pool of workers; the
// I/O thread writes their answers with a deadline, so a client that reads
// slowly holds its own connection, never a worker.

#include <httplib.h>

#include <functional>
#include <memory>
#include <string>

#include "coordinator/http/connection_limits.h"

namespace leapfrog::coord {

// What the server asks of the application for each request.
struct RequestHandlers {
  // Judges a request's head before its body is read; true if refused, the
  // answer in `res` (the connection then closes). Runs on the I/O thread.
  std::function<bool(const httplib::Request&, httplib::Response&)> check_head;
  // Answers a whole request; runs on a worker.
  std::function<void(httplib::Request&, httplib::Response&)> answer;
  // Sent on every answer that does not set them itself.
  httplib::Headers default_headers;
};

class ConnectionServer {
 public:
  ConnectionServer(ConnectionLimits limits, RequestHandlers handlers);
  ~ConnectionServer();
  ConnectionServer(const ConnectionServer&) = delete;
  ConnectionServer& operator=(const ConnectionServer&) = delete;

  // Binds host:port (0: a free port) and listens; the bound port, or -1.
  int bind_listener(const std::string& host, int port);
  // Serves until stop_serving(); call once, on a thread of its own.
  void serve();
  // Ends serve(): closes the listener and every connection; serve() returns
  // once running handlers are done.
  void stop_serving();

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace leapfrog::coord
