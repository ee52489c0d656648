#include "coordinator/campaign.h"

#include <algorithm>
#include <set>

#include "scenarios/fs/workspace.h"
#include "scenarios/registry.h"

namespace leapfrog::coord {

// Removes repeated entries, keeping the first of each.
static void dedupe(google::protobuf::RepeatedPtrField<std::string>* list) {
  std::set<std::string> seen;
  google::protobuf::RepeatedPtrField<std::string> out;
  for (const auto& s : *list)
    if (seen.insert(s).second) *out.Add() = s;
  list->Swap(&out);
}

bool is_selftest_scenario(const std::string& name) {
  return name == "selftest-crash" || name == "selftest-hang";
}

v1::CampaignSpec normalize(const v1::CampaignSpec& in) {
  v1::CampaignSpec spec = in;
  dedupe(spec.mutable_scenarios());
  dedupe(spec.mutable_kernels());
  dedupe(spec.mutable_filesystems());
  if (spec.scenarios().empty()) throw SpecError("campaign has no scenarios");
  if (spec.filesystems().empty()) spec.add_filesystems("tmpfs");
  if (spec.kernels().empty()) spec.add_kernels("host");
  if (spec.seeds() == 0) spec.set_seeds(1);
  if (spec.max_attempts() == 0) spec.set_max_attempts(kDefaultMaxAttempts);
  if (spec.max_attempts() > 20) throw SpecError("bad max_attempts " + std::to_string(spec.max_attempts()) + ", want [1, 20]");
  if (!spec.has_duration() && spec.iterations() == 0) spec.mutable_duration()->set_seconds(2);
  const int64_t ns = spec.duration().seconds() * 1'000'000'000 + spec.duration().nanos();
  if (spec.iterations() == 0 && (ns <= 0 || ns > kMaxDuration))
    throw SpecError("bad duration: want (0, 3600] seconds");
  if (spec.iterations() > kMaxIterations)
    throw SpecError("bad iterations " + std::to_string(spec.iterations()) + ", want [1, " + std::to_string(kMaxIterations) + "]");
  for (const auto& k : spec.kernels()) {
    if (k.empty()) throw SpecError("empty kernel label");
  }
  // Builds run on a builder agent's machine: paths must not depend on the
  // CLI's working folder.
  std::set<std::string> built;
  for (const auto& b : spec.builds()) {
    const std::string what = "build of kernel \"" + b.label() + "\": ";
    if (b.label().empty()) throw SpecError("a kernel build has no label");
    if (b.label() == "host") throw SpecError(what + "\"host\" is the agents' own kernel and cannot be built");
    if (std::find(spec.kernels().begin(), spec.kernels().end(), b.label()) == spec.kernels().end())
      throw SpecError(what + "the label is not among the campaign's kernels (add --kernel " + b.label() + ")");
    if (!built.insert(b.label()).second) throw SpecError(what + "the label is built twice");
    if (b.source().empty()) throw SpecError(what + "no source (a kernel source folder or tarball)");
    if (b.source().front() != '/') throw SpecError(what + "source \"" + b.source() + "\" is not an absolute path");
    for (const auto& p : b.patches())
      if (p.empty() || p.front() != '/') throw SpecError(what + "patch \"" + p + "\" is not an absolute path");
    for (const auto& c : b.config_fragments())
      if (c.empty() || c.front() != '/')
        throw SpecError(what + "config fragment \"" + c + "\" is not an absolute path");
  }
  for (const auto& f : spec.filesystems()) {
    try {
      if (fs::parse_fs_kind(f) == fs::FsKind::UserDir) throw SpecError("file system \"dir\" cannot be used in a campaign");
    } catch (const fs::SetupError& e) {
      throw SpecError(e.what());
    }
  }
  // Each scenario must exist and accept the parameters and observer count.
  for (const auto& s : spec.scenarios()) {
    if (is_selftest_scenario(s)) continue;
    try {
      const Scenario& scenario = find_scenario(s);
      RunOptions opts;
      opts.scenario = s;
      opts.observers = spec.observers();
      opts.iterations = spec.iterations();
      if (spec.iterations() == 0) opts.duration = ns;
      // Parameters a scenario does not take are an error only if no scenario of
      // the campaign takes them.
      for (const auto& [name, value] : spec.params()) {
        for (const auto& p : scenario.params())
          if (p.name == name) opts.params[name] = value;
      }
      resolve_params(scenario, opts);
    } catch (const UsageError& e) {
      throw SpecError(e.what());
    }
  }
  for (const auto& [name, value] : spec.params()) {
    bool known = false;
    for (const auto& s : spec.scenarios())
      if (!is_selftest_scenario(s))
        for (const auto& p : find_scenario(s).params()) known = known || p.name == name;
    if (!known) throw SpecError("no scenario of the campaign has a parameter \"" + name + "\"");
  }
  const uint64_t jobs = static_cast<uint64_t>(spec.scenarios_size()) * spec.kernels_size() * spec.filesystems_size() *
                        spec.seeds();
  if (jobs > kMaxJobsPerCampaign)
    throw SpecError("campaign expands to " + std::to_string(jobs) + " jobs, want at most " +
                    std::to_string(kMaxJobsPerCampaign));
  return spec;
}

std::vector<NewJob> expand(const v1::CampaignSpec& spec) {
  std::vector<NewJob> jobs;
  for (const auto& kernel : spec.kernels()) {
    for (const auto& s : spec.scenarios()) {
      const Scenario* scenario = is_selftest_scenario(s) ? nullptr : &find_scenario(s);
      for (const auto& f : spec.filesystems()) {
        for (uint32_t i = 0; i < spec.seeds(); ++i) {
          NewJob job;
          job.kernel_label = kernel;
          v1::ScenarioSpec& js = job.spec;
          js.set_scenario(s);
          js.set_seed(spec.first_seed() + i);
          js.set_fs(f);
          *js.mutable_duration() = spec.duration();
          js.set_iterations(spec.iterations());
          js.set_observers(spec.observers());
          for (const auto& [name, value] : spec.params()) {
            if (scenario)
              for (const auto& p : scenario->params())
                if (p.name == name) (*js.mutable_params())[name] = value;
          }
          jobs.push_back(std::move(job));
        }
      }
    }
  }
  // One build job per build; the store makes the jobs on its label wait.
  for (const auto& b : spec.builds()) {
    NewJob job;
    job.kernel_label = b.label();
    job.spec.set_scenario(kBuildJobScenario);
    job.spec.set_fs(kBuildJobScenario);
    job.build = b;
    jobs.push_back(std::move(job));
  }
  return jobs;
}

}  // namespace leapfrog::coord
