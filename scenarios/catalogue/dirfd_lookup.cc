// dirfd-lookup: chmod a directory below a held directory fd, while observers
// resolve relative to that fd (dirfd != AT_FDCWD), which lockless lookups
// handle separately.

#include <sys/stat.h>

#include <unistd.h>

#include "scenarios/catalogue/catalogue.h"
#include "scenarios/catalogue/common.h"

namespace leapfrog::catalogue {
namespace {

class DirfdLookup : public Scenario {
 public:
  const char* name() const override { return "dirfd-lookup"; }
  const char* summary() const override {
    return "chmod a directory below a held dirfd vs openat(dirfd, \"a/b/f\")";
  }
  std::vector<ParamSpec> params() const override { return {mutate_pct_param(), ops_param()}; }
  Outcome run(RunContext& ctx) const override {
    DiskTree disk(ctx.ws);
    RacePlan plan = new_plan(ctx);
    TreeModel& t = plan.model;
    disk.mkdir("d", 0755);
    disk.mkdir("d/a", 0755);
    disk.mkdir("d/a/b", 0755);
    disk.file("d/a/b/f", 0644, "f");
    const NodeId d = t.add_dir(t.root(), "d", mode_attr(0755));
    const NodeId a = t.add_dir(d, "a", mode_attr(0755));
    const NodeId b = t.add_dir(a, "b", mode_attr(0755));
    identify(t, t.add_file(b, "f", mode_attr(0644)), disk.l("d/a/b/f"));
    const int dirfd_ = open_dirfd(disk.l("d"));
    const bool pick_a = ctx.rng.below(2) == 0;
    const NodeId target = pick_a ? a : b;
    const std::string path = disk.m(pick_a ? "d/a" : "d/a/b");
    plan.mutations.push_back(chmod_template(t, target, path, 0700));
    plan.mutations.push_back(chmod_template(t, target, path, 0755));
    add_query_mix(plan, d, "a/b/f", dirfd_);
    assign_observers(plan, ctx);
    Outcome out = run_lookup_race(plan, ctx);
    // A held fd would keep the file system busy at teardown.
    ::close(dirfd_);
    return out;
  }
};

}  // namespace

std::unique_ptr<Scenario> make_dirfd_lookup() {
  return std::make_unique<DirfdLookup>();
}

}  // namespace leapfrog::catalogue
