#include "coordinator/parse_error_interceptor.h"

#include <grpcpp/grpcpp.h>

#include <string>

namespace leapfrog::coord {

namespace {

using grpc::experimental::InterceptionHookPoints;

class ParseErrorInterceptor : public grpc::experimental::Interceptor {
 public:
  explicit ParseErrorInterceptor(const char* method) : method_(method ? method : "") {}

  void Intercept(grpc::experimental::InterceptorBatchMethods* m) override {
    // A request that failed to parse reaches this hook as no message.
    if (m->QueryInterceptionHookPoint(InterceptionHookPoints::POST_RECV_MESSAGE) &&
        m->GetRecvMessage() == nullptr)
      unparsed_ = true;
    // Synchronous handlers then answer INTERNAL, callback ones UNIMPLEMENTED.
    if (unparsed_ && m->QueryInterceptionHookPoint(InterceptionHookPoints::PRE_SEND_STATUS) &&
        (m->GetSendStatus().error_code() == grpc::StatusCode::INTERNAL ||
         m->GetSendStatus().error_code() == grpc::StatusCode::UNIMPLEMENTED))
      m->ModifySendStatus(
          grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                       "the request to " + method_ +
                           " does not parse as its protobuf message (truncated or not protobuf, or "
                           "built from other protos than leapfrog.v1)"));
    m->Proceed();
  }

 private:
  std::string method_;
  bool unparsed_ = false;
};

}  // namespace

grpc::experimental::Interceptor* ParseErrorInterceptorFactory::CreateServerInterceptor(
    grpc::experimental::ServerRpcInfo* info) {
  return new ParseErrorInterceptor(info->method());
}

}  // namespace leapfrog::coord
