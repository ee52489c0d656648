#pragma once
// `leapfrog kernel build LABEL --source DIR|TARBALL [--patch FILE]...
// [--config FRAGMENT]... [--widen]`: builds a test kernel (common/kernel), puts it
// into the local kernel store the VM launcher boots from, and registers it.
// A patch that does not apply or a failed build is registered too, as a
// `build-failure` kernel carrying the log tail, and the verb exits 2.
// --widen appends Leapfrog's delay-point series (deploy/kernel/widen/).

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "coordinator/cli/client.h"

namespace leapfrog::cli {

class KernelBuildCommands {
 public:
  // Adds `build` under the existing `kernel` verb of `app`.
  explicit KernelBuildCommands(CLI::App& app);
  bool parsed() const;
  // Returns the exit code. Throws std::runtime_error.
  int run(const Endpoint& ep, bool json);

 private:
  CLI::App* build_ = nullptr;
  std::string label_, source_, cache_dir_, cmdline_;
  std::vector<std::string> patches_, fragments_;
  unsigned jobs_ = 0;
  bool retry_ = false;
  bool widen_ = false;
};

}  // namespace leapfrog::cli
