#pragma once
// The campaign use-cases, which the gRPC ControlService and the HTTP API
// both call: create a campaign, read one with its warnings, and page
// campaigns, a campaign's jobs and outcomes. Failures are typed
// (error_status.h): SpecError for a bad spec, RequestError(kNotFound) for
// an unknown campaign, StoreError from the store.

#include <cstdint>
#include <string>
#include <vector>

#include "coordinator/clock.h"
#include "coordinator/store/store.h"

namespace leapfrog::coord {

class WorkSignal;

namespace usecases {

class Campaigns {
 public:
  // Agents not seen for `offline_after` are offline (three heartbeats);
  // `work` (may be null) wakes this process's waiting leases on new jobs.
  Campaigns(Store& store, const Clock& clock, Duration offline_after, WorkSignal* work = nullptr)
      : store_(store), clock_(clock), offline_after_(offline_after), work_(work) {}

  // Normalizes, expands and stores `spec`; the campaign with its warnings
  // (logged once here).
  v1::Campaign create(const v1::CampaignSpec& spec);
  // Campaign `id` with its warnings.
  v1::Campaign get(int64_t id);
  // Why `c`'s queued jobs have no agent to run them (unserved() in campaign.h).
  std::vector<std::string> warnings(const v1::Campaign& c);
  Page<v1::Campaign> list(const CampaignQuery& query);
  // One page of campaign `campaign_id`'s jobs.
  Page<v1::JobInfo> jobs(int64_t campaign_id, uint32_t limit, const std::string& page_token);
  Page<v1::OutcomeRecord> outcomes(const OutcomeQuery& query);

 private:
  Store& store_;
  const Clock& clock_;
  Duration offline_after_;
  WorkSignal* work_;
};

}  // namespace usecases
}  // namespace leapfrog::coord
