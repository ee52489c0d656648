// End-to-end triage: a real coordinator (`leapfrog serve` on an embedded
// PostgreSQL), real agents and real runs. Kernel labels are stood in by
// agents whose runs really differ: k1 and k2 run the FUSE jobs on
// fuse-direct (per-step correct: clean), k3 to k5 on fuse-cached (the kernel
// grants on cached permissions: stale). Through the CLI: two nights give one
// issue with count 2, replay measures 0 on k1 and > 0 on k4, bisect finds
// k3, minimize yields a spec and a C reproducer that compiles with `cc` and
// prints FAIL on fuse-cached and PASS on fuse-direct, and a fixed issue
// that fails again reopens as a regression. Needs root (mounts, FUSE).

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "scenarios/fs/workspace.h"
#include "tests/e2e_util.h"
#include "tests/process_util.h"

namespace {

using namespace leapfrog::testing;

// Rounds per run: a run takes a few tenths of a second on fuse-cached.
const char* const kIterations = "40";

class TriageE2E : public E2ETest {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "needs root";
    make_test_dir();
    start_postgres();
    start_coordinator("127.0.0.1:0");
    ASSERT_FALSE(address_.empty());
    for (int k = 1; k <= 5; ++k) {
      const std::string name = "k" + std::to_string(k);
      std::vector<std::string> argv = {LEAPFROG_AGENT, "connect",       "--coordinator",
                                       address_,       "--token-file",  token_file_,
                                       "--name",       "agent-" + name, "--kernel-label",
                                       name,           "--spool",       *dir_ / ("spool-" + name),
                                       "--fs",         "fuse-cached"};
      if (k <= 2) argv.insert(argv.end(), {"--fs-map", "fuse-cached=fuse-direct"});
      agents_.push_back(spawn("agent-" + name, argv));
    }
  }

  void TearDown() override {
    if (!dir_) return;
    for (auto* a : agents_) a->signal(SIGTERM);
    for (auto* a : agents_) a->stop();
    for (auto& p : procs_) p->stop();
    if (HasFailure()) print_logs(logs_, 5000);
    release();
  }

  // `leapfrog serve` on the test's database, listening on `listen`.
  void start_coordinator(const std::string& listen) {
    const std::string data = *dir_ / "coord";
    std::remove((data + "/address").c_str());
    coordinator_ = spawn("coordinator-" + std::to_string(++coordinators_),
                         {LEAPFROG, "serve", "--database", pg_->url(), "--listen", listen,
                          "--data-dir", data, "--token-file", token_file_});
    ASSERT_TRUE(wait_address(data, *coordinator_, 30s));
    address_ = read_address(data);
    ASSERT_FALSE(address_.empty()) << tail_of(coordinator_->err_file());
  }

  Result cli(std::vector<std::string> args) {
    std::vector<std::string> argv = {LEAPFROG, "--coordinator", address_, "--token-file",
                                     token_file_};
    argv.insert(argv.end(), args.begin(), args.end());
    return run_to_end(argv, logs_, 600s);
  }

  json cli_json(std::vector<std::string> args) {
    args.push_back("--json");
    const Result r = cli(args);
    EXPECT_EQ(r.exit, 0) << r.out << r.err;
    if (r.exit != 0) throw std::runtime_error("leapfrog failed: " + r.err);
    return json::parse(r.out);
  }

  // A "night": one setattr-lookup job on fuse-cached on `kernel`, waited for.
  void night(const std::string& kernel) {
    const json c = cli_json({"campaign", "run", "--name", "nightly", "--scenario", "setattr-lookup",
                             "--fs", "fuse-cached", "--kernel", kernel, "--iterations", kIterations,
                             "--first-seed", "11", "--wait"});
    ASSERT_EQ(c.value("by_verdict", json::object()).value("violation", 0), 1) << c.dump();
  }

  std::vector<json> issues() {
    const json j = cli_json({"issues"});
    return j.contains("issues") ? j["issues"].get<std::vector<json>>() : std::vector<json>{};
  }

  // The issue of the stat lookups, once the maintenance step grouped `count` of them.
  json wait_stat_issue(uint64_t count) {
    json found;
    const bool ok = poll_until(
        [&] {
          for (const auto& i : issues()) {
            if (i["signature"].get<std::string>().find("|stat/chmod|") != std::string::npos &&
                std::stoull(i.value("count", std::string("0"))) >= count) {
              found = i;
              return true;
            }
          }
          return false;
        },
        30s, 200ms);
    EXPECT_TRUE(ok) << "no stat issue with count " << count << ": " << cli({"issues"}).out;
    return found;
  }

  std::string address_;
  Proc* coordinator_ = nullptr;
  int coordinators_ = 0;
  std::vector<Proc*> agents_;
};

// Runs the reproducer binary in a sandbox holding `kind` (backing tree and
// FUSE view); returns its exit status and first output line.
std::pair<int, std::string> run_repro(leapfrog::fs::FsKind kind, const std::string& bin,
                                      const std::string& out, const char* seconds) {
  const int status = leapfrog::fs::run_sandboxed([&](const std::string& workdir) {
    leapfrog::fs::FsSpec spec;
    spec.kind = kind;
    auto ws = leapfrog::fs::provision(spec, workdir);
    const pid_t pid = fork();
    if (pid == 0) {
      if (!freopen(out.c_str(), "w", stdout)) _exit(120);
      execl(bin.c_str(), bin.c_str(), ws->mutate_root().c_str(), ws->lookup_root().c_str(), seconds,
            static_cast<char*>(nullptr));
      _exit(121);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 122;
  });
  return {status, slurp(out)};
}

TEST_F(TriageE2E, IssuesReplayBisectMinimizeAndRegression) {
  // Two nights of the same failure: one issue, count 2.
  night("k4");
  const json first = wait_stat_issue(1);
  night("k4");
  const json issue = wait_stat_issue(2);
  ASSERT_FALSE(issue.is_null());
  const std::string id = issue["id"].get<std::string>();  // int64: a string in JSON
  EXPECT_EQ(issue["id"], first["id"]);
  EXPECT_EQ(issue["count"], "2");
  EXPECT_EQ(issue["status"], "ISSUE_STATUS_NEW");
  ASSERT_EQ(issue["kernels"].size(), 1u);
  EXPECT_EQ(issue["kernels"][0]["kernel_label"], "k4");

  // Replay: never on the clean k1, often on the stale k4.
  const json clean = cli_json({"replay", id, "--kernel", "k1", "--runs", "4", "--wait"});
  EXPECT_EQ(clean["state"], "ACTION_STATE_DONE") << clean.dump();
  EXPECT_EQ(clean["rate"].value("reproduced", 0), 0) << clean.dump();
  EXPECT_EQ(clean["rate"]["runs"], 4);
  EXPECT_GT(clean["rate"]["upper"].get<double>(), 0.0);  // Wilson: 0/4 is not proof of 0
  const json stale = cli_json({"replay", id, "--kernel", "k4", "--runs", "4", "--wait"});
  EXPECT_EQ(stale["state"], "ACTION_STATE_DONE") << stale.dump();
  EXPECT_GT(stale["rate"].value("reproduced", 0), 0) << stale.dump();
  EXPECT_GT(stale["rate"]["rate"].get<double>(), 0.0);
  const json shown = cli_json({"issue", "show", id});
  EXPECT_EQ(shown["rates"].size(), 2u) << shown.dump();

  // Bisect: k1 good ... k5 bad; the first bad build is k3.
  const json bisect = cli_json({"bisect", id, "--kernels", "k1,k2,k3,k4,k5", "--wait"});
  EXPECT_EQ(bisect["state"], "ACTION_STATE_DONE") << bisect.dump();
  EXPECT_EQ(bisect["bisect"]["first_bad"], "k3") << bisect.dump();
  EXPECT_EQ(bisect["bisect"]["last_good"], "k2") << bisect.dump();
  EXPECT_GE(bisect["bisect"]["runs_per_step"].get<int>(), 1);
  std::printf("bisect: %s\n", bisect["bisect"].dump().c_str());

  // Minimize: a smaller spec and a C reproducer telling cached from direct.
  const std::string repro = *dir_ / "repro.c";
  const json min = cli_json({"minimize", id, "--wait", "--out", repro});
  ASSERT_EQ(min["state"], "ACTION_STATE_DONE") << min.dump();
  const json minimal = min["minimize"]["minimal_spec"];
  EXPECT_EQ(minimal["scenario"], "setattr-lookup");
  EXPECT_LE(std::stoull(minimal.value("iterations", std::string("0"))), std::stoull(kIterations));
  EXPECT_EQ(minimal.value("observers", 0), 1) << min.dump();  // from the scenario's default
  // The operation mix narrowed to the lookup that failed (stat: bit 1).
  EXPECT_EQ(minimal["params"].value("ops", std::string()), "1") << min.dump();
  EXPECT_GE(min["minimize"].value("kept", 0), 1) << min.dump();
  ASSERT_TRUE(stdfs::exists(repro));
  std::printf("minimize: %s\n", min["minimize"]["log"].dump().c_str());
  std::printf("replays: k1 %s, k4 %s\n", clean["rate"].dump().c_str(),
              stale["rate"].dump().c_str());
  const std::string bin = *dir_ / "repro";
  const Result cc = run_to_end({"cc", "-o", bin, repro}, logs_, 120s);
  ASSERT_EQ(cc.exit, 0) << cc.err;
  const auto cached = run_repro(leapfrog::fs::FsKind::FuseCached, bin, *dir_ / "cached.out", "10");
  EXPECT_EQ(cached.first, 1) << cached.second;
  EXPECT_EQ(cached.second.rfind("FAIL stale-grant", 0), 0u) << cached.second;
  const auto direct = run_repro(leapfrog::fs::FsKind::FuseDirect, bin, *dir_ / "direct.out", "2");
  EXPECT_EQ(direct.first, 0) << direct.second;
  EXPECT_EQ(direct.second.rfind("PASS", 0), 0u) << direct.second;
  std::printf("repro on fuse-cached: %srepro on fuse-direct: %s", cached.second.c_str(),
              direct.second.c_str());

  // The report (issue 42 §4): its parts in Markdown, and as a mail that
  // Python's email package parses, the reproducer attached byte for byte
  // (minimize's, the latest finished one).
  const Result md = cli({"issue", "report", id, "--link", "http://127.0.0.1:9/"});
  ASSERT_EQ(md.exit, 0) << md.err;
  std::printf("issue report:\n%s\n", md.out.substr(0, md.out.find("```c")).c_str());
  for (const std::string& part :
       {"# " + issue["title"].get<std::string>(), "Signature: " + issue["signature"].get<std::string>(),
        std::string("## Kernels that reproduce it"), std::string("k4"), std::string("reproduced in"),
        std::string("95% interval"), std::string("## Kernels that stayed clean"), std::string("k1"),
        std::string("lookups judged"), std::string("## What the oracle saw"), std::string("stat(\""),
        std::string("No order of the operations"), std::string("## Reproducer"), std::string("```c\n"),
        "Page: http://127.0.0.1:9/#/issues/" + id})
    EXPECT_NE(md.out.find(part), std::string::npos) << "no \"" << part << "\" in:\n" << md.out;
  const std::string mail = *dir_ / "report.eml", attached = *dir_ / "attached.c";
  const Result m = cli({"issue", "report", id, "--format", "mail", "--to", "maintainers@example.org",
                        "--out", mail});
  ASSERT_EQ(m.exit, 0) << m.err;
  const Result parsed = run_to_end(
      {"python3", "-c",
       "import email, email.policy, sys\n"
       "m = email.message_from_binary_file(open(sys.argv[1], 'rb'), policy=email.policy.default)\n"
       "assert m['Subject'].startswith('[leapfrog] '), m['Subject']\n"
       "assert m['To'] == 'maintainers@example.org', m['To']\n"
       "assert m.get_content_type() == 'multipart/mixed'\n"
       "body = m.get_body(preferencelist=('plain',)).get_content()\n"
       "assert 'What the oracle saw' in body and 'Kernels that reproduce it' in body, body\n"
       "parts = list(m.iter_attachments())\n"
       "assert len(parts) == 1 and parts[0].get_filename() == 'repro.c', parts\n"
       "open(sys.argv[2], 'wb').write(parts[0].get_payload(decode=True))\n"
       "print('parsed')\n",
       mail, attached},
      logs_, 60s);
  ASSERT_EQ(parsed.exit, 0) << parsed.out << parsed.err;
  EXPECT_EQ(slurp(attached), slurp(repro)) << "the attachment is not minimize's reproducer";
  // The same from the dashboard's download links: GET /api/issues/N/report.
  std::string http = slurp(*dir_ / "coord/http");
  http = http.substr(0, http.find('\n'));
  ASSERT_EQ(http.rfind("http://127.0.0.1:", 0), 0u) << http;
  const std::string http_attached = *dir_ / "http-attached.c";
  const Result fetched = run_to_end(
      {"python3", "-c",
       "import email, email.policy, sys, urllib.request\n"
       "base, issue = sys.argv[1], sys.argv[2]\n"
       "md = urllib.request.urlopen(f'{base}/api/issues/{issue}/report?format=markdown').read().decode()\n"
       "assert '## What the oracle saw' in md, md\n"
       "assert f'Page: {base}/#/issues/{issue}' in md, md\n"
       "r = urllib.request.urlopen(f'{base}/api/issues/{issue}/report?format=mail')\n"
       "assert r.headers['Content-Type'] == 'message/rfc822', r.headers\n"
       "m = email.message_from_bytes(r.read(), policy=email.policy.default)\n"
       "parts = list(m.iter_attachments())\n"
       "assert len(parts) == 1 and parts[0].get_filename() == 'repro.c', parts\n"
       "open(sys.argv[3], 'wb').write(parts[0].get_payload(decode=True))\n"
       "print('fetched')\n",
       http, id, http_attached},
      logs_, 60s);
  ASSERT_EQ(fetched.exit, 0) << fetched.out << fetched.err;
  EXPECT_EQ(slurp(http_attached), slurp(repro));

  // A bad format is one clear error line (the control of the parser above is
  // its asserts: a mail without the attachment fails them).
  const Result bad_format = cli({"issue", "report", id, "--format", "pdf"});
  EXPECT_EQ(bad_format.exit, 2);
  EXPECT_EQ(bad_format.err, "error: bad --format \"pdf\", want markdown or mail\n");

  // Actions and issues that do not exist: one clear error line.
  const Result missing = cli({"replay", "999", "--kernel", "k1"});
  EXPECT_EQ(missing.exit, 2);
  EXPECT_EQ(missing.err, "error: no issue \"999\"\n");
  const Result bad = cli({"bisect", id, "--kernels", "k1"});
  EXPECT_EQ(bad.exit, 2);
  EXPECT_NE(bad.err.find("at least two kernels"), std::string::npos) << bad.err;

  // Fixed, then failing again on a later night: reopened as a regression.
  const json fixed = cli_json({"issue", "status", id, "fixed"});
  EXPECT_EQ(fixed["status"], "ISSUE_STATUS_FIXED");
  night("k5");
  json reopened;
  EXPECT_TRUE(poll_until(
      [&] {
        reopened = cli_json({"issue", "show", id});
        return reopened["status"] == "ISSUE_STATUS_REGRESSION";
      },
      30s, 200ms))
      << reopened.dump();
  EXPECT_EQ(reopened["count"], "3");
  EXPECT_EQ(reopened["regressions"], 1);
}

TEST_F(TriageE2E, AnActionSurvivesACoordinatorKilledMidway) {
  night("k4");
  const std::string id = wait_stat_issue(1)["id"].get<std::string>();
  const json started = cli_json({"replay", id, "--kernel", "k4", "--runs", "6"});
  ASSERT_EQ(started["state"], "ACTION_STATE_RUNNING") << started.dump();
  const std::string action = started["id"].get<std::string>();
  // Kill it once some runs are done, restart on the same address: the
  // action row and its campaign carry on.
  const std::string campaign = started["campaign_ids"][0].get<std::string>();
  ASSERT_TRUE(poll_until(
      [&] {
        const Result r = cli({"campaign", "show", campaign, "--json"});
        return r.exit == 0 && json::parse(r.out)["by_state"].value("done", 0) >= 2;
      },
      60s, 100ms));
  const std::string listen = address_;
  coordinator_->signal(SIGKILL);
  coordinator_->stop();
  start_coordinator(listen);
  const json done = cli_json({"action", action, "--wait"});
  EXPECT_EQ(done["state"], "ACTION_STATE_DONE") << done.dump();
  EXPECT_EQ(done["rate"]["runs"], 6) << done.dump();
  EXPECT_GT(done["rate"].value("reproduced", 0), 0) << done.dump();
  EXPECT_EQ(done["campaign_ids"].size(), 1u) << done.dump();  // not queued twice
  // The replays were not counted into the issue.
  EXPECT_EQ(cli_json({"issue", "show", id})["count"], "1");
}

TEST_F(TriageE2E, BisectSkipsAKernelThatFailsDifferently) {
  // kx cannot run the job at all (its runs end as errors): neither good nor bad.
  agents_.push_back(spawn(
      "agent-kx", {LEAPFROG_AGENT, "connect", "--coordinator", address_, "--token-file",
                   token_file_, "--name", "agent-kx", "--kernel-label", "kx", "--spool",
                   *dir_ / "spool-kx", "--fs", "fuse-cached", "--fs-map", "fuse-cached=nosuchfs"}));
  night("k4");
  const std::string id = wait_stat_issue(1)["id"].get<std::string>();
  const json bisect = cli_json({"bisect", id, "--kernels", "k1,kx,k4", "--wait"});
  EXPECT_EQ(bisect["state"], "ACTION_STATE_DONE") << bisect.dump();
  EXPECT_EQ(bisect["bisect"]["first_bad"], "k4") << bisect.dump();
  EXPECT_EQ(bisect["bisect"]["last_good"], "k1") << bisect.dump();
  ASSERT_EQ(bisect["bisect"]["skipped"].size(), 1u) << bisect.dump();
  EXPECT_EQ(bisect["bisect"]["skipped"][0], "kx");
  const json steps = bisect["bisect"]["steps"];
  ASSERT_EQ(steps.size(), 2u) << bisect.dump();
  EXPECT_EQ(steps[1]["verdict"], "BISECT_STEP_SKIPPED");
  EXPECT_EQ(steps[1].value("reproduced", 0), 0);
  EXPECT_EQ(steps[1]["other_failures"], steps[1]["runs"]);
}

// Replaying an outcome of a campaign that is still running (here: its other
// job waits for a kernel no agent serves) is refused with the reason; once
// the campaign is done the same outcome replays.
TEST_F(TriageE2E, ReplayOfAnOutcomeOfARunningCampaignIsRefused) {
  const json c = cli_json({"campaign", "run", "--name", "half", "--scenario", "setattr-lookup", "--fs",
                           "fuse-cached", "--kernel", "k4", "--kernel", "nobody", "--iterations", kIterations,
                           "--first-seed", "11"});
  const std::string campaign = std::to_string(c.at("campaign").get<int64_t>());
  json outcomes;
  ASSERT_TRUE(poll_until(
      [&] {
        outcomes = cli_json({"outcomes", "--campaign", campaign});
        return outcomes.size() == 1;
      },
      120s, 200ms));
  const std::string ref = outcomes[0].at("job_id").get<std::string>() + ".1";
  const Result refused = cli({"replay", ref, "--kernel", "k4"});
  EXPECT_EQ(refused.exit, 2) << refused.out << refused.err;
  EXPECT_NE(refused.err.find("belongs to campaign \"" + campaign + "\", which is still running (1 of 2 jobs done)"),
            std::string::npos)
      << refused.err;
  // The waiting job gets an agent; the campaign ends; the replay runs.
  agents_.push_back(spawn("agent-nobody", {LEAPFROG_AGENT, "connect", "--coordinator", address_, "--token-file",
                                           token_file_, "--name", "agent-nobody", "--kernel-label", "nobody",
                                           "--spool", *dir_ / "spool-nobody", "--fs", "fuse-cached"}));
  ASSERT_TRUE(poll_until([&] { return cli_json({"outcomes", "--campaign", campaign}).size() == 2; }, 120s, 200ms));
  const json replay = cli_json({"replay", ref, "--kernel", "k4", "--runs", "2", "--wait"});
  EXPECT_EQ(replay["state"], "ACTION_STATE_DONE") << replay.dump();
  EXPECT_EQ(replay["rate"]["runs"], 2) << replay.dump();
}

}  // namespace
