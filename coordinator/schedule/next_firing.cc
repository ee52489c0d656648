#include "coordinator/schedule/next_firing.h"

#include "coordinator/campaign.h"
#include "coordinator/schedule/cron.h"

namespace leapfrog::coord {

TimePoint next_firing(const std::string& cron, TimePoint t) {
  try {
    const CronExpr expr = CronExpr::parse(cron);
    const auto secs = std::chrono::time_point_cast<std::chrono::seconds>(t);
    return std::chrono::time_point_cast<Duration>(expr.next_after(std::chrono::sys_seconds(secs.time_since_epoch())));
  } catch (const CronError& e) {
    throw SpecError(e.what());
  }
}

}  // namespace leapfrog::coord
