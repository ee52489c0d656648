// The growth bench's generator (growth_fill.h).

#include "bench/growth_fill.h"

#include "agent/outcome_proto.h"
#include "common/outcome/scale_proto.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <fstream>
#include <latch>
#include <mutex>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <stdexcept>
#include <thread>

namespace leapfrog::bench {

namespace {

using namespace std::chrono_literals;
using nlohmann::json;

constexpr const char* kScale = "lookup-scale";

// Reports in flight per kernel thread (the store batches them).
constexpr int kWindow = 128;

// A passing lookup-scale run: lseek1 and access-same at 1, 2 and 4 tasks,
// five samples each around a per-kernel rate.
std::string scale_json(std::mt19937_64& rng, double base) {
  std::normal_distribution<double> noise(1.0, 0.02);
  json points = json::array();
  for (const char* test : {"lseek1", "access-same"})
    for (int tasks : {1, 2, 4}) {
      json samples = json::array();
      double sum = 0;
      for (int i = 0; i < 5; ++i) {
        const double s = base * tasks * noise(rng);
        samples.push_back(s);
        sum += s;
      }
      points.push_back({{"test", test},
                        {"mode", "processes"},
                        {"tasks", tasks},
                        {"ops_per_sec", sum / 5},
                        {"samples", samples},
                        {"stddev", base * 0.02},
                        {"ci95_low", sum / 5 * 0.98},
                        {"ci95_high", sum / 5 * 1.02}});
    }
  return json{{"verdict", "pass"},
              {"scale", points},
              {"scale_host", {{"cpus", 2}, {"sample_s", 0.5}, {"warnings", json::array()}}}}
      .dump();
}

// A real run's outcome, the template of every race outcome: `leapfrog-agent
// run --scenario setattr-lookup --fs fuse-cached --duration 3s --seed 7
// --json` (50 of 2,491 violations reported, each with its typed detail:
// the walk, the possible versions, the history excerpt), converted by the
// agent's own outcome_from_json as every agent sends it.
const v1::Outcome& real_outcome() {
  static const v1::Outcome o = [] {
    const std::string path =
        std::string(LEAPFROG_SOURCE_DIR) + "/testdata/growth/setattr-fuse-cached.json";
    std::ifstream in(path);
    if (!in) throw std::runtime_error("cannot read " + path);
    std::stringstream text;
    text << in.rdbuf();
    return outcome_from_json(text.str());
  }();
  return o;
}

void shift(v1::PossibleVersion& v, int64_t by) {
  if (v.has_from_ns()) v.set_from_ns(v.from_ns() + by);
  if (v.has_to_ns()) v.set_to_ns(v.to_ns() + by);
}

// An outcome of a race scenario: the real run's counters, typed run detail and,
// for a violation, 5-50 of its violations, every time moved by one random
// offset (so no two outcomes store the same bytes).
// The real run's outcome as a pass: its counters and run detail, no violations
// (copied once, not stripped from a copy of 50 violations per outcome).
const v1::Outcome& real_pass() {
  static const v1::Outcome o = [] {
    v1::Outcome p = real_outcome();
    p.set_verdict(v1::VERDICT_PASS);
    p.set_violation_count(0);
    p.clear_violations_by_kind();
    p.clear_violations();
    return p;
  }();
  return o;
}

v1::Outcome race_outcome(std::mt19937_64& rng, bool violation) {
  v1::Outcome o = violation ? real_outcome() : real_pass();
  o.set_verdict(violation ? v1::VERDICT_VIOLATION : v1::VERDICT_PASS);
  o.set_ops(o.ops() + rng() % 50000);
  o.set_race_window_hits(rng() % 1000);
  if (violation) {
    const int rows = 5 + static_cast<int>(rng() % 46);
    o.mutable_violations()->DeleteSubrange(rows, o.violations_size() - rows);
    const int64_t by = static_cast<int64_t>(rng() % 1000000000000);
    for (v1::Violation& v : *o.mutable_violations()) {
      v.set_invoke_ns(v.invoke_ns() + by);
      v.set_complete_ns(v.complete_ns() + by);
      v1::ViolationDetail* d = v.mutable_detail();
      for (auto& pv : *d->mutable_versions()) shift(pv, by);
      for (auto& st : *d->mutable_steps())
        for (auto& pv : *st.mutable_versions()) shift(pv, by);
      for (auto& m : *d->mutable_history()) {
        m.set_invoke_ns(m.invoke_ns() + by);
        m.set_complete_ns(m.complete_ns() + by);
      }
    }
  }
  return o;
}

// A counting gate: at most `n` holders at once.
class Window {
 public:
  explicit Window(int n) : free_(n) {}
  void acquire() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return free_ > 0; });
    --free_;
  }
  void release() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++free_;
    }
    cv_.notify_all();
  }
  void drain(int n) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return free_ == n; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int free_;
};

}  // namespace

GrowthFiller::GrowthFiller(coord::Store& store, GrowthWorld world, coord::TimePoint end)
    : store_(&store), world_(std::move(world)), end_(end) {}

void GrowthFiller::setup() {
  const coord::TimePoint start = end_ - 24h * world_.days;
  for (const auto& k : world_.kernels) {
    v1::Kernel kernel;
    kernel.set_label(k);
    kernel.set_version("Linux " + k);
    kernel.set_source("/srv/kernels/" + k + "/bzImage");
    store_->add_kernel(kernel, start);
    v1::Capabilities caps;
    caps.set_kernel_label(k);
    for (const auto& fs : world_.filesystems) caps.add_filesystems(fs);
    for (int i = 0; i < world_.agents_per_kernel; ++i)
      store_->register_agent("agent-" + k + "-" + std::to_string(i), caps, end_);
  }
  v1::CampaignSpec spec;
  spec.set_name("nightly");
  for (const auto& s : world_.scenarios) spec.add_scenarios(s);
  for (const auto& k : world_.kernels) spec.add_kernels(k);
  for (const auto& fs : world_.filesystems) spec.add_filesystems(fs);
  schedule_id_ = store_->add_schedule("nightly", "0 2 * * *", spec, end_ + 24h).id();
}

uint64_t GrowthFiller::grow_to(uint64_t target) {
  if (target <= outcomes_) return 0;
  const uint64_t add = target - outcomes_;
  const uint64_t before = outcomes_;
  ++round_;
  for (int day = 0; day < world_.days; ++day) {
    // An even share per night; the last nights take the remainder.
    const uint64_t upto = add * static_cast<uint64_t>(day + 1) / world_.days;
    const uint64_t from = add * static_cast<uint64_t>(day) / world_.days;
    if (upto > from) night(day, upto - from);
    if (day % 30 == 29)
      std::fprintf(stderr, "  filled %d nights, %llu outcomes\n", day + 1,
                   static_cast<unsigned long long>(outcomes_));
  }
  return outcomes_ - before;
}

void GrowthFiller::night(int day, uint64_t jobs) {
  const coord::TimePoint at =
      end_ - 24h * (world_.days - 1 - day) + std::chrono::minutes(static_cast<int>(round_));
  const size_t nk = world_.kernels.size();
  std::vector<coord::NewJob> all;
  all.reserve(jobs);
  for (uint64_t i = 0; i < jobs; ++i) {
    coord::NewJob j;
    j.kernel_label = world_.kernels[i % nk];
    // The first job of each kernel is its nightly scaling run.
    if (i < nk) {
      j.spec.set_scenario(kScale);
      j.spec.set_fs("tmpfs");
    } else {
      j.spec.set_scenario(world_.scenarios[(i / nk) % world_.scenarios.size()]);
      j.spec.set_fs(
          world_.filesystems[(i / nk / world_.scenarios.size()) % world_.filesystems.size()]);
    }
    j.spec.set_seed(i);
    all.push_back(std::move(j));
  }
  v1::CampaignSpec spec;
  spec.set_name("nightly");
  spec.set_max_attempts(1);
  store_->create_campaign(spec, all, schedule_id_, at);
  jobs_ += jobs;
  if (after_campaign) after_campaign(jobs_);

  std::atomic<uint64_t> stored{0};
  std::vector<std::thread> threads;
  std::mutex error_mu;
  std::string error;
  auto fail = [&](std::exception_ptr e, const char* what) {
    std::lock_guard<std::mutex> lock(error_mu);
    if (!error.empty()) return;
    try {
      if (e) std::rethrow_exception(e);
      error = what;
    } catch (const std::exception& ex) {
      error = ex.what();
    }
  };
  for (size_t k = 0; k < nk; ++k) {
    threads.emplace_back([&, k] {
      std::mt19937_64 rng(world_.seed * 1000003 + round_ * 10007 + day * 101 + k);
      std::bernoulli_distribution violation(world_.violation_share);
      v1::Capabilities caps;
      caps.set_kernel_label(world_.kernels[k]);
      for (const auto& fs : world_.filesystems) caps.add_filesystems(fs);
      // The kernel's agents, each asked for leases in turn: a round of
      // world_.lease_round asks goes out at once, so the store's group lease
      // takes the round in one statement, as it does for a fleet of agents.
      std::vector<std::string> agents;
      for (int i = 0; i < world_.agents_per_kernel; ++i)
        agents.push_back(store_->register_agent(
            "agent-" + world_.kernels[k] + "-" + std::to_string(i), caps, at));
      Window window(kWindow);
      // Slower kernels scale worse: a year-long drop on "next" for the flag.
      const double base = 1e6 * (1.0 + 0.1 * static_cast<double>(k));
      for (bool more = true; more;) {
        std::vector<std::optional<v1::Job>> round(world_.lease_round);
        std::vector<size_t> by(world_.lease_round);
        std::latch leased(static_cast<std::ptrdiff_t>(world_.lease_round));
        for (size_t i = 0; i < round.size(); ++i) {
          by[i] = i % agents.size();
          store_->lease_job_async(agents[by[i]], caps, at, 30s,
                                  [&, i](std::optional<v1::Job> job, std::exception_ptr e) {
                                    if (e) fail(e, "a lease failed");
                                    round[i] = std::move(job);
                                    leased.count_down();
                                  });
        }
        leased.wait();
        for (size_t i = 0; i < round.size(); ++i) {
          // A kernel's jobs are leased by this thread alone: an empty answer
          // means none is left.
          if (!round[i]) {
            more = false;
            continue;
          }
          const v1::Job& job = *round[i];
          auto outcome = std::make_shared<v1::Outcome>();
          if (job.spec().scenario() == kScale) {
            outcome->set_verdict(v1::VERDICT_PASS);
            outcome->set_ops(1000);
            *outcome->mutable_scale() = *scale_run_from_json(json::parse(scale_json(rng, base)));
          } else {
            *outcome = race_outcome(rng, violation(rng));
          }
          window.acquire();
          store_->report_outcome_async(agents[by[i]], job.job_id(), job.attempt(), *outcome,
                                       at + 1s,
                                       [&, outcome](coord::ReportResult r, std::exception_ptr e) {
                                         if (e || r != coord::ReportResult::Stored)
                                           fail(e, "a report was not stored");
                                         else
                                           ++stored;
                                         window.release();
                                       });
        }
        std::lock_guard<std::mutex> lock(error_mu);
        if (!error.empty()) more = false;
      }
      window.drain(kWindow);
    });
  }
  for (auto& t : threads) t.join();
  if (!error.empty()) throw std::runtime_error("growth fill: " + error);
  outcomes_ += stored.load();
}

}  // namespace leapfrog::bench
