#pragma once
// The `leapfrog` CLI's triage verbs: issues, issue show/status/note, replay,
// minimize, bisect, action(s). Registered on the app by one call; run after
// parsing, against the coordinator's TriageService.

#include <CLI/CLI.hpp>
#include <functional>
#include <memory>
#include <optional>

#include "coordinator/cli/client.h"

namespace leapfrog::cli {

class TriageCommands {
 public:
  virtual ~TriageCommands() = default;
  // If one of the triage verbs was parsed, runs it and returns the exit code
  // (0, or 2 with one "error: ..." line); nullopt otherwise. `endpoint` is
  // called only then. Throws std::runtime_error for bad arguments.
  virtual std::optional<int> run(const std::function<Endpoint()>& endpoint, bool json) = 0;
};

// Adds the verbs to `app`.
std::unique_ptr<TriageCommands> add_triage_commands(CLI::App& app);

}  // namespace leapfrog::cli
