#pragma once
// A campaign as a KCIDB I/O document, schema v5.3 (kernelci/kcidb-io):
// a checkout and a build per kernel label, a test per job, an issue per
// signature group the campaign's outcomes carry and an incident per
// (job, issue). Ids are "<origin>:<kind>-<local id>" and derive from what
// they name only, so sending the same campaign again names the same objects.
// docs/exports.md has the mapping.

#include <nlohmann/json.hpp>

#include "coordinator/export/campaign_data.h"

namespace leapfrog::coord::exports {

// Throws std::invalid_argument for a bad origin.
nlohmann::json to_kcidb(const CampaignData& d, const ExportOptions& o);

// KCIDB status of a job's verdict: PASS, FAIL, ERROR, MISS; "" when the job
// has not run yet (the status is then left out: missing data).
std::string kcidb_status(v1::Verdict v);

// sha256 over the newline-terminated sha256 of each patch, in order (KCIDB's
// patchset_hash); "" for no patches.
std::string patchset_hash(const std::vector<std::string>& patch_sha256s);

}  // namespace leapfrog::coord::exports
