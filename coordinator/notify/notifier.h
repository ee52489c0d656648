#pragma once
// The notifier: on a thread of its own (`leapfrog serve`), each tick compares
// finished nightlies with the night before, looks for nightlies no agent can
// serve, and sends what the outbox holds (webhook POSTs and mails), retrying
// with backoff. Events themselves are stored where their facts are committed
// (triage's issues and actions, the scheduler, the comparisons here).

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>

#include "coordinator/clock.h"
#include "coordinator/notify/notify_store.h"
#include "coordinator/notify/senders.h"
#include "coordinator/notify/webhook_policy.h"
#include "coordinator/store/store.h"

namespace leapfrog::coord::notify {

struct NotifierOptions {
  // Base of the links in messages ("http://host:port", the dashboard).
  std::string link_base;
  SmtpOptions smtp;
  // Where webhooks may go (`serve --webhook-allow`), checked again at each
  // delivery: the address checked is the one connected to.
  WebhookPolicy webhooks;
  RetryPolicy retry;
  // Pause between ticks when nothing was due.
  Duration poll_every = std::chrono::seconds(1);
  // A nightly whose jobs still wait this long after it was made, with a
  // reason why no agent can run them (campaign.h unserved), is reported.
  Duration unserved_after = std::chrono::minutes(10);
  // Agents not seen for this long are offline (three heartbeats).
  Duration offline_after = std::chrono::seconds(6);
  // Deliveries sent per tick at most.
  uint32_t deliveries_per_tick = 50;
  // How often a tick also compares nightlies and looks for unserved ones.
  std::chrono::milliseconds sweep_every = std::chrono::seconds(5);
};

class Notifier {
 public:
  Notifier(Store& store, PgNotifyStore& notify, const Clock& clock, NotifierOptions options);
  ~Notifier();
  Notifier(const Notifier&) = delete;
  Notifier& operator=(const Notifier&) = delete;

  // One pass: comparisons and unserved nightlies (every sweep_every), then
  // the deliveries due. Returns the deliveries attempted. Throws StoreError.
  uint32_t tick();
  // Compares finished nightlies not compared yet; returns events stored.
  uint32_t compare_nightlies();
  // Reports nightlies no agent can serve; returns events stored.
  uint32_t check_unserved();
  // Sends one delivery (what deliver_next calls): "" or the error.
  std::string send(const Delivery& d) const;

  // Runs tick() on a thread until stop().
  void start();
  void stop();

 private:
  void loop();

  Store& store_;
  PgNotifyStore& notify_;
  const Clock& clock_;
  NotifierOptions options_;
  std::chrono::steady_clock::time_point next_sweep_{};
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace leapfrog::coord::notify
