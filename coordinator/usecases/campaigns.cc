#include "coordinator/usecases/campaigns.h"

#include <spdlog/spdlog.h>

#include "coordinator/campaign.h"
#include "coordinator/error_status.h"
#include "coordinator/work_signal.h"

namespace leapfrog::coord::usecases {

namespace {

RequestError no_campaign(int64_t id) {
  return RequestError(ErrorKind::kNotFound, "no campaign \"" + std::to_string(id) + "\"");
}

}  // namespace

v1::Campaign Campaigns::create(const v1::CampaignSpec& spec) {
  const v1::CampaignSpec normal = normalize(spec);
  const auto jobs = expand(normal);
  const int64_t id = store_.create_campaign(normal, jobs, 0, clock_.now());
  if (work_) work_->notify();
  spdlog::info("campaign.create campaign={} jobs={} name=\"{}\"", id, jobs.size(), normal.name());
  auto c = store_.get_campaign(id);
  if (!c) throw RequestError(ErrorKind::kInternal, "campaign vanished after creation");
  for (auto& w : warnings(*c)) {
    // Logged at creation only: GetCampaign is polled.
    spdlog::warn("campaign.unserved campaign={} why=\"{}\"", c->id(), w);
    c->add_warnings(std::move(w));
  }
  return std::move(*c);
}

v1::Campaign Campaigns::get(int64_t id) {
  auto c = store_.get_campaign(id);
  if (!c) throw no_campaign(id);
  for (auto& w : warnings(*c)) c->add_warnings(std::move(w));
  return std::move(*c);
}

std::vector<std::string> Campaigns::warnings(const v1::Campaign& c) {
  return unserved(store_, c, clock_.now() - offline_after_);
}

Page<v1::Campaign> Campaigns::list(const CampaignQuery& query) {
  return store_.page_campaigns(query);
}

Page<v1::JobInfo> Campaigns::jobs(int64_t campaign_id, uint32_t limit,
                                  const std::string& page_token) {
  if (!store_.get_campaign(campaign_id)) throw no_campaign(campaign_id);
  return store_.page_jobs(campaign_id, limit, page_token);
}

Page<v1::OutcomeRecord> Campaigns::outcomes(const OutcomeQuery& query) {
  return store_.page_outcomes(query);
}

}  // namespace leapfrog::coord::usecases
