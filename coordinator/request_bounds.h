#pragma once
// Every string a request carries has a bound (common/bounds.h), checked at
// the façades before anything reads or stores the request: a stored string
// is later sent back in lists, so one unbounded field can make a list
// larger than the transport carries for every reader. The walk covers every
// string field of every message, nested ones too, so a field added later is
// bounded by default (kMaxFieldBytes) until it is given its own limit here.

#include <google/protobuf/message.h>
#include <grpcpp/grpcpp.h>

#include <string>

namespace leapfrog::coord {

// "" when every string of `request` is within its bound and every repeated
// field within its count, else why not, naming the field by its path
// ("subscription.webhook.url "http://..." (41943040 bytes) is too long, want
// at most 2048 bytes"). An Outcome inside is left to report_check.h, which
// bounds it whole (kMaxOutcomeBytes).
std::string request_too_large(const google::protobuf::Message& request);

// request_too_large() as a status: OK, or INVALID_ARGUMENT with the reason.
grpc::Status check_request_bounds(const google::protobuf::Message& request);

}  // namespace leapfrog::coord
