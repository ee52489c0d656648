#include "coordinator/usecases/schedules.h"

#include <spdlog/spdlog.h>

#include "common/bounds.h"
#include "coordinator/campaign.h"
#include "coordinator/error_status.h"
#include "coordinator/schedule/next_firing.h"

namespace leapfrog::coord::usecases {

namespace {

RequestError no_schedule(int64_t id) {
  return RequestError(ErrorKind::kNotFound, "no schedule \"" + std::to_string(id) + "\"");
}

}  // namespace

v1::Schedule Schedules::add(const std::string& name, const std::string& cron,
                            const v1::CampaignSpec& campaign) {
  if (name.empty()) throw RequestError(ErrorKind::kInvalidArgument, "schedule name is empty");
  if (auto why = too_long("schedule name", name, kMaxNameBytes); !why.empty())
    throw RequestError(ErrorKind::kInvalidArgument, why);
  if (auto why = too_long("cron", cron, kMaxLabelBytes); !why.empty())
    throw RequestError(ErrorKind::kInvalidArgument, why);
  const TimePoint next = next_firing(cron, clock_.now());
  const v1::CampaignSpec spec = normalize(campaign);
  v1::Schedule s = store_.add_schedule(name, cron, spec, next);
  spdlog::info("schedule.add schedule={} cron=\"{}\"", s.id(), cron);
  return s;
}

Page<v1::Schedule> Schedules::list(uint32_t limit, const std::string& page_token) {
  return store_.page_schedules(limit, page_token);
}

v1::Schedule Schedules::set_enabled(int64_t id, bool enabled) {
  std::string cron;
  bool found = false;
  for (const auto& s : store_.list_schedules()) {
    if (s.id() != id) continue;
    cron = s.cron();
    found = true;
  }
  if (!found) throw no_schedule(id);
  // Re-enabling starts from now: firings missed while disabled are skipped.
  auto s = store_.set_schedule_enabled(id, enabled, next_firing(cron, clock_.now()));
  if (!s) throw no_schedule(id);  // removed meanwhile
  return std::move(*s);
}

void Schedules::remove(int64_t id) {
  if (!store_.remove_schedule(id)) throw no_schedule(id);
}

}  // namespace leapfrog::coord::usecases
