#pragma once
// The pieces every group of JSON endpoints shares: the context handlers read,
// route registration with the token check for actions, and the answer to
// what a handler throws (its status by the table of error_status.h, and
// {"error": ...}).

#include <functional>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

#include "coordinator/clock.h"
#include "coordinator/error_status.h"
#include "coordinator/store/store.h"
#include "leapfrog/v1/control.pb.h"

namespace httplib {
struct Request;
struct Response;
}  // namespace httplib

namespace leapfrog::metrics {
class CoordinatorMetrics;
}

namespace leapfrog::coord {

struct HttpOptions;
class HttpRoutes;
namespace triage {
class TriageEngine;
}

// What handlers work with.
struct ApiContext {
  Store& store;
  const Clock& clock;
  const HttpOptions& options;
};

using Handler = std::function<nlohmann::json(const httplib::Request&)>;

// Registers handlers on the routes; each answers JSON (status 200, or
// answer_error's for what it throws). Actions check the token before the handler runs. The
// routes and the token must outlive the handlers; the router need not.
class ApiRouter {
 public:
  ApiRouter(HttpRoutes& routes, const std::string& token) : routes_(routes), token_(token) {}
  void get(const std::string& pattern, Handler h);
  // method: POST, DELETE, or GET for a read that needs the token on any address.
  void action(const std::string& method, const std::string& pattern, Handler h);

 private:
  HttpRoutes& routes_;
  const std::string& token_;
};

// Answers `error` (not null), thrown while serving `path`, with its status
// by the table (error_status.h) and {"error": message}.
void answer_error(httplib::Response& res, const std::string& path, std::exception_ptr error);

// ---- request helpers ----
// The body as a JSON object; 400 if it is not one.
nlohmann::json json_body(const httplib::Request& req);
// Path capture `i` as an id; 400 if it is not a positive integer.
int64_t path_id(const httplib::Request& req, size_t i);
// Query parameter as an unsigned number in [lo, hi], or `fallback` if absent; 400 otherwise.
uint32_t query_uint(const httplib::Request& req, const std::string& name, uint32_t fallback,
                    uint32_t lo, uint32_t hi);
// The "page" query parameter: the next page token of the previous answer ("" if absent).
std::string query_page(const httplib::Request& req);
// Field `key` of `body` with the wanted JSON type; 400 naming the field otherwise.
std::string body_string(const nlohmann::json& body, const std::string& key, bool required = true);

// ---- endpoint groups ----
// Overview, campaigns, jobs, agents, kernels, schedules, scaling (core_api.cc).
void register_core_api(ApiRouter& router, ApiContext ctx);
// Issues, their status and notes, replay/minimize/bisect (triage_api.cc).
void register_triage_api(ApiRouter& router, ApiContext ctx, triage::TriageEngine& engine);
// GET /api/actions/{id}/reproducer.c: a file, not JSON.
void register_triage_files(HttpRoutes& routes, triage::TriageEngine& engine);
// One kernel with its build log and findings (kernels_api.cc); `engine` may be null.
void register_kernel_api(ApiRouter& router, ApiContext ctx, triage::TriageEngine* engine);
// GET /api/campaigns/{id}/export?format=...: a file, not JSON (export_api.cc);
// `triage` may be null (no issues in the exports).
void register_export_api(HttpRoutes& routes, Store& store, triage::TriageEngine* triage,
                         const HttpOptions& options);
// GET /healthz, /readyz and /metrics: text, not JSON (health_api.cc);
// `metrics` may be null (/metrics is then 404, /readyz asks the store).
void register_health_api(HttpRoutes& routes, Store& store, metrics::CoordinatorMetrics* metrics);
// The registered kernels among `labels`, by label, into `out` (a label with
// no kernel stays absent), for the views of findings.
void add_kernels(Store& store, const std::vector<std::string>& labels,
                 google::protobuf::Map<std::string, v1::Kernel>& out);
// The build log at `path`: {"path", "readable", "size", "truncated", "text",
// "error"}; past kBuildLogCap bytes only its last whole lines. `path` came
// from a client, so it is read only if it is a build log of the cache at
// `cache_dir` (<cache_dir>/kbuild/out/<hash>/build.log) and resolves, through
// any symbolic links, to a regular file inside that folder; anything else
// (a log on another host, any other file) is just not readable.
constexpr uintmax_t kBuildLogCap = 256 * 1024;
nlohmann::json build_log(const std::string& cache_dir, const std::string& path);

}  // namespace leapfrog::coord
