#pragma once
// One campaign exported in one of the formats kernel CI reads (KCIDB JSON,
// JUnit XML, KTAP), and the gathering of what an export needs from the
// coordinator's stores. The CLI (`leapfrog export`), the HTTP route
// (GET /api/campaigns/{id}/export) and the nightly folder all go through
// render(). docs/exports.md.

#include <optional>
#include <string>

#include "coordinator/export/campaign_data.h"
#include "coordinator/store/store.h"

namespace leapfrog::coord {
namespace triage {
class TriageEngine;
}

namespace exports {

enum class Format { Kcidb, Junit, Ktap };

// "kcidb", "junit", "ktap"; throws std::invalid_argument naming the choices.
Format parse_format(const std::string& name);
std::string format_name(Format f);
// File name ending: ".kcidb.json", ".junit.xml", ".ktap".
std::string file_suffix(Format f);
// MIME type of the HTTP answer.
std::string content_type(Format f);

// The document, ending in a newline. Throws std::invalid_argument for a bad
// origin.
std::string render(Format f, const CampaignData& d, const ExportOptions& o);

// The campaign as one KTAP suite whose subtests are its jobs.
std::string to_ktap(const CampaignData& d, const ExportOptions& o);

// Everything an export of campaign `id` needs, read from the stores
// (`triage` may be null: no issues). nullopt for an unknown campaign.
// Throws StoreError as the stores do.
std::optional<CampaignData> gather(Store& store, triage::TriageEngine* triage, int64_t id);

}  // namespace exports
}  // namespace leapfrog::coord
