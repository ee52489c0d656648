#include "coordinator/http/http_server.h"

#include <httplib.h>
#include <spdlog/spdlog.h>

#include <filesystem>

#include "coordinator/campaign.h"
#include "coordinator/http/api.h"

namespace leapfrog::coord {

using nlohmann::json;

namespace {

void send_json(httplib::Response& res, int status, const json& body) {
  res.status = status;
  res.set_header("Cache-Control", "no-store");
  // Replace invalid UTF-8 (agents' console text) instead of failing.
  res.set_content(body.dump(-1, ' ', false, json::error_handler_t::replace), "application/json");
}

void send_error(httplib::Response& res, int status, const std::string& message) {
  send_json(res, status, json{{"error", message}});
}

// Runs `h` and answers its JSON, or the error it threw: the one boundary
// where request failures become statuses.
void run_handler(const Handler& h, const httplib::Request& req, httplib::Response& res) {
  try {
    send_json(res, 200, h(req));
  } catch (const HttpError& e) {
    send_error(res, e.status(), e.what());
  } catch (const SpecError& e) {
    send_error(res, 400, e.what());
  } catch (const StoreError& e) {
    spdlog::warn("http.store_error path={} unavailable={} error=\"{}\"", req.path, e.unavailable(),
                 e.what());
    send_error(res, e.unavailable() ? 503 : 409, e.what());
  } catch (const std::exception& e) {
    spdlog::error("http.error path={} error=\"{}\"", req.path, e.what());
    send_error(res, 500, e.what());
  }
}

// 401 unless the request carries "Authorization: Bearer <token>".
void check_token(const httplib::Request& req, const std::string& token) {
  if (!req.has_header("Authorization"))
    throw HttpError(401, "missing token: send \"Authorization: Bearer <token>\"");
  const std::string value = req.get_header_value("Authorization");
  const std::string prefix = "Bearer ";
  if (value.rfind(prefix, 0) != 0)
    throw HttpError(401, "malformed authorization header, want \"Bearer <token>\"");
  const std::string given = value.substr(prefix.size());
  // Constant-time comparison.
  unsigned char diff = given.size() != token.size();
  for (size_t i = 0; i < given.size() && i < token.size(); ++i) diff |= given[i] ^ token[i];
  if (diff) throw HttpError(401, "wrong token");
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

void ApiRouter::get(const std::string& pattern, Handler h) {
  server_.Get(pattern, [h = std::move(h)](const httplib::Request& req, httplib::Response& res) {
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
  if (method == "POST") {
    server_.Post(pattern, wrapped);
  } else if (method == "DELETE") {
    server_.Delete(pattern, wrapped);
  } else {
    throw std::logic_error("unsupported method " + method);
  }
}

json json_body(const httplib::Request& req) {
  json body = json::parse(req.body, nullptr, false);
  if (body.is_discarded()) throw HttpError(400, "the request body is not JSON");
  if (!body.is_object()) throw HttpError(400, "the request body must be a JSON object");
  return body;
}

int64_t path_id(const httplib::Request& req, size_t i) {
  const std::string text = req.matches[i];
  try {
    size_t used = 0;
    const long long id = std::stoll(text, &used);
    if (used == text.size() && id > 0) return id;
  } catch (const std::exception&) {
  }
  throw HttpError(400, "bad id \"" + text + "\"");
}

uint32_t query_uint(const httplib::Request& req, const std::string& name, uint32_t fallback,
                    uint32_t lo, uint32_t hi) {
  if (!req.has_param(name.c_str())) return fallback;
  const std::string text = req.get_param_value(name.c_str());
  try {
    size_t used = 0;
    const unsigned long v = std::stoul(text, &used);
    if (used == text.size() && v >= lo && v <= hi) return static_cast<uint32_t>(v);
  } catch (const std::exception&) {
  }
  throw HttpError(400, "bad " + name + " \"" + text + "\", want " + std::to_string(lo) + ".." +
                           std::to_string(hi));
}

std::string body_string(const json& body, const std::string& key, bool required) {
  auto it = body.find(key);
  if (it == body.end() || it->is_null()) {
    if (required) throw HttpError(400, "\"" + key + "\" is missing");
    return "";
  }
  if (!it->is_string()) throw HttpError(400, "\"" + key + "\" must be a string");
  return it->get<std::string>();
}

// ---- HttpServer ----

HttpServer::HttpServer(Store& store, const Clock& clock, HttpOptions opts,
                       triage::TriageEngine* triage)
    : opts_(std::move(opts)), server_(std::make_unique<httplib::Server>()) {
  auto [host, port] = split_listen(opts_.listen);
  host_ = host;
  server_->set_payload_max_length(1 << 20);
  // httplib closes a connection after 5 requests by default; clients that
  // reuse it (the dashboard polls) then race the close.
  server_->set_keep_alive_max_count(100000);
  ApiRouter router(*server_, opts_.token);
  ApiContext ctx{store, clock, opts_};
  register_core_api(router, ctx);
  if (triage) {
    register_triage_api(router, ctx, *triage);
    register_triage_files(*server_, *triage);
  }
  register_kernel_api(router, ctx, triage);
  // Unknown API paths answer JSON, not the static 404 page.
  server_->Get(R"(/api/.*)", [](const httplib::Request& req, httplib::Response& res) {
    send_error(res, 404, "no endpoint \"" + req.path + "\"");
  });
  namespace stdfs = std::filesystem;
  std::error_code ec;
  if (!opts_.assets_dir.empty() &&
      stdfs::is_regular_file(stdfs::path(opts_.assets_dir) / "index.html", ec)) {
    server_->set_mount_point("/", opts_.assets_dir);
  } else {
    spdlog::warn("http.no_dashboard assets_dir=\"{}\"", opts_.assets_dir);
    server_->Get("/", [](const httplib::Request&, httplib::Response& res) {
      res.set_content("The dashboard was not built (run `make build`); the API is under /api/.\n",
                      "text/plain");
    });
  }
  port_ = port == 0 ? server_->bind_to_any_port(host_)
                    : (server_->bind_to_port(host_, port) ? port : -1);
  if (port_ <= 0) throw std::runtime_error("cannot listen on \"" + opts_.listen + "\" for HTTP");
  thread_ = std::thread([this] { server_->listen_after_bind(); });
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
  server_->stop();
  thread_.join();
}

}  // namespace leapfrog::coord
