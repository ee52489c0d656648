#pragma once
// The ControlService (proto/leapfrog/v1/control.proto), used by the CLI: a
// façade over the use-cases (coordinator/usecases/), answering what they
// throw by the table of error_status.h.

#include "common/token.h"
#include "coordinator/clock.h"
#include "coordinator/service_config.h"
#include "coordinator/store/store.h"
#include "coordinator/usecases/campaigns.h"
#include "coordinator/usecases/schedules.h"
#include "coordinator/work_signal.h"
#include "leapfrog/v1/control.grpc.pb.h"

namespace leapfrog::coord {

class ControlServiceImpl final : public v1::ControlService::Service {
 public:
  ControlServiceImpl(Store& store, const Clock& clock, const TokenAuth& auth,
                     const ServiceConfig& cfg, WorkSignal& work)
      : store_(store),
        clock_(clock),
        auth_(auth),
        cfg_(cfg),
        campaigns_(store, clock, 3 * cfg.heartbeat_interval, &work),
        schedules_(store, clock) {}

  grpc::Status CreateCampaign(grpc::ServerContext*, const v1::CreateCampaignRequest*, v1::Campaign*) override;
  grpc::Status GetCampaign(grpc::ServerContext*, const v1::GetCampaignRequest*, v1::Campaign*) override;
  grpc::Status ListCampaigns(grpc::ServerContext*, const v1::ListCampaignsRequest*,
                             v1::ListCampaignsResponse*) override;
  grpc::Status ListJobs(grpc::ServerContext*, const v1::ListJobsRequest*, v1::ListJobsResponse*) override;
  grpc::Status ListOutcomes(grpc::ServerContext*, const v1::ListOutcomesRequest*, v1::ListOutcomesResponse*) override;
  grpc::Status ListAgents(grpc::ServerContext*, const v1::ListAgentsRequest*, v1::ListAgentsResponse*) override;
  grpc::Status AddSchedule(grpc::ServerContext*, const v1::AddScheduleRequest*, v1::Schedule*) override;
  grpc::Status ListSchedules(grpc::ServerContext*, const v1::ListSchedulesRequest*,
                             v1::ListSchedulesResponse*) override;
  grpc::Status SetScheduleEnabled(grpc::ServerContext*, const v1::SetScheduleEnabledRequest*, v1::Schedule*) override;
  grpc::Status RemoveSchedule(grpc::ServerContext*, const v1::RemoveScheduleRequest*,
                              v1::RemoveScheduleResponse*) override;
  grpc::Status AddKernel(grpc::ServerContext*, const v1::AddKernelRequest*, v1::Kernel*) override;
  grpc::Status ListKernels(grpc::ServerContext*, const v1::ListKernelsRequest*, v1::ListKernelsResponse*) override;
  grpc::Status GetScaling(grpc::ServerContext*, const v1::GetScalingRequest*,
                          v1::GetScalingResponse*) override;

 private:
  // Agents seen since then count as online: within three heartbeat intervals.
  TimePoint online_since() const { return clock_.now() - 3 * cfg_.heartbeat_interval; }

  Store& store_;
  const Clock& clock_;
  const TokenAuth& auth_;
  ServiceConfig cfg_;
  usecases::Campaigns campaigns_;
  usecases::Schedules schedules_;
};

}  // namespace leapfrog::coord
