// rename-umount: a tmpfs is bind-mounted on a directory of the path and
// unmounted again, the directory trades places with another by
// RENAME_EXCHANGE across two parents while nothing is mounted on it, and the
// mounted tmpfs swaps two of its entries by RENAME_EXCHANGE while it is
// mounted, while observers look up p/d/f and q/e/f. The shape of Linux
// 20aac6c60981: __follow_mount_rcu() must check mount_lock as soon as a
// lockless walk crosses into a mount, or a walk racing rename() and umount()
// can fail with a hard ENOENT (returned before the walk's final check of
// mount_lock) that no ref-walk gives with any timing; RENAME_EXCHANGE is
// what broke the older argument that such an error was always a legal
// outcome. The commit does not spell out the interleaving: this shape makes
// each ingredient it names (a crossing into a mount, umount, rename and
// RENAME_EXCHANGE of the mount point and inside the mount, negative dentries
// on the way) happen around lookups of one path, and the oracle rejects any
// answer no ordering of the walk's steps explains.
//
// The tree (D and E on the file system under test, M a tmpfs kept in the
// root-only hide/store and bound from there, so its inodes stay the same;
// with mounted=1, M is the directory hide/store itself):
//   p/d  D: f, and a negative dentry for x     q/e  E: f, likewise
//   M    f, g (swapped by exchange), x
// The mutator's cycle: bind M on p/d (D); swap M's f and g; umount; exchange
// p/d and q/e (now p/d is E and q/e is D); bind M on q/e (D again); swap f
// and g back; umount; exchange back. A directory that is a mount point in
// the renamer's namespace cannot be renamed (EBUSY), so D moves only while
// it is uncovered. Every entry on the path exists at every instant, each
// step atomically: p/d/f and q/e/f resolve whatever the timing, so ENOENT
// from them is never legal, and the inode tells whether a lookup reached
// D's f, E's f or one of M's (wrong-mount otherwise). p/d/x and q/e/x exist
// only while M covers the directory: their ENOENT is legal only when the
// window holds an uncovered moment.

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "scenarios/catalogue/catalogue.h"
#include "scenarios/catalogue/common.h"
#include "scenarios/sys/posix_ops.h"

namespace leapfrog::catalogue {
namespace {

class RenameUmount : public Scenario {
 public:
  const char* name() const override { return "rename-umount"; }
  const char* summary() const override {
    return "bind-mount/umount a tmpfs on a directory that RENAME_EXCHANGE moves between two "
           "parents, and exchange entries inside the mount, vs lookups through it";
  }
  std::vector<ParamSpec> params() const override {
    return {
        {"inside", 1, 0, 1, "also swap two entries of the mounted tree (f and g) while mounted"},
        {"mounted", 0, 0, 1,
         "what is bound on the directory: 0 a tmpfs, 1 a directory of the file system under "
         "test (whose dentries, negative ones too, it then shares)"},
        mutate_pct_param(),
        ops_param()};
  }
  Outcome run(RunContext& ctx) const override {
    const bool inside = ctx.param("inside") != 0;
    const bool tmpfs = ctx.param("mounted") == 0;
    DiskTree disk(ctx.ws);
    RacePlan plan = new_plan(ctx);
    TreeModel& t = plan.model;

    disk.mkdir("p", 0755);
    disk.mkdir("q", 0755);
    disk.mkdir("p/d", 0755);
    disk.file("p/d/f", 0644, "D");
    disk.mkdir("q/e", 0755);
    disk.file("q/e/f", 0644, "E");
    disk.mkdir("hide", 0700);
    disk.mkdir("hide/store", 0755);
    const NodeId p = t.add_dir(t.root(), "p", mode_attr(0755));
    const NodeId q = t.add_dir(t.root(), "q", mode_attr(0755));
    const NodeId d = t.add_dir(p, "d", mode_attr(0755));
    const NodeId e = t.add_dir(q, "e", mode_attr(0755));
    identify(t, t.add_file(d, "f", mode_attr(0644)), disk.l("p/d/f"));
    identify(t, t.add_file(e, "f", mode_attr(0644)), disk.l("q/e/f"));
    t.declare_absent(d, "x");
    t.declare_absent(e, "x");
    t.add_dir(t.root(), "hide", mode_attr(0700));  // its entries are on no lookup path
    t.declare_mount_point(d);

    // The mounted tree, bound on the lookup view like every mount: a tmpfs
    // mounted on hide/store, or hide/store itself.
    const std::string store = disk.l("hide/store");
    if (tmpfs) {
      if (int err = sys::mount_tmpfs(store.c_str(), 0755))
        throw fs::SetupError("mount tmpfs on \"" + store + "\": " + std::strerror(err));
      file_at(store + "/f", 0644, "Mf");
      file_at(store + "/g", 0644, "Mg");
      file_at(store + "/x", 0644, "Mx");
    } else {
      disk.file("hide/store/f", 0644, "Mf");
      disk.file("hide/store/g", 0644, "Mg");
      disk.file("hide/store/x", 0644, "Mx");
    }
    const NodeId m = t.add_detached(NodeKind::Dir, tmpfs ? "tmpfs" : "store", mode_attr(0755));
    identify(t, m, store);
    const NodeId mf = t.add_file(m, "f", mode_attr(0644));
    const NodeId mg = t.add_file(m, "g", mode_attr(0644));
    identify(t, mf, store + "/f");
    identify(t, mg, store + "/g");
    identify(t, t.add_file(m, "x", mode_attr(0644)), store + "/x");
    // Negative dentries for x in D and E (disk file systems keep them): what
    // a walk that missed the mount finds there.
    for (const char* rel : {"p/d/x", "q/e/x"}) {
      struct stat st;
      if (::lstat(disk.l(rel).c_str(), &st) == 0)
        throw fs::SetupError("\"" + disk.l(rel) + "\" exists");
    }

    const std::string pd = disk.l("p/d"), qe = disk.l("q/e");
    const std::string mpd = disk.m("p/d"), mqe = disk.m("q/e");
    // Entries of the tree under test change through the mutate view.
    const std::string sbase = tmpfs ? store : disk.m("hide/store");
    const std::string sf = sbase + "/f", sg = sbase + "/g";
    auto bind = [store](const std::string& at) {
      return [store, at] { return sys::bind_mount(store.c_str(), at.c_str()); };
    };
    auto unmount = [](const std::string& at) { return [at] { return sys::unmount(at.c_str()); }; };
    auto swap_inside = [sf, sg] { return sys::rename_exchange(sf.c_str(), sg.c_str()); };
    auto swap_dirs = [mpd, mqe] { return sys::rename_exchange(mpd.c_str(), mqe.c_str()); };
    std::vector<MutationTemplate>& mu = plan.mutations;
    mu.push_back({t.mount(d, m), bind(pd), {}});
    if (inside) mu.push_back({t.exchange(mf, m, "f", mg, m, "g"), swap_inside, {}});
    mu.push_back({t.umount(d), unmount(pd), {}});
    mu.push_back({t.exchange(d, p, "d", e, q, "e"), swap_dirs, {}});
    mu.push_back({t.mount(d, m), bind(qe), {}});  // D is q/e now
    if (inside) mu.push_back({t.exchange(mg, m, "f", mf, m, "g"), swap_inside, {}});
    mu.push_back({t.umount(d), unmount(qe), {}});
    mu.push_back({t.exchange(e, p, "d", d, q, "e"), swap_dirs, {}});

    add_query_mix(plan, t.root(), "p/d/f");
    add_query_mix(plan, t.root(), "q/e/f");
    plan.queries.push_back(stat_query(t.root(), "p/d/x"));
    plan.queries.push_back(stat_query(t.root(), "q/e/x"));
    assign_observers(plan, ctx);
    return run_lookup_race(plan, ctx);
  }
};

}  // namespace

std::unique_ptr<Scenario> make_rename_umount() {
  return std::make_unique<RenameUmount>();
}

}  // namespace leapfrog::catalogue
