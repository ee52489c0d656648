// provision(): the file systems under test, and the FsKind names.

#include "scenarios/fs/workspace.h"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "scenarios/fs/fuse_passthrough.h"
#include "scenarios/fs/loop_device.h"
#include "scenarios/fs/sys_util.h"
#include "scenarios/fs/view.h"

namespace leapfrog::fs {

namespace {

constexpr std::array<std::pair<FsKind, const char*>, 7> kKindNames = {{
    {FsKind::Tmpfs, "tmpfs"},
    {FsKind::Ext4, "ext4"},
    {FsKind::Xfs, "xfs"},
    {FsKind::Btrfs, "btrfs"},
    {FsKind::FuseCached, "fuse-cached"},
    {FsKind::FuseDirect, "fuse-direct"},
    {FsKind::UserDir, "dir"},
}};

// How to make and mount each block file system.
struct BlockFs {
  const char* type;     // mount(2) type
  const char* mkfs;     // program
  const char* force;    // mkfs's "overwrite, be quiet" flags
  const char* package;  // Debian package that has `mkfs`
  off_t image_bytes;    // sparse image size (xfsprogs 6.x refuses < 300 MB)
};

constexpr off_t kMiB = 1024 * 1024;

BlockFs block_fs(FsKind kind) {
  switch (kind) {
    case FsKind::Ext4:
      return {"ext4", "mkfs.ext4", "-qF", "e2fsprogs", 64 * kMiB};
    case FsKind::Xfs:
      return {"xfs", "mkfs.xfs", "-qf", "xfsprogs", 320 * kMiB};
    case FsKind::Btrfs:
      return {"btrfs", "mkfs.btrfs", "-qf", "btrfs-progs", 128 * kMiB};
    default:
      std::abort();  // callers pass block kinds only
  }
}

// Refuses a folder another workspace in the same work folder has mounted on.
void check_unused(const std::string& path) {
  struct stat st, parent;
  if (lstat(path.c_str(), &st) != 0) return;  // mkdir will make it
  if (stat((path + "/..").c_str(), &parent) == 0 && st.st_dev != parent.st_dev) {
    throw SetupError("'" + path + "' is in use by another workspace: want one per work folder");
  }
}

void mount_tmpfs(const std::string& path, const char* options) {
  make_dir(path);
  if (mount("leapfrog", path.c_str(), "tmpfs", 0, options) != 0) {
    throw SetupError(errno_message("mount tmpfs on '" + path + "'", errno));
  }
}

class WorkspaceBase : public Workspace {
 public:
  const std::string& mutate_root() const override { return mutate_root_; }
  const std::string& lookup_root() const override { return lookup_root_; }
  dev_t lookup_dev() const override { return lookup_dev_; }
  bool two_views() const override { return mutate_root_ != lookup_root_; }
  std::string name() const override { return to_string(kind_); }

 protected:
  explicit WorkspaceBase(FsKind kind) : kind_(kind) {}
  // Called once the roots are in place.
  void set_roots(std::string mutate_root, std::string lookup_root) {
    mutate_root_ = std::move(mutate_root);
    lookup_root_ = std::move(lookup_root);
    lookup_dev_ = dev_of(lookup_root_);
    spdlog::info("fs_provisioned kind={} mutate_root={} lookup_root={} dev={}:{}", name(),
                 mutate_root_, lookup_root_, major(lookup_dev_), minor(lookup_dev_));
  }

 private:
  FsKind kind_;
  std::string mutate_root_;
  std::string lookup_root_;
  dev_t lookup_dev_ = 0;
};

// tmpfs, or a block file system on a loop device over a sparse image.
class MountedWorkspace : public WorkspaceBase {
 public:
  MountedWorkspace(FsKind kind, const std::string& workdir)
      : WorkspaceBase(kind), mount_point_(workdir + "/fs") {
    check_unused(mount_point_);
    try {
      if (kind == FsKind::Tmpfs) {
        mount_tmpfs(mount_point_, "mode=0755,size=256m");
      } else {
        image_ = workdir + "/" + to_string(kind) + ".img";
        mount_block(block_fs(kind));
      }
      set_roots(mount_point_, mount_point_);
    } catch (...) {
      clean_up();
      throw;
    }
  }

  ~MountedWorkspace() override { clean_up(); }

 private:
  void mount_block(const BlockFs& fs) {
    std::string mkfs = find_program(fs.mkfs);
    if (mkfs.empty()) {
      throw SetupError(std::string(fs.mkfs) + " not found: install the Debian package " +
                       fs.package);
    }
    int fd = open(image_.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) throw SetupError(errno_message("create image '" + image_ + "'", errno));
    int rc = ftruncate(fd, fs.image_bytes);
    int err = errno;
    close(fd);
    if (rc != 0) throw SetupError(errno_message("size image '" + image_ + "'", err));

    ProgramResult made = run_program({mkfs, fs.force, image_});
    if (!WIFEXITED(made.status) || WEXITSTATUS(made.status) != 0) {
      throw SetupError(std::string(fs.mkfs) + " '" + image_ + "' failed (" +
                       describe_status(made.status) + "): " + made.output);
    }

    int loop_fd = -1;
    std::string dev = attach_loop_device(image_, &loop_fd);
    make_dir(mount_point_);
    rc = mount(dev.c_str(), mount_point_.c_str(), fs.type, 0, nullptr);
    err = errno;
    // The mount holds the device now; with autoclear it frees itself at unmount.
    close(loop_fd);
    if (rc != 0) {
      throw SetupError(errno_message(
          std::string("mount ") + fs.type + " " + dev + " on '" + mount_point_ + "'", err));
    }
    if (chmod(mount_point_.c_str(), 0755) != 0) {
      throw SetupError(errno_message("chmod '" + mount_point_ + "'", errno));
    }
    spdlog::debug("fs_block_mounted type={} device={} image={}", fs.type, dev, image_);
  }

  void clean_up() {
    unmount_quietly(mount_point_);
    if (!image_.empty() && unlink(image_.c_str()) != 0 && errno != ENOENT) {
      spdlog::warn("fs_image_unlink_failed path={} error=\"{}\"", image_, std::strerror(errno));
    }
  }

  std::string mount_point_;
  std::string image_;
};

// The FUSE passthrough over a tmpfs backing tree.
class FuseWorkspace : public WorkspaceBase {
 public:
  FuseWorkspace(FsKind kind, const std::string& workdir, double timeout_s)
      : WorkspaceBase(kind), backing_(workdir + "/backing"), view_(workdir + "/view") {
    check_unused(backing_);
    check_unused(view_);
    mount_tmpfs(backing_, "mode=0755,size=256m");
    try {
      make_dir(view_);
      fuse_ = FusePassthrough::start({backing_, view_, timeout_s});
      set_roots(backing_, view_);
    } catch (...) {
      fuse_.reset();
      rmdir(view_.c_str());
      unmount_quietly(backing_);
      throw;
    }
  }

  ~FuseWorkspace() override {
    fuse_.reset();  // detaches the view and stops the daemon
    if (rmdir(view_.c_str()) != 0) {
      spdlog::warn("fs_rmdir_failed path={} error=\"{}\"", view_, std::strerror(errno));
    }
    unmount_quietly(backing_);
  }

 private:
  std::string backing_;
  std::string view_;
  std::unique_ptr<FusePassthrough> fuse_;
};

// Observers (uid 65534) must be able to walk down to `dir`.
void check_searchable(const std::string& dir) {
  std::string path = dir;
  for (;;) {
    struct stat st;
    if (stat(path.c_str(), &st) != 0) throw SetupError(errno_message("stat '" + path + "'", errno));
    if ((st.st_mode & S_IXOTH) == 0) {
      char mode[8];
      std::snprintf(mode, sizeof mode, "%04o", st.st_mode & 07777);
      throw SetupError("--dir '" + dir + "' is not usable: '" + path + "' (mode " + mode +
                       ") is not searchable by others, and observers run as uid 65534");
    }
    if (path == "/") return;
    size_t slash = path.rfind('/');
    path = slash == 0 ? "/" : path.substr(0, slash);
  }
}

// A fresh subfolder of a folder the user chose (--dir), on whatever fs it is.
class UserDirWorkspace : public WorkspaceBase {
 public:
  explicit UserDirWorkspace(const std::string& user_dir) : WorkspaceBase(FsKind::UserDir) {
    if (user_dir.empty()) throw SetupError("fs kind dir needs a folder (--dir PATH)");
    char* resolved = realpath(user_dir.c_str(), nullptr);
    if (resolved == nullptr) {
      throw SetupError(errno_message("--dir '" + user_dir + "' is not usable", errno));
    }
    std::string dir = resolved;
    std::free(resolved);
    struct stat st;
    if (stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
      throw SetupError("--dir '" + user_dir + "' is not usable: want an existing directory");
    }
    check_searchable(dir);
    std::string templ = (dir == "/" ? "" : dir) + "/leapfrog-XXXXXX";
    if (mkdtemp(templ.data()) == nullptr) {
      throw SetupError(errno_message("create a folder in --dir '" + user_dir + "'", errno));
    }
    root_ = templ;
    if (chmod(root_.c_str(), 0755) != 0) {
      int err = errno;
      rmdir(root_.c_str());
      throw SetupError(errno_message("chmod '" + root_ + "'", err));
    }
    set_roots(root_, root_);
  }

  ~UserDirWorkspace() override {
    std::string error;
    if (!remove_tree(root_, &error)) {
      spdlog::warn("fs_remove_failed path={} error=\"{}\"", root_, error);
    }
  }

 private:
  std::string root_;
};

}  // namespace

FsKind parse_fs_kind(const std::string& name) {
  std::string accepted;
  for (const auto& [kind, kind_name] : kKindNames) {
    if (name == kind_name) return kind;
    accepted += accepted.empty() ? "" : ", ";
    accepted += kind_name;
  }
  throw SetupError("unknown file system kind '" + name + "', want one of " + accepted);
}

const char* to_string(FsKind kind) {
  for (const auto& [k, kind_name] : kKindNames) {
    if (k == kind) return kind_name;
  }
  return "unknown";
}

std::string unavailable_reason(FsKind kind) {
  switch (kind) {
    case FsKind::Tmpfs:
      return kernel_has_fs("tmpfs") ? "" : "the kernel has no tmpfs";
    case FsKind::Ext4:
    case FsKind::Xfs:
    case FsKind::Btrfs: {
      const BlockFs fs = block_fs(kind);
      if (find_program(fs.mkfs).empty())
        return std::string(fs.mkfs) + " not found (Debian package " + fs.package + ")";
      if (access("/dev/loop-control", R_OK | W_OK) != 0)
        return "no loop devices (/dev/loop-control)";
      if (!kernel_has_fs(fs.type) && !kernel_can_load_fs(fs.type))
        return std::string("the kernel has no ") + fs.type +
               " (not built in, no module loaded or loadable)";
      return "";
    }
    case FsKind::FuseCached:
    case FsKind::FuseDirect:
      if (access("/dev/fuse", R_OK | W_OK) != 0) return "no FUSE device (/dev/fuse)";
      return "";
    case FsKind::UserDir:
      return "needs --dir";
  }
  return "unknown kind";
}

std::vector<FsKind> available_kinds() {
  std::vector<FsKind> out;
  for (const auto& [kind, name] : kKindNames) {
    if (kind != FsKind::UserDir && unavailable_reason(kind).empty()) out.push_back(kind);
  }
  return out;
}

std::string fs_name(FsKind kind, FsView view) {
  std::string n = to_string(kind);
  if (view != FsView::None) n += std::string("+") + to_string(view);
  return n;
}

FsSpec parse_fs_name(const std::string& name) {
  FsSpec spec;
  const size_t plus = name.find('+');
  spec.kind = parse_fs_kind(name.substr(0, plus));
  if (plus != std::string::npos) {
    spec.view = parse_fs_view(name.substr(plus + 1));
    if (spec.view == FsView::None) throw SetupError("bad file system '" + name + "': want KIND or KIND+VIEW");
  }
  return spec;
}

std::unique_ptr<Workspace> provision(const FsSpec& spec, const std::string& workdir) {
  if (spec.view != FsView::None) {
    const std::string why = view_unavailable_reason(spec.kind, spec.view);
    if (!why.empty()) throw SetupError("cannot run " + fs_name(spec.kind, spec.view) + ": " + why);
    FsSpec base = spec;
    base.view = FsView::None;
    return make_view(provision(base, workdir), spec.view, workdir);
  }
  switch (spec.kind) {
    case FsKind::Tmpfs:
    case FsKind::Ext4:
    case FsKind::Xfs:
    case FsKind::Btrfs:
      return std::make_unique<MountedWorkspace>(spec.kind, workdir);
    case FsKind::FuseCached:
      if (!(spec.fuse_timeout_s > 0)) {
        throw SetupError("fuse-cached needs a positive cache timeout, got " +
                         std::to_string(spec.fuse_timeout_s));
      }
      return std::make_unique<FuseWorkspace>(spec.kind, workdir, spec.fuse_timeout_s);
    case FsKind::FuseDirect:
      return std::make_unique<FuseWorkspace>(spec.kind, workdir, 0.0);
    case FsKind::UserDir:
      return std::make_unique<UserDirWorkspace>(spec.user_dir);
  }
  throw SetupError("unknown file system kind " + std::to_string(static_cast<int>(spec.kind)));
}

}  // namespace leapfrog::fs
