// The table of error_status.h: every typed error classified to its kind, and
// each kind's gRPC code and HTTP status, through the functions the façades
// call (guarded, grpc_status_of, http_error_of).

#include "coordinator/error_status.h"

#include <gtest/gtest.h>

#include <set>

#include "coordinator/campaign.h"
#include "coordinator/notify/outbox.h"
#include "coordinator/scaling.h"
#include "coordinator/store/page.h"
#include "coordinator/store/store.h"
#include "coordinator/triage/triage_engine.h"

namespace leapfrog::coord {
namespace {

using grpc::StatusCode;

struct Case {
  const char* what;
  std::exception_ptr error;
  ErrorKind kind;
  StatusCode grpc;
  int http;
};

std::vector<Case> cases() {
  using TE = triage::TriageError;
  auto ptr = [](auto e) { return std::make_exception_ptr(e); };
  return {
      {"WrongAgentSecret", ptr(WrongAgentSecret("wrong key")), ErrorKind::kPermissionDenied,
       StatusCode::PERMISSION_DENIED, 403},
      {"StoreError unavailable", ptr(StoreError("database unavailable", true)),
       ErrorKind::kUnavailable, StatusCode::UNAVAILABLE, 503},
      {"StoreError conflict", ptr(StoreError("duplicate key", false)),
       ErrorKind::kFailedPrecondition, StatusCode::FAILED_PRECONDITION, 409},
      {"SpecError", ptr(SpecError("bad spec")), ErrorKind::kInvalidArgument,
       StatusCode::INVALID_ARGUMENT, 400},
      {"BadPageToken", ptr(BadPageToken("bad token")), ErrorKind::kInvalidArgument,
       StatusCode::INVALID_ARGUMENT, 400},
      {"TriageError NotFound", ptr(TE(TE::Code::NotFound, "no issue")), ErrorKind::kNotFound,
       StatusCode::NOT_FOUND, 404},
      {"TriageError InvalidArgument", ptr(TE(TE::Code::InvalidArgument, "bad kernel")),
       ErrorKind::kInvalidArgument, StatusCode::INVALID_ARGUMENT, 400},
      {"TriageError FailedPrecondition", ptr(TE(TE::Code::FailedPrecondition, "running")),
       ErrorKind::kFailedPrecondition, StatusCode::FAILED_PRECONDITION, 409},
      {"SubscriptionError", ptr(notify::SubscriptionError("bad url")), ErrorKind::kInvalidArgument,
       StatusCode::INVALID_ARGUMENT, 400},
      {"NoScalingRun", ptr(NoScalingRun("k9")), ErrorKind::kNotFound, StatusCode::NOT_FOUND, 404},
      {"RequestError unauthenticated", ptr(RequestError(ErrorKind::kUnauthenticated, "no token")),
       ErrorKind::kUnauthenticated, StatusCode::UNAUTHENTICATED, 401},
      {"RequestError not found", ptr(RequestError(ErrorKind::kNotFound, "no schedule \"3\"")),
       ErrorKind::kNotFound, StatusCode::NOT_FOUND, 404},
      // Not a typed error: std::stoll's invalid_argument is no caller's mistake.
      {"std::invalid_argument", ptr(std::invalid_argument("stoll")), ErrorKind::kInternal,
       StatusCode::INTERNAL, 500},
      {"std::runtime_error", ptr(std::runtime_error("boom")), ErrorKind::kInternal,
       StatusCode::INTERNAL, 500},
      {"not a std::exception", ptr(42), ErrorKind::kInternal, StatusCode::INTERNAL, 500},
  };
}

TEST(ErrorStatus, EachTypedErrorHasItsKindAndStatuses) {
  for (const auto& c : cases()) {
    SCOPED_TRACE(c.what);
    const ClassifiedError e = classify(c.error);
    EXPECT_EQ(e.kind, c.kind);
    const grpc::Status s = grpc_status_of("Test", c.error);
    EXPECT_EQ(s.error_code(), c.grpc);
    const HttpErrorAnswer h = http_error_of("/api/test", c.error);
    EXPECT_EQ(h.status, c.http);
    EXPECT_EQ(h.message, s.error_message());
    EXPECT_FALSE(h.message.empty());
  }
}

TEST(ErrorStatus, TheMessageIsTheErrorsOwn) {
  const auto e = classify(std::make_exception_ptr(StoreError("list: database unavailable", true)));
  EXPECT_EQ(e.message, "list: database unavailable");
  EXPECT_STREQ(e.type, "StoreError");
  EXPECT_STREQ(classify(std::make_exception_ptr(WrongAgentSecret("k"))).type, "WrongAgentSecret");
}

TEST(ErrorStatus, EveryKindHasOneRowOfItsOwn) {
  const ErrorKind kinds[] = {
      ErrorKind::kInvalidArgument, ErrorKind::kUnauthenticated,    ErrorKind::kPermissionDenied,
      ErrorKind::kNotFound,        ErrorKind::kFailedPrecondition, ErrorKind::kUnavailable,
      ErrorKind::kInternal};
  std::set<int> http;
  std::set<StatusCode> codes;
  std::set<std::string> names;
  for (ErrorKind k : kinds) {
    const ErrorKindStatus& row = error_kind_status(k);
    EXPECT_EQ(row.kind, k);
    http.insert(row.http);
    codes.insert(row.grpc);
    names.insert(row.name);
  }
  EXPECT_EQ(http.size(), std::size(kinds));
  EXPECT_EQ(codes.size(), std::size(kinds));
  EXPECT_EQ(names.size(), std::size(kinds));
  EXPECT_EQ(codes.count(StatusCode::OK), 0u);
}

TEST(ErrorStatus, GuardedAnswersWhatTheBodyThrowsAndPassesItsStatus) {
  const grpc::Status down =
      guarded("Test", []() -> grpc::Status { throw StoreError("database unavailable", true); });
  EXPECT_EQ(down.error_code(), StatusCode::UNAVAILABLE);
  EXPECT_EQ(down.error_message(), "database unavailable");
  const grpc::Status ok = guarded("Test", [] { return grpc::Status::OK; });
  EXPECT_TRUE(ok.ok());
  const grpc::Status own =
      guarded("Test", [] { return grpc::Status(StatusCode::ALREADY_EXISTS, "mine"); });
  EXPECT_EQ(own.error_code(), StatusCode::ALREADY_EXISTS);
}

}  // namespace
}  // namespace leapfrog::coord
