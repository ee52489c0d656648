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
    return "chmod a directory on the path (search allowed <-> revoked) vs stat/access/open below it";
  }
  std::vector<ParamSpec> params() const override {
    return {{"depth", 3, 3, 8, "directories between the root and the file"},
            {"target", -1, -1, 7, "which directory on the path is chmod'ed (-1: chosen by the seed)"},
            {"mutate_pct", 50, 1, 100, "chance in % that the mutator acts in a round"}};
  }
  Outcome run(RunContext& ctx) const override {
    RacePlan plan = setup(ctx);
    return run_lookup_race(plan, ctx);
  }

 private:
  RacePlan setup(RunContext& ctx) const {
    const int depth = static_cast<int>(ctx.param("depth"));
    int target = static_cast<int>(ctx.param("target"));
    if (target >= depth) throw UsageError("parameter \"target\" must be below \"depth\"");
    if (target < 0) target = static_cast<int>(ctx.rng.below(depth));
    DiskTree disk(ctx.ws);
    RacePlan plan{TreeModel(mode_attr(0755)), {}, 1.0, {}, {}, {}, {}};
    plan.mutate_probability = static_cast<double>(ctx.param("mutate_pct")) / 100.0;
    NodeId dir = plan.model.root();
    std::string path;
    NodeId target_node = 0;
    std::string target_path;
    for (int i = 0; i < depth; ++i) {
      path += (i ? "/d" : "d") + std::to_string(i);
      disk.mkdir(path, 0755);
      dir = plan.model.add_dir(dir, "d" + std::to_string(i), mode_attr(0755));
      identify(plan.model, dir, disk.l(path));
      if (i == target) {
        target_node = dir;
        target_path = disk.m(path);
      }
    }
    const std::string file = path + "/f";
    disk.file(file, 0644, "f");
    const NodeId f = plan.model.add_file(dir, "f", mode_attr(0644));
    identify(plan.model, f, disk.l(file));
    identify(plan.model, plan.model.root(), disk.l(""));

    plan.mutations.push_back({plan.model.chmod(target_node, mode_attr(0700)),
                              [target_path] { return ::chmod(target_path.c_str(), 0700) == 0 ? 0 : errno; }, {}});
    plan.mutations.push_back({plan.model.chmod(target_node, mode_attr(0755)),
                              [target_path] { return ::chmod(target_path.c_str(), 0755) == 0 ? 0 : errno; }, {}});
    add_query_mix(plan, plan.model.root(), file);
    assign_observers(plan, ctx);
    return plan;
  }
};

}  // namespace

std::unique_ptr<Scenario> make_setattr_lookup() { return std::make_unique<SetattrLookup>(); }

}  // namespace leapfrog::catalogue
