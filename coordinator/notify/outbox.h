#pragma once
// The events and their outbox in PostgreSQL (migration 8), written inside a
// caller's transaction: an event is stored once under its key, and one
// delivery is queued per subscription whose filter matches it, so the event
// commits (or not) with the fact it reports. Matching and validation of
// subscriptions live here too; delivery is notifier.h's.

#include <pqxx/pqxx>
#include <stdexcept>
#include <string>

#include "leapfrog/v1/notify.pb.h"

namespace leapfrog::coord::notify {

// A subscription that cannot be stored; the message says what is wrong.
class SubscriptionError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

// Stores `event` (key and kind set) unless an event with its key is stored
// already, and queues a delivery for each subscription it matches, due now.
// Returns whether it was new. pqxx errors pass through.
bool publish(pqxx::transaction_base& txn, const v1::Event& event);

// Whether `event` passes every set field of `filter`.
bool matches(const v1::SubscriptionFilter& filter, const v1::Event& event);

// Checks a subscription's form: a name, one target (an http(s) URL as
// parse_webhook_url takes it, or addresses that look like user@host), known
// event kinds; throws SubscriptionError. Where a webhook may go is checked
// by the coordinator's WebhookPolicy (webhook_policy.h).
void validate(const v1::Subscription& s);

class WebhookPolicy;

// validate(s), and for a webhook, that its destination passes `webhooks`
// (WebhookPolicy::check: resolved once, every address checked); throws
// SubscriptionError with the reason.
void check_target(const WebhookPolicy& webhooks, const v1::Subscription& s);

// "new-issue", "regression", "nightly-failed", "nightly-not-run",
// "action-result"; parse_event_kind is its inverse (throws SubscriptionError).
std::string event_kind_name(v1::EventKind k);
v1::EventKind parse_event_kind(const std::string& name);

}  // namespace leapfrog::coord::notify
