#include "coordinator/scheduler.h"

#include <spdlog/spdlog.h>

#include "common/proto_time.h"
#include "coordinator/campaign.h"
#include "coordinator/schedule/next_firing.h"

namespace leapfrog::coord {

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
      }
    } catch (const SpecError& e) {
      // The catalogue changed under a stored schedule: it can never fire, so
      // disable it (once, visibly) instead of failing every tick.
      spdlog::error("schedule.disabled_invalid schedule={} error=\"{}\"", s.id(), e.what());
      store_.set_schedule_enabled(s.id(), false, due);
    }
  }
  if (!created.empty()) work_.notify();
  return created;
}

}  // namespace leapfrog::coord
