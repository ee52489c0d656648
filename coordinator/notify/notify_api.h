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

namespace leapfrog::coord::notify {

void register_notify_api(ApiRouter& router, PgNotifyStore& store, const Clock& clock);

}  // namespace leapfrog::coord::notify
