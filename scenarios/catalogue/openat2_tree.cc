#include "scenarios/catalogue/openat2_tree.h"

#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <system_error>

#include "scenarios/sys/posix_ops.h"

namespace leapfrog::catalogue {
namespace {

// The kernel's RESOLVE_ flag and the history's bit of one flag set.
struct FlagSet {
  int64_t set;
  uint64_t kernel;
  uint8_t model;
};
constexpr FlagSet kFlagSets[] = {
    {kSetBeneath, RESOLVE_BENEATH, kResolveBeneath},
    {kSetInRoot, RESOLVE_IN_ROOT, kResolveInRoot},
    {kSetNoXdev, RESOLVE_NO_XDEV, kResolveNoXdev},
    {kSetNoSymlinks, RESOLVE_NO_SYMLINKS, kResolveNoSymlinks},
    {kSetNoMagiclinks, RESOLVE_NO_MAGICLINKS, kResolveNoMagiclinks},
    {kSetNone, 0, 0},
};

// openat2(dirfd, real_path, O_RDONLY, resolve) and fstat of the result,
// modelled as a walk of `model_path` from `start`.
QueryTemplate openat2_query(const std::string& op, NodeId start, const std::string& model_path,
                            int dirfd, const std::string& real_path, uint64_t kernel_resolve,
                            uint8_t model_resolve) {
  Query q;
  q.op = op;
  q.start = start;
  q.final_access = kMayRead;
  q.openat2 = true;
  q.resolve = model_resolve;
  size_t i = 0;
  while (i < model_path.size()) {
    size_t j = model_path.find('/', i);
    if (j == std::string::npos) j = model_path.size();
    if (j > i) q.path.push_back(model_path.substr(i, j - i));
    i = j + 1;
  }
  auto run = [dirfd, real_path, kernel_resolve](RawRecord& r) {
    open_how how{};
    how.flags = O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK;
    how.resolve = kernel_resolve;
    int fd = -1;
    timed(r, [&] {
      fd = static_cast<int>(::syscall(SYS_openat2, dirfd, real_path.c_str(), &how, sizeof how));
      return fd >= 0 ? 0 : errno;
    });
    if (fd >= 0) {
      struct stat st;
      if (::fstat(fd, &st) == 0) {
        r.a = st.st_dev;
        r.b = st.st_ino;
      }
      ::close(fd);
    }
  };
  return QueryTemplate{q, run, LookupCall::Custom, dirfd, real_path};
}

Effect link_swap(NodeId dir, NodeId link) {
  return Effect{"rename", {ObjectSet{ObjectKey{ObjectKind::Entry, dir, "l"}, Value{{}, link}}}};
}

}  // namespace

ParamSpec resolve_sets_param(int64_t def) {
  return {"resolve", def, 1, kSetAll,
          "openat2 flag sets the observers use, a bitmask: 1 RESOLVE_BENEATH, 2 RESOLVE_IN_ROOT, "
          "4 RESOLVE_NO_XDEV, 8 RESOLVE_NO_SYMLINKS, 16 RESOLVE_NO_MAGICLINKS, 32 none"};
}

Openat2Tree::Openat2Tree(const DiskTree& disk, RacePlan& plan) : disk_(disk) {
  TreeModel& t = plan.model;
  disk.mkdir("r", 0755);
  disk.mkdir("o", 0755);
  disk.mkdir("staging", 0700);
  disk.mkdir("r/a", 0755);
  disk.mkdir("r/a/m", 0755);
  disk.mkdir("r/mnt", 0755);
  disk.file("r/a/m/f", 0644, "m");
  disk.file("r/a/s", 0644, "inside");
  disk.file("o/s", 0644, "outside");
  disk.file("o/f", 0644, "outside");
  disk.symlink("a/m", "r/l");
  r_ = t.add_dir(t.root(), "r", mode_attr(0755));
  const NodeId o = t.add_dir(t.root(), "o", mode_attr(0755));
  a_ = t.add_dir(r_, "a", mode_attr(0755));
  const NodeId m = t.add_dir(a_, "m", mode_attr(0755));
  const NodeId mnt = t.add_dir(r_, "mnt", mode_attr(0755));
  identify(t, t.add_file(m, "f", mode_attr(0644)), disk.l("r/a/m/f"));
  identify(t, t.add_file(a_, "s", mode_attr(0644)), disk.l("r/a/s"));
  identify(t, t.add_file(o, "s", mode_attr(0644)), disk.l("o/s"));
  identify(t, t.add_file(o, "f", mode_attr(0644)), disk.l("o/f"));
  const NodeId to_m = t.add_symlink(r_, "l", "a/m");
  const NodeId to_out = t.add_detached(NodeKind::Symlink, "l->../o", mode_attr(0777), "../o");
  const NodeId to_abs = t.add_detached(NodeKind::Symlink, "l->/a/m", mode_attr(0777), "/a/m");
  t.declare_absent(o, "m");
  t.declare_absent(r_, "o");

  // A tmpfs on r/mnt for the whole run, on the lookup view (with FUSE: over
  // the FUSE mount), holding f.
  mnt_ = disk.l("r/mnt");
  if (int e = sys::mount_tmpfs(mnt_.c_str(), 0755))
    throw fs::SetupError("mount tmpfs on \"" + mnt_ + "\": " + std::system_category().message(e));
  const std::string mf = mnt_ + "/f";
  const int fd = ::open(mf.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0)
    throw fs::SetupError("create \"" + mf + "\": " + std::system_category().message(errno));
  ::close(fd);
  const NodeId fs_root = t.add_detached(NodeKind::Dir, "tmpfs(r/mnt)", mode_attr(0755));
  const NodeId fs_f = t.add_file(fs_root, "f", mode_attr(0644));
  t.set_identity(fs_root, NodeIdentity{0, 0, true});
  t.set_identity(fs_f, NodeIdentity{0, 0, true});
  t.declare_mounted(mnt, fs_root);

  // The observers inherit the dirfd; /proc/self/fd/N is its magic link.
  rootfd_ = open_dirfd(disk.l("r"));
  procfd_ = t.add_detached(NodeKind::Dir, "/proc/self/fd", mode_attr(0555));
  const NodeId magic =
      t.add_symlink(procfd_, std::to_string(rootfd_), "/proc/self/fd/" + std::to_string(rootfd_));
  t.set_magic(magic, r_);

  const std::string in = disk.m("r/a/m"), out = disk.m("o/m");
  const std::string tmp = disk.m("staging/l"), link = disk.m("r/l");
  auto make = [tmp](const char* target) {
    return [tmp, target] {
      ::unlink(tmp.c_str());
      if (::symlink(target, tmp.c_str()) != 0)
        throw std::system_error(errno, std::generic_category(), "symlink");
    };
  };
  auto replace = [tmp, link] { return sys::rename_path(tmp.c_str(), link.c_str()); };
  plan.mutations.push_back({t.rename(m, a_, "m", o, "m"),
                            [in, out] { return sys::rename_path(in.c_str(), out.c_str()); },
                            {}});
  plan.mutations.push_back({link_swap(r_, to_out), replace, make("../o")});
  plan.mutations.push_back({t.rename(m, o, "m", a_, "m"),
                            [in, out] { return sys::rename_path(out.c_str(), in.c_str()); },
                            {}});
  plan.mutations.push_back({link_swap(r_, to_abs), replace, make("/a/m")});
  plan.mutations.push_back({link_swap(r_, to_m), replace, make("a/m")});
}

Openat2Tree::~Openat2Tree() {
  // A held fd or a mount would keep the file system busy at teardown.
  if (rootfd_ >= 0) ::close(rootfd_);
  if (!mnt_.empty()) sys::unmount(mnt_.c_str());
}

void Openat2Tree::add_chmod(RacePlan& plan) const {
  plan.mutations.push_back(chmod_template(plan.model, a_, disk_.m("r/a"), 0700));
  plan.mutations.push_back(chmod_template(plan.model, a_, disk_.m("r/a"), 0755));
}

void Openat2Tree::add_queries(RacePlan& plan, int64_t sets, uint8_t extra,
                              const std::string& op) const {
  const uint64_t cached = (extra & kResolveCached) ? RESOLVE_CACHED : 0;
  const std::string magic = "/proc/self/fd/" + std::to_string(rootfd_);
  for (const FlagSet& f : kFlagSets) {
    if (!(sets & f.set)) continue;
    const uint64_t kernel = f.kernel | cached;
    const uint8_t model = f.model | extra;
    // The moved directory, the selftests' rename attack (".." out of a
    // directory that has moved out of the root), the swapped symlink, the
    // mount, and ".." above the root.
    for (const char* path : {"a/m/f", "a/m/../s", "l/f", "mnt/f", "../o/f"})
      plan.queries.push_back(openat2_query(op, r_, path, rootfd_, path, kernel, model));
    // Through the magic link from the process's root: its prefix up to
    // /proc/self/fd/ is outside the model. A scoped walk of an absolute path
    // would not start at r, so only the unscoped sets take it.
    if (f.set != kSetBeneath && f.set != kSetInRoot)
      plan.queries.push_back(openat2_query(op, procfd_, std::to_string(rootfd_) + "/a/m/f",
                                           AT_FDCWD, magic + "/a/m/f", kernel, model));
  }
}

}  // namespace leapfrog::catalogue
