// rename-lookup: a subtree moves between a searchable and an unsearchable
// parent, and two directories with different contents swap places with
// RENAME_EXCHANGE, while observers look up by both old and new paths. The
// observed inode tells which version of each entry the lookup went through.

#include "scenarios/catalogue/catalogue.h"
#include "scenarios/catalogue/common.h"
#include "scenarios/sys/posix_ops.h"

namespace leapfrog::catalogue {
namespace {

class RenameLookup : public Scenario {
 public:
  const char* name() const override { return "rename-lookup"; }
  const char* summary() const override {
    return "rename a subtree between searchable and unsearchable parents, RENAME_EXCHANGE two "
           "directories";
  }
  std::vector<ParamSpec> params() const override {
    return {{"exchange", 1, 0, 1, "also swap two directories with RENAME_EXCHANGE"},
            mutate_pct_param(), ops_param()};
  }
  Outcome run(RunContext& ctx) const override {
    const bool exchange = ctx.param("exchange") != 0;
    DiskTree disk(ctx.ws);
    RacePlan plan = new_plan(ctx);
    TreeModel& t = plan.model;

    disk.mkdir("p1", 0755);
    disk.mkdir("p2", 0700);
    disk.mkdir("p1/x", 0755);
    disk.file("p1/x/f", 0644, "x");
    const NodeId p1 = t.add_dir(t.root(), "p1", mode_attr(0755));
    const NodeId p2 = t.add_dir(t.root(), "p2", mode_attr(0700));
    const NodeId x = t.add_dir(p1, "x", mode_attr(0755));
    const NodeId xf = t.add_file(x, "f", mode_attr(0644));
    t.declare_absent(p2, "x");
    identify(t, xf, disk.l("p1/x/f"));

    const std::string m_p1x = disk.m("p1/x"), m_p2x = disk.m("p2/x");
    MutationTemplate away{t.rename(x, p1, "x", p2, "x"),
                          [m_p1x, m_p2x] { return sys::rename_path(m_p1x.c_str(), m_p2x.c_str()); },
                          {}};
    MutationTemplate back{t.rename(x, p2, "x", p1, "x"),
                          [m_p1x, m_p2x] { return sys::rename_path(m_p2x.c_str(), m_p1x.c_str()); },
                          {}};
    add_query_mix(plan, t.root(), "p1/x/f");
    add_query_mix(plan, t.root(), "p2/x/f");

    if (exchange) {
      disk.mkdir("e", 0755);
      disk.mkdir("e/d1", 0755);
      disk.mkdir("e/d2", 0755);
      disk.file("e/d1/f", 0644, "1");
      disk.file("e/d2/f", 0644, "2");
      const NodeId e = t.add_dir(t.root(), "e", mode_attr(0755));
      const NodeId d1 = t.add_dir(e, "d1", mode_attr(0755));
      const NodeId d2 = t.add_dir(e, "d2", mode_attr(0755));
      identify(t, t.add_file(d1, "f", mode_attr(0644)), disk.l("e/d1/f"));
      identify(t, t.add_file(d2, "f", mode_attr(0644)), disk.l("e/d2/f"));
      const std::string a = disk.m("e/d1"), b = disk.m("e/d2");
      auto swap = [a, b] { return sys::rename_exchange(a.c_str(), b.c_str()); };
      // Two templates: the swap and the swap back have different effects.
      Effect swapped = t.exchange(d1, e, "d1", d2, e, "d2");
      Effect restored = swapped;
      restored.sets[0].value.target = d1;
      restored.sets[1].value.target = d2;
      plan.mutations = {away, {swapped, swap, {}}, back, {restored, swap, {}}};
      plan.queries.push_back(stat_query(t.root(), "e/d1/f"));
      plan.queries.push_back(stat_query(t.root(), "e/d2/f"));
      plan.queries.push_back(open_query(t.root(), "e/d1/f"));
    } else {
      plan.mutations = {away, back};
    }
    assign_observers(plan, ctx);
    return run_lookup_race(plan, ctx);
  }
};

}  // namespace

std::unique_ptr<Scenario> make_rename_lookup() {
  return std::make_unique<RenameLookup>();
}

}  // namespace leapfrog::catalogue
