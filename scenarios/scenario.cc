#include "scenarios/scenario.h"

namespace leapfrog {

std::map<std::string, int64_t> resolve_params(const Scenario& s, const RunOptions& opts) {
  std::map<std::string, int64_t> out;
  const auto specs = s.params();
  for (const auto& p : specs) out[p.name] = p.def;
  for (const auto& [name, value] : opts.params) {
    const ParamSpec* spec = nullptr;
    for (const auto& p : specs)
      if (p.name == name) spec = &p;
    if (!spec) {
      std::string known;
      for (const auto& p : specs) known += (known.empty() ? "" : ", ") + p.name;
      throw UsageError("scenario \"" + std::string(s.name()) + "\" has no parameter \"" + name + "\"" +
                       (known.empty() ? " (it takes none)" : ", want one of: " + known));
    }
    if (value < spec->min || value > spec->max)
      throw UsageError("parameter \"" + name + "\" = " + std::to_string(value) + " is out of limits, want [" +
                       std::to_string(spec->min) + ", " + std::to_string(spec->max) + "]");
    out[name] = value;
  }
  const uint32_t observers = opts.observers ? opts.observers : s.default_observers();
  if (observers < 1 || observers > s.max_observers())
    throw UsageError("bad observers: " + std::to_string(observers) + ", want [1, " + std::to_string(s.max_observers()) +
                     "] for \"" + s.name() + "\"");
  if (opts.iterations > kMaxIterations)
    throw UsageError("bad iterations: " + std::to_string(opts.iterations) + ", want [1, " +
                     std::to_string(kMaxIterations) + "]");
  if (opts.duration <= 0 || opts.duration > kMaxDuration)
    throw UsageError("bad duration: want (0, 86400] seconds (24 h)");
  if (opts.epsilon < 0 || opts.epsilon > 1'000'000'000) throw UsageError("bad epsilon: want [0, 1s]");
  return out;
}

Strategy resolve_strategy(const Scenario& s, const RunOptions& opts, uint32_t cpus) {
  StrategyRequest fixed;
  fixed.alignment = opts.alignment;
  fixed.observers = opts.observers || !opts.default_observers ? opts.observers : s.default_observers();
  fixed.pin_cpus = opts.pin_cpus;
  return choose_strategy(
      opts.seed, ObserverLimits{s.default_observers(), s.max_observers(), s.mixed_alignment()},
      cpus, fixed);
}

}  // namespace leapfrog
