#pragma once
// The TriageService (proto/leapfrog/v1/triage.proto): TriageEngine over gRPC,
// with ControlService's token authentication.

#include "common/token.h"
#include "coordinator/triage/triage_engine.h"
#include "leapfrog/v1/triage.grpc.pb.h"

namespace leapfrog::coord::triage {

class TriageServiceImpl final : public v1::TriageService::Service {
 public:
  TriageServiceImpl(TriageEngine& engine, const TokenAuth& auth) : engine_(engine), auth_(auth) {}

  grpc::Status ListIssues(grpc::ServerContext*, const v1::ListIssuesRequest*,
                          v1::ListIssuesResponse*) override;
  grpc::Status GetIssue(grpc::ServerContext*, const v1::GetIssueRequest*, v1::Issue*) override;
  grpc::Status SetIssueStatus(grpc::ServerContext*, const v1::SetIssueStatusRequest*,
                              v1::Issue*) override;
  grpc::Status AddIssueNote(grpc::ServerContext*, const v1::AddIssueNoteRequest*,
                            v1::Issue*) override;
  grpc::Status StartReplay(grpc::ServerContext*, const v1::StartReplayRequest*,
                           v1::Action*) override;
  grpc::Status StartMinimize(grpc::ServerContext*, const v1::StartMinimizeRequest*,
                             v1::Action*) override;
  grpc::Status StartBisect(grpc::ServerContext*, const v1::StartBisectRequest*,
                           v1::Action*) override;
  grpc::Status GetAction(grpc::ServerContext*, const v1::GetActionRequest*, v1::Action*) override;
  grpc::Status ListActions(grpc::ServerContext*, const v1::ListActionsRequest*,
                           v1::ListActionsResponse*) override;

 private:
  TriageEngine& engine_;
  const TokenAuth& auth_;
};

}  // namespace leapfrog::coord::triage
