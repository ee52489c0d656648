// NotifyService (notify_service.h).

#include "coordinator/notify/notify_service.h"

#include "coordinator/notify/outbox.h"
#include "coordinator/error_status.h"
#include "coordinator/request_bounds.h"

namespace leapfrog::coord::notify {

namespace {

// Checks the token and the bounds of the request's strings
// (request_bounds.h), then runs `body`, answering what it throws by the table
// (error_status.h).
template <typename Body>
grpc::Status serve(const TokenAuth& auth, grpc::ServerContext* ctx,
                   const google::protobuf::Message& req, const char* rpc, Body&& body) {
  if (auto s = auth.check(*ctx); !s.ok()) return s;
  if (auto s = check_request_bounds(req); !s.ok()) return s;
  return guarded(rpc, body);
}

}  // namespace

grpc::Status NotifyServiceImpl::AddSubscription(grpc::ServerContext* ctx,
                                                const v1::AddSubscriptionRequest* req,
                                                v1::Subscription* resp) {
  return serve(auth_, ctx, *req, "AddSubscription", [&] {
    // A SubscriptionError (INVALID_ARGUMENT) says why a destination is refused.
    check_target(webhooks_, req->subscription());
    *resp = store_.add_subscription(req->subscription(), clock_.now());
    return grpc::Status::OK;
  });
}

grpc::Status NotifyServiceImpl::ListSubscriptions(grpc::ServerContext* ctx,
                                                  const v1::ListSubscriptionsRequest* req,
                                                  v1::ListSubscriptionsResponse* resp) {
  return serve(auth_, ctx, *req, "ListSubscriptions", [&] {
    for (auto& s : store_.list_subscriptions()) *resp->add_subscriptions() = std::move(s);
    return grpc::Status::OK;
  });
}

grpc::Status NotifyServiceImpl::RemoveSubscription(grpc::ServerContext* ctx,
                                                   const v1::RemoveSubscriptionRequest* req,
                                                   v1::RemoveSubscriptionResponse*) {
  return serve(auth_, ctx, *req, "RemoveSubscription", [&] {
    if (!store_.remove_subscription(req->id()))
      return grpc::Status(grpc::StatusCode::NOT_FOUND,
                          "no subscription \"" + std::to_string(req->id()) + "\"");
    return grpc::Status::OK;
  });
}

}  // namespace leapfrog::coord::notify
