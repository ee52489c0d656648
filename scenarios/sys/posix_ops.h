#pragma once
// The few operating-system calls that differ between kernels (Linux today,
// FreeBSD guests later). Scenarios call these instead of the raw syscalls, so a
// port replaces this file and not the scenarios. Each returns 0 or an errno and
// never throws on the hot path.

#include <sys/types.h>

#include <memory>
#include <string>

#include "scenarios/model.h"

namespace leapfrog::sys {

// Atomically swaps two names (Linux renameat2 RENAME_EXCHANGE).
int rename_exchange(const char* a, const char* b);
// Plain rename(2).
int rename_path(const char* from, const char* to);
// Mounts a fresh tmpfs whose root has `root_mode`, holding nothing.
int mount_tmpfs(const char* target, mode_t root_mode);
// Moves the mount at `from` onto `to` in one step (Linux MS_MOVE).
int move_mount(const char* from, const char* to);
// Bind-mounts the directory `from` onto `to` in one step (Linux MS_BIND).
int bind_mount(const char* from, const char* to);
// Detaches whatever is mounted on `target`.
int unmount(const char* target);
// Frees the kernel's unused dentries and inodes (echo 2 > /proc/sys/vm/drop_caches).
int drop_caches();

// A prepared POSIX access ACL, built once at setup and applied on the hot path
// without allocating.
class AccessAcl {
 public:
  // The ACL of `attr`: its mode bits plus its extended entries.
  explicit AccessAcl(const Attr& attr);
  ~AccessAcl();
  AccessAcl(const AccessAcl&) = delete;
  AccessAcl& operator=(const AccessAcl&) = delete;
  int apply(const char* path) const;

 private:
  void* acl_ = nullptr;
};

// The same ACL written the way only xfs stores it: its raw on-disk xattr
// "trusted.SGI_ACL_FILE" (big-endian entries; the mode alone is written as
// the minimal three-entry ACL). Root only. Besides changing the ACL, xfs drops
// the inode's cached ACL on such a write (xfs_forget_acl), without caching
// the new one, so the next permission check reads it from disk: every change
// is both a set_acl and a forget, the pair get_acl() races against.
class XfsRawAcl {
 public:
  explicit XfsRawAcl(const Attr& attr);
  int apply(const char* path) const;
  const std::string& bytes() const { return bytes_; }

 private:
  std::string bytes_;
};

// True when `path` lies on xfs.
bool on_xfs(const char* path);

// Reads the access ACL's extended entries of `path` into `attr` (and mode).
int read_attr(const char* path, Attr& attr);

// Drops to an unprivileged identity for the rest of the process.
// Throws std::system_error if the kernel refuses.
void drop_privileges(const Cred& cred);

}  // namespace leapfrog::sys
