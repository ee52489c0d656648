#pragma once
// The growth bench's generator (growth_bench.cc): a year of nightlies written
// through the store's own write path (create_campaign COPYs the jobs;
// report_outcome's group commit stores the outcomes and COPYs their
// violation rows, and keeps the summaries and scaling rows), not the RPC.
// Every night is one scheduled campaign over several kernels, scenarios and
// file systems, with one lookup-scale run per kernel; about 10 % of the
// outcomes are violations of 5-50 rows each. All randomness comes from one
// seed.

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "coordinator/clock.h"
#include "coordinator/store/store.h"

namespace leapfrog::bench {

struct GrowthWorld {
  std::vector<std::string> kernels = {"v6.1", "v6.6", "v6.12", "host", "next"};
  std::vector<std::string> scenarios = {"setattr-lookup", "rename-lookup", "mount-lookup",
                                        "symlink-lookup", "dotdot-lookup", "typeflip-lookup",
                                        "exec-setid",     "chown-lookup"};
  std::vector<std::string> filesystems = {"tmpfs", "ext4", "xfs", "btrfs", "fuse-cached"};
  int days = 365;
  int agents_per_kernel = 4;
  double violation_share = 0.10;
  // Leases each kernel's thread asks for at once, spread over its agents
  // (the store's group lease takes them in one statement); 1 asks for one
  // job at a time, as a single agent per kernel would.
  size_t lease_round = 32;
  uint64_t seed = 1;
};

class GrowthFiller {
 public:
  // `end` is the last night; nights go back `world.days` from it.
  GrowthFiller(coord::Store& store, GrowthWorld world, coord::TimePoint end);
  // Writes through `store` from now on (the old one's server was restarted).
  void use(coord::Store& store) { store_ = &store; }

  // Registers kernels, agents and the nightly schedule (once).
  void setup();
  // Adds outcomes until the store holds `target` of them (spread over every
  // night); returns how many it added. Prints progress to stderr.
  uint64_t grow_to(uint64_t target);
  uint64_t outcomes() const { return outcomes_; }

  // Runs after each night's jobs are created, before any is leased, with the
  // number of jobs created so far. The bench refreshes the planner's
  // statistics there whenever `jobs` has doubled, as autovacuum does on a
  // server that has run for a while: a fresh database's statements are
  // planned while `jobs` is nearly empty, and until its first automatic
  // ANALYZE (over a minute in) their cached plans scan the whole table for
  // every report batch.
  std::function<void(uint64_t jobs)> after_campaign;
  int64_t schedule_id() const { return schedule_id_; }

 private:
  // One night's campaign of `jobs` jobs (lookup-scale ones first), leased and
  // reported by one thread per kernel.
  void night(int day, uint64_t jobs);

  coord::Store* store_;
  GrowthWorld world_;
  coord::TimePoint end_;
  int64_t schedule_id_ = 0;
  uint64_t outcomes_ = 0;
  uint64_t jobs_ = 0;   // created so far
  uint64_t round_ = 0;  // how many grow_to calls so far (seeds differ per call)
};

}  // namespace leapfrog::bench
