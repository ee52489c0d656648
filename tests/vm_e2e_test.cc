// End-to-end tests of the VM launcher on the real Debian kernel under QEMU
// (TCG here): `leapfrog serve` on a PostgreSQL started by the test, `leapfrog
// kernel add`, `leapfrog vm run`, and campaigns whose outcomes are read back
// from PostgreSQL. The guest runs the static agent from the build. Needs root
// (the image holds a device node; the agent mounts), qemu-system-x86,
// busybox-static and linux-image-amd64 (deploy/install-deps.sh).

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "agent/widen.h"
#include "common/proto_time.h"
#include "coordinator/metrics/promtool_check.h"
#include "coordinator/store/pg_util.h"
#include "tests/e2e_util.h"
#include "tests/http_util.h"
#include "tests/process_util.h"
#include "tests/sql_util.h"

namespace {

using namespace leapfrog::testing;

// How long the run's set-up took (Outcome.run.setup), from the stored
// outcome as hex; nothing if it says not.
std::optional<double> setup_seconds(const std::string& hex) {
  std::string bytes;
  for (size_t i = 0; i + 1 < hex.size(); i += 2)
    bytes.push_back(static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  leapfrog::v1::Outcome o;
  try {
    o = leapfrog::coord::parse_outcome(bytes);  // packed or not (store/pg_util.h)
  } catch (const leapfrog::coord::StoreError&) {
    return std::nullopt;
  }
  if (!o.run().has_setup()) return std::nullopt;
  return leapfrog::seconds_of(o.run().setup());
}

int count_matches(const std::string& text, const std::string& re) {
  const std::regex r(re);
  return static_cast<int>(
      std::distance(std::sregex_iterator(text.begin(), text.end(), r), std::sregex_iterator()));
}

class VmE2E : public E2ETest {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "needs root";
    kernel_image_ = stock_boot_kernel();
    if (kernel_image_.empty()) GTEST_SKIP() << "no /boot/vmlinuz-6.1.* (install linux-image-amd64: deploy/install-deps.sh)";
    make_test_dir();
    start_postgres();
    data_dir_ = *dir_ / "coord";
    start_serve("serve");
  }

  // `leapfrog serve` on the test's database and token, on a fresh port;
  // sets address_. Its output goes to logs_/<log>.{out,err}.
  void start_serve(const std::string& log) {
    std::error_code ec;
    stdfs::remove(data_dir_ + "/address", ec);
    serve_ = logged_proc(log, {LEAPFROG, "serve", "--database", pg_->url(), "--listen",
                               "127.0.0.1:0", "--lease-ms", "4000", "--heartbeat-ms", "500",
                               "--data-dir", data_dir_, "--token-file", token_file_});
    ASSERT_TRUE(wait_address(data_dir_, *serve_, 30s)) << tail_of(logs_ + "/" + log + ".err");
    address_ = read_address(data_dir_);
    ASSERT_FALSE(address_.empty()) << tail_of(logs_ + "/" + log + ".err");
  }

  void TearDown() override {
    if (!dir_) return;
    if (launcher_) launcher_->stop(30s);
    if (serve_) serve_->stop();
    if (show_logs()) {
      print_consoles(*dir_ / "coord");
      print_logs(logs_, 5000);
    }
    launcher_.reset();
    serve_.reset();
    release();
  }

  Result cli(std::vector<std::string> args, std::chrono::milliseconds timeout = 120s) {
    std::vector<std::string> argv = {LEAPFROG,    "--coordinator", address_, "--token-file",
                                     token_file_, "--data-dir",    data_dir_};
    argv.insert(argv.end(), args.begin(), args.end());
    return run_to_end(argv, logs_, timeout);
  }

  // `leapfrog kernel add` into the build tree's store (kept across runs: the
  // extracted vmlinux and the images are cached by content). Without
  // `prepare`, --no-prepare: the launcher makes the saved VM itself, which
  // is what most tests here look at. Returns the CLI's JSON.
  json add_kernel(const std::string& label, const std::string& image, const std::string& cache = LEAPFROG_VM_CACHE,
                  bool prepare = false) {
    std::vector<std::string> args = {"kernel", "add", label, image, "--cache-dir", cache, "--json"};
    if (!prepare) args.push_back("--no-prepare");
    args.insert(args.end(), {"--boot-timeout", "25"});
    const Result r = cli(args);
    EXPECT_EQ(r.exit, 0) << r.out << r.err;
    try {
      return json::parse(r.out);
    } catch (const json::exception& e) {
      ADD_FAILURE() << "kernel add printed no JSON: " << r.out << r.err;
      return json::object();
    }
  }

  // The real bzImage with its compressed payload overwritten in the middle:
  // the header (and version) read fine, the decompressor fails at boot.
  std::string broken_kernel() const {
    const std::string broken = *dir_ / "vmlinuz-broken";
    stdfs::copy_file(kernel_image_, broken);
    std::fstream f(broken, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(stdfs::file_size(broken) / 2));
    const std::string junk(1 << 16, '\x5a');
    f.write(junk.data(), static_cast<std::streamsize>(junk.size()));
    return broken;
  }

  void start_launcher(const std::string& label, std::vector<std::string> extra,
                      const std::string& cache = LEAPFROG_VM_CACHE) {
    std::vector<std::string> argv = {LEAPFROG,
                                     "--coordinator",
                                     address_,
                                     "--token-file",
                                     token_file_,
                                     "--data-dir",
                                     data_dir_,
                                     "vm",
                                     "run",
                                     "--kernel",
                                     label,
                                     "--cache-dir",
                                     cache};
    argv.insert(argv.end(), extra.begin(), extra.end());
    ++launches_;
    launcher_ = logged_proc(launcher_name(), argv);
  }

  // The log name of the last launcher started: launcher, launcher2, ...
  std::string launcher_name() const {
    return "launcher" + (launches_ > 1 ? std::to_string(launches_) : "");
  }

  int64_t campaign(const std::string& label, std::vector<std::string> scenarios,
                   const std::string& duration = "1s",
                   const std::vector<std::string>& filesystems = {"tmpfs"}) {
    return json::parse(campaign_run(label, scenarios, duration, filesystems).out)
        .at("campaign")
        .get<int64_t>();
  }

  // `leapfrog campaign run --json` of scenarios × filesystems on `label`.
  Result campaign_run(const std::string& label, const std::vector<std::string>& scenarios,
                      const std::string& duration, const std::vector<std::string>& filesystems) {
    std::vector<std::string> args = {"campaign",   "run",    "--kernel", label,
                                     "--duration", duration, "--json"};
    for (const auto& s : scenarios) args.insert(args.end(), {"--scenario", s});
    for (const auto& f : filesystems) args.insert(args.end(), {"--fs", f});
    const Result r = cli(args);
    if (r.exit != 0) throw std::runtime_error("campaign run failed: " + r.out + r.err);
    return r;
  }

  // Waits until every job of the campaign is done; false on timeout.
  bool wait_done(int64_t campaign, std::chrono::milliseconds timeout) {
    const std::string q = "SELECT count(*) FROM jobs WHERE state <> 'done' AND campaign_id = " +
                          std::to_string(campaign);
    return poll_until([&] { return sql_once(pg_->url(), q)[0][0] == "0"; }, timeout, 200ms);
  }

  // (scenario, verdict, error) of each outcome of the campaign, in job order.
  Rows outcomes(int64_t campaign) {
    return sql_once(pg_->url(),
               "SELECT j.scenario, o.verdict, o.error, o.attempt FROM outcomes o JOIN jobs j ON "
               "j.id = o.job_id"
               " WHERE o.campaign_id = " +
                   std::to_string(campaign) + " ORDER BY j.id, o.attempt");
  }

  // A one-job foffset campaign on `label`: done, with a pass or a violation
  // (the oracle judged a real run in the guest).
  void expect_foffset_runs(const std::string& label) {
    const int64_t c = campaign(label, {"foffset"});
    ASSERT_TRUE(wait_done(c, 240s)) << launcher_log();
    const Rows rows = outcomes(c);
    ASSERT_EQ(rows.size(), 1u);
    EXPECT_TRUE(rows[0][1] == "1" || rows[0][1] == "2") << rows[0][2];
  }

  // The outcome JSON of the campaign from `leapfrog outcomes --json` (with the console tail).
  json outcomes_json(int64_t campaign) {
    const Result r = cli({"outcomes", "--campaign", std::to_string(campaign), "--json"});
    if (r.exit != 0) throw std::runtime_error("outcomes failed: " + r.err);
    return json::parse(r.out);
  }

  // The log of the last launcher started.
  std::string launcher_log() const {
    const std::string log = logs_ + "/" + launcher_name();
    return slurp(log + ".err") + slurp(log + ".out");
  }

  // The saved VMs in `cache`.
  static std::vector<std::string> saved_vms(const std::string& cache) {
    std::vector<std::string> out;
    std::error_code ec;
    for (const auto& e : stdfs::directory_iterator(cache + "/snapshots", ec))
      if (e.path().extension() == ".state") out.push_back(e.path());
    return out;
  }

  // Every VM console the coordinator kept, concatenated.
  std::string consoles() const {
    std::string all;
    for (const auto& e : stdfs::recursive_directory_iterator(data_dir_))
      if (e.is_regular_file() && e.path().string().find("console") != std::string::npos)
        all += tail_of(e.path(), 1 << 20);
    return all;
  }

  // The widening the one outcome of `campaign` recorded.
  json widening_of(int64_t campaign) {
    const json o = outcomes_json(campaign);
    EXPECT_EQ(o.size(), 1u) << o.dump();
    if (o.empty()) return json::object();
    return o[0]["outcome"].value("widening", json::object());
  }

  // A one-job setattr-lookup campaign of `seed` on `label`, waited for.
  int64_t setattr_job(const std::string& label, uint64_t seed) {
    const Result r =
        cli({"campaign", "run", "--kernel", label, "--scenario", "setattr-lookup", "--fs", "tmpfs",
             "--duration", "1s", "--first-seed", std::to_string(seed), "--json"});
    if (r.exit != 0) throw std::runtime_error("campaign run failed: " + r.out + r.err);
    const int64_t c = json::parse(r.out).at("campaign").get<int64_t>();
    EXPECT_TRUE(wait_done(c, 240s)) << launcher_log();
    return c;
  }

  std::unique_ptr<Proc> serve_, launcher_;
  std::string data_dir_, address_, kernel_image_;
  int launches_ = 0;
};

// The agent boots in the guest, registers with the guest kernel's uname and
// vm=true, and runs a short campaign whose outcomes land in PostgreSQL.
TEST_F(VmE2E, BootsRegistersAndRunsACampaign) {
  add_kernel("debian", kernel_image_);
  start_launcher("debian", {"--count", "1", "--cpus", "2"});
  const int64_t c = campaign("debian", {"setattr-lookup", "rename-lookup", "foffset"});
  ASSERT_TRUE(wait_done(c, 240s)) << launcher_log();
  const Rows rows = outcomes(c);
  ASSERT_EQ(rows.size(), 3u);
  for (const auto& r : rows) {
    // 1 pass, 2 violation: the oracle judged a real run in the guest.
    EXPECT_TRUE(r[1] == "1" || r[1] == "2") << r[0] << " verdict " << r[1] << ": " << r[2];
  }
  const Rows agents = sql_once(pg_->url(), "SELECT name, kernel_label FROM agents");
  ASSERT_EQ(agents.size(), 1u);
  EXPECT_EQ(agents[0][1], "debian");
  const Result a = cli({"agents", "--json"});
  ASSERT_EQ(a.exit, 0) << a.err;
  const json caps = json::parse(a.out).at(0).at("capabilities");
  const std::string release = stdfs::path(kernel_image_).filename().string().substr(8);
  EXPECT_EQ(caps.at("uname").get<std::string>().rfind(release, 0), 0u) << caps.dump();
  EXPECT_TRUE(caps.value("vm", false)) << caps.dump();
  // A normal campaign produces no VM verdicts (the negative control of the
  // crash and hang tests) and the VM came up once (as a template's copy, or
  // from the cache's saved VM) and was never replaced.
  EXPECT_EQ(count_matches(launcher_log(), "vm\\.registered "), 1) << launcher_log();
  EXPECT_EQ(count_matches(launcher_log(), "vm\\.boot agent=\\S+ generation=\\d+ mode=(boot|restore)"), 1)
      << launcher_log();
  // Under TCG the guest runs on the TSC the launcher asked for
  // (vm::clock_cmdline), the launcher logs it, and every outcome records it.
  EXPECT_EQ(count_matches(launcher_log(), "vm\\.clocksource agent=\\S+ source=tsc"), 1) << launcher_log();
  for (const auto& o : outcomes_json(c))
    EXPECT_EQ(o["outcome"].value("clock_source", ""), "tsc") << o.dump();
}

// Jobs of any length (issue 47): the agent judges as it races and forgets
// what it judged. Holding the whole history (~150 bytes an operation at
// ~40,000 a second in a TCG guest), the agent filled a 512 MiB VM in about a
// minute of typeflip-lookup on ext4 and was killed ("exit status 137"); in a
// 256 MiB VM that is about 25 s. This job runs 90 s there, over three times
// as long, and ends with a verdict, its run's peak RSS far below the guest's
// memory. (192 MiB is too small for the stock kernel's initramfs to come up.)
TEST_F(VmE2E, ALongJobInASmallVmEndsWithAVerdict) {
  add_kernel("debian", kernel_image_);
  start_launcher("debian", {"--count", "1", "--cpus", "2", "--mem", "256"});
  const int64_t c = campaign("debian", {"typeflip-lookup"}, "90s", {"ext4"});
  ASSERT_TRUE(wait_done(c, 900s)) << launcher_log();
  const Rows rows = outcomes(c);
  ASSERT_EQ(rows.size(), 1u);
  // 1 pass, 2 violation: a verdict, not an error.
  EXPECT_TRUE(rows[0][1] == "1" || rows[0][1] == "2") << rows[0][1] << ": " << rows[0][2];
  const json o = outcomes_json(c);
  ASSERT_EQ(o.size(), 1u);
  const json& out = o[0]["outcome"];
  // (uint64 fields are strings in protobuf's JSON.)
  const uint64_t ops = std::stoull(out.value("ops", std::string("0")));
  EXPECT_GT(ops, 1'000'000u) << "fewer operations than would have filled the guest before: "
                             << out.dump().substr(0, 2000);
  const uint64_t peak = std::stoull(out.at("run").value("peak_rss_bytes", std::string("0")));
  std::printf("long job in a 256 MiB VM: %llu operations, run peak RSS %.1f MiB\n",
              static_cast<unsigned long long>(ops), static_cast<double>(peak) / (1 << 20));
  EXPECT_GT(peak, 0u) << out.dump().substr(0, 2000);
  EXPECT_LT(peak, 96ull << 20) << "the run's peak RSS is not bounded: " << peak << " bytes for " << ops
                               << " operations";
}

// A TCG guest's /proc/stat cannot see the host's other work: the launcher
// tells the guest on its ttyS1, and lookup-scale records it with every point.
// Positive control: this process keeps every host CPU busy during the run,
// so the host's other load must show and the run must say "loaded host". The
// launcher's QEMU itself does not count as the host's other load.
TEST_F(VmE2E, ALookupScaleRunInAVmSeesItsHostsLoad) {
  add_kernel("debian", kernel_image_);
  start_launcher("debian", {"--count", "1", "--cpus", "2"});
  // Registered first: the burners must not slow the boot past its deadline.
  const int64_t warm = campaign("debian", {"setattr-lookup"});
  ASSERT_TRUE(wait_done(warm, 240s)) << launcher_log();
  const unsigned cpus = std::max(1u, std::thread::hardware_concurrency());
  std::atomic<bool> stop{false};
  std::vector<std::thread> burners;
  for (unsigned i = 0; i < cpus; ++i)
    burners.emplace_back([&stop] {
      volatile uint64_t n = 0;
      while (!stop.load(std::memory_order_relaxed)) n = n + 1;
    });
  const Result r =
      cli({"campaign", "run",       "--kernel", "debian",        "--scenario", "lookup-scale",
           "--fs",     "tmpfs",     "--param",  "max_tasks=1",   "--param",    "test=4",
           "--param",  "mode=0",    "--param",  "point_ms=1500", "--param",    "warmup_ms=200",
           "--param",  "samples=2", "--json"});
  const int64_t c = r.exit == 0 ? json::parse(r.out).at("campaign").get<int64_t>() : 0;
  const bool done = c != 0 && wait_done(c, 300s);
  stop = true;
  for (auto& t : burners) t.join();
  ASSERT_EQ(r.exit, 0) << r.out << r.err;
  ASSERT_TRUE(done) << launcher_log();
  // The run as the dashboard's Scaling page reads it.
  const Answer a = http_get(url_port(slurp(data_dir_ + "/http")), "/api/scaling?kernel=debian");
  ASSERT_EQ(a.status, 200) << a.head << a.body;
  const json run = json::parse(a.body).at("runs").at(0);
  ASSERT_EQ(run.at("campaign_id"), std::to_string(c)) << run.dump();
  const json host = run.at("run").value("host", json::object());
  EXPECT_GT(host.value("max_host_load", -1.0), 0.5) << host.dump();
  EXPECT_EQ(host.value("host_cpus", 0u), cpus) << host.dump();
  EXPECT_EQ(host.value("vcpus", 0u), 2u) << host.dump();
  EXPECT_EQ(host.value("vcpu_pinning", ""), "none") << host.dump();
  bool loaded = false;
  for (const auto& w : host.value("warnings", json::array()))
    loaded |= w.get<std::string>().rfind("loaded host: work outside this VM used", 0) == 0;
  EXPECT_TRUE(loaded) << host.dump();
  ASSERT_FALSE(run.at("run").at("points").empty()) << run.dump();
  for (const auto& p : run.at("run").at("points"))
    EXPECT_GE(p.value("host_load", -1.0), 0) << p.dump();
}

// A job that panics the guest kernel ends as kernel-crash with the panic's
// title and the console tail; the next job runs on a fresh VM.
TEST_F(VmE2E, KernelCrashEndsTheJobAndTheNextJobRunsOnAFreshVm) {
  add_kernel("debian", kernel_image_);
  start_launcher("debian", {"--count", "1", "--selftest", "--metrics-listen", "127.0.0.1:0"});
  const int64_t crash = campaign("debian", {"selftest-crash"});
  ASSERT_TRUE(wait_done(crash, 240s)) << launcher_log();
  const Rows rows = outcomes(crash);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0][1], "5") << rows[0][2];  // VERDICT_KERNEL_CRASH
  EXPECT_NE(rows[0][2].find("sysrq triggered crash"), std::string::npos) << rows[0][2];
  const std::string tail = outcomes_json(crash).dump();
  EXPECT_NE(tail.find("Kernel panic"), std::string::npos) << tail;

  ASSERT_NO_FATAL_FAILURE(expect_foffset_runs("debian"));
  // The replacement registered: a second VM, whether or not the first was
  // a template's copy.
  EXPECT_EQ(count_matches(launcher_log(), "vm\\.registered "), 2) << launcher_log();

  // Metrics (issue 21 §3), both passing promtool: the launcher's own
  // (--metrics-listen) count its boots and the crash; the coordinator's
  // count the VM agents' registrations and the crash the launcher reported.
  using leapfrog::metrics::testing::promtool_check;
  using leapfrog::metrics::testing::sample;
  std::smatch m;
  const std::string log = launcher_log();
  ASSERT_TRUE(std::regex_search(log, m, std::regex(R"(metrics\.listen url=(\S+))"))) << log;
  const std::string url = m[1].str();
  const Answer launcher_metrics = http_get(url_port(url.substr(0, url.rfind('/'))), "/metrics");
  ASSERT_EQ(launcher_metrics.status, 200) << launcher_metrics.head;
  EXPECT_EQ(promtool_check(launcher_metrics.body).exit, 0)
      << promtool_check(launcher_metrics.body).output << launcher_metrics.body;
  double boots = 0;
  for (const std::string mode : {"boot", "restore", "handoff"})
    boots += sample(launcher_metrics.body,
                    "leapfrog_vm_boots_total{kernel=\"debian\",mode=\"" + mode + "\"}")
                 .value_or(0);
  EXPECT_GE(boots, 2) << launcher_metrics.body;
  EXPECT_EQ(sample(launcher_metrics.body, R"(leapfrog_vm_boot_seconds_count{kernel="debian"})"), 2)
      << launcher_metrics.body;
  EXPECT_EQ(sample(launcher_metrics.body,
                   R"(leapfrog_vm_failures_total{kernel="debian",kind="kernel-crash"})"),
            1);
  EXPECT_EQ(
      sample(launcher_metrics.body, R"(leapfrog_vm_failures_total{kernel="debian",kind="hang"})"),
      0);
  const Answer coord_metrics = http_get(url_port(slurp(data_dir_ + "/http")), "/metrics");
  ASSERT_EQ(coord_metrics.status, 200) << coord_metrics.head;
  EXPECT_EQ(promtool_check(coord_metrics.body).exit, 0)
      << promtool_check(coord_metrics.body).output;
  EXPECT_EQ(sample(coord_metrics.body, R"(leapfrog_vm_failures_total{verdict="kernel-crash"})"), 1)
      << coord_metrics.body;
  EXPECT_EQ(sample(coord_metrics.body, R"(leapfrog_outcomes_total{verdict="kernel-crash"})"), 1);
  EXPECT_GE(
      sample(coord_metrics.body, R"(leapfrog_agent_registrations_total{vm="true"})").value_or(0),
      2);
}

// An agent that stops making progress (SIGSTOP) in a quiet guest ends its job
// as hang within the deadline, and the VM is replaced.
TEST_F(VmE2E, FrozenAgentEndsTheJobAsHangAndTheVmIsReplaced) {
  add_kernel("debian", kernel_image_);
  start_launcher("debian", {"--count", "1", "--selftest", "--hang-timeout", "8"});
  const int64_t hang = campaign("debian", {"selftest-hang"});
  ASSERT_TRUE(poll_until(
      [&] { return !sql_once(pg_->url(), "SELECT 1 FROM jobs WHERE state = 'leased'").empty(); }, 240s,
      200ms))
      << launcher_log();
  const auto leased = Clock::now();
  ASSERT_TRUE(wait_done(hang, 60s)) << launcher_log();
  // Hang deadline 8 s, agents polled every 0.5 s, heartbeats every 0.5 s.
  EXPECT_LT(Clock::now() - leased, 20s);
  const Rows rows = outcomes(hang);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0][1], "6") << rows[0][2];  // VERDICT_HANG
  EXPECT_NE(outcomes_json(hang).dump().find("leapfrog-init"), std::string::npos);

  ASSERT_NO_FATAL_FAILURE(expect_foffset_runs("debian"));
  // The replacement registered: a second VM, whether or not the first was
  // a template's copy.
  EXPECT_EQ(count_matches(launcher_log(), "vm\\.registered "), 2) << launcher_log();
}

// A corrupt kernel image ends a job of that kernel as boot-failure within the
// boot deadline, and the launcher gives up on it instead of looping.
TEST_F(VmE2E, CorruptKernelIsABootFailure) {
  const std::string broken = broken_kernel();
  add_kernel("broken", broken);
  const int64_t c = campaign("broken", {"foffset"});
  const auto start = Clock::now();
  start_launcher("broken", {"--count", "1", "--boot-timeout", "25"});
  ASSERT_TRUE(wait_done(c, 90s)) << launcher_log();
  EXPECT_LT(Clock::now() - start, 60s);
  const Rows rows = outcomes(c);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0][1], "7") << rows[0][2];  // VERDICT_BOOT_FAILURE
  // The launcher reported it as itself (issue 18), not by registering as
  // the VM's agent and leasing the job.
  EXPECT_TRUE(sql_once(pg_->url(), "SELECT name FROM agents").empty());
  const Rows by = sql_once(pg_->url(),
                           "SELECT count(*) FROM outcomes o JOIN launchers l ON l.id = o.agent_id"
                           " WHERE o.campaign_id = " +
                               std::to_string(c));
  EXPECT_EQ(by[0][0], "1") << "the boot failure's outcome is not the launcher's";
  // The launcher stops: no second boot, exit status 2 (no VM ever registered).
  const auto code = launcher_->wait(30s);
  ASSERT_TRUE(code.has_value()) << launcher_log();
  EXPECT_EQ(*code, 2);
  EXPECT_EQ(count_matches(launcher_log(), "vm\\.boot agent="), 1) << launcher_log();
}

// Snapshots, from a cache of their own: the first VM boots as the template
// and is saved; the second waits for the save and starts from it. Each takes
// its own identity (name, token), the saved state holds no token, both run
// jobs, and a later launcher (another run: new port, new token) starts from
// the same saved VM.
TEST_F(VmE2E, VmsStartFromOneSavedBootEachWithItsOwnIdentity) {
  const std::string cache = *dir_ / "cache";
  add_kernel("debian", kernel_image_, cache);
  start_launcher("debian", {"--count", "2"}, cache);
  ASSERT_TRUE(poll_until([&] { return count_matches(launcher_log(), "vm\\.registered ") == 2; }, 240s,
                         200ms))
      << launcher_log();
  const std::string log = launcher_log();
  // The template is saved, then starts again from its save like the other.
  EXPECT_EQ(count_matches(log, "vm\\.boot agent=\\S+ generation=1 mode=template"), 1) << log;
  EXPECT_EQ(count_matches(log, "vm\\.boot agent=\\S+ generation=1 mode=restore"), 1) << log;
  EXPECT_EQ(count_matches(log, "vm\\.boot agent=\\S+ generation=2 mode=restore"), 1) << log;
  EXPECT_EQ(count_matches(log, "vm\\.snapshot_saved "), 1) << log;
  const auto saved = saved_vms(cache);
  ASSERT_EQ(saved.size(), 1u);
  const std::string ram = stdfs::path(saved[0]).replace_extension(".ram");
  ASSERT_TRUE(stdfs::exists(ram)) << "no RAM file beside " << saved[0];
  std::string token = slurp(token_file_);
  while (!token.empty() && token.back() == '\n') token.pop_back();
  ASSERT_FALSE(token.empty());
  EXPECT_EQ(slurp(saved[0]).find(token), std::string::npos) << "the saved VM holds the token";
  EXPECT_EQ(slurp(ram).find(token), std::string::npos) << "the saved VM's RAM holds the token";

  const int64_t c = campaign("debian", {"foffset", "setattr-lookup", "foffset", "setattr-lookup"}, "2s");
  ASSERT_TRUE(wait_done(c, 240s)) << launcher_log();
  for (const auto& r : outcomes(c))
    EXPECT_TRUE(r[1] == "1" || r[1] == "2") << r[0] << " verdict " << r[1] << ": " << r[2];
  const Rows agents = sql_once(pg_->url(), "SELECT name FROM agents ORDER BY name");
  ASSERT_EQ(agents.size(), 2u);
  EXPECT_NE(agents[0][0], agents[1][0]);
  const Rows by_agent = sql_once(
      pg_->url(), "SELECT count(DISTINCT agent_id) FROM outcomes WHERE campaign_id = " + std::to_string(c));
  EXPECT_EQ(by_agent[0][0], "2") << "both VMs run jobs";
  const Result a = cli({"agents", "--json"});
  ASSERT_EQ(a.exit, 0) << a.err;
  const std::string release = stdfs::path(kernel_image_).filename().string().substr(8);
  for (const auto& agent : json::parse(a.out))
    EXPECT_EQ(agent.at("capabilities").at("uname").get<std::string>().rfind(release, 0), 0u) << agent.dump();

  // Another run of the launcher, as after a restart of `leapfrog up`: the
  // coordinator has a new port and a new token.
  launcher_->stop(30s);
  serve_->stop();
  std::ofstream(token_file_) << random_token() << "\n";
  start_serve("serve2");
  if (HasFatalFailure()) return;
  start_launcher("debian", {"--count", "1"}, cache);
  ASSERT_NO_FATAL_FAILURE(expect_foffset_runs("debian"));
  EXPECT_EQ(count_matches(launcher_log(), "vm\\.boot agent=\\S+ generation=1 mode=restore"), 1)
      << launcher_log();
}

// A saved VM that no longer loads (here: cut short) is removed, and the VM
// boots in full instead: the launch still succeeds.
TEST_F(VmE2E, ASavedVmThatDoesNotLoadFallsBackToAFullBoot) {
  const std::string cache = *dir_ / "cache";
  add_kernel("debian", kernel_image_, cache);
  start_launcher("debian", {"--count", "1"}, cache);
  ASSERT_TRUE(poll_until([&] { return count_matches(launcher_log(), "vm\\.registered ") == 1; }, 240s,
                         200ms))
      << launcher_log();
  launcher_->stop(30s);
  const auto saved = saved_vms(cache);
  ASSERT_EQ(saved.size(), 1u);
  stdfs::resize_file(saved[0], stdfs::file_size(saved[0]) / 3);

  start_launcher("debian", {"--count", "1"}, cache);
  ASSERT_NO_FATAL_FAILURE(expect_foffset_runs("debian"));
  const std::string log = launcher_log();
  EXPECT_EQ(count_matches(log, "vm\\.snapshot_restore_failed "), 1) << log;
  EXPECT_EQ(count_matches(log, "vm\\.boot agent=\\S+ generation=1 mode=restore"), 1) << log;
  EXPECT_EQ(count_matches(log, "vm\\.boot agent=\\S+ generation=2 mode=boot"), 1) << log;
  EXPECT_TRUE(saved_vms(cache).empty()) << "the saved VM that does not load is removed";
  EXPECT_FALSE(stdfs::exists(stdfs::path(saved[0]).replace_extension(".ram"))) << "with its RAM file";
}

// A cache where no VM can be saved (its snapshots folder cannot be made) is
// no reason to fail: the VMs boot in full, and say why.
TEST_F(VmE2E, ACacheThatCannotHoldSavedVmsMeansFullBoots) {
  const std::string cache = *dir_ / "cache";
  add_kernel("debian", kernel_image_, cache);
  std::ofstream(cache + "/snapshots") << "not a folder\n";
  start_launcher("debian", {"--count", "1"}, cache);
  ASSERT_NO_FATAL_FAILURE(expect_foffset_runs("debian"));
  const std::string log = launcher_log();
  EXPECT_EQ(count_matches(log, "vm\\.snapshots_off agent=\\S+ reason=\"cannot create "), 1) << log;
  EXPECT_EQ(count_matches(log, "vm\\.boot agent=\\S+ generation=1 mode=boot"), 1) << log;
  EXPECT_EQ(count_matches(log, "mode=template|mode=restore"), 0) << log;
}

// `kernel add` boots the kernel once and saves it, so that even the first
// launch of the kernel starts from the saved VM. A kernel that does not boot
// is still added, with a warning that says why.
TEST_F(VmE2E, KernelAddSavesTheBootedVmSoTheFirstLaunchStartsFromIt) {
  const std::string cache = *dir_ / "cache";
  const json added = add_kernel("debian", kernel_image_, cache, true);
  ASSERT_TRUE(added.contains("saved_vm")) << added.dump();
  EXPECT_TRUE(added["saved_vm"].value("ready", false)) << added.dump();
  ASSERT_EQ(saved_vms(cache).size(), 1u);
  // Nothing of the preparation is left to run, or registered.
  EXPECT_TRUE(sql_once(pg_->url(), "SELECT name FROM agents").empty());
  // The same kernel under another label has the same saved VM.
  const json again = add_kernel("debian-again", kernel_image_, cache, true);
  EXPECT_TRUE(again["saved_vm"].value("ready", false)) << again.dump();
  EXPECT_LT(again["saved_vm"].value("ms", 1'000'000), added["saved_vm"].value("ms", 0)) << again.dump();

  start_launcher("debian", {"--count", "1"}, cache);
  ASSERT_NO_FATAL_FAILURE(expect_foffset_runs("debian"));
  const std::string log = launcher_log();
  EXPECT_EQ(count_matches(log, "vm\\.boot agent=\\S+ generation=1 mode=restore"), 1) << log;
  EXPECT_EQ(count_matches(log, "mode=template"), 0) << log;

  const std::string broken = broken_kernel();
  const json bad = add_kernel("broken", broken, cache, true);
  ASSERT_TRUE(bad.contains("saved_vm")) << bad.dump();
  EXPECT_FALSE(bad["saved_vm"].value("ready", true)) << bad.dump();
  EXPECT_NE(bad["saved_vm"].value("error", "").find("did not boot"), std::string::npos) << bad.dump();
  EXPECT_EQ(saved_vms(cache).size(), 1u) << "a kernel that does not boot has no saved VM";
}

// ---- every file system in the VM -------------------------------------------

const std::vector<std::string> kVmFilesystems = {"tmpfs", "ext4",        "xfs",
                                                 "btrfs", "fuse-cached", "fuse-direct"};
const std::vector<std::string> kDiskFilesystems = {"tmpfs", "ext4", "xfs", "btrfs"};
const std::vector<std::string> kLookupScenarios = {
    "setattr-lookup", "chown-lookup",    "acl-exec-deny", "rename-lookup",  "mount-lookup",  "dotdot-lookup",
    "symlink-lookup", "dirfd-lookup",    "typeflip-lookup", "exec-setid", "beneath-lookup", "cached-lookup",
    "mount-move-dotdot", "rename-umount"};

// The file systems each registered agent offers, by agent name.
std::map<std::string, std::vector<std::string>> offered(const json& agents) {
  std::map<std::string, std::vector<std::string>> out;
  for (const auto& a : agents) {
    std::vector<std::string> fs;
    for (const auto& f : a.at("capabilities").value("filesystems", json::array()))
      fs.push_back(f.get<std::string>());
    out[a.value("name", "?")] = fs;
  }
  return out;
}

// The first violations of a campaign, one line each, for a failure message.
// The finding kept in tests/findings/README.md: on Linux 6.1 (Debian's
// kernel and 6.1.192 as shipped), a walk through a symlink that a rename
// replaces returns ENOENT on ext4 and btrfs (the replaced fast symlink's
// body read while it is evicted). True when every violation of `job` is that
// one: the test reports it and still fails on anything else.
bool only_the_known_symlink_finding(const std::string& url, const std::string& job,
                                    const std::string& scenario, const std::string& fs) {
  if (scenario != "symlink-lookup" || (fs != "ext4" && fs != "btrfs")) return false;
  const Rows vs = sql_once(url, "SELECT v.kind, v.path, v.observed FROM violations v WHERE v.job_id = " + job);
  if (vs.empty()) return false;
  for (const auto& v : vs)
    if (v[0] != "stale-entry" || v[1] != "l/f" || v[2] != "error ENOENT") return false;
  return true;
}

std::string violations_text(const std::string& url, int64_t campaign) {
  std::string out;
  for (const auto& v :
       sql_once(url,
                "SELECT j.scenario, j.fs, v.kind, v.op, v.path, v.observed, v.expected"
                " FROM violations v JOIN jobs j ON j.id = v.job_id WHERE j.campaign_id = " +
                    std::to_string(campaign) + " ORDER BY j.id, v.idx LIMIT 8")) {
    for (const auto& f : v) out += f + " | ";
    out += "\n";
  }
  return out;
}

// Each outcome of campaign `c` (kLookupScenarios on kDiskFilesystems) as
// (scenario, fs, verdict, error, lookups, violations, outcome hex, job id):
// every one passed and judged lookups, but for the known finding, which is
// printed (with `prefix`). Any other violation on a stock kernel is a new
// finding: the failure message carries it.
Rows lookups_clean_but_the_finding(const std::string& url, int64_t c, const std::string& prefix) {
  const Rows rows =
      sql_once(url,
               "SELECT j.scenario, j.fs, o.verdict, o.error, o.lookups_checked, o.violation_count,"
               " encode(o.outcome, 'hex'), j.id"
               " FROM outcomes o JOIN jobs j ON j.id = o.job_id WHERE o.campaign_id = " +
                   std::to_string(c) + " ORDER BY j.id, o.attempt");
  EXPECT_EQ(rows.size(), kLookupScenarios.size() * kDiskFilesystems.size());
  int known = 0;
  for (const auto& r : rows) {
    if (r[2] == "2" && only_the_known_symlink_finding(url, r[7], r[0], r[1])) {
      ++known;
      std::printf("%sknown finding (tests/findings/README.md): %s on %s, %s violations in %s lookups\n",
                  prefix.c_str(), r[0].c_str(), r[1].c_str(), r[5].c_str(), r[4].c_str());
      continue;
    }
    EXPECT_EQ(r[2], "1") << r[0] << " on " << r[1] << ": verdict " << r[2] << " error " << r[3]
                         << " violations " << r[5] << "\n"
                         << violations_text(url, c);
    EXPECT_GT(std::stoull(r[4]), 0u) << r[0] << " on " << r[1] << " judged no lookup";
  }
  std::printf("%sknown findings seen: %d\n", prefix.c_str(), known);
  return rows;
}

// The guest's agent offers every file system the host agent does (the
// image carries the modules, their dependencies and the mkfs programs); the
// lookup scenarios run clean on each in the Debian kernel, and the FUSE
// positive control fires inside the VM while its uncached twin stays clean.
// Prints how long each file system took to provision in the guest.
TEST_F(VmE2E, EveryFileSystemRunsInTheVmAndTheLookupScenariosStayClean) {
  add_kernel("debian", kernel_image_);
  start_launcher("debian", {"--count", "2", "--cpus", "2"});
  ASSERT_TRUE(poll_until([&] { return count_matches(launcher_log(), "vm\\.registered ") >= 2; },
                         300s, 200ms))
      << launcher_log();
  const Result a = cli({"agents", "--json"});
  ASSERT_EQ(a.exit, 0) << a.err;
  for (const auto& [name, fs] : offered(json::parse(a.out))) {
    ASSERT_GE(fs.size(), kVmFilesystems.size()) << name;
    EXPECT_EQ(std::vector<std::string>(fs.begin(), fs.begin() + kVmFilesystems.size()), kVmFilesystems)
        << name;
    // Then the views over the disk file systems (no idmapped tmpfs before 6.3).
    for (const char* view : {"ext4+bind", "xfs+overlay", "btrfs+idmap", "tmpfs+overlay"})
      EXPECT_NE(std::find(fs.begin(), fs.end(), view), fs.end()) << name << " lacks " << view;
    EXPECT_EQ(std::find(fs.begin(), fs.end(), "tmpfs+idmap"), fs.end()) << name;
  }

  const int64_t c = campaign("debian", kLookupScenarios, "1s", kDiskFilesystems);
  ASSERT_TRUE(wait_done(c, 540s)) << launcher_log();
  Rows rows;
  ASSERT_NO_FATAL_FAILURE(rows = lookups_clean_but_the_finding(pg_->url(), c, ""));
  std::map<std::string, std::vector<double>> setup;
  for (const auto& r : rows)
    if (const auto took = setup_seconds(r[6])) setup[r[1]].push_back(*took);
  // The table a closing note reports: lookups judged / violations, per scenario and file system.
  std::map<std::string, std::map<std::string, std::string>> table;
  for (const auto& r : rows) table[r[0]][r[1]] = r[4] + " / " + r[5];
  for (const auto& [scenario, by_fs] : table) {
    std::printf("guest %-16s", scenario.c_str());
    for (const auto& fs : kDiskFilesystems) std::printf(" %s %-12s", fs.c_str(), by_fs.count(fs) ? by_fs.at(fs).c_str() : "-");
    std::printf("\n");
  }
  for (auto& [fs, times] : setup) {
    std::sort(times.begin(), times.end());
    std::printf("guest file system setup: %-6s median %.0f ms, max %.0f ms over %zu jobs\n",
                fs.c_str(), times[times.size() / 2] * 1000, times.back() * 1000, times.size());
  }
  EXPECT_EQ(setup.size(), kDiskFilesystems.size());

  // The positive control in the guest: the kernel's FUSE cache serves stale
  // attributes; with caching off the same race is clean.
  const int64_t f = campaign("debian", {"setattr-lookup"}, "3s", {"fuse-cached", "fuse-direct"});
  ASSERT_TRUE(wait_done(f, 240s)) << launcher_log();
  const Rows fuse = sql_once(
      pg_->url(),
      "SELECT j.fs, o.verdict, o.error, coalesce((SELECT string_agg(DISTINCT kind, ',') FROM"
      " violations v WHERE v.job_id = o.job_id AND v.attempt = o.attempt), '')"
      " FROM outcomes o JOIN jobs j ON j.id = o.job_id WHERE o.campaign_id = " +
          std::to_string(f) + " ORDER BY j.fs");
  ASSERT_EQ(fuse.size(), 2u);
  EXPECT_EQ(fuse[0][0], "fuse-cached");
  EXPECT_EQ(fuse[0][1], "2") << "the FUSE control did not fire in the VM: " << fuse[0][2];
  EXPECT_NE(fuse[0][3].find("stale-grant"), std::string::npos) << fuse[0][3];
  EXPECT_EQ(fuse[1][0], "fuse-direct");
  EXPECT_EQ(fuse[1][1], "1") << fuse[1][2] << " " << fuse[1][3];
}

// A modules folder that lacks xfs (as a kernel without it would): the image
// carries the rest, the VM offers every other file system, and a campaign on
// xfs says that no agent of the label offers it instead of waiting silently.
TEST_F(VmE2E, AFileSystemTheKernelLacksIsNotOfferedAndCampaignsSaySo) {
  const std::string release = stdfs::path(kernel_image_).filename().string().substr(8);
  const stdfs::path from = "/lib/modules/" + release;
  if (!stdfs::exists(from / "modules.dep")) GTEST_SKIP() << "no " << from << "/modules.dep";
  const stdfs::path base = *dir_ / "modroot";
  const stdfs::path to = base / "lib/modules" / release;
  std::ifstream dep(from / "modules.dep");
  std::string line;
  int copied = 0;
  while (std::getline(dep, line)) {
    const std::string path = line.substr(0, line.find(':'));
    if (path.find("kernel/fs/xfs/") == 0) continue;
    for (const char* keep : {"kernel/drivers/virtio/", "kernel/drivers/net/", "kernel/net/core/",
                             "kernel/drivers/block/loop", "kernel/fs/", "kernel/lib/",
                             "kernel/crypto/", "kernel/arch/x86/crypto/"}) {
      if (path.rfind(keep, 0) != 0) continue;
      stdfs::create_directories((to / path).parent_path());
      stdfs::copy_file(from / path, to / path);
      ++copied;
      break;
    }
  }
  ASSERT_GT(copied, 10);
  for (const char* f : {"modules.builtin", "modules.builtin.modinfo", "modules.order"})
    if (stdfs::exists(from / f)) stdfs::copy_file(from / f, to / f);
  const Result dm = run_to_end({"/sbin/depmod", "-b", base.string(), release}, logs_, 120s);
  ASSERT_EQ(dm.exit, 0) << dm.out << dm.err;

  const Result added =
      cli({"kernel", "add", "debian-noxfs", kernel_image_, "--modules", to.string(), "--cache-dir",
           LEAPFROG_VM_CACHE, "--no-prepare", "--json"});
  ASSERT_EQ(added.exit, 0) << added.out << added.err;
  start_launcher("debian-noxfs", {"--count", "1"});
  ASSERT_TRUE(poll_until([&] { return count_matches(launcher_log(), "vm\\.registered ") >= 1; },
                         240s, 200ms))
      << launcher_log();
  const Result a = cli({"agents", "--json"});
  ASSERT_EQ(a.exit, 0) << a.err;
  const auto fs = offered(json::parse(a.out));
  ASSERT_EQ(fs.size(), 1u);
  const std::vector<std::string>& got = fs.begin()->second;
  ASSERT_GE(got.size(), 5u);
  EXPECT_EQ(std::vector<std::string>(got.begin(), got.begin() + 5),
            (std::vector<std::string>{"tmpfs", "ext4", "btrfs", "fuse-cached", "fuse-direct"}));
  for (const auto& f : got) EXPECT_NE(f.rfind("xfs", 0), 0u) << f;

  const Result r = campaign_run("debian-noxfs", {"setattr-lookup"}, "1s", {"xfs"});
  const json w = json::parse(r.out).value("warnings", json::array());
  ASSERT_FALSE(w.empty()) << r.out << r.err;
  EXPECT_NE(w.dump().find("xfs"), std::string::npos) << w.dump();
  EXPECT_NE(r.err.find("warning: campaign"), std::string::npos) << r.err;
}

// ---- the current long-term line: Debian's stock 6.12 ------------------------

// Debian's stock 6.12 (linux-image-6.12-amd64) runs the lookup scenarios on
// tmpfs, ext4, xfs and btrfs in a VM, with the kprobe module built against
// its headers and loaded. It boots with bdev_allow_write_mounted=0, the mode
// every kernel `leapfrog kernel build` makes runs in (allnoconfig leaves
// CONFIG_BLK_DEV_WRITE_MOUNTED off): a block device someone holds open for
// writing cannot be mounted. The agent held its loop device that way, and
// every ext4 job on a built 6.12 failed at set-up with EBUSY (issue 48).
TEST_F(VmE2E, TheStock612KernelRunsTheLookupScenariosOnEveryDiskFileSystem) {
  const std::string image = stock_boot_kernel("6.12");
  ASSERT_FALSE(image.empty())
      << "no /boot/vmlinuz-6.12.* (deploy/install-deps.sh installs linux-image-6.12-amd64)";
  const Result added = cli({"kernel", "add", "debian612", image, "--cmdline", "bdev_allow_write_mounted=0",
                            "--cache-dir", LEAPFROG_VM_CACHE, "--no-prepare", "--json"});
  ASSERT_EQ(added.exit, 0) << added.out << added.err;
  start_launcher("debian612", {"--count", "2", "--cpus", "2"});

  const int64_t c = campaign("debian612", kLookupScenarios, "1s", kDiskFilesystems);
  ASSERT_TRUE(wait_done(c, 600s)) << launcher_log();
  // A set-up failure (the EBUSY) is verdict 3 with its error.
  Rows rows;
  ASSERT_NO_FATAL_FAILURE(rows = lookups_clean_but_the_finding(pg_->url(), c, "6.12: "));

  // The guest ran 6.12, and its image carried the kprobe module: each job
  // widened at the points its seed chose, or says why not.
  const json all = outcomes_json(c);
  ASSERT_EQ(all.size(), rows.size());
  size_t widened = 0;
  std::set<std::string> points;
  for (const auto& o : all) {
    const json w = o["outcome"].value("widening", json::object());
    const std::string reason = w.value("reason", "");
    EXPECT_EQ(reason.find("not loaded"), std::string::npos) << w.dump();
    EXPECT_EQ(reason.find("no kprobe module"), std::string::npos) << w.dump();
    if (!w.value("on", false)) continue;
    ++widened;
    for (const auto& p : w.value("points", json::array())) points.insert(p.value("name", ""));
  }
  std::string names;
  for (const auto& p : points) names += " " + p;
  std::printf("6.12: %zu of %zu jobs widened by the kprobe module, at:%s\n", widened, all.size(),
              names.c_str());
  EXPECT_GT(widened, 0u);
  const Result a = cli({"agents", "--json"});
  ASSERT_EQ(a.exit, 0) << a.err;
  const std::string release = stdfs::path(image).filename().string().substr(8);
  EXPECT_NE(a.out.find(release), std::string::npos) << "no agent ran " << release << ": " << a.out;
}

// ---- window widening on the stock kernel ------------------------------------

// The Debian kernel's VM image carries Leapfrog's kprobe delay points
// (deploy/kernel/kprobe-widen/): the controls refuse bad values, the agent
// sets the points the seed chooses, and the kernel delays the observers'
// lookups at them. The positive control of "off": the same kernel booted
// with module.sig_enforce=1 refuses the unsigned module, and the outcome
// says widening is off with insmod's error; booted with leapfrog_widen=off,
// /init loads the module locked, as the built-in points are.
TEST_F(VmE2E, TheKprobeModuleWidensTheStockKernelAndItsAbsenceSaysWhy) {
  // What the module offers on Debian's 6.1 (every point it has).
  const std::vector<std::string> offered = {"d_move",
                                            "dotdot",
                                            "exec_setid",
                                            "kp_choose_mountpoint_rcu",
                                            "kp_lookup_fast",
                                            "kp_try_to_unlazy",
                                            "lookup_found",
                                            "may_lookup_after",
                                            "may_lookup_before",
                                            "mount_attach",
                                            "mount_cross",
                                            "setattr_copy",
                                            "step_into"};
  // A seed whose choice includes a point every lookup passes.
  auto every_lookup = [](const std::vector<leapfrog::WidenPoint>& ps) {
    for (const auto& p : ps)
      if (p.name == "may_lookup_before" || p.name == "may_lookup_after" || p.name == "step_into" ||
          p.name == "kp_lookup_fast")
        return true;
    return false;
  };
  uint64_t seed = 7;
  while (!every_lookup(leapfrog::widen::choose(seed, offered, 65534))) ++seed;
  const auto want = leapfrog::widen::choose(seed, offered, 65534);

  add_kernel("debian", kernel_image_);
  start_launcher("debian", {"--count", "1", "--cpus", "2"});
  const int64_t c = setattr_job("debian", seed);
  const Rows rows = outcomes(c);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_TRUE(rows[0][1] == "1" || rows[0][1] == "2") << rows[0][2];
  const json w = widening_of(c);
  std::printf("stock kernel, kprobe widening, seed %llu: %s\n",
              static_cast<unsigned long long>(seed), w.dump().c_str());
  const json checks = w.value("control_checks", json::array());
  ASSERT_EQ(checks.size(), 6u) << w.dump();
  for (const auto& check : checks)
    EXPECT_NE(check.get<std::string>().find(": refused (Invalid argument)"), std::string::npos)
        << check;
  const std::string console = consoles();
  for (const char* line : {"leapfrog_widen_kprobe: d_move: bad probability \"-1\": want 0..1000000",
                           "leapfrog_widen_kprobe: control: unknown point \"no_such_point\""})
    EXPECT_NE(console.find(line), std::string::npos) << line;
  ASSERT_TRUE(w.value("on", false)) << w.dump();
  EXPECT_EQ(w.value("reason", ""), "chosen by seed " + std::to_string(seed));
  const json points = w.value("points", json::array());
  ASSERT_EQ(points.size(), want.size()) << w.dump();
  uint64_t lookup_hits = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(points[i].value("name", ""), want[i].name);
    EXPECT_EQ(points[i].value("probability_ppm", 0u), want[i].probability_ppm);
    EXPECT_EQ(points[i].value("delay_ns", 0u), want[i].delay_ns);
    EXPECT_EQ(points[i].value("uid", ""), want[i].uid);
    const uint64_t hits = std::stoull(points[i].value("hits", std::string("0")));
    if (want[i].uid == "65534") lookup_hits += hits;
    // The module waits on the clock too: its delays took what was asked.
    const int64_t spent_ns = ns_of_duration_json(points[i].value("spent", std::string()));
    ASSERT_GE(spent_ns, 0) << w.dump();
    EXPECT_GE(static_cast<double>(spent_ns), 0.999 * static_cast<double>(hits) * want[i].delay_ns)
        << want[i].name << ": " << hits << " delays took " << spent_ns << " ns";
  }
  EXPECT_GT(lookup_hits, 0u) << w.dump();  // the kernel delayed the observers' lookups
  launcher_->stop(30s);

  const Result added =
      cli({"kernel", "add", "debian-sigenforce", kernel_image_, "--cmdline", "module.sig_enforce=1",
           "--cache-dir", LEAPFROG_VM_CACHE, "--no-prepare", "--json"});
  ASSERT_EQ(added.exit, 0) << added.out << added.err;
  start_launcher("debian-sigenforce", {"--count", "1", "--cpus", "1"});
  const int64_t off = setattr_job("debian-sigenforce", seed);
  const json wo = widening_of(off);
  std::printf("stock kernel, module refused: %s\n", wo.dump().c_str());
  EXPECT_FALSE(wo.value("on", false)) << wo.dump();  // JSON leaves out a false "on"
  EXPECT_TRUE(wo.value("points", json::array()).empty()) << wo.dump();
  const std::string reason = wo.value("reason", "");
  EXPECT_NE(reason.find("the kprobe module is not loaded: insmod: can't insert"), std::string::npos)
      << reason;
  EXPECT_NE(reason.find("Key was rejected by service"), std::string::npos) << reason;
  launcher_->stop(30s);

  const Result locked =
      cli({"kernel", "add", "debian-locked", kernel_image_, "--cmdline", "leapfrog_widen=off",
           "--cache-dir", LEAPFROG_VM_CACHE, "--no-prepare", "--json"});
  ASSERT_EQ(locked.exit, 0) << locked.out << locked.err;
  start_launcher("debian-locked", {"--count", "1", "--cpus", "1"});
  const json wl = widening_of(setattr_job("debian-locked", seed));
  EXPECT_FALSE(wl.value("on", false)) << wl.dump();
  EXPECT_EQ(wl.value("reason", ""), "locked off by leapfrog_widen=off on the kernel command line")
      << wl.dump();
}

}  // namespace
