#include "coordinator/triage/triage_service.h"

#include "coordinator/error_status.h"
#include "coordinator/request_bounds.h"

namespace leapfrog::coord::triage {

namespace {

// Checks the token and the bounds of the request's strings
// (request_bounds.h), then runs `body`, answering what it throws by the table
// (error_status.h).
template <typename Body>
grpc::Status serve(const TokenAuth& auth, grpc::ServerContext* ctx,
                   const google::protobuf::Message& req, const char* rpc, Body&& body) {
  if (auto s = auth.check(*ctx); !s.ok()) return s;
  if (auto s = check_request_bounds(req); !s.ok()) return s;
  return guarded(rpc, [&]() -> grpc::Status {
    body();
    return grpc::Status::OK;
  });
}

}  // namespace

grpc::Status TriageServiceImpl::ListIssues(grpc::ServerContext* ctx,
                                           const v1::ListIssuesRequest* req,
                                           v1::ListIssuesResponse* resp) {
  return serve(auth_, ctx, *req, "ListIssues", [&] { *resp = engine_.list_issues(*req); });
}

grpc::Status TriageServiceImpl::GetIssue(grpc::ServerContext* ctx, const v1::GetIssueRequest* req,
                                         v1::Issue* resp) {
  return serve(auth_, ctx, *req, "GetIssue", [&] { *resp = engine_.get_issue(req->id()); });
}

grpc::Status TriageServiceImpl::SetIssueStatus(grpc::ServerContext* ctx,
                                               const v1::SetIssueStatusRequest* req,
                                               v1::Issue* resp) {
  return serve(auth_, ctx, *req, "SetIssueStatus", [&] { *resp = engine_.set_issue_status(*req); });
}

grpc::Status TriageServiceImpl::AddIssueNote(grpc::ServerContext* ctx,
                                             const v1::AddIssueNoteRequest* req, v1::Issue* resp) {
  return serve(auth_, ctx, *req, "AddIssueNote", [&] { *resp = engine_.add_issue_note(*req); });
}

grpc::Status TriageServiceImpl::StartReplay(grpc::ServerContext* ctx,
                                            const v1::StartReplayRequest* req, v1::Action* resp) {
  return serve(auth_, ctx, *req, "StartReplay", [&] { *resp = engine_.start_replay(*req); });
}

grpc::Status TriageServiceImpl::StartMinimize(grpc::ServerContext* ctx,
                                              const v1::StartMinimizeRequest* req,
                                              v1::Action* resp) {
  return serve(auth_, ctx, *req, "StartMinimize", [&] { *resp = engine_.start_minimize(*req); });
}

grpc::Status TriageServiceImpl::StartBisect(grpc::ServerContext* ctx,
                                            const v1::StartBisectRequest* req, v1::Action* resp) {
  return serve(auth_, ctx, *req, "StartBisect", [&] { *resp = engine_.start_bisect(*req); });
}

grpc::Status TriageServiceImpl::GetAction(grpc::ServerContext* ctx, const v1::GetActionRequest* req,
                                          v1::Action* resp) {
  return serve(auth_, ctx, *req, "GetAction", [&] { *resp = engine_.get_action(req->id()); });
}

grpc::Status TriageServiceImpl::ListActions(grpc::ServerContext* ctx,
                                            const v1::ListActionsRequest* req,
                                            v1::ListActionsResponse* resp) {
  return serve(auth_, ctx, *req, "ListActions", [&] { *resp = engine_.list_actions(*req); });
}

}  // namespace leapfrog::coord::triage
