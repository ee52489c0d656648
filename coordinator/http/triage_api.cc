// Triage endpoints (docs/api.md "Triage"): issues, their status and notes,
// and the replay, minimize and bisect actions, over the triage engine.

#include <httplib.h>

#include <algorithm>
#include <cctype>

#include "common/ktap/words.h"
#include "coordinator/http/api.h"
#include "coordinator/http/api_json.h"
#include "coordinator/http/proto_json.h"
#include "coordinator/http/routes.h"
#include "coordinator/request_bounds.h"
#include "coordinator/triage/triage_engine.h"
#include "leapfrog/v1/http.pb.h"

namespace leapfrog::coord {

using nlohmann::json;
namespace tr = triage;

namespace {

// `request`, once every string it carries is within its bound
// (request_bounds.h), as the gRPC service checks it; a 400 naming the field
// otherwise.
template <class Request>
const Request& bounded(const Request& request) {
  if (auto why = request_too_large(request); !why.empty())
    throw RequestError(ErrorKind::kInvalidArgument, why);
  return request;
}

// "crash" or "ISSUE_KIND_CRASH"; empty: any kind.
v1::IssueKind parse_kind(const std::string& text) {
  if (text.empty()) return v1::ISSUE_KIND_UNSPECIFIED;
  const v1::IssueKind k = ktap::issue_kind_from(text);
  if (k == v1::ISSUE_KIND_UNSPECIFIED)
    throw RequestError(ErrorKind::kInvalidArgument,
                       "bad kind \"" + text + "\", want violation, crash, hang or boot-failure");
  return k;
}

// "fixed" or "ISSUE_STATUS_FIXED" (the enum's JSON name).
v1::IssueStatus parse_status(const std::string& name) {
  std::string upper = name.rfind("ISSUE_STATUS_", 0) == 0 ? "" : "ISSUE_STATUS_";
  for (char c : name)
    upper += c == '-' ? '_' : static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  v1::IssueStatus s = v1::ISSUE_STATUS_UNSPECIFIED;
  if (name.empty() || !v1::IssueStatus_Parse(upper, &s) || s == v1::ISSUE_STATUS_UNSPECIFIED)
    throw RequestError(
        ErrorKind::kInvalidArgument,
        "bad status \"" + name + "\", want new, triaged, fixed, invalid, duplicate or regression");
  return s;
}

uint32_t body_uint(const json& body, const std::string& key, uint32_t hi) {
  auto it = body.find(key);
  if (it == body.end() || it->is_null()) return 0;
  if (!it->is_number_integer() || it->get<int64_t>() < 0 || it->get<int64_t>() > hi)
    throw RequestError(ErrorKind::kInvalidArgument,
                       "\"" + key + "\" must be an integer in 0.." + std::to_string(hi));
  return static_cast<uint32_t>(it->get<int64_t>());
}

}  // namespace

void register_triage_api(ApiRouter& r, ApiContext ctx, tr::TriageEngine& engine) {
  tr::TriageEngine* e = &engine;

  // The filters go to the store, before its limit; ?page= pages on.
  r.get("/api/issues", [e](const httplib::Request& req) {
    v1::ListIssuesRequest lr;
    if (req.has_param("status")) lr.add_statuses(parse_status(req.get_param_value("status")));
    lr.set_limit(query_uint(req, "limit", 200, 1, tr::kIssuePage.max));
    lr.set_scenario(req.get_param_value("scenario"));
    lr.set_kernel_label(req.get_param_value("kernel"));
    lr.set_kind(parse_kind(req.get_param_value("kind")));
    lr.set_page_token(query_page(req));
    return proto_json(e->list_issues(bounded(lr)));
  });

  r.get("/api/actions", [e](const httplib::Request& req) {
    v1::ListActionsRequest lr;
    if (req.has_param("issue")) lr.set_issue_id(query_uint(req, "issue", 0, 1, UINT32_MAX));
    lr.set_limit(query_uint(req, "limit", tr::kActionPage.fallback, 1, tr::kActionPage.max));
    lr.set_page_token(query_page(req));
    return proto_json(e->list_actions(bounded(lr)));
  });

  r.get(R"(/api/issues/([^/]+))", [e, ctx](const httplib::Request& req) {
    v1::IssuePage out;
    const v1::Issue& issue = *out.mutable_issue() = e->get_issue(path_id(req, 1));
    if (issue.example_job_id() != 0) {
      OutcomeFilter f;
      f.job_id = issue.example_job_id();
      for (auto& o : ctx.store.find_outcomes(f))
        if (o.attempt() == issue.example_attempt()) *out.mutable_example() = std::move(o);
    }
    // The build record (patch series) of every kernel it was found on.
    std::vector<std::string> labels;
    for (const auto& k : issue.kernels()) labels.push_back(k.kernel_label());
    if (!issue.example_kernel().empty()) labels.push_back(issue.example_kernel());
    add_kernels(ctx.store, labels, *out.mutable_kernels());
    return proto_json(out);
  });

  r.get(R"(/api/actions/([^/]+))",
        [e](const httplib::Request& req) { return proto_json(e->get_action(path_id(req, 1))); });

  r.action("POST", R"(/api/issues/([^/]+)/status)", [e](const httplib::Request& req) {
    const json body = json_body(req);
    v1::SetIssueStatusRequest sr;
    sr.set_id(path_id(req, 1));
    sr.set_status(parse_status(body_string(body, "status")));
    auto dup = body.find("duplicate_of");
    if (dup != body.end() && !dup->is_null()) {
      if (!dup->is_number_integer() || dup->get<int64_t>() < 0)
        throw RequestError(ErrorKind::kInvalidArgument, "\"duplicate_of\" must be an issue id");
      sr.set_duplicate_of(dup->get<int64_t>());
    }
    return proto_json(e->set_issue_status(bounded(sr)));
  });

  r.action("POST", R"(/api/issues/([^/]+)/notes)", [e](const httplib::Request& req) {
    const json body = json_body(req);
    v1::AddIssueNoteRequest nr;
    nr.set_id(path_id(req, 1));
    nr.set_text(body_string(body, "text"));
    if (nr.text().empty()) throw RequestError(ErrorKind::kInvalidArgument, "\"text\" is empty");
    return proto_json(e->add_issue_note(bounded(nr)));
  });

  r.action("POST", R"(/api/issues/([^/]+)/replay)", [e](const httplib::Request& req) {
    const json body = json_body(req);
    v1::StartReplayRequest rr;
    rr.set_issue_id(path_id(req, 1));
    rr.set_kernel_label(body_string(body, "kernel", false));
    rr.set_runs(body_uint(body, "runs", 1000));
    return proto_json(e->start_replay(bounded(rr)));
  });

  r.action("POST", R"(/api/issues/([^/]+)/minimize)", [e](const httplib::Request& req) {
    const json body = json_body(req);
    v1::StartMinimizeRequest mr;
    mr.set_issue_id(path_id(req, 1));
    mr.set_kernel_label(body_string(body, "kernel", false));
    mr.set_max_runs(body_uint(body, "max_runs", 1000));
    return proto_json(e->start_minimize(bounded(mr)));
  });

  r.action("POST", R"(/api/issues/([^/]+)/bisect)", [e](const httplib::Request& req) {
    const json body = json_body(req);
    v1::StartBisectRequest br;
    br.set_issue_id(path_id(req, 1));
    auto ks = body.find("kernels");
    if (ks == body.end() || !ks->is_array())
      throw RequestError(ErrorKind::kInvalidArgument,
                         "\"kernels\" must be a list of kernel labels");
    for (const auto& k : *ks) {
      if (!k.is_string())
        throw RequestError(ErrorKind::kInvalidArgument,
                           "\"kernels\" must be a list of kernel labels");
      br.add_kernels(k.get<std::string>());
    }
    br.set_max_runs(body_uint(body, "max_runs", 1000));
    return proto_json(e->start_bisect(bounded(br)));
  });
}

// The C reproducer is a file, not JSON: registered on the routes directly.
void register_triage_files(HttpRoutes& routes, tr::TriageEngine& engine) {
  routes.get(R"(/api/actions/(\d+)/reproducer\.c)", [&engine](const httplib::Request& req,
                                                              httplib::Response& res) {
    try {
      const v1::Action a = engine.get_action(std::stoll(req.matches[1]));
      if (a.minimize().c_reproducer().empty())
        throw RequestError(ErrorKind::kNotFound,
                           "action \"" + std::string(req.matches[1]) + "\" has no C reproducer");
      res.set_header("Content-Disposition",
                     "attachment; filename=\"issue-" + std::to_string(a.issue_id()) + "-repro.c\"");
      res.set_content(a.minimize().c_reproducer(), "text/x-c");
    } catch (...) {
      answer_error(res, req.path, std::current_exception());
    }
  });
}

}  // namespace leapfrog::coord
