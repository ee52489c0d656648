// The notifier's tick (notifier.h).

#include "coordinator/notify/notifier.h"

#include <spdlog/spdlog.h>

#include <map>
#include <set>
#include <tuple>

#include "coordinator/campaign.h"
#include "coordinator/notify/message.h"
#include "coordinator/notify/outbox.h"
#include "coordinator/store/pg_util.h"

namespace leapfrog::coord::notify {

namespace {

using CellKey = std::tuple<std::string, std::string, std::string>;

// A cell passed: every job done, and done with PASS.
bool passed(const CellSummary& c) {
  uint32_t pending = 0, bad = 0, good = 0;
  for (const auto& [state, n] : c.pending) pending += n;
  for (const auto& [verdict, n] : c.done) (verdict == v1::VERDICT_PASS ? good : bad) += n;
  return pending == 0 && bad == 0 && good > 0;
}

std::string schedule_name(Store& store, int64_t id) {
  for (const auto& s : store.list_schedules())
    if (s.id() == id) return s.name();
  return "";
}

std::string nightly_title(const std::string& name, int64_t schedule_id) {
  return name.empty() ? "nightly of schedule " + std::to_string(schedule_id)
                      : "nightly \"" + name + "\"";
}

}  // namespace

Notifier::Notifier(Store& store, PgNotifyStore& notify, const Clock& clock, NotifierOptions options)
    : store_(store), notify_(notify), clock_(clock), options_(std::move(options)) {}

Notifier::~Notifier() {
  stop();
}

uint32_t Notifier::compare_nightlies() {
  uint32_t stored = 0;
  for (const int64_t id : notify_.nightlies_to_compare(20)) {
    const auto c = store_.get_campaign(id);
    if (!c) continue;
    std::optional<v1::Event> event;
    if (const auto prev = notify_.previous_nightly(c->schedule_id(), id)) {
      std::map<CellKey, bool> before;
      for (const auto& cell : store_.campaign_cells(*prev))
        before[{cell.scenario, cell.kernel_label, cell.fs}] = passed(cell);
      v1::Event e;
      for (const auto& cell : store_.campaign_cells(id)) {
        if (cell.scenario == kBuildJobScenario) continue;
        const auto was = before.find({cell.scenario, cell.kernel_label, cell.fs});
        if (was == before.end() || !was->second) continue;
        uint32_t failed = 0, most = 0;
        v1::Verdict worst = v1::VERDICT_UNSPECIFIED;
        for (const auto& [verdict, n] : cell.done) {
          if (verdict == v1::VERDICT_PASS) continue;
          failed += n;
          if (n > most) most = n, worst = verdict;
        }
        if (failed == 0) continue;
        auto* ec = e.add_cells();
        ec->set_scenario(cell.scenario);
        ec->set_kernel_label(cell.kernel_label);
        ec->set_fs(cell.fs);
        ec->set_verdict(worst);
        ec->set_failed_jobs(failed);
        ec->set_jobs(cell.jobs);
      }
      if (e.cells_size() > 0) {
        const std::string name = schedule_name(store_, c->schedule_id());
        e.set_key("nightly-failed:" + std::to_string(id));
        e.set_kind(v1::EVENT_KIND_NIGHTLY_FAILED);
        e.set_campaign_id(id);
        e.set_previous_campaign_id(*prev);
        e.set_schedule_id(c->schedule_id());
        e.set_schedule_name(name);
        const int n = e.cells_size();
        e.set_summary(nightly_title(name, c->schedule_id()) + " (campaign " + std::to_string(id) +
                      "): " + std::to_string(n) + (n == 1 ? " cell fails" : " cells fail") +
                      " that passed the night before (campaign " + std::to_string(*prev) + ")");
        event = std::move(e);
      }
    }
    if (notify_.finish_comparison(id, event) && event) ++stored;
  }
  return stored;
}

uint32_t Notifier::check_unserved() {
  uint32_t stored = 0;
  const TimePoint now = clock_.now();
  for (const int64_t id : notify_.unserved_candidates(now - options_.unserved_after, 20)) {
    const auto c = store_.get_campaign(id);
    if (!c) continue;
    const auto why = unserved(store_, *c, now - options_.offline_after);
    if (why.empty()) continue;
    const std::string name = schedule_name(store_, c->schedule_id());
    v1::Event e;
    e.set_key("nightly-unserved:" + std::to_string(id));
    e.set_kind(v1::EVENT_KIND_NIGHTLY_NOT_RUN);
    e.set_campaign_id(id);
    e.set_schedule_id(c->schedule_id());
    e.set_schedule_name(name);
    for (const auto& s : c->spec().scenarios())
      for (const auto& k : c->spec().kernels())
        for (const auto& f : c->spec().filesystems()) {
          auto* cell = e.add_cells();
          cell->set_scenario(s);
          cell->set_kernel_label(k);
          cell->set_fs(f);
        }
    for (const auto& w : why) e.add_reasons(w);
    e.set_summary(nightly_title(name, c->schedule_id()) + " (campaign " + std::to_string(id) +
                  ") cannot be served: no agent can run its jobs");
    if (notify_.publish(e)) ++stored;
  }
  return stored;
}

std::string Notifier::send(const Delivery& d) const {
  v1::Event e = d.event;
  e.set_link(event_link(e, options_.link_base));
  const std::string id = std::to_string(e.id()) + "-" + std::to_string(d.subscription.id());
  try {
    if (d.subscription.has_webhook()) {
      // Resolved and checked now, not when it was added: a name may point
      // elsewhere since, and a subscription may predate the policy.
      WebhookDestination dest;
      try {
        dest = options_.webhooks.check(d.subscription.webhook().url());
      } catch (const SubscriptionError& err) {
        return err.what();
      }
      post_webhook(dest, to_json(e).dump(), id, e.key());
    } else if (d.subscription.has_email()) {
      const std::vector<std::string> to(d.subscription.email().to().begin(),
                                        d.subscription.email().to().end());
      const auto at = options_.smtp.from.find('@');
      const std::string domain =
          at == std::string::npos ? "leapfrog" : options_.smtp.from.substr(at + 1);
      send_mail(options_.smtp, to, mail_subject(e), mail_body(e), "leapfrog-" + id + "@" + domain);
    } else {
      return "the subscription has no target";
    }
  } catch (const DeliveryError& err) {
    return err.what();
  } catch (const std::exception& err) {
    return std::string("delivery failed: ") + err.what();
  }
  return "";
}

uint32_t Notifier::tick() {
  if (const auto now = std::chrono::steady_clock::now(); now >= next_sweep_) {
    compare_nightlies();
    check_unserved();
    next_sweep_ = now + options_.sweep_every;
  }
  uint32_t n = 0;
  while (n < options_.deliveries_per_tick &&
         notify_.deliver_next([this](const Delivery& d) { return send(d); }, options_.retry))
    ++n;
  return n;
}

void Notifier::start() {
  if (thread_.joinable()) return;
  thread_ = std::thread([this] { loop(); });
}

void Notifier::stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void Notifier::loop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stopping_) {
    lock.unlock();
    uint32_t sent = 0;
    try {
      sent = tick();
    } catch (const StoreError& e) {
      spdlog::warn("notify.store_error unavailable={} error=\"{}\"", e.unavailable(), e.what());
    } catch (const std::exception& e) {
      spdlog::error("notify.error error=\"{}\"", e.what());
    }
    lock.lock();
    // A full tick may have left more due: go on at once.
    if (sent >= options_.deliveries_per_tick) continue;
    cv_.wait_for(lock, options_.poll_every, [this] { return stopping_; });
  }
}

}  // namespace leapfrog::coord::notify
