// The lists of the HTTP API and of the gRPC control service over a real
// PostgreSQL (issue 23, issue 18 item 11): filters applied before the limit,
// answers that say when more follow, pages that walk a list whole, no
// violation details in lists, and gRPC answers past 4 MiB that reach a client
// on the coordinator's channel.

#include <gtest/gtest.h>
#include <httplib.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <pqxx/pqxx>
#include <set>

#include "coordinator/channel.h"
#include "coordinator/http/http_server.h"
#include "coordinator/pg/test_postgres.h"
#include "coordinator/server.h"
#include "coordinator/store/pg_store.h"
#include "coordinator/triage/pg_triage_store.h"

namespace leapfrog::coord {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;

const std::string kToken = "lists-test-token-7d1e";

class ListsApiTest : public testing::PostgresSuite<ListsApiTest> {
 protected:
  void SetUp() override {
    url_ = pg_->url(fresh_database("lists"));
    store_ = std::make_unique<PgStore>(url_);
    triage_store_ = std::make_unique<triage::PgTriageStore>(url_);
    ServerOptions so;
    so.token = kToken;
    so.triage_store = triage_store_.get();
    grpc_ = std::make_unique<CoordinatorServer>(*store_, clock_, so);
    HttpOptions o;
    o.token = kToken;
    http_ = std::make_unique<HttpServer>(*store_, clock_, o, grpc_->triage());
    client_ = std::make_unique<httplib::Client>("127.0.0.1", http_->port());
    client_->set_read_timeout(60, 0);
  }
  void TearDown() override {
    client_.reset();
    http_.reset();
    grpc_.reset();
    triage_store_.reset();
    store_.reset();
  }

  // GET `path`: the status and the JSON body.
  std::pair<int, json> get(const std::string& path) {
    auto res = client_->Get(path.c_str());
    if (!res) throw std::runtime_error("GET " + path + " failed");
    return {res->status, json::parse(res->body)};
  }

  void sql(const std::string& statement) {
    pqxx::connection c(url_);
    pqxx::work txn(c);
    txn.exec(statement);
    txn.commit();
  }

  // A campaign of `n` jobs on `kernel`, each with an outcome of `verdict`
  // (stored as the store stores them, in one statement), oldest first.
  int64_t campaign_with_outcomes(int n, const std::string& kernel, int verdict) {
    std::vector<NewJob> jobs(static_cast<size_t>(n));
    for (auto& j : jobs) {
      j.spec.set_scenario("setattr-lookup");
      j.spec.set_fs("tmpfs");
      j.kernel_label = kernel;
    }
    v1::CampaignSpec spec;
    spec.set_name("c");
    const int64_t c = store_->create_campaign(spec, jobs, 0, clock_.now());
    sql("INSERT INTO outcomes (job_id, attempt, campaign_id, agent_id, verdict, ops,"
        " lookups_checked, offsets_checked, violation_count, race_window_hits, error, outcome,"
        " reported_at) SELECT id, 1, campaign_id, 'a', " +
        std::to_string(verdict) + ", 0, 0, 0, 0, 0, '', '', now() FROM jobs WHERE campaign_id = " +
        std::to_string(c) + " ORDER BY id");
    return c;
  }

  std::string url_;
  SystemClock clock_;
  std::unique_ptr<PgStore> store_;
  std::unique_ptr<triage::PgTriageStore> triage_store_;
  std::unique_ptr<CoordinatorServer> grpc_;
  std::unique_ptr<HttpServer> http_;
  std::unique_ptr<httplib::Client> client_;
};

TEST_F(ListsApiTest, IssueFiltersApplyBeforeTheLimitAndPagesWalkThemWhole) {
  // 1200 issues; the 30 crashes are the oldest, past any scan of the latest
  // 1000, and 3 of them were found on kernel k9.
  sql("INSERT INTO issues (signature, kind, scenario, title, status, first_seen, last_seen, count,"
      " example_job, example_attempt, example_kernel, example_spec, example_violation)"
      " SELECT 'sig-' || g, CASE WHEN g <= 30 THEN 'crash' ELSE 'violation' END, 'setattr-lookup',"
      " 'issue ' || g, 1, now() - interval '1 day', now() - (1300 - g) * interval '1 second', 1,"
      " 1, 1, 'host', '', '' FROM generate_series(1, 1200) g");
  sql("INSERT INTO issue_kernels SELECT id, 'k9', 1, now(), now() FROM issues"
      " WHERE signature IN ('sig-3', 'sig-7', 'sig-11')");

  std::set<int64_t> crashes;
  std::string page;
  int pages = 0;
  do {
    auto [status, body] =
        get("/api/issues?kind=crash&limit=12" + (page.empty() ? "" : "&page=" + page));
    ASSERT_EQ(status, 200) << body.dump();
    for (const auto& i : body["issues"]) {
      EXPECT_EQ(i["kind"], "ISSUE_KIND_CRASH");
      EXPECT_TRUE(crashes.insert(std::stoll(i["id"].get<std::string>())).second)
          << "issue listed twice";
      EXPECT_FALSE(i.contains("example_violation")) << "lists carry no violation details";
    }
    page = body["next_page_token"].get<std::string>();
    ++pages;
  } while (!page.empty() && pages < 100);
  // The kind filter takes the word or the enum's name; anything else is a 400.
  auto [by_name, named] = get("/api/issues?kind=ISSUE_KIND_CRASH&limit=1000");
  ASSERT_EQ(by_name, 200) << named.dump();
  EXPECT_EQ(named["issues"].size(), crashes.size());
  auto [bad, why] = get("/api/issues?kind=oops");
  EXPECT_EQ(bad, 400);
  EXPECT_NE(why["error"].get<std::string>().find("want violation, crash, hang or boot-failure"),
            std::string::npos)
      << why.dump();
  EXPECT_EQ(crashes.size(), 30u);
  EXPECT_EQ(pages, 3);

  auto [status, body] = get("/api/issues?kernel=k9");
  ASSERT_EQ(status, 200);
  EXPECT_EQ(body["issues"].size(), 3u);
  EXPECT_EQ(body["next_page_token"], "");
  // A full page with more behind says so.
  std::tie(status, body) = get("/api/issues?limit=1000");
  EXPECT_EQ(body["issues"].size(), 1000u);
  EXPECT_NE(body["next_page_token"], "") << "1200 issues listed as if 1000 were all";
  // A token of another list, or none at all, is the caller's mistake.
  EXPECT_EQ(get("/api/issues?page=outcomes:5").first, 400);
  EXPECT_EQ(get("/api/issues?page=%27%3B").first, 400);
  EXPECT_EQ(get("/api/issues?limit=1001").first, 400);
}

TEST_F(ListsApiTest, OutcomeListsPageAndFindAKernelsOutcomesBehindOthers) {
  // One outcome on k2, then 2100 on host: a kernel page that scanned the
  // latest 2000 and filtered them found none.
  campaign_with_outcomes(1, "k2", v1::VERDICT_VIOLATION);
  const int64_t c = campaign_with_outcomes(2100, "host", v1::VERDICT_PASS);
  v1::Kernel k;
  k.set_label("k2");
  store_->add_kernel(k, clock_.now());

  auto [status, body] = get("/api/kernels/k2");
  ASSERT_EQ(status, 200) << body.dump();
  EXPECT_EQ(body["outcomes"].size(), 1u);
  EXPECT_EQ(body["outcomes_next_page_token"], "");

  std::tie(status, body) = get("/api/outcomes?failed=1&limit=1");
  ASSERT_EQ(status, 200);
  ASSERT_EQ(body["outcomes"].size(), 1u);
  EXPECT_EQ(body["outcomes"][0]["kernel_label"], "k2");
  EXPECT_EQ(body["next_page_token"], "");

  // Every outcome of the campaign once, page by page.
  std::set<int64_t> jobs;
  std::string page;
  int pages = 0;
  do {
    std::tie(status, body) = get("/api/outcomes?campaign=" + std::to_string(c) + "&limit=1000" +
                                 (page.empty() ? "" : "&page=" + page));
    ASSERT_EQ(status, 200);
    for (const auto& o : body["outcomes"]) jobs.insert(std::stoll(o["job_id"].get<std::string>()));
    page = body["next_page_token"];
    ++pages;
  } while (!page.empty() && pages < 10);
  EXPECT_EQ(jobs.size(), 2100u);
  EXPECT_EQ(pages, 3);
  EXPECT_EQ(get("/api/outcomes?limit=1001").first, 400);
  EXPECT_EQ(get("/api/outcomes?page=issues:1.2").first, 400);

  // Campaigns and a campaign's jobs page too.
  std::tie(status, body) = get("/api/campaigns?limit=1");
  ASSERT_EQ(body["campaigns"].size(), 1u);
  std::tie(status, body) =
      get("/api/campaigns?limit=1&page=" + body["next_page_token"].get<std::string>());
  ASSERT_EQ(body["campaigns"].size(), 1u);
  EXPECT_EQ(body["next_page_token"], "");
  std::tie(status, body) = get("/api/campaigns/" + std::to_string(c) + "?limit=2000");
  EXPECT_EQ(body["jobs"].size(), 2000u);
  EXPECT_NE(body["jobs_next_page_token"], "");
  EXPECT_EQ(body["matrix"]["cells"][0]["counts"]["queued"], 2100) << body["matrix"].dump();
}

TEST_F(ListsApiTest, TheOverviewFindsTheNightlyBehindManyCampaignsMadeByHand) {
  v1::CampaignSpec spec;
  spec.set_name("nightly");
  NewJob j;
  j.spec.set_scenario("setattr-lookup");
  j.spec.set_fs("tmpfs");
  j.kernel_label = "host";
  const int64_t nightly = store_->create_campaign(spec, {j}, 3, clock_.now());
  spec.set_name("by hand");
  for (int i = 0; i < 210; ++i) store_->create_campaign(spec, {j}, 0, clock_.now());
  auto [status, body] = get("/api/overview");
  ASSERT_EQ(status, 200) << body.dump();
  EXPECT_TRUE(body["scheduled"].get<bool>()) << "the nightly was not among the latest campaigns";
  EXPECT_EQ(body["campaign"]["id"], std::to_string(nightly));
  EXPECT_EQ(body["trend"].size(), 1u);
  EXPECT_EQ(body["running"].size(), 211u);
  EXPECT_EQ(body["running_next_page_token"], "");
  EXPECT_EQ(body["matrix"]["cells"][0]["counts"]["queued"], 1) << body["matrix"].dump();
}

// gRPC answers over 4 MiB (gRPC's default limit) reach a client on the
// coordinator's channel; a default channel refuses them (the control).
TEST_F(ListsApiTest, GrpcAnswersPastFourMebibytesReachTheCoordinatorsChannel) {
  v1::CampaignSpec spec;
  spec.set_name("big");
  std::vector<NewJob> jobs(8);
  for (auto& j : jobs) {
    j.spec.set_scenario("setattr-lookup");
    j.spec.set_fs("tmpfs");
    j.kernel_label = "host";
  }
  store_->create_campaign(spec, jobs, 0, clock_.now());
  v1::Capabilities caps;
  caps.set_kernel_label("host");
  caps.add_filesystems("tmpfs");
  for (int i = 0; i < 8; ++i) {
    auto job = store_->lease_job("a", caps, clock_.now(), 30s);
    ASSERT_TRUE(job);
    v1::Outcome o;
    o.set_verdict(v1::VERDICT_ERROR);
    o.set_console_tail(std::string(900 << 10, 'x'));  // within an outcome's 1 MiB
    ASSERT_EQ(store_->report_outcome("a", job->job_id(), job->attempt(), o, clock_.now()),
              ReportResult::Stored);
  }
  auto list = [&](std::shared_ptr<grpc::Channel> channel, v1::ListOutcomesResponse& resp) {
    auto stub = v1::ControlService::NewStub(channel);
    grpc::ClientContext ctx;
    ctx.AddMetadata("authorization", "Bearer " + kToken);
    ctx.set_deadline(std::chrono::system_clock::now() + 60s);
    v1::ListOutcomesRequest req;
    req.set_failed_only(true);
    return stub->ListOutcomes(&ctx, req, &resp);
  };
  v1::ListOutcomesResponse resp;
  const grpc::Status ok = list(coordinator_channel(grpc_->address()), resp);
  ASSERT_TRUE(ok.ok()) << ok.error_message();
  EXPECT_EQ(resp.outcomes_size(), 8);
  EXPECT_GT(resp.ByteSizeLong(), size_t{4} << 20);
  v1::ListOutcomesResponse refused;
  const grpc::Status s =
      list(grpc::CreateChannel(grpc_->address(), grpc::InsecureChannelCredentials()), refused);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << s.error_message();
}

// Agents, kernels and schedules page by key over gRPC and HTTP: each row
// stored before a walk appears once, in the list's order, while rows arrive
// between pages (before and after the cursor); the answers say when more
// follow; ListAgents without a limit still holds a 1000-agent fleet.
TEST_F(ListsApiTest, AgentsKernelsAndSchedulesPageWholeWhileRowsArrive) {
  auto stub = v1::ControlService::NewStub(coordinator_channel(grpc_->address()));
  auto call = [&](auto method, const auto& req, auto& resp) {
    grpc::ClientContext ctx;
    ctx.AddMetadata("authorization", "Bearer " + kToken);
    ctx.set_deadline(std::chrono::system_clock::now() + 60s);
    return ((*stub).*method)(&ctx, req, &resp);
  };
  v1::Capabilities caps;
  caps.set_kernel_label("host");
  auto agent_name = [](int i) {
    char name[32];
    std::snprintf(name, sizeof name, "agent-%04d", i);
    return std::string(name);
  };
  std::vector<std::string> agents;
  for (int i = 0; i < 60; i += 2) {
    store_->register_agent(agent_name(i), caps, clock_.now());
    agents.push_back(agent_name(i));
  }
  std::vector<std::string> kernels;
  const TimePoint t0 = clock_.now();
  for (int i = 0; i < 30; ++i) {
    v1::Kernel k;
    k.set_label("k" + std::to_string(100 - i));  // labels against time: ties go by label
    store_->add_kernel(k, t0 + std::chrono::microseconds(i / 2));
  }
  for (const auto& k : store_->list_kernels()) kernels.push_back(k.label());
  v1::CampaignSpec spec;
  spec.add_scenarios("setattr-lookup");
  std::vector<int64_t> schedules;
  for (int i = 0; i < 30; ++i)
    schedules.push_back(store_->add_schedule("s" + std::to_string(i), "0 2 * * *", spec, t0).id());

  // Each item of `before` once, in order, among `pages`; nothing twice.
  auto expect_whole = [](const auto& before, const auto& pages, const char* what) {
    std::set<std::decay_t<decltype(pages[0])>> seen;
    for (const auto& x : pages) EXPECT_TRUE(seen.insert(x).second) << what << " listed twice";
    size_t at = 0;
    for (const auto& x : pages)
      if (at < before.size() && x == before[at]) ++at;
    EXPECT_EQ(at, before.size()) << "the pages lost " << what << "s stored before the walk";
  };

  // Agents over gRPC, 7 a page; new agents sort before and after the cursor.
  std::vector<std::string> walked;
  v1::ListAgentsRequest ar;
  ar.set_limit(7);
  int arrived = 1;
  for (int pages = 0; pages < 100; ++pages) {
    v1::ListAgentsResponse resp;
    ASSERT_TRUE(call(&v1::ControlService::Stub::ListAgents, ar, resp).ok());
    EXPECT_LE(resp.agents_size(), 7);
    for (const auto& a : resp.agents()) walked.push_back(a.name());
    if (resp.next_page_token().empty()) break;
    EXPECT_EQ(resp.agents_size(), 7);
    ar.set_page_token(resp.next_page_token());
    store_->register_agent(agent_name(arrived), caps, clock_.now());         // before the cursor
    store_->register_agent(agent_name(1000 + arrived), caps, clock_.now());  // after it
    arrived += 2;
  }
  expect_whole(agents, walked, "agent");
  EXPECT_TRUE(std::is_sorted(walked.begin(), walked.end()));

  // Kernels over HTTP, 4 a page, kernels added meanwhile.
  std::vector<std::string> kwalked;
  std::string page;
  for (int pages = 0; pages < 100; ++pages) {
    auto [status, body] = get("/api/kernels?limit=4" + (page.empty() ? "" : "&page=" + page));
    ASSERT_EQ(status, 200) << body.dump();
    for (const auto& k : body["kernels"]) kwalked.push_back(k["label"].get<std::string>());
    if (body["next_page_token"] == "") break;
    EXPECT_EQ(body["kernels"].size(), 4u);
    page = body["next_page_token"].get<std::string>();
    v1::Kernel k;
    k.set_label("new" + std::to_string(pages));
    store_->add_kernel(k, clock_.now());
  }
  expect_whole(kernels, kwalked, "kernel");
  EXPECT_EQ(kwalked.front(), "k100");
  EXPECT_EQ(kwalked[1], "k99");  // added at the same time: by label

  // Schedules over gRPC and HTTP, 6 a page, schedules added meanwhile.
  std::vector<int64_t> swalked;
  v1::ListSchedulesRequest sr;
  sr.set_limit(6);
  for (int pages = 0; pages < 100; ++pages) {
    v1::ListSchedulesResponse resp;
    ASSERT_TRUE(call(&v1::ControlService::Stub::ListSchedules, sr, resp).ok());
    for (const auto& s : resp.schedules()) swalked.push_back(s.id());
    if (resp.next_page_token().empty()) break;
    sr.set_page_token(resp.next_page_token());
    store_->add_schedule("later", "0 3 * * *", spec, t0);
  }
  expect_whole(schedules, swalked, "schedule");
  std::vector<int64_t> hwalked;
  page.clear();
  for (int pages = 0; pages < 100; ++pages) {
    auto [status, body] = get("/api/schedules?limit=6" + (page.empty() ? "" : "&page=" + page));
    ASSERT_EQ(status, 200) << body.dump();
    for (const auto& s : body["schedules"])
      hwalked.push_back(std::stoll(s["id"].get<std::string>()));
    if (body["next_page_token"] == "") break;
    page = body["next_page_token"].get<std::string>();
  }
  expect_whole(schedules, hwalked, "schedule");

  // Tokens of another list and limits past the maximum are refused.
  EXPECT_EQ(get("/api/agents?page=" + page).first, 400);
  EXPECT_EQ(get("/api/kernels?page=agents:61").first, 400);
  EXPECT_EQ(get("/api/kernels?page=kernels:12.zz").first, 400);
  EXPECT_EQ(get("/api/agents?limit=5001").first, 400);
  EXPECT_EQ(get("/api/schedules?limit=1001").first, 400);
  v1::ListKernelsRequest bad;
  bad.set_page_token(ar.page_token());
  v1::ListKernelsResponse none;
  EXPECT_EQ(call(&v1::ControlService::Stub::ListKernels, bad, none).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);

  // A fleet of 1000 fits the default page (the VM launcher asks without a
  // limit); the 1001st says more follow.
  sql("INSERT INTO agents (id, name, kernel_label, capabilities, registered_at, last_seen)"
      " SELECT 'fleet-' || g, 'fleet-' || lpad(g::text, 4, '0'), 'host', '', now(), now()"
      " FROM generate_series(1, 1000 - (SELECT count(*) FROM agents)) g");
  v1::ListAgentsResponse fleet;
  ASSERT_TRUE(call(&v1::ControlService::Stub::ListAgents, v1::ListAgentsRequest(), fleet).ok());
  EXPECT_EQ(fleet.agents_size(), 1000);
  EXPECT_TRUE(fleet.next_page_token().empty()) << "a fleet of 1000 took more than one page";
  store_->register_agent("zz-one-more", caps, clock_.now());
  fleet.Clear();
  ASSERT_TRUE(call(&v1::ControlService::Stub::ListAgents, v1::ListAgentsRequest(), fleet).ok());
  EXPECT_EQ(fleet.agents_size(), 1000);
  EXPECT_FALSE(fleet.next_page_token().empty());
  auto [status, body] = get("/api/agents");
  EXPECT_EQ(body["agents"].size(), 1000u);
  EXPECT_NE(body["next_page_token"], "");
}

// /api/agents reads the busy agents' jobs in one query (issue 23): each busy
// agent still shows the job it holds, an idle one none, across pages.
TEST_F(ListsApiTest, EachBusyAgentShowsItsOwnJob) {
  v1::CampaignSpec spec;
  spec.set_name("busy");
  std::vector<NewJob> jobs(5);
  for (auto& j : jobs) {
    j.spec.set_scenario("setattr-lookup");
    j.spec.set_fs("tmpfs");
    j.kernel_label = "host";
  }
  store_->create_campaign(spec, jobs, 0, clock_.now());
  v1::Capabilities caps;
  caps.set_kernel_label("host");
  caps.add_filesystems("tmpfs");
  std::map<std::string, int64_t> held;  // agent name -> job id
  for (int i = 0; i < 4; ++i) {
    const std::string name = "busy-" + std::to_string(i);
    const std::string id = store_->register_agent(name, caps, clock_.now());
    auto job = store_->lease_job(id, caps, clock_.now(), 300s);
    ASSERT_TRUE(job);
    held[name] = job->job_id();
  }
  store_->register_agent("idle", caps, clock_.now());
  std::map<std::string, json> seen;
  std::string page;
  for (int pages = 0; pages < 10; ++pages) {
    auto [status, body] =
        get("/api/agents?limit=2" + (page.empty() ? std::string() : "&page=" + page));
    ASSERT_EQ(status, 200) << body.dump();
    for (const auto& a : body["agents"])
      seen[a["agent"]["name"].get<std::string>()] = a.value("current_job", json());
    if (body["next_page_token"] == "") break;
    page = body["next_page_token"].get<std::string>();
  }
  ASSERT_EQ(seen.size(), 5u);
  for (const auto& [name, job_id] : held) {
    ASSERT_TRUE(seen[name].is_object()) << name << " shows no job";
    EXPECT_EQ(seen[name]["job_id"], std::to_string(job_id)) << name;
    EXPECT_EQ(seen[name]["state"], "JOB_STATE_LEASED") << name;
  }
  EXPECT_TRUE(seen["idle"].is_null());
}

// A VM launcher asks only for its own VMs' agents, by name (issue 23): the
// registered ones among the names, each with the job it holds, in one answer
// however large the fleet; names with paging, or too many, are refused.
TEST_F(ListsApiTest, ListAgentsByNameAnswersOnlyThoseAgents) {
  sql("INSERT INTO agents (id, name, kernel_label, capabilities, registered_at, last_seen)"
      " SELECT 'fleet-' || g, 'fleet-' || lpad(g::text, 4, '0'), 'host', '', now(), now()"
      " FROM generate_series(1, 1200) g");
  v1::CampaignSpec spec;
  spec.set_name("vm");
  std::vector<NewJob> jobs(1);
  jobs[0].spec.set_scenario("setattr-lookup");
  jobs[0].spec.set_fs("tmpfs");
  jobs[0].kernel_label = "host";
  store_->create_campaign(spec, jobs, 0, clock_.now());
  v1::Capabilities caps;
  caps.set_kernel_label("host");
  caps.add_filesystems("tmpfs");
  const std::string busy = store_->register_agent("vm-host-1-0", caps, clock_.now());
  store_->register_agent("vm-host-1-1", caps, clock_.now());
  auto job = store_->lease_job(busy, caps, clock_.now(), 300s);
  ASSERT_TRUE(job);

  auto stub = v1::ControlService::NewStub(coordinator_channel(grpc_->address()));
  auto list = [&](const v1::ListAgentsRequest& req, v1::ListAgentsResponse& resp) {
    grpc::ClientContext ctx;
    ctx.AddMetadata("authorization", "Bearer " + kToken);
    ctx.set_deadline(std::chrono::system_clock::now() + 60s);
    return stub->ListAgents(&ctx, req, &resp);
  };
  v1::ListAgentsRequest req;
  for (const char* n : {"vm-host-1-1", "vm-host-1-0", "vm-host-1-2", "fleet-0007"})
    req.add_names(n);
  v1::ListAgentsResponse resp;
  ASSERT_TRUE(list(req, resp).ok());
  ASSERT_EQ(resp.agents_size(), 3);  // vm-host-1-2 never registered
  EXPECT_EQ(resp.agents(0).name(), "fleet-0007");
  EXPECT_EQ(resp.agents(1).name(), "vm-host-1-0");
  EXPECT_EQ(resp.agents(1).current_job(), job->job_id());
  EXPECT_EQ(resp.agents(2).name(), "vm-host-1-1");
  EXPECT_EQ(resp.agents(2).current_job(), 0);
  EXPECT_TRUE(resp.next_page_token().empty());

  v1::ListAgentsRequest paged = req;
  paged.set_limit(2);
  EXPECT_EQ(list(paged, resp).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  v1::ListAgentsRequest too_many;
  for (int i = 0; i < 5001; ++i) too_many.add_names("n" + std::to_string(i));
  EXPECT_EQ(list(too_many, resp).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
}

}  // namespace
}  // namespace leapfrog::coord
