// The notifications' HTTP routes (notify_api.h).

#include "coordinator/notify/notify_api.h"

#include <httplib.h>

#include "coordinator/http/proto_json.h"
#include "coordinator/notify/message.h"
#include "coordinator/notify/outbox.h"
#include "coordinator/request_bounds.h"
#include "leapfrog/v1/http.pb.h"

namespace leapfrog::coord::notify {

using nlohmann::json;

void register_notify_api(ApiRouter& router, PgNotifyStore& store, const Clock& clock,
                         const WebhookPolicy& webhooks) {
  router.action("GET", R"(/api/subscriptions)", [&store](const httplib::Request&) {
    v1::ListSubscriptionsResponse out;
    for (auto& s : store.list_subscriptions()) *out.add_subscriptions() = std::move(s);
    return proto_json(out);
  });
  router.action("POST", R"(/api/subscriptions)",
                [&store, &clock, &webhooks](const httplib::Request& req) {
                  // A SubscriptionError is the caller's mistake (400, error_status.h).
                  const auto wanted = subscription_from_json(json_body(req));
                  if (auto why = request_too_large(wanted); !why.empty())
                    throw RequestError(ErrorKind::kInvalidArgument, why);
                  check_target(webhooks, wanted);
                  const auto s = store.add_subscription(wanted, clock.now());
                  return proto_json(s);
                });
  router.action("DELETE", R"(/api/subscriptions/(\d+))", [&store](const httplib::Request& req) {
    const int64_t id = path_id(req, 1);
    if (!store.remove_subscription(id))
      throw RequestError(ErrorKind::kNotFound, "no subscription \"" + std::to_string(id) + "\"");
    v1::SubscriptionRemoved out;
    out.set_removed(id);
    return proto_json(out);
  });
  router.action("GET", R"(/api/notifications)", [&store](const httplib::Request& req) {
    v1::EventList out;
    for (auto& e : store.recent_events(query_uint(req, "limit", 50, 1, 500)))
      *out.add_events() = std::move(e);
    return proto_json(out);
  });
}

}  // namespace leapfrog::coord::notify
