#pragma once
// The schedule use-cases, which the gRPC ControlService and the HTTP API
// both call: add, list, enable or disable, and remove schedules. Failures
// are typed (error_status.h): RequestError(kInvalidArgument) for a bad name,
// SpecError for a bad cron or campaign, RequestError(kNotFound) for an
// unknown schedule, StoreError from the store.

#include <cstdint>
#include <string>
#include <vector>

#include "coordinator/clock.h"
#include "coordinator/store/store.h"

namespace leapfrog::coord::usecases {

class Schedules {
 public:
  Schedules(Store& store, const Clock& clock) : store_(store), clock_(clock) {}

  // Stores schedule `name` of the normalized `campaign`, first firing at the
  // next match of `cron` after now.
  v1::Schedule add(const std::string& name, const std::string& cron,
                   const v1::CampaignSpec& campaign);
  // One page of the schedules, by id (kSchedulePage). Throws BadPageToken.
  Page<v1::Schedule> list(uint32_t limit, const std::string& page_token);
  // Enables or disables schedule `id`; enabled again, it next fires at the
  // next match after now.
  v1::Schedule set_enabled(int64_t id, bool enabled);
  void remove(int64_t id);

 private:
  Store& store_;
  const Clock& clock_;
};

}  // namespace leapfrog::coord::usecases
