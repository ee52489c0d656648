#pragma once
// Command-line flags of `leapfrog-agent run` and their conversion to RunOptions.

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "scenarios/scenario.h"

namespace leapfrog {

struct RunFlags {
  std::string scenario;
  uint64_t seed = 1;
  std::string fs = "tmpfs";
  std::string view;  // --view: bind | overlay | idmap (or KIND+VIEW in --fs)
  std::string dir;
  std::string duration = "2s";
  uint64_t iterations = 0;
  uint32_t observers = 0;
  std::string history;
  bool json = false;
  // --format: text (the default), json (as --json), ktap (KTAP v1, one job)
  // or proto (v1.Outcome serialized: the agent's child writes it).
  std::string format = "text";
  std::vector<std::string> params;
  // The race strategy (scenarios/strategy.h). "seed" leaves a field to the
  // seed; empty: as `strategy` says for fields not given.
  std::string align;
  std::string pin;
  // "fixed": what is not given is fuzzy, pinned, the scenario's default
  // observers (a run by hand); "seed": the seed chooses it (every job).
  std::string strategy = "fixed";
  uint32_t observer_uid = 65534;
  uint32_t observer_gid = 65534;
  uint32_t second_uid = 65533;
  int64_t epsilon_ns = 0;
  double fuse_timeout = 1.0;
  bool die_with_parent = false;
  // connect's run children: the shared memory (agent/shared_progress.h) to
  // publish the live counts in; -1: none.
  int progress_fd = -1;
  // TESTS ONLY: MiB to allocate before the race (an OOM kill on demand).
  uint32_t test_allocate_mib = 0;
  // Kernel delay points (agent/widen.h): "seed", "off" or POINT:PPM:NS:UID[,...].
  std::string widen = "seed";
  std::string widen_dir = "/sys/kernel/leapfrog_widen";
};

void add_run_flags(CLI::App& cmd, RunFlags& f);

// Validates the flags; throws UsageError with a one-line reason.
RunOptions to_run_options(const RunFlags& f);

}  // namespace leapfrog
