#include "coordinator/http/connection_server.h"

#include <spdlog/spdlog.h>
#include <sys/socket.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <limits>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <unordered_map>

#include "coordinator/http/request_head.h"

namespace leapfrog::coord {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

namespace {

// After an answer that closes the connection, what the client still sends
// is read and dropped for this long (up to kMaxDrain bytes), so that the
// close does not reset the connection before the client has read the answer.
constexpr auto kLinger = std::chrono::milliseconds(500);
constexpr size_t kMaxDrain = 4 << 20;

void set_error(httplib::Response& res, int status, const std::string& message) {
  res.status = status;
  res.set_content(nlohmann::json{{"error", message}}.dump(), "application/json");
}

}  // namespace

class ConnectionServer::Impl {
 public:
  class Session;

  Impl(ConnectionLimits l, RequestHandlers h)
      : limits(l),
        handlers(std::move(h)),
        acceptor(io),
        retry(io),
        workers(static_cast<size_t>(std::max(1, l.workers))) {}
  ~Impl() { workers.join(); }

  void accept();
  void on_accept(tcp::socket socket);
  // Closes the listener and every connection, then stops the I/O thread.
  void stop();

  const ConnectionLimits limits;
  const RequestHandlers handlers;
  // Sessions unregister themselves when destroyed, which may happen while
  // `io` is destroyed: these outlive it.
  std::mutex mu;
  std::unordered_map<uint64_t, std::weak_ptr<Session>> sessions;
  uint64_t next_id = 0;
  std::atomic<size_t> open{0};
  std::atomic<bool> stopping{false};
  asio::io_context io{1};
  asio::executor_work_guard<asio::io_context::executor_type> busy{io.get_executor()};
  tcp::acceptor acceptor;
  asio::steady_timer retry;  // after an accept error (out of descriptors)
  asio::thread_pool workers;
};

// One connection, on the I/O thread except for its handler's run on a
// worker. Each step arms the one deadline timer; when it fires the pending
// operation is cancelled and its completion sees `timed_out_`.
class ConnectionServer::Impl::Session : public std::enable_shared_from_this<Session> {
 public:
  Session(Impl& server, tcp::socket socket, uint64_t id)
      : server_(server),
        limits_(server.limits),
        socket_(std::move(socket)),
        timer_(server.io),
        buffer_(server.limits.max_head_bytes + (64 << 10)),
        id_(id) {
    beast::error_code ec;
    remote_ = socket_.remote_endpoint(ec);
    local_ = socket_.local_endpoint(ec);
  }
  ~Session() {
    --server_.open;
    std::lock_guard<std::mutex> lock(server_.mu);
    server_.sessions.erase(id_);
  }

  // A new connection owes its head from connect on.
  void start() {
    arm(limits_.head_deadline);
    read_head();
  }
  void close() {
    disarm();
    beast::error_code ec;
    socket_.close(ec);
  }

 private:
  void read_head() {
    parser_.emplace();
    parser_->header_limit(static_cast<std::uint32_t>(limits_.max_head_bytes));
    // Beast would refuse a long Content-Length with the head; the body cap
    // is applied once the head has passed the application's check. (Not
    // boost::none: Beast 1.74 compares the length against it and refuses.)
    parser_->body_limit(std::numeric_limits<std::uint64_t>::max());
    http::async_read_header(
        socket_, buffer_, *parser_,
        [self = shared_from_this()](beast::error_code ec, size_t) { self->on_head(ec); });
  }

  void on_head(beast::error_code ec) {
    if (ec && timed_out_) {
      if (buffer_.size() == 0 && !parser_->got_some()) return close();
      spdlog::info("http.head_timeout remote={}", remote_.address().to_string());
      return refuse(408, "request head not complete in time");
    }
    if (ec == http::error::header_limit || ec == http::error::buffer_overflow)
      return refuse(431, "request header fields too large");
    if (ec == http::error::end_of_stream) return close();
    if (ec.category() == http::make_error_code(http::error::bad_method).category())
      return refuse(400, "malformed request: " + ec.message());
    if (ec) return close();
    disarm();
    if (const std::string fault = framing_fault(*parser_); !fault.empty())
      return refuse(400, "refused request framing: " + fault);
    request_ = request_of(*parser_, remote_, local_);
    if (request_.has_header("Range") &&
        !httplib::detail::parse_range_header(request_.get_header_value("Range"), request_.ranges))
      return refuse(416, "bad Range header");
    httplib::Response res;
    if (server_.handlers.check_head(request_, res)) return write(std::move(res), true);
    if (parser_->is_done()) return dispatch();
    if (parser_->content_length().value_or(0) > limits_.max_body_bytes) return refuse_too_large();
    parser_->body_limit(limits_.max_body_bytes);
    arm(limits_.body_deadline);
    if (beast::iequals(parser_->get()[http::field::expect], "100-continue")) {
      static const std::string kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
      asio::async_write(socket_, asio::buffer(kContinue),
                        [self = shared_from_this()](beast::error_code ec, size_t) {
                          if (ec || self->timed_out_) return self->on_body(ec);
                          self->read_body();
                        });
      return;
    }
    read_body();
  }

  void read_body() {
    http::async_read(
        socket_, buffer_, *parser_,
        [self = shared_from_this()](beast::error_code ec, size_t) { self->on_body(ec); });
  }

  void on_body(beast::error_code ec) {
    if (ec && timed_out_) return refuse(408, "request body not complete in time");
    if (ec == http::error::body_limit) return refuse_too_large();
    if (ec.category() == http::make_error_code(http::error::bad_method).category())
      return refuse(400, "malformed request body: " + ec.message());
    if (ec) return close();
    disarm();
    request_.body = std::move(parser_->get().body());
    dispatch();
  }

  // Runs the handler on a worker, then writes its answer from here.
  void dispatch() {
    asio::post(server_.workers, [self = shared_from_this()] {
      httplib::Response res;
      try {
        self->server_.handlers.answer(self->request_, res);
      } catch (const std::exception& e) {
        spdlog::error("http.handler_error path=\"{}\" error=\"{}\"", self->request_.path, e.what());
        res = httplib::Response();
        set_error(res, 500, "internal error");
      }
      asio::post(self->server_.io,
                 [self, res = std::move(res)]() mutable { self->write(std::move(res), false); });
    });
  }

  void refuse_too_large() {
    refuse(413,
           "the request body is larger than " + std::to_string(limits_.max_body_bytes) + " bytes");
  }
  void refuse(int status, const std::string& message) {
    httplib::Response res;
    set_error(res, status, message);
    write(std::move(res), true);
  }

  // Writes `res` within the write deadline; the connection then closes if
  // `close`, if the client asked, or after any 400.
  void write(httplib::Response res, bool close) {
    const bool head_done = parser_ && parser_->is_header_done();
    close = close || !head_done || !parser_->keep_alive() || res.status == 400 || server_.stopping;
    close_after_ = close;
    out_ = std::make_unique<http::response<http::string_body>>();
    out_->version(11);
    out_->result(static_cast<unsigned>(res.status > 0 ? res.status : 200));
    for (const auto& [name, value] : server_.handlers.default_headers)
      if (!res.has_header(name)) out_->set(name, value);
    for (const auto& [name, value] : res.headers) {
      // cpp-httplib drops such values; a handler's header never splits the answer.
      if (name.find_first_of("\r\n:") != std::string::npos ||
          value.find_first_of("\r\n") != std::string::npos)
        continue;
      out_->insert(name, value);
    }
    out_->body() = std::move(res.body);
    out_->keep_alive(!close);
    out_->prepare_payload();
    // A HEAD answer says the length of the body it leaves out.
    if (head_done && parser_->get().method() == http::verb::head) out_->body().clear();
    arm(limits_.write_deadline);
    http::async_write(socket_, *out_, [self = shared_from_this()](beast::error_code ec, size_t) {
      self->on_written(ec);
    });
  }

  void on_written(beast::error_code ec) {
    if (ec && timed_out_) {
      spdlog::info("http.write_deadline remote={} path=\"{}\"", remote_.address().to_string(),
                   request_.path);
      return abort();
    }
    if (ec) return close();
    disarm();
    out_.reset();
    if (close_after_) return linger();
    request_ = httplib::Request();
    // The next request: already begun (pipelined), or awaited for the idle
    // timeout, its head deadline starting at its first byte.
    if (buffer_.size() > 0) {
      arm(limits_.head_deadline);
      return read_head();
    }
    arm(limits_.idle_timeout);
    socket_.async_wait(tcp::socket::wait_read, [self = shared_from_this()](beast::error_code ec) {
      if (ec || self->timed_out_) return self->close();
      self->disarm();
      self->arm(self->limits_.head_deadline);
      self->read_head();
    });
  }

  // Stops sending, drops what the client still sends for a moment, closes.
  void linger() {
    beast::error_code ignored;
    socket_.shutdown(tcp::socket::shutdown_send, ignored);
    arm(kLinger);
    drain();
  }
  void drain() {
    static std::array<char, 16 << 10> sink;  // contents unused; one I/O thread
    socket_.async_read_some(asio::buffer(sink),
                            [self = shared_from_this()](beast::error_code ec, size_t n) {
                              self->drained_ += n;
                              if (ec || self->timed_out_ || self->drained_ > kMaxDrain)
                                return self->close();
                              self->drain();
                            });
  }

  // Resets the connection: the kernel drops the unsent rest of the answer.
  void abort() {
    beast::error_code ignored;
    socket_.set_option(asio::socket_base::linger(true, 0), ignored);
    close();
  }

  void arm(std::chrono::milliseconds d) {
    timed_out_ = false;
    timer_.expires_after(d);
    timer_.async_wait([self = shared_from_this(), armed = ++armed_](beast::error_code ec) {
      if (ec || armed != self->armed_) return;
      self->timed_out_ = true;
      beast::error_code ignored;
      self->socket_.cancel(ignored);
    });
  }
  void disarm() {
    ++armed_;
    timer_.cancel();
  }

  Impl& server_;
  const ConnectionLimits& limits_;
  tcp::socket socket_;
  asio::steady_timer timer_;
  uint64_t armed_ = 0;  // which arm() the timer's completion belongs to
  bool timed_out_ = false;
  beast::flat_buffer buffer_;
  std::optional<RequestParser> parser_;
  httplib::Request request_;
  std::unique_ptr<http::response<http::string_body>> out_;
  bool close_after_ = false;
  size_t drained_ = 0;
  tcp::endpoint remote_, local_;
  const uint64_t id_;
};

void ConnectionServer::Impl::accept() {
  acceptor.async_accept([this](beast::error_code ec, tcp::socket socket) {
    if (!acceptor.is_open() || stopping) return;
    if (!ec) {
      on_accept(std::move(socket));
      return accept();
    }
    // Out of descriptors, say: try again shortly rather than spin.
    spdlog::warn("http.accept_error error=\"{}\"", ec.message());
    retry.expires_after(std::chrono::milliseconds(50));
    retry.async_wait([this](beast::error_code) {
      if (!stopping) accept();
    });
  });
}

void ConnectionServer::Impl::on_accept(tcp::socket socket) {
  if (open >= limits.max_connections) {
    const std::string text = "{\"error\":\"too many connections\"}";
    const std::string out =
        "HTTP/1.1 503 Service Unavailable\r\nContent-Type: "
        "application/json\r\nContent-Length: " +
        std::to_string(text.size()) +
        "\r\nX-Content-Type-Options: nosniff\r\nContent-Security-Policy: " +
        kContentSecurityPolicy + "\r\nConnection: close\r\n\r\n" + text;
    (void)!::send(socket.native_handle(), out.data(), out.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    return;
  }
  beast::error_code ignored;
  socket.set_option(tcp::no_delay(true), ignored);
  ++open;
  std::shared_ptr<Session> s;
  {
    std::lock_guard<std::mutex> lock(mu);
    const uint64_t id = next_id++;
    s = std::make_shared<Session>(*this, std::move(socket), id);
    sessions[id] = s;
  }
  s->start();
}

void ConnectionServer::Impl::stop() {
  beast::error_code ignored;
  acceptor.close(ignored);
  retry.cancel();
  std::vector<std::shared_ptr<Session>> all;
  {
    std::lock_guard<std::mutex> lock(mu);
    for (auto& [id, weak] : sessions)
      if (auto s = weak.lock()) all.push_back(std::move(s));
  }
  for (auto& s : all) s->close();
  busy.reset();
  io.stop();
}

ConnectionServer::ConnectionServer(ConnectionLimits limits, RequestHandlers handlers)
    : impl_(std::make_unique<Impl>(limits, std::move(handlers))) {}

ConnectionServer::~ConnectionServer() {
  stop_serving();
}

int ConnectionServer::bind_listener(const std::string& host, int port) {
  beast::error_code ec;
  tcp::resolver resolver(impl_->io);
  const auto found = resolver.resolve(host, std::to_string(port),
                                      tcp::resolver::passive | tcp::resolver::numeric_service, ec);
  if (ec) return -1;
  for (const auto& entry : found) {
    tcp::acceptor& a = impl_->acceptor;
    a.open(entry.endpoint().protocol(), ec);
    if (ec) continue;
    a.set_option(asio::socket_base::reuse_address(true), ec);
    a.bind(entry.endpoint(), ec);
    if (!ec) a.listen(impl_->limits.listen_backlog, ec);
    if (!ec) return a.local_endpoint(ec).port();
    a.close(ec);
  }
  return -1;
}

void ConnectionServer::serve() {
  if (impl_->acceptor.is_open()) impl_->accept();
  impl_->io.run();
  impl_->workers.join();
}

void ConnectionServer::stop_serving() {
  if (impl_->stopping.exchange(true)) return;
  asio::post(impl_->io, [impl = impl_.get()] { impl->stop(); });
}

}  // namespace leapfrog::coord
