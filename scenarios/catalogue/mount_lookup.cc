// mount-lookup: a tmpfs (root mode 0700, or 0755 holding a marker file "f") is
// mounted over, and unmounted from, a directory on the path while observers
// look up a/m/f. The file system is prepared out of sight and moved into place
// (MS_MOVE), so the mount becomes visible in one step; st_dev tells which side
// a lookup saw.

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <system_error>

#include "scenarios/catalogue/catalogue.h"
#include "scenarios/catalogue/common.h"
#include "scenarios/sys/posix_ops.h"

namespace leapfrog::catalogue {
namespace {

class MountLookup : public Scenario {
 public:
  const char* name() const override { return "mount-lookup"; }
  const char* summary() const override {
    return "mount/umount a tmpfs (0700 root, or 0755 with a marker) over a directory on the path "
           "vs lookups";
  }
  std::vector<ParamSpec> params() const override { return {mutate_pct_param(), ops_param()}; }
  Outcome run(RunContext& ctx) const override {
    DiskTree disk(ctx.ws);
    RacePlan plan = new_plan(ctx);
    TreeModel& t = plan.model;
    disk.mkdir("a", 0755);
    disk.mkdir("a/m", 0755);
    disk.file("a/m/f", 0644, "covered");
    disk.mkdir("staging", 0700);
    const NodeId a = t.add_dir(t.root(), "a", mode_attr(0755));
    const NodeId m = t.add_dir(a, "m", mode_attr(0755));
    identify(t, t.add_file(m, "f", mode_attr(0644)), disk.l("a/m/f"));
    t.declare_mount_point(m);
    const NodeIdentity fresh{0, 0, true};
    const NodeId closed = t.add_detached(NodeKind::Dir, "tmpfs(0700)", mode_attr(0700));
    const NodeId open = t.add_detached(NodeKind::Dir, "tmpfs(0755)", mode_attr(0755));
    const NodeId marker = t.add_file(open, "f", mode_attr(0644));
    t.declare_absent(closed, "f");
    t.set_identity(closed, fresh);
    t.set_identity(open, fresh);
    t.set_identity(marker, fresh);

    // Mounts go on the lookup view: with FUSE that is the FUSE mount.
    const std::string target = disk.l("a/m"), staging = disk.m("staging");
    auto stage = [staging](mode_t mode) {
      return [staging, mode] {
        if (int e = sys::mount_tmpfs(staging.c_str(), mode))
          throw std::system_error(e, std::generic_category(), "mount tmpfs on " + staging);
        const std::string f = staging + "/f";
        if (int fd = ::open(f.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644); fd >= 0) ::close(fd);
      };
    };
    auto move = [staging, target] { return sys::move_mount(staging.c_str(), target.c_str()); };
    auto unmount = [target] { return sys::unmount(target.c_str()); };
    plan.mutations.push_back({t.mount(m, closed), move, stage(0700)});
    plan.mutations.push_back({t.umount(m), unmount, {}});
    plan.mutations.push_back({t.mount(m, open), move, stage(0755)});
    plan.mutations.push_back({t.umount(m), unmount, {}});
    add_query_mix(plan, t.root(), "a/m/f");
    assign_observers(plan, ctx);
    return run_lookup_race(plan, ctx);
  }
};

}  // namespace

std::unique_ptr<Scenario> make_mount_lookup() {
  return std::make_unique<MountLookup>();
}

}  // namespace leapfrog::catalogue
