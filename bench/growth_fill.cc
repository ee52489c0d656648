// The growth bench's generator (growth_fill.h).

#include "bench/growth_fill.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <nlohmann/json.hpp>
#include <random>
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

// An outcome of a race scenario: the counters, an agent JSON of a realistic
// size, and for a violation 5-50 rows with their history excerpt.
v1::Outcome race_outcome(std::mt19937_64& rng, const std::string& scenario, bool violation) {
  static const char* kinds[] = {"stale-grant", "stale-deny", "stale-entry", "wrong-mount"};
  v1::Outcome o;
  o.set_verdict(violation ? v1::VERDICT_VIOLATION : v1::VERDICT_PASS);
  o.set_ops(100000 + rng() % 50000);
  o.set_lookups_checked(o.ops() / 2);
  o.set_race_window_hits(rng() % 1000);
  json j{{"scenario", scenario},
         {"verdict", violation ? "violation" : "pass"},
         {"strategy", {{"alignment", "fuzzy"}, {"observers", 3}, {"pinned", true}}},
         {"notes", {"clock_source: tsc", "observers pinned to cpus 0,1"}},
         {"timing", {{"setup_ms", 12}, {"run_ms", 2000}, {"check_ms", 80}}}};
  if (violation) {
    const int rows = 5 + static_cast<int>(rng() % 46);
    const char* kind = kinds[rng() % 4];
    o.set_violation_count(static_cast<uint64_t>(rows));
    for (int i = 0; i < rows; ++i) {
      v1::Violation* v = o.add_violations();
      v->set_kind(kind);
      v->set_actor(1 + static_cast<uint32_t>(rng() % 3));
      v->set_op("stat");
      v->set_path("/d0/d1/f" + std::to_string(rng() % 8));
      v->set_step(static_cast<int32_t>(rng() % 3));
      v->set_component("d1");
      v->set_object("inode 1234");
      v->set_observed("mode 0755");
      v->set_expected("mode 0700 (chmod finished at 1203 ns)");
      v->set_invoke_ns(static_cast<int64_t>(rng() % 2000000000));
      v->set_complete_ns(v->invoke_ns() + 1500);
      v->set_detail_json(json{
          {"history", {{{"op", "chmod"}, {"t", 1203}}, {{"op", "stat"}, {"t", 1250}}}},
          {"versions",
           {1, 2}}}.dump());
    }
    j["by_kind"] = {{kind, rows}};
  }
  o.set_outcome_json(j.dump());
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
    : store_(store), world_(std::move(world)), end_(end) {}

void GrowthFiller::setup() {
  const coord::TimePoint start = end_ - 24h * world_.days;
  for (const auto& k : world_.kernels) {
    v1::Kernel kernel;
    kernel.set_label(k);
    kernel.set_version("Linux " + k);
    kernel.set_source("/srv/kernels/" + k + "/bzImage");
    store_.add_kernel(kernel, start);
    v1::Capabilities caps;
    caps.set_kernel_label(k);
    for (const auto& fs : world_.filesystems) caps.add_filesystems(fs);
    for (int i = 0; i < world_.agents_per_kernel; ++i)
      store_.register_agent("agent-" + k + "-" + std::to_string(i), caps, end_);
  }
  v1::CampaignSpec spec;
  spec.set_name("nightly");
  for (const auto& s : world_.scenarios) spec.add_scenarios(s);
  for (const auto& k : world_.kernels) spec.add_kernels(k);
  for (const auto& fs : world_.filesystems) spec.add_filesystems(fs);
  schedule_id_ = store_.add_schedule("nightly", "0 2 * * *", spec, end_ + 24h).id();
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
  store_.create_campaign(spec, all, schedule_id_, at);

  std::atomic<uint64_t> stored{0};
  std::vector<std::thread> threads;
  std::mutex error_mu;
  std::string error;
  for (size_t k = 0; k < nk; ++k) {
    threads.emplace_back([&, k] {
      std::mt19937_64 rng(world_.seed * 1000003 + round_ * 10007 + day * 101 + k);
      std::bernoulli_distribution violation(world_.violation_share);
      const std::string agent_name = "agent-" + world_.kernels[k] + "-0";
      v1::Capabilities caps;
      caps.set_kernel_label(world_.kernels[k]);
      for (const auto& fs : world_.filesystems) caps.add_filesystems(fs);
      const std::string agent = store_.register_agent(agent_name, caps, at);
      Window window(kWindow);
      // Slower kernels scale worse: a year-long drop on "next" for the flag.
      const double base = 1e6 * (1.0 + 0.1 * static_cast<double>(k));
      for (;;) {
        auto job = store_.lease_job(agent, caps, at, 30s);
        if (!job) break;
        auto outcome = std::make_shared<v1::Outcome>();
        if (job->spec().scenario() == kScale) {
          outcome->set_verdict(v1::VERDICT_PASS);
          outcome->set_ops(1000);
          outcome->set_outcome_json(scale_json(rng, base));
        } else {
          *outcome = race_outcome(rng, job->spec().scenario(), violation(rng));
        }
        window.acquire();
        store_.report_outcome_async(agent, job->job_id(), job->attempt(), *outcome, at + 1s,
                                    [&, outcome](coord::ReportResult r, std::exception_ptr e) {
                                      if (e || r != coord::ReportResult::Stored) {
                                        std::lock_guard<std::mutex> lock(error_mu);
                                        if (error.empty()) {
                                          try {
                                            if (e) std::rethrow_exception(e);
                                            error = "a report was not stored";
                                          } catch (const std::exception& ex) {
                                            error = ex.what();
                                          }
                                        }
                                      } else {
                                        ++stored;
                                      }
                                      window.release();
                                    });
      }
      window.drain(kWindow);
    });
  }
  for (auto& t : threads) t.join();
  if (!error.empty()) throw std::runtime_error("growth fill: " + error);
  outcomes_ += stored.load();
}

}  // namespace leapfrog::bench
