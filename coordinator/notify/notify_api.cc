// The notifications' HTTP routes (notify_api.h).

#include "coordinator/notify/notify_api.h"

#include <httplib.h>

#include "coordinator/notify/message.h"
#include "coordinator/notify/outbox.h"

namespace leapfrog::coord::notify {

using nlohmann::json;

void register_notify_api(ApiRouter& router, PgNotifyStore& store, const Clock& clock) {
  router.action("GET", R"(/api/subscriptions)", [&store](const httplib::Request&) {
    json list = json::array();
    for (const auto& s : store.list_subscriptions()) list.push_back(to_json(s));
    return json{{"subscriptions", list}};
  });
  router.action("POST", R"(/api/subscriptions)", [&store, &clock](const httplib::Request& req) {
    // A SubscriptionError is the caller's mistake (400, error_status.h).
    const auto s = store.add_subscription(subscription_from_json(json_body(req)), clock.now());
    return json{{"subscription", to_json(s)}};
  });
  router.action("DELETE", R"(/api/subscriptions/(\d+))", [&store](const httplib::Request& req) {
    const int64_t id = path_id(req, 1);
    if (!store.remove_subscription(id))
      throw RequestError(ErrorKind::kNotFound, "no subscription \"" + std::to_string(id) + "\"");
    return json{{"removed", id}};
  });
  router.action("GET", R"(/api/notifications)", [&store](const httplib::Request& req) {
    json list = json::array();
    for (const auto& e : store.recent_events(query_uint(req, "limit", 50, 1, 500)))
      list.push_back(to_json(e));
    return json{{"events", list}};
  });
}

}  // namespace leapfrog::coord::notify
