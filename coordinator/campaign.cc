#include "coordinator/campaign.h"

#include <algorithm>
#include <optional>
#include <set>

#include "common/bounds.h"
#include "common/kernel/build_file.h"
#include "coordinator/request_bounds.h"
#include "scenarios/fs/workspace.h"
#include "scenarios/widen_request.h"
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

// Sizes, counts, enums and ranges, checked before anything else reads the
// spec (and before any message quotes a value of it).
static void check_bounds(const v1::CampaignSpec& spec) {
  auto fail_if = [](const std::string& why) {
    if (!why.empty()) throw SpecError(why);
  };
  fail_if(too_long("campaign name", spec.name(), kMaxNameBytes));
  auto check_list = [&](const char* what,
                        const google::protobuf::RepeatedPtrField<std::string>& list,
                        size_t max_bytes) {
    if (static_cast<size_t>(list.size()) > kMaxListEntries)
      throw SpecError("campaign has " + std::to_string(list.size()) + " " + what +
                      "s, want at most " + std::to_string(kMaxListEntries));
    for (const auto& item : list) fail_if(too_long(what, item, max_bytes));
  };
  check_list("scenario", spec.scenarios(), kMaxLabelBytes);
  check_list("kernel", spec.kernels(), kMaxLabelBytes);
  check_list("file system", spec.filesystems(), kMaxLabelBytes);
  if (static_cast<size_t>(spec.params().size()) > kMaxListEntries)
    throw SpecError("campaign has " + std::to_string(spec.params().size()) +
                    " parameters, want at most " + std::to_string(kMaxListEntries));
  for (const auto& [name, value] : spec.params())
    fail_if(too_long("parameter", name, kMaxLabelBytes));
  fail_if(too_long("align", spec.align(), kMaxLabelBytes));
  fail_if(too_long("widen", spec.widen(), kMaxWidenBytes));
  // Whatever the checks above do not name (a build file's sha256, a field
  // added later) is bounded too, by the walk every request gets.
  fail_if(request_too_large(spec));
  if (static_cast<size_t>(spec.builds().size()) > kMaxListEntries)
    throw SpecError("campaign has " + std::to_string(spec.builds().size()) +
                    " kernel builds, want at most " + std::to_string(kMaxListEntries));
  for (const auto& b : spec.builds()) {
    fail_if(too_long("kernel build label", b.label(), kMaxLabelBytes));
    fail_if(too_long("kernel build source", b.source(), kMaxPathBytes));
    fail_if(too_long("kernel command line", b.cmdline(), kMaxPathBytes));
    check_list("patch", b.patches(), kMaxPathBytes);
    check_list("config fragment", b.config_fragments(), kMaxPathBytes);
    if (static_cast<size_t>(b.patch_files().size() + b.config_files().size()) > kMaxListEntries)
      throw SpecError("kernel build carries " +
                      std::to_string(b.patch_files().size() + b.config_files().size()) +
                      " files, want at most " + std::to_string(kMaxListEntries));
    size_t bytes = 0;
    for (const auto* files : {&b.patch_files(), &b.config_files()}) {
      for (const auto& f : *files) {
        fail_if(too_long("kernel build file name", f.name(), kMaxLabelBytes));
        fail_if(too_long("kernel build file \"" + f.name() + "\"", f.content(), kMaxBuildFileBytes));
        bytes += f.content().size();
      }
    }
    if (bytes > kMaxBuildBytes)
      throw SpecError("kernel build carries " + std::to_string(bytes) + " bytes of files, want at most " +
                      std::to_string(kMaxBuildBytes));
  }
  if (!v1::CpuPinning_IsValid(spec.pin()))
    throw SpecError("bad pin " + std::to_string(spec.pin()) +
                    ", want CPU_PINNING_ON, CPU_PINNING_OFF or unset");
  // Checked apart, before any arithmetic: seconds * 1e9 overflows int64 for
  // seconds past 2^63 / 1e9 (and wrapped values then passed the range check).
  const auto& d = spec.duration();
  if (d.seconds() < 0 || d.seconds() > kMaxDuration / 1'000'000'000 || d.nanos() < 0 ||
      d.nanos() > 999'999'999)
    throw SpecError("bad duration: want (0, 86400] seconds (24 h)");
}

v1::CampaignSpec normalize(const v1::CampaignSpec& in) {
  check_bounds(in);
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
    throw SpecError("bad duration: want (0, 86400] seconds (24 h)");
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
    if (auto why = kbuild::source_name_problem(b.source()); !why.empty()) throw SpecError(what + why);
    // A builder reads no path a client names: the files travel as content.
    if (!b.patches().empty() || !b.config_fragments().empty())
      throw SpecError(what +
                      "patches and config fragments are sent as content (patch_files, config_files), "
                      "not as paths on the builder");
  }
  // Each file's sha256 from its bytes, whatever the client said.
  for (auto& b : *spec.mutable_builds()) {
    for (auto* files : {b.mutable_patch_files(), b.mutable_config_files()}) {
      for (auto& f : *files) {
        if (auto why = kbuild::file_name_problem(f.name()); !why.empty())
          throw SpecError("build of kernel \"" + b.label() + "\": " + why);
        f.set_sha256(kbuild::sha256_hex(f.content()));
      }
    }
  }
  for (const auto& f : spec.filesystems()) {
    try {
      if (fs::parse_fs_kind(f) == fs::FsKind::UserDir) throw SpecError("file system \"dir\" cannot be used in a campaign");
    } catch (const fs::SetupError& e) {
      throw SpecError(e.what());
    }
  }
  std::optional<Alignment> alignment;
  if (!spec.align().empty()) {
    alignment = parse_alignment(spec.align());
    if (!alignment)
      throw SpecError("bad align \"" + spec.align() +
                      "\", want fuzzy, free, both or empty (chosen by each job's seed)");
  }
  try {
    widen::parse_request(spec.widen());
  } catch (const UsageError& e) {
    throw SpecError(e.what());
  }
  // Each scenario must exist and accept the parameters, observer count and
  // alignment.
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
      opts.alignment = alignment;
      resolve_strategy(scenario, opts, 1);
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
          js.set_align(spec.align());
          js.set_pin(spec.pin());
          js.set_widen(spec.widen());
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

std::vector<std::string> unserved(const v1::CampaignSpec& spec,
                                  const std::vector<v1::AgentInfo>& agents,
                                  const std::vector<v1::Kernel>& kernels) {
  std::set<std::string> built;
  for (const auto& b : spec.builds()) built.insert(b.label());
  std::vector<std::string> out;
  for (const auto& label : spec.kernels()) {
    if (built.count(label)) continue;
    std::vector<const v1::AgentInfo*> mine;
    for (const auto& a : agents)
      if (a.capabilities().kernel_label() == label) mine.push_back(&a);
    const std::string what = "kernel \"" + label + "\": ";
    if (mine.empty()) {
      if (label == "host") {
        out.push_back(what +
                      "no agent on a host is registered; its jobs wait until one connects"
                      " (leapfrog-agent connect, or leapfrog up --agents N)");
      } else if (auto k = std::find_if(kernels.begin(), kernels.end(),
                                       [&](const auto& k) { return k.label() == label; });
                 k != kernels.end()) {
        if (k->status() == v1::KERNEL_STATUS_BUILD_FAILURE) {
          out.push_back(what +
                        "its last build failed, so no VM can boot it; its jobs wait until it"
                        " is rebuilt or added again (leapfrog kernels)");
        } else {
          out.push_back(what +
                        "no VM of this kernel has registered; its jobs wait until one does"
                        " (leapfrog vm run --kernel " +
                        label + ")");
        }
      } else {
        out.push_back(what +
                      "no agent runs it and no kernel of that label is registered; its jobs"
                      " wait until one is (leapfrog kernel add " +
                      label + " IMAGE), or check the label");
      }
      continue;
    }
    if (std::none_of(mine.begin(), mine.end(), [](const auto* a) { return a->online(); })) {
      std::string names;
      for (const auto* a : mine) names += (names.empty() ? "" : ", ") + a->name();
      out.push_back(what + "its agents (" + names +
                    ") are all offline; its jobs wait until one is back");
    }
    for (const auto& fs : spec.filesystems()) {
      std::set<std::string> offered;
      bool served = false;
      for (const auto* a : mine) {
        const auto& f = a->capabilities().filesystems();
        served = served || std::find(f.begin(), f.end(), fs) != f.end();
        offered.insert(f.begin(), f.end());
      }
      if (served) continue;
      std::string list;
      for (const auto& f : offered) list += (list.empty() ? "" : ", ") + f;
      out.push_back(what + "none of its agents offers file system \"" + fs + "\" (they offer: " +
                    (list.empty() ? "none" : list) + "); those jobs wait until one does");
    }
  }
  return out;
}

std::vector<std::string> unserved(Store& store, const v1::Campaign& c, TimePoint online_since) {
  auto queued = c.by_state().find("queued");
  if (queued == c.by_state().end() || queued->second == 0) return {};
  return unserved(c.spec(), store.list_agents(online_since), store.list_kernels());
}

}  // namespace leapfrog::coord
