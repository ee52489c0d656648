#pragma once
// `leapfrog subscribe add --name N (--webhook URL | --email ADDR...)
// [--event KIND...] [--kernel GLOB] [--scenario GLOB] [--issue-kind K]
// [--schedule ID]`, `leapfrog subscribe list`, `leapfrog subscribe rm ID`:
// the notifications' subscriptions (coordinator/notify/) over gRPC.

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "coordinator/cli/client.h"

namespace leapfrog::cli {

class SubscribeCommands {
 public:
  explicit SubscribeCommands(CLI::App& app);
  bool parsed() const;
  // Returns the exit code. Throws std::runtime_error.
  int run(const Endpoint& ep, bool json);

 private:
  CLI::App* subscribe_ = nullptr;
  CLI::App* add_ = nullptr;
  CLI::App* list_ = nullptr;
  CLI::App* rm_ = nullptr;
  std::string name_, webhook_, kernel_, scenario_, issue_kind_;
  std::vector<std::string> email_, events_;
  int64_t schedule_ = 0;
  int64_t id_ = 0;
};

}  // namespace leapfrog::cli
