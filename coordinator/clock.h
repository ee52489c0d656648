#pragma once
// Wall-clock time for leases and schedules, injected so tests can drive it.

#include <atomic>
#include <chrono>

namespace leapfrog::coord {

using SysClock = std::chrono::system_clock;
using TimePoint = std::chrono::time_point<SysClock, std::chrono::microseconds>;
using Duration = std::chrono::microseconds;

class Clock {
 public:
  virtual ~Clock() = default;
  // The current time, UTC.
  virtual TimePoint now() const = 0;
};

class SystemClock : public Clock {
 public:
  TimePoint now() const override { return std::chrono::time_point_cast<Duration>(SysClock::now()); }
};

// A clock tests move by hand.
class ManualClock : public Clock {
 public:
  explicit ManualClock(TimePoint start) : now_(start.time_since_epoch().count()) {}
  TimePoint now() const override { return TimePoint(Duration(now_.load())); }
  void advance(Duration d) { now_ += d.count(); }
  void set(TimePoint t) { now_ = t.time_since_epoch().count(); }

 private:
  std::atomic<int64_t> now_;
};

}  // namespace leapfrog::coord
