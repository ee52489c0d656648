// PgNotifyStore (notify_store.h).

#include "coordinator/notify/notify_store.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <pqxx/pqxx>

#include "common/bounds.h"
#include "coordinator/error_status.h"
#include "coordinator/notify/outbox.h"
#include "coordinator/store/pg_pool.h"
#include "coordinator/store/pg_util.h"

namespace leapfrog::coord::notify {

namespace {

// Backoff after `attempts` failed attempts: first, 2 first, 4 first, ... max.
Duration backoff(const RetryPolicy& p, uint32_t attempts) {
  Duration d = p.first;
  for (uint32_t i = 1; i < attempts && d < p.max; ++i) d *= 2;
  return std::min(d, p.max);
}

}  // namespace

PgNotifyStore::PgNotifyStore(const std::string& url, int pool_size)
    : pool_(std::make_unique<PgPool>(url, pool_size, std::vector<PgStatement>{})) {}

PgNotifyStore::~PgNotifyStore() = default;

v1::Subscription PgNotifyStore::add_subscription(const v1::Subscription& in, TimePoint now) {
  validate(in);
  v1::Subscription s = in;
  s.clear_id();
  s.clear_delivered();
  s.clear_pending();
  s.clear_failed();
  s.clear_last_error();
  *s.mutable_created_at() = proto_timestamp(us(now));
  const int64_t id = run_transaction(*pool_, "add_subscription", [&](pqxx::work& txn) {
    // ListSubscriptions answers every subscription in one message: a bound
    // on their number, with each one's strings bounded (request_bounds.h),
    // keeps it within kMaxPageBytes. The lock orders concurrent adds.
    txn.exec("LOCK TABLE subscriptions IN SHARE ROW EXCLUSIVE MODE");
    if (const auto n = txn.exec1("SELECT count(*) FROM subscriptions")[0].as<int64_t>();
        n >= static_cast<int64_t>(kMaxSubscriptions))
      throw RequestError(ErrorKind::kFailedPrecondition,
                         "there are " + std::to_string(n) + " subscriptions, the most kept: remove one first");
    return txn
        .exec_params1(
            "INSERT INTO subscriptions (name, subscription, created_at)"
            " VALUES ($1, $2, lf_ts($3)) RETURNING id",
            clean(s.name()), bytes(s), us(now))[0]
        .as<int64_t>();
  });
  s.set_id(id);
  spdlog::info("notify.subscribe id={} name=\"{}\" target={}", id, s.name(),
               s.has_webhook() ? "webhook" : "email");
  return s;
}

std::vector<v1::Subscription> PgNotifyStore::list_subscriptions() {
  return run_transaction(*pool_, "list_subscriptions", [&](pqxx::work& txn) {
    std::vector<v1::Subscription> out;
    const auto rows = txn.exec(
        "SELECT s.id, s.subscription,"
        "  count(*) FILTER (WHERE o.state = 'delivered'),"
        "  count(*) FILTER (WHERE o.state = 'pending'),"
        "  count(*) FILTER (WHERE o.state = 'failed'),"
        "  (SELECT last_error FROM notify_outbox l WHERE l.subscription_id = s.id"
        "    AND l.attempts > 0 ORDER BY l.event_id DESC LIMIT 1)"
        " FROM subscriptions s LEFT JOIN notify_outbox o ON o.subscription_id = s.id"
        " GROUP BY s.id ORDER BY s.id");
    for (const auto& r : rows) {
      auto s = parse<v1::Subscription>(r[1], "subscription");
      s.set_id(r[0].as<int64_t>());
      s.set_delivered(r[2].as<uint64_t>());
      s.set_pending(r[3].as<uint64_t>());
      s.set_failed(r[4].as<uint64_t>());
      s.set_last_error(r[5].is_null() ? "" : r[5].as<std::string>());
      out.push_back(std::move(s));
    }
    return out;
  });
}

bool PgNotifyStore::remove_subscription(int64_t id) {
  return run_transaction(*pool_, "remove_subscription", [&](pqxx::work& txn) {
    return txn.exec_params("DELETE FROM subscriptions WHERE id = $1", id).affected_rows() > 0;
  });
}

bool PgNotifyStore::publish(const v1::Event& event) {
  return run_transaction(*pool_, "publish",
                         [&](pqxx::work& txn) { return notify::publish(txn, event); });
}

std::vector<v1::Event> PgNotifyStore::recent_events(uint32_t limit) {
  return run_transaction(*pool_, "recent_events", [&](pqxx::work& txn) {
    std::vector<v1::Event> out;
    for (const auto& r : txn.exec_params(
             "SELECT id, event, lf_us(created_at) FROM notify_events ORDER BY id DESC LIMIT $1",
             std::max<uint32_t>(limit, 1))) {
      auto e = parse<v1::Event>(r[1], "event");
      e.set_id(r[0].as<int64_t>());
      *e.mutable_at() = proto_timestamp(r[2].as<int64_t>());
      out.push_back(std::move(e));
    }
    return out;
  });
}

bool PgNotifyStore::deliver_next(const std::function<std::string(const Delivery&)>& send,
                                 const RetryPolicy& retry) {
  // By hand rather than run_transaction: that one may run its body again on
  // a fresh connection, and the body here sends a message.
  std::optional<PgPool::Handle> handle;
  try {
    handle.emplace(pool_->acquire());
  } catch (...) {
    pg_rethrow_as_store_error("deliver_next");
  }
  try {
    pqxx::work txn(handle->conn(), "deliver_next");
    const auto r = txn.exec(
        "SELECT o.event_id, o.subscription_id, o.attempts, e.event, lf_us(e.created_at),"
        "  s.subscription, e.key"
        " FROM notify_outbox o JOIN notify_events e ON e.id = o.event_id"
        "  JOIN subscriptions s ON s.id = o.subscription_id"
        " WHERE o.state = 'pending' AND o.next_attempt <= now()"
        " ORDER BY o.next_attempt, o.event_id, o.subscription_id LIMIT 1"
        " FOR UPDATE OF o SKIP LOCKED");
    if (r.empty()) return false;
    Delivery d;
    const int64_t event_id = r[0][0].as<int64_t>();
    const int64_t sub_id = r[0][1].as<int64_t>();
    d.attempts = r[0][2].as<uint32_t>();
    d.event = parse<v1::Event>(r[0][3], "event");
    d.event.set_id(event_id);
    d.event.set_key(r[0][6].as<std::string>());
    *d.event.mutable_at() = proto_timestamp(r[0][4].as<int64_t>());
    d.subscription = parse<v1::Subscription>(r[0][5], "subscription");
    d.subscription.set_id(sub_id);
    const std::string error = send(d);
    const uint32_t attempts = d.attempts + 1;
    if (error.empty()) {
      txn.exec_params(
          "UPDATE notify_outbox SET state = 'delivered', attempts = $3, delivered_at = now(),"
          " last_error = '' WHERE event_id = $1 AND subscription_id = $2",
          event_id, sub_id, attempts);
      spdlog::info("notify.delivered event={} subscription={} attempt={}", event_id, sub_id,
                   attempts);
    } else if (attempts >= retry.max_attempts) {
      txn.exec_params(
          "UPDATE notify_outbox SET state = 'failed', attempts = $3, last_error = $4"
          " WHERE event_id = $1 AND subscription_id = $2",
          event_id, sub_id, attempts, clean(error.substr(0, 1000)));
      spdlog::error("notify.gave_up event={} subscription={} attempts={} error=\"{}\"", event_id,
                    sub_id, attempts, error);
    } else {
      const Duration wait = backoff(retry, attempts);
      txn.exec_params(
          "UPDATE notify_outbox SET attempts = $3, last_error = $4,"
          " next_attempt = now() + $5 * interval '1 microsecond'"
          " WHERE event_id = $1 AND subscription_id = $2",
          event_id, sub_id, attempts, clean(error.substr(0, 1000)), wait.count());
      spdlog::warn("notify.retry event={} subscription={} attempt={} retry_ms={} error=\"{}\"",
                   event_id, sub_id, attempts, wait.count() / 1000, error);
    }
    txn.commit();
    return true;
  } catch (const pqxx::broken_connection&) {
    handle->discard();
    pg_rethrow_as_store_error("deliver_next");
  } catch (const pqxx::in_doubt_error&) {
    handle->discard();
    pg_rethrow_as_store_error("deliver_next");
  } catch (...) {
    pg_rethrow_as_store_error("deliver_next");
  }
}

std::vector<int64_t> PgNotifyStore::nightlies_to_compare(uint32_t limit) {
  return run_transaction(*pool_, "nightlies_to_compare", [&](pqxx::work& txn) {
    std::vector<int64_t> out;
    for (const auto& r : txn.exec_params(
             "SELECT c.id FROM campaigns c"
             " WHERE c.schedule_id <> 0"
             "  AND c.id > (SELECT first_campaign FROM notify_state WHERE id = 1)"
             "  AND NOT EXISTS (SELECT 1 FROM notify_checked k WHERE k.campaign_id = c.id)"
             "  AND NOT EXISTS (SELECT 1 FROM jobs j WHERE j.campaign_id = c.id"
             "   AND j.state <> 'done')"
             " ORDER BY c.id LIMIT $1",
             limit))
      out.push_back(r[0].as<int64_t>());
    return out;
  });
}

std::optional<int64_t> PgNotifyStore::previous_nightly(int64_t schedule_id, int64_t campaign_id) {
  return run_transaction(*pool_, "previous_nightly", [&](pqxx::work& txn) {
    const auto r =
        txn.exec_params1("SELECT max(id) FROM campaigns WHERE schedule_id = $1 AND id < $2",
                         schedule_id, campaign_id);
    return r[0].is_null() ? std::nullopt : std::optional<int64_t>(r[0].as<int64_t>());
  });
}

bool PgNotifyStore::finish_comparison(int64_t campaign_id, const std::optional<v1::Event>& event) {
  return run_transaction(*pool_, "finish_comparison", [&](pqxx::work& txn) {
    const bool first = txn.exec_params(
                              "INSERT INTO notify_checked (campaign_id, checked_at)"
                              " VALUES ($1, now()) ON CONFLICT DO NOTHING",
                              campaign_id)
                           .affected_rows() > 0;
    if (first && event) notify::publish(txn, *event);
    return first;
  });
}

std::vector<int64_t> PgNotifyStore::unserved_candidates(TimePoint created_before, uint32_t limit) {
  return run_transaction(*pool_, "unserved_candidates", [&](pqxx::work& txn) {
    std::vector<int64_t> out;
    for (const auto& r : txn.exec_params(
             "SELECT c.id FROM campaigns c"
             " WHERE c.schedule_id <> 0"
             "  AND c.id > (SELECT first_campaign FROM notify_state WHERE id = 1)"
             "  AND c.created_at <= lf_ts($1) AND c.created_at > lf_ts($1) - interval '2 days'"
             "  AND EXISTS (SELECT 1 FROM jobs j WHERE j.campaign_id = c.id"
             "   AND j.state = 'queued')"
             "  AND NOT EXISTS (SELECT 1 FROM notify_events e"
             "   WHERE e.key = 'nightly-unserved:' || c.id)"
             " ORDER BY c.id DESC LIMIT $2",
             us(created_before), limit))
      out.push_back(r[0].as<int64_t>());
    return out;
  });
}

}  // namespace leapfrog::coord::notify
