#include "scenarios/fs/view.h"

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <utility>
#include <vector>

#include "scenarios/fs/sys_util.h"

namespace leapfrog::fs {

namespace {

constexpr std::array<std::pair<FsView, const char*>, 5> kViewNames = {{
    {FsView::None, "none"},
    {FsView::Bind, "bind"},
    {FsView::Overlay, "overlay"},
    {FsView::Idmap, "idmap"},
    {FsView::OverlayLower, "overlay-lower"},
}};

void bind_mount(const std::string& from, const std::string& to) {
  make_dir(to);
  if (mount(from.c_str(), to.c_str(), nullptr, MS_BIND, nullptr) != 0)
    throw SetupError(errno_message("bind mount '" + from + "' on '" + to + "'", errno));
}

// A user namespace whose id maps are the identity in two extents, as an fd
// (O_CLOEXEC). The kernel refuses the initial map for an idmapped mount; a
// split identity is a real mapping that changes no id.
int identity_userns() {
  int go[2];
  if (pipe2(go, O_CLOEXEC) != 0) throw SetupError(errno_message("pipe", errno));
  int ready[2];
  if (pipe2(ready, O_CLOEXEC) != 0) {
    close(go[0]);
    close(go[1]);
    throw SetupError(errno_message("pipe", errno));
  }
  const pid_t pid = fork();
  if (pid < 0) throw SetupError(errno_message("fork", errno));
  if (pid == 0) {
    // Async-signal-safe calls only: the parent may have threads. The ends
    // the parent uses are closed here, or the parent's close could never
    // end the read below.
    close(go[1]);
    close(ready[0]);
    char c = unshare(CLONE_NEWUSER) == 0 ? 'y' : 'n';
    (void)!write(ready[1], &c, 1);
    (void)!read(go[0], &c, 1);
    _exit(0);
  }
  close(ready[1]);
  close(go[0]);
  char c = 'n';
  const bool unshared = read(ready[0], &c, 1) == 1 && c == 'y';
  close(ready[0]);
  int fd = -1;
  std::string error = "unshare(CLONE_NEWUSER) failed in the helper";
  if (unshared) {
    const std::string proc = "/proc/" + std::to_string(pid);
    const char* map = "0 0 1000\n1000 1000 4294966295\n";
    for (const char* file : {"/uid_map", "/gid_map"}) {
      const int m = open((proc + file).c_str(), O_WRONLY | O_CLOEXEC);
      const bool ok = m >= 0 && write(m, map, std::strlen(map)) == static_cast<ssize_t>(std::strlen(map));
      const int err = errno;
      if (m >= 0) close(m);
      if (!ok) {
        error = errno_message("write " + proc + file, err);
        break;
      }
      error.clear();
    }
    if (error.empty()) {
      fd = open((proc + "/ns/user").c_str(), O_RDONLY | O_CLOEXEC);
      if (fd < 0) error = errno_message("open " + proc + "/ns/user", errno);
    }
  }
  close(go[1]);  // lets the helper exit
  int status = 0;
  waitpid(pid, &status, 0);
  if (fd < 0) throw SetupError("cannot make the idmap's user namespace: " + error);
  return fd;
}

// An idmapped bind mount of `from` on `to`.
void idmapped_mount(const std::string& from, const std::string& to) {
  make_dir(to);
  const int tree = open_tree(AT_FDCWD, from.c_str(), OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
  if (tree < 0) throw SetupError(errno_message("open_tree '" + from + "'", errno));
  int userns = -1;
  try {
    userns = identity_userns();
  } catch (...) {
    close(tree);
    throw;
  }
  struct mount_attr attr;
  std::memset(&attr, 0, sizeof attr);
  attr.attr_set = MOUNT_ATTR_IDMAP;
  attr.userns_fd = static_cast<uint64_t>(userns);
  int rc = mount_setattr(tree, "", AT_EMPTY_PATH, &attr, sizeof attr);
  int err = errno;
  close(userns);
  if (rc != 0) {
    close(tree);
    throw SetupError(errno_message("mount_setattr MOUNT_ATTR_IDMAP on '" + from + "'" +
                                       (err == EINVAL ? " (the file system does not support idmapped mounts)" : ""),
                                   err));
  }
  rc = move_mount(tree, "", AT_FDCWD, to.c_str(), MOVE_MOUNT_F_EMPTY_PATH);
  err = errno;
  close(tree);
  if (rc != 0) throw SetupError(errno_message("move_mount the idmapped tree on '" + to + "'", err));
}

class ViewWorkspace : public Workspace {
 public:
  ViewWorkspace(std::unique_ptr<Workspace> base, FsView view, const std::string& workdir)
      : base_(std::move(base)), view_(view) {
    const std::string& b = base_->mutate_root();
    try {
      switch (view) {
        case FsView::Bind:
          make_dir(b + "/tree");
          mount_view(b + "/tree", workdir + "/view-mutate", false);
          mount_view(b + "/tree", workdir + "/view-lookup", false);
          setup_ = mutate_ = workdir + "/view-mutate";
          lookup_ = workdir + "/view-lookup";
          break;
        case FsView::Overlay:
        case FsView::OverlayLower: {
          for (const char* d : {"/lower", "/upper", "/work"}) make_dir(b + d);
          const std::string merged = workdir + "/merged";
          make_dir(merged);
          mounts_.push_back(merged);
          const std::string layers = "lowerdir=" + b + "/lower,upperdir=" + b + "/upper,workdir=" + b + "/work";
          // redirect_dir lets a merged directory be renamed (else EXDEV).
          if (mount("overlay", merged.c_str(), "overlay", 0, (layers + ",redirect_dir=on").c_str()) != 0 &&
              mount("overlay", merged.c_str(), "overlay", 0, layers.c_str()) != 0)
            throw SetupError(errno_message("mount overlay on '" + merged + "' (" + layers + ")", errno));
          mount_view(merged, workdir + "/view-lookup", false);
          setup_ = b + "/lower";
          mutate_ = view == FsView::Overlay ? merged : b + "/lower";
          lookup_ = workdir + "/view-lookup";
          break;
        }
        case FsView::Idmap:
          make_dir(b + "/tree");
          mount_view(b + "/tree", workdir + "/view-lookup", true);
          setup_ = mutate_ = b + "/tree";
          lookup_ = workdir + "/view-lookup";
          break;
        case FsView::None:
          throw SetupError("no view to make");
      }
      lookup_dev_ = dev_of(lookup_);
    } catch (...) {
      clean_up();
      throw;
    }
    spdlog::info("fs_view kind={} setup_root={} mutate_root={} lookup_root={}", name(), setup_, mutate_,
                 lookup_);
  }

  ~ViewWorkspace() override { clean_up(); }

  const std::string& mutate_root() const override { return mutate_; }
  const std::string& lookup_root() const override { return lookup_; }
  const std::string& setup_root() const override { return setup_; }
  dev_t lookup_dev() const override { return lookup_dev_; }
  bool two_views() const override { return true; }
  std::string name() const override { return base_->name() + "+" + to_string(view_); }

 private:
  void mount_view(const std::string& from, const std::string& to, bool idmapped) {
    mounts_.push_back(to);
    if (idmapped)
      idmapped_mount(from, to);
    else
      bind_mount(from, to);
  }

  void clean_up() {
    for (auto it = mounts_.rbegin(); it != mounts_.rend(); ++it) unmount_quietly(*it);
    mounts_.clear();
  }

  std::unique_ptr<Workspace> base_;  // destroyed after the views over it
  FsView view_;
  std::vector<std::string> mounts_;  // in mount order
  std::string setup_, mutate_, lookup_;
  dev_t lookup_dev_ = 0;
};

}  // namespace

FsView parse_fs_view(const std::string& name) {
  std::string accepted;
  for (const auto& [view, view_name] : kViewNames) {
    if (name == view_name) return view;
    accepted += accepted.empty() ? "" : ", ";
    accepted += view_name;
  }
  throw SetupError("unknown view '" + name + "', want one of " + accepted);
}

const char* to_string(FsView view) {
  for (const auto& [v, view_name] : kViewNames) {
    if (v == view) return view_name;
  }
  return "unknown";
}

std::string view_unavailable_reason(FsKind kind, FsView view) {
  if (view == FsView::None) return "";
  if (kind == FsKind::FuseCached || kind == FsKind::FuseDirect || kind == FsKind::UserDir)
    return std::string("views need a file system Leapfrog mounts itself in one view, not ") + to_string(kind);
  if ((view == FsView::Overlay || view == FsView::OverlayLower) && !kernel_has_fs("overlay") && !kernel_can_load_fs("overlay"))
    return "the kernel has no overlay (not built in, no module loaded or loadable)";
  if (view == FsView::Idmap) {
    // mount_setattr came with idmapped mounts (5.12); with no arguments it
    // answers EINVAL or EBADF where it exists.
    if (syscall(SYS_mount_setattr, -1, nullptr, 0, nullptr, 0) != 0 && errno == ENOSYS)
      return "the kernel has no mount_setattr (idmapped mounts need 5.12)";
    if (kind == FsKind::Tmpfs && !kernel_at_least(6, 3)) return "tmpfs takes idmapped mounts from Linux 6.3";
  }
  return "";
}

std::unique_ptr<Workspace> make_view(std::unique_ptr<Workspace> base, FsView view,
                                     const std::string& workdir) {
  if (base->two_views()) throw SetupError("views need a file system in one view, not " + base->name());
  return std::make_unique<ViewWorkspace>(std::move(base), view, workdir);
}

}  // namespace leapfrog::fs
