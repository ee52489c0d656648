#pragma once
// The fixture of the coordinator's end-to-end fault tests
// (coordinator_e2e_test.cc, faults_e2e_test.cc): `leapfrog serve` on a
// PostgreSQL started by the test, real agents (`leapfrog-agent connect`) on
// tmpfs, the CLI, and what the database holds afterwards. Needs root, like
// the agent; LEAPFROG and LEAPFROG_AGENT name the binaries.

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "tests/e2e_util.h"
#include "tests/process_util.h"
#include "tests/sql_util.h"

namespace leapfrog::testing {

// Lease and heartbeat timing of every coordinator here: an expired lease
// requeues its job within about two seconds.
inline const char* const kLeaseMs = "1500";
inline const char* const kHeartbeatMs = "300";

// As try_sql, retrying for a while (PostgreSQL may be restarting); throws if
// the query never succeeds.
inline Rows sql(const std::string& url, const std::string& query) {
  std::string error;
  std::optional<Rows> rows;
  if (!poll_until([&] { return (rows = try_sql(url, query, &error)).has_value(); }, 30s, 50ms))
    throw std::runtime_error("query failed: " + query + ": " + error);
  return *rows;
}

inline int64_t sql_int(const std::string& url, const std::string& query) {
  const Rows rows = sql(url, query);
  if (rows.empty() || rows[0].empty() || rows[0][0].empty())
    throw std::runtime_error("query returned no value: " + query);
  return std::stoll(rows[0][0]);
}

// The folders under /tmp whose path starts with `prefix`: a run's work
// folders, given fs::run_folder_prefix of its process (taken while it lives;
// the start time in it tells the run's folders from those of a dead process
// that had the same pid).
inline std::vector<std::string> folders_with_prefix(const std::string& prefix) {
  std::vector<std::string> out;
  if (prefix.empty()) return out;
  for (const auto& e : stdfs::directory_iterator("/tmp"))
    if (e.path().string().rfind(prefix, 0) == 0) out.push_back(e.path());
  return out;
}

// The (job, attempt) pairs an agent started, from its log.
inline std::vector<std::pair<int64_t, int>> jobs_started(const std::string& log) {
  std::vector<std::pair<int64_t, int>> out;
  static const std::regex re(R"(job\.start job=(\d+) attempt=(\d+))");
  const std::string text = slurp(log);
  for (auto it = std::sregex_iterator(text.begin(), text.end(), re); it != std::sregex_iterator();
       ++it)
    out.emplace_back(std::stoll((*it)[1]), std::stoi((*it)[2]));
  return out;
}

// The (job, attempt) pairs an agent finished (its outcome is then spooled).
inline std::set<std::pair<int64_t, int>> jobs_finished(const std::string& log) {
  std::set<std::pair<int64_t, int>> out;
  static const std::regex re(R"(job\.done job=(\d+) attempt=(\d+))");
  const std::string text = slurp(log);
  for (auto it = std::sregex_iterator(text.begin(), text.end(), re); it != std::sregex_iterator();
       ++it)
    out.emplace(std::stoll((*it)[1]), std::stoi((*it)[2]));
  return out;
}

// One line on stderr starting with "error: ", exit 2, and `want` in it.
inline void expect_cli_error(const Result& r, const std::string& want) {
  EXPECT_EQ(r.exit, 2) << r.out << r.err;
  EXPECT_EQ(r.err.rfind("error: ", 0), 0u) << r.err;
  EXPECT_NE(r.err.find(want), std::string::npos) << "want \"" << want << "\" in: " << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
}

struct Coordinator {
  Proc* proc = nullptr;
  std::string data_dir;
  std::string address;  // 127.0.0.1:PORT
  int port = 0;
};

class CoordinatorE2E : public E2ETest {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "needs root";
    make_test_dir();
  }

  void TearDown() override {
    if (!dir_) return;
    // Agents first (they hand their jobs back), then coordinators, then PostgreSQL.
    for (bool agents : {true, false}) {
      for (auto& p : procs_)
        if (is_agent(p.get()) == agents) p->signal(SIGTERM);
      for (auto it = procs_.rbegin(); it != procs_.rend(); ++it)
        if (is_agent(it->get()) == agents) (*it)->stop();
    }
    // LEAPFROG_E2E_LOGS=1 shows the logs of passing tests too.
    if (show_logs()) print_logs(logs_, 6000);
    // LEAPFROG_E2E_KEEP=DIR keeps every log under DIR/<test name>.
    if (const char* keep = std::getenv("LEAPFROG_E2E_KEEP")) {
      const std::string to =
          std::string(keep) + "/" + ::testing::UnitTest::GetInstance()->current_test_info()->name();
      std::error_code ec;
      stdfs::remove_all(to, ec);
      stdfs::create_directories(to, ec);
      stdfs::copy(logs_, to, stdfs::copy_options::recursive, ec);
    }
    release();
  }

  // The database the coordinators here use: the test's PostgreSQL, or the
  // embedded one of a `serve`/`up` without --database (use_embedded_db).
  std::string url() const { return db_url_.empty() ? pg_->url() : db_url_; }
  // Reads the URL of the embedded PostgreSQL that a coordinator keeps in
  // `data_dir`/postgres (leapfrog.port and leapfrog.password).
  void use_embedded_db(const std::string& data_dir) {
    auto first_line = [](const std::string& path) {
      std::string s = slurp(path);
      return s.substr(0, s.find('\n'));
    };
    db_url_ = "postgresql://leapfrog:" + first_line(data_dir + "/postgres/leapfrog.password") +
              "@127.0.0.1:" + first_line(data_dir + "/postgres/leapfrog.port") + "/leapfrog";
  }

  // A child as E2ETest::spawn; TearDown stops agents before the others.
  Proc* spawn(const std::string& name, std::vector<std::string> argv, bool agent) {
    Proc* p = E2ETest::spawn(name, std::move(argv));
    if (agent) agents_.insert(p);
    return p;
  }

  // `leapfrog serve` on the test's database; port 0 picks a free one.
  Coordinator start_serve(const std::string& name, int port = 0, const std::string& data_dir = "",
                          const std::string& lease_ms = kLeaseMs) {
    Coordinator c;
    c.data_dir = data_dir.empty() ? *dir_ / name : data_dir;
    std::remove((c.data_dir + "/address").c_str());
    c.proc = spawn(name,
                   {LEAPFROG, "serve", "--database", url(), "--listen",
                    "127.0.0.1:" + std::to_string(port), "--lease-ms", lease_ms, "--heartbeat-ms",
                    kHeartbeatMs, "--data-dir", c.data_dir, "--token-file", token_file_},
                   false);
    wait_address(c.data_dir, *c.proc, 30s);
    const std::string a = read_address(c.data_dir);
    if (a.empty())
      throw std::runtime_error("coordinator " + name +
                               " wrote no address: " + tail_of(c.proc->err_file()));
    c.address = a;
    c.port = std::stoi(a.substr(a.rfind(':') + 1));
    if (port != 0 && c.port != port)
      throw std::runtime_error("coordinator " + name + " listens on " + a);
    return c;
  }

  Proc* start_agent(const std::string& name, const std::string& coordinator) {
    return spawn(name,
                 {LEAPFROG_AGENT, "connect", "--coordinator", coordinator, "--token-file",
                  token_file_, "--name", name, "--spool", spool_of(name), "--fs", "tmpfs"},
                 true);
  }
  std::string spool_of(const std::string& agent) const { return *dir_ / ("spool-" + agent); }
  std::string log_of(const std::string& name) const { return logs_ + "/" + name + ".out"; }

  // The `leapfrog` CLI against `address` with the test's token.
  Result cli(const std::string& address, std::vector<std::string> args) {
    std::vector<std::string> argv = {LEAPFROG, "--coordinator", address, "--token-file",
                                     token_file_};
    argv.insert(argv.end(), args.begin(), args.end());
    return run_to_end(argv, logs_, 300s);
  }

  // Queues `jobs` setattr-lookup jobs on tmpfs; returns the campaign id.
  int64_t queue_campaign(const std::string& address, int jobs, const std::string& duration) {
    Result r =
        cli(address, {"campaign", "run", "--name", "e2e", "--scenario", "setattr-lookup", "--fs",
                      "tmpfs", "--seeds", std::to_string(jobs), "--duration", duration, "--json"});
    if (r.exit != 0) throw std::runtime_error("campaign run failed: " + r.out + r.err);
    const json j = json::parse(r.out);
    if (j.at("jobs").get<int>() != jobs)
      throw std::runtime_error("campaign has the wrong job count: " + r.out);
    return j.at("campaign").get<int64_t>();
  }

  int64_t outcome_count(int64_t campaign) {
    return sql_int(url(),
                   "SELECT count(*) FROM outcomes WHERE campaign_id = " + std::to_string(campaign));
  }

  // Waits until `n` outcomes of the campaign are stored.
  void wait_outcomes(int64_t campaign, int64_t n, std::chrono::milliseconds timeout = 120s) {
    ASSERT_TRUE(poll_until([&] { return outcome_count(campaign) >= n; }, timeout, 50ms))
        << "campaign " << campaign << " has " << outcome_count(campaign) << " outcomes, want " << n;
  }

  // Waits until every job of the campaign is done.
  void wait_done(int64_t campaign, std::chrono::milliseconds timeout = 180s) {
    const std::string q = "SELECT count(*) FROM jobs WHERE state <> 'done' AND campaign_id = " +
                          std::to_string(campaign);
    ASSERT_TRUE(poll_until([&] { return sql_int(url(), q) == 0; }, timeout, 100ms))
        << sql_int(url(), q) << " jobs of campaign " << campaign << " not done";
  }

  // Every job done and passed, with exactly one outcome, of its last attempt.
  void expect_one_outcome_per_job(int64_t campaign, int jobs) {
    const std::string c = std::to_string(campaign);
    const Rows counts = sql(
        url(), "SELECT count(*), count(DISTINCT job_id) FROM outcomes WHERE campaign_id = " + c);
    EXPECT_EQ(counts[0][0], std::to_string(jobs)) << "outcomes";
    EXPECT_EQ(counts[0][1], std::to_string(jobs)) << "jobs with an outcome";
    EXPECT_EQ(
        sql_int(url(), "SELECT count(*) FROM jobs WHERE state = 'done' AND campaign_id = " + c),
        jobs);
    EXPECT_EQ(sql_int(url(),
                      "SELECT count(*) FROM outcomes o JOIN jobs j ON j.id = o.job_id"
                      " WHERE o.attempt <> j.attempt AND o.campaign_id = " +
                          c),
              0)
        << "outcome of a superseded attempt";
    // The reason of an infra failure, or the error the agent reported.
    const Rows not_pass =
        sql(url(),
            "SELECT j.id, j.attempt, j.verdict, coalesce(j.reason, ''), coalesce(o.error, '')"
            " FROM jobs j LEFT JOIN outcomes o ON o.job_id = j.id AND o.attempt = j.attempt"
            " WHERE j.verdict IS DISTINCT FROM 1 AND j.campaign_id = " +
                c + " ORDER BY j.id");
    for (const auto& r : not_pass)
      ADD_FAILURE() << "job " << r[0] << " attempt " << r[1] << " verdict " << r[2] << ": " << r[3]
                    << r[4];
  }

  // Every outcome these agents finished is stored: none was lost or dropped as
  // superseded (a late report after its lease expired).
  void expect_all_reported(int64_t campaign, const std::vector<std::string>& agents) {
    std::set<std::pair<int64_t, int>> stored;
    for (const auto& r : sql(url(), "SELECT job_id, attempt FROM outcomes WHERE campaign_id = " +
                                        std::to_string(campaign)))
      stored.emplace(std::stoll(r[0]), std::stoi(r[1]));
    for (const auto& agent : agents) {
      const auto done = jobs_finished(log_of(agent));
      for (const auto& [job, attempt] : done)
        EXPECT_TRUE(stored.count({job, attempt})) << agent << " finished job " << job << " attempt "
                                                  << attempt << " but its outcome was not stored";
    }
  }

  // Outcomes per agent name.
  std::map<std::string, int> outcomes_by_agent(int64_t campaign, int64_t after_seq = 0) {
    std::map<std::string, int> out;
    for (const auto& r :
         sql(url(),
             "SELECT a.name, count(*) FROM outcomes o JOIN agents a ON a.id = o.agent_id"
             " WHERE o.seq > " +
                 std::to_string(after_seq) + " AND o.campaign_id = " + std::to_string(campaign) +
                 " GROUP BY a.name"))
      out[r[0]] = std::stoi(r[1]);
    return out;
  }

  // Waits until the spool folder of `agent` holds nothing.
  void expect_spool_empty(const std::string& agent) {
    auto entries = [&] {
      std::string names;
      std::error_code ec;
      for (const auto& e : stdfs::directory_iterator(spool_of(agent), ec))
        names += e.path().filename().string() + " ";
      return names;
    };
    EXPECT_TRUE(poll_until([&] { return entries().empty(); }, 30s))
        << agent << " spool holds: " << entries();
  }

  bool is_agent(const Proc* p) const { return agents_.count(p) > 0; }

  std::set<const Proc*> agents_;  // the agents among procs_: stopped first
  std::string db_url_;            // use_embedded_db
};

}  // namespace leapfrog::testing
