// The HTTP server under attack, for real: a real PostgreSQL, PgStore, the
// gRPC CoordinatorServer and the HttpServer on 127.0.0.1:0, and requests
// written byte for byte on plain sockets (so the test, not a client library,
// decides the framing), plus the gRPC calls that feed what HTTP serves. Each
// test is one hole of issue 18 and fails on the server before its fix.

#include "coordinator/http/http_server.h"

#include <arpa/inet.h>
#include <grpcpp/generic/generic_stub.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "coordinator/pg/test_postgres.h"
#include "coordinator/server.h"
#include "coordinator/store/pg_store.h"

namespace leapfrog::coord {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;
namespace sfs = std::filesystem;

const std::string kToken = "http-test-token-51c2";
// A safety net for reads that should not block, never an expectation.
constexpr auto kNet = 20s;

struct Answer {
  int status = 0;  // 0: the connection closed or timed out first
  std::string head, body;
  std::string header(const std::string& name) const {
    const std::string key = "\r\n" + name + ": ";
    const auto at = head.find(key);
    if (at == std::string::npos) return "";
    const auto end = head.find("\r\n", at + key.size());
    return head.substr(at + key.size(), end - at - key.size());
  }
};

// One TCP connection to the server, written and read by hand.
class Conn {
 public:
  // `rcvbuf` > 0: a receive buffer that small, so a client that stops
  // reading soon leaves the server's answer unsent.
  explicit Conn(int port, int rcvbuf = 0) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (rcvbuf > 0) ::setsockopt(fd_, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof(rcvbuf));
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0)
      throw std::runtime_error("cannot connect to the test server");
  }
  ~Conn() {
    if (fd_ >= 0) ::close(fd_);
  }
  Conn(const Conn&) = delete;
  Conn& operator=(const Conn&) = delete;

  // False once the peer is gone.
  bool send(const std::string& bytes) {
    size_t done = 0;
    while (done < bytes.size()) {
      const ssize_t n = ::send(fd_, bytes.data() + done, bytes.size() - done, MSG_NOSIGNAL);
      if (n <= 0) return false;
      done += static_cast<size_t>(n);
    }
    return true;
  }
  // The next answer: its head, then Content-Length bytes of body (or up to
  // the close). Status 0 if the connection ended before a whole head.
  Answer read_answer(std::chrono::milliseconds wait = kNet) {
    Answer a;
    size_t end;
    while ((end = buf_.find("\r\n\r\n")) == std::string::npos)
      if (!fill(wait)) return a;
    a.head = buf_.substr(0, end);
    buf_.erase(0, end + 4);
    a.status = std::atoi(a.head.c_str() + a.head.find(' ') + 1);
    const std::string len = a.header("Content-Length");
    if (!len.empty()) {
      const size_t n = std::stoul(len);
      while (buf_.size() < n)
        if (!fill(wait)) break;
      a.body = buf_.substr(0, std::min(n, buf_.size()));
      buf_.erase(0, a.body.size());
    } else {
      while (fill(wait)) {
      }
      a.body.swap(buf_);
    }
    return a;
  }
  // Everything the server sends until it closes the connection; `closed`
  // false if it was still open after `wait`.
  std::string read_until_close(std::chrono::milliseconds wait, bool& closed) {
    const auto until = std::chrono::steady_clock::now() + wait;
    std::string all;
    all.swap(buf_);
    closed = false;
    for (;;) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          until - std::chrono::steady_clock::now());
      if (left.count() <= 0) return all;
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) return all;
      char b[64 * 1024];
      const ssize_t n = ::recv(fd_, b, sizeof(b), 0);
      if (n <= 0) {
        closed = true;
        return all;
      }
      all.append(b, static_cast<size_t>(n));
    }
  }
  // Reads up to `n` bytes if some arrive within `wait`; how many, 0 once
  // the connection is closed (or reset), -1 if nothing came.
  ssize_t read_some(size_t n, std::chrono::milliseconds wait) {
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(wait.count())) <= 0) return -1;
    std::string b(n, '\0');
    const ssize_t got = ::recv(fd_, b.data(), n, 0);
    return got < 0 ? 0 : got;
  }
  // True if the server closed the connection within `wait`.
  bool closed_within(std::chrono::milliseconds wait) {
    const auto until = std::chrono::steady_clock::now() + wait;
    for (;;) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          until - std::chrono::steady_clock::now());
      if (left.count() <= 0) return false;
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) return false;
      char b[4096];
      const ssize_t n = ::recv(fd_, b, sizeof(b), 0);
      if (n <= 0) return true;
    }
  }

 private:
  bool fill(std::chrono::milliseconds wait) {
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(wait.count())) <= 0) return false;
    char b[64 * 1024];
    const ssize_t n = ::recv(fd_, b, sizeof(b), 0);
    if (n <= 0) return false;
    buf_.append(b, static_cast<size_t>(n));
    return true;
  }
  int fd_ = -1;
  std::string buf_;
};

std::string get(const std::string& path, const std::string& host, const std::string& extra = "") {
  return "GET " + path + " HTTP/1.1\r\nHost: " + host + "\r\n" + extra + "\r\n";
}

class HttpServerTest : public testing::PostgresSuite<HttpServerTest> {
 protected:
  void SetUp() override {
    store_ = std::make_unique<PgStore>(pg_->url(fresh_database("http")));
    ServerOptions so;
    so.token = kToken;
    grpc_ = std::make_unique<CoordinatorServer>(*store_, clock_, so);
    control_ = v1::ControlService::NewStub(
        grpc::CreateChannel(grpc_->address(), grpc::InsecureChannelCredentials()));
    files_ = std::make_unique<testing::TestDir>();
    // The coordinator's cache, and a dashboard with a 600 KB asset.
    sfs::create_directories(*files_ / "cache/kbuild/out");
    sfs::create_directories(*files_ / "dist/assets");
    std::ofstream(*files_ / "dist/index.html") << "<!doctype html><title>Leapfrog</title>\n";
    std::ofstream(*files_ / "dist/assets/app.js") << std::string(600 * 1024, 'x');
  }
  void TearDown() override {
    http_.reset();
    grpc_.reset();
    store_.reset();
  }

  HttpOptions options() const {
    HttpOptions o;
    o.token = kToken;
    o.build_caches = {*files_ / "other-cache", *files_ / "cache"};
    o.assets_dir = *files_ / "dist";
    return o;
  }
  void start_http(HttpOptions o) {
    http_ = std::make_unique<HttpServer>(*store_, clock_, std::move(o), grpc_->triage());
    host_ = "127.0.0.1:" + std::to_string(http_->port());
  }
  void start_http() { start_http(options()); }

  // One request on a fresh connection.
  Answer ask(const std::string& request) {
    Conn c(http_->port());
    c.send(request);
    return c.read_answer();
  }

  grpc::Status add_kernel(const v1::Kernel& k) {
    v1::AddKernelRequest req;
    *req.mutable_kernel() = k;
    grpc::ClientContext ctx;
    ctx.AddMetadata("authorization", "Bearer " + kToken);
    ctx.set_deadline(std::chrono::system_clock::now() + kNet);
    v1::Kernel resp;
    return control_->AddKernel(&ctx, req, &resp);
  }

  SystemClock clock_;
  std::unique_ptr<PgStore> store_;
  std::unique_ptr<CoordinatorServer> grpc_;
  std::unique_ptr<v1::ControlService::Stub> control_;
  std::unique_ptr<testing::TestDir> files_;
  std::unique_ptr<HttpServer> http_;
  std::string host_;
};

// ---- 1. file read through a kernel's build log path ----

TEST_F(HttpServerTest, AddKernelRefusesABuildLogPathNoBuilderWrites) {
  start_http();
  v1::Kernel k;
  k.set_label("x");
  k.set_build_log_path("/etc/shadow");
  const grpc::Status s = add_kernel(k);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message();
  EXPECT_NE(s.error_message().find("build log path"), std::string::npos) << s.error_message();
  const Answer a = ask(get("/api/kernels/x", host_));
  EXPECT_EQ(a.status, 404) << a.body;
  EXPECT_EQ(a.body.find("root:"), std::string::npos) << a.body;
}

TEST_F(HttpServerTest, AKernelPageReadsNoLogOutsideTheCoordinatorsCache) {
  start_http();
  const std::string secret = "TOP-SECRET-6f1d";
  // A path of the builders' shape, in another folder.
  const std::string outside = *files_ / "elsewhere/kbuild/out/ab12/build.log";
  sfs::create_directories(sfs::path(outside).parent_path());
  std::ofstream(outside) << secret << "\n";
  // A log in the cache that is a symbolic link out of it.
  const std::string linked = *files_ / "cache/kbuild/out/cd34/build.log";
  sfs::create_directories(sfs::path(linked).parent_path());
  sfs::create_symlink(outside, linked);
  // Positive control: a real log in the cache.
  const std::string real = *files_ / "cache/kbuild/out/ef56/build.log";
  sfs::create_directories(sfs::path(real).parent_path());
  std::ofstream(real) << "  CC fs/namei.o\n";

  for (const auto& [label, path] : std::vector<std::pair<std::string, std::string>>{
           {"outside", outside}, {"linked", linked}, {"real", real}}) {
    v1::Kernel k;
    k.set_label(label);
    k.set_build_log_path(path);
    ASSERT_TRUE(add_kernel(k).ok()) << label;
  }
  for (const std::string label : {"outside", "linked"}) {
    const Answer a = ask(get("/api/kernels/" + label, host_));
    ASSERT_EQ(a.status, 200) << a.body;
    EXPECT_EQ(a.body.find(secret), std::string::npos) << label << " leaks: " << a.body;
    EXPECT_FALSE(json::parse(a.body)["build_log"]["readable"].get<bool>()) << a.body;
  }
  const Answer a = ask(get("/api/kernels/real", host_));
  ASSERT_EQ(a.status, 200) << a.body;
  EXPECT_EQ(json::parse(a.body)["build_log"]["text"], "  CC fs/namei.o\n") << a.body;
}

TEST_F(HttpServerTest, ABuildReportWithAForeignLogPathIsRefused) {
  auto agent = v1::AgentService::NewStub(
      grpc::CreateChannel(grpc_->address(), grpc::InsecureChannelCredentials()));
  v1::ReportOutcomeRequest req;
  req.set_agent_id("a1");
  req.set_job_id(1);
  req.set_attempt(1);
  req.mutable_outcome()->set_verdict(v1::VERDICT_PASS);
  req.mutable_outcome()->mutable_build()->set_log_path("/etc/shadow");
  grpc::ClientContext ctx;
  ctx.AddMetadata("authorization", "Bearer " + kToken);
  ctx.set_deadline(std::chrono::system_clock::now() + kNet);
  v1::ReportOutcomeResponse resp;
  const grpc::Status s = agent->ReportOutcome(&ctx, req, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message();
}

// ---- 1. DNS rebinding: only our own names ----

TEST_F(HttpServerTest, OnlyOurOwnHostNamesAreAnswered) {
  HttpOptions o = options();
  o.allowed_hosts = {"leapfrog.example"};
  start_http(o);
  const std::string port = std::to_string(http_->port());
  for (const std::string& host :
       std::vector<std::string>{"127.0.0.1:" + port, "localhost:" + port, "LOCALHOST:" + port,
                                "leapfrog.example", "leapfrog.example:" + port}) {
    EXPECT_EQ(ask(get("/api/overview", host)).status, 200) << host;
  }
  for (const std::string& host :
       std::vector<std::string>{"evil.example:" + port, "evil.example", "127.0.0.1:1",
                                "localhost.evil.example:" + port}) {
    const Answer a = ask(get("/api/overview", host));
    EXPECT_EQ(a.status, 421) << host << ": " << a.body;
    EXPECT_EQ(a.body.find("\"campaigns\""), std::string::npos) << a.body;
  }
}

// No Host, or two (the first deciding the check, another reaching a proxy's
// routing): 400, for the probes too. A single Host is answered (the control).
TEST_F(HttpServerTest, ARequestWithNoHostOrTwoIsRefused) {
  start_http(options());
  const std::string port = std::to_string(http_->port());
  for (const std::string& path : {"/api/overview", "/healthz"}) {
    EXPECT_EQ(ask("GET " + path + " HTTP/1.1\r\n\r\n").status, 400) << path;
    const Answer two = ask("GET " + path + " HTTP/1.1\r\nHost: 127.0.0.1:" + port +
                           "\r\nHost: evil.example\r\n\r\n");
    EXPECT_EQ(two.status, 400) << path << ": " << two.body;
    EXPECT_EQ(two.body.find("\"campaigns\""), std::string::npos) << two.body;
    EXPECT_EQ(ask(get(path, "127.0.0.1:" + port)).status, 200) << path;
  }
}

// ---- 2. bodies: the token before the body, a cap however framed ----

std::string post_head(const std::string& host, const std::string& framing,
                      const std::string& token) {
  return "POST /api/schedules HTTP/1.1\r\nHost: " + host +
         "\r\nContent-Type: application/json\r\n" +
         (token.empty() ? "" : "Authorization: Bearer " + token + "\r\n") + framing + "\r\n";
}

TEST_F(HttpServerTest, AnActionWithoutTheTokenIsRefusedBeforeItsBodyIsRead) {
  start_http();
  // The head only: a server that reads the body first waits for it.
  for (const std::string framing :
       {"Transfer-Encoding: chunked\r\n", "Content-Length: 314572800\r\n",
        "Content-Length: 100\r\nExpect: 100-continue\r\n"}) {
    Conn c(http_->port());
    c.send(post_head(host_, framing, ""));
    const Answer a = c.read_answer(5s);
    EXPECT_EQ(a.status, 401) << framing << a.head;
    EXPECT_TRUE(c.closed_within(kNet)) << "the unread body would be read as the next request";
  }
}

TEST_F(HttpServerTest, AChunkedBodyPastTheCapIsRefused) {
  start_http();
  Conn c(http_->port());
  ASSERT_TRUE(c.send(post_head(host_, "Transfer-Encoding: chunked\r\n", kToken)));
  // 3 MiB of a valid JSON object, in 64 KiB chunks, sent while the answer is
  // awaited (the server stops reading at the cap).
  std::thread sender([&] {
    std::string body = "{\"name\":\"" + std::string(3 << 20, 'a') + "\"}";
    for (size_t at = 0; at < body.size(); at += 64 << 10) {
      const std::string part = body.substr(at, 64 << 10);
      char size[32];
      std::snprintf(size, sizeof(size), "%zx\r\n", part.size());
      if (!c.send(size + part + "\r\n")) return;
    }
    c.send("0\r\n\r\n");
  });
  const Answer a = c.read_answer();
  sender.join();
  EXPECT_EQ(a.status, 413) << a.head << a.body.substr(0, 200);
  // Positive control: a small chunked body is read whole and reaches the handler.
  Conn d(http_->port());
  const std::string small = "{}";
  d.send(post_head(host_, "Transfer-Encoding: chunked\r\n", kToken) + "2\r\n" + small +
         "\r\n0\r\n\r\n");
  const Answer b = d.read_answer();
  EXPECT_EQ(b.status, 400) << "a schedule without a name is a bad request: " << b.body;
  EXPECT_NE(b.body.find("error"), std::string::npos);
}

TEST_F(HttpServerTest, AContentLengthPastTheCapIsRefusedUnread) {
  start_http();
  Conn c(http_->port());
  c.send(post_head(host_, "Content-Length: 314572800\r\n", kToken));
  const Answer a = c.read_answer(5s);
  EXPECT_EQ(a.status, 413) << a.head;
}

// ---- 3. ranges ----

TEST_F(HttpServerTest, AMultiRangeRequestIsRefused) {
  start_http();
  // 1000 times the whole file, in 3 KB of header.
  std::string ranges = "Range: bytes=0-";
  for (int i = 1; i < 1000; ++i) ranges += ",0-";
  const Answer a = ask(get("/assets/app.js", host_, ranges + "\r\n"));
  EXPECT_EQ(a.status, 416) << a.head;
  EXPECT_LT(a.body.size(), 4096u);
  // Positive control: one range is served.
  const Answer one = ask(get("/assets/app.js", host_, "Range: bytes=10-19\r\n"));
  EXPECT_EQ(one.status, 206) << one.head;
  EXPECT_EQ(one.body, std::string(10, 'x'));
}

// ---- 4. connections: idle and slow clients hold no worker ----

TEST_F(HttpServerTest, IdleAndSlowClientsDoNotLockOthersOut) {
  HttpOptions o = options();
  o.limits.workers = 4;
  o.limits.head_deadline = 1500ms;
  o.limits.idle_timeout = 1500ms;
  start_http(o);
  // Twice the workers of keep-alive clients, each after one request, idle.
  std::vector<std::unique_ptr<Conn>> idle;
  for (int i = 0; i < 8; ++i) {
    idle.push_back(std::make_unique<Conn>(http_->port()));
    idle.back()->send(get("/api/overview", host_));
    ASSERT_EQ(idle.back()->read_answer().status, 200);
  }
  // And as many slowloris clients: half a request head each, never finished.
  std::vector<std::unique_ptr<Conn>> slow;
  for (int i = 0; i < 8; ++i) {
    slow.push_back(std::make_unique<Conn>(http_->port()));
    slow.back()->send("GET /api/overview HTTP/1.1\r\nHost: " + host_ + "\r\nX-Slow: ");
  }
  // A fresh client is answered now, not once they give up.
  const auto t0 = std::chrono::steady_clock::now();
  const Answer a = ask(get("/api/overview", host_));
  const auto took = std::chrono::steady_clock::now() - t0;
  EXPECT_EQ(a.status, 200);
  EXPECT_LT(took, 1s) << "a fresh GET waited for idle or slow clients";
  // The slow heads run out of time and the idle connections are closed.
  for (auto& c : slow) {
    const Answer late = c->read_answer(kNet);
    EXPECT_EQ(late.status, 408) << late.head;
  }
  for (auto& c : idle) EXPECT_TRUE(c->closed_within(kNet));
}

TEST_F(HttpServerTest, ATrickledHeadIsCutAtItsDeadline) {
  HttpOptions o = options();
  o.limits.workers = 2;
  o.limits.head_deadline = 1s;
  start_http(o);
  Conn c(http_->port());
  const std::string head = get("/api/overview", host_, std::string(200, 'X') + ": y\r\n");
  // One byte every 50 ms (a read timeout per byte never fires) would take
  // 12 s; the deadline ends it after 1.
  const auto t0 = std::chrono::steady_clock::now();
  bool cut = false;
  for (char ch : head) {
    if (!c.send(std::string(1, ch))) {
      cut = true;
      break;
    }
    pollfd p{-1, 0, 0};
    ::poll(&p, 0, 50);  // the attack's pace, not synchronisation
    if (std::chrono::steady_clock::now() - t0 > 5s) break;
  }
  const Answer a = c.read_answer(kNet);
  EXPECT_TRUE(cut || a.status == 408) << "status " << a.status;
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 5s);
}

TEST_F(HttpServerTest, ReadsNeedTheTokenBeyondLoopback) {
  EXPECT_TRUE(listens_beyond_loopback("0.0.0.0"));
  EXPECT_TRUE(listens_beyond_loopback("::"));
  EXPECT_TRUE(listens_beyond_loopback("192.168.1.5"));
  EXPECT_FALSE(listens_beyond_loopback("127.0.0.1"));
  EXPECT_FALSE(listens_beyond_loopback("localhost"));
  EXPECT_FALSE(listens_beyond_loopback("::1"));
  // The same policy, forced on a loopback address (tests bind nothing else).
  HttpOptions o = options();
  o.reads_need_token = true;
  start_http(o);
  EXPECT_TRUE(http_->reads_need_token());
  EXPECT_EQ(ask(get("/api/overview", host_)).status, 401);
  EXPECT_EQ(ask(get("/api/overview", host_, "Authorization: Bearer " + kToken + "\r\n")).status,
            200);
}

// ---- 12. encoded NUL bytes in paths ----

TEST_F(HttpServerTest, AnEncodedNulInThePathIsRefused) {
  start_http();
  const Answer a = ask(get("/index.html%00.js", host_));
  EXPECT_EQ(a.status, 400) << a.head;
  EXPECT_EQ(a.body.find("<title>"), std::string::npos) << "index.html served: " << a.body;
  // Positive control: the file itself, as HTML.
  const Answer b = ask(get("/index.html", host_));
  EXPECT_EQ(b.status, 200);
  EXPECT_EQ(b.header("Content-Type").rfind("text/html", 0), 0u) << b.head;
}

// ---- 13. query text that is not UTF-8 ----

TEST_F(HttpServerTest, QueryTextThatIsNotUtf8IsABadRequestWithAShortReason) {
  start_http();
  for (const std::string path : {"/api/outcomes?scenario=%ff%fe", "/api/outcomes?scenario=%c0%af",
                                 "/api/outcomes?scenario=%ed%a0%80"}) {
    SCOPED_TRACE(path);
    const Answer a = ask(get(path, host_));
    EXPECT_EQ(a.status, 400) << a.head << a.body;
    EXPECT_NE(a.body.find("is not UTF-8"), std::string::npos) << a.body;
    EXPECT_LT(a.body.size(), 200u) << a.body;
    EXPECT_EQ(a.body.find("ERROR"), std::string::npos) << "the database's own error: " << a.body;
  }
  // Positive control: UTF-8 text passes to the store and finds nothing.
  const Answer ok = ask(get("/api/outcomes?scenario=caf%C3%A9", host_));
  EXPECT_EQ(ok.status, 200) << ok.head << ok.body;
}

// ---- 14. nosniff and a content security policy on every answer ----

TEST_F(HttpServerTest, EveryAnswerSaysNosniffAndCarriesAContentSecurityPolicy) {
  HttpOptions o = options();
  o.limits.head_deadline = 500ms;
  start_http(o);
  std::string ranges = "Range: bytes=0-0,1-1\r\n";
  const std::vector<std::pair<std::string, int>> asks = {
      {get("/api/overview", host_), 200},
      {get("/api/kernels/%3Cscript%3Ealert(1)%3C%2Fscript%3E", host_), 404},
      {get("/api/nothing", host_), 404},
      {get("/index.html", host_), 200},
      {get("/assets/app.js", host_), 200},
      {get("/assets/app.js", host_, ranges), 416},
      {get("/api/overview", "evil.example"), 421},
      {post_head(host_, "Content-Length: 2\r\n", "") + "{}", 401},
      {post_head(host_, "Content-Length: 2\r\n", kToken) + "{}", 400},
      {"GET /api/overview HTTP/1.1\r\nHost: " + host_ + "\r\nX-Half: ", 408},
  };
  for (const auto& [request, status] : asks) {
    const Answer a = ask(request);
    const std::string first = request.substr(0, request.find('\r'));
    EXPECT_EQ(a.status, status) << first << "\n" << a.head;
    EXPECT_EQ(a.header("X-Content-Type-Options"), "nosniff") << first << "\n" << a.head;
    EXPECT_NE(a.header("Content-Security-Policy").find("script-src 'self';"), std::string::npos)
        << first << "\n"
        << a.head;
  }
}

// ---- 15. a request that is not protobuf (gRPC, on the same server) ----

TEST_F(HttpServerTest, ARequestThatDoesNotParseIsInvalidArgumentWithAReason) {
  auto raw_call = [&](const std::string& method, const std::string& bytes) {
    grpc::GenericStub stub(
        grpc::CreateChannel(grpc_->address(), grpc::InsecureChannelCredentials()));
    grpc::ClientContext ctx;
    ctx.AddMetadata("authorization", "Bearer " + kToken);
    ctx.set_deadline(std::chrono::system_clock::now() + kNet);
    grpc::CompletionQueue cq;
    grpc::Slice slice(bytes);
    grpc::ByteBuffer request(&slice, 1), response;
    grpc::Status status;
    auto rpc = stub.PrepareUnaryCall(&ctx, method, request, &cq);
    rpc->StartCall();
    rpc->Finish(&response, &status, reinterpret_cast<void*>(1));
    void* tag = nullptr;
    bool ok = false;
    EXPECT_TRUE(cq.Next(&tag, &ok));
    cq.Shutdown();
    while (cq.Next(&tag, &ok)) {
    }
    return status;
  };
  // Field 1, length-delimited, 127 bytes long, and nothing after: truncated.
  const std::string truncated("\x0a\x7f", 2);
  // A synchronous handler and a callback one.
  for (const std::string method :
       {"/leapfrog.v1.ControlService/AddKernel", "/leapfrog.v1.AgentService/ReportOutcome"}) {
    const grpc::Status s = raw_call(method, truncated);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT)
        << method << ": " << s.error_message();
    EXPECT_NE(s.error_message().find(method), std::string::npos) << s.error_message();
    EXPECT_NE(s.error_message().find("does not parse"), std::string::npos) << s.error_message();
  }
  // Positive control: the handler's own INVALID_ARGUMENT for a request that parses.
  const grpc::Status empty = raw_call("/leapfrog.v1.ControlService/AddKernel", "");
  EXPECT_EQ(empty.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(empty.error_message(), "kernel label is empty");
}

// ---- 16. a report on another agent's lease ----

TEST_F(HttpServerTest, OnlyTheLeaseHolderReportsOnALeasedJob) {
  auto agent = v1::AgentService::NewStub(
      grpc::CreateChannel(grpc_->address(), grpc::InsecureChannelCredentials()));
  auto context = [](grpc::ClientContext& ctx) {
    ctx.AddMetadata("authorization", "Bearer " + kToken);
    ctx.set_deadline(std::chrono::system_clock::now() + kNet);
  };
  std::map<std::string, std::string> secrets;
  auto register_agent = [&](const std::string& name) {
    v1::RegisterRequest req;
    req.set_name(name);
    req.mutable_capabilities()->set_kernel_label("host");
    req.mutable_capabilities()->add_filesystems("tmpfs");
    grpc::ClientContext ctx;
    context(ctx);
    v1::RegisterResponse resp;
    EXPECT_TRUE(agent->Register(&ctx, req, &resp).ok());
    secrets[resp.agent_id()] = resp.agent_secret();
    return resp.agent_id();
  };
  const std::string holder = register_agent("holder"), other = register_agent("other");
  {
    v1::CreateCampaignRequest req;
    req.mutable_spec()->set_name("one job");
    req.mutable_spec()->add_scenarios("setattr-lookup");
    req.mutable_spec()->add_kernels("host");
    req.mutable_spec()->add_filesystems("tmpfs");
    req.mutable_spec()->set_seeds(1);
    grpc::ClientContext ctx;
    context(ctx);
    v1::Campaign resp;
    ASSERT_TRUE(control_->CreateCampaign(&ctx, req, &resp).ok());
  }
  v1::LeaseResponse lease;
  {
    v1::LeaseRequest req;
    req.set_agent_id(holder);
    req.set_agent_secret(secrets[holder]);
    grpc::ClientContext ctx;
    context(ctx);
    ASSERT_TRUE(agent->Lease(&ctx, req, &lease).ok());
    ASSERT_TRUE(lease.has_job());
  }
  auto report = [&](const std::string& agent_id, v1::ReportOutcomeResponse& resp) {
    v1::ReportOutcomeRequest req;
    req.set_agent_id(agent_id);
    req.set_agent_secret(secrets[agent_id]);
    req.set_job_id(lease.job().job_id());
    req.set_attempt(lease.job().attempt());
    req.mutable_outcome()->set_verdict(v1::VERDICT_PASS);
    req.mutable_outcome()->set_error(agent_id);
    grpc::ClientContext ctx;
    context(ctx);
    return agent->ReportOutcome(&ctx, req, &resp);
  };
  v1::ReportOutcomeResponse theirs, mine;
  const grpc::Status s = report(other, theirs);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::PERMISSION_DENIED) << s.error_message();
  EXPECT_NE(s.error_message().find("leased with another agent_secret"), std::string::npos)
      << s.error_message();
  ASSERT_TRUE(report(holder, mine).ok());
  EXPECT_FALSE(mine.duplicate()) << "the holder's result was dropped for the other's";
  const auto stored = store_->find_outcomes({.limit = 10});
  ASSERT_EQ(stored.size(), 1u);
  EXPECT_EQ(stored[0].outcome().error(), holder);
}

// ---- 17. request smuggling (issue 41 §3) ----

// The status of every answer in `bytes`, in order: each status line that
// starts the stream or a line. (Bodies here are JSON or short text, with no
// line that starts "HTTP/1.".)
std::vector<int> statuses_in(const std::string& bytes) {
  std::vector<int> out;
  for (size_t at = 0; (at = bytes.find("HTTP/1.", at)) != std::string::npos; ++at) {
    if (at != 0 && bytes[at - 1] != '\n') continue;
    out.push_back(std::atoi(bytes.c_str() + at + 9));
  }
  return out;
}

// Each probe hides a second request (GET /api/overview) where a server that
// frames the first one differently from a proxy in front of it would answer
// it. The server must answer the probe once, with 400, and close: the hidden
// request is never answered.
TEST_F(HttpServerTest, ASmuggledRequestIsAnsweredOnceWith400AndTheConnectionCloses) {
  start_http();
  const std::string hidden = get("/api/overview", host_);
  const std::string length = "Content-Length: " + std::to_string(hidden.size()) + "\r\n";
  const std::string chunked = "Transfer-Encoding: chunked\r\n";
  const std::string auth = "Authorization: Bearer " + kToken + "\r\n";
  const std::vector<std::pair<std::string, std::string>> probes = {
      {"GET with a body", get("/healthz", host_, length) + hidden},
      {"HEAD with a body",
       "HEAD /healthz HTTP/1.1\r\nHost: " + host_ + "\r\n" + length + "\r\n" + hidden},
      {"OPTIONS with a body",
       "OPTIONS /api/overview HTTP/1.1\r\nHost: " + host_ + "\r\n" + length + "\r\n" + hidden},
      {"Content-Length then Transfer-Encoding",
       get("/healthz", host_, length + chunked) + "0\r\n\r\n" + hidden},
      {"Transfer-Encoding then Content-Length",
       get("/healthz", host_, chunked + length) + "0\r\n\r\n" + hidden},
      {"two different Content-Lengths",
       get("/healthz", host_, "Content-Length: 0\r\n" + length) + hidden},
      {"a POST's Content-Length then Transfer-Encoding",
       post_head(host_, length + chunked, kToken) + "0\r\n\r\n" + hidden},
      {"a POST's Transfer-Encoding then Content-Length",
       post_head(host_, chunked + "Content-Length: 5\r\n", kToken) + "0\r\n\r\n" + hidden},
      {"a POST's two different Content-Lengths",
       post_head(host_, "Content-Length: 0\r\n" + length, kToken) + hidden},
      {"GET with a chunked body", get("/healthz", host_, chunked) + "0\r\n\r\n" + hidden},
  };
  for (const auto& [what, probe] : probes) {
    SCOPED_TRACE(what);
    Conn c(http_->port());
    ASSERT_TRUE(c.send(probe));
    bool closed = false;
    const std::string all = c.read_until_close(kNet, closed);
    EXPECT_EQ(statuses_in(all), std::vector<int>{400}) << all.substr(0, 600);
    EXPECT_TRUE(closed) << "the connection stayed open after the 400";
  }
  // Positive control: two honest requests sent at once are both answered,
  // on a connection that stays open.
  Conn c(http_->port());
  ASSERT_TRUE(c.send(get("/healthz", host_) + hidden));
  EXPECT_EQ(c.read_answer().status, 200);
  EXPECT_EQ(c.read_answer().status, 200);
  EXPECT_FALSE(c.closed_within(200ms));
}

// After a refused head the rest of it was read as requests, one answer a
// line. One answer, then the close.
TEST_F(HttpServerTest, AfterAnUnknownMethodOrAnOversizedHeadOneAnswerThenTheClose) {
  start_http();
  const std::string rest = "X-One: GET /api/overview HTTP/1.1\r\nX-Two: 2\r\nX-Three: 3\r\n";
  const std::vector<std::tuple<std::string, std::string, int>> probes = {
      {"unknown method", "BREW /healthz HTTP/1.1\r\nHost: " + host_ + "\r\n" + rest + "\r\n", 400},
      {"oversized header",
       get("/healthz", host_, "X-Big: " + std::string(20 * 1024, 'b') + "\r\n" + rest), 431},
  };
  for (const auto& [what, probe, status] : probes) {
    SCOPED_TRACE(what);
    Conn c(http_->port());
    ASSERT_TRUE(c.send(probe));
    bool closed = false;
    const std::string all = c.read_until_close(kNet, closed);
    EXPECT_EQ(statuses_in(all), std::vector<int>{status}) << all.substr(0, 600);
    EXPECT_TRUE(closed);
  }
}

// ---- 18. slow readers (issue 41 §4) ----

// A dashboard file of `mib` MiB, far past what the kernel buffers of one
// connection hold.
void write_big_asset(const sfs::path& dist, size_t mib) {
  std::ofstream(dist / "assets/big.bin") << std::string(mib << 20, 'b');
}

// Clients that ask for a large answer and stop reading it each hold a
// connection, never a worker: with more of them than workers, fresh GETs are
// answered.
TEST_F(HttpServerTest, SlowReadersDoNotStopFreshRequests) {
  HttpOptions o = options();
  o.limits.workers = 2;
  o.limits.write_deadline = 120s;  // they stay slow for the whole test
  start_http(o);
  write_big_asset(*files_ / "dist", 16);
  std::vector<std::unique_ptr<Conn>> slow;
  for (int i = 0; i < 6; ++i) {
    slow.push_back(std::make_unique<Conn>(http_->port(), 4096));
    ASSERT_TRUE(slow.back()->send(get("/assets/big.bin", host_)));
  }
  // Each slow reader takes the first bytes of its answer (so the server has
  // begun writing it), then reads no more.
  for (auto& c : slow) ASSERT_GT(c->read_some(1024, kNet), 0) << "a slow reader got nothing";
  for (int i = 0; i < 3; ++i) {
    const Answer a = ask(get("/api/overview", host_));
    EXPECT_EQ(a.status, 200) << "fresh GET " << i << " was not answered";
  }
}

// A reader that takes its answer a trickle at a time is cut off at the write
// deadline, not served for as long as it likes.
TEST_F(HttpServerTest, ASlowReaderIsClosedAtItsWriteDeadline) {
  HttpOptions o = options();
  o.limits.write_deadline = 2s;
  start_http(o);
  write_big_asset(*files_ / "dist", 16);
  Conn c(http_->port(), 4096);
  ASSERT_TRUE(c.send(get("/assets/big.bin", host_)));
  // 4 KiB every 100 ms: the 16 MiB would take minutes.
  const auto t0 = std::chrono::steady_clock::now();
  size_t got = 0;
  bool closed = false;
  while (std::chrono::steady_clock::now() - t0 < kNet) {
    const ssize_t n = c.read_some(4096, kNet);
    if (n <= 0) {
      closed = n == 0;
      break;
    }
    got += static_cast<size_t>(n);
    pollfd p{-1, 0, 0};
    ::poll(&p, 0, 100);  // the reader's pace, not synchronisation
  }
  EXPECT_TRUE(closed) << "still open after " << got << " bytes";
  EXPECT_LT(got, 16u << 20);
}

}  // namespace
}  // namespace leapfrog::coord
