// chown-lookup: chown a directory on the path between root and the observer,
// so that its "other" bits (search allowed) or its owner bits (none) apply.

#include <unistd.h>

#include "scenarios/catalogue/catalogue.h"
#include "scenarios/catalogue/common.h"

namespace leapfrog::catalogue {
namespace {

// Owner: nothing; group: everything; other: search and read.
constexpr mode_t kMode = 0075;

class ChownLookup : public Scenario {
 public:
  const char* name() const override { return "chown-lookup"; }
  const char* summary() const override {
    return "chown a directory (mode 0075) between root and the observer (other bits <-> owner "
           "bits) vs lookups";
  }
  std::vector<ParamSpec> params() const override {
    return {{"depth", 3, 3, 8, "directories between the root and the file"}, mutate_pct_param(), ops_param()};
  }
  Outcome run(RunContext& ctx) const override {
    const int depth = static_cast<int>(ctx.param("depth"));
    const int target = static_cast<int>(ctx.rng.below(depth));
    const uint32_t uid = ctx.opts.observer.uid;
    DiskTree disk(ctx.ws);
    RacePlan plan = new_plan(ctx);
    const Chain chain = build_chain(disk, plan.model, depth,
                                    [target](int i) { return i == target ? kMode : 0755; });
    const NodeId node = chain.dirs[target];
    const std::string path = chain.dir_paths[target];
    plan.mutations.push_back(
        {plan.model.chown_effect(node, mode_attr(kMode, uid, 0)),
         [path, uid] { return ::chown(path.c_str(), uid, 0) == 0 ? 0 : errno; },
         {}});
    plan.mutations.push_back({plan.model.chown_effect(node, mode_attr(kMode, 0, 0)),
                              [path] { return ::chown(path.c_str(), 0, 0) == 0 ? 0 : errno; },
                              {}});
    add_query_mix(plan, plan.model.root(), chain.file);
    assign_observers(plan, ctx);
    return run_lookup_race(plan, ctx);
  }
};

}  // namespace

std::unique_ptr<Scenario> make_chown_lookup() {
  return std::make_unique<ChownLookup>();
}

}  // namespace leapfrog::catalogue
