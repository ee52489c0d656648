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
    return "chown a directory (mode 0075) between root and the observer (other bits <-> owner bits) vs lookups";
  }
  std::vector<ParamSpec> params() const override {
    return {{"depth", 3, 3, 8, "directories between the root and the file"},
            {"mutate_pct", 50, 1, 100, "chance in % that the mutator acts in a round"}};
  }
  Outcome run(RunContext& ctx) const override {
    const int depth = static_cast<int>(ctx.param("depth"));
    const int target = static_cast<int>(ctx.rng.below(depth));
    const uint32_t uid = ctx.opts.observer.uid;
    DiskTree disk(ctx.ws);
    RacePlan plan{TreeModel(mode_attr(0755)), {}, 1.0, {}, {}, {}, {}};
    plan.mutate_probability = static_cast<double>(ctx.param("mutate_pct")) / 100.0;
    NodeId dir = plan.model.root();
    std::string path, target_path;
    NodeId target_node = 0;
    for (int i = 0; i < depth; ++i) {
      path += (i ? "/d" : "d") + std::to_string(i);
      const mode_t mode = i == target ? kMode : 0755;
      disk.mkdir(path, mode);
      dir = plan.model.add_dir(dir, "d" + std::to_string(i), mode_attr(mode));
      if (i == target) {
        target_node = dir;
        target_path = disk.m(path);
      }
    }
    const std::string file = path + "/f";
    disk.file(file, 0644, "f");
    const NodeId f = plan.model.add_file(dir, "f", mode_attr(0644));
    identify(plan.model, f, disk.l(file));
    plan.mutations.push_back({plan.model.chown_effect(target_node, mode_attr(kMode, uid, 0)),
                              [target_path, uid] { return ::chown(target_path.c_str(), uid, 0) == 0 ? 0 : errno; },
                              {}});
    plan.mutations.push_back({plan.model.chown_effect(target_node, mode_attr(kMode, 0, 0)),
                              [target_path] { return ::chown(target_path.c_str(), 0, 0) == 0 ? 0 : errno; }, {}});
    add_query_mix(plan, plan.model.root(), file);
    assign_observers(plan, ctx);
    return run_lookup_race(plan, ctx);
  }
};

}  // namespace

std::unique_ptr<Scenario> make_chown_lookup() { return std::make_unique<ChownLookup>(); }

}  // namespace leapfrog::catalogue
