#pragma once
// Wakes long-polling leases when new work is queued in this process: threads
// that wait, and subscribers (the agent service's parked Lease calls).

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>

namespace leapfrog::coord {

class WorkSignal {
 public:
  void notify() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++generation_;
    }
    cv_.notify_all();
    std::lock_guard<std::mutex> lock(listeners_mu_);
    for (auto& [id, f] : listeners_) f();
  }
  // Waits until notified or `timeout` passes.
  void wait_for(std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> lock(mu_);
    const uint64_t g = generation_;
    cv_.wait_for(lock, timeout, [&] { return generation_ != g; });
  }
  // Calls `f` on every notify() from now on, on the notifying thread (`f`
  // must not block, nor subscribe or unsubscribe); returns the id that
  // unsubscribe takes.
  uint64_t subscribe(std::function<void()> f) {
    std::lock_guard<std::mutex> lock(listeners_mu_);
    listeners_.emplace(++next_id_, std::move(f));
    return next_id_;
  }
  // Stops calling subscription `id`'s function; once it returns, no call of
  // it is under way.
  void unsubscribe(uint64_t id) {
    std::lock_guard<std::mutex> lock(listeners_mu_);
    listeners_.erase(id);
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  uint64_t generation_ = 0;
  std::mutex listeners_mu_;  // held while the listeners run
  uint64_t next_id_ = 0;
  std::map<uint64_t, std::function<void()>> listeners_;
};

}  // namespace leapfrog::coord
