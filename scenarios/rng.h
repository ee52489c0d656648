#pragma once
// The one seeded random source. Every random choice of a run derives from the
// run's seed through it, so a seed replays the run.

#include <cstdint>

namespace leapfrog {

class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}

  // splitmix64
  uint64_t next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  // Uniform in [0, n); n > 0.
  uint64_t below(uint64_t n) { return static_cast<uint64_t>((static_cast<unsigned __int128>(next()) * n) >> 64); }
  bool chance(double p) { return static_cast<double>(next() >> 11) * 0x1.0p-53 < p; }
  // An independent stream for actor `i`.
  Rng fork(uint64_t i) const { return Rng(state_ ^ (0xd1b54a32d192ed03ULL * (i + 1))); }

 private:
  uint64_t state_;
};

}  // namespace leapfrog
