#pragma once
// The fixture of the kernel suites (kernel_e2e_test.cc, corpus_e2e_test.cc):
// a PostgreSQL and a coordinator started here, `leapfrog kernel build` from
// Debian's linux-source-6.1 into the shared build cache (outside the
// checkout), `leapfrog vm run` launchers, campaigns and their results.

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tests/e2e_util.h"
#include "tests/process_util.h"
#include "tests/sql_util.h"

namespace leapfrog::testing {

inline constexpr const char* kSource = "/usr/src/linux-source-6.1.tar.xz";
inline const std::string kPlanted = std::string(LEAPFROG_SOURCE_DIR) + "/tests/planted/";
inline const std::string kHarmless = kPlanted + "0000-harmless-namei-comment.patch";
inline const std::string kBug = kPlanted + "0001-namei-per-cpu-search-grant-cache-PLANTED.patch";
inline const std::string kHarmless2 = kPlanted + "0002-harmless-open-comment.patch";
// Rounds per job: on the planted kernel under TCG most rounds of
// setattr-lookup see the stale grant; on a correct kernel none may.
inline constexpr const char* kIterations = "2000";

class KernelE2E : public E2ETest {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "needs root";
    ASSERT_TRUE(stdfs::exists(kSource)) << kSource << " is missing: run deploy/install-deps.sh";
    make_test_dir();
    start_postgres();
    data_dir_ = *dir_ / "coord";
    serve_ = spawn("serve", {LEAPFROG, "serve", "--database", pg_->url(), "--listen", "127.0.0.1:0",
                             "--lease-ms", "20000", "--heartbeat-ms", "1000", "--data-dir", data_dir_,
                             "--token-file", token_file_});
    ASSERT_TRUE(wait_address(data_dir_, *serve_, 30s)) << tail_of(serve_->err_file());
    address_ = read_address(data_dir_);
    ASSERT_FALSE(address_.empty()) << tail_of(serve_->err_file());
  }

  void TearDown() override {
    if (!dir_) return;
    for (auto* l : launchers_) l->signal(SIGTERM);
    for (auto* l : launchers_) l->stop(30s);
    for (auto& p : procs_) p->stop();
    if (show_logs()) {
      print_consoles(*dir_ / "coord");
      print_logs(logs_, 5000);
    }
    release();
  }

  Result cli(std::vector<std::string> args, std::chrono::milliseconds timeout = 600s) {
    std::vector<std::string> argv = {LEAPFROG, "--coordinator", address_, "--token-file", token_file_,
                                     "--data-dir", data_dir_};
    argv.insert(argv.end(), args.begin(), args.end());
    return run_to_end(argv, logs_, timeout);
  }

  json cli_json(std::vector<std::string> args, std::chrono::milliseconds timeout = 600s) {
    args.push_back("--json");
    const Result r = cli(args, timeout);
    EXPECT_EQ(r.exit, 0) << r.out << r.err;
    if (r.exit != 0) throw std::runtime_error("leapfrog failed: " + r.err);
    return json::parse(r.out);
  }

  // `leapfrog kernel build LABEL` from Debian's source with `patches`; a cold
  // build takes minutes, a cached one a second.
  json build(const std::string& label, const std::vector<std::string>& patches,
             const std::vector<std::string>& extra = {}) {
    std::vector<std::string> args = {"kernel", "build", label, "--source", kSource, "--cache-dir",
                                     LEAPFROG_KBUILD_CACHE};
    for (const auto& p : patches) args.insert(args.end(), {"--patch", p});
    args.insert(args.end(), extra.begin(), extra.end());
    const auto started = Clock::now();
    json k = cli_json(args, 3000s);
    std::printf("kernel %s: %s, %zu patches, %.0f s (build_seconds %.0f)\n", label.c_str(),
                k.value("release", "").c_str(), k["patches"].size(),
                std::chrono::duration<double>(Clock::now() - started).count(), k.value("build_seconds", 0.0));
    return k;
  }

  // One VM with two vCPUs for `label`: the race needs the observer and the
  // mutator on different CPUs.
  void boot(const std::string& label) {
    launchers_.push_back(spawn("launcher-" + label,
                               {LEAPFROG, "--coordinator", address_, "--token-file", token_file_, "--data-dir",
                                data_dir_, "vm", "run", "--kernel", label, "--count", "1", "--cpus", "2",
                                "--cache-dir", LEAPFROG_KBUILD_CACHE}));
  }

  // A setattr-lookup campaign on tmpfs on `label`, waited for; the campaign
  // JSON. The positive controls race as they were written for (the fuzzy
  // barrier, pinned): the seed's choice of strategy has its own tests.
  json night(const std::string& label, int seeds = 1) {
    return cli_json({"campaign", "run", "--name", "planted", "--scenario", "setattr-lookup", "--fs", "tmpfs",
                     "--kernel", label, "--iterations", kIterations, "--first-seed", "7", "--seeds",
                     std::to_string(seeds), "--align", "fuzzy", "--pin", "on", "--wait"},
                    900s);
  }

  // Verdict and violation kinds of the campaign's outcomes, the error, and
  // what the run checked (for the message when a verdict is unexpected).
  Rows results(int64_t campaign) {
    return sql_once(pg_->url(),
               "SELECT o.verdict, coalesce(string_agg(DISTINCT v.kind::text, ','), ''), o.error,"
               " format('ops %s, lookups checked %s, race window hits %s, agent %s', o.ops,"
               "  o.lookups_checked, o.race_window_hits, o.agent_id) "
               "FROM outcomes o LEFT JOIN violations v ON v.job_id = o.job_id AND v.attempt = o.attempt "
               "WHERE o.campaign_id = " +
                   std::to_string(campaign) +
                   " GROUP BY o.seq, o.verdict, o.error, o.ops, o.lookups_checked, o.race_window_hits,"
                   " o.agent_id ORDER BY o.seq");
  }

  // The widening the one scenario outcome of `campaign` recorded (the
  // Outcome proto in JSON, field names as in the .proto).
  json widening_of(int64_t campaign) {
    const json outcomes = cli_json({"outcomes", "--campaign", std::to_string(campaign)});
    EXPECT_EQ(outcomes.size(), 1u) << outcomes.dump();
    if (outcomes.empty()) return json::object();
    return outcomes[0]["outcome"].value("widening", json::object());
  }

  // Every VM console the coordinator kept, concatenated.
  std::string consoles() const {
    std::string all;
    for (const auto& e : stdfs::recursive_directory_iterator(data_dir_))
      if (e.is_regular_file() && e.path().string().find("console") != std::string::npos)
        all += tail_of(e.path(), 1 << 20);
    return all;
  }

  std::string logs() const {
    std::string all;
    for (const auto* l : launchers_) all += tail_of(l->err_file(), 3000);
    return all;
  }

  std::vector<Proc*> launchers_;
  Proc* serve_ = nullptr;
  std::string data_dir_, address_;
};

}  // namespace leapfrog::testing
