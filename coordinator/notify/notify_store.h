#pragma once
// The notifications' tables (migration 8) over PostgreSQL, on a small pool of
// their own: subscriptions, events (EventSink), the outbox of deliveries and
// the bookkeeping of nightly comparisons. Error policy as PgStore's
// (store/pg_pool.h): StoreError, unavailable() when the database is away.

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "coordinator/clock.h"
#include "coordinator/notify/event_sink.h"
#include "leapfrog/v1/notify.pb.h"

namespace leapfrog::coord {
class PgPool;
}

namespace leapfrog::coord::notify {

// One delivery taken from the outbox (PgNotifyStore::deliver_next).
struct Delivery {
  v1::Event event;  // with id and at
  v1::Subscription subscription;
  uint32_t attempts = 0;  // tried before this one
};

// When a failed delivery is tried again.
struct RetryPolicy {
  Duration first = std::chrono::seconds(10);  // after the first failure
  Duration max = std::chrono::hours(1);       // doubling up to this
  uint32_t max_attempts = 12;                 // then it is marked failed
};

class PgNotifyStore : public EventSink {
 public:
  // Connects lazily (libpq URL); the schema must be migrated (PgStore does it).
  explicit PgNotifyStore(const std::string& url, int pool_size = 2);
  ~PgNotifyStore() override;

  // ---- subscriptions ----
  // Validates (outbox.h validate: throws SubscriptionError) and stores `s`;
  // returns it with id and created_at. Events stored before it are not sent to it.
  v1::Subscription add_subscription(const v1::Subscription& s, TimePoint now);
  // Oldest first, with delivered/pending/failed counts and the last error.
  std::vector<v1::Subscription> list_subscriptions();
  // False if unknown. Its pending deliveries go with it.
  bool remove_subscription(int64_t id);

  // ---- events ----
  bool publish(const v1::Event& event) override;
  // The most recent events, newest first.
  std::vector<v1::Event> recent_events(uint32_t limit);

  // ---- the outbox ----
  // Takes the oldest due pending delivery (skipping ones another replica
  // holds), calls `send` with it while holding its row lock, and records
  // what `send` returned: "" delivered, else the error (tried again after
  // `retry`'s backoff, or marked failed after its last attempt), in the same
  // transaction. False when nothing was due. A delivery is marked delivered
  // only once `send` returned, so a coordinator killed before that sends it
  // again, never one that committed.
  bool deliver_next(const std::function<std::string(const Delivery&)>& send,
                    const RetryPolicy& retry);

  // ---- nightly comparisons ----
  // Done scheduled campaigns not compared yet (made after notifications were
  // set up), oldest first.
  std::vector<int64_t> nightlies_to_compare(uint32_t limit);
  // The schedule's campaign before `campaign_id`, if any.
  std::optional<int64_t> previous_nightly(int64_t schedule_id, int64_t campaign_id);
  // Marks the campaign compared and stores `event` (if any) in the same
  // transaction; false if another caller compared it first.
  bool finish_comparison(int64_t campaign_id, const std::optional<v1::Event>& event);
  // Scheduled campaigns made at or before `created_before` (and after
  // notifications were set up, within two days) that still have queued jobs
  // and no "nightly-unserved" event yet.
  std::vector<int64_t> unserved_candidates(TimePoint created_before, uint32_t limit);

 private:
  std::unique_ptr<PgPool> pool_;
};

}  // namespace leapfrog::coord::notify
