#pragma once
// `leapfrog export --campaign N [--format kcidb|junit|ktap] [--out FILE]
// [--origin NAME] [--link-base URL] [--submit URL --token-file F]`: one
// campaign in a kernel CI format, read over gRPC and rendered here
// (coordinator/export/). With --submit the KCIDB document is POSTed to a
// KCIDB-style endpoint, and --token-file after the verb names that endpoint's
// token; without --submit it names the coordinator's, as before the verb.

#include <CLI/CLI.hpp>
#include <string>

#include "coordinator/cli/client.h"

namespace leapfrog::cli {

class ExportCommands {
 public:
  explicit ExportCommands(CLI::App& app);
  bool parsed() const;
  // Returns the exit code. Throws std::runtime_error.
  int run(const std::string& coordinator, const std::string& token_file,
          const std::string& data_dir);

 private:
  CLI::App* export_ = nullptr;
  int64_t campaign_ = 0;
  std::string format_ = "kcidb", out_, origin_ = "leapfrog", link_base_, submit_, token_file_;
};

}  // namespace leapfrog::cli
