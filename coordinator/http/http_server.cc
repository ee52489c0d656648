#include "coordinator/http/http_server.h"

#include <httplib.h>
#include <spdlog/spdlog.h>

#include <unistd.h>

#include <algorithm>
#include <filesystem>

#include "coordinator/campaign.h"
#include "coordinator/http/api.h"
#include "coordinator/http/connection_server.h"
#include "coordinator/http/routes.h"
#include "coordinator/wire_paths.h"

namespace leapfrog::coord {

using nlohmann::json;

namespace {

constexpr size_t kMaxBody = 1 << 20;

void send_json(httplib::Response& res, int status, const json& body) {
  res.status = status;
  res.set_header("Cache-Control", "no-store");
  // Replace invalid UTF-8 (agents' console text) instead of failing.
  res.set_content(body.dump(-1, ' ', false, json::error_handler_t::replace), "application/json");
}

void send_error(httplib::Response& res, int status, const std::string& message) {
  send_json(res, status, json{{"error", message}});
}

// Runs `h` and answers its JSON, or the error it threw.
void run_handler(const Handler& h, const httplib::Request& req, httplib::Response& res) {
  try {
    send_json(res, 200, h(req));
  } catch (...) {
    answer_error(res, req.path, std::current_exception());
  }
}

// 401 unless the request carries "Authorization: Bearer <token>".
void check_token(const httplib::Request& req, const std::string& token) {
  if (!req.has_header("Authorization"))
    throw RequestError(ErrorKind::kUnauthenticated,
                       "missing token: send \"Authorization: Bearer <token>\"");
  const std::string value = req.get_header_value("Authorization");
  const std::string prefix = "Bearer ";
  if (value.rfind(prefix, 0) != 0)
    throw RequestError(ErrorKind::kUnauthenticated,
                       "malformed authorization header, want \"Bearer <token>\"");
  const std::string given = value.substr(prefix.size());
  // Constant-time comparison.
  unsigned char diff = given.size() != token.size();
  for (size_t i = 0; i < given.size() && i < token.size(); ++i) diff |= given[i] ^ token[i];
  if (diff) throw RequestError(ErrorKind::kUnauthenticated, "wrong token");
}

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

// Sends `status` with {"error": message}; the connection closes after it
// (it may hold an unread body).
bool refuse(httplib::Response& res, int status, const std::string& message) {
  send_error(res, status, message);
  return true;
}

// Whether `s` is well-formed UTF-8 (no overlong forms, surrogates or code
// points past U+10FFFF): what PostgreSQL takes as text.
bool valid_utf8(const std::string& s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    size_t n = 0;
    uint32_t cp = 0;
    if (c < 0x80) {
      ++i;
      continue;
    }
    if ((c & 0xe0) == 0xc0) {
      n = 1;
      cp = c & 0x1f;
    } else if ((c & 0xf0) == 0xe0) {
      n = 2;
      cp = c & 0x0f;
    } else if ((c & 0xf8) == 0xf0) {
      n = 3;
      cp = c & 0x07;
    } else {
      return false;
    }
    for (size_t k = 1; k <= n; ++k) {
      if (i + k >= s.size()) return false;
      const auto cc = static_cast<unsigned char>(s[i + k]);
      if ((cc & 0xc0) != 0x80) return false;
      cp = (cp << 6) | (cc & 0x3f);
    }
    static constexpr uint32_t kMin[] = {0, 0x80, 0x800, 0x10000};
    if (cp < kMin[n] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return false;
    i += n + 1;
  }
  return true;
}

std::pair<std::string, int> split_listen(const std::string& listen) {
  const auto colon = listen.rfind(':');
  if (colon == std::string::npos)
    throw std::runtime_error("bad HTTP address \"" + listen + "\", want HOST:PORT");
  try {
    return {listen.substr(0, colon), std::stoi(listen.substr(colon + 1))};
  } catch (const std::exception&) {
    throw std::runtime_error("bad HTTP address \"" + listen + "\", want HOST:PORT");
  }
}

}  // namespace

// ---- ApiRouter and request helpers ----

void answer_error(httplib::Response& res, const std::string& path, std::exception_ptr error) {
  const HttpErrorAnswer a = http_error_of(path, error);
  send_error(res, a.status, a.message);
}

void ApiRouter::get(const std::string& pattern, Handler h) {
  routes_.get(pattern, [h = std::move(h)](const httplib::Request& req, httplib::Response& res) {
    run_handler(h, req, res);
  });
}

void ApiRouter::action(const std::string& method, const std::string& pattern, Handler h) {
  // The router is gone when requests come; the token it refers to is not.
  const std::string* token = &token_;
  auto wrapped = [h = std::move(h), token](const httplib::Request& req, httplib::Response& res) {
    run_handler(
        [&](const httplib::Request& r) {
          check_token(r, *token);
          return h(r);
        },
        req, res);
  };
  if (method != "GET" && method != "POST" && method != "DELETE")
    throw std::logic_error("unsupported method " + method);
  routes_.add(method, pattern, wrapped);
}

// ---- HttpServer ----

bool listens_beyond_loopback(const std::string& host) {
  return !(host.rfind("127.", 0) == 0 || host == "::1" || host == "[::1]" ||
           lower(host) == "localhost");
}

// Every request passes here after its head and before routing, so before its
// body is read.
bool HttpServer::refused(const httplib::Request& req, httplib::Response& res) const {
  const bool reads = req.method == "GET" || req.method == "HEAD" || req.method == "OPTIONS";
  // Load balancers' and kubelets' probes carry no token and name the
  // address they dialled as Host; the answer says only whether this
  // process serves, so neither check applies.
  const bool probe = reads && (req.path == "/healthz" || req.path == "/readyz");
  // HTTP/1.1 names its host exactly once; without one, or with two, which
  // name the check below should judge is a guess a proxy may make otherwise
  // (issue 41 §7).
  const size_t hosts = req.get_header_value_count("Host");
  if (hosts == 0) return refuse(res, 400, "the request has no Host header");
  if (hosts > 1)
    return refuse(res, 400, "the request has " + std::to_string(hosts) + " Host headers");
  // A page on another origin that rebinds its name to 127.0.0.1 still sends
  // its own name as Host.
  if (!probe) {
    const std::string host = lower(req.get_header_value("Host"));
    if (std::find(hosts_.begin(), hosts_.end(), host) == hosts_.end())
      return refuse(res, 421,
                    "this server does not answer for host " + quote_prefix(host, 80) +
                        "; use http://127.0.0.1:" + std::to_string(port_) +
                        "/ or allow the name with --http-allow-host");
  }
  if (req.path.find('\0') != std::string::npos)
    return refuse(res, 400, "the path holds a NUL byte");
  // Query text reaches PostgreSQL, which refuses bytes that are not UTF-8
  // (and said so in a 409 with its own message).
  if (!valid_utf8(req.path)) return refuse(res, 400, "the path is not UTF-8");
  for (const auto& [name, value] : req.params) {
    if (!valid_utf8(name)) return refuse(res, 400, "a query parameter name is not UTF-8");
    if (!valid_utf8(value) || value.find('\0') != std::string::npos)
      return refuse(res, 400, "query parameter " + quote_prefix(name, 40) + " is not UTF-8 text");
  }
  // Each range of a multi-range answer repeats headers and may repeat bytes:
  // 1000 ranges made 632 MB of a 630 KB file.
  if (req.ranges.size() > 1)
    return refuse(res, 416, "multiple ranges are not served; ask for one range");
  if ((!reads || reads_need_token_) && !probe) {
    try {
      check_token(req, opts_.token);
    } catch (const RequestError& e) {
      return refuse(res, error_kind_status(e.kind()).http, e.what());
    }
  }
  if (req.has_header("Content-Length")) {
    const std::string text = req.get_header_value("Content-Length");
    size_t used = 0;
    unsigned long long n = 0;
    try {
      n = std::stoull(text, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || used != text.size())
      return refuse(res, 400, "bad Content-Length " + quote_prefix(text, 40));
    if (n > kMaxBody) return refuse(res, 413, "the request body is larger than 1 MiB");
  }
  return false;
}

HttpServer::HttpServer(Store& store, const Clock& clock, HttpOptions opts,
                       triage::TriageEngine* triage, metrics::CoordinatorMetrics* metrics)
    : opts_(std::move(opts)), routes_(std::make_unique<HttpRoutes>()) {
  auto [host, port] = split_listen(opts_.listen);
  host_ = host;
  RequestHandlers handlers;
  // Every request's head passes here before its body is read.
  handlers.check_head = [this](const httplib::Request& req, httplib::Response& res) {
    return refused(req, res);
  };
  handlers.answer = [this](httplib::Request& req, httplib::Response& res) {
    routes_->answer(req, res);
  };
  // On every answer: no content sniffing (a JSON error that echoes
  // "<script>" stays JSON), and a policy that runs only our own scripts.
  handlers.default_headers = {{"X-Content-Type-Options", "nosniff"},
                              {"Content-Security-Policy", kContentSecurityPolicy},
                              {"Referrer-Policy", "no-referrer"}};
  server_ = std::make_unique<ConnectionServer>(opts_.limits, std::move(handlers));
  // Bind first: the Host check needs the port.
  port_ = server_->bind_listener(host_, port);
  if (port_ <= 0) throw std::runtime_error("cannot listen on \"" + opts_.listen + "\" for HTTP");
  const std::string p = ":" + std::to_string(port_);
  hosts_ = {"127.0.0.1" + p, "localhost" + p, "[::1]" + p, lower(host_) + p};
  for (const auto& h : opts_.allowed_hosts) {
    hosts_.push_back(lower(h));
    if (h.find(':') == std::string::npos) hosts_.push_back(lower(h) + p);
  }
  reads_need_token_ = opts_.reads_need_token || listens_beyond_loopback(host_);
  if (listens_beyond_loopback(host_)) {
    spdlog::warn(
        "http.not_loopback listen={} reads_need_token=true why=\"the dashboard and API are "
        "reachable from other machines; every request needs the token\"",
        opts_.listen);
    char name[256] = "";
    if (gethostname(name, sizeof(name) - 1) == 0 && name[0]) {
      hosts_.push_back(lower(name));
      hosts_.push_back(lower(name) + p);
    }
  }
  ApiRouter router(*routes_, opts_.token);
  ApiContext ctx{store, clock, opts_};
  register_core_api(router, ctx);
  if (triage) {
    register_triage_api(router, ctx, *triage);
    register_triage_files(*routes_, *triage);
  }
  register_kernel_api(router, ctx, triage);
  register_export_api(*routes_, store, triage, opts_);
  register_health_api(*routes_, store, metrics);
  for (const auto& add : opts_.extra_api) add(router);
  // Unknown API paths answer JSON, not the static 404 page.
  routes_->get(R"(/api/.*)", [](const httplib::Request& req, httplib::Response& res) {
    send_error(res, 404, "no endpoint \"" + req.path + "\"");
  });
  namespace stdfs = std::filesystem;
  std::error_code ec;
  if (!opts_.assets_dir.empty() &&
      stdfs::is_regular_file(stdfs::path(opts_.assets_dir) / "index.html", ec)) {
    routes_->serve_files(opts_.assets_dir);
  } else {
    spdlog::warn("http.no_dashboard assets_dir=\"{}\"", opts_.assets_dir);
    routes_->get("/", [](const httplib::Request&, httplib::Response& res) {
      res.set_content("The dashboard was not built (run `make build`); the API is under /api/.\n",
                      "text/plain");
    });
  }
  thread_ = std::thread([this] { server_->serve(); });
  spdlog::info("http.listen url={}", url());
}

HttpServer::~HttpServer() {
  shutdown();
}

std::string HttpServer::url() const {
  return "http://" + host_ + ":" + std::to_string(port_);
}

void HttpServer::shutdown() {
  if (!thread_.joinable()) return;
  server_->stop_serving();
  thread_.join();
}

}  // namespace leapfrog::coord
