#pragma once
// What a delivery says: the event as JSON (webhooks, the HTTP API) and as a
// mail (subject and plain-text body), with the link to its dashboard page.

#include <nlohmann/json.hpp>
#include <string>

#include "leapfrog/v1/notify.pb.h"

namespace leapfrog::coord::notify {

// The dashboard page of what the event is about under `link_base`
// ("http://host:port"): the issue, else the campaign; "" without a base.
std::string event_link(const v1::Event& e, const std::string& link_base);

// The event as the webhook's body and the API show it (docs/notifications.md):
// kinds, verdicts and states as short lowercase names, times as ISO 8601.
nlohmann::json to_json(const v1::Event& e);
nlohmann::json to_json(const v1::Subscription& s);
// The inverse for the HTTP API's POST; throws SubscriptionError naming the field.
v1::Subscription subscription_from_json(const nlohmann::json& j);

// "[leapfrog] new issue #12 on 6.1-rc3: stale-grant stat/chmod (setattr-lookup)"
std::string mail_subject(const v1::Event& e);
// Plain text: what happened, the issue or nightly, kernels, the link (e.link).
std::string mail_body(const v1::Event& e);

}  // namespace leapfrog::coord::notify
