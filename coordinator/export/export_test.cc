// Exports of real campaigns: `leapfrog serve` on a PostgreSQL the test
// starts, a real agent on the host running setattr-lookup on tmpfs (clean) and
// on fuse-cached (the kernel grants on cached permissions: a violation, the
// triage tests' positive control), and each format read by its own consumer:
// KCIDB by Debian's python3-jsonschema against testdata/kcidb-v5.3.schema.json,
// JUnit by `xmllint --schema testdata/junit.xsd`, KTAP by the kernel's own
// tools/testing/kunit/kunit_parser.py unpacked from Debian's linux-source-6.1.
// Each consumer is also shown a broken document and must refuse it. Needs
// root (mounts, FUSE).

#include <gtest/gtest.h>
#include <httplib.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "common/ktap/ktap.h"
#include "coordinator/campaign.h"
#include "coordinator/clock.h"
#include "coordinator/export/kcidb.h"
#include "coordinator/export/nightly.h"
#include "coordinator/store/pg_store.h"
#include "tests/e2e_util.h"
#include "tests/process_util.h"

namespace {

using namespace leapfrog::testing;
namespace v1 = leapfrog::v1;

const std::string kTestdata = LEAPFROG_EXPORT_TESTDATA;
// Debian's interpreter: python3-jsonschema is installed for it, not for
// another python3 earlier on PATH.
const char* const kPython = "/usr/bin/python3";
const char* const kIterations = "40";
// serve --link-base: the dashboard as the readers of the exports reach it.
const char* const kLinkBase = "https://ci.example.org/leapfrog";

void write(const std::string& path, const std::string& text) {
  std::ofstream(path) << text;
}

// Everything the tests share: one coordinator, one agent, one campaign with a
// clean job and a violating one, its issue grouped. Built once.
struct World {
  std::unique_ptr<TestDir> dir;
  std::string logs, token_file, data, address, http, export_dir, kunit_dir;
  std::unique_ptr<EmbeddedPostgres> pg;
  std::vector<std::unique_ptr<Proc>> procs;
  int64_t campaign = 0;
  std::string setup_error;

  Result cli(std::vector<std::string> args, std::chrono::milliseconds timeout = 300s) const {
    std::vector<std::string> argv = {LEAPFROG,   "--coordinator", address, "--token-file",
                                     token_file, "--data-dir",    data};
    argv.insert(argv.end(), args.begin(), args.end());
    return run_to_end(argv, logs, timeout);
  }

  void start() {
    dir = std::make_unique<TestDir>();
    logs = *dir / "logs";
    stdfs::create_directories(logs);
    token_file = *dir / "token";
    std::ofstream(token_file) << random_token() << "\n";
    EmbeddedPostgresOptions o;
    o.for_tests = true;
    pg = std::make_unique<EmbeddedPostgres>(o);
    pg->start(*dir / "pg");
    data = *dir / "coord";
    export_dir = *dir / "nightly";
    procs.push_back(std::make_unique<Proc>(
        std::vector<std::string>{
            LEAPFROG,          "serve",       "--database",      pg->url(),
            "--listen",        "127.0.0.1:0", "--data-dir",      data,
            "--token-file",    token_file,    "--export-dir",    export_dir,
            "--export-format", "kcidb",       "--export-format", "junit",
            "--export-format", "ktap",        "--export-origin", "leapfrog_test",
            "--link-base",     kLinkBase},
        logs + "/serve.out", logs + "/serve.err"));
    if (!wait_address(data, *procs.back(), 30s)) throw std::runtime_error("serve did not start");
    address = read_address(data);
    poll_until([&] { return !slurp(data + "/http").empty(); }, 10s);
    http = slurp(data + "/http");
    while (!http.empty() && http.back() == '\n') http.pop_back();
    procs.push_back(std::make_unique<Proc>(
        std::vector<std::string>{LEAPFROG_AGENT, "connect", "--coordinator", address,
                                 "--token-file", token_file, "--name", "agent-host", "--spool",
                                 *dir / "spool", "--fs", "tmpfs", "--fs", "fuse-cached"},
        logs + "/agent.out", logs + "/agent.err"));
    const Result r = cli({"campaign", "run", "--name", "exports", "--scenario", "setattr-lookup",
                          "--fs", "tmpfs", "--fs", "fuse-cached", "--iterations", kIterations,
                          "--first-seed", "11", "--wait", "--json"});
    if (r.exit != 0) throw std::runtime_error("campaign failed: " + r.out + r.err);
    const json c = json::parse(r.out);
    campaign = c["campaign"].get<int64_t>();
    if (c["by_verdict"] != json({{"pass", 1}, {"violation", 1}}))
      throw std::runtime_error("want one pass and one violation: " + r.out);
    // The maintenance step groups the violation into an issue.
    const bool grouped = poll_until(
        [&] {
          const Result i = cli({"issues", "--json"}, 30s);
          return i.exit == 0 && i.out.find("\"signature\"") != std::string::npos;
        },
        60s, 200ms);
    if (!grouped) throw std::runtime_error("no issue was grouped");
  }

  // kunit_parser.py (and kunit_printer.py, which it imports) from Debian's
  // kernel source tarball, unpacked once.
  const std::string& kunit() {
    if (!kunit_dir.empty()) return kunit_dir;
    const std::string to = *dir / "linux";
    stdfs::create_directories(to);
    const Result r =
        run_to_end({"tar", "-xJf", "/usr/src/linux-source-6.1.tar.xz", "-C", to,
                    "--strip-components=4", "linux-source-6.1/tools/testing/kunit/kunit_parser.py",
                    "linux-source-6.1/tools/testing/kunit/kunit_printer.py"},
                   logs, 300s);
    if (r.exit != 0 || !stdfs::exists(to + "/kunit_parser.py"))
      throw std::runtime_error("cannot unpack kunit_parser.py: " + r.err);
    kunit_dir = to;
    return kunit_dir;
  }

  void stop() {
    for (auto it = procs.rbegin(); it != procs.rend(); ++it) (*it)->signal(SIGTERM);
    for (auto it = procs.rbegin(); it != procs.rend(); ++it) (*it)->stop();
    if (::testing::Test::HasFailure() || std::getenv("LEAPFROG_E2E_LOGS")) print_logs(logs, 5000);
    procs.clear();
    pg.reset();
    dir.reset();
  }
};

World* world = nullptr;

class ExportTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (geteuid() != 0) return;
    world = new World;
    try {
      world->start();
    } catch (const std::exception& e) {
      world->setup_error = e.what();
    }
  }
  static void TearDownTestSuite() {
    if (!world) return;
    if (!world->setup_error.empty()) print_logs(world->logs, 5000);
    world->stop();
    delete world;
    world = nullptr;
  }
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "needs root";
    ASSERT_TRUE(world && world->setup_error.empty()) << (world ? world->setup_error : "");
  }

  std::string path(const std::string& name) const { return *world->dir / name; }

  // `leapfrog export` of the campaign into a file; returns its text.
  std::string exported(const std::string& format, std::vector<std::string> extra = {}) {
    const std::string out = path("campaign." + format);
    std::vector<std::string> args = {
        "export", "--campaign", std::to_string(world->campaign), "--format", format, "--out", out};
    args.insert(args.end(), extra.begin(), extra.end());
    const Result r = world->cli(args);
    EXPECT_EQ(r.exit, 0) << r.out << r.err;
    return slurp(out);
  }

  // check_kcidb.py's exit status and errors for `doc`.
  Result kcidb_check(const std::string& doc) {
    const std::string f = path("check.json");
    write(f, doc);
    return run_to_end({kPython, kTestdata + "/check_kcidb.py", f}, world->logs);
  }

  json ktap_parse(const std::string& text) {
    const std::string f = path("check.ktap");
    write(f, text);
    const Result r =
        run_to_end({kPython, kTestdata + "/parse_ktap.py", world->kunit(), f}, world->logs);
    EXPECT_EQ(r.exit, 0) << r.err;
    return json::parse(r.out.empty() ? "{}" : r.out);
  }
};

// ---- KCIDB ----------------------------------------------------------------

TEST_F(ExportTest, KcidbDocumentPassesTheSchemaAndMapsJobsIssuesIncidents) {
  const std::string text = exported("kcidb");
  const Result ok = kcidb_check(text);
  EXPECT_EQ(ok.exit, 0) << ok.err;
  const json doc = json::parse(text);
  EXPECT_EQ(doc["version"], json({{"major", 5}, {"minor", 3}}));
  ASSERT_EQ(doc["checkouts"].size(), 1u);
  ASSERT_EQ(doc["builds"].size(), 1u);
  EXPECT_EQ(doc["builds"][0]["checkout_id"], doc["checkouts"][0]["id"]);
  ASSERT_EQ(doc["tests"].size(), 2u) << text;
  std::map<std::string, json> by_path;
  for (const auto& t : doc["tests"]) {
    by_path[t["path"]] = t;
    EXPECT_EQ(t["origin"], "leapfrog");
    EXPECT_EQ(t["build_id"], doc["builds"][0]["id"]);
    EXPECT_EQ(t["misc"]["seed"], 11);
    EXPECT_TRUE(t["misc"]["strategy"].contains("alignment")) << t.dump();
    EXPECT_GT(t["misc"]["counts"]["lookups_checked"].get<uint64_t>(), 0u) << t.dump();
  }
  ASSERT_TRUE(by_path.count("leapfrog.setattr-lookup.tmpfs")) << text;
  ASSERT_TRUE(by_path.count("leapfrog.setattr-lookup.fuse-cached")) << text;
  EXPECT_EQ(by_path["leapfrog.setattr-lookup.tmpfs"]["status"], "PASS");
  const json& bad = by_path["leapfrog.setattr-lookup.fuse-cached"];
  EXPECT_EQ(bad["status"], "FAIL");
  EXPECT_EQ(bad["misc"]["fs"], "fuse-cached");
  EXPECT_GT(bad["misc"]["counts"]["violations"].get<uint64_t>(), 0u);
  EXPECT_NE(bad["log_excerpt"].get<std::string>().find("violation"), std::string::npos);
  ASSERT_GE(doc["issues"].size(), 1u) << text;
  ASSERT_EQ(doc["incidents"].size(), doc["issues"].size()) << text;
  for (const auto& i : doc["incidents"]) {
    EXPECT_EQ(i["test_id"], bad["id"]);
    EXPECT_TRUE(i["present"].get<bool>());
  }
  EXPECT_NE(
      doc["issues"][0]["report_url"].get<std::string>().find(std::string(kLinkBase) + "/#/issues/"),
      std::string::npos);
  // The same campaign exported again is the same document: the same ids.
  EXPECT_EQ(exported("kcidb"), text);
}

TEST_F(ExportTest, KcidbSchemaCheckRefusesBrokenDocuments) {
  const json doc = json::parse(exported("kcidb"));
  ASSERT_EQ(kcidb_check(doc.dump()).exit, 0);
  auto refused = [&](const std::string& what, json broken) {
    const Result r = kcidb_check(broken.dump());
    EXPECT_EQ(r.exit, 1) << what << " was accepted";
  };
  json b = doc;
  b["tests"][0]["status"] = "BROKEN";
  refused("a status outside the enum", b);
  b = doc;
  b["tests"][0]["id"] = "no-origin";
  refused("an id without origin", b);
  b = doc;
  b["tests"][0].erase("build_id");
  refused("a test without build_id", b);
  b = doc;
  b["issues"][0].erase("version");
  refused("an issue without version", b);
  b = doc;
  b["tests"][0]["path"] = "leapfrog.setattr lookup";
  refused("a path with a space", b);
  b = doc;
  b["version"]["major"] = 4;
  refused("major version 4", b);
  // A bad origin is refused before anything is written.
  const Result r = world->cli(
      {"export", "--campaign", std::to_string(world->campaign), "--origin", "Not-An-Origin"});
  EXPECT_EQ(r.exit, 2);
  EXPECT_NE(r.err.find("bad origin"), std::string::npos) << r.err;
}

// A KCIDB-style receiver on 127.0.0.1: checks the token, keeps every object
// by (kind, id) as KCIDB merges them, and counts submissions.
struct Receiver {
  httplib::Server server;
  std::thread thread;
  int port = 0;
  std::mutex mu;
  int submissions = 0;
  std::map<std::string, json> objects;
  std::vector<std::string> bodies;

  explicit Receiver(const std::string& token) {
    server.Post("/submit", [this, token](const httplib::Request& req, httplib::Response& res) {
      if (req.get_header_value("Authorization") != "Bearer " + token) {
        res.status = 401;
        res.set_content("{\"error\": \"bad token\"}", "application/json");
        return;
      }
      const json doc = json::parse(req.body, nullptr, false);
      if (doc.is_discarded() || !doc.is_object()) {
        res.status = 400;
        return;
      }
      std::lock_guard<std::mutex> lock(mu);
      ++submissions;
      bodies.push_back(req.body);
      for (const char* kind : {"checkouts", "builds", "tests", "issues", "incidents"})
        for (const auto& o : doc.value(kind, json::array()))
          objects[std::string(kind) + "/" + o["id"].get<std::string>()] = o;
      res.set_content("{\"status\": \"ok\"}", "application/json");
    });
    port = server.bind_to_any_port("127.0.0.1");
    thread = std::thread([this] { server.listen_after_bind(); });
  }
  ~Receiver() {
    server.stop();
    thread.join();
  }
};

TEST_F(ExportTest, SubmitPostsToAKcidbReceiverAndResendingChangesNothing) {
  const std::string token = random_token();
  const std::string token_file = path("kcidb-token");
  write(token_file, token + "\n");
  Receiver rx(token);
  ASSERT_GT(rx.port, 0);
  const std::string url = "http://127.0.0.1:" + std::to_string(rx.port) + "/submit";
  const std::vector<std::string> args = {"export",   "--campaign", std::to_string(world->campaign),
                                         "--submit", url,          "--token-file",
                                         token_file, "--origin",   "lf_ci"};
  const Result first = world->cli(args);
  ASSERT_EQ(first.exit, 0) << first.err;
  size_t objects_after_first = 0;
  {
    std::lock_guard<std::mutex> lock(rx.mu);
    objects_after_first = rx.objects.size();
    EXPECT_EQ(rx.submissions, 1);
  }
  EXPECT_GE(objects_after_first, 5u);  // checkout, build, 2 tests, >= 1 issue and incident
  const Result second = world->cli(args);
  ASSERT_EQ(second.exit, 0) << second.err;
  {
    std::lock_guard<std::mutex> lock(rx.mu);
    EXPECT_EQ(rx.submissions, 2);
    EXPECT_EQ(rx.objects.size(), objects_after_first);
    ASSERT_EQ(rx.bodies.size(), 2u);
    EXPECT_EQ(rx.bodies[0], rx.bodies[1]);
    for (const auto& [key, o] : rx.objects)
      EXPECT_EQ(o["id"].get<std::string>().rfind("lf_ci:", 0), 0u) << key;
  }
  // The receiver's refusal is the verb's failure.
  write(token_file, "wrong\n");
  const Result refused = world->cli(args);
  EXPECT_EQ(refused.exit, 2);
  EXPECT_NE(refused.err.find("401"), std::string::npos) << refused.err;
  std::lock_guard<std::mutex> lock(rx.mu);
  EXPECT_EQ(rx.submissions, 2);
}

// ---- JUnit ----------------------------------------------------------------

TEST_F(ExportTest, JunitPassesTheXsdAndCarriesTheViolationAndIssueLink) {
  const std::string xml = exported("junit");
  const std::string f = path("junit.xml");
  write(f, xml);
  const Result ok =
      run_to_end({"xmllint", "--noout", "--schema", kTestdata + "/junit.xsd", f}, world->logs);
  EXPECT_EQ(ok.exit, 0) << ok.err << xml;
  EXPECT_NE(
      xml.find("<testsuite name=\"campaign-" + std::to_string(world->campaign) + " exports\""),
      std::string::npos)
      << xml;
  EXPECT_NE(xml.find("tests=\"2\" failures=\"1\" errors=\"0\" skipped=\"0\""), std::string::npos)
      << xml;
  const size_t failure = xml.find("<failure message=\"");
  ASSERT_NE(failure, std::string::npos) << xml;
  const std::string rest = xml.substr(failure, xml.find("</failure>", failure) - failure);
  EXPECT_NE(rest.find("violation"), std::string::npos) << rest;
  EXPECT_NE(rest.find(std::string(kLinkBase) + "/#/issues/"), std::string::npos) << rest;

  // Positive control: xmllint refuses a testcase without its classname.
  std::string broken = xml;
  const size_t at = broken.find(" classname=\"");
  ASSERT_NE(at, std::string::npos);
  broken.erase(at, broken.find('"', at + 12) + 1 - at);
  write(f, broken);
  const Result bad =
      run_to_end({"xmllint", "--noout", "--schema", kTestdata + "/junit.xsd", f}, world->logs);
  EXPECT_NE(bad.exit, 0) << "xmllint accepted a testcase without classname";
}

// ---- KTAP -----------------------------------------------------------------

TEST_F(ExportTest, KtapCampaignIsReadByTheKernelsParserWithTheSameCounts) {
  const std::string text = exported("ktap");
  const json p = ktap_parse(text);
  EXPECT_EQ(p["passed"], 1) << p.dump() << text;
  EXPECT_EQ(p["failed"], 1) << p.dump();
  EXPECT_EQ(p["crashed"], 0) << p.dump();
  EXPECT_EQ(p["errors"], 0) << p.dump() << text;
  EXPECT_EQ(p["status"], "FAILURE");
  ASSERT_EQ(p["leaves"].size(), 2u) << p.dump();
  // The jobs are subtests of the campaign's suite.
  EXPECT_NE(text.find("  # Subtest: leapfrog.campaign-" + std::to_string(world->campaign)),
            std::string::npos)
      << text;

  // Positive control: a job's result line missing is an error to the parser.
  std::string broken = text;
  const size_t at = broken.find("  ok 1 ");
  const size_t at2 = at == std::string::npos ? broken.find("  not ok 1 ") : at;
  ASSERT_NE(at2, std::string::npos) << text;
  broken.erase(at2, broken.find('\n', at2) + 1 - at2);
  const json b = ktap_parse(broken);
  EXPECT_GT(b["errors"].get<int>() + b["crashed"].get<int>(), 0) << b.dump();
}

TEST_F(ExportTest, AgentRunPrintsOneJobAsKtap) {
  for (const auto& [fs, want_pass] :
       std::vector<std::pair<std::string, bool>>{{"tmpfs", true}, {"fuse-cached", false}}) {
    const Result r = run_to_end({LEAPFROG_AGENT, "run", "--scenario", "setattr-lookup", "--fs", fs,
                                 "--iterations", kIterations, "--seed", "11", "--format", "ktap"},
                                world->logs, 300s);
    EXPECT_EQ(r.exit, want_pass ? 0 : 1) << r.out << r.err;
    EXPECT_EQ(r.out.rfind("KTAP version 1\n1..1\n", 0), 0u) << r.out;
    const json p = ktap_parse(r.out);
    EXPECT_EQ(p["passed"], want_pass ? 1 : 0) << fs << " " << p.dump() << r.out;
    EXPECT_EQ(p["failed"], want_pass ? 0 : 1) << fs << " " << p.dump();
    EXPECT_EQ(p["errors"], 0) << p.dump();
    ASSERT_EQ(p["leaves"].size(), 1u);
    EXPECT_EQ(p["leaves"][0]["name"], "leapfrog.setattr-lookup." + fs);
  }
}

// An inconclusive run (finished, judged nothing or hit the search budget) is
// neither a pass nor a failure to the kernel's parser: a skip, with the why.
TEST_F(ExportTest, InconclusiveRunIsASkipToTheKernelsParserAndDoneToKcidb) {
  v1::ScenarioSpec spec;
  spec.set_scenario("setattr-lookup");
  spec.set_fs("tmpfs");
  v1::Outcome o;
  o.set_verdict(v1::VERDICT_INCONCLUSIVE);
  o.set_error("the history holds no lookup or offset operation to judge");
  const std::string text = leapfrog::ktap::run_document(spec, "k", o);
  const json p = ktap_parse(text);
  EXPECT_EQ(p["skipped"], 1) << p.dump() << text;
  EXPECT_EQ(p["passed"], 0) << p.dump();
  EXPECT_EQ(p["failed"], 0) << p.dump();
  EXPECT_EQ(p["errors"], 0) << p.dump() << text;
  EXPECT_NE(text.find("# SKIP inconclusive: the history holds no lookup"), std::string::npos)
      << text;
  EXPECT_EQ(leapfrog::coord::exports::kcidb_status(v1::VERDICT_INCONCLUSIVE), "DONE");
  // Control: the same outcome as a pass is counted as passed, not skipped.
  o.set_verdict(v1::VERDICT_PASS);
  EXPECT_EQ(ktap_parse(leapfrog::ktap::run_document(spec, "k", o))["passed"], 1);
}

// ---- HTTP and the nightly folder -------------------------------------------

TEST_F(ExportTest, HttpRouteAnswersTheSameDocumentsAsTheCli) {
  httplib::Client c(world->http);
  for (const std::string format : {"kcidb", "junit", "ktap"}) {
    auto res =
        c.Get("/api/campaigns/" + std::to_string(world->campaign) + "/export?format=" + format);
    ASSERT_TRUE(res) << format;
    EXPECT_EQ(res->status, 200) << res->body;
    EXPECT_EQ(res->body, exported(format, {"--origin", "leapfrog_test"})) << format;
  }
  auto bad = c.Get("/api/campaigns/" + std::to_string(world->campaign) + "/export?format=tap13");
  ASSERT_TRUE(bad);
  EXPECT_EQ(bad->status, 400);
  EXPECT_NE(bad->body.find("want kcidb, junit or ktap"), std::string::npos) << bad->body;
  auto missing = c.Get("/api/campaigns/999999/export?format=kcidb");
  ASSERT_TRUE(missing);
  EXPECT_EQ(missing->status, 404);
  auto origin = c.Get("/api/campaigns/" + std::to_string(world->campaign) +
                      "/export?format=kcidb&origin=Bad!");
  ASSERT_TRUE(origin);
  EXPECT_EQ(origin->status, 400);
  auto named = c.Get("/api/campaigns/" + std::to_string(world->campaign) +
                     "/export?format=kcidb&origin=other_ci");
  ASSERT_TRUE(named);
  EXPECT_EQ(json::parse(named->body)["tests"][0]["origin"], "other_ci");
}

TEST_F(ExportTest, NightlyCampaignsAreWrittenToTheExportFolderOnce) {
  // A campaign made by hand is not a nightly: no file for it.
  leapfrog::coord::PgStore store(world->pg->url());
  const leapfrog::coord::SystemClock clock;
  v1::CampaignSpec spec;
  spec.set_name("nightly-exports");
  spec.add_scenarios("setattr-lookup");
  spec.add_filesystems("tmpfs");
  spec.add_filesystems("fuse-cached");
  spec.set_seeds(1);
  spec.set_first_seed(11);
  spec.set_iterations(40);
  spec = leapfrog::coord::normalize(spec);
  // Whole seconds: the database keeps microseconds, and fire_schedule
  // compares the due time with the stored one.
  const auto next =
      std::chrono::floor<std::chrono::seconds>(clock.now() + std::chrono::hours(24 * 365));
  const v1::Schedule s = store.add_schedule("nightly-exports", "0 2 * * *", spec, next);
  // Fire it as the scheduler would at its due time.
  const auto id = store.fire_schedule(s.id(), next, next + std::chrono::hours(24),
                                      leapfrog::coord::expand(spec), clock.now());
  ASSERT_TRUE(id.has_value());
  const bool done = poll_until(
      [&] {
        auto c = store.get_campaign(*id);
        return c && c->state() == v1::CAMPAIGN_STATE_DONE;
      },
      300s, 100ms);
  ASSERT_TRUE(done);
  std::vector<std::string> files;
  const bool written = poll_until(
      [&] {
        files.clear();
        std::error_code ec;
        for (const auto& e : stdfs::directory_iterator(world->export_dir, ec))
          files.push_back(e.path().filename());
        return files.size() >= 3;
      },
      30s, 100ms);
  ASSERT_TRUE(written) << files.size();
  std::sort(files.begin(), files.end());
  ASSERT_EQ(files.size(), 3u);
  const std::string stem = "-campaign-" + std::to_string(*id);
  for (const auto& f : files) EXPECT_NE(f.find(stem), std::string::npos) << f;
  std::string kcidb;
  for (const auto& f : files)
    if (f.size() > 11 && f.substr(f.size() - 11) == ".kcidb.json")
      kcidb = world->export_dir + "/" + f;
  ASSERT_FALSE(kcidb.empty());
  const std::string text = slurp(kcidb);
  EXPECT_EQ(kcidb_check(text).exit, 0);
  EXPECT_EQ(json::parse(text)["tests"][0]["origin"], "leapfrog_test");  // serve --export-origin
  // Links start at serve --link-base, where mails point too, not at the
  // dashboard's loopback address.
  const std::string url = json::parse(text)["tests"][0]["misc"].value("url", "");
  EXPECT_EQ(url.rfind(std::string(kLinkBase) + "/#/jobs/", 0), 0u) << url;
  EXPECT_EQ(text.find(world->http), std::string::npos) << world->http;
  // A tick finds the files there and writes nothing again.
  leapfrog::coord::exports::NightlyOptions no;
  no.dir = world->export_dir;
  no.formats = {leapfrog::coord::exports::Format::Kcidb, leapfrog::coord::exports::Format::Junit,
                leapfrog::coord::exports::Format::Ktap};
  leapfrog::coord::exports::NightlyExporter again(store, nullptr, no);
  EXPECT_TRUE(again.tick().empty());
  // Removed, a file is written again, by the same rule.
  stdfs::remove(kcidb);
  const auto rewritten = again.tick();
  ASSERT_EQ(rewritten.size(), 1u);
  EXPECT_EQ(rewritten[0], kcidb);
}

}  // namespace
