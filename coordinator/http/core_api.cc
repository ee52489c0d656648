// Endpoints over campaigns, jobs, outcomes, agents, kernels, schedules and
// lookup-scale results (docs/api.md). Campaigns and schedules go through
// their use-cases (coordinator/usecases/), as the gRPC ControlService does.

#include <httplib.h>

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

#include "common/outcome/scale_proto.h"
#include "common/proto_time.h"
#include "coordinator/campaign.h"
#include "coordinator/http/api.h"
#include "coordinator/http/api_json.h"
#include "coordinator/http/http_server.h"
#include "coordinator/http/proto_json.h"
#include "coordinator/scaling.h"
#include "coordinator/usecases/campaigns.h"
#include "coordinator/usecases/schedules.h"
#include "leapfrog/v1/http.pb.h"

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
v1::CampaignMatrix matrix_of(const std::vector<CellSummary>& cells) {
  std::set<std::string> scenarios, kernels, filesystems;
  v1::CampaignMatrix out;
  for (const auto& cell : cells) {
    scenarios.insert(cell.scenario);
    kernels.insert(cell.kernel_label);
    filesystems.insert(cell.fs);
    v1::MatrixCell* c = out.add_cells();
    c->set_scenario(cell.scenario);
    c->set_kernel_label(cell.kernel_label);
    c->set_fs(cell.fs);
    for (const auto& [verdict, n] : cell.done) (*c->mutable_counts())[verdict_name(verdict)] = n;
    for (const auto& [state, n] : cell.pending) (*c->mutable_counts())[job_state_name(state)] = n;
  }
  for (const auto& v : scenarios) out.add_scenarios(v);
  for (const auto& v : kernels) out.add_kernels(v);
  for (const auto& v : filesystems) out.add_filesystems(v);
  return out;
}

// The nightly and the trend: the latest campaigns made by a schedule (or of
// any kind when none was), and every running campaign, each found by the
// store's filters rather than among the latest few.
v1::Overview overview(ApiContext& ctx) {
  CampaignQuery recent;
  recent.scheduled_only = true;
  recent.limit = kTrendNights;
  auto found = ctx.store.page_campaigns(recent).items;
  const bool scheduled = !found.empty();
  if (!scheduled) {
    recent.scheduled_only = false;
    found = ctx.store.page_campaigns(recent).items;
  }
  v1::Overview out;
  out.set_scheduled(scheduled);
  if (!found.empty()) {
    *out.mutable_campaign() = found.front();
    // Why the campaign's queued jobs have no agent to run them (campaign.h).
    out.mutable_campaign()->clear_warnings();
    for (auto& w : campaigns(ctx).warnings(found.front())) out.mutable_campaign()->add_warnings(w);
    *out.mutable_matrix() = matrix_of(ctx.store.campaign_cells(found.front().id()));
  }
  for (size_t i = std::min<size_t>(found.size(), kTrendNights); i-- > 0;)
    *out.add_trend() = found[i];
  CampaignQuery live;
  live.running_only = true;
  live.limit = kCampaignPage.max;
  auto running_page = ctx.store.page_campaigns(live);
  for (auto& c : running_page.items) *out.add_running() = std::move(c);
  out.set_running_next_page_token(running_page.next_page_token);
  // Nightly scaling runs: each kernel whose latest run dropped significantly
  // below its previous one, with the points and both runs' jobs.
  for (const auto& r : scaling_regressions(ctx.store)) {
    v1::ScalingRegression* s = out.add_scaling_regressions();
    s->set_kernel_label(r.kernel);
    s->set_before_job_id(r.before.job_id());
    s->set_after_job_id(r.after.job_id());
    s->set_before_runs(r.before_runs);
    s->set_after_runs(r.after_runs);
    s->set_after_campaign_id(r.after.campaign_id());
    for (const auto& c : r.drops) *s->add_drops() = to_proto(c);
  }
  return out;
}

v1::AgentsPage agents(ApiContext& ctx, const httplib::Request& req) {
  const TimePoint now = ctx.clock.now();
  const auto page = ctx.store.page_agents(
      now - ctx.options.offline_after,
      query_uint(req, "limit", kAgentPage.fallback, 1, kAgentPage.max), query_page(req));
  // The busy agents' jobs in one read, not one query per agent.
  std::vector<int64_t> busy;
  for (const auto& a : page.items)
    if (a.current_job() != 0) busy.push_back(a.current_job());
  const auto jobs = ctx.store.get_jobs(busy);
  v1::AgentsPage out;
  *out.mutable_now() = leapfrog::to_proto(now);
  for (const auto& a : page.items) {
    v1::AgentRow* row = out.add_agents();
    *row->mutable_agent() = a;
    if (auto it = jobs.find(a.current_job()); a.current_job() != 0 && it != jobs.end())
      *row->mutable_current_job() = it->second;
  }
  out.set_next_page_token(page.next_page_token);
  return out;
}

// Latest passing lookup-scale run per kernel (or only `kernels`), with its
// points and machine; with two kernels, the second's run set against the
// first's, point by point (coordinator/scaling.h): their latest campaigns'
// runs, or their newest `last` runs.
v1::ScalingPage scaling(ApiContext& ctx, const std::vector<std::string>& kernels,
                        const std::string& test, uint32_t last) {
  // NoScalingRun is a 404 (error_status.h).
  const ScalingRuns found = latest_scaling_runs(ctx.store, kernels);
  v1::ScalingPage out;
  for (const auto& k : found.available) out.add_kernels(k);
  for (const auto& o : found.runs) {
    v1::ScalingRun* r = out.add_runs();
    r->set_kernel_label(o.kernel_label());
    r->set_job_id(o.job_id());
    r->set_campaign_id(o.campaign_id());
    r->set_fs(o.spec().fs());
    *r->mutable_reported_at() = o.reported_at();
    if (const auto run = scale_run_of(o.outcome())) *r->mutable_run() = *run;
  }
  if (found.runs.size() == 2) {
    const auto sets =
        scaling_sets(ctx.store, {found.runs[0].kernel_label(), found.runs[1].kernel_label()}, last);
    std::vector<RunPoints> before, after;
    v1::ScalingComparison* cmp = out.mutable_comparison();
    for (size_t side = 0; side < 2; ++side)
      for (const auto& r : sets[side]) {
        (side == 0 ? before : after).push_back(run_points(r));
        side == 0 ? cmp->add_before_jobs(r.job_id()) : cmp->add_after_jobs(r.job_id());
      }
    for (const auto& c : compare_runs(before, after, test)) *cmp->add_points() = to_proto(c);
    cmp->set_before(found.runs[0].kernel_label());
    cmp->set_after(found.runs[1].kernel_label());
    cmp->set_set(last == 0 ? "latest campaign" : "newest runs");
  }
  return out;
}

// A schedule as the API shows it: a disabled one has no next run.
v1::Schedule shown(v1::Schedule s) {
  if (!s.enabled()) s.clear_next_run();
  return s;
}

}  // namespace

void register_core_api(ApiRouter& r, ApiContext ctx) {
  r.get("/api/overview",
        [ctx](const httplib::Request&) mutable { return proto_json(overview(ctx)); });

  // Lists page (docs/api.md): ?limit=&page=, answered with next_page_token
  // ("" when nothing follows).
  r.get("/api/campaigns", [ctx](const httplib::Request& req) {
    CampaignQuery q;
    q.limit = query_uint(req, "limit", kCampaignPage.fallback, 1, kCampaignPage.max);
    q.page_token = query_page(req);
    auto page = campaigns(ctx).list(q);
    v1::ListCampaignsResponse out;
    for (auto& c : page.items) *out.add_campaigns() = std::move(c);
    out.set_next_page_token(page.next_page_token);
    return proto_json(out);
  });
  r.get(R"(/api/campaigns/([^/]+))", [ctx](const httplib::Request& req) {
    v1::CampaignPage out;
    *out.mutable_campaign() = campaigns(ctx).get(path_id(req, 1));
    const int64_t id = out.campaign().id();
    auto page = campaigns(ctx).jobs(
        id, query_uint(req, "limit", kJobPage.fallback, 1, kJobPage.max), query_page(req));
    for (auto& j : page.items) *out.add_jobs() = std::move(j);
    out.set_jobs_next_page_token(page.next_page_token);
    *out.mutable_matrix() = matrix_of(ctx.store.campaign_cells(id));
    return proto_json(out);
  });

  r.get(R"(/api/jobs/([^/]+))", [ctx](const httplib::Request& req) {
    const int64_t id = path_id(req, 1);
    auto job = ctx.store.get_job(id);
    if (!job) throw RequestError(ErrorKind::kNotFound, "no job \"" + std::to_string(id) + "\"");
    OutcomeFilter f;
    f.job_id = id;
    v1::JobPage out;
    for (auto& o : ctx.store.find_outcomes(f)) *out.add_outcomes() = std::move(o);
    add_kernels(ctx.store, {job->kernel_label()}, *out.mutable_kernels());
    *out.mutable_job() = std::move(*job);
    return proto_json(out);
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
    auto page = campaigns(ctx).outcomes(q);
    v1::OutcomesPage out;
    for (auto& o : page.items) *out.add_outcomes() = std::move(o);
    out.set_next_page_token(page.next_page_token);
    return proto_json(out);
  });

  r.get("/api/agents",
        [ctx](const httplib::Request& req) mutable { return proto_json(agents(ctx, req)); });

  r.get("/api/kernels", [ctx](const httplib::Request& req) {
    auto page = ctx.store.page_kernels(
        query_uint(req, "limit", kKernelPage.fallback, 1, kKernelPage.max), query_page(req));
    v1::ListKernelsResponse out;
    for (auto& k : page.items) *out.add_kernels() = shown(std::move(k));
    out.set_next_page_token(page.next_page_token);
    return proto_json(out);
  });

  r.get("/api/schedules", [ctx](const httplib::Request& req) {
    auto page = schedules(ctx).list(
        query_uint(req, "limit", kSchedulePage.fallback, 1, kSchedulePage.max), query_page(req));
    v1::ListSchedulesResponse out;
    for (auto& s : page.items) *out.add_schedules() = shown(std::move(s));
    out.set_next_page_token(page.next_page_token);
    return proto_json(out);
  });
  r.action("POST", "/api/schedules", [ctx](const httplib::Request& req) {
    const json body = json_body(req);
    const std::string name = body_string(body, "name");
    const std::string cron = body_string(body, "cron");
    if (!body.contains("campaign"))
      throw RequestError(ErrorKind::kInvalidArgument, "\"campaign\" is missing");
    // The campaign by protobuf's JSON mapping, as every answer prints it.
    v1::CampaignSpec spec;
    proto_from_json(body["campaign"], spec, "campaign");
    return proto_json(shown(schedules(ctx).add(name, cron, spec)));
  });
  r.action("POST", R"(/api/schedules/([^/]+)/enabled)", [ctx](const httplib::Request& req) {
    const int64_t id = path_id(req, 1);
    const json body = json_body(req);
    if (!body.contains("enabled") || !body["enabled"].is_boolean())
      throw RequestError(ErrorKind::kInvalidArgument, "\"enabled\" must be true or false");
    return proto_json(shown(schedules(ctx).set_enabled(id, body["enabled"].get<bool>())));
  });

  r.get("/api/scaling", [ctx](const httplib::Request& req) mutable {
    std::vector<std::string> kernels;
    for (size_t i = 0; i < req.get_param_value_count("kernel"); ++i)
      kernels.push_back(req.get_param_value("kernel", i));
    // last: compare each kernel's newest N runs instead of its latest campaign's.
    return proto_json(
        scaling(ctx, kernels, req.get_param_value("test"), query_uint(req, "last", 0, 0, 1000)));
  });
}

}  // namespace leapfrog::coord
