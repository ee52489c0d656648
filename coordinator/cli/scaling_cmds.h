#pragma once
// `leapfrog scaling compare K1 K2 [--test T] [--last N]`: K2's run set (the
// runs of its latest campaign, or its newest N runs) against K1's, point by
// point, with each change's 95 % interval over the runs' means and its
// verdict (Welch's t-test; "one run: not judged" below two boots a side);
// `leapfrog scaling csv K
// --test T`: one kernel's run as will-it-scale's CSV. Read over gRPC
// (GetScaling), computed here (scenarios/scale_report.h).

#include <CLI/CLI.hpp>
#include <string>

#include "coordinator/cli/client.h"

namespace leapfrog::cli {

class ScalingCommands {
 public:
  explicit ScalingCommands(CLI::App& app);
  bool parsed() const;
  // Returns the exit code. Throws std::runtime_error.
  int run(const Endpoint& ep, bool json);

 private:
  CLI::App* scaling_ = nullptr;
  CLI::App* compare_ = nullptr;
  CLI::App* csv_ = nullptr;
  std::string before_, after_, test_, kernel_, out_;
  uint32_t last_ = 0;
};

}  // namespace leapfrog::cli
