#pragma once
// cpp-httplib's request handling under connection handling of our own.
// Debian's libcpp-httplib (0.11) gives one pool thread to each connection for
// its whole life, with 8 threads and a listen backlog of 5 compiled in, and no
// deadline for a request head: eight idle keep-alive clients, or ten that send
// their headers a byte at a time, lock everyone else out. Here one poller
// thread holds every connection that is idle or still sending its request
// head (an fd in epoll, no thread), and hands a connection to a worker only
// once a whole head has arrived. A head must be complete within a deadline,
// an idle connection is closed after a short timeout, and the bytes one
// request may read are capped however its body is framed.

#include <httplib.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "coordinator/http/connection_limits.h"

namespace leapfrog::coord {

class ConnectionServer : public httplib::Server {
 public:
  explicit ConnectionServer(ConnectionLimits limits);
  ~ConnectionServer() override;

  // Binds host:port (0: a free port) and listens; the bound port, or -1.
  int bind_listener(const std::string& host, int port);
  // Serves until stop_serving(); call once, on a thread of its own.
  void serve();
  // Ends serve(): closes the listener and every connection, joins workers.
  void stop_serving();

  // The limits' request-body cap was hit by the request this thread is
  // reading (for the error handler, to answer 413 instead of httplib's 400).
  static bool body_cap_hit();
  // Makes this thread's connection close after the current answer.
  static void close_after_answer();

 private:
  struct Conn;
  class ConnStream;

  void poll_loop();
  void worker_loop();
  void accept_all();
  void on_readable(Conn& c);
  void watch(std::unique_ptr<Conn> c);
  void dispatch(std::unique_ptr<Conn> c);
  void expire(std::chrono::steady_clock::time_point now);
  void close_conn(std::unique_ptr<Conn> c);
  int next_timeout_ms(std::chrono::steady_clock::time_point now) const;

  const ConnectionLimits limits_;
  int listen_fd_ = -1;
  int epoll_fd_ = -1;
  int wake_fd_ = -1;  // eventfd: connections coming back, or stop
  std::atomic<bool> stopping_{false};
  std::atomic<size_t> open_{0};

  // Connections the poller watches, by fd (poller thread only).
  std::unordered_map<int, std::unique_ptr<Conn>> watched_;

  std::mutex mu_;
  std::condition_variable ready_cv_;
  std::deque<std::unique_ptr<Conn>> ready_;      // whole head in: for a worker
  std::deque<std::unique_ptr<Conn>> returning_;  // answered, kept alive: for the poller
  std::unordered_set<int> active_;               // fds a worker holds
  std::vector<std::thread> workers_;
};

}  // namespace leapfrog::coord
