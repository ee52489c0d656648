#pragma once
// Fires schedules: each firing of a cron expression creates a campaign.

#include <string>
#include <vector>

#include "coordinator/clock.h"
#include "coordinator/store/store.h"
#include "coordinator/work_signal.h"

namespace leapfrog::coord {

namespace notify {
class EventSink;
}

// A firing this late (the coordinator was down when it was due) is reported
// to `events` as a nightly that did not run when due.
inline constexpr Duration kLateFiring = std::chrono::minutes(5);

class Scheduler {
 public:
  // `events` (may be null) hears of firings missed or late past kLateFiring
  // and of schedules disabled as invalid (coordinator/notify/).
  Scheduler(Store& store, const Clock& clock, WorkSignal& work, notify::EventSink* events = nullptr)
      : store_(store), clock_(clock), work_(work), events_(events) {}
  // Fires every enabled schedule whose next run has come, once even if several
  // firings were missed (the coordinator was down), and moves it to its next
  // firing after now. Safe with several replicas. Returns campaigns created.
  std::vector<int64_t> tick();

 private:
  // Tells events_ (once per `key`) that schedule `s` did not run when due: `why`.
  void report_not_run(const v1::Schedule& s, const std::string& key, const std::string& why,
                      int64_t campaign);

  Store& store_;
  const Clock& clock_;
  WorkSignal& work_;
  notify::EventSink* events_;
};

}  // namespace leapfrog::coord
