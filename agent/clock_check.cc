#include "agent/clock_check.h"

#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <thread>
#include <vector>

#include "scenarios/clock.h"

namespace leapfrog::agent {
namespace {

// One pair's shared state; the two words on their own cache lines, so that
// a hand-off is one line's travel.
struct alignas(64) Line {
  std::atomic<uint64_t> value{0};
};

struct Shared {
  Line seq;    // hand-offs done; hand-off k is made by the thread k % 2
  Line stamp;  // the time its maker read just before it
  std::atomic<bool> stop{false};
};

// What one thread saw.
struct Side {
  uint64_t reads = 0, backward = 0, order = 0;
  TimeNs worst_backward = 0, worst_order = 0, first = 0, last = 0;
  std::vector<TimeNs> handoffs;  // t2 - t1 of the stamps it received
  std::string first_violation;
  bool stuck = false;
};

bool pin(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  return pthread_setaffinity_np(pthread_self(), sizeof set, &set) == 0;
}

// The thread of `role` (0 or 1) of a pair, pinned to `cpu`.
void run_side(Shared& sh, Side& me, int role, int cpu, int peer, const ClockCheckOptions& o) {
  if (!pin(cpu)) {
    me.stuck = true;
    me.first_violation = "cannot pin a thread to CPU " + std::to_string(cpu);
    sh.stop = true;
    return;
  }
  const uint64_t total = 2 * o.rounds;
  uint64_t k = static_cast<uint64_t>(role);
  bool skewed = false;
  // Every read goes through here: compared with this thread's previous one.
  auto read = [&]() {
    TimeNs t = now_ns();
    if (skewed) t -= o.skew_ns;
    if (me.reads++ == 0) me.first = t;
    if (t < me.last) {
      if (me.backward++ == 0 && me.first_violation.empty()) {
        char buf[160];
        std::snprintf(buf, sizeof buf, "CPU %d's clock went back by %lld ns", cpu,
                      static_cast<long long>(me.last - t));
        me.first_violation = buf;
      }
      me.worst_backward = std::max(me.worst_backward, me.last - t);
    }
    me.last = t;
    return t;
  };
  const TimeNs deadline = now_ns() + o.deadline_ns;
  for (; k <= total; k += 2) {
    while (sh.seq.value.load(std::memory_order_acquire) != k) {
      if (sh.stop.load(std::memory_order_relaxed)) return;
      if (read() > deadline) {
        me.stuck = true;
        sh.stop = true;
        return;
      }
    }
    if (k > 0) {  // the peer's stamp: read before it handed off, so t1 <= t2
      const TimeNs t1 = static_cast<TimeNs>(sh.stamp.value.load(std::memory_order_relaxed));
      const TimeNs t2 = read();
      me.handoffs.push_back(t2 - t1);
      if (t2 < t1) {
        if (me.order++ == 0 && me.first_violation.empty()) {
          char buf[200];
          std::snprintf(
              buf, sizeof buf,
              "a time read on CPU %d is %lld ns after the time CPU %d read once it saw it "
              "(t1 %lld, t2 %lld)",
              peer, static_cast<long long>(t1 - t2), cpu, static_cast<long long>(t1),
              static_cast<long long>(t2));
          me.first_violation = buf;
        }
        me.worst_order = std::max(me.worst_order, t1 - t2);
      }
    }
    if (k >= total) return;
    // The positive control lags this CPU's clock from the middle on.
    if (cpu == o.skew_cpu && o.skew_ns != 0 && k >= o.rounds) skewed = true;
    const TimeNs t1 = read();
    sh.stamp.value.store(static_cast<uint64_t>(t1), std::memory_order_relaxed);
    sh.seq.value.store(k + 1, std::memory_order_release);
  }
}

std::vector<int> allowed_cpus() {
  std::vector<int> cpus;
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) != 0) return cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &set)) cpus.push_back(c);
  return cpus;
}

}  // namespace

ClockCheckResult check_clock(const ClockCheckOptions& o) {
  ClockCheckResult r;
  r.clock_source = clock_source();
  const std::vector<int> cpus = allowed_cpus();
  r.cpus = static_cast<int>(cpus.size());
  if (cpus.size() < 2) {
    r.error = "the check needs two CPUs, this process may use " + std::to_string(cpus.size());
    return r;
  }
  std::vector<TimeNs> handoffs;
  TimeNs elapsed = 0;
  for (size_t i = 0; i < cpus.size(); ++i) {
    for (size_t j = i + 1; j < cpus.size(); ++j) {
      Shared sh;
      Side a, b;
      a.handoffs.reserve(o.rounds);
      b.handoffs.reserve(o.rounds);
      std::thread ta([&] { run_side(sh, a, 0, cpus[i], cpus[j], o); });
      std::thread tb([&] { run_side(sh, b, 1, cpus[j], cpus[i], o); });
      ta.join();
      tb.join();
      ++r.pairs;
      for (Side* s : {&a, &b}) {
        r.reads += s->reads;
        r.order_violations += s->order;
        r.backward_steps += s->backward;
        r.worst_order_ns = std::max(r.worst_order_ns, s->worst_order);
        r.worst_backward_ns = std::max(r.worst_backward_ns, s->worst_backward);
        r.stuck = r.stuck || s->stuck;
        if (r.first_violation.empty()) r.first_violation = s->first_violation;
        handoffs.insert(handoffs.end(), s->handoffs.begin(), s->handoffs.end());
        elapsed += s->last - s->first;
      }
    }
  }
  r.handoffs = handoffs.size();
  if (!handoffs.empty()) {
    std::sort(handoffs.begin(), handoffs.end());
    r.min_handoff_ns = handoffs.front();
    r.median_handoff_ns = handoffs[handoffs.size() / 2];
  }
  if (r.reads) r.ns_per_read = static_cast<double>(elapsed) / static_cast<double>(r.reads);
  if (r.stuck && r.first_violation.empty())
    r.first_violation = "a pair of CPUs did not finish before the deadline";
  return r;
}

nlohmann::json to_json(const ClockCheckResult& r) {
  nlohmann::json j{{"sound", r.sound()},
                   {"clock_source", r.clock_source},
                   {"cpus", r.cpus},
                   {"pairs", r.pairs},
                   {"handoffs", r.handoffs},
                   {"reads", r.reads},
                   {"order_violations", r.order_violations},
                   {"worst_order_ns", r.worst_order_ns},
                   {"backward_steps", r.backward_steps},
                   {"worst_backward_ns", r.worst_backward_ns},
                   {"min_handoff_ns", r.min_handoff_ns},
                   {"median_handoff_ns", r.median_handoff_ns},
                   {"ns_per_read", r.ns_per_read},
                   {"stuck", r.stuck}};
  if (!r.first_violation.empty()) j["first_violation"] = r.first_violation;
  if (!r.error.empty()) j["error"] = r.error;
  return j;
}

}  // namespace leapfrog::agent
