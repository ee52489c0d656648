#pragma once
// The NotifyService (proto/leapfrog/v1/notify.proto): the subscriptions of
// PgNotifyStore over gRPC, for `leapfrog subscribe`; token as ControlService.
// A webhook is added only if its destination passes the WebhookPolicy.

#include "common/token.h"
#include "coordinator/clock.h"
#include "coordinator/notify/notify_store.h"
#include "coordinator/notify/webhook_policy.h"
#include "leapfrog/v1/notify.grpc.pb.h"

namespace leapfrog::coord::notify {

class NotifyServiceImpl final : public v1::NotifyService::Service {
 public:
  NotifyServiceImpl(PgNotifyStore& store, const Clock& clock, std::string token,
                    const WebhookPolicy& webhooks)
      : store_(store), clock_(clock), auth_(std::move(token)), webhooks_(webhooks) {}

  grpc::Status AddSubscription(grpc::ServerContext*, const v1::AddSubscriptionRequest*,
                               v1::Subscription*) override;
  grpc::Status ListSubscriptions(grpc::ServerContext*, const v1::ListSubscriptionsRequest*,
                                 v1::ListSubscriptionsResponse*) override;
  grpc::Status RemoveSubscription(grpc::ServerContext*, const v1::RemoveSubscriptionRequest*,
                                  v1::RemoveSubscriptionResponse*) override;

 private:
  PgNotifyStore& store_;
  const Clock& clock_;
  TokenAuth auth_;
  const WebhookPolicy& webhooks_;
};

}  // namespace leapfrog::coord::notify
