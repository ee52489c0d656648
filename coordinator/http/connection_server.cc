#include "coordinator/http/connection_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <spdlog/spdlog.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

namespace leapfrog::coord {

using Clock = std::chrono::steady_clock;

namespace {

thread_local bool t_body_cap_hit = false;
thread_local bool t_close_after = false;

std::string addr_text(const sockaddr_storage& ss, int& port) {
  char host[NI_MAXHOST] = "";
  char serv[NI_MAXSERV] = "";
  if (getnameinfo(reinterpret_cast<const sockaddr*>(&ss), sizeof(ss), host, sizeof(host), serv,
                  sizeof(serv), NI_NUMERICHOST | NI_NUMERICSERV) != 0)
    return "";
  port = std::atoi(serv);
  return host;
}

int remaining_ms(Clock::time_point deadline) {
  const auto left =
      std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return left <= 0 ? 0 : static_cast<int>(std::min<int64_t>(left, 1 << 30));
}

// A short answer written without waiting, for a connection about to close.
void answer_and_close(int fd, int status, const char* reason) {
  const std::string text = std::string("{\"error\":\"") + reason + "\"}";
  const std::string out =
      "HTTP/1.1 " + std::to_string(status) + " " + reason +
      "\r\nContent-Type: application/json\r\nContent-Length: " + std::to_string(text.size()) +
      "\r\nX-Content-Type-Options: nosniff\r\nContent-Security-Policy: " + kContentSecurityPolicy +
      "\r\nConnection: close\r\n\r\n" + text;
  (void)!::send(fd, out.data(), out.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
}

}  // namespace

bool ConnectionServer::body_cap_hit() {
  return t_body_cap_hit;
}
void ConnectionServer::close_after_answer() {
  t_close_after = true;
}

struct ConnectionServer::Conn {
  int fd = -1;
  std::string in;  // received, not yet consumed by a request
  size_t pos = 0;
  bool started = false;  // a byte of the next request arrived
  Clock::time_point deadline;
  std::string remote_ip, local_ip;
  int remote_port = 0, local_port = 0;

  bool has_whole_head() const { return in.find("\r\n\r\n", pos) != std::string::npos; }
  size_t buffered() const { return in.size() - pos; }
  void compact() {
    if (pos == 0) return;
    in.erase(0, pos);
    pos = 0;
  }
};

// One request's view of its connection: reads come from what the poller
// buffered, then from the socket until the body deadline or the byte cap.
class ConnectionServer::ConnStream : public httplib::Stream {
 public:
  ConnStream(Conn& c, const ConnectionLimits& limits)
      : c_(c), limits_(limits), deadline_(Clock::now() + limits.body_deadline) {
    // The head is buffered in full; the cap counts what comes after it.
    const size_t end = c_.in.find("\r\n\r\n", c_.pos);
    budget_ = limits_.max_body_bytes + (end == std::string::npos ? 0 : end + 4 - c_.pos);
  }

  bool is_readable() const override {
    if (c_.buffered() > 0) return true;
    pollfd p{c_.fd, POLLIN, 0};
    return ::poll(&p, 1, remaining_ms(deadline_)) > 0;
  }
  bool is_writable() const override {
    pollfd p{c_.fd, POLLOUT, 0};
    return ::poll(&p, 1, static_cast<int>(limits_.write_stall.count())) > 0;
  }

  ssize_t read(char* ptr, size_t size) override {
    if (c_.buffered() == 0 && !fill()) return -1;
    size_t n = std::min(size, c_.buffered());
    if (used_ + n > budget_) {
      n = budget_ > used_ ? budget_ - used_ : 0;
      if (n == 0) {
        t_body_cap_hit = true;
        t_close_after = true;
        return -1;
      }
    }
    std::memcpy(ptr, c_.in.data() + c_.pos, n);
    c_.pos += n;
    used_ += n;
    return static_cast<ssize_t>(n);
  }

  ssize_t write(const char* ptr, size_t size) override {
    size_t done = 0;
    while (done < size) {
      const ssize_t n = ::send(c_.fd, ptr + done, size - done, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n > 0) {
        done += static_cast<size_t>(n);
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) && is_writable()) continue;
      return -1;
    }
    return static_cast<ssize_t>(size);
  }

  void get_remote_ip_and_port(std::string& ip, int& port) const override {
    ip = c_.remote_ip;
    port = c_.remote_port;
  }
  void get_local_ip_and_port(std::string& ip, int& port) const override {
    ip = c_.local_ip;
    port = c_.local_port;
  }
  socket_t socket() const override { return c_.fd; }

 private:
  // Waits for more bytes; false at EOF, error, deadline or cap.
  bool fill() {
    if (used_ >= budget_) {
      t_body_cap_hit = true;
      t_close_after = true;
      return false;
    }
    c_.compact();
    char buf[16 * 1024];
    for (;;) {
      pollfd p{c_.fd, POLLIN, 0};
      const int r = ::poll(&p, 1, remaining_ms(deadline_));
      if (r == 0) return false;
      if (r < 0 && errno == EINTR) continue;
      if (r < 0) return false;
      const ssize_t n = ::recv(c_.fd, buf, sizeof(buf), MSG_DONTWAIT);
      if (n > 0) {
        c_.in.append(buf, static_cast<size_t>(n));
        return true;
      }
      if (n < 0 && (errno == EAGAIN || errno == EINTR)) continue;
      return false;
    }
  }

  Conn& c_;
  const ConnectionLimits& limits_;
  const Clock::time_point deadline_;
  size_t budget_ = 0;
  size_t used_ = 0;
};

ConnectionServer::ConnectionServer(ConnectionLimits limits) : limits_(limits) {}

ConnectionServer::~ConnectionServer() {
  stop_serving();
  if (listen_fd_ >= 0) ::close(listen_fd_);
  if (epoll_fd_ >= 0) ::close(epoll_fd_);
  if (wake_fd_ >= 0) ::close(wake_fd_);
}

int ConnectionServer::bind_listener(const std::string& host, int port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const std::string service = std::to_string(port);
  if (getaddrinfo(host.c_str(), service.c_str(), &hints, &found) != 0 || !found) return -1;
  int fd = -1;
  for (addrinfo* a = found; a && fd < 0; a = a->ai_next) {
    fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a->ai_protocol);
    if (fd < 0) continue;
    const int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (::bind(fd, a->ai_addr, a->ai_addrlen) != 0 || ::listen(fd, limits_.listen_backlog) != 0) {
      ::close(fd);
      fd = -1;
    }
  }
  freeaddrinfo(found);
  if (fd < 0) return -1;
  sockaddr_storage ss{};
  socklen_t len = sizeof(ss);
  getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len);
  int bound = -1;
  addr_text(ss, bound);
  listen_fd_ = fd;
  epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
  wake_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = listen_fd_;
  epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, listen_fd_, &ev);
  ev.data.fd = wake_fd_;
  epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, wake_fd_, &ev);
  return bound;
}

void ConnectionServer::serve() {
  for (int i = 0; i < std::max(1, limits_.workers); ++i)
    workers_.emplace_back([this] { worker_loop(); });
  poll_loop();
  {
    std::lock_guard<std::mutex> lock(mu_);
    ready_cv_.notify_all();
  }
  for (auto& t : workers_) t.join();
  workers_.clear();
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& c : ready_) ::close(c->fd);
  for (auto& c : returning_) ::close(c->fd);
  ready_.clear();
  returning_.clear();
  for (auto& [fd, c] : watched_) ::close(fd);
  watched_.clear();
}

void ConnectionServer::stop_serving() {
  if (stopping_.exchange(true)) return;
  if (wake_fd_ >= 0) {
    const uint64_t one = 1;
    (void)!::write(wake_fd_, &one, sizeof(one));
  }
  std::lock_guard<std::mutex> lock(mu_);
  // Wake workers blocked reading a slow body.
  for (int fd : active_) ::shutdown(fd, SHUT_RDWR);
  ready_cv_.notify_all();
}

int ConnectionServer::next_timeout_ms(Clock::time_point now) const {
  Clock::time_point soonest = now + std::chrono::seconds(1);
  for (const auto& [fd, c] : watched_) soonest = std::min(soonest, c->deadline);
  return std::max(
      0, static_cast<int>(
             std::chrono::duration_cast<std::chrono::milliseconds>(soonest - now).count()) +
             1);
}

void ConnectionServer::poll_loop() {
  epoll_event events[128];
  while (!stopping_) {
    const int n = epoll_wait(epoll_fd_, events, 128, next_timeout_ms(Clock::now()));
    if (n < 0 && errno != EINTR) {
      spdlog::error("http.epoll_error error=\"{}\"", std::strerror(errno));
      return;
    }
    for (int i = 0; i < n; ++i) {
      const int fd = events[i].data.fd;
      if (fd == listen_fd_) {
        accept_all();
      } else if (fd == wake_fd_) {
        uint64_t v;
        (void)!::read(wake_fd_, &v, sizeof(v));
        std::deque<std::unique_ptr<Conn>> back;
        {
          std::lock_guard<std::mutex> lock(mu_);
          back.swap(returning_);
        }
        for (auto& c : back) watch(std::move(c));
      } else if (auto it = watched_.find(fd); it != watched_.end()) {
        on_readable(*it->second);
      }
    }
    expire(Clock::now());
  }
}

void ConnectionServer::accept_all() {
  for (;;) {
    sockaddr_storage peer{};
    socklen_t len = sizeof(peer);
    const int fd =
        accept4(listen_fd_, reinterpret_cast<sockaddr*>(&peer), &len, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK)
        spdlog::warn("http.accept_error error=\"{}\"", std::strerror(errno));
      return;
    }
    if (open_ >= limits_.max_connections) {
      answer_and_close(fd, 503, "too many connections");
      ::close(fd);
      continue;
    }
    const int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    auto c = std::make_unique<Conn>();
    c->fd = fd;
    c->remote_ip = addr_text(peer, c->remote_port);
    sockaddr_storage local{};
    len = sizeof(local);
    getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len);
    c->local_ip = addr_text(local, c->local_port);
    c->started = true;  // a new connection owes its head from connect on
    c->deadline = Clock::now() + limits_.head_deadline;
    ++open_;
    watch(std::move(c));
  }
}

void ConnectionServer::watch(std::unique_ptr<Conn> c) {
  if (stopping_) return close_conn(std::move(c));
  if (c->has_whole_head()) return dispatch(std::move(c));
  if (!c->started) c->deadline = Clock::now() + limits_.idle_timeout;
  epoll_event ev{};
  // Edge-triggered: only new bytes wake the poller, not the ones buffered.
  ev.events = EPOLLIN | EPOLLRDHUP | EPOLLET;
  ev.data.fd = c->fd;
  if (epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, c->fd, &ev) != 0) return close_conn(std::move(c));
  const int fd = c->fd;
  watched_[fd] = std::move(c);
}

void ConnectionServer::on_readable(Conn& c) {
  char buf[16 * 1024];
  bool eof = false;
  for (;;) {
    const ssize_t n = ::recv(c.fd, buf, sizeof(buf), MSG_DONTWAIT);
    if (n > 0) {
      if (!c.started) {
        c.started = true;
        c.deadline = Clock::now() + limits_.head_deadline;
      }
      c.in.append(buf, static_cast<size_t>(n));
      if (c.buffered() > limits_.max_head_bytes + sizeof(buf)) break;
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    eof = n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK);
    break;
  }
  const int fd = c.fd;
  auto owned = std::move(watched_[fd]);
  watched_.erase(fd);
  epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, fd, nullptr);
  if (owned->has_whole_head()) return dispatch(std::move(owned));
  if (owned->buffered() > limits_.max_head_bytes) {
    answer_and_close(fd, 431, "request header fields too large");
    return close_conn(std::move(owned));
  }
  if (eof) return close_conn(std::move(owned));
  epoll_event ev{};
  ev.events = EPOLLIN | EPOLLRDHUP | EPOLLET;
  ev.data.fd = fd;
  if (epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev) != 0) return close_conn(std::move(owned));
  watched_[fd] = std::move(owned);
}

void ConnectionServer::expire(Clock::time_point now) {
  std::vector<int> late;
  for (const auto& [fd, c] : watched_)
    if (c->deadline <= now) late.push_back(fd);
  for (int fd : late) {
    auto c = std::move(watched_[fd]);
    watched_.erase(fd);
    epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, fd, nullptr);
    if (c->buffered() > 0) {
      spdlog::info("http.head_timeout remote={}", c->remote_ip);
      answer_and_close(fd, 408, "request head not complete in time");
    }
    close_conn(std::move(c));
  }
}

void ConnectionServer::dispatch(std::unique_ptr<Conn> c) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    ready_.push_back(std::move(c));
  }
  ready_cv_.notify_one();
}

void ConnectionServer::close_conn(std::unique_ptr<Conn> c) {
  ::close(c->fd);
  --open_;
}

void ConnectionServer::worker_loop() {
  for (;;) {
    std::unique_ptr<Conn> c;
    {
      std::unique_lock<std::mutex> lock(mu_);
      ready_cv_.wait(lock, [&] { return stopping_ || !ready_.empty(); });
      if (stopping_) return;
      c = std::move(ready_.front());
      ready_.pop_front();
      active_.insert(c->fd);
    }
    // Answer every request whose head is already here, then give the
    // connection back to the poller.
    bool keep = true;
    while (keep && c->has_whole_head() && !stopping_) {
      t_body_cap_hit = false;
      t_close_after = false;
      ConnStream stream(*c, limits_);
      bool closed = false;
      const bool ok = process_request(stream, false, closed, nullptr);
      keep = ok && !closed && !t_close_after;
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      active_.erase(c->fd);
    }
    if (!keep || stopping_) {
      if (t_close_after) {
        // Let the client read the answer before the close resets it.
        ::shutdown(c->fd, SHUT_WR);
        char sink[16 * 1024];
        const auto until = Clock::now() + std::chrono::milliseconds(500);
        size_t drained = 0;
        pollfd p{c->fd, POLLIN, 0};
        while (drained < (4u << 20) && ::poll(&p, 1, remaining_ms(until)) > 0) {
          const ssize_t n = ::recv(c->fd, sink, sizeof(sink), MSG_DONTWAIT);
          if (n <= 0) break;
          drained += static_cast<size_t>(n);
        }
      }
      close_conn(std::move(c));
      continue;
    }
    c->compact();
    c->started = c->buffered() > 0;
    if (c->started) c->deadline = Clock::now() + limits_.head_deadline;
    {
      std::lock_guard<std::mutex> lock(mu_);
      returning_.push_back(std::move(c));
    }
    const uint64_t one = 1;
    (void)!::write(wake_fd_, &one, sizeof(one));
  }
}

}  // namespace leapfrog::coord
