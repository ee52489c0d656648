// End-to-end fault tests of the coordinator (`leapfrog serve`, `leapfrog up`,
// the CLI) with real agents (`leapfrog-agent connect`), a real PostgreSQL
// (embedded, started here) and real jobs on tmpfs: agents and coordinators
// are killed outright, PostgreSQL restarts under load, and every job must
// still end with exactly one outcome. Needs root, like the agent.

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <ctime>
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

namespace {

using namespace leapfrog::testing;

// Lease and heartbeat timing of every coordinator here: an expired lease
// requeues its job within about two seconds.
const char* const kLeaseMs = "1500";
const char* const kHeartbeatMs = "300";


// As try_sql, retrying for a while (PostgreSQL may be restarting); throws if
// the query never succeeds.
Rows sql(const std::string& url, const std::string& query) {
  std::string error;
  std::optional<Rows> rows;
  if (!poll_until([&] { return (rows = try_sql(url, query, &error)).has_value(); }, 30s, 50ms))
    throw std::runtime_error("query failed: " + query + ": " + error);
  return *rows;
}

int64_t sql_int(const std::string& url, const std::string& query) {
  const Rows rows = sql(url, query);
  if (rows.empty() || rows[0].empty() || rows[0][0].empty())
    throw std::runtime_error("query returned no value: " + query);
  return std::stoll(rows[0][0]);
}

// /tmp/leapfrog-run-<pid>-* folders of one `leapfrog-agent run` process.
std::vector<std::string> run_folders_of(pid_t pid) {
  std::vector<std::string> out;
  const std::string prefix = "leapfrog-run-" + std::to_string(pid) + "-";
  for (const auto& e : stdfs::directory_iterator("/tmp"))
    if (e.path().filename().string().rfind(prefix, 0) == 0) out.push_back(e.path());
  return out;
}

// The (job, attempt) pairs an agent started, from its log.
std::vector<std::pair<int64_t, int>> jobs_started(const std::string& log) {
  std::vector<std::pair<int64_t, int>> out;
  static const std::regex re(R"(job\.start job=(\d+) attempt=(\d+))");
  const std::string text = slurp(log);
  for (auto it = std::sregex_iterator(text.begin(), text.end(), re); it != std::sregex_iterator();
       ++it)
    out.emplace_back(std::stoll((*it)[1]), std::stoi((*it)[2]));
  return out;
}

// The (job, attempt) pairs an agent finished (its outcome is then spooled).
std::set<std::pair<int64_t, int>> jobs_finished(const std::string& log) {
  std::set<std::pair<int64_t, int>> out;
  static const std::regex re(R"(job\.done job=(\d+) attempt=(\d+))");
  const std::string text = slurp(log);
  for (auto it = std::sregex_iterator(text.begin(), text.end(), re); it != std::sregex_iterator();
       ++it)
    out.emplace(std::stoll((*it)[1]), std::stoi((*it)[2]));
  return out;
}

// One line on stderr starting with "error: ", exit 2, and `want` in it.
void expect_cli_error(const Result& r, const std::string& want) {
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

  std::string url() const { return pg_->url(); }

  // A child as E2ETest::spawn; TearDown stops agents before the others.
  Proc* spawn(const std::string& name, std::vector<std::string> argv, bool agent) {
    Proc* p = E2ETest::spawn(name, std::move(argv));
    if (agent) agents_.insert(p);
    return p;
  }

  // `leapfrog serve` on the test's database; port 0 picks a free one.
  Coordinator start_serve(const std::string& name, int port = 0, const std::string& data_dir = "") {
    Coordinator c;
    c.data_dir = data_dir.empty() ? *dir_ / name : data_dir;
    std::remove((c.data_dir + "/address").c_str());
    c.proc = spawn(name,
                   {LEAPFROG, "serve", "--database", url(), "--listen",
                    "127.0.0.1:" + std::to_string(port), "--lease-ms", kLeaseMs, "--heartbeat-ms",
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
};

// ---- 1. many jobs, two agents ----------------------------------------------

TEST_F(CoordinatorE2E, FiftyJobsOnTwoAgentsGetOneOutcomeEach) {
  start_postgres();
  const Coordinator c = start_serve("serve");
  start_agent("agent-a", c.address);
  start_agent("agent-b", c.address);
  const int64_t campaign = queue_campaign(c.address, 50, "100ms");
  wait_done(campaign);
  expect_one_outcome_per_job(campaign, 50);
  const auto by_agent = outcomes_by_agent(campaign);
  EXPECT_GT(by_agent.count("agent-a") ? by_agent.at("agent-a") : 0, 0);
  EXPECT_GT(by_agent.count("agent-b") ? by_agent.at("agent-b") : 0, 0);
  EXPECT_EQ(sql_int(url(), "SELECT max(attempt) FROM jobs WHERE campaign_id = " +
                               std::to_string(campaign)),
            1)
      << "no lease should have expired";
  // The CLI agrees with the database.
  Result show = cli(c.address, {"campaign", "show", std::to_string(campaign), "--json"});
  ASSERT_EQ(show.exit, 0) << show.err;
  const json j = json::parse(show.out);
  EXPECT_EQ(j["state"], "CAMPAIGN_STATE_DONE");
  EXPECT_EQ(j["jobs_detail"].size(), 50u);
  expect_all_reported(campaign, {"agent-a", "agent-b"});
  expect_spool_empty("agent-a");
  expect_spool_empty("agent-b");
}

// ---- 2. an agent killed in the middle of a job -----------------------------

TEST_F(CoordinatorE2E, AgentKilledMidJobIsRequeuedAndItsRunDies) {
  start_postgres();
  const Coordinator c = start_serve("serve");
  Proc* victim = start_agent("agent-a", c.address);
  start_agent("agent-b", c.address);
  // Jobs long enough that a run left alone would outlive the deadline below.
  const int64_t campaign = queue_campaign(c.address, 2, "6s");
  const std::string campaign_s = std::to_string(campaign);

  // Wait until agent-a holds a lease and its run has set up its sandbox.
  int64_t job = 0;
  int attempt = 0;
  pid_t run_pid = 0;
  ASSERT_TRUE(poll_until(
      [&] {
        const Rows r = sql(url(),
                           "SELECT j.id, j.attempt FROM jobs j JOIN agents a ON a.id = j.agent_id"
                           " WHERE j.state = 'leased' AND a.name = 'agent-a' AND j.campaign_id = " +
                               campaign_s);
        if (r.empty()) return false;
        for (const auto& [pid, ppid] : live_processes()) {
          if (ppid != victim->pid() ||
              cmdline_of(pid).find("--die-with-parent") == std::string::npos)
            continue;
          if (run_folders_of(pid).empty()) continue;
          job = std::stoll(r[0][0]);
          attempt = std::stoi(r[0][1]);
          run_pid = pid;
          return true;
        }
        return false;
      },
      60s, 10ms))
      << "agent-a never ran a job";
  ASSERT_EQ(attempt, 1);

  // The run and everything under it, watched through pidfds.
  std::vector<pid_t> tree = descendants_of(run_pid);
  tree.push_back(run_pid);
  std::vector<int> pidfds;
  for (pid_t p : tree)
    if (int fd = pidfd_open(p); fd >= 0) pidfds.push_back(fd);
  ASSERT_FALSE(pidfds.empty());

  victim->kill9();

  // The run stops at once (it would otherwise run its 6 s), cleaning up.
  const auto deadline = Clock::now() + 4s;
  for (size_t i = 0; i < pidfds.size(); ++i) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    EXPECT_TRUE(pidfd_wait(pidfds[i], std::max(left, 0ms)))
        << "a process of the killed agent's run lingers: " << tree[i] << " " << cmdline_of(tree[i]);
    close(pidfds[i]);
  }
  EXPECT_TRUE(run_folders_of(run_pid).empty()) << "the run left its folder";

  wait_done(campaign);
  expect_one_outcome_per_job(campaign, 2);
  const std::string job_s = std::to_string(job);
  const Rows r =
      sql(url(),
          "SELECT j.attempt, a.name, o.attempt FROM jobs j JOIN outcomes o ON o.job_id = j.id"
          " JOIN agents a ON a.id = o.agent_id WHERE j.id = " +
              job_s);
  ASSERT_EQ(r.size(), 1u) << "job " << job << " has " << r.size() << " outcomes";
  EXPECT_EQ(r[0][0], "2") << "job " << job << " should have been leased a second time";
  EXPECT_EQ(r[0][1], "agent-b");
  EXPECT_EQ(r[0][2], "2");
  // agent-a reported every job it started except the one it was killed in.
  const auto by_agent = outcomes_by_agent(campaign);
  EXPECT_EQ(by_agent.count("agent-a") ? by_agent.at("agent-a") : 0,
            static_cast<int>(jobs_started(log_of("agent-a")).size()) - 1);
  expect_all_reported(campaign, {"agent-a", "agent-b"});
  expect_spool_empty("agent-b");
}

// ---- 3. the coordinator killed and restarted -------------------------------

TEST_F(CoordinatorE2E, CoordinatorRestartMidCampaign) {
  start_postgres();
  const Coordinator first = start_serve("serve-1");
  start_agent("agent-a", first.address);
  start_agent("agent-b", first.address);
  const int jobs = 30;
  const int64_t campaign = queue_campaign(first.address, jobs, "200ms");
  wait_outcomes(campaign, 5);

  auto report_errors = [&] {
    size_t n = 0;
    for (const char* agent : {"agent-a", "agent-b"}) {
      const std::string log = slurp(log_of(agent));
      for (size_t at = log.find("rpc=report"); at != std::string::npos;
           at = log.find("rpc=report", at + 1))
        ++n;
    }
    return n;
  };
  const size_t errors_before = report_errors();
  first.proc->kill9();
  const int64_t at_kill = outcome_count(campaign);
  EXPECT_LT(at_kill, jobs) << "the campaign finished before the coordinator was killed";
  // Down until an agent finished a job it could not report (it is spooled).
  EXPECT_TRUE(poll_until([&] { return report_errors() > errors_before; }, 10s))
      << "no agent noticed the outage";
  const Coordinator second = start_serve("serve-2", first.port, first.data_dir);
  EXPECT_EQ(second.address, first.address);

  wait_done(campaign);
  expect_one_outcome_per_job(campaign, jobs);
  // Outcomes finished while the coordinator was down were reported to the new one.
  expect_all_reported(campaign, {"agent-a", "agent-b"});
  expect_spool_empty("agent-a");
  expect_spool_empty("agent-b");
}

// ---- 4. PostgreSQL restarted under load ------------------------------------

TEST_F(CoordinatorE2E, PostgresRestartsUnderLoad) {
  start_postgres();
  const Coordinator c = start_serve("serve");
  start_agent("agent-a", c.address);
  start_agent("agent-b", c.address);
  const int jobs = 40;
  const int64_t campaign = queue_campaign(c.address, jobs, "200ms");

  wait_outcomes(campaign, 6);
  pg_->restart();
  wait_outcomes(campaign, 14);
  pg_->restart();
  // A longer outage: down until an agent could not report an outcome (it
  // stays in the agent's spool), then up again.
  wait_outcomes(campaign, 22);
  pg_->stop();
  const bool report_failed = poll_until(
      [&] {
        for (const char* agent : {"agent-a", "agent-b"})
          if (slurp(log_of(agent)).find("rpc_error rpc=report") != std::string::npos) return true;
        return false;
      },
      10s);
  pg_->start(*dir_ / "pg");
  EXPECT_TRUE(report_failed) << "no agent noticed the database outage";
  EXPECT_LT(outcome_count(campaign), jobs) << "the campaign finished before the outage";

  wait_done(campaign);
  expect_one_outcome_per_job(campaign, jobs);
  expect_all_reported(campaign, {"agent-a", "agent-b"});
  expect_spool_empty("agent-a");
  expect_spool_empty("agent-b");
  EXPECT_FALSE(c.proc->exited()) << "the coordinator died with the database";
}

// ---- 5. two replicas, one killed --------------------------------------------

TEST_F(CoordinatorE2E, TwoReplicasOneKilled) {
  start_postgres();
  const Coordinator r1 = start_serve("replica-1");
  const Coordinator r2 = start_serve("replica-2");
  start_agent("agent-1", r1.address);
  start_agent("agent-2", r2.address);
  start_agent("agent-both", "ipv4:" + r1.address + "," + r2.address);
  const int jobs = 40;
  const int64_t campaign = queue_campaign(r2.address, jobs, "200ms");
  wait_outcomes(campaign, 8);

  r1.proc->kill9();
  const int64_t seq_at_kill = sql_int(url(), "SELECT coalesce(max(seq), 0) FROM outcomes");
  EXPECT_LT(outcome_count(campaign), jobs) << "the campaign finished before the replica was killed";

  wait_done(campaign);
  expect_one_outcome_per_job(campaign, jobs);

  // Only agent-1 (which knew replica 1 alone) may have lost an outcome.
  expect_all_reported(campaign, {"agent-2", "agent-both"});
  // The agent that knew both replicas carried on through the second.
  const auto after = outcomes_by_agent(campaign, seq_at_kill);
  EXPECT_GT(after.count("agent-both") ? after.at("agent-both") : 0, 0)
      << "agent-both did not fail over";

  // No lease was handed out twice: each (job, attempt) went to one agent, and
  // the outcome came from the agent holding that lease.
  std::map<std::pair<int64_t, int>, std::string> holder;
  for (const std::string agent : {"agent-1", "agent-2", "agent-both"}) {
    for (const auto& key : jobs_started(log_of(agent))) {
      auto [it, fresh] = holder.emplace(key, agent);
      EXPECT_TRUE(fresh) << "job " << key.first << " attempt " << key.second << " leased to "
                         << it->second << " and " << agent;
    }
  }
  for (const auto& r : sql(url(),
                           "SELECT o.job_id, o.attempt, a.name FROM outcomes o JOIN agents a"
                           " ON a.id = o.agent_id WHERE o.campaign_id = " +
                               std::to_string(campaign))) {
    const auto it = holder.find({std::stoll(r[0]), std::stoi(r[1])});
    ASSERT_NE(it, holder.end()) << "job " << r[0] << " attempt " << r[1] << " was never started";
    EXPECT_EQ(it->second, r[2]) << "job " << r[0] << " attempt " << r[1];
  }
  EXPECT_FALSE(r2.proc->exited());
}

// ---- 6. leapfrog up ------------------------------------------------------------

TEST_F(CoordinatorE2E, UpRunsCampaignsAndShutsDownOnSigterm) {
  const std::string data = *dir_ / "up";
  Proc* up = spawn("up", {LEAPFROG, "up", "--agents", "2", "--data-dir", data}, false);
  ASSERT_TRUE(poll_until(
      [&] {
        return slurp(up->out_file()).find("token file:") != std::string::npos || up->exited();
      },
      60s))
      << tail_of(up->err_file());
  ASSERT_FALSE(up->exited()) << tail_of(up->err_file());
  const std::string banner = slurp(up->out_file());
  std::smatch m;
  ASSERT_TRUE(std::regex_search(banner, m, std::regex(R"(listening on (127\.0\.0\.1:\d+))")))
      << banner;
  const std::string address = m[1];
  std::string address_file = slurp(data + "/address");
  EXPECT_EQ(address_file, address + "\n");
  EXPECT_NE(banner.find("token file: " + data + "/token"), std::string::npos) << banner;

  Result r = run_to_end({LEAPFROG, "--data-dir", data, "campaign", "run", "--scenario",
                         "setattr-lookup", "--scenario", "rename-lookup", "--fs", "tmpfs", "--fs",
                         "fuse-cached", "--seeds", "2", "--duration", "300ms", "--wait", "--json"},
                        logs_, 300s);
  ASSERT_EQ(r.exit, 0) << r.out << r.err;
  ASSERT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 1) << "want one JSON line: " << r.out;
  const json summary = json::parse(r.out);
  for (const char* key : {"campaign", "jobs", "outcomes", "violations", "by_verdict"})
    EXPECT_TRUE(summary.contains(key)) << key << " missing: " << r.out;
  EXPECT_EQ(summary["jobs"], 8);
  EXPECT_EQ(summary["outcomes"], 8);
  EXPECT_GT(summary["violations"].get<int64_t>(), 0);
  EXPECT_EQ(summary["by_verdict"], json({{"pass", 4}, {"violation", 4}})) << r.out;

  const std::string campaign = std::to_string(summary["campaign"].get<int64_t>());
  Result failed = run_to_end(
      {LEAPFROG, "--data-dir", data, "outcomes", "--campaign", campaign, "--failed", "--json"},
      logs_, 60s);
  ASSERT_EQ(failed.exit, 0) << failed.err;
  const json list = json::parse(failed.out);
  ASSERT_TRUE(list.is_array());
  EXPECT_EQ(list.size(), 4u) << failed.out.substr(0, 3000);
  for (const auto& o : list) {
    EXPECT_EQ(o["outcome"]["verdict"], "VERDICT_VIOLATION") << o.dump();
    EXPECT_EQ(o["spec"]["fs"], "fuse-cached") << o.dump();
    EXPECT_EQ(o["campaign_id"], campaign) << o.dump();
  }

  up->signal(SIGTERM);
  const auto code = up->wait(30s);
  ASSERT_TRUE(code.has_value()) << "leapfrog up did not stop within 30 s";
  EXPECT_EQ(*code, 0) << tail_of(up->err_file());
  EXPECT_FALSE(stdfs::exists(data + "/address"));
  std::vector<pid_t> left;
  EXPECT_TRUE(poll_until([&] { return (left = processes_using(data)).empty(); }, 5s));
  for (pid_t p : left) ADD_FAILURE() << "left running: " << p << " " << cmdline_of(p);
}

// ---- 7. bad input ----------------------------------------------------------------

TEST_F(CoordinatorE2E, CliBadInputGetsOneLineAndExit2) {
  start_postgres();
  const Coordinator c = start_serve("serve");
  ASSERT_EQ(cli(c.address, {"campaign", "list"}).exit, 0);

  const std::string wrong = *dir_ / "wrong-token";
  std::ofstream(wrong) << random_token() << "\n";
  expect_cli_error(
      run_to_end({LEAPFROG, "--coordinator", c.address, "--token-file", wrong, "campaign", "list"},
                 logs_),
      "wrong token");
  expect_cli_error(run_to_end({LEAPFROG, "--coordinator", c.address, "--token-file",
                               *dir_ / "no-such-token", "campaign", "list"},
                              logs_),
                   "cannot read \"" + *dir_ / "no-such-token" + "\"");
  expect_cli_error(cli(c.address, {"campaign", "run", "--scenario", "no-such-scenario"}),
                   "unknown scenario \"no-such-scenario\"");
  expect_cli_error(
      cli(c.address, {"campaign", "run", "--scenario", "setattr-lookup", "--param", "depth=99"}),
      "out of limits, want [3, 8]");
  expect_cli_error(cli(c.address, {"schedule", "add", "--name", "n", "--cron", "99 * * * *",
                                   "--scenario", "setattr-lookup"}),
                   "bad cron minute field \"99\"");

  // A port bound but not listening: connections are refused.
  const int s = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  socklen_t len = sizeof a;
  getsockname(s, reinterpret_cast<sockaddr*>(&a), &len);
  const std::string dead = "127.0.0.1:" + std::to_string(ntohs(a.sin_port));
  const auto t0 = Clock::now();
  expect_cli_error(cli(dead, {"campaign", "list"}), "coordinator at " + dead + " unavailable");
  EXPECT_LT(Clock::now() - t0, 20s) << "an unreachable coordinator should fail fast";
  close(s);

  // Nothing was created by the refused commands.
  EXPECT_EQ(sql_int(url(), "SELECT count(*) FROM campaigns"), 0);
  EXPECT_EQ(sql_int(url(), "SELECT count(*) FROM schedules"), 0);
}

// ---- 8. schedules through the CLI ---------------------------------------------

TEST_F(CoordinatorE2E, SchedulesAddListDisableRemove) {
  start_postgres();
  const Coordinator c = start_serve("serve");

  Result add =
      cli(c.address, {"schedule", "add", "--name", "nightly", "--cron", "0 2 * * *", "--scenario",
                      "setattr-lookup", "--fs", "tmpfs", "--seeds", "3", "--duration", "1s"});
  ASSERT_EQ(add.exit, 0) << add.err;
  // The next 02:00 UTC after now.
  const auto now = std::chrono::floor<std::chrono::seconds>(std::chrono::system_clock::now());
  auto next = std::chrono::floor<std::chrono::days>(now) + std::chrono::hours(2);
  if (next <= now) next += std::chrono::days(1);
  const time_t next_t = std::chrono::system_clock::to_time_t(next);
  char want[64];
  std::strftime(want, sizeof want, "next run %Y-%m-%d 02:00:00 UTC", std::gmtime(&next_t));
  EXPECT_NE(add.out.find(want), std::string::npos) << "want \"" << want << "\" in: " << add.out;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(add.out, m, std::regex(R"(schedule (\d+) "nightly")"))) << add.out;
  const std::string id = m[1];

  auto list = [&] {
    Result r = cli(c.address, {"schedule", "list", "--json"});
    EXPECT_EQ(r.exit, 0) << r.err;
    return json::parse(r.out);
  };
  json l = list();
  ASSERT_EQ(l.size(), 1u) << l.dump();
  EXPECT_EQ(l[0]["id"], id);
  EXPECT_EQ(l[0]["name"], "nightly");
  EXPECT_EQ(l[0]["cron"], "0 2 * * *");
  EXPECT_EQ(l[0].value("enabled", false), true);
  EXPECT_EQ(l[0]["campaign"]["seeds"], 3) << l.dump();
  Result text = cli(c.address, {"schedule", "list"});
  EXPECT_NE(text.out.find("nightly"), std::string::npos) << text.out;

  Result disable = cli(c.address, {"schedule", "disable", id});
  ASSERT_EQ(disable.exit, 0) << disable.err;
  EXPECT_EQ(disable.out, "schedule " + id + " disabled\n");
  l = list();
  ASSERT_EQ(l.size(), 1u);
  EXPECT_EQ(l[0].value("enabled", false), false) << l.dump();
  EXPECT_EQ(sql_int(url(), "SELECT count(*) FROM schedules WHERE enabled"), 0);

  Result rm = cli(c.address, {"schedule", "rm", id});
  ASSERT_EQ(rm.exit, 0) << rm.err;
  EXPECT_EQ(rm.out, "schedule " + id + " removed\n");
  EXPECT_TRUE(list().empty());
  expect_cli_error(cli(c.address, {"schedule", "rm", id}), "no schedule \"" + id + "\"");
  expect_cli_error(cli(c.address, {"schedule", "disable", "12345"}), "no schedule \"12345\"");
}

}  // namespace
