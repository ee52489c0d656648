// setattr-lookup: chmod a directory on the path between allowing and revoking
// search for the observer, while observers stat/access/open a file below it.

#include <sys/stat.h>

#include "scenarios/catalogue/catalogue.h"
#include "scenarios/catalogue/common.h"

namespace leapfrog::catalogue {
namespace {

class SetattrLookup : public Scenario {
 public:
  const char* name() const override { return "setattr-lookup"; }
  const char* summary() const override {
    return "chmod a directory on the path (search allowed <-> revoked) vs stat/access/open below "
           "it";
  }
  std::vector<ParamSpec> params() const override {
    return {
        {"depth", 3, 3, 8, "directories between the root and the file"},
        {"target", -1, -1, 7, "which directory on the path is chmod'ed (-1: chosen by the seed)"},
        mutate_pct_param(), ops_param()};
  }
  Outcome run(RunContext& ctx) const override {
    const int depth = static_cast<int>(ctx.param("depth"));
    int target = static_cast<int>(ctx.param("target"));
    if (target >= depth) throw UsageError("parameter \"target\" must be below \"depth\"");
    if (target < 0) target = static_cast<int>(ctx.rng.below(depth));
    DiskTree disk(ctx.ws);
    RacePlan plan = new_plan(ctx);
    const Chain chain = build_chain(disk, plan.model, depth, [](int) { return 0755; });
    const NodeId node = chain.dirs[target];
    const std::string& path = chain.dir_paths[target];
    plan.mutations.push_back(chmod_template(plan.model, node, path, 0700));
    plan.mutations.push_back(chmod_template(plan.model, node, path, 0755));
    add_query_mix(plan, plan.model.root(), chain.file);
    assign_observers(plan, ctx);
    return run_lookup_race(plan, ctx);
  }
};

}  // namespace

std::unique_ptr<Scenario> make_setattr_lookup() {
  return std::make_unique<SetattrLookup>();
}

}  // namespace leapfrog::catalogue
