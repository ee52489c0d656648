#include "scenarios/race.h"

#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <exception>
#include <memory>
#include <vector>

#include "scenarios/clock.h"
#include "scenarios/shared_region.h"

namespace leapfrog {

const char* to_string(ActorRole r) {
  switch (r) {
    case ActorRole::Mutator:
      return "mutator";
    case ActorRole::Observer:
      return "observer";
    case ActorRole::Peer:
      return "peer";
  }
  return "?";
}

namespace {
constexpr uint32_t kMaxActors = 64;
// Lookups after which a free-running observer publishes its first median.
constexpr uint32_t kFirstEstimate = 8;
}

struct RaceControl {
  alignas(64) std::atomic<uint32_t> arrived{0};
  alignas(64) std::atomic<uint32_t> generation{0};
  std::atomic<uint32_t> decided_stop{0};
  alignas(64) std::atomic<uint32_t> stop_requested{0};
  std::atomic<uint32_t> abort{0};
  alignas(64) std::atomic<uint32_t> peer_arrived{0};
  alignas(64) std::atomic<uint32_t> peer_generation{0};
  std::atomic<uint32_t> peer_stop{0};
  uint32_t n_actors = 0;
  uint32_t n_aligned = 0;  // actors that meet at the barrier
  uint32_t n_peers = 0;
  ActorRole roles[kMaxActors];
  bool aligned[kMaxActors];
  struct alignas(64) Stat {
    std::atomic<int64_t> sum_ns{0};
    std::atomic<int64_t> n{0};
    uint64_t count = 0;  // records written (read by the parent after exit)
    int64_t cpu_ns = 0;  // CPU time of the actor's loop (read by the parent after exit)
    // A ring's positions: records the actor has written, and records the
    // parent has taken.
    std::atomic<uint64_t> published{0};
    std::atomic<uint64_t> taken{0};
    int64_t stall_ns = 0;   // time spent waiting for room (read by the parent after exit)
    uint32_t stalls = 0;
  } stat[kMaxActors];
  std::atomic<uint32_t> ready{0};  // actors set up and about to race
  // Actors that have not yet done cfg.iterations rounds (iterations > 0):
  // free-running actors race on until it is 0.
  alignas(64) std::atomic<uint32_t> short_of_rounds{0};
  std::atomic<uint32_t> error_set{0};
  // The bound a paced free-running mutator draws its dwell from (actor_loop),
  // 0 while it has none.
  std::atomic<int64_t> pace_ns{0};
  char error[512] = {};
};

namespace {

inline void cpu_relax() {
  __builtin_ia32_pause();
}

TimeNs thread_cpu_ns() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<TimeNs>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

// Spins until `done()`; yields the CPU after a short spin so that more actors
// than cores still make progress. Returns false if the run was aborted.
template <typename Done>
bool spin_until(RaceControl* c, Done done) {
  for (uint32_t i = 0;; ++i) {
    if (done()) return true;
    if (i < 256) {
      cpu_relax();
    } else {
      if ((i & 63) == 0 && c->abort.load(std::memory_order_relaxed)) return false;
      sched_yield();
    }
  }
}

// All actors meet; the last to arrive decides, for everyone, whether to stop.
bool barrier_stop(RaceControl* c) {
  const uint32_t gen = c->generation.load(std::memory_order_acquire);
  if (c->arrived.fetch_add(1, std::memory_order_acq_rel) + 1 == c->n_aligned) {
    c->arrived.store(0, std::memory_order_relaxed);
    c->decided_stop.store(c->stop_requested.load(std::memory_order_acquire) |
                              c->abort.load(std::memory_order_acquire),
                          std::memory_order_relaxed);
    c->generation.store(gen + 1, std::memory_order_release);
  } else if (!spin_until(c, [&] { return c->generation.load(std::memory_order_acquire) != gen; })) {
    return true;
  }
  return c->decided_stop.load(std::memory_order_relaxed) != 0;
}

void set_error(RaceControl* c, const std::string& msg) {
  uint32_t expected = 0;
  if (c->error_set.compare_exchange_strong(expected, 1)) {
    std::strncpy(c->error, msg.c_str(), sizeof c->error - 1);
  }
}

struct Delays {
  TimeNs mutator = 0;
  TimeNs span = 0;  // observers and peers draw from [0, span]
};

Delays compute_delays(RaceControl* c, TimingStats& t) {
  TimeNs mut = 0, obs = 0, peer = 0;
  for (uint32_t i = 0; i < c->n_actors; ++i) {
    // A free-running actor's calls are not swept: its timing says nothing
    // about the window, and it may not have published it yet.
    if (!c->aligned[i]) continue;
    const int64_t n = c->stat[i].n.load();
    const TimeNs mean = n ? c->stat[i].sum_ns.load() / n : 0;
    switch (c->roles[i]) {
      case ActorRole::Mutator:
        mut = std::max(mut, mean);
        break;
      case ActorRole::Observer:
        obs = std::max(obs, mean);
        break;
      case ActorRole::Peer:
        peer = std::max(peer, mean);
        break;
    }
  }
  t.mutator_mean_ns = mut;
  t.observer_mean_ns = obs ? obs : peer;
  Delays d;
  const TimeNs margin = (mut + obs) / 8;
  if (mut > 0) {
    // The mutator starts at obs + margin; an observer start swept over
    // [0, obs + mut + 2 margin] covers every overlap of the two calls.
    d.mutator = obs + margin;
    d.span = obs + mut + 2 * margin;
  } else {
    d.span = 2 * peer;
  }
  t.delay_span_ns = d.span;
  return d;
}

// Publishes the median duration of the actor's warm-up operations. The median,
// not the mean: one preempted call must not stretch the swept window. Written
// before the next barrier, so every actor sees it after that barrier.
void publish_median(ActorEnv& env, RaceControl::Stat& stat) {
  const uint64_t n = env.recorded();
  if (n == 0) return;
  std::vector<TimeNs> d;
  d.reserve(n);
  const RawRecord* first = &env.last() - (n - 1);
  for (uint64_t i = 0; i < n; ++i) d.push_back(first[i].complete - first[i].invoke);
  std::nth_element(d.begin(), d.begin() + d.size() / 2, d.end());
  stat.sum_ns.store(d[d.size() / 2], std::memory_order_relaxed);
  stat.n.store(1, std::memory_order_release);
}

bool is_free_observer(const RaceControl* c, uint32_t i) {
  return c->roles[i] == ActorRole::Observer && !c->aligned[i];
}

bool has_free_observers(const RaceControl* c) {
  for (uint32_t i = 0; i < c->n_actors; ++i)
    if (is_free_observer(c, i)) return true;
  return false;
}

// The longest median lookup the free-running observers have published (after
// their first kFirstEstimate lookups, then after their warm-up); 0 until one
// has.
TimeNs free_observer_median(RaceControl* c) {
  TimeNs m = 0;
  for (uint32_t i = 0; i < c->n_actors; ++i) {
    if (!is_free_observer(c, i) || c->stat[i].n.load(std::memory_order_acquire) == 0) continue;
    m = std::max<TimeNs>(m, c->stat[i].sum_ns.load(std::memory_order_relaxed));
  }
  return m;
}

// A paced mutator's dwell: spun when short, slept when long (a spinning
// unpinned mutator would take the CPU an observer needs).
void dwell(TimeNs ns) {
  if (ns <= 0) return;
  if (ns < 100'000) {
    const TimeNs until = now_ns() + ns;
    while (now_ns() < until) cpu_relax();
    return;
  }
  timespec ts{static_cast<time_t>(ns / 1'000'000'000), static_cast<long>(ns % 1'000'000'000)};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

// Counts the actor out of RaceControl::short_of_rounds once: when it has done
// its rounds, or when its loop ends another way (stopped, failed).
class RoundsDone {
 public:
  explicit RoundsDone(RaceControl* c) : c_(c) {}
  ~RoundsDone() { count(); }
  void count() {
    if (!counted_) c_->short_of_rounds.fetch_sub(1, std::memory_order_acq_rel);
    counted_ = true;
  }
  // True once every actor has done its rounds, or the run is aborted.
  bool all() const {
    return c_->short_of_rounds.load(std::memory_order_acquire) == 0 ||
           c_->abort.load(std::memory_order_relaxed);
  }

 private:
  RaceControl* c_;
  bool counted_ = false;
};

// The loop keeps what it reads every round in its own frame (the step, the
// config's fields): after each system call the CPU looks up every page it
// touches again (no PCID under page-table isolation, ~10-15 ns a page in a
// VM), so the fewer pages a round touches besides its own record, the
// cheaper recording is (bench/harness_bench.cc).
//
// With cfg.iterations, an aligned actor stops after that many rounds (the
// barrier keeps the aligned ones in step). A free-running actor races on past
// them, as far as its buffer goes, until every actor has done its rounds:
// otherwise a fast mutator would be done long before slow observers (or the
// other way round) and the rest of the run would race nothing.
__attribute__((hot)) void actor_loop(const ActorSpec& spec, ActorEnv& env, const RaceConfig& cfg) {
  RaceControl* c = env.control();
  RoundsDone done(c);
  RaceControl::Stat& stat = c->stat[env.id()];
  Delays delays;
  TimingStats unused;
  const auto step = spec.step;
  const uint64_t iterations = cfg.iterations;
  const uint32_t warmup = cfg.warmup;
  const bool fuzzy = cfg.fuzzy && !spec.free_running;
  // A free-running mutator racing free-running observers is paced: after each
  // mutation it dwells for a time drawn from [0, 2 M], M the observers'
  // median lookup. Back to back, a fast mutator (a chmod, a few µs) changes
  // the tree many times within every slower lookup, so each lookup's window
  // admits every state it set and nothing stale can be shown; with the dwell,
  // about half its states outlast a lookup, while short draws keep bursts of
  // mutations close together. It starts once an observer has published a
  // first median (after kFirstEstimate lookups of the still tree), and
  // follows the observers' latest median every 32 rounds.
  const bool paced = !fuzzy && spec.role == ActorRole::Mutator && has_free_observers(c);
  Rng pace_rng = env.rng().fork(0x9ace);  // its own stream: the mutations' draws stay the seed's
  TimeNs pace = 0;
  auto follow_observers = [&] {
    pace = 2 * free_observer_median(c);
    c->pace_ns.store(pace, std::memory_order_relaxed);
  };
  if (paced) {
    spin_until(c, [&] {
      return free_observer_median(c) > 0 || c->stop_requested.load(std::memory_order_relaxed);
    });
    follow_observers();
  }
  // A free-running observer publishes a first median early, for the paced
  // mutator waiting on it, and its warm-up's later.
  const uint32_t first_estimate = fuzzy || spec.role == ActorRole::Mutator ? 0 : kFirstEstimate;
  // A full buffer ends the run, unless it is a ring the parent empties:
  // then the actor waits for room (the run's backpressure).
  auto out_of_room = [&env] { return env.full() && !env.make_room(); };
  if (!fuzzy && spec.steps && !paced) {
    // Batches end where the per-round loop below would look at something:
    // the stop flag (every 32 rounds), the end of warm-up, the last round,
    // a full buffer (full() is false here, so room >= 1).
    const auto steps = spec.steps;
    for (uint32_t round = 0;;) {
      env.publish();
      if (iterations && round >= iterations) {
        done.count();
        if (done.all() || out_of_room()) break;  // past its rounds a full buffer stops it alone
      }
      if (out_of_room()) {
        c->stop_requested.store(1, std::memory_order_release);
        break;
      }
      if ((round & 31) == 0 && c->stop_requested.load(std::memory_order_relaxed)) break;
      uint64_t n = 32 - (round & 31);
      if (iterations && round < iterations) n = std::min<uint64_t>(n, iterations - round);
      if (round < warmup) n = std::min<uint64_t>(n, warmup - round);
      if (round < first_estimate) n = std::min<uint64_t>(n, first_estimate - round);
      n = std::min<uint64_t>(n, env.room());
      steps(env, round, static_cast<uint32_t>(n));
      round += static_cast<uint32_t>(n);
      if (round == warmup || round == first_estimate) publish_median(env, stat);
    }
    return;
  }
  for (uint32_t round = 0;; ++round) {
    if ((round & 31) == 0) env.publish();
    if (iterations && round >= iterations) {
      done.count();
      // Free-running: the others' progress is polled every 32 rounds.
      if (fuzzy || out_of_room() || ((round == iterations || (round & 31) == 0) && done.all()))
        break;
    }
    if (out_of_room()) c->stop_requested.store(1, std::memory_order_release);
    if (fuzzy) {
      if (barrier_stop(c)) break;
      TimeNs delay = 0;
      if (round == warmup) delays = compute_delays(c, unused);
      if (round >= warmup) {
        if (env.role() == ActorRole::Mutator)
          delay = delays.mutator;
        else if (delays.span > 0)
          delay = static_cast<TimeNs>(env.rng().below(static_cast<uint64_t>(delays.span) + 1));
      }
      if (delay > 0) {
        const TimeNs until = now_ns() + delay;
        while (now_ns() < until) cpu_relax();
      }
    } else if (out_of_room() || (((round & 31) == 0 || paced) &&
                              c->stop_requested.load(std::memory_order_relaxed))) {
      // Free-running: the stop flag is polled every 32 rounds, so that most
      // rounds touch no shared page but the actor's own records (every round
      // when paced: a dwell may be long).
      break;
    }
    step(env, round);
    if (round + 1 == warmup || round + 1 == first_estimate) publish_median(env, stat);
    if (paced) {
      if ((round & 31) == 31) follow_observers();
      dwell(static_cast<TimeNs>(pace_rng.below(static_cast<uint64_t>(pace) + 1)));
    }
  }
}

// Faults in the first part of an actor's record buffer before the race, so the
// hot path does not take page faults. Every page is also written once from the
// actor itself: under a hypervisor that shadows the guest's page tables (PVM),
// the first user access to a page traps to the host even when
// MADV_POPULATE_WRITE has already mapped it, and on the hot path that trap
// cost ~190 ns per record, half the harness overhead (bench/harness_bench.cc).
void prefault(RawRecord* records, uint64_t capacity) {
  constexpr size_t kMaxPrefault = size_t{32} << 20;
  const size_t bytes = std::min<size_t>(capacity * sizeof(RawRecord), kMaxPrefault);
#ifdef MADV_POPULATE_WRITE
  madvise(records, bytes,
          MADV_POPULATE_WRITE);  // one call instead of a fault per page; best effort
#endif
  auto* p = reinterpret_cast<volatile char*>(records);
  for (size_t off = 0; off < bytes; off += 4096) p[off] = 0;
}

// Spreads actors over the CPUs this process may use, one each while they last:
// actors that share a CPU take turns instead of racing.
void pin_to_cpu(uint32_t actor) {
  cpu_set_t allowed;
  if (sched_getaffinity(0, sizeof allowed, &allowed) != 0) return;
  std::vector<int> cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &allowed)) cpus.push_back(c);
  if (cpus.size() < 2) return;
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(cpus[actor % cpus.size()], &one);
  sched_setaffinity(0, sizeof one, &one);
}

int pidfd_open(pid_t pid) {
  return static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
}

}  // namespace

void ActorEnv::publish() {
  if (ring_) ctl_->stat[id_].published.store(count_, std::memory_order_release);
}

bool ActorEnv::make_room() {
  if (!ring_) return false;
  RaceControl* c = ctl_;
  RaceControl::Stat& stat = c->stat[id_];
  publish();
  TimeNs waited_from = 0;
  for (uint32_t i = 0;; ++i) {
    limit_ = stat.taken.load(std::memory_order_acquire) + capacity_;
    if (!full()) break;
    if (c->stop_requested.load(std::memory_order_relaxed) ||
        c->abort.load(std::memory_order_relaxed))
      break;
    if (waited_from == 0) waited_from = now_ns();
    if (i < 64) {
      cpu_relax();
    } else {
      // The parent takes records every millisecond or so.
      timespec ts{0, 50'000};
      nanosleep(&ts, nullptr);
    }
  }
  if (waited_from != 0) {
    stat.stall_ns += now_ns() - waited_from;
    ++stat.stalls;
  }
  return !full();
}

void ActorEnv::request_stop() {
  ctl_->stop_requested.store(1, std::memory_order_release);
}

bool ActorEnv::peer_barrier() {
  RaceControl* c = ctl_;
  const uint32_t gen = c->peer_generation.load(std::memory_order_acquire);
  if (c->peer_arrived.fetch_add(1, std::memory_order_acq_rel) + 1 == c->n_peers) {
    c->peer_arrived.store(0, std::memory_order_relaxed);
    c->peer_generation.store(gen + 1, std::memory_order_release);
  } else if (!spin_until(c, [&] {
               return c->peer_generation.load(std::memory_order_acquire) != gen ||
                      c->stop_requested.load(std::memory_order_relaxed);
             })) {
    return false;
  }
  return c->peer_generation.load(std::memory_order_acquire) != gen;
}

RaceResult run_race(const std::vector<ActorSpec>& actors, const RaceConfig& config, uint64_t seed,
                    RecordSink* sink) {
  RaceResult result;
  const uint32_t n = static_cast<uint32_t>(actors.size());
  if (n == 0 || n > kMaxActors) {
    result.error = "want 1.." + std::to_string(kMaxActors) + " actors, got " + std::to_string(n);
    return result;
  }
  RaceConfig cfg = config;
  if (sink) {
    // A ring holds the warm-up's records end to end (publish_median).
    uint64_t ring = 1024;
    while (ring < cfg.capacity) ring *= 2;
    cfg.capacity = ring;
  }
  const size_t ctl_bytes = (sizeof(RaceControl) + 4095) & ~size_t{4095};
  const size_t per_actor = cfg.capacity * sizeof(RawRecord);
  SharedRegion region(ctl_bytes + per_actor * n);
  auto* ctl = new (region.data()) RaceControl();
  ctl->n_actors = n;
  ctl->short_of_rounds.store(cfg.iterations ? n : 0);
  for (uint32_t i = 0; i < n; ++i) {
    ctl->roles[i] = actors[i].role;
    ctl->aligned[i] = cfg.fuzzy && !actors[i].free_running;
    ctl->n_aligned += ctl->aligned[i];
    if (actors[i].role == ActorRole::Peer) ++ctl->n_peers;
  }
  auto records_of = [&](uint32_t i) {
    return reinterpret_cast<RawRecord*>(static_cast<char*>(region.data()) + ctl_bytes +
                                        per_actor * i);
  };

  Rng root(seed);
  std::vector<pid_t> pids(n, -1);
  std::vector<int> pidfds(n, -1);
  const TimeNs start = now_ns();
  for (uint32_t i = 0; i < n; ++i) {
    Rng actor_rng = root.fork(i);
    const pid_t parent = getpid();
    const pid_t pid = fork();
    if (pid < 0) {
      ctl->abort.store(1);
      result.error = std::string("fork: ") + std::strerror(errno);
      break;
    }
    if (pid == 0) {
      int code = 0;
      try {
        if (actors[i].prepare) actors[i].prepare();
        // After any setuid in prepare(), which clears the death signal.
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent) _exit(4);
        if (cfg.pin_cpus) pin_to_cpu(i);
        prefault(records_of(i), cfg.capacity);
        ctl->ready.fetch_add(1, std::memory_order_release);
        ActorEnv env(i, actors[i].role, actor_rng, records_of(i), cfg.capacity, ctl,
                     sink != nullptr);
        const TimeNs cpu_start = thread_cpu_ns();
        actor_loop(actors[i], env, cfg);
        ctl->stat[i].cpu_ns = thread_cpu_ns() - cpu_start;
        ctl->stat[i].count = env.recorded();
        env.publish();
      } catch (const std::exception& e) {
        set_error(ctl, std::string(to_string(actors[i].role)) + " " + std::to_string(i) + ": " +
                           e.what());
        ctl->abort.store(1);
        code = 3;
      }
      _exit(code);
    }
    pids[i] = pid;
    pidfds[i] = pidfd_open(pid);
  }

  // The race's time starts when every actor is set up (forked, privileges
  // dropped, buffers faulted in), not when the first was forked.
  const uint32_t forked =
      static_cast<uint32_t>(std::count_if(pids.begin(), pids.end(), [](pid_t p) { return p > 0; }));
  const TimeNs setup_deadline = start + cfg.stuck_grace;
  while (ctl->ready.load(std::memory_order_acquire) < forked && !ctl->abort.load() &&
         now_ns() < setup_deadline) {
    std::vector<pollfd> fds;
    for (uint32_t i = 0; i < n; ++i)
      if (pids[i] > 0) fds.push_back(pollfd{pidfds[i], POLLIN, 0});
    if (poll(fds.data(), fds.size(), 1) > 0) break;  // an actor exited during setup: handled below
  }
  // With a sink: hands each actor's newly published records to it, and
  // frees their room in the ring.
  TimeNs first = kTimeMax, last = kTimeMin;
  std::vector<uint64_t> handed(n, 0);
  auto note_times = [&](const RawRecord* r, size_t k) {
    for (size_t j = 0; j < k; ++j) {
      first = std::min(first, r[j].invoke);
      last = std::max(last, r[j].complete);
      result.rounds = std::max<uint64_t>(result.rounds, r[j].round + 1ull);
    }
  };
  auto drain_actor = [&](uint32_t i) {
    const uint64_t published = ctl->stat[i].published.load(std::memory_order_acquire);
    while (handed[i] < published) {
      const uint64_t at = handed[i] & (cfg.capacity - 1);
      const size_t want =
          static_cast<size_t>(std::min<uint64_t>(published - handed[i], cfg.capacity - at));
      const size_t took = sink->take(i, records_of(i) + at, want);
      note_times(records_of(i) + at, took);
      handed[i] += took;
      result.taken += took;
      if (took < want) break;
    }
    ctl->stat[i].taken.store(handed[i], std::memory_order_release);
  };
  // An actor that has exited is done once the sink has taken all it
  // published (its queue may wait for the others' records to be merged).
  std::vector<bool> exited(n, false), ended(n, false);
  // A sink that throws ends the run with its error (the actors waiting for
  // room see the abort).
  bool sink_failed = false;
  auto drain = [&] {
    if (!sink || sink_failed) return;
    try {
      for (uint32_t i = 0; i < n; ++i)
        if (!ended[i]) drain_actor(i);
      sink->drained();
      for (uint32_t i = 0; i < n; ++i) {
        if (!exited[i] || ended[i] || handed[i] < ctl->stat[i].published.load()) continue;
        ended[i] = true;
        sink->done(i);
      }
    } catch (const std::exception& e) {
      sink_failed = true;
      if (result.error.empty()) result.error = std::string("taking the records failed: ") + e.what();
      ctl->stop_requested.store(1, std::memory_order_release);
      ctl->abort.store(1);
    }
  };

  // Wait for the actors, stopping them at the deadline and giving up on any
  // that is stuck in a system call long after it.
  const TimeNs stop_at = now_ns() + cfg.duration;
  const TimeNs kill_at = stop_at + cfg.stuck_grace;
  uint32_t running = 0;
  for (pid_t p : pids) running += p > 0;
  bool stop_sent = false;
  while (running > 0) {
    const TimeNs now = now_ns();
    if (!stop_sent && now >= stop_at) {
      ctl->stop_requested.store(1, std::memory_order_release);
      stop_sent = true;
    }
    if (now >= kill_at) {
      for (uint32_t i = 0; i < n; ++i) {
        if (pids[i] > 0) {
          kill(pids[i], SIGKILL);
          if (result.error.empty())
            result.error = std::string(to_string(actors[i].role)) + " " + std::to_string(i) +
                           " did not finish its operation within " +
                           std::to_string(cfg.stuck_grace / 1'000'000'000) +
                           " s of the end of the run";
        }
      }
      ctl->abort.store(1);
    }
    std::vector<pollfd> fds;
    for (uint32_t i = 0; i < n; ++i)
      if (pids[i] > 0) fds.push_back(pollfd{pidfds[i], POLLIN, 0});
    const TimeNs next = stop_sent ? kill_at : stop_at;
    const int timeout_ms = static_cast<int>(
        std::clamp<TimeNs>((next - now) / 1'000'000 + 1, 1, sink ? 1 : 1000));
    poll(fds.data(), fds.size(), timeout_ms);
    drain();
    for (uint32_t i = 0; i < n; ++i) {
      if (pids[i] <= 0) continue;
      int status = 0;
      const pid_t r = waitpid(pids[i], &status, WNOHANG);
      if (r != pids[i]) continue;
      pids[i] = -1;
      close(pidfds[i]);
      --running;
      exited[i] = true;
      const bool ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
      if (!ok) {
        ctl->abort.store(1);
        if (result.error.empty()) {
          if (ctl->error_set.load())
            result.error = ctl->error;
          else if (WIFSIGNALED(status))
            result.error = std::string(to_string(actors[i].role)) + " " + std::to_string(i) +
                           " was killed by signal " + std::to_string(WTERMSIG(status));
          else
            result.error = std::string(to_string(actors[i].role)) + " " + std::to_string(i) +
                           " exited with status " + std::to_string(WEXITSTATUS(status));
        }
      }
    }
  }

  // Whatever the sink has not taken yet, now that no actor runs: each pass
  // takes records or ends actors (whose end lets the sink merge the rest).
  if (sink) {
    auto n_ended = [&] { return std::count(ended.begin(), ended.end(), true); };
    for (uint32_t i = 0; i < n; ++i) exited[i] = true;
    for (int idle = 0; n_ended() < n && idle < 2 && !sink_failed;) {
      const uint64_t taken = result.taken;
      const auto was_ended = n_ended();
      drain();
      idle = result.taken == taken && n_ended() == was_ended ? idle + 1 : 0;
    }
    if (n_ended() < n && result.error.empty())
      result.error = "the record sink stopped taking records before the run's end";
  }
  if (!sink) result.records.resize(n);
  for (uint32_t i = 0; i < n; ++i) {
    result.cpu_s.push_back(static_cast<double>(ctl->stat[i].cpu_ns) / 1e9);
    result.stalled_s += static_cast<double>(ctl->stat[i].stall_ns) / 1e9;
    result.stalls += ctl->stat[i].stalls;
    if (sink) continue;
    const uint64_t count = std::min<uint64_t>(ctl->stat[i].count, cfg.capacity);
    const RawRecord* base = records_of(i);
    result.records[i].assign(base, base + count);
    for (const auto& r : result.records[i]) {
      first = std::min(first, r.invoke);
      last = std::max(last, r.complete);
      result.rounds = std::max<uint64_t>(result.rounds, r.round + 1ull);
    }
  }
  result.elapsed_s = last > first ? static_cast<double>(last - first) / 1e9 : 0;
  if (ctl->n_aligned > 0) {
    compute_delays(ctl, result.timing);
    result.timing.warmup_rounds = cfg.warmup;
  }
  result.timing.pace_ns = ctl->pace_ns.load();
  ctl->~RaceControl();
  return result;
}

}  // namespace leapfrog
