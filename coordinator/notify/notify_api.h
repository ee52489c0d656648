#pragma once
// The notifications' HTTP routes (docs/notifications.md), every one
// token-protected, reads too (subscriptions hold webhook URLs and addresses):
//   GET    /api/subscriptions          {"subscriptions": [...]}
//   POST   /api/subscriptions          a subscription -> {"subscription": {...}}
//   DELETE /api/subscriptions/{id}     {"removed": id}
//   GET    /api/notifications?limit=N  {"events": [...]}, newest first

#include "coordinator/clock.h"
#include "coordinator/http/api.h"
#include "coordinator/notify/notify_store.h"
#include "coordinator/notify/webhook_policy.h"

namespace leapfrog::coord::notify {

// `webhooks` checks a new webhook's destination (400 with the reason).
void register_notify_api(ApiRouter& router, PgNotifyStore& store, const Clock& clock,
                         const WebhookPolicy& webhooks);

}  // namespace leapfrog::coord::notify
