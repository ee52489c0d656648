#pragma once
// gRPC answers a request that does not parse as its protobuf type with
// INTERNAL (UNIMPLEMENTED for callback methods) and an empty message, before
// any handler runs: a client bug looks
// like a server fault, with no reason. This server interceptor notices the
// failed parse and turns that answer into INVALID_ARGUMENT saying which
// method's request did not parse.

#include <grpcpp/support/server_interceptor.h>

namespace leapfrog::coord {

class ParseErrorInterceptorFactory : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  grpc::experimental::Interceptor* CreateServerInterceptor(
      grpc::experimental::ServerRpcInfo* info) override;
};

}  // namespace leapfrog::coord
