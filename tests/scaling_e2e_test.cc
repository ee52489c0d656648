// End-to-end tests of lookup-scale through the leapfrog-agent binary on the
// real kernel: will-it-scale's testcases by name, their samples and
// intervals, and the warning on a machine too small for the task count.
// Needs root, like the agent itself.

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "tests/process_util.h"

namespace {

using nlohmann::json;
namespace stdfs = std::filesystem;

// Runs the agent with `args` after "run --json --scenario lookup-scale".
json scale_run(const std::vector<std::string>& params, const std::string& fs = "tmpfs") {
  char tmpl[] = "/tmp/leapfrog-scale-e2e-XXXXXX";
  const std::string dir = mkdtemp(tmpl);
  std::vector<std::string> argv = {LEAPFROG_AGENT, "run",  "--json", "--scenario",
                                   "lookup-scale", "--fs", fs};
  for (const auto& p : params) {
    argv.push_back("--param");
    argv.push_back(p);
  }
  const auto r = leapfrog::testing::run_to_end(argv, dir, std::chrono::minutes(10));
  stdfs::remove_all(dir);
  EXPECT_EQ(r.exit, 0) << r.out << r.err;
  try {
    return json::parse(r.out);
  } catch (const std::exception&) {
    ADD_FAILURE() << "not JSON: " << r.out << r.err;
    return json::object();
  }
}

const char* const kBootId = "/proc/sys/kernel/random/boot_id";

// The first line of `path`.
std::string slurp_line(const char* path) {
  std::ifstream f(path);
  std::string line;
  std::getline(f, line);
  return line;
}

class ScalingE2E : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "needs root";
  }
};

const char* const kWillItScale[] = {"lseek1", "lseek2", "readseek1", "readseek2", "readseek3",
                                    "open1",  "open2",  "open3",     "unlink1",   "unlink2",
                                    "pread1", "pread2", "pread3"};

TEST_F(ScalingE2E, OffersWillItScaleTestcasesWithSamplesAndIntervals) {
  // One task, three samples of each testcase in both modes, on a disk file
  // system and on tmpfs.
  for (const std::string fs : {"tmpfs", "ext4"}) {
    const json o =
        scale_run({"max_tasks=1", "point_ms=20", "warmup_ms=20", "samples=3", "mode=2"}, fs);
    ASSERT_EQ(o["verdict"], "pass") << o.dump().substr(0, 2000);
    bool loaded = false;
    for (const auto& w : o["scale_host"]["warnings"])
      loaded |= w.get<std::string>().rfind("loaded:", 0) == 0;
    std::set<std::string> seen;
    size_t ran = 0;
    for (const auto& p : o["scale"]) {
      seen.insert(p["test"].get<std::string>() + "/" + p["mode"].get<std::string>());
      ASSERT_EQ(p["samples"].size(), 3u) << p.dump();
      EXPECT_EQ(p["n"], 3);
      const double mean = p["ops_per_sec"];
      ran += mean > 0;
      // A task pinned to a CPU that other work holds may not run in 60 ms:
      // the run must then say it was loaded.
      if (mean <= 0) {
        EXPECT_TRUE(loaded && p["other_load"].get<double>() > 0.5) << p.dump();
      }
      EXPECT_LE(p["ci95_low"].get<double>(), mean);
      EXPECT_GE(p["ci95_high"].get<double>(), mean);
      EXPECT_GE(p["stddev"].get<double>(), 0);
      EXPECT_GE(p["idle_pct"].get<double>(), 0);
      EXPECT_LE(p["idle_pct"].get<double>(), 100);
    }
    for (const char* t : kWillItScale)
      for (const char* m : {"processes", "threads"})
        EXPECT_TRUE(seen.count(std::string(t) + "/" + m)) << fs << " " << t << " " << m;
    for (const char* t : {"access-same", "access-separate", "stat-same", "stat-separate"})
      EXPECT_TRUE(seen.count(std::string(t) + "/processes")) << t;
    EXPECT_EQ(seen.size(), 34u);
    EXPECT_GT(ran, seen.size() / 2) << o["scale_host"].dump();
    EXPECT_GE(o["scale_host"]["cpus"].get<int>(), 1);
    EXPECT_DOUBLE_EQ(o["scale_host"]["sample_s"].get<double>(), 0.02);
    // The boot it ran in: runs of one boot are one replicate.
    EXPECT_EQ(o["scale_host"]["boot_id"].get<std::string>(), slurp_line(kBootId));
  }
}

// `tests` picks several testcases by a bit mask (80: bits 4 and 6, lseek1 and
// readseek1), so one job measures exactly the chosen ones.
TEST_F(ScalingE2E, ATestMaskRunsExactlyTheChosenTestcases) {
  const json o =
      scale_run({"tests=80", "max_tasks=1", "mode=0", "point_ms=20", "warmup_ms=0", "samples=2"});
  ASSERT_EQ(o["verdict"], "pass") << o.dump().substr(0, 2000);
  std::vector<std::string> tests;
  for (const auto& p : o["scale"]) tests.push_back(p["test"].get<std::string>());
  EXPECT_EQ(tests, (std::vector<std::string>{"lseek1", "readseek1"}));
}

TEST_F(ScalingE2E, MoreTasksThanCpusSaysSo) {
  const int cpus = static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN));
  // lseek1 (test 4) as processes, one task past the CPUs, then exactly at them.
  const json over = scale_run({"max_tasks=" + std::to_string(cpus + 1), "test=4", "mode=0",
                               "point_ms=20", "warmup_ms=0", "samples=2"});
  ASSERT_EQ(over["scale"].size(), static_cast<size_t>(cpus + 1));
  EXPECT_EQ(over["scale"][0]["test"], "lseek1");
  bool warned = false;
  for (const auto& w : over["scale_host"]["warnings"])
    warned |= w.get<std::string>().find("tasks on " + std::to_string(cpus) + " CPUs") !=
              std::string::npos;
  EXPECT_TRUE(warned) << over["scale_host"].dump();

  const json fit = scale_run({"max_tasks=" + std::to_string(cpus), "test=4", "mode=0",
                              "point_ms=20", "warmup_ms=0", "samples=2"});
  for (const auto& w : fit["scale_host"]["warnings"])
    EXPECT_EQ(w.get<std::string>().find("tasks on"), std::string::npos) << w;
}

TEST_F(ScalingE2E, OtherWorkDuringTheRunSaysLoaded) {
  // The positive control of the load check: this process keeps every CPU
  // busy while one lseek1 task runs.
  const unsigned cpus = std::max(1u, std::thread::hardware_concurrency());
  std::atomic<bool> stop{false};
  std::vector<std::thread> burners;
  for (unsigned i = 0; i < cpus; ++i)
    burners.emplace_back([&stop] {
      volatile uint64_t n = 0;
      while (!stop.load(std::memory_order_relaxed)) n = n + 1;
    });
  const json o =
      scale_run({"max_tasks=1", "test=4", "mode=2", "point_ms=200", "warmup_ms=50", "samples=3"});
  stop = true;
  for (auto& t : burners) t.join();
  ASSERT_EQ(o["verdict"], "pass") << o.dump().substr(0, 2000);
  EXPECT_GT(o["scale_host"]["max_other_load"].get<double>(), 0.5) << o["scale_host"].dump();
  bool loaded = false;
  for (const auto& w : o["scale_host"]["warnings"])
    loaded |= w.get<std::string>().rfind("loaded: other work used", 0) == 0;
  EXPECT_TRUE(loaded) << o["scale_host"].dump();
  for (const auto& p : o["scale"]) EXPECT_GT(p["other_load"].get<double>(), 0.3) << p.dump();
}

// What the VM launcher tells a guest about its host (scale::HostView),
// written by hand: a run that reads a loaded host says so, and a host view
// that stopped coming is "unknown", never "idle".
class HostViewFile {
 public:
  HostViewFile() {
    char tmpl[] = "/tmp/leapfrog-host-view-XXXXXX";
    dir_ = mkdtemp(tmpl);
    // Readable by the run's unprivileged tasks, as the guest's /run/leapfrog is.
    stdfs::permissions(dir_, stdfs::perms::owner_all | stdfs::perms::group_read |
                                 stdfs::perms::group_exec | stdfs::perms::others_read |
                                 stdfs::perms::others_exec);
    path_ = dir_ + "/host";
    setenv("LEAPFROG_HOST_VIEW", path_.c_str(), 1);
  }
  ~HostViewFile() {
    stop();
    unsetenv("LEAPFROG_HOST_VIEW");
    stdfs::remove_all(dir_);
  }
  // Rewrites `line` every 200 ms, as the guest's /init does with each line.
  void keep_writing(const std::string& line) {
    writer_ = std::thread([this, line] {
      while (!stop_.load()) {
        std::ofstream(path_, std::ios::trunc) << line << "\n";
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
      }
    });
  }
  // Writes `line` once, dated an hour ago: a launcher that went quiet.
  void write_stale(const std::string& line) {
    std::ofstream(path_, std::ios::trunc) << line << "\n";
    const auto old = stdfs::last_write_time(path_) - std::chrono::hours(1);
    stdfs::last_write_time(path_, old);
  }
  void stop() {
    stop_ = true;
    if (writer_.joinable()) writer_.join();
  }

 private:
  std::string dir_, path_;
  std::atomic<bool> stop_{false};
  std::thread writer_;
};

bool has_warning(const json& o, const std::string& prefix) {
  for (const auto& w : o["scale_host"]["warnings"])
    if (w.get<std::string>().rfind(prefix, 0) == 0) return true;
  return false;
}

TEST_F(ScalingE2E, AHostThatSaysItIsLoadedMakesTheRunSaySo) {
  HostViewFile view;
  view.keep_writing("other=1.50 host_cpus=8 vcpus=2 pinning=none end");
  const json o =
      scale_run({"max_tasks=1", "test=4", "mode=0", "point_ms=300", "warmup_ms=0", "samples=2"});
  view.stop();
  ASSERT_EQ(o["verdict"], "pass") << o.dump().substr(0, 2000);
  const json& h = o["scale_host"];
  EXPECT_DOUBLE_EQ(h["max_host_load"].get<double>(), 1.5) << h.dump();
  EXPECT_EQ(h["host_cpus"], 8) << h.dump();
  EXPECT_EQ(h["vcpus"], 2) << h.dump();
  EXPECT_EQ(h["vcpu_pinning"], "none") << h.dump();
  EXPECT_TRUE(has_warning(o, "loaded host: work outside this VM used 1.50 of the host's 8 CPUs"))
      << h.dump();
  for (const auto& p : o["scale"]) EXPECT_DOUBLE_EQ(p["host_load"].get<double>(), 1.5) << p.dump();
}

TEST_F(ScalingE2E, AnIdleHostGivesNoWarningAndAQuietOneIsUnknown) {
  {
    HostViewFile view;
    view.keep_writing("other=0.05 host_cpus=4 vcpus=2 pinning=none end");
    const json o =
        scale_run({"max_tasks=1", "test=4", "mode=0", "point_ms=300", "warmup_ms=0", "samples=2"});
    view.stop();
    EXPECT_DOUBLE_EQ(o["scale_host"]["max_host_load"].get<double>(), 0.05) << o.dump();
    EXPECT_FALSE(has_warning(o, "loaded host")) << o["scale_host"].dump();
    EXPECT_FALSE(has_warning(o, "the VM's host did not report")) << o["scale_host"].dump();
  }
  for (const std::string line : {"other=3.00 host_cpus=4 vcpus=2 pinning=none end",
                                 "other=3.00 host_cpus=4 vcpus=2 pinning=none"}) {
    // Stale (the launcher went quiet), then fresh but cut short (no "end"):
    // neither is read as the host's load.
    HostViewFile view;
    if (line.find(" end") != std::string::npos)
      view.write_stale(line);
    else
      view.keep_writing(line);
    const json o =
        scale_run({"max_tasks=1", "test=4", "mode=0", "point_ms=300", "warmup_ms=0", "samples=2"});
    view.stop();
    EXPECT_DOUBLE_EQ(o["scale_host"]["max_host_load"].get<double>(), -1) << line;
    EXPECT_FALSE(has_warning(o, "loaded host")) << line;
    EXPECT_TRUE(has_warning(o, "the VM's host did not report its load during 1 of 1 points"))
        << line << " " << o["scale_host"].dump();
  }
  // Not in a VM (no view at all): nothing about a host.
  const json bare =
      scale_run({"max_tasks=1", "test=4", "mode=0", "point_ms=100", "warmup_ms=0", "samples=1"});
  EXPECT_DOUBLE_EQ(bare["scale_host"]["max_host_load"].get<double>(), -1);
  EXPECT_FALSE(has_warning(bare, "the VM's host")) << bare["scale_host"].dump();
}

}  // namespace
