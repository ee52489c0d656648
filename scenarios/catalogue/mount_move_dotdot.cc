// mount-move-dotdot: a mount is moved (MS_MOVE) back and forth between pa/m
// and pb/m while observers walk out of it through "..", from a held dirfd on
// its root ("../g", "x/../../g") and down through the mount points
// ("pa/m/x/../../g"). The shape of Linux aed434ada685: at a mount's root,
// follow_dotdot_rcu() reads the mount's mountpoint and then its parent mount
// (choose_mountpoint_rcu) and must then check that mount_lock did not move;
// without that check a walk racing a move can pair the mountpoint of one
// moment with the parent mount of another (or with the mount itself, halfway
// through the move) and go on from a place no ref-walk reaches.
//
// A successful lockless walk is validated again at its end, so such a torn
// ".." shows as a hard error returned before that check: EACCES from a
// directory the observer cannot search, or ENOENT from a negative dentry
// (disk file systems keep them). The tree puts such traps where a torn ".."
// lands, next to the legal targets:
//   pa/, pb/      the parents: each the root of its own tmpfs (parents=0),
//                 so a move changes the parent mount too, or plain
//                 directories of the file system under test (parents=1).
//                 Each holds m/ (mount point), g, k/g and k2/ (0700).
//   g, k2/g       in the lookup root: what "../../g" and "../../k2/g" reach.
//   moved mount   a bind mount of hide/s1, a directory of the file system
//                 under test (moved=0), or a tmpfs (moved=1); its root holds
//                 x/ and the traps k/ and k2/ (0700), and, for moved=0, a
//                 negative dentry for g; hide/ is 0700.
// ".." from the moved root reaches pa or pb (whichever holds it in the
// window), never the moved root itself, hide/, or pa from a walk that took
// pb's mount. The model says so: the move is one mutation that sets both
// mount points and the moved root's ".." (its Parent object), as the kernel
// changes mnt_mountpoint and mnt_parent under one mount_lock write.
//
// rename_source=1 (moved=0, one view only) also renames the bind's source
// between hide/s1 and hide/s2, which changes where a torn ".." from the
// moved root lands (d_parent of the source) and nothing a legal walk sees.

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <system_error>

#include "scenarios/catalogue/catalogue.h"
#include "scenarios/catalogue/common.h"
#include "scenarios/sys/posix_ops.h"

namespace leapfrog::catalogue {
namespace {

void must(int err, const std::string& what) {
  if (err != 0) throw fs::SetupError(what + ": " + std::strerror(err));
}

// One parent of the mount point: the directory that holds m, g, k/g, k2.
struct Parent {
  NodeId dir = 0;    // the node ".." of the moved root reaches
  NodeId m = 0;      // the mount point pa/m or pb/m
  std::string path;  // lookup view path of the parent directory
};

// Makes directories and files either inside a file system the scenario
// mounted (`mounted`: an absolute path) or in the tree under test (rel).
struct Maker {
  const DiskTree& disk;
  std::string mounted;  // empty: the tree under test, relative to `rel`
  std::string rel;
  void dir(const std::string& name, mode_t mode) const {
    if (mounted.empty())
      disk.mkdir(rel + "/" + name, mode);
    else
      mkdir_at(mounted + "/" + name, mode);
  }
  void file(const std::string& name, const std::string& tag) const {
    if (mounted.empty())
      disk.file(rel + "/" + name, 0644, tag);
    else
      file_at(mounted + "/" + name, 0644, tag);
  }
};

Parent build_parent(const DiskTree& disk, TreeModel& t, const std::string& name, bool own_tmpfs) {
  Parent p;
  p.path = disk.l(name);
  disk.mkdir(name, 0755);
  if (own_tmpfs) {
    const NodeId covered = t.add_dir(t.root(), name, mode_attr(0755));
    must(sys::mount_tmpfs(p.path.c_str(), 0755), "mount tmpfs on " + p.path);
    p.dir = t.add_detached(NodeKind::Dir, "tmpfs:" + name, mode_attr(0755));
    t.declare_mounted(covered, p.dir);
    t.declare_parent(p.dir, t.root());
  } else {
    p.dir = t.add_dir(t.root(), name, mode_attr(0755));
  }
  identify(t, p.dir, p.path);
  const Maker mk{disk, own_tmpfs ? p.path : "", name};
  mk.dir("m", 0755);
  mk.file("g", name);
  mk.dir("k", 0755);
  mk.file("k/g", name + "/k");
  mk.dir("k2", 0700);
  p.m = t.add_dir(p.dir, "m", mode_attr(0755));
  t.declare_absent(p.m, "x");  // the covered directory: pa/m/x is ENOENT there
  identify(t, t.add_file(p.dir, "g", mode_attr(0644)), p.path + "/g");
  const NodeId k = t.add_dir(p.dir, "k", mode_attr(0755));
  identify(t, t.add_file(k, "g", mode_attr(0644)), p.path + "/k/g");
  t.add_dir(p.dir, "k2", mode_attr(0700));
  return p;
}

class MountMoveDotdot : public Scenario {
 public:
  const char* name() const override { return "mount-move-dotdot"; }
  const char* summary() const override {
    return "mount --move a mount between pa/m and pb/m vs \"..\" walks out of its root "
           "(held dirfd) and through the mount points";
  }
  std::vector<ParamSpec> params() const override {
    return {{"parents", 0, 0, 1,
             "0: pa and pb are each the root of a tmpfs (a move changes the parent mount); "
             "1: plain directories of the file system under test"},
            {"moved", 0, 0, 1,
             "the moved mount: 0 a bind mount of a directory of the file system under test, "
             "1 a tmpfs"},
            {"rename_source", 1, 0, 1,
             "moved=0 with one view: also rename the bind's source directory between moves"},
            mutate_pct_param()};
  }
  Outcome run(RunContext& ctx) const override {
    const bool tmpfs_parents = ctx.param("parents") == 0;
    const bool bind = ctx.param("moved") == 0;
    // Through a second view the source would be renamed behind the view's back.
    const bool rename_source = bind && ctx.param("rename_source") != 0 && !ctx.ws.two_views();
    DiskTree disk(ctx.ws);
    RacePlan plan = new_plan(ctx);
    TreeModel& t = plan.model;

    disk.file("g", 0644, "top");
    disk.mkdir("k2", 0755);
    disk.file("k2/g", 0644, "top/k2");
    disk.mkdir("hide", 0700);
    identify(t, t.add_file(t.root(), "g", mode_attr(0644)), disk.l("g"));
    const NodeId k2 = t.add_dir(t.root(), "k2", mode_attr(0755));
    identify(t, t.add_file(k2, "g", mode_attr(0644)), disk.l("k2/g"));
    t.add_dir(t.root(), "hide", mode_attr(0700));  // its entries are on no lookup path
    const Parent pa = build_parent(disk, t, "pa", tmpfs_parents);
    const Parent pb = build_parent(disk, t, "pb", tmpfs_parents);

    // The moved mount, on pa/m to begin with.
    const std::string ma = pa.path + "/m", mb = pb.path + "/m";
    if (bind)
      disk.mkdir("hide/s1", 0755);
    else
      must(sys::mount_tmpfs(ma.c_str(), 0755), "mount tmpfs on " + ma);
    const Maker mk{disk, bind ? "" : ma, "hide/s1"};
    mk.dir("x", 0755);
    mk.dir("k", 0700);
    mk.dir("k2", 0700);
    if (bind) must(sys::bind_mount(disk.l("hide/s1").c_str(), ma.c_str()), "bind mount on " + ma);
    const NodeId moved = t.add_detached(NodeKind::Dir, "moved", mode_attr(0755));
    identify(t, moved, ma);
    t.declare_mounted(pa.m, moved);
    t.declare_mount_point(pb.m);
    t.declare_parent(moved, pa.dir);
    const NodeId x = t.add_dir(moved, "x", mode_attr(0755));
    identify(t, x, ma + "/x");
    t.add_dir(moved, "k", mode_attr(0700));
    t.add_dir(moved, "k2", mode_attr(0700));
    // A negative dentry for g in the moved root, where a torn ".." that
    // stays put would look it up (kept by disk file systems only).
    struct stat st;
    if (::lstat((ma + "/g").c_str(), &st) == 0) throw fs::SetupError("\"" + ma + "/g\" exists");
    const int dirfd_ = open_dirfd(ma);

    auto move = [&t, moved](const Parent& from, const Parent& to) {
      return Effect{"mount-move",
                    {ObjectSet{ObjectKey{ObjectKind::Mount, from.m, ""}, Value{{}, kNoNode}},
                     ObjectSet{ObjectKey{ObjectKind::Mount, to.m, ""}, Value{{}, moved}},
                     ObjectSet{ObjectKey{ObjectKind::Parent, moved, ""}, Value{{}, to.dir}}}};
    };
    const std::string s1 = disk.l("hide/s1"), s2 = disk.l("hide/s2");
    plan.mutations.push_back(
        {move(pa, pb), [ma, mb] { return sys::move_mount(ma.c_str(), mb.c_str()); }, {}});
    if (rename_source)  // changes nothing a legal walk consults: no objects
      plan.mutations.push_back({Effect{"rename-source", {}},
                                [s1, s2] { return sys::rename_path(s1.c_str(), s2.c_str()); },
                                {}});
    plan.mutations.push_back(
        {move(pb, pa), [ma, mb] { return sys::move_mount(mb.c_str(), ma.c_str()); }, {}});
    if (rename_source)
      plan.mutations.push_back({Effect{"rename-source", {}},
                                [s1, s2] { return sys::rename_path(s2.c_str(), s1.c_str()); },
                                {}});

    plan.queries.push_back(open_query(moved, "../g", dirfd_));
    plan.queries.push_back(stat_query(moved, "../g", dirfd_));
    plan.queries.push_back(stat_query(moved, "x/../../g", dirfd_));
    plan.queries.push_back(stat_query(moved, "../k/g", dirfd_));
    plan.queries.push_back(stat_query(moved, "../../k2/g", dirfd_));
    plan.queries.push_back(stat_query(t.root(), "pa/m/x/../../g"));
    plan.queries.push_back(stat_query(t.root(), "pb/m/x/../../g"));
    assign_observers(plan, ctx);
    Outcome out = run_lookup_race(plan, ctx);
    // A held fd would keep the mount busy at teardown.
    ::close(dirfd_);
    return out;
  }
};

}  // namespace

std::unique_ptr<Scenario> make_mount_move_dotdot() {
  return std::make_unique<MountMoveDotdot>();
}

}  // namespace leapfrog::catalogue
