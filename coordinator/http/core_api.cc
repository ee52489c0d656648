// Endpoints over campaigns, jobs, outcomes, agents, kernels, schedules and
// lookup-scale results (docs/api.md). Campaigns and schedules go through
// their use-cases (coordinator/usecases/), as the gRPC ControlService does.

#include <httplib.h>

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

#include "coordinator/campaign.h"
#include "coordinator/http/api.h"
#include "coordinator/http/api_json.h"
#include "coordinator/http/http_server.h"
#include "coordinator/scaling.h"
#include "coordinator/usecases/campaigns.h"
#include "coordinator/usecases/schedules.h"

namespace leapfrog::coord {

using nlohmann::json;

namespace {

constexpr uint32_t kTrendNights = 14;

usecases::Campaigns campaigns(const ApiContext& ctx) {
  return usecases::Campaigns(ctx.store, ctx.clock, ctx.options.offline_after);
}

usecases::Schedules schedules(const ApiContext& ctx) {
  return usecases::Schedules(ctx.store, ctx.clock);
}

// Scenario x kernel x file system of one campaign, with counts by verdict
// (done jobs) or state (queued, leased, waiting): from the summaries, never
// from every job.
json matrix_of(const std::vector<CellSummary>& cells) {
  std::set<std::string> scenarios, kernels, filesystems;
  json out_cells = json::array();
  for (const auto& cell : cells) {
    scenarios.insert(cell.scenario);
    kernels.insert(cell.kernel_label);
    filesystems.insert(cell.fs);
    json c = json::object();
    for (const auto& [verdict, n] : cell.done) c[verdict_name(verdict)] = n;
    for (const auto& [state, n] : cell.pending) c[job_state_name(state)] = n;
    out_cells.push_back(json{{"scenario", cell.scenario},
                             {"kernel", cell.kernel_label},
                             {"fs", cell.fs},
                             {"counts", c}});
  }
  return json{{"scenarios", scenarios},
              {"kernels", kernels},
              {"filesystems", filesystems},
              {"cells", out_cells}};
}

json trend_point(const v1::Campaign& c) {
  json j = to_json(c);
  return json{{"id", j["id"]},
              {"name", j["name"]},
              {"created_at", j["created_at"]},
              {"state", j["state"]},
              {"jobs", j["jobs"]},
              {"by_verdict", j["by_verdict"]},
              {"violations", j["violations"]}};
}

// Why the campaign's queued jobs have no agent to run them (campaign.h), as
// usecases::Campaigns::get() filled them in.
json warnings_of(const v1::Campaign& c) {
  json out = json::array();
  for (const auto& w : c.warnings()) out.push_back(w);
  return out;
}

// The nightly and the trend: the latest campaigns made by a schedule (or of
// any kind when none was), and every running campaign, each found by the
// store's filters rather than among the latest few.
json overview(ApiContext& ctx) {
  CampaignQuery recent;
  recent.scheduled_only = true;
  recent.limit = kTrendNights;
  auto found = ctx.store.page_campaigns(recent).items;
  const bool scheduled = !found.empty();
  if (!scheduled) {
    recent.scheduled_only = false;
    found = ctx.store.page_campaigns(recent).items;
  }
  std::vector<const v1::Campaign*> nightly;
  for (const auto& c : found) nightly.push_back(&c);
  json out{{"scheduled", scheduled},
           {"campaign", nullptr},
           {"matrix", nullptr},
           {"warnings", json::array()}};
  if (!nightly.empty()) {
    out["campaign"] = to_json(*nightly.front());
    out["matrix"] = matrix_of(ctx.store.campaign_cells(nightly.front()->id()));
    out["warnings"] = campaigns(ctx).warnings(*nightly.front());
  }
  json trend = json::array();
  for (size_t i = std::min<size_t>(nightly.size(), kTrendNights); i-- > 0;)
    trend.push_back(trend_point(*nightly[i]));
  out["trend"] = trend;
  CampaignQuery live;
  live.running_only = true;
  live.limit = kCampaignPage.max;
  const auto running_page = ctx.store.page_campaigns(live);
  json running = json::array();
  for (const auto& c : running_page.items) running.push_back(to_json(c));
  out["running"] = running;
  out["running_next_page"] = next_page(running_page.next_page_token);
  // Nightly scaling runs: each kernel whose latest run dropped significantly
  // below its previous one, with the points and both runs' jobs.
  json scaling = json::array();
  for (const auto& r : scaling_regressions(ctx.store)) {
    json drops = json::array();
    for (const auto& c : r.drops) drops.push_back(to_json(c));
    scaling.push_back({{"kernel", r.kernel},
                       {"before_job", r.before.job_id()},
                       {"after_job", r.after.job_id()},
                       {"before_runs", r.before_runs},
                       {"after_runs", r.after_runs},
                       {"after_campaign", r.after.campaign_id()},
                       {"drops", drops}});
  }
  out["scaling_regressions"] = scaling;
  return out;
}

json agents(ApiContext& ctx, const httplib::Request& req) {
  const TimePoint now = ctx.clock.now();
  json out = json::array();
  const auto page = ctx.store.page_agents(
      now - ctx.options.offline_after,
      query_uint(req, "limit", kAgentPage.fallback, 1, kAgentPage.max), query_page(req));
  // The busy agents' jobs in one read, not one query per agent.
  std::vector<int64_t> busy;
  for (const auto& a : page.items)
    if (a.current_job() != 0) busy.push_back(a.current_job());
  const auto jobs = ctx.store.get_jobs(busy);
  for (const auto& a : page.items) {
    json j = to_json(a);
    j["current_job"] = nullptr;
    if (auto it = jobs.find(a.current_job()); a.current_job() != 0 && it != jobs.end())
      j["current_job"] = to_json(it->second);
    out.push_back(std::move(j));
  }
  return json{
      {"now", iso_time(now)}, {"agents", out}, {"next_page", next_page(page.next_page_token)}};
}

// Latest passing lookup-scale run per kernel (or only `kernels`), with its
// points and machine; with two kernels, the second's run set against the
// first's, point by point (coordinator/scaling.h): their latest campaigns'
// runs, or their newest `last` runs.
json scaling(ApiContext& ctx, const std::vector<std::string>& kernels, const std::string& test,
             uint32_t last) {
  // NoScalingRun is a 404 (error_status.h).
  const ScalingRuns found = latest_scaling_runs(ctx.store, kernels);
  json runs = json::array();
  for (const auto& o : found.runs) {
    json j = to_json(o);
    runs.push_back(json{{"kernel", o.kernel_label()},
                        {"job_id", o.job_id()},
                        {"campaign_id", o.campaign_id()},
                        {"fs", o.spec().fs()},
                        {"reported_at", j["reported_at"]},
                        {"points", j["scale"]},
                        {"host", scale_host(o)}});
  }
  json out{{"kernels", found.available}, {"runs", runs}, {"comparison", nullptr}};
  if (found.runs.size() == 2) {
    const auto sets =
        scaling_sets(ctx.store, {found.runs[0].kernel_label(), found.runs[1].kernel_label()}, last);
    std::vector<RunPoints> before, after;
    json jobs = json::array({json::array(), json::array()});
    for (size_t side = 0; side < 2; ++side)
      for (const auto& r : sets[side]) {
        (side == 0 ? before : after).push_back(run_points(r));
        jobs[side].push_back(r.job_id());
      }
    json cmp = json::array();
    for (const auto& c : compare_runs(before, after, test)) cmp.push_back(to_json(c));
    out["comparison"] = json{{"before", found.runs[0].kernel_label()},
                             {"after", found.runs[1].kernel_label()},
                             {"set", last == 0 ? "latest campaign" : "newest runs"},
                             {"before_jobs", jobs[0]},
                             {"after_jobs", jobs[1]},
                             {"points", cmp}};
  }
  return out;
}

}  // namespace

void register_core_api(ApiRouter& r, ApiContext ctx) {
  r.get("/api/overview", [ctx](const httplib::Request&) mutable { return overview(ctx); });

  // Lists page (docs/api.md): ?limit=&page=, answered with next_page (null
  // when nothing follows).
  r.get("/api/campaigns", [ctx](const httplib::Request& req) {
    json out = json::array();
    CampaignQuery q;
    q.limit = query_uint(req, "limit", kCampaignPage.fallback, 1, kCampaignPage.max);
    q.page_token = query_page(req);
    const auto page = campaigns(ctx).list(q);
    for (const auto& c : page.items) out.push_back(to_json(c));
    return json{{"campaigns", out}, {"next_page", next_page(page.next_page_token)}};
  });
  r.get(R"(/api/campaigns/([^/]+))", [ctx](const httplib::Request& req) {
    const v1::Campaign c = campaigns(ctx).get(path_id(req, 1));
    json jobs = json::array();
    const auto page = campaigns(ctx).jobs(
        c.id(), query_uint(req, "limit", kJobPage.fallback, 1, kJobPage.max), query_page(req));
    for (const auto& j : page.items) jobs.push_back(to_json(j));
    return json{{"campaign", to_json(c)},
                {"matrix", matrix_of(ctx.store.campaign_cells(c.id()))},
                {"jobs", jobs},
                {"jobs_next_page", next_page(page.next_page_token)},
                {"warnings", warnings_of(c)}};
  });

  r.get(R"(/api/jobs/([^/]+))", [ctx](const httplib::Request& req) {
    const int64_t id = path_id(req, 1);
    auto job = ctx.store.get_job(id);
    if (!job) throw RequestError(ErrorKind::kNotFound, "no job \"" + std::to_string(id) + "\"");
    OutcomeFilter f;
    f.job_id = id;
    json outcomes = json::array();
    for (const auto& o : ctx.store.find_outcomes(f)) outcomes.push_back(to_json(o));
    return json{{"job", to_json(*job)},
                {"outcomes", outcomes},
                {"kernels", kernels_by_label(ctx.store, {job->kernel_label()})}};
  });

  // Without violations: a job's page has them.
  r.get("/api/outcomes", [ctx](const httplib::Request& req) {
    OutcomeQuery q;
    q.failed_only = req.has_param("failed") && req.get_param_value("failed") != "0";
    q.scenario = req.get_param_value("scenario");
    q.kernel_label = req.get_param_value("kernel");
    q.limit = query_uint(req, "limit", kOutcomePage.fallback, 1, kOutcomePage.max);
    q.page_token = query_page(req);
    if (req.has_param("campaign")) q.campaign_id = query_uint(req, "campaign", 0, 1, UINT32_MAX);
    json out = json::array();
    const auto page = campaigns(ctx).outcomes(q);
    for (const auto& o : page.items) out.push_back(to_json(o));
    return json{{"outcomes", out}, {"next_page", next_page(page.next_page_token)}};
  });

  r.get("/api/agents", [ctx](const httplib::Request& req) mutable { return agents(ctx, req); });

  r.get("/api/kernels", [ctx](const httplib::Request& req) {
    json out = json::array();
    const auto page = ctx.store.page_kernels(
        query_uint(req, "limit", kKernelPage.fallback, 1, kKernelPage.max), query_page(req));
    for (const auto& k : page.items) out.push_back(to_json(k));
    return json{{"kernels", out}, {"next_page", next_page(page.next_page_token)}};
  });

  r.get("/api/schedules", [ctx](const httplib::Request& req) {
    json out = json::array();
    const auto page = schedules(ctx).list(
        query_uint(req, "limit", kSchedulePage.fallback, 1, kSchedulePage.max), query_page(req));
    for (const auto& s : page.items) out.push_back(to_json(s));
    return json{{"schedules", out}, {"next_page", next_page(page.next_page_token)}};
  });
  r.action("POST", "/api/schedules", [ctx](const httplib::Request& req) {
    const json body = json_body(req);
    const std::string name = body_string(body, "name");
    const std::string cron = body_string(body, "cron");
    if (!body.contains("campaign"))
      throw RequestError(ErrorKind::kInvalidArgument, "\"campaign\" is missing");
    return to_json(schedules(ctx).add(name, cron, campaign_spec_from_json(body["campaign"])));
  });
  r.action("POST", R"(/api/schedules/([^/]+)/enabled)", [ctx](const httplib::Request& req) {
    const int64_t id = path_id(req, 1);
    const json body = json_body(req);
    if (!body.contains("enabled") || !body["enabled"].is_boolean())
      throw RequestError(ErrorKind::kInvalidArgument, "\"enabled\" must be true or false");
    return to_json(schedules(ctx).set_enabled(id, body["enabled"].get<bool>()));
  });

  r.get("/api/scaling", [ctx](const httplib::Request& req) mutable {
    std::vector<std::string> kernels;
    for (size_t i = 0; i < req.get_param_value_count("kernel"); ++i)
      kernels.push_back(req.get_param_value("kernel", i));
    // last: compare each kernel's newest N runs instead of its latest campaign's.
    return scaling(ctx, kernels, req.get_param_value("test"), query_uint(req, "last", 0, 0, 1000));
  });
}

}  // namespace leapfrog::coord
