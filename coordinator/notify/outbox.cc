// Events, their outbox, and subscription matching (outbox.h).

#include "coordinator/notify/outbox.h"

#include <fnmatch.h>
#include <spdlog/spdlog.h>

#include <algorithm>

#include "coordinator/notify/webhook_policy.h"

namespace leapfrog::coord::notify {

namespace {

// A label or name against a subscription's pattern: equal, or an fnmatch glob.
bool glob(const std::string& pattern, const std::string& value) {
  return pattern == value || fnmatch(pattern.c_str(), value.c_str(), 0) == 0;
}

// Whether `pattern` matches the event's own field or one of its cells'.
template <class Field>
bool any_matches(const std::string& pattern, const v1::Event& e, const std::string& own,
                 Field field) {
  if (!own.empty() && glob(pattern, own)) return true;
  return std::any_of(e.cells().begin(), e.cells().end(),
                     [&](const v1::EventCell& c) { return glob(pattern, field(c)); });
}

std::string clean(std::string s) {
  s.erase(std::remove(s.begin(), s.end(), '\0'), s.end());
  return s;
}

}  // namespace

std::string event_kind_name(v1::EventKind k) {
  switch (k) {
    case v1::EVENT_KIND_NEW_ISSUE:
      return "new-issue";
    case v1::EVENT_KIND_REGRESSION:
      return "regression";
    case v1::EVENT_KIND_NIGHTLY_FAILED:
      return "nightly-failed";
    case v1::EVENT_KIND_NIGHTLY_NOT_RUN:
      return "nightly-not-run";
    case v1::EVENT_KIND_ACTION_RESULT:
      return "action-result";
    default:
      return "";
  }
}

v1::EventKind parse_event_kind(const std::string& name) {
  for (int k = v1::EventKind_MIN; k <= v1::EventKind_MAX; ++k) {
    const auto kind = static_cast<v1::EventKind>(k);
    if (kind != v1::EVENT_KIND_UNSPECIFIED && event_kind_name(kind) == name) return kind;
  }
  throw SubscriptionError("unknown event kind \"" + name +
                          "\": want new-issue, regression, nightly-failed, nightly-not-run or "
                          "action-result");
}

bool matches(const v1::SubscriptionFilter& f, const v1::Event& e) {
  if (f.events_size() > 0 &&
      std::find(f.events().begin(), f.events().end(), e.kind()) == f.events().end())
    return false;
  if (!f.kernel().empty() &&
      !any_matches(f.kernel(), e, e.kernel_label(),
                   [](const v1::EventCell& c) -> const std::string& { return c.kernel_label(); }))
    return false;
  if (!f.scenario().empty() &&
      !any_matches(f.scenario(), e, e.scenario(),
                   [](const v1::EventCell& c) -> const std::string& { return c.scenario(); }))
    return false;
  if (f.issue_kind() != v1::ISSUE_KIND_UNSPECIFIED && f.issue_kind() != e.issue_kind())
    return false;
  if (f.schedule_id() != 0 && f.schedule_id() != e.schedule_id()) return false;
  return true;
}

void validate(const v1::Subscription& s) {
  if (s.name().empty()) throw SubscriptionError("a subscription needs a name");
  if (s.name().size() > 200) throw SubscriptionError("the name is longer than 200 bytes");
  switch (s.target_case()) {
    case v1::Subscription::kWebhook: {
      // Its form only; where it may go is WebhookPolicy::check's, on the coordinator.
      parse_webhook_url(s.webhook().url());
      break;
    }
    case v1::Subscription::kEmail: {
      if (s.email().to_size() == 0)
        throw SubscriptionError("an e-mail subscription needs an address");
      for (const auto& to : s.email().to()) {
        const auto at = to.find('@');
        if (at == std::string::npos || at == 0 || at + 1 == to.size() ||
            to.find_first_of(" <>,;\r\n\t") != std::string::npos)
          throw SubscriptionError("bad e-mail address \"" + to + "\": want user@host");
      }
      break;
    }
    default:
      throw SubscriptionError("a subscription needs a target: a webhook URL or e-mail addresses");
  }
  for (int k : s.filter().events())
    if (k == v1::EVENT_KIND_UNSPECIFIED || !v1::EventKind_IsValid(k))
      throw SubscriptionError("unknown event kind " + std::to_string(k));
}

void check_target(const WebhookPolicy& webhooks, const v1::Subscription& s) {
  validate(s);
  if (s.has_webhook()) webhooks.check(s.webhook().url());
}

bool publish(pqxx::transaction_base& txn, const v1::Event& event) {
  v1::Event stored = event;
  stored.clear_id();
  stored.clear_at();
  stored.clear_link();
  const auto r = txn.exec_params(
      "INSERT INTO notify_events (key, kind, event, created_at) VALUES ($1, $2, $3, now())"
      " ON CONFLICT (key) DO NOTHING RETURNING id",
      clean(event.key()), static_cast<int>(event.kind()),
      pqxx::binarystring(stored.SerializeAsString()));
  if (r.empty()) return false;
  const int64_t id = r[0][0].as<int64_t>();
  int queued = 0;
  for (const auto& row : txn.exec("SELECT id, subscription FROM subscriptions ORDER BY id")) {
    pqxx::binarystring b(row[1]);
    v1::Subscription s;
    if (!s.ParseFromArray(b.data(), static_cast<int>(b.size()))) continue;
    if (!matches(s.filter(), event)) continue;
    txn.exec_params(
        "INSERT INTO notify_outbox (event_id, subscription_id, next_attempt)"
        " VALUES ($1, $2, now())",
        id, row[0].as<int64_t>());
    ++queued;
  }
  spdlog::info("notify.event id={} key={} kind={} deliveries={}", id, event.key(),
               event_kind_name(event.kind()), queued);
  return true;
}

}  // namespace leapfrog::coord::notify
