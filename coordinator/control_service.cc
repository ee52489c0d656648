#include "coordinator/control_service.h"

#include <spdlog/spdlog.h>

#include "common/bounds.h"
#include "coordinator/error_status.h"
#include "coordinator/request_bounds.h"
#include "coordinator/scaling.h"
#include "coordinator/wire_paths.h"

namespace leapfrog::coord {

using grpc::Status;
using grpc::StatusCode;

// The token, then the bounds of every string the request carries
// (request_bounds.h), before anything reads it.
#define LEAPFROG_AUTH(ctx)                             \
  LEAPFROG_TOKEN(ctx);                                 \
  if (auto s = check_request_bounds(*req); !s.ok()) return s
// The token only: for a campaign spec, whose check (campaign.cc's
// check_bounds) names its fields in its own words, then walks it too.
#define LEAPFROG_TOKEN(ctx)                            \
  if (auto s = auth_.check(*(ctx)); !s.ok()) return s

Status ControlServiceImpl::CreateCampaign(grpc::ServerContext* ctx, const v1::CreateCampaignRequest* req,
                                          v1::Campaign* resp) {
  LEAPFROG_TOKEN(ctx);
  return guarded("CreateCampaign", [&] {
    *resp = campaigns_.create(req->spec());
    return Status::OK;
  });
}

Status ControlServiceImpl::GetCampaign(grpc::ServerContext* ctx, const v1::GetCampaignRequest* req,
                                       v1::Campaign* resp) {
  LEAPFROG_AUTH(ctx);
  return guarded("GetCampaign", [&] {
    *resp = campaigns_.get(req->id());
    return Status::OK;
  });
}

Status ControlServiceImpl::ListCampaigns(grpc::ServerContext* ctx, const v1::ListCampaignsRequest* req,
                                         v1::ListCampaignsResponse* resp) {
  LEAPFROG_AUTH(ctx);
  return guarded("ListCampaigns", [&] {
    CampaignQuery q;
    q.limit = req->limit();
    q.page_token = req->page_token();
    auto page = campaigns_.list(q);
    for (auto& c : page.items) *resp->add_campaigns() = std::move(c);
    resp->set_next_page_token(page.next_page_token);
    return Status::OK;
  });
}

Status ControlServiceImpl::ListJobs(grpc::ServerContext* ctx, const v1::ListJobsRequest* req,
                                    v1::ListJobsResponse* resp) {
  LEAPFROG_AUTH(ctx);
  return guarded("ListJobs", [&] {
    auto page = campaigns_.jobs(req->campaign_id(), req->limit(), req->page_token());
    for (auto& j : page.items) *resp->add_jobs() = std::move(j);
    resp->set_next_page_token(page.next_page_token);
    return Status::OK;
  });
}

Status ControlServiceImpl::ListOutcomes(grpc::ServerContext* ctx, const v1::ListOutcomesRequest* req,
                                        v1::ListOutcomesResponse* resp) {
  LEAPFROG_AUTH(ctx);
  return guarded("ListOutcomes", [&] {
    OutcomeQuery q;
    q.campaign_id = req->campaign_id();
    q.failed_only = req->failed_only();
    q.scenario = req->scenario();
    q.kernel_label = req->kernel_label();
    q.with_violations = req->with_violations();
    q.limit = req->limit();
    q.page_token = req->page_token();
    auto page = campaigns_.outcomes(q);
    for (auto& o : page.items) *resp->add_outcomes() = std::move(o);
    resp->set_next_page_token(page.next_page_token);
    return Status::OK;
  });
}

Status ControlServiceImpl::ListAgents(grpc::ServerContext* ctx, const v1::ListAgentsRequest* req,
                                      v1::ListAgentsResponse* resp) {
  LEAPFROG_AUTH(ctx);
  return guarded("ListAgents", [&] {
    if (req->names_size() > 0) {
      if (req->limit() != 0 || !req->page_token().empty())
        return Status(grpc::StatusCode::INVALID_ARGUMENT,
                      "names lists agents in one answer: leave limit and page_token unset");
      if (static_cast<uint32_t>(req->names_size()) > kAgentPage.max)
        return Status(grpc::StatusCode::INVALID_ARGUMENT,
                      "at most " + std::to_string(kAgentPage.max) + " names");
      const std::vector<std::string> names(req->names().begin(), req->names().end());
      for (auto& a : store_.agents_named(online_since(), names)) *resp->add_agents() = std::move(a);
      return Status::OK;
    }
    auto page = store_.page_agents(online_since(), req->limit(), req->page_token());
    for (auto& a : page.items) *resp->add_agents() = std::move(a);
    resp->set_next_page_token(page.next_page_token);
    return Status::OK;
  });
}

Status ControlServiceImpl::AddSchedule(grpc::ServerContext* ctx, const v1::AddScheduleRequest* req,
                                       v1::Schedule* resp) {
  LEAPFROG_TOKEN(ctx);
  return guarded("AddSchedule", [&] {
    *resp = schedules_.add(req->name(), req->cron(), req->campaign());
    return Status::OK;
  });
}

Status ControlServiceImpl::ListSchedules(grpc::ServerContext* ctx,
                                         const v1::ListSchedulesRequest* req,
                                         v1::ListSchedulesResponse* resp) {
  LEAPFROG_AUTH(ctx);
  return guarded("ListSchedules", [&] {
    auto page = schedules_.list(req->limit(), req->page_token());
    for (auto& s : page.items) *resp->add_schedules() = std::move(s);
    resp->set_next_page_token(page.next_page_token);
    return Status::OK;
  });
}

Status ControlServiceImpl::SetScheduleEnabled(grpc::ServerContext* ctx, const v1::SetScheduleEnabledRequest* req,
                                              v1::Schedule* resp) {
  LEAPFROG_AUTH(ctx);
  return guarded("SetScheduleEnabled", [&] {
    *resp = schedules_.set_enabled(req->id(), req->enabled());
    return Status::OK;
  });
}

Status ControlServiceImpl::RemoveSchedule(grpc::ServerContext* ctx, const v1::RemoveScheduleRequest* req,
                                          v1::RemoveScheduleResponse*) {
  LEAPFROG_AUTH(ctx);
  return guarded("RemoveSchedule", [&] {
    schedules_.remove(req->id());
    return Status::OK;
  });
}

Status ControlServiceImpl::AddKernel(grpc::ServerContext* ctx, const v1::AddKernelRequest* req, v1::Kernel* resp) {
  LEAPFROG_AUTH(ctx);
  return guarded("AddKernel", [&] {
    if (req->kernel().label().empty()) return Status(StatusCode::INVALID_ARGUMENT, "kernel label is empty");
    if (auto why = too_long("kernel label", req->kernel().label(), kMaxLabelBytes); !why.empty())
      return Status(StatusCode::INVALID_ARGUMENT, why);
    // The paths are stored as text and never opened here; refuse what no
    // builder writes, so a record cannot point at /etc/shadow.
    if (auto why = kernel_problem(req->kernel()); !why.empty())
      return Status(StatusCode::INVALID_ARGUMENT, why);
    *resp = req->replace() ? store_.put_kernel(req->kernel(), clock_.now())
                           : store_.add_kernel(req->kernel(), clock_.now());
    return Status::OK;
  });
}

Status ControlServiceImpl::ListKernels(grpc::ServerContext* ctx, const v1::ListKernelsRequest* req,
                                       v1::ListKernelsResponse* resp) {
  LEAPFROG_AUTH(ctx);
  return guarded("ListKernels", [&] {
    auto page = store_.page_kernels(req->limit(), req->page_token());
    for (auto& k : page.items) *resp->add_kernels() = std::move(k);
    resp->set_next_page_token(page.next_page_token);
    return Status::OK;
  });
}

Status ControlServiceImpl::GetScaling(grpc::ServerContext* ctx, const v1::GetScalingRequest* req,
                                      v1::GetScalingResponse* resp) {
  LEAPFROG_AUTH(ctx);
  return guarded("GetScaling", [&] {
    const std::vector<std::string> kernels(req->kernels().begin(), req->kernels().end());
    // NoScalingRun is NOT_FOUND (error_status.h).
    ScalingRuns runs = latest_scaling_runs(store_, kernels);
    for (auto& k : runs.available) resp->add_available(std::move(k));
    for (auto& r : runs.runs) *resp->add_runs() = std::move(r);
    if (!kernels.empty())
      for (auto& set : scaling_sets(store_, kernels, req->last()))
        for (auto& r : set) *resp->add_set_runs() = std::move(r);
    return Status::OK;
  });
}

}  // namespace leapfrog::coord
