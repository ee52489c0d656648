#pragma once
// The nightly export folder (`leapfrog serve --export-dir DIR`): every
// campaign a schedule created is written there once it is done, one file per
// campaign and format, "<YYYY-MM-DD>-campaign-<id><suffix>" (suffix as
// file_suffix). A file is written to a temporary name and renamed, so a
// reader never sees half of one, and a file already there is not written
// again (a restarted coordinator, or a second replica, skips it).

#include <string>
#include <vector>

#include "coordinator/export/export.h"

namespace leapfrog::coord::exports {

struct NightlyOptions {
  std::string dir;
  std::vector<Format> formats = {Format::Kcidb};
  ExportOptions export_options;
  // Most recent campaigns looked at per tick.
  uint32_t scan = 50;
};

class NightlyExporter {
 public:
  // `triage` may be null (no issues in the files). Throws
  // std::invalid_argument for a bad origin or an empty folder name.
  NightlyExporter(Store& store, triage::TriageEngine* triage, NightlyOptions options);

  // Writes the files of finished scheduled campaigns not yet in the folder;
  // returns their paths. Throws StoreError as the store does, and
  // std::runtime_error when the folder cannot be written.
  std::vector<std::string> tick();

  // The file of campaign `c` in `f`, inside the folder.
  std::string path_of(const v1::Campaign& c, Format f) const;

 private:
  Store& store_;
  triage::TriageEngine* triage_;
  NightlyOptions options_;
};

}  // namespace leapfrog::coord::exports
