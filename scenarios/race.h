#pragma once
// Racing actors: forked processes that meet at a spin barrier every round
// (fuzzy sync), sweep a seeded delay across the window in which their calls can
// overlap, and append one record per operation to a shared-memory buffer.
// Actors marked free_running skip the barrier and loop on their own, in the
// same run as the aligned ones (mixed alignment).

#include <sys/types.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "scenarios/model.h"
#include "scenarios/rng.h"

namespace leapfrog {

// One recorded operation as written on the hot path: plain data, no allocation.
struct RawRecord {
  TimeNs invoke;
  TimeNs complete;
  uint64_t a;   // lookups: st_dev; offsets: offset
  uint64_t b;   // lookups: st_ino; offsets: length
  uint32_t op;  // template index (mutation effect or query)
  int32_t err;  // errno, 0 on success
  uint32_t round;
  uint32_t aux;  // scenario-specific (offsets: epoch << 1 | is_seek)
};

enum class ActorRole : uint8_t { Mutator, Observer, Peer };
const char* to_string(ActorRole r);

struct RaceControl;

// What an actor's step function sees.
class ActorEnv {
 public:
  // ring: the buffer of `capacity` records (a power of two) is reused as the
  // race engine hands records to its sink; otherwise it holds the whole run.
  ActorEnv(uint32_t id, ActorRole role, Rng rng, RawRecord* records, uint64_t capacity,
           RaceControl* ctl, bool ring = false)
      : id_(id),
        role_(role),
        rng_(rng),
        records_(records),
        capacity_(capacity),
        mask_(ring ? capacity - 1 : ~uint64_t{0}),
        limit_(capacity),
        ring_(ring),
        ctl_(ctl) {}

  uint32_t id() const { return id_; }
  ActorRole role() const { return role_; }
  Rng& rng() { return rng_; }
  // Appends a record. The buffer is sized so that this cannot overflow: the
  // loop stops the run (or waits for room) before it fills.
  void push(const RawRecord& r) { records_[count_++ & mask_] = r; }
  // The next record, filled in place and then kept by commit(). room()
  // records from it on lie end to end.
  RawRecord& next() { return records_[count_ & mask_]; }
  void commit(uint64_t n = 1) { count_ += n; }
  uint64_t recorded() const { return count_; }
  const RawRecord& last() const { return records_[(count_ - 1) & mask_]; }
  bool full() const { return count_ + 4 >= limit_; }
  // Records that can be written end to end from next() (not full()).
  uint64_t room() const {
    const uint64_t free = limit_ - 4 - count_;
    return ring_ ? std::min(free, capacity_ - (count_ & mask_)) : free;
  }
  // When full(): a ring waits until the sink has taken records (the race's
  // backpressure, counted as stalled time); false if the run is stopping,
  // and always false for a buffer that holds the whole run.
  bool make_room();
  // Makes the records so far visible to the race engine (a ring's sink).
  void publish();
  RaceControl* control() const { return ctl_; }
  // Asks every actor to stop at the next round.
  void request_stop();
  // Peers only: wait until every peer reaches this call (used to rewind a
  // shared file together). Returns false if the run is stopping.
  bool peer_barrier();

 private:
  uint32_t id_;
  ActorRole role_;
  Rng rng_;
  RawRecord* records_;
  uint64_t capacity_;
  uint64_t mask_;
  uint64_t limit_;  // full at limit_ - 4: a ring's taken records plus its capacity
  bool ring_;
  // Kept here, not in shared memory, so that the hot path touches one page
  // fewer per record (the race engine publishes it every few rounds).
  uint64_t count_ = 0;
  RaceControl* ctl_;
};

struct ActorSpec {
  ActorRole role = ActorRole::Observer;
  // Runs in the forked child before the first round (chdir, drop privileges).
  // Throwing ends the run with an error.
  std::function<void()> prepare;
  // One operation of `round`; pushes its record(s) through the env.
  std::function<void(ActorEnv&, uint32_t round)> step;
  // Optional, used instead of step under free-running alignment: rounds
  // first .. first + n - 1 back to back, exactly as n calls of step would run
  // them, pushing at most one record a round. A hot step keeps its state in
  // registers and its own frame across the batch instead of reloading it from
  // the heap every round (see actor_loop).
  std::function<void(ActorEnv&, uint32_t first, uint32_t n)> steps;
  // Under fuzzy alignment: this actor does not meet the others at the
  // barrier but runs its rounds back to back, as under free-running
  // alignment, while the other actors stay aligned.
  bool free_running = false;
};

struct RaceConfig {
  // Rounds; 0: run for `duration`. Free-running actors go on past them
  // (within `capacity`) until every actor has done them.
  uint64_t iterations = 0;
  TimeNs duration = 1'000'000'000;
  bool fuzzy = true;                    // meet at a barrier each round and sweep delays
                                        // (actors but the free_running ones)
  uint32_t warmup = 256;                // rounds measured before delays start
  uint64_t capacity = 1 << 20;          // records per actor
  TimeNs stuck_grace = 30'000'000'000;  // an actor stuck this long past the end is an error
  bool pin_cpus = true;                 // one CPU per actor while there are enough
};

struct TimingStats {
  TimeNs mutator_mean_ns = 0;   // typical (median) duration of one mutation, measured in warm-up
  TimeNs observer_mean_ns = 0;  // typical (median) duration of one lookup (max over observers)
  TimeNs delay_span_ns = 0;     // width of the swept delay range
  uint32_t warmup_rounds = 0;
  // Free-running alignment: a paced mutator dwelt for a time drawn from
  // [0, pace_ns] after each mutation (twice the free-running observers'
  // median lookup); 0 when it was not paced.
  TimeNs pace_ns = 0;
};

// Takes the actors' records while the race runs, on the racing process's
// thread, so that a run of any length holds only what the sink keeps.
class RecordSink {
 public:
  virtual ~RecordSink() = default;
  // The next `n` records of actor `actor`, in its order; returns how many it
  // took (the rest are offered again, and the actor waits while its buffer
  // is full: backpressure).
  virtual size_t take(uint32_t actor, const RawRecord* records, size_t n) = 0;
  // Actor `actor` has ended: every record it made has been taken.
  virtual void done(uint32_t actor) = 0;
  // After each pass over the actors (e.g. judge what can be judged).
  virtual void drained() {}
};

struct RaceResult {
  std::vector<std::vector<RawRecord>> records;  // per actor
  uint64_t rounds = 0;
  double elapsed_s = 0;
  TimingStats timing;
  // Per actor: CPU time (user + system) its loop used, from its first round to
  // its last. Unlike elapsed_s it does not count time the actor spent waiting
  // for a CPU, so it stays meaningful on a loaded machine.
  std::vector<double> cpu_s;
  // With a sink: time the actors spent waiting for it to take their records
  // (summed over actors), and how many times one waited.
  double stalled_s = 0;
  uint64_t stalls = 0;
  uint64_t taken = 0;  // records the sink took
  std::string error;  // non-empty: the run failed (an actor died or got stuck)
};

// Forks one process per spec, runs the rounds, collects every record; with a
// sink, hands each record to it as the race goes instead (then each actor's
// buffer is a ring of cfg.capacity records, rounded up to a power of two,
// and RaceResult::records stays empty).
RaceResult run_race(const std::vector<ActorSpec>& actors, const RaceConfig& cfg, uint64_t seed,
                    RecordSink* sink = nullptr);

}  // namespace leapfrog
