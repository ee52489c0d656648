// Kernel builds as jobs, end to end: a real coordinator (`leapfrog serve`) on
// a real PostgreSQL, real agents (`leapfrog-agent connect`, one with
// --builder), real campaigns and schedules through the CLI. The kernel source
// is a toy tree whose Makefile stands in for Kbuild (as in
// common/kernel/kernel_build_test.cc) and "builds" by copying the
// Debian kernel from /boot, so the kernel store gets a real image; its
// release carries kbuild's -lf<hash8> suffix like a real build's. Host agents
// stand in for VMs booted with the built kernel through the test-only
// --uname-release. Needs root, like the agent.

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "leapfrog/v1/control.grpc.pb.h"
#include "tests/e2e_util.h"
#include "tests/process_util.h"
#include "tests/sql_util.h"

namespace {

using namespace leapfrog::testing;
namespace v1 = leapfrog::v1;

int64_t sql_int(const std::string& url, const std::string& query) {
  const Rows rows = sql_once(url, query);
  if (rows.empty() || rows[0].empty() || rows[0][0].empty()) throw std::runtime_error("no value: " + query);
  return std::stoll(rows[0][0]);
}


// Stand-in for Kbuild: allnoconfig keeps the fragment's options (with
// CONFIG_LOCALVERSION, so the release names the inputs), bzImage copies the
// kernel image the tree carries (vmlinuz-toy), and fails when fs/namei.c
// says BREAK_BUILD; every build appends a line to build-count in the object
// folder. The build sandbox shows it nothing outside its tree and objects.
std::string toy_makefile(const std::string& image = "vmlinuz-toy", const std::string& count = "$(O)/build-count") {
  return "VERSION = 6\nPATCHLEVEL = 1\nSUBLEVEL = 0\nallnoconfig:\n"
         "\tmkdir -p $(O)\n"
         "\tgrep '^CONFIG_' $(KCONFIG_ALLCONFIG) > $(O)/.config\n"
         "bzImage:\n"
         "\t@if grep -q BREAK_BUILD fs/namei.c; then echo 'fs/namei.c:1: error: BREAK_BUILD'; exit 1; fi\n"
         "\tmkdir -p $(O)/arch/x86/boot $(O)/include/config\n"
         "\tcp " + image + " $(O)/vmlinux\n"
         "\tcp " + image + " $(O)/arch/x86/boot/bzImage\n"
         "\techo 6.1.0-toy$$(sed -n 's/^CONFIG_LOCALVERSION=\"\\(.*\\)\"/\\1/p' $(O)/.config)"
         " > $(O)/include/config/kernel.release\n"
         "\techo built >> " + count + "\n";
}

class BuilderE2E : public E2ETest {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "needs root";
    image_ = stock_boot_kernel();
    if (image_.empty()) GTEST_SKIP() << "no /boot/vmlinuz-6.1.* (install linux-image-amd64: deploy/install-deps.sh)";
    make_test_dir();
    // The toy source tree and its patches.
    src_ = *dir_ / "linux";
    stdfs::create_directories(src_ + "/fs");
    stdfs::copy_file(image_, src_ + "/vmlinuz-toy");
    std::ofstream(src_ + "/Makefile") << toy_makefile();
    std::ofstream(src_ + "/fs/namei.c") << "line one\nline two\nline three\n";
    good_patch_ = *dir_ / "0001-namei.patch";
    std::ofstream(good_patch_) << "Subject: [PATCH] namei: shout line two\n---\n--- a/fs/namei.c\n+++ b/fs/namei.c\n"
                                  "@@ -1,3 +1,3 @@\n line one\n-line two\n+line TWO\n line three\n";
    bad_patch_ = *dir_ / "0002-does-not-apply.patch";
    std::ofstream(bad_patch_) << "Subject: [PATCH] namei: a hunk for another tree\n---\n--- a/fs/namei.c\n"
                                 "+++ b/fs/namei.c\n@@ -1,3 +1,3 @@\n line uno\n-line dos\n+line DOS\n line tres\n";
    start_postgres();
    const std::string data = *dir_ / "coord";
    serve_ = spawn("serve", {LEAPFROG, "serve", "--database", pg_->url(), "--listen", "127.0.0.1:0", "--lease-ms",
                             "3000", "--heartbeat-ms", "300", "--data-dir", data, "--token-file", token_file_});
    ASSERT_TRUE(wait_address(data, *serve_, 30s)) << tail_of(logs_ + "/serve.err");
    address_ = read_address(data);
    ASSERT_FALSE(address_.empty());
  }

  void TearDown() override {
    if (!dir_) return;
    for (auto it = procs_.rbegin(); it != procs_.rend(); ++it) (*it)->signal(SIGTERM);
    for (auto it = procs_.rbegin(); it != procs_.rend(); ++it) (*it)->stop();
    if (show_logs()) print_logs(logs_, 5000);
    release();
  }

  // A host agent; `extra` adds --builder, --kernel-label, --uname-release...
  Proc* agent(const std::string& name, std::vector<std::string> extra) {
    std::vector<std::string> argv = {LEAPFROG_AGENT, "connect",          "--coordinator", address_,
                                     "--token-file", token_file_,        "--name",        name,
                                     "--spool",      *dir_ / ("spool-" + name), "--fs",   "tmpfs"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    return spawn(name, argv);
  }
  // A builder agent taking sources from the test folder (the toy tree is
  // "linux" under it).
  Proc* builder(const std::string& name, const std::string& cache = "") {
    return agent(name, {"--builder", "--build-cache", cache.empty() ? *dir_ / "cache" : cache, "--source-root", dir_->path()});
  }
  // Builds run in `cache` so far: the lines of build-count in its object folder.
  int build_count(const std::string& cache) {
    int n = 0;
    std::error_code ec;
    for (auto it = stdfs::recursive_directory_iterator(cache + "/kbuild/src", ec); it != stdfs::recursive_directory_iterator();
         it.increment(ec))
      if (it->path().filename() == "build-count") {
        const std::string text = slurp(it->path());
        n += static_cast<int>(std::count(text.begin(), text.end(), '\n'));
      }
    return n;
  }

  Result cli(std::vector<std::string> args) {
    std::vector<std::string> argv = {LEAPFROG, "--coordinator", address_, "--token-file", token_file_};
    argv.insert(argv.end(), args.begin(), args.end());
    return run_to_end(argv, logs_, 120s);
  }

  // `campaign run` of two setattr-lookup jobs on kernel "toy", built first
  // from the toy tree with `patches`; returns the campaign id.
  int64_t run_build_campaign(const std::vector<std::string>& patches) {
    std::vector<std::string> args = {"campaign", "run",     "--name",     "rebuild", "--scenario", "setattr-lookup",
                                     "--kernel", "toy",     "--seeds",    "2",       "--duration", "300ms",
                                     "--build",  "toy",     "--source",   src_,      "--source-root", dir_->path(), "--json"};
    for (const auto& p : patches) args.insert(args.end(), {"--patch", p});
    Result r = cli(args);
    if (r.exit != 0) throw std::runtime_error("campaign run failed: " + r.out + r.err);
    const json j = json::parse(r.out);
    if (j.at("jobs").get<int>() != 3) throw std::runtime_error("want 2 test jobs and 1 build job: " + r.out);
    return j.at("campaign").get<int64_t>();
  }

  std::string url() const { return pg_->url(); }
  std::string c(int64_t id) const { return std::to_string(id); }

  int64_t build_job(int64_t campaign) {
    return sql_int(url(), "SELECT id FROM jobs WHERE build IS NOT NULL AND campaign_id = " + c(campaign));
  }
  int64_t jobs_in(int64_t campaign, const std::string& state) {
    return sql_int(url(), "SELECT count(*) FROM jobs WHERE build IS NULL AND state = '" + state +
                              "' AND campaign_id = " + c(campaign));
  }
  bool job_done(int64_t job) {
    return sql_int(url(), "SELECT count(*) FROM jobs WHERE state = 'done' AND id = " + c(job)) == 1;
  }
  void wait_campaign_done(int64_t campaign, std::chrono::milliseconds timeout = 120s) {
    const std::string q = "SELECT count(*) FROM jobs WHERE state <> 'done' AND campaign_id = " + c(campaign);
    ASSERT_TRUE(poll_until([&] { return sql_int(url(), q) == 0; }, timeout, 100ms))
        << sql_int(url(), q) << " jobs of campaign " << campaign << " not done";
  }
  json kernel(const std::string& label) {
    Result r = cli({"kernels", "--json"});
    EXPECT_EQ(r.exit, 0) << r.err;
    for (const auto& k : json::parse(r.out))
      if (k.value("label", "") == label) return k;
    return json();
  }
  // Name of the agent that holds or ran job `id`.
  std::string agent_of(int64_t job) {
    const Rows r = sql_once(url(), "SELECT coalesce(a.name, '') FROM jobs j LEFT JOIN agents a ON a.id = j.agent_id"
                              " WHERE j.id = " + c(job));
    return r.empty() ? "" : r[0][0];
  }

  std::string image_, src_, good_patch_, bad_patch_, address_;
  Proc* serve_ = nullptr;
};

// The build job waits for a builder (an agent of the label cannot take it);
// the test jobs wait for the build, then run only on an agent whose uname -r
// is the built release, and the kernel is registered as a `kernel build`
// would register it.
TEST_F(BuilderE2E, BuildsOnABuilderThenTestsOnlyOnTheBuiltKernel) {
  // An agent of the label, on some other release: the kernel before the rebuild.
  agent("old-toy", {"--kernel-label", "toy", "--uname-release", "6.1.0-toy-lfdeadbeef"});
  const int64_t id = run_build_campaign({good_patch_});
  const int64_t build = build_job(id);
  EXPECT_EQ(jobs_in(id, "waiting"), 2);
  Result show = cli({"campaign", "show", c(id)});
  EXPECT_NE(show.out.find("waiting"), std::string::npos) << show.out;
  EXPECT_NE(show.out.find("queued: waiting for a builder agent"), std::string::npos) << show.out;
  // No builder yet: nothing may move, however long the old agent polls.
  std::this_thread::sleep_for(3s);
  EXPECT_EQ(sql_int(url(), "SELECT attempt FROM jobs WHERE id = " + c(build)), 0) << "leased by a non-builder";
  EXPECT_EQ(jobs_in(id, "waiting"), 2);

  builder("builder");
  ASSERT_TRUE(poll_until([&] { return job_done(build); }, 120s, 100ms)) << "the build job never ended";
  EXPECT_EQ(agent_of(build), "builder");
  EXPECT_EQ(sql_int(url(), "SELECT verdict FROM jobs WHERE id = " + c(build)), 1);
  const json k = kernel("toy");
  ASSERT_FALSE(k.is_null()) << "kernel toy was not registered";
  EXPECT_EQ(k.value("status", ""), "ready");
  const std::string release = k.value("release", "");
  EXPECT_EQ(release.rfind("6.1.0-toy-lf", 0), 0u) << k.dump();
  EXPECT_EQ(release.size(), std::string("6.1.0-toy-lf").size() + 8) << release;
  EXPECT_EQ(k.value("sha256", "").size(), 64u) << k.dump();
  ASSERT_EQ(k.at("patches").size(), 1u) << k.dump();
  EXPECT_EQ(k.at("patches")[0].value("subject", ""), "[PATCH] namei: shout line two");
  EXPECT_EQ(k.at("patches")[0].value("sha256", "").size(), 64u);
  EXPECT_NE(k.value("inputs_hash", ""), "");
  EXPECT_NE(slurp(logs_ + "/builder.out").find("job.build_progress"), std::string::npos)
      << "kbuild progress is not in the builder's log";

  // Queued for the built release only: the old agent (and the builder, on the
  // host label) leave them alone.
  EXPECT_EQ(sql_int(url(), "SELECT count(*) FROM jobs WHERE build IS NULL AND release = '" + release +
                               "' AND campaign_id = " + c(id)),
            2);
  std::this_thread::sleep_for(3s);
  EXPECT_EQ(jobs_in(id, "queued"), 2) << "a test job of the rebuilt kernel ran on an agent of another release";

  agent("new-toy", {"--kernel-label", "toy", "--uname-release", release});
  wait_campaign_done(id);
  for (const auto& r : sql_once(url(), "SELECT j.id, coalesce(a.name, ''), j.verdict FROM jobs j LEFT JOIN agents a"
                                  " ON a.id = j.agent_id WHERE j.build IS NULL AND j.campaign_id = " + c(id))) {
    EXPECT_EQ(r[1], "new-toy") << "job " << r[0];
    EXPECT_EQ(r[2], "1") << "job " << r[0];
  }
  show = cli({"campaign", "show", c(id)});
  EXPECT_EQ(show.exit, 0) << show.err;
  EXPECT_NE(show.out.find("build job " + c(build) + ": kernel toy"), std::string::npos) << show.out;
  EXPECT_NE(show.out.find("run on agents whose uname -r is " + release), std::string::npos) << show.out;
  Result list = cli({"campaign", "show", c(id), "--json"});
  EXPECT_EQ(json::parse(list.out).value("state", ""), "CAMPAIGN_STATE_DONE") << list.out;
}

// A patch that does not apply: the kernel is registered as a build-failure
// with the log tail, and the jobs waiting for it end with a reason.
TEST_F(BuilderE2E, BuildFailureEndsTheWaitingJobsWithTheReason) {
  builder("builder");
  agent("toy", {"--kernel-label", "toy", "--uname-release", "6.1.0-toy-lf00000000"});
  const int64_t id = run_build_campaign({good_patch_, bad_patch_});
  const int64_t build = build_job(id);
  wait_campaign_done(id);
  EXPECT_EQ(sql_int(url(), "SELECT verdict FROM jobs WHERE id = " + c(build)), 8);  // BUILD_FAILURE
  EXPECT_NE(sql_once(url(), "SELECT reason FROM jobs WHERE id = " + c(build))[0][0].find("patch failed"),
            std::string::npos);
  const json k = kernel("toy");
  ASSERT_FALSE(k.is_null());
  EXPECT_EQ(k.value("status", ""), "build-failure");
  EXPECT_NE(k.value("build_log_tail", "").find("Hunk #1 FAILED"), std::string::npos) << k.dump();
  EXPECT_NE(k.value("version", "").find("patch \"0002-does-not-apply.patch\" does not apply"), std::string::npos)
      << k.dump();
  for (const auto& r : sql_once(url(), "SELECT id, state, verdict, coalesce(reason, ''), attempt FROM jobs"
                                  " WHERE build IS NULL AND campaign_id = " + c(id))) {
    EXPECT_EQ(r[1], "done");
    EXPECT_EQ(r[2], "8") << "job " << r[0];
    EXPECT_NE(r[3].find("kernel toy did not build (build job " + c(build) + ", patch failed"), std::string::npos)
        << r[3];
    EXPECT_EQ(r[4], "0") << "job " << r[0] << " ran although its kernel did not build";
  }
  Result show = cli({"campaign", "show", c(id)});
  EXPECT_NE(show.out.find("build-failure"), std::string::npos) << show.out;
  EXPECT_NE(show.out.find("did not build"), std::string::npos) << show.out;
  // `vm run` refuses the failed kernel at start, with the reason.
  Result vm = cli({"vm", "run", "--kernel", "toy", "--cache-dir", *dir_ / "cache"});
  EXPECT_EQ(vm.exit, 2);
  EXPECT_NE(vm.err.find("build-failure"), std::string::npos) << vm.err;
}

// A schedule with a build fires (made due here) and creates the build job and
// the test jobs; the same inputs as an earlier campaign come from the build
// cache: built once, the build job reports cached.
TEST_F(BuilderE2E, ScheduleWithABuildFiresAndReusesTheBuildCache) {
  builder("builder");
  const int64_t first = run_build_campaign({good_patch_});
  ASSERT_TRUE(poll_until([&] { return job_done(build_job(first)); }, 120s, 100ms));
  const std::string release = kernel("toy").value("release", "");
  ASSERT_FALSE(release.empty());
  agent("toy", {"--kernel-label", "toy", "--uname-release", release});
  wait_campaign_done(first);

  Result add = cli({"schedule", "add", "--name", "nightly-toy", "--cron", "0 2 * * *", "--scenario",
                    "setattr-lookup", "--kernel", "toy", "--duration", "300ms", "--build", "toy", "--source", src_,
                    "--source-root", dir_->path(), "--patch", good_patch_, "--json"});
  ASSERT_EQ(add.exit, 0) << add.out << add.err;
  const int64_t sid = std::stoll(json::parse(add.out).at("id").get<std::string>());  // proto JSON: int64 as text
  EXPECT_EQ(json::parse(add.out).at("campaign").at("builds").size(), 1u) << add.out;
  // Due now: the coordinator's scheduler fires it at its next tick.
  sql_once(url(), "UPDATE schedules SET next_run = now() - interval '1 second' WHERE id = " + c(sid));
  int64_t second = 0;
  ASSERT_TRUE(poll_until(
      [&] {
        const Rows r = sql_once(url(), "SELECT id FROM campaigns WHERE schedule_id = " + c(sid));
        if (!r.empty()) second = std::stoll(r[0][0]);
        return second != 0;
      },
      30s, 100ms))
      << "the schedule did not fire";
  EXPECT_EQ(sql_int(url(), "SELECT count(*) FROM jobs WHERE build IS NOT NULL AND campaign_id = " + c(second)), 1);
  EXPECT_EQ(sql_int(url(), "SELECT count(*) FROM jobs WHERE build IS NULL AND campaign_id = " + c(second)), 1);
  wait_campaign_done(second);
  EXPECT_EQ(sql_int(url(), "SELECT count(*) FROM jobs WHERE verdict = 1 AND campaign_id = " + c(second)), 2);
  // One build across both campaigns; the second build job said cached.
  EXPECT_EQ(build_count(*dir_ / "cache"), 1);
  const std::string log = slurp(logs_ + "/builder.out");
  EXPECT_NE(log.find("job.build_done job=" + c(build_job(second)) + " attempt=1 label=toy ok=true release=" +
                     release + " cached=true"),
            std::string::npos)
      << log;
  EXPECT_EQ(kernel("toy").value("build_seconds", 0.0), 0.0) << "a cached build took time";
}

// Issue 41 §1, the attack as sent: CreateCampaign with a build whose patch
// and config fragment are /etc/shadow, and one whose source climbs out of
// the source roots. Each is refused with INVALID_ARGUMENT naming why, and
// nothing is queued; the same build carrying its patch as content is taken
// (the control).
TEST_F(BuilderE2E, ABuildNamingFilesOnTheBuilderIsRefused) {
  auto channel = grpc::CreateChannel(address_, grpc::InsecureChannelCredentials());
  auto stub = v1::ControlService::NewStub(channel);
  const std::string token = slurp(token_file_).substr(0, 32);
  auto create = [&](const v1::KernelBuild& b) {
    v1::CreateCampaignRequest req;
    auto* spec = req.mutable_spec();
    spec->set_name("attack");
    spec->add_scenarios("setattr-lookup");
    spec->add_kernels("toy");
    *spec->add_builds() = b;
    v1::Campaign resp;
    grpc::ClientContext ctx;
    ctx.AddMetadata("authorization", "Bearer " + token);
    return stub->CreateCampaign(&ctx, req, &resp);
  };
  v1::KernelBuild shadow;
  shadow.set_label("toy");
  shadow.set_source("linux");
  shadow.add_patches("/etc/shadow");
  grpc::Status s = create(shadow);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message();
  EXPECT_NE(s.error_message().find("sent as content"), std::string::npos) << s.error_message();
  v1::KernelBuild fragment;
  fragment.set_label("toy");
  fragment.set_source("linux");
  fragment.add_config_fragments("/etc/shadow");
  s = create(fragment);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message();
  for (const char* source : {"/etc", "../../etc", "linux/../../../etc"}) {
    v1::KernelBuild climb;
    climb.set_label("toy");
    climb.set_source(source);
    s = create(climb);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << source << ": " << s.error_message();
  }
  EXPECT_EQ(sql_int(url(), "SELECT count(*) FROM campaigns"), 0);
  // The control: the patch as content.
  v1::KernelBuild ok;
  ok.set_label("toy");
  ok.set_source("linux");
  auto* f = ok.add_patch_files();
  f->set_name("0001-namei.patch");
  f->set_content(slurp(good_patch_));
  s = create(ok);
  EXPECT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(sql_int(url(), "SELECT count(*) FROM campaigns"), 1);
}

// Issue 41 §1 on a real builder: a source tree whose Makefile reads the
// builder's token, /etc/shadow and a 0600 file of root's, dumps them into
// the build log and fails, so that the log's tail is what the unauthenticated
// kernel page shows. In the sandbox the reads fail; the build ran as the
// build user. (As root, before the sandbox, the tail held them all.)
TEST_F(BuilderE2E, AHostileSourceTreeReadsNothingOfTheBuilders) {
  const std::string secret = *dir_ / "root-only";
  std::ofstream(secret) << "ROOT-ONLY-SECRET\n";
  stdfs::permissions(secret, stdfs::perms::owner_read | stdfs::perms::owner_write);
  std::ofstream(src_ + "/Makefile", std::ios::trunc)
      << "VERSION = 6\nPATCHLEVEL = 1\nallnoconfig:\n\tmkdir -p $(O)\n\tgrep '^CONFIG_' $(KCONFIG_ALLCONFIG) > $(O)/.config\n"
         "bzImage:\n"
         "\t-id -un\n"
         "\t-cat " + token_file_ + "\n"
         "\t-head -n 3 /etc/shadow\n"
         "\t-cat " + secret + "\n"
         "\tfalse\n";
  builder("builder");
  const int64_t id = run_build_campaign({});
  ASSERT_TRUE(poll_until([&] { return job_done(build_job(id)); }, 120s, 100ms));
  const json k = kernel("toy");
  ASSERT_EQ(k.value("status", ""), "build-failure") << k.dump();
  const std::string tail = k.value("build_log_tail", "");
  EXPECT_NE(tail.find("leapfrog-build"), std::string::npos) << "the build did not run as the build user: " << tail;
  EXPECT_EQ(tail.find(slurp(token_file_).substr(0, 32)), std::string::npos) << "the token leaked: " << tail;
  EXPECT_EQ(tail.find("root:"), std::string::npos) << "/etc/shadow leaked: " << tail;
  EXPECT_EQ(tail.find("ROOT-ONLY-SECRET"), std::string::npos) << "a 0600 file leaked: " << tail;
  // The probes ran (their refusals are in the log), so their silence means something.
  EXPECT_NE(tail.find("/etc/shadow"), std::string::npos) << tail;
}

// Bad build flags get one clear error line each, and nothing is queued.
TEST_F(BuilderE2E, BadBuildInputIsRefusedClearly) {
  auto expect_error = [&](std::vector<std::string> args, const std::string& want) {
    std::vector<std::string> all = {"campaign", "run", "--scenario", "setattr-lookup"};
    all.insert(all.end(), args.begin(), args.end());
    Result r = cli(all);
    EXPECT_EQ(r.exit, 2) << r.out << r.err;
    EXPECT_NE(r.err.find(want), std::string::npos) << "want \"" << want << "\" in: " << r.err;
  };
  expect_error({"--kernel", "toy", "--build", "toy"}, "--source (a kernel source folder or tarball) is required");
  const std::string root = dir_->path();
  expect_error({"--kernel", "other", "--build", "toy", "--source", src_, "--source-root", root},
               "not among the campaign's kernels");
  expect_error({"--build", "host", "--source", src_, "--source-root", root}, "cannot be built");
  expect_error({"--kernel", "toy", "--build", "toy", "--source", *dir_ / "no-such-tree"}, "no such file or folder");
  expect_error({"--kernel", "toy", "--build", "toy", "--source", src_, "--source-root", root, "--patch",
                *dir_ / "nope.patch"},
               "no such file");
  // A source outside every source root, and a name that climbs out of one.
  expect_error({"--kernel", "toy", "--build", "toy", "--source", src_}, "is under no source root (/usr/src)");
  expect_error({"--kernel", "toy", "--build", "toy", "--source", "../../etc"}, "has a \"..\" component");
  expect_error({"--kernel", "toy", "--patch", good_patch_}, "add --build LABEL");
  EXPECT_EQ(sql_int(url(), "SELECT count(*) FROM campaigns"), 0);
  // Positive control: the same flags, complete, are accepted.
  Result ok = cli({"campaign", "run", "--scenario", "setattr-lookup", "--kernel", "toy", "--build", "toy",
                   "--source", src_, "--source-root", root, "--json"});
  EXPECT_EQ(ok.exit, 0) << ok.err;
  EXPECT_EQ(sql_int(url(), "SELECT count(*) FROM campaigns"), 1);
}

// `vm run` for a label not built yet waits for it with a log line instead
// of failing (and stops cleanly when asked).
TEST_F(BuilderE2E, VmRunWaitsForAKernelNotBuiltYet) {
  Proc* vm = spawn("vm-run", {LEAPFROG, "--coordinator", address_, "--token-file", token_file_, "--data-dir",
                              *dir_ / "vmdata", "vm", "run", "--kernel", "not-built-yet", "--cache-dir",
                              *dir_ / "cache"});
  ASSERT_TRUE(poll_until(
      [&] {
        return (slurp(vm->out_file()) + slurp(vm->err_file())).find("vm.waiting_for_kernel kernel=not-built-yet") !=
               std::string::npos;
      },
      30s, 100ms))
      << slurp(vm->out_file()) << slurp(vm->err_file());
  std::this_thread::sleep_for(2s);
  EXPECT_FALSE(vm->exited()) << "vm run gave up on a kernel that is not built yet";
  vm->signal(SIGTERM);
  ASSERT_TRUE(poll_until([&] { return vm->exited(); }, 20s, 100ms));
}

// A builder killed mid-build: the lease expires and another builder builds.
TEST_F(BuilderE2E, ExpiredBuildLeaseIsRequeued) {
  // The first build sleeps, so the builder is killed while it holds the lease.
  std::ofstream(src_ + "/Makefile", std::ios::trunc)
      << toy_makefile().insert(std::string("bzImage:\n").size() + toy_makefile().find("bzImage:\n"),
                               "\t@if [ ! -f $(O)/slept ]; then touch $(O)/slept; sleep 8; fi\n");
  Proc* first = builder("builder-1", *dir_ / "cache-1");
  const int64_t id = run_build_campaign({});
  const int64_t build = build_job(id);
  ASSERT_TRUE(poll_until([&] { return agent_of(build) == "builder-1"; }, 60s, 50ms));
  first->signal(SIGKILL);
  first->stop();
  builder("builder-2");
  ASSERT_TRUE(poll_until([&] { return job_done(build); }, 120s, 100ms));
  EXPECT_EQ(agent_of(build), "builder-2");
  EXPECT_EQ(sql_int(url(), "SELECT attempt FROM jobs WHERE id = " + c(build)), 2);
  EXPECT_EQ(sql_int(url(), "SELECT verdict FROM jobs WHERE id = " + c(build)), 1);
  EXPECT_EQ(jobs_in(id, "queued"), 2);
}

// A VM of the label runs the old kernel; the campaign rebuilds the label (the
// toy build yields a different image: the Debian kernel padded, so its sha256
// changes), and the launcher reboots the idle VM into the new image. Needs
// QEMU and leapfrog-agent-static, like tests/vm_e2e_test.cc.
TEST_F(BuilderE2E, LauncherRebootsIdleVmsIntoARebuiltKernel) {
  const std::string static_agent = stdfs::path(LEAPFROG).parent_path() / "leapfrog-agent-static";
  if (!stdfs::exists(static_agent)) GTEST_SKIP() << "no " << static_agent;
  if (access("/usr/bin/qemu-system-x86_64", X_OK) != 0) GTEST_SKIP() << "no qemu-system-x86_64";
  const std::string cache = *dir_ / "cache";
  const std::string padded = src_ + "/vmlinuz-padded";
  stdfs::copy_file(image_, padded);
  std::ofstream(padded, std::ios::app) << std::string(4096, '\0');
  std::ofstream(src_ + "/Makefile", std::ios::trunc) << toy_makefile("vmlinuz-padded");
  Result add = cli({"kernel", "add", "toy", image_, "--cache-dir", cache, "--json", "--no-prepare"});
  ASSERT_EQ(add.exit, 0) << add.out << add.err;
  const std::string old_sha = kernel("toy").value("sha256", "");
  Proc* vm = spawn("launcher", {LEAPFROG, "--coordinator", address_, "--token-file", token_file_, "--data-dir",
                                *dir_ / "vmdata", "vm", "run", "--kernel", "toy", "--count", "1", "--cache-dir", cache});
  auto log = [&] { return slurp(vm->out_file()) + slurp(vm->err_file()); };
  ASSERT_TRUE(poll_until([&] { return log().find("vm.registered") != std::string::npos || vm->exited(); }, 240s, 200ms))
      << log();
  ASSERT_FALSE(vm->exited()) << log();

  builder("builder", cache);
  const int64_t id = run_build_campaign({good_patch_});
  ASSERT_TRUE(poll_until([&] { return job_done(build_job(id)); }, 120s, 100ms));
  const json k = kernel("toy");
  ASSERT_EQ(k.value("status", ""), "ready") << k.dump();
  ASSERT_NE(k.value("sha256", ""), old_sha) << "the toy build should change the image";
  ASSERT_TRUE(poll_until([&] { return log().find("vm.reboot_new_kernel") != std::string::npos; }, 60s, 200ms))
      << log();
  EXPECT_NE(log().find("vm.kernel_replaced kernel=toy"), std::string::npos) << log();
  // Registered again after the reboot (as a template's copy, a later generation).
  auto registered_after_reboot = [&] {
    const std::string text = log();
    const size_t reboot = text.find("vm.reboot_new_kernel");
    return reboot != std::string::npos && text.find("vm.registered", reboot) != std::string::npos;
  };
  ASSERT_TRUE(poll_until([&] { return registered_after_reboot() || vm->exited(); }, 240s, 200ms))
      << "the VM did not come back with the rebuilt kernel: " << log();
  EXPECT_FALSE(vm->exited()) << log();
}

}  // namespace
