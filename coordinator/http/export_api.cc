// GET /api/campaigns/{id}/export?format=kcidb|junit|ktap[&origin=NAME]: a
// campaign as a file in a kernel CI format (docs/exports.md). A read: the
// token rules are those of every GET (http_server.h).

#include <httplib.h>

#include <nlohmann/json.hpp>
#include <stdexcept>

#include "coordinator/export/export.h"
#include "coordinator/http/api.h"
#include "coordinator/http/http_server.h"
#include "coordinator/http/routes.h"
#include "coordinator/triage/issue_report.h"
#include "coordinator/triage/triage_engine.h"

namespace leapfrog::coord {

namespace {

// GET /api/issues/{id}/report?format=markdown|mail: the issue as a report
// for a kernel list (coordinator/triage/issue_report.h), as `leapfrog issue
// report` writes it, to download from the issue's page.
void register_issue_report(HttpRoutes& routes, Store& store, triage::TriageEngine* triage,
                           const HttpOptions& options) {
  routes.get(R"(/api/issues/(\d+)/report)", [&store, triage, &options](const httplib::Request& req,
                                                                       httplib::Response& res) {
    try {
      if (!triage) throw RequestError(ErrorKind::kUnavailable, "triage is not running here");
      const std::string format =
          req.has_param("format") ? req.get_param_value("format") : "markdown";
      if (format != "markdown" && format != "mail")
        throw RequestError(ErrorKind::kInvalidArgument,
                           "bad format \"" + format.substr(0, 40) + "\": want markdown or mail");
      const int64_t id = std::stoll(req.matches[1]);
      triage::IssueReportInput in;
      in.issue = triage->get_issue(id);
      in.kernels = store.list_kernels();
      OutcomeQuery q;
      q.scenario = in.issue.scenario();
      for (;;) {
        const Page<v1::OutcomeRecord> page = store.page_outcomes(q);
        for (const auto& o : page.items) triage::add_outcome(in, o);
        if (page.next_page_token.empty()) break;
        q.page_token = page.next_page_token;
      }
      std::string base = options.link_base;
      if (base.empty() && req.has_header("Host")) base = "http://" + req.get_header_value("Host");
      if (!base.empty()) in.link = triage::issue_page_link(base, id);
      const bool mail = format == "mail";
      res.set_header("Content-Disposition", "attachment; filename=\"issue-" + std::to_string(id) +
                                                (mail ? ".eml" : ".md") + "\"");
      res.set_content(mail ? triage::issue_report_mail(in) : triage::issue_report_markdown(in),
                      mail ? "message/rfc822" : "text/markdown; charset=utf-8");
    } catch (...) {
      answer_error(res, req.path, std::current_exception());
    }
  });
}

}  // namespace

void register_export_api(HttpRoutes& routes, Store& store, triage::TriageEngine* triage,
                         const HttpOptions& options) {
  register_issue_report(routes, store, triage, options);
  routes.get(R"(/api/campaigns/(\d+)/export)", [&store, triage, &options](
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
