#pragma once
// Live counts of a run, written by the race engine while it judges and read
// by whoever reports progress (the agent's heartbeats). Plain atomics: the
// writer updates them a batch at a time, a reader may see any recent value.

#include <atomic>
#include <cstdint>

namespace leapfrog {

struct RunProgress {
  std::atomic<uint64_t> operations{0};      // records taken from the actors so far
  std::atomic<uint64_t> lookups_judged{0};  // lookups and offsets judged so far
  std::atomic<uint64_t> violations{0};      // violations found so far
};

}  // namespace leapfrog
