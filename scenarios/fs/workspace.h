#pragma once
// Where a scenario runs: a private mount namespace and temp folder (the sandbox),
// and the file system under test inside it (the workspace).

#include <sys/types.h>

#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace leapfrog::fs {

// Thrown when the file system under test cannot be set up (not root, no FUSE,
// mkfs missing, bad --dir). The message says what was wanted.
class SetupError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

enum class FsKind { Tmpfs, Ext4, Xfs, Btrfs, FuseCached, FuseDirect, UserDir };
// A second view of the tree (see view.h); None: one view.
enum class FsView { None, Bind, Overlay, Idmap, OverlayLower };

// Parses "tmpfs", "ext4", "xfs", "btrfs", "fuse-cached", "fuse-direct".
// Also "dir" (UserDir, which needs FsSpec::user_dir), so that
// parse_fs_kind(to_string(k)) == k. Throws SetupError naming the accepted values.
FsKind parse_fs_kind(const std::string& name);
const char* to_string(FsKind kind);

struct FsSpec {
  FsKind kind = FsKind::Tmpfs;
  std::string user_dir;       // UserDir only: an existing directory to run inside
  double fuse_timeout_s = 1;  // FuseCached: attr_timeout and entry_timeout
                              // (and negative_timeout); must be > 0
  FsView view = FsView::None;  // a second view of the tree (view.h)
};

// The name campaigns and agents use for a file system with a view:
// "ext4", "ext4+overlay", ...; parse_fs_name is its inverse (kind and view
// of the result; other fields default). Throws SetupError.
std::string fs_name(FsKind kind, FsView view);
FsSpec parse_fs_name(const std::string& name);

// Runs `body` in a forked child that has its own mount namespace (all mounts
// private) and a fresh tmpfs work folder (mode 0755) under /tmp. The parent waits,
// forwards SIGINT/SIGTERM, and removes the folder when the child ends, however it
// ends. Returns the child's exit status (128+signal if it was killed).
// Requires root; throws SetupError otherwise.
int run_sandboxed(const std::function<int(const std::string& workdir)>& body);

// The start of the work folder names of run_sandboxed calls made by process
// `pid`: "/tmp/leapfrog-run-<pid>-<start>-", where <start> is the process's
// start time (clock ticks since boot, /proc/<pid>/stat), so that the name
// tells the folder of a live process from one left by a dead process whose
// pid was reused. "" when `pid` is gone.
std::string run_folder_prefix(pid_t pid);

// The file system under test, mounted inside the sandbox's work folder.
// Mutators change the tree under mutate_root(); observers look up under
// lookup_root(). They are the same folder except for the FUSE kinds, where
// mutate_root() is the backing tree and lookup_root() the FUSE mount over it.
class Workspace {
 public:
  virtual ~Workspace() = default;
  // Folder where mutators create and change the tree (mode 0755).
  virtual const std::string& mutate_root() const = 0;
  // Folder where observers look up the same tree (mode 0755).
  virtual const std::string& lookup_root() const = 0;
  // Folder where a scenario builds its initial tree: mutate_root(), except
  // for the overlay view, whose tree starts in the lower layer.
  virtual const std::string& setup_root() const { return mutate_root(); }
  // st_dev of lookup_root().
  virtual dev_t lookup_dev() const = 0;
  // True when mutate_root() and lookup_root() differ (FUSE, views).
  virtual bool two_views() const = 0;
  // Kind name for reports: "tmpfs", "ext4", ..., "dir", "ext4+overlay".
  virtual std::string name() const = 0;
};

// Why provision() cannot set up `kind` on this machine now, or "" when it
// can: the mkfs program, loop devices and the kernel's support for the type
// (registered, or a module the kernel can load) for the block kinds; the
// FUSE device for the FUSE kinds. UserDir is never available this way.
std::string unavailable_reason(FsKind kind);

// The kinds a fresh run can use here (unavailable_reason() empty), in the
// order of parse_fs_kind's names, without UserDir.
std::vector<FsKind> available_kinds();

// Mounts the file system of `spec` under `workdir` (which must be inside a
// sandbox, see run_sandboxed) and returns it. The destructor unmounts it, stops
// any FUSE daemon, and for UserDir removes the run's subfolder.
// Throws SetupError with a clear reason.
std::unique_ptr<Workspace> provision(const FsSpec& spec, const std::string& workdir);

}  // namespace leapfrog::fs
