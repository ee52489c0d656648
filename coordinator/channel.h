#pragma once
// The channel every client of the coordinator's gRPC services opens (the
// CLI's verbs, the VM launcher): the server's message size limits
// (kMaxMessageBytes), so that an answer the server sends is never refused
// as "larger than max".

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>

#include "common/bounds.h"

namespace leapfrog::coord {

inline std::shared_ptr<grpc::Channel> coordinator_channel(const std::string& address) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(kMaxMessageBytes);
  args.SetMaxSendMessageSize(kMaxMessageBytes);
  return grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args);
}

}  // namespace leapfrog::coord
