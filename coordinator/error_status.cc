#include "coordinator/error_status.h"

#include <spdlog/spdlog.h>

#include <iterator>

#include "coordinator/campaign.h"
#include "coordinator/notify/outbox.h"
#include "coordinator/scaling.h"
#include "coordinator/store/page.h"
#include "coordinator/store/store.h"
#include "coordinator/triage/triage_engine.h"

namespace leapfrog::coord {

namespace {

using grpc::StatusCode;

constexpr ErrorKindStatus kTable[] = {
    {ErrorKind::kInvalidArgument, "invalid_argument", StatusCode::INVALID_ARGUMENT, 400},
    {ErrorKind::kUnauthenticated, "unauthenticated", StatusCode::UNAUTHENTICATED, 401},
    {ErrorKind::kPermissionDenied, "permission_denied", StatusCode::PERMISSION_DENIED, 403},
    {ErrorKind::kNotFound, "not_found", StatusCode::NOT_FOUND, 404},
    {ErrorKind::kFailedPrecondition, "failed_precondition", StatusCode::FAILED_PRECONDITION, 409},
    {ErrorKind::kUnavailable, "unavailable", StatusCode::UNAVAILABLE, 503},
    {ErrorKind::kInternal, "internal", StatusCode::INTERNAL, 500},
};

ErrorKind triage_kind(triage::TriageError::Code code) {
  switch (code) {
    case triage::TriageError::Code::NotFound:
      return ErrorKind::kNotFound;
    case triage::TriageError::Code::InvalidArgument:
      return ErrorKind::kInvalidArgument;
    case triage::TriageError::Code::FailedPrecondition:
      return ErrorKind::kFailedPrecondition;
  }
  return ErrorKind::kInternal;
}

}  // namespace

const ErrorKindStatus& error_kind_status(ErrorKind kind) {
  for (const auto& row : kTable)
    if (row.kind == kind) return row;
  return kTable[std::size(kTable) - 1];
}

ClassifiedError classify(std::exception_ptr error) {
  // Most derived first: WrongAgentSecret is a StoreError, and SpecError,
  // BadPageToken and SubscriptionError are std::invalid_arguments, which
  // alone (std::stoll's) are internal.
  try {
    std::rethrow_exception(error);
  } catch (const RequestError& e) {
    return {e.kind(), e.what(), "RequestError"};
  } catch (const WrongAgentSecret& e) {
    return {ErrorKind::kPermissionDenied, e.what(), "WrongAgentSecret"};
  } catch (const StoreError& e) {
    return {e.unavailable() ? ErrorKind::kUnavailable : ErrorKind::kFailedPrecondition, e.what(),
            "StoreError"};
  } catch (const SpecError& e) {
    return {ErrorKind::kInvalidArgument, e.what(), "SpecError"};
  } catch (const BadPageToken& e) {
    return {ErrorKind::kInvalidArgument, e.what(), "BadPageToken"};
  } catch (const triage::TriageError& e) {
    return {triage_kind(e.code()), e.what(), "TriageError"};
  } catch (const notify::SubscriptionError& e) {
    return {ErrorKind::kInvalidArgument, e.what(), "SubscriptionError"};
  } catch (const NoScalingRun& e) {
    return {ErrorKind::kNotFound, e.what(), "NoScalingRun"};
  } catch (const std::exception& e) {
    return {ErrorKind::kInternal, e.what(), "std::exception"};
  } catch (...) {
    return {ErrorKind::kInternal, "unknown exception", "unknown"};
  }
}

void log_error(const char* facade, const std::string& where, const ClassifiedError& e) {
  switch (e.kind) {
    case ErrorKind::kInvalidArgument:
    case ErrorKind::kUnauthenticated:
    case ErrorKind::kNotFound:
      return;
    case ErrorKind::kPermissionDenied:
    case ErrorKind::kFailedPrecondition:
    case ErrorKind::kUnavailable:
      spdlog::warn("{}.error where={} kind={} type={} error=\"{}\"", facade, where,
                   error_kind_status(e.kind).name, e.type, e.message);
      return;
    case ErrorKind::kInternal:
      spdlog::error("{}.internal where={} type={} error=\"{}\"", facade, where, e.type, e.message);
      return;
  }
}

grpc::Status grpc_status_of(const char* rpc, std::exception_ptr error) {
  const ClassifiedError e = classify(error);
  log_error("rpc", rpc, e);
  return grpc::Status(error_kind_status(e.kind).grpc, e.message);
}

HttpErrorAnswer http_error_of(const std::string& path, std::exception_ptr error) {
  ClassifiedError e = classify(error);
  log_error("http", path, e);
  return {error_kind_status(e.kind).http, std::move(e.message)};
}

}  // namespace leapfrog::coord
