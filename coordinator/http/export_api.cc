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

void register_export_api(httplib::Server& server, Store& store, triage::TriageEngine* triage,
                         const HttpOptions& options) {
  server.Get(R"(/api/campaigns/(\d+)/export)", [&store, triage, &options](
                                                   const httplib::Request& req,
                                                   httplib::Response& res) {
    try {
      const int64_t id = std::stoll(req.matches[1]);
      if (!req.has_param("format"))
        throw RequestError(ErrorKind::kInvalidArgument,
                           "missing parameter \"format\": want kcidb, junit or ktap");
      exports::Format f{};
      exports::ExportOptions o;
      try {
        f = exports::parse_format(req.get_param_value("format"));
        o.origin = req.has_param("origin") ? req.get_param_value("origin") : options.export_origin;
        exports::check_origin(o.origin);
      } catch (const std::invalid_argument& e) {
        throw RequestError(ErrorKind::kInvalidArgument, e.what());
      }
      // Links start at the public base, or else where this request came from
      // (its Host was checked).
      o.link_base = options.link_base;
      if (o.link_base.empty() && req.has_header("Host"))
        o.link_base = "http://" + req.get_header_value("Host");
      auto data = exports::gather(store, triage, id);
      if (!data)
        throw RequestError(ErrorKind::kNotFound, "no campaign \"" + std::to_string(id) + "\"");
      res.set_header("Content-Disposition", "inline; filename=\"campaign-" + std::to_string(id) +
                                                exports::file_suffix(f) + "\"");
      res.set_content(exports::render(f, *data, o), exports::content_type(f));
    } catch (...) {
      answer_error(res, req.path, std::current_exception());
    }
  });
}

}  // namespace leapfrog::coord
