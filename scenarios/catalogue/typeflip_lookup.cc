// typeflip-lookup: the name "n" changes type, regular file <-> directory <->
// symlink, by the syscalls that make a name change type: unlink then mkdir,
// rmdir then create (link), and rename of a file or a symlink over it. Each
// type is its own model node and the entry's value is the node, so the
// oracle judges a lookup through "n" against every type possible in its
// window: a file gives ENOTDIR, a directory ok or ENOENT, a symlink is
// followed. The two-step changes pass through an absent entry, which is a
// mutation record of its own.
//
// unlink and link (not creat) keep the file's and the symlink's inodes
// stable, so what a lookup reached is told by its inode. On disk file
// systems the unlink leaves a negative dentry that the next create reuses
// (tmpfs frees it): the shape of Linux 766c4cbfacd8.

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

int rc(int r) {
  return r == 0 ? 0 : errno;
}

class TypeflipLookup : public Scenario {
 public:
  const char* name() const override { return "typeflip-lookup"; }
  const char* summary() const override {
    return "a name on the path changes type (file, directory, symlink) by unlink+mkdir, "
           "rmdir+link and rename over it";
  }
  std::vector<ParamSpec> params() const override {
    return {{"mkdir", 1, 0, 1, "also make the name an empty directory by mkdir and rmdir"},
            mutate_pct_param(),
            ops_param()};
  }
  Outcome run(RunContext& ctx) const override {
    const bool with_mkdir = ctx.param("mkdir") != 0;
    DiskTree disk(ctx.ws);
    RacePlan plan = new_plan(ctx);
    TreeModel& t = plan.model;

    // The versions of "n" live in the root-only staging directory, which is
    // on no lookup path; "t" is where the symlink leads.
    disk.mkdir("staging", 0700);
    disk.mkdir("staging/D", 0755);
    disk.file("staging/D/f", 0644, "D");
    disk.file("staging/F", 0644, "F");
    disk.symlink("t", "staging/L");
    disk.mkdir("t", 0755);
    disk.file("t/f", 0644, "t");
    const NodeId staging = t.add_dir(t.root(), "staging", mode_attr(0700));
    const NodeId dir = t.add_dir(staging, "D", mode_attr(0755));
    identify(t, t.add_file(dir, "f", mode_attr(0644)), disk.l("staging/D/f"));
    const NodeId target = t.add_dir(t.root(), "t", mode_attr(0755));
    identify(t, t.add_file(target, "f", mode_attr(0644)), disk.l("t/f"));
    const NodeId file = t.add_file(t.root(), "n", mode_attr(0644));
    const NodeId link = t.add_detached(NodeKind::Symlink, "n->t", mode_attr(0777), "t");
    // mkdir makes a fresh inode each time: its lookups end at the missing
    // "f" inside it, so it needs no identity.
    const NodeId empty = t.add_detached(NodeKind::Dir, "n(mkdir)", mode_attr(0755));
    if (::link(disk.m("staging/F").c_str(), disk.m("n").c_str()) != 0)
      throw fs::SetupError("link \"" + disk.m("n") + "\": " + std::strerror(errno));
    identify(t, file, disk.l("n"));
    // The symlink's identity is never observed (it is always followed).

    const std::string n = disk.m("n"), sd = disk.m("staging/D"), sf = disk.m("staging/F"),
                      sl = disk.m("staging/L"), tmp = disk.m("staging/new");
    auto entry = [&t](const char* op, NodeId v) {
      return Effect{op, {ObjectSet{ObjectKey{ObjectKind::Entry, t.root(), "n"}, Value{{}, v}}}};
    };
    // A hard link of `from` at staging/new, which apply renames over "n".
    auto stage = [tmp](const std::string& from) {
      return [tmp, from] {
        ::unlink(tmp.c_str());
        if (::link(from.c_str(), tmp.c_str()) != 0)
          throw std::system_error(errno, std::generic_category(), "link " + tmp);
      };
    };
    auto unlink_n = [n] { return rc(::unlink(n.c_str())); };
    // The cycle starts and ends with the file at "n".
    std::vector<MutationTemplate>& m = plan.mutations;
    m.push_back({entry("unlink", kNoNode), unlink_n, {}});
    if (with_mkdir) {
      // 0755 whatever the umask: mkdir and chmod would be two states.
      m.push_back({entry("mkdir", empty),
                   [n] {
                     const mode_t old = ::umask(0);
                     const int r = rc(::mkdir(n.c_str(), 0755));
                     ::umask(old);
                     return r;
                   },
                   {}});
      m.push_back({entry("rmdir", kNoNode), [n] { return rc(::rmdir(n.c_str())); }, {}});
    }
    m.push_back({entry("link", link), [sl, n] { return rc(::link(sl.c_str(), n.c_str())); }, {}});
    m.push_back({entry("rename", file), [tmp, n] { return rc(::rename(tmp.c_str(), n.c_str())); },
                 stage(sf)});
    m.push_back({entry("rename", link), [tmp, n] { return rc(::rename(tmp.c_str(), n.c_str())); },
                 stage(sl)});
    m.push_back({entry("unlink", kNoNode), unlink_n, {}});
    m.push_back({t.rename(dir, staging, "D", t.root(), "n"),
                 [sd, n] { return rc(::rename(sd.c_str(), n.c_str())); },
                 {}});
    m.push_back({t.rename(dir, t.root(), "n", staging, "D"),
                 [sd, n] { return rc(::rename(n.c_str(), sd.c_str())); },
                 {}});
    m.push_back({entry("link", file), [sf, n] { return rc(::link(sf.c_str(), n.c_str())); }, {}});
    add_query_mix(plan, t.root(), "n/f");
    assign_observers(plan, ctx);
    return run_lookup_race(plan, ctx);
  }
};

}  // namespace

std::unique_ptr<Scenario> make_typeflip_lookup() {
  return std::make_unique<TypeflipLookup>();
}

}  // namespace leapfrog::catalogue
