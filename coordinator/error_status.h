#pragma once
// The error policy at the façades: stores, engines and use-cases throw typed
// errors; the gRPC services and the HTTP routes turn them into statuses here,
// through one table (error_kind_status), and nowhere else.
//
//   kind                  gRPC                 HTTP  thrown as
//   kInvalidArgument      INVALID_ARGUMENT     400   SpecError, BadPageToken, SubscriptionError,
//                                                    TriageError(InvalidArgument), RequestError
//   kUnauthenticated      UNAUTHENTICATED      401   RequestError (no or wrong token)
//   kPermissionDenied     PERMISSION_DENIED    403   WrongAgentSecret
//   kNotFound             NOT_FOUND            404   NoScalingRun, TriageError(NotFound),
//                                                    RequestError
//   kFailedPrecondition   FAILED_PRECONDITION  409   StoreError (not unavailable),
//                                                    TriageError(FailedPrecondition), RequestError
//   kUnavailable          UNAVAILABLE          503   StoreError (unavailable: the database is away)
//   kInternal             INTERNAL             500   anything else

#include <grpcpp/grpcpp.h>

#include <exception>
#include <stdexcept>
#include <string>

namespace leapfrog::coord {

enum class ErrorKind {
  kInvalidArgument,
  kUnauthenticated,
  kPermissionDenied,
  kNotFound,
  kFailedPrecondition,
  kUnavailable,
  kInternal,
};

// An expected failure of a request that has no typed error of its own (an
// unknown id, a bad field): thrown by use-cases and façades alike.
class RequestError : public std::runtime_error {
 public:
  RequestError(ErrorKind kind, const std::string& what) : std::runtime_error(what), kind_(kind) {}
  ErrorKind kind() const { return kind_; }

 private:
  ErrorKind kind_;
};

// One row of the table.
struct ErrorKindStatus {
  ErrorKind kind;
  const char* name;  // for logs: "invalid_argument", "unavailable" ...
  grpc::StatusCode grpc;
  int http;
};

// The row of `kind`.
const ErrorKindStatus& error_kind_status(ErrorKind kind);

// An exception, classified.
struct ClassifiedError {
  ErrorKind kind = ErrorKind::kInternal;
  std::string message;
  const char* type = "";  // the typed error it was: "StoreError", "SpecError" ...
};

// What `error` (not null) is: its kind and message.
ClassifiedError classify(std::exception_ptr error);

// Logs a failure of `facade` ("rpc", "http") call `where` (an RPC's name, a
// path) when it is not the caller's own mistake: unavailable, conflict and
// permission as warnings, internal as an error; bad arguments and unknown ids
// not at all.
void log_error(const char* facade, const std::string& where, const ClassifiedError& e);

// The gRPC status of `error` (not null), logged as log_error("rpc", rpc).
grpc::Status grpc_status_of(const char* rpc, std::exception_ptr error);

// The HTTP status of `error` (not null) with its message, logged as
// log_error("http", path).
struct HttpErrorAnswer {
  int status;
  std::string message;
};
HttpErrorAnswer http_error_of(const std::string& path, std::exception_ptr error);

// Runs a gRPC handler body, answering what it throws by the table.
template <typename Body>
grpc::Status guarded(const char* rpc, Body&& body) {
  try {
    return body();
  } catch (...) {
    return grpc_status_of(rpc, std::current_exception());
  }
}

}  // namespace leapfrog::coord
