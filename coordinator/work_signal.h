#pragma once
// Wakes long-polling leases when new work is queued in this process.

#include <chrono>
#include <condition_variable>
#include <cstdint>
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
  }
  // Waits until notified or `timeout` passes.
  void wait_for(std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> lock(mu_);
    const uint64_t g = generation_;
    cv_.wait_for(lock, timeout, [&] { return generation_ != g; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  uint64_t generation_ = 0;
};

}  // namespace leapfrog::coord
