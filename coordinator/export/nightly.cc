// The nightly export folder (nightly.h).

#include "coordinator/export/nightly.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <stdexcept>

namespace leapfrog::coord::exports {

namespace stdfs = std::filesystem;

NightlyExporter::NightlyExporter(Store& store, triage::TriageEngine* triage, NightlyOptions options)
    : store_(store), triage_(triage), options_(std::move(options)) {
  if (options_.dir.empty()) throw std::invalid_argument("the export folder has no name");
  check_origin(options_.export_options.origin);
  if (options_.formats.empty()) options_.formats = {Format::Kcidb};
}

std::string NightlyExporter::path_of(const v1::Campaign& c, Format f) const {
  const std::time_t t = static_cast<std::time_t>(c.created_at().seconds());
  std::tm tm{};
  gmtime_r(&t, &tm);
  char day[16];
  std::strftime(day, sizeof day, "%Y-%m-%d", &tm);
  return options_.dir + "/" + day + "-campaign-" + std::to_string(c.id()) + file_suffix(f);
}

std::vector<std::string> NightlyExporter::tick() {
  std::vector<std::string> written;
  for (const auto& c : store_.list_campaigns(options_.scan)) {
    if (c.schedule_id() == 0 || c.state() != v1::CAMPAIGN_STATE_DONE) continue;
    std::optional<CampaignData> data;
    for (Format f : options_.formats) {
      const std::string path = path_of(c, f);
      if (stdfs::exists(path)) continue;
      if (!data) data = gather(store_, triage_, c.id());
      if (!data) break;
      std::error_code ec;
      stdfs::create_directories(options_.dir, ec);
      const std::string tmp = path + ".tmp-" + std::to_string(getpid());
      {
        std::ofstream out(tmp, std::ios::trunc);
        out << render(f, *data, options_.export_options);
        if (!out.flush()) throw std::runtime_error("cannot write export file \"" + tmp + "\"");
      }
      if (std::rename(tmp.c_str(), path.c_str()) != 0) {
        std::remove(tmp.c_str());
        throw std::runtime_error("cannot rename \"" + tmp + "\" to \"" + path + "\"");
      }
      spdlog::info("export.nightly campaign={} schedule={} format={} path={}", c.id(),
                   c.schedule_id(), format_name(f), path);
      written.push_back(path);
    }
  }
  return written;
}

}  // namespace leapfrog::coord::exports
