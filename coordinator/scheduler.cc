#include "coordinator/scheduler.h"

#include <spdlog/spdlog.h>

#include "common/proto_time.h"
#include "coordinator/campaign.h"
#include "coordinator/schedule/next_firing.h"
#include "coordinator/notify/event_sink.h"

#include <ctime>

namespace leapfrog::coord {

namespace {

// "2026-12-01 02:00:00 UTC"
std::string iso_utc(TimePoint t) {
  const std::time_t secs = static_cast<std::time_t>(t.time_since_epoch().count() / 1'000'000);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[40];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S UTC", &tm);
  return buf;
}

}  // namespace

void Scheduler::report_not_run(const v1::Schedule& s, const std::string& key,
                               const std::string& why, int64_t campaign) {
  if (!events_) return;
  v1::Event e;
  e.set_key(key);
  e.set_kind(v1::EVENT_KIND_NIGHTLY_NOT_RUN);
  e.set_schedule_id(s.id());
  e.set_schedule_name(s.name());
  e.set_campaign_id(campaign);
  std::vector<std::string> kernels(s.campaign().kernels().begin(), s.campaign().kernels().end());
  if (kernels.empty()) kernels.push_back("host");  // normalize()'s default
  for (const auto& sc : s.campaign().scenarios())
    for (const auto& k : kernels)
      for (const auto& f : s.campaign().filesystems()) {
        auto* cell = e.add_cells();
        cell->set_scenario(sc);
        cell->set_kernel_label(k);
        cell->set_fs(f);
      }
  e.add_reasons(why);
  e.set_summary("nightly \"" + s.name() + "\" did not run when due" +
                (campaign ? " (fired late as campaign " + std::to_string(campaign) + ")"
                          : ": the schedule was disabled"));
  try {
    events_->publish(e);
  } catch (const std::exception& err) {
    // The firing itself is stored; only its notification is lost.
    spdlog::warn("schedule.notify_failed schedule={} error=\"{}\"", s.id(), err.what());
  }
}

std::vector<int64_t> Scheduler::tick() {
  std::vector<int64_t> created;
  const TimePoint now = clock_.now();
  for (const auto& s : store_.list_schedules()) {
    if (!s.enabled() || !s.has_next_run()) continue;
    const TimePoint due = from_proto(s.next_run());
    if (due > now) continue;
    try {
      const TimePoint next = next_firing(s.cron(), now);
      const v1::CampaignSpec spec = normalize(s.campaign());
      if (auto id = store_.fire_schedule(s.id(), due, next, expand(spec), now)) {
        created.push_back(*id);
        spdlog::info("schedule.fire schedule={} campaign={} due={}", s.id(), *id,
                     due.time_since_epoch().count() / 1'000'000);
        if (now - due > kLateFiring)
          report_not_run(s,
                         "nightly-late:" + std::to_string(s.id()) + ":" +
                             std::to_string(due.time_since_epoch().count()),
                         "it was due at " + iso_utc(due) + " but fired only at " + iso_utc(now) +
                             " (campaign " + std::to_string(*id) +
                             "): the coordinator was not running; missed firings are not "
                             "made up",
                         *id);
      }
    } catch (const SpecError& e) {
      // The catalogue changed under a stored schedule: it can never fire, so
      // disable it (once, visibly) instead of failing every tick.
      spdlog::error("schedule.disabled_invalid schedule={} error=\"{}\"", s.id(), e.what());
      store_.set_schedule_enabled(s.id(), false, due);
      report_not_run(s,
                     "nightly-invalid:" + std::to_string(s.id()) + ":" +
                         std::to_string(due.time_since_epoch().count()),
                     std::string("its spec is no longer valid, so it was disabled: ") + e.what(),
                     0);
    }
  }
  if (!created.empty()) work_.notify();
  return created;
}

}  // namespace leapfrog::coord
