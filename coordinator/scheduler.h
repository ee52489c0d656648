#pragma once
// Fires schedules: each firing of a cron expression creates a campaign.

#include <vector>

#include "coordinator/clock.h"
#include "coordinator/store/store.h"
#include "coordinator/work_signal.h"

namespace leapfrog::coord {

class Scheduler {
 public:
  Scheduler(Store& store, const Clock& clock, WorkSignal& work) : store_(store), clock_(clock), work_(work) {}
  // Fires every enabled schedule whose next run has come, once even if several
  // firings were missed (the coordinator was down), and moves it to its next
  // firing after now. Safe with several replicas. Returns campaigns created.
  std::vector<int64_t> tick();

 private:
  Store& store_;
  const Clock& clock_;
  WorkSignal& work_;
};

}  // namespace leapfrog::coord
