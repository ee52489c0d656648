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

#include "scenarios/fs/workspace.h"
#include "tests/coordinator_fixture.h"

namespace {

using namespace leapfrog::testing;

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
  std::string run_prefix;
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
          const std::string prefix = leapfrog::fs::run_folder_prefix(pid);
          if (folders_with_prefix(prefix).empty()) continue;
          job = std::stoll(r[0][0]);
          attempt = std::stoi(r[0][1]);
          run_pid = pid;
          run_prefix = prefix;
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
  EXPECT_EQ(folders_with_prefix(run_prefix), std::vector<std::string>{})
      << "the run left its folder";

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

// The fuse-cached jobs are the violations (the kernel keeps attributes for
// its cache timeout): under the fuzzy barrier, whose rounds without a
// mutation leave lookups that only the stale state explains; a seed's
// free-running mutator would toggle the mode inside every lookup's window.
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
                         "fuse-cached", "--seeds", "2", "--duration", "1s", "--align", "fuzzy", "--wait",
                         "--json"},
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
