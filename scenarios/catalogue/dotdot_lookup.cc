// dotdot-lookup: a directory moves between two parents while observers walk
// out of it through "..": openat(held dirfd, "../g") and paths like p1/x/../g.
// Each parent holds a different g, so the inode tells which parent ".." reached.

#include <unistd.h>

#include "scenarios/catalogue/catalogue.h"
#include "scenarios/catalogue/common.h"
#include "scenarios/sys/posix_ops.h"

namespace leapfrog::catalogue {
namespace {

class DotdotLookup : public Scenario {
 public:
  const char* name() const override { return "dotdot-lookup"; }
  const char* summary() const override {
    return "rename a directory to another parent vs openat(dirfd, \"../g\") and paths through "
           "\"..\"";
  }
  std::vector<ParamSpec> params() const override { return {mutate_pct_param()}; }
  Outcome run(RunContext& ctx) const override {
    DiskTree disk(ctx.ws);
    RacePlan plan = new_plan(ctx);
    TreeModel& t = plan.model;
    disk.mkdir("p1", 0755);
    disk.mkdir("p2", 0755);
    disk.mkdir("p1/x", 0755);
    disk.file("p1/g", 0644, "1");
    disk.file("p2/g", 0644, "2");
    const NodeId p1 = t.add_dir(t.root(), "p1", mode_attr(0755));
    const NodeId p2 = t.add_dir(t.root(), "p2", mode_attr(0755));
    const NodeId x = t.add_dir(p1, "x", mode_attr(0755));
    t.declare_absent(p2, "x");
    identify(t, t.add_file(p1, "g", mode_attr(0644)), disk.l("p1/g"));
    identify(t, t.add_file(p2, "g", mode_attr(0644)), disk.l("p2/g"));
    const int dirfd_ = open_dirfd(disk.l("p1/x"));

    const std::string a = disk.m("p1/x"), b = disk.m("p2/x");
    plan.mutations.push_back({t.rename(x, p1, "x", p2, "x"),
                              [a, b] { return sys::rename_path(a.c_str(), b.c_str()); },
                              {}});
    plan.mutations.push_back({t.rename(x, p2, "x", p1, "x"),
                              [a, b] { return sys::rename_path(b.c_str(), a.c_str()); },
                              {}});
    plan.queries.push_back(open_query(x, "../g", dirfd_));
    plan.queries.push_back(stat_query(x, "../g", dirfd_));
    plan.queries.push_back(stat_query(t.root(), "p1/x/../g"));
    plan.queries.push_back(stat_query(t.root(), "p2/x/../g"));
    assign_observers(plan, ctx);
    Outcome out = run_lookup_race(plan, ctx);
    // A held fd would keep the file system busy at teardown.
    ::close(dirfd_);
    return out;
  }
};

}  // namespace

std::unique_ptr<Scenario> make_dotdot_lookup() {
  return std::make_unique<DotdotLookup>();
}

}  // namespace leapfrog::catalogue
