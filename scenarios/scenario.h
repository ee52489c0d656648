#pragma once
// A scenario: setup -> racing actors -> check -> metrics. Scenarios are
// registered by name in one table (registry.cc).

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "scenarios/fs/workspace.h"
#include "scenarios/model.h"
#include "scenarios/outcome.h"
#include "scenarios/progress.h"
#include "scenarios/rng.h"
#include "scenarios/strategy.h"

namespace leapfrog {

// Bad input from the user (unknown scenario, parameter out of limits).
class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct ParamSpec {
  std::string name;
  int64_t def = 0;
  int64_t min = 0;
  int64_t max = 0;
  std::string help;
};

// What the user asked for; validated against the scenario before the sandbox starts.
struct RunOptions {
  std::string scenario;
  uint64_t seed = 1;
  fs::FsSpec fs;
  TimeNs duration = 2'000'000'000;
  uint64_t iterations = 0;  // 0: run for `duration`
  // The race strategy (scenarios/strategy.h); unset fields are chosen by
  // the seed.
  uint32_t observers = 0;              // 0: chosen by the seed
  bool default_observers = false;      // observers 0: the scenario's default instead
  std::optional<Alignment> alignment;  // fuzzy, free or both
  std::optional<bool> pin_cpus;        // one CPU per actor while there are enough
  Cred observer{65534, 65534, {}};
  uint32_t second_uid = 65533;  // the acl-exec-deny bystander's uid
  TimeNs epsilon = 0;
  std::map<std::string, int64_t> params;
  std::string history_path;  // write the history here (JSON Lines) when set
  // Live counts, updated while the run goes (null: nobody asks).
  RunProgress* progress = nullptr;
};

// Limits of the options every scenario shares.
inline constexpr uint32_t kMaxObservers = 32;
inline constexpr uint64_t kMaxIterations = 50'000'000;
// A job may run for hours: every scenario judges as it runs and holds what
// is in flight, not the run (issue 47).
inline constexpr TimeNs kMaxDuration = 24LL * 3600 * 1'000'000'000;

struct RunContext {
  const RunOptions& opts;
  const fs::Workspace& ws;
  std::map<std::string, int64_t> params;  // every scenario parameter, defaults filled in
  Rng rng;                                // setup choices
  uint32_t observers = 1;                 // strategy.observers
  Strategy strategy;                      // how the actors race (resolved)
  int64_t param(const std::string& name) const { return params.at(name); }
};

class Scenario {
 public:
  virtual ~Scenario() = default;
  // Registered name, e.g. "setattr-lookup".
  virtual const char* name() const = 0;
  // One line for `leapfrog-agent list`.
  virtual const char* summary() const = 0;
  // Scenario-specific parameters with defaults and limits.
  virtual std::vector<ParamSpec> params() const { return {}; }
  // Observers (or peers) when the user does not say.
  virtual uint32_t default_observers() const { return 1; }
  // Most observers the scenario supports.
  virtual uint32_t max_observers() const { return kMaxObservers; }
  // Whether it can race aligned and free-running observers in one run
  // (Alignment::Both).
  virtual bool mixed_alignment() const { return true; }
  // The longest a run with `params` (defaults filled in) may take when its
  // length is not the race's duration (a benchmark measuring point after
  // point); nullopt for scenarios that race for the duration or iterations.
  // The agent sets its job deadline from it.
  virtual std::optional<std::chrono::nanoseconds> run_time(
      const std::map<std::string, int64_t>& params) const {
    (void)params;
    return std::nullopt;
  }
  // Builds the tree, races the actors, checks the history, fills the outcome.
  // Throws fs::SetupError or UsageError for expected failures.
  virtual Outcome run(RunContext& ctx) const = 0;
};

// Checks `opts` against the scenario's limits; fills defaults into `params`.
// Throws UsageError naming the bad value and the limits.
std::map<std::string, int64_t> resolve_params(const Scenario& s, const RunOptions& opts);

// The race strategy of `opts` for `s` on `cpus` CPUs: its fixed fields, the
// seed's choice for the others (choose_strategy). Throws UsageError.
Strategy resolve_strategy(const Scenario& s, const RunOptions& opts, uint32_t cpus);

}  // namespace leapfrog
