// symlink-lookup: a symlink is replaced (rename onto it) by one pointing into a
// searchable directory or one pointing into an unsearchable one, while
// observers look up through it.

#include <unistd.h>

#include "scenarios/catalogue/catalogue.h"
#include "scenarios/catalogue/common.h"
#include "scenarios/sys/posix_ops.h"

namespace leapfrog::catalogue {
namespace {

class SymlinkLookup : public Scenario {
 public:
  const char* name() const override { return "symlink-lookup"; }
  const char* summary() const override {
    return "replace a symlink (rename onto it) between targets in a searchable and an unsearchable "
           "directory";
  }
  std::vector<ParamSpec> params() const override { return {mutate_pct_param(), ops_param()}; }
  Outcome run(RunContext& ctx) const override {
    DiskTree disk(ctx.ws);
    RacePlan plan = new_plan(ctx);
    TreeModel& t = plan.model;
    disk.mkdir("open", 0755);
    disk.mkdir("closed", 0700);
    disk.mkdir("staging", 0700);
    disk.file("open/f", 0644, "open");
    disk.file("closed/f", 0644, "closed");
    disk.symlink("open", "l");
    const NodeId open = t.add_dir(t.root(), "open", mode_attr(0755));
    const NodeId closed = t.add_dir(t.root(), "closed", mode_attr(0700));
    identify(t, t.add_file(open, "f", mode_attr(0644)), disk.l("open/f"));
    t.add_file(closed, "f", mode_attr(0644));
    // closed/f cannot be stat'ed by anyone but root through every view; root can.
    identify(t, static_cast<NodeId>(t.nodes().size() - 1), disk.l("closed/f"));
    t.add_symlink(t.root(), "l", "open");
    const NodeId to_open = static_cast<NodeId>(t.nodes().size() - 1);
    const NodeId to_closed =
        t.add_detached(NodeKind::Symlink, "l->closed", mode_attr(0777), "closed");

    const std::string tmp = disk.m("staging/l"), link = disk.m("l");
    auto make = [tmp](const char* target) {
      return [tmp, target] {
        ::unlink(tmp.c_str());
        if (::symlink(target, tmp.c_str()) != 0)
          throw std::system_error(errno, std::generic_category(), "symlink");
      };
    };
    auto replace = [tmp, link] { return sys::rename_path(tmp.c_str(), link.c_str()); };
    // The staging directory is not on any lookup path, so its entries need no model.
    Effect to_c{"rename",
                {ObjectSet{ObjectKey{ObjectKind::Entry, t.root(), "l"}, Value{{}, to_closed}}}};
    Effect to_o{"rename",
                {ObjectSet{ObjectKey{ObjectKind::Entry, t.root(), "l"}, Value{{}, to_open}}}};
    plan.mutations.push_back({to_c, replace, make("closed")});
    plan.mutations.push_back({to_o, replace, make("open")});
    add_query_mix(plan, t.root(), "l/f");
    assign_observers(plan, ctx);
    return run_lookup_race(plan, ctx);
  }
};

}  // namespace

std::unique_ptr<Scenario> make_symlink_lookup() {
  return std::make_unique<SymlinkLookup>();
}

}  // namespace leapfrog::catalogue
