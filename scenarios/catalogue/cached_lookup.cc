// cached-lookup: the walks of beneath-lookup, each both with RESOLVE_CACHED
// (the lockless walk only; EAGAIN when it would have to block) and without it,
// interleaved, while the mutator renames, swaps symlinks and chmods a
// directory on the path. A cached walk's result is judged by the plain walk's
// rules (plus EAGAIN, always legal): a violation of op "openat2-cached" is a
// fast-path-only bug, the fast-vs-slow differential.

#include "scenarios/catalogue/catalogue.h"
#include "scenarios/catalogue/common.h"
#include "scenarios/catalogue/openat2_tree.h"

namespace leapfrog::catalogue {
namespace {

class CachedLookup : public Scenario {
 public:
  const char* name() const override { return "cached-lookup"; }
  const char* summary() const override {
    return "openat2 with and without RESOLVE_CACHED, interleaved, vs renames, symlink swaps and "
           "chmod "
           "of a directory on the path";
  }
  std::vector<ParamSpec> params() const override {
    return {resolve_sets_param(kSetBeneath | kSetInRoot | kSetNone),
            {"chmod", 1, 0, 1, "also chmod a directory on the path between 0755 and 0700"},
            mutate_pct_param()};
  }
  // Two observers interleave the flag sets, and keep the judged lookups above one
  // per round although plain walks through the absolute symlink leave the model.
  uint32_t default_observers() const override { return 2; }
  Outcome run(RunContext& ctx) const override {
    DiskTree disk(ctx.ws);
    RacePlan plan = new_plan(ctx);
    Openat2Tree tree(disk, plan);
    if (ctx.param("chmod")) tree.add_chmod(plan);
    const int64_t sets = ctx.param("resolve");
    tree.add_queries(plan, sets, 0, "openat2");
    tree.add_queries(plan, sets, kResolveCached, "openat2-cached");
    assign_observers(plan, ctx);
    return run_lookup_race(plan, ctx);
  }
};

}  // namespace

std::unique_ptr<Scenario> make_cached_lookup() {
  return std::make_unique<CachedLookup>();
}

}  // namespace leapfrog::catalogue
