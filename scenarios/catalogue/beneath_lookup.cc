// beneath-lookup: openat2(2) walks from a dirfd of the lookup root with
// RESOLVE_BENEATH, RESOLVE_IN_ROOT, RESOLVE_NO_XDEV, RESOLVE_NO_SYMLINKS or
// RESOLVE_NO_MAGICLINKS, while the mutator moves a directory on the path out
// of the root and back, and swaps a symlink between a relative target, one
// climbing out with "..", and an absolute one. A scoped walk that succeeds to
// a node outside the root is an escape (the openat2 selftests' rename attack).

#include "scenarios/catalogue/catalogue.h"
#include "scenarios/catalogue/common.h"
#include "scenarios/catalogue/openat2_tree.h"

namespace leapfrog::catalogue {
namespace {

class BeneathLookup : public Scenario {
 public:
  const char* name() const override { return "beneath-lookup"; }
  const char* summary() const override {
    return "openat2 RESOLVE_BENEATH/IN_ROOT/NO_XDEV/NO_SYMLINKS/NO_MAGICLINKS vs a directory moved "
           "out "
           "of the root and symlinks swapped to \"..\" and absolute targets";
  }
  std::vector<ParamSpec> params() const override {
    return {resolve_sets_param(kSetAll), mutate_pct_param()};
  }
  // Two observers interleave the flag sets, and keep the judged lookups above one
  // per round although plain walks through the absolute symlink leave the model.
  uint32_t default_observers() const override { return 2; }
  Outcome run(RunContext& ctx) const override {
    DiskTree disk(ctx.ws);
    RacePlan plan = new_plan(ctx);
    Openat2Tree tree(disk, plan);
    tree.add_queries(plan, ctx.param("resolve"), 0, "openat2");
    assign_observers(plan, ctx);
    return run_lookup_race(plan, ctx);
  }
};

}  // namespace

std::unique_ptr<Scenario> make_beneath_lookup() {
  return std::make_unique<BeneathLookup>();
}

}  // namespace leapfrog::catalogue
