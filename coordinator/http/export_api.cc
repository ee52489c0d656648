// GET /api/campaigns/{id}/export?format=kcidb|junit|ktap[&origin=NAME]: a
// campaign as a file in a kernel CI format (docs/exports.md). A read: the
// token rules are those of every GET (http_server.h).

#include <httplib.h>

#include <nlohmann/json.hpp>
#include <stdexcept>

#include "coordinator/export/export.h"
#include "coordinator/http/api.h"
#include "coordinator/http/http_server.h"

namespace leapfrog::coord {

namespace {

void answer_error(httplib::Response& res, int status, const std::string& what) {
  res.status = status;
  res.set_content(nlohmann::json{{"error", what}}.dump(), "application/json");
}

}  // namespace

void register_export_api(httplib::Server& server, Store& store, triage::TriageEngine* triage,
                         const HttpOptions& options) {
  server.Get(R"(/api/campaigns/(\d+)/export)", [&store, triage, &options](
                                                   const httplib::Request& req,
                                                   httplib::Response& res) {
    try {
      const int64_t id = std::stoll(req.matches[1]);
      if (!req.has_param("format"))
        return answer_error(res, 400, "missing parameter \"format\": want kcidb, junit or ktap");
      const exports::Format f = exports::parse_format(req.get_param_value("format"));
      exports::ExportOptions o;
      o.origin = req.has_param("origin") ? req.get_param_value("origin") : options.export_origin;
      exports::check_origin(o.origin);
      // Links point where this request came from (its Host was checked).
      if (req.has_header("Host")) o.link_base = "http://" + req.get_header_value("Host");
      auto data = exports::gather(store, triage, id);
      if (!data) return answer_error(res, 404, "no campaign \"" + std::to_string(id) + "\"");
      res.set_header("Content-Disposition", "inline; filename=\"campaign-" + std::to_string(id) +
                                                exports::file_suffix(f) + "\"");
      res.set_content(exports::render(f, *data, o), exports::content_type(f));
    } catch (const std::invalid_argument& e) {
      answer_error(res, 400, e.what());
    } catch (const StoreError& e) {
      answer_error(res, e.unavailable() ? 503 : 409, e.what());
    } catch (const std::exception& e) {
      answer_error(res, 500, e.what());
    }
  });
}

}  // namespace leapfrog::coord
