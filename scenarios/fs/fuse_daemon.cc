// The passthrough file system the FUSE daemon serves (see fuse_daemon.h).
// The operations run as root; the kernel has already checked the caller's
// permissions (default_permissions, POSIX ACLs).

#include "scenarios/fs/fuse_daemon.h"

// 3.12: fuse_session_loop_mt takes a fuse_loop_config, so we can raise the
// thread cap (default 10) for many concurrent observers.
#define FUSE_USE_VERSION 312
#include <dirent.h>
#include <fcntl.h>
#include <fuse_lowlevel.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <cassert>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace leapfrog::fs {

namespace {

constexpr unsigned kMaxThreads = 64;

// "/proc/self/fd/N". Opening it reaches exactly the object the fd holds (a
// symlink itself, for an O_PATH|O_NOFOLLOW fd), so the calls that take a path
// and no fd (chmod, truncate, utimensat, xattrs, reopening) stay race free.
class ProcPath {
 public:
  explicit ProcPath(int fd) { std::snprintf(path_, sizeof path_, "/proc/self/fd/%d", fd); }
  const char* c_str() const { return path_; }

 private:
  char path_[32];
};

// A backing object the kernel knows: looked up and not yet forgotten.
struct Inode {
  int fd = -1;  // O_PATH|O_NOFOLLOW; holds the object wherever it moves
  dev_t dev = 0;
  ino_t ino = 0;
  uint64_t nlookup = 0;  // the kernel's references; guarded by InodeTable's mutex
};

// The FUSE inodes, one per backing (st_dev, st_ino), with the kernel's lookup
// counts. A fuse_ino_t is the Inode's address (FUSE_ROOT_ID for the root); the
// kernel uses it only until it forgets the last lookup, so no lock is needed to
// turn one back into an Inode.
class InodeTable {
 public:
  InodeTable(int root_fd, const struct stat& root_st) {
    root_.fd = root_fd;
    root_.dev = root_st.st_dev;
    root_.ino = root_st.st_ino;
    root_.nlookup = 1;  // never forgotten
  }
  ~InodeTable() {
    for (auto& [key, inode] : inodes_) close(inode->fd);
    close(root_.fd);
  }
  InodeTable(const InodeTable&) = delete;
  InodeTable& operator=(const InodeTable&) = delete;

  Inode& at(fuse_ino_t ino) { return ino == FUSE_ROOT_ID ? root_ : *reinterpret_cast<Inode*>(ino); }

  // The inode of the object `fd` (O_PATH) holds, whose stat is `st`, with one
  // more lookup. Takes `fd`: keeps it for a new inode, else closes it.
  fuse_ino_t remember(int fd, const struct stat& st) {
    if (st.st_dev == root_.dev && st.st_ino == root_.ino) {
      close(fd);
      return FUSE_ROOT_ID;
    }
    int spare = -1;
    fuse_ino_t id;
    {
      std::lock_guard lock(mutex_);
      auto [it, made] = inodes_.try_emplace({st.st_dev, st.st_ino});
      if (made) {
        it->second = std::make_unique<Inode>(Inode{fd, st.st_dev, st.st_ino, 0});
      } else {
        spare = fd;
      }
      ++it->second->nlookup;
      id = reinterpret_cast<fuse_ino_t>(it->second.get());
    }
    if (spare >= 0) close(spare);
    return id;
  }

  // One more lookup of a known inode (a new hard link to it).
  fuse_ino_t add_lookup(fuse_ino_t ino) {
    if (ino != FUSE_ROOT_ID) {
      std::lock_guard lock(mutex_);
      ++at(ino).nlookup;
    }
    return ino;
  }

  // The kernel dropped `n` lookups of `ino`; at zero the inode goes.
  void forget(fuse_ino_t ino, uint64_t n) {
    if (ino == FUSE_ROOT_ID) return;
    std::unique_ptr<Inode> gone;
    {
      std::lock_guard lock(mutex_);
      Inode& inode = at(ino);
      assert(inode.nlookup >= n);  // the kernel forgets only what it looked up
      inode.nlookup -= n;
      if (inode.nlookup == 0) {
        auto it = inodes_.find({inode.dev, inode.ino});
        gone = std::move(it->second);
        inodes_.erase(it);
      }
    }
    if (gone) close(gone->fd);
  }

 private:
  std::mutex mutex_;
  std::map<std::pair<dev_t, ino_t>, std::unique_ptr<Inode>> inodes_;
  Inode root_;
};

// The daemon's state, reached from each request through fuse_req_userdata.
struct Daemon {
  Daemon(int root_fd, const struct stat& root_st, double timeout)
      : inodes(root_fd, root_st), timeout_s(timeout) {}
  InodeTable inodes;
  double timeout_s;  // entry, attribute and negative-entry timeout
};

// An open directory: the stream and where the kernel's last readdir ended.
struct DirHandle {
  std::mutex mutex;
  DIR* dir = nullptr;
  off_t offset = 0;
  dirent* pending = nullptr;  // read but did not fit the kernel's buffer
};

Daemon& daemon_of(fuse_req_t req) {
  return *static_cast<Daemon*>(fuse_req_userdata(req));
}

Inode& inode_of(fuse_req_t req, fuse_ino_t ino) {
  return daemon_of(req).inodes.at(ino);
}

// 0, or errno of the failed call that returned `rc`.
int err_of(long rc) {
  return rc < 0 ? errno : 0;
}

// Stat of the object an O_PATH fd holds (a symlink itself, not its target).
int stat_fd(int fd, struct stat* st) {
  return err_of(fstatat(fd, "", st, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW));
}

// Fills `e` for the object `fd` (O_PATH) holds and counts the kernel's new
// lookup. Takes `fd`. Returns 0 or errno.
int make_entry(Daemon& d, int fd, fuse_entry_param* e) {
  *e = fuse_entry_param{};
  int err = stat_fd(fd, &e->attr);
  if (err != 0) {
    close(fd);
    return err;
  }
  e->ino = d.inodes.remember(fd, e->attr);
  e->attr_timeout = d.timeout_s;
  e->entry_timeout = d.timeout_s;
  return 0;
}

// make_entry for whatever `name` in `parent` is at this instant.
int lookup_entry(Daemon& d, const Inode& parent, const char* name, fuse_entry_param* e) {
  int fd = openat(parent.fd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return errno;
  return make_entry(d, fd, e);
}

// New objects belong to the caller, as on a local file system; in a
// set-group-ID directory they keep the group the backing fs gave them.
int give_to_caller(fuse_req_t req, const Inode& parent, int fd) {
  const fuse_ctx* ctx = fuse_req_ctx(req);
  if (ctx->uid == 0 && ctx->gid == 0) return 0;
  gid_t gid = ctx->gid;
  struct stat dir;
  if (stat_fd(parent.fd, &dir) == 0 && (dir.st_mode & S_ISGID) != 0) gid = static_cast<gid_t>(-1);
  return err_of(fchownat(fd, "", ctx->uid, gid, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW));
}

// Replies to a mknod/mkdir/symlink whose call returned `rc`: the new `name`
// in `parent`, handed to the caller.
void reply_made(fuse_req_t req, fuse_ino_t parent, const char* name, int rc) {
  if (rc != 0) {
    fuse_reply_err(req, errno);
    return;
  }
  Daemon& d = daemon_of(req);
  const Inode& dir = d.inodes.at(parent);
  int fd = openat(dir.fd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    fuse_reply_err(req, errno);
    return;
  }
  int err = give_to_caller(req, dir, fd);
  if (err != 0) {
    close(fd);
    fuse_reply_err(req, err);
    return;
  }
  fuse_entry_param e;
  err = make_entry(d, fd, &e);
  if (err != 0) {
    fuse_reply_err(req, err);
  } else {
    fuse_reply_entry(req, &e);
  }
}

void op_init(void*, fuse_conn_info* conn) {
  // ACLs are stored as xattrs in the backing tree; the kernel enforces them.
  if ((conn->capable & FUSE_CAP_POSIX_ACL) != 0) conn->want |= FUSE_CAP_POSIX_ACL;
}

void op_lookup(fuse_req_t req, fuse_ino_t parent, const char* name) {
  Daemon& d = daemon_of(req);
  fuse_entry_param e;
  int err = lookup_entry(d, d.inodes.at(parent), name, &e);
  if (err == ENOENT && d.timeout_s > 0) {
    // A negative entry (ino 0), which the kernel caches like a positive one.
    e = fuse_entry_param{};
    e.entry_timeout = d.timeout_s;
    fuse_reply_entry(req, &e);
  } else if (err != 0) {
    fuse_reply_err(req, err);
  } else {
    fuse_reply_entry(req, &e);
  }
}

void op_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup) {
  daemon_of(req).inodes.forget(ino, nlookup);
  fuse_reply_none(req);
}

void op_forget_multi(fuse_req_t req, size_t count, fuse_forget_data* forgets) {
  InodeTable& inodes = daemon_of(req).inodes;
  for (size_t i = 0; i < count; ++i) inodes.forget(forgets[i].ino, forgets[i].nlookup);
  fuse_reply_none(req);
}

void op_getattr(fuse_req_t req, fuse_ino_t ino, fuse_file_info*) {
  struct stat st;
  int err = stat_fd(inode_of(req, ino).fd, &st);
  if (err != 0) {
    fuse_reply_err(req, err);
  } else {
    fuse_reply_attr(req, &st, daemon_of(req).timeout_s);
  }
}

// One time of a setattr: now, the given time, or unchanged.
timespec time_to_set(int to_set, int now_flag, int set_flag, const timespec& given) {
  if ((to_set & now_flag) != 0) return {0, UTIME_NOW};
  if ((to_set & set_flag) != 0) return given;
  return {0, UTIME_OMIT};
}

// Applies the changes in `to_set`; through the open file when there is one.
int set_attributes(const Inode& inode, const struct stat& attr, int to_set, fuse_file_info* fi) {
  const int fd = fi != nullptr ? static_cast<int>(fi->fh) : -1;
  const ProcPath path(inode.fd);
  if ((to_set & FUSE_SET_ATTR_MODE) != 0) {
    int rc = fd >= 0 ? fchmod(fd, attr.st_mode) : chmod(path.c_str(), attr.st_mode);
    if (rc != 0) return errno;
  }
  if ((to_set & (FUSE_SET_ATTR_UID | FUSE_SET_ATTR_GID)) != 0) {
    uid_t uid = (to_set & FUSE_SET_ATTR_UID) != 0 ? attr.st_uid : static_cast<uid_t>(-1);
    gid_t gid = (to_set & FUSE_SET_ATTR_GID) != 0 ? attr.st_gid : static_cast<gid_t>(-1);
    if (fchownat(inode.fd, "", uid, gid, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) != 0) return errno;
  }
  if ((to_set & FUSE_SET_ATTR_SIZE) != 0) {
    int rc = fd >= 0 ? ftruncate(fd, attr.st_size) : truncate(path.c_str(), attr.st_size);
    if (rc != 0) return errno;
  }
  constexpr int kTimes =
      FUSE_SET_ATTR_ATIME | FUSE_SET_ATTR_MTIME | FUSE_SET_ATTR_ATIME_NOW | FUSE_SET_ATTR_MTIME_NOW;
  if ((to_set & kTimes) != 0) {
    const timespec times[2] = {
        time_to_set(to_set, FUSE_SET_ATTR_ATIME_NOW, FUSE_SET_ATTR_ATIME, attr.st_atim),
        time_to_set(to_set, FUSE_SET_ATTR_MTIME_NOW, FUSE_SET_ATTR_MTIME, attr.st_mtim),
    };
    int rc = fd >= 0 ? futimens(fd, times) : utimensat(AT_FDCWD, path.c_str(), times, 0);
    if (rc != 0) return errno;
  }
  return 0;
}

void op_setattr(fuse_req_t req, fuse_ino_t ino, struct stat* attr, int to_set, fuse_file_info* fi) {
  const Inode& inode = inode_of(req, ino);
  int err = set_attributes(inode, *attr, to_set, fi);
  struct stat st;
  if (err == 0) err = stat_fd(inode.fd, &st);
  if (err != 0) {
    fuse_reply_err(req, err);
  } else {
    fuse_reply_attr(req, &st, daemon_of(req).timeout_s);
  }
}

void op_readlink(fuse_req_t req, fuse_ino_t ino) {
  char target[PATH_MAX + 1];
  ssize_t n = readlinkat(inode_of(req, ino).fd, "", target, sizeof target);
  if (n < 0) {
    fuse_reply_err(req, errno);
  } else if (static_cast<size_t>(n) == sizeof target) {
    fuse_reply_err(req, ENAMETOOLONG);
  } else {
    target[n] = '\0';
    fuse_reply_readlink(req, target);
  }
}

void op_mknod(fuse_req_t req, fuse_ino_t parent, const char* name, mode_t mode, dev_t rdev) {
  reply_made(req, parent, name, mknodat(inode_of(req, parent).fd, name, mode, rdev));
}

void op_mkdir(fuse_req_t req, fuse_ino_t parent, const char* name, mode_t mode) {
  reply_made(req, parent, name, mkdirat(inode_of(req, parent).fd, name, mode));
}

void op_symlink(fuse_req_t req, const char* target, fuse_ino_t parent, const char* name) {
  // The target stays literal: it is resolved by whoever follows the link.
  reply_made(req, parent, name, symlinkat(target, inode_of(req, parent).fd, name));
}

void op_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t new_parent, const char* new_name) {
  Daemon& d = daemon_of(req);
  const Inode& inode = d.inodes.at(ino);
  fuse_entry_param e{};
  int err = err_of(linkat(inode.fd, "", d.inodes.at(new_parent).fd, new_name, AT_EMPTY_PATH));
  if (err == 0) err = stat_fd(inode.fd, &e.attr);
  if (err != 0) {
    fuse_reply_err(req, err);
    return;
  }
  e.ino = d.inodes.add_lookup(ino);
  e.attr_timeout = d.timeout_s;
  e.entry_timeout = d.timeout_s;
  fuse_reply_entry(req, &e);
}

void op_unlink(fuse_req_t req, fuse_ino_t parent, const char* name) {
  fuse_reply_err(req, err_of(unlinkat(inode_of(req, parent).fd, name, 0)));
}

void op_rmdir(fuse_req_t req, fuse_ino_t parent, const char* name) {
  fuse_reply_err(req, err_of(unlinkat(inode_of(req, parent).fd, name, AT_REMOVEDIR)));
}

void op_rename(fuse_req_t req, fuse_ino_t parent, const char* name, fuse_ino_t new_parent,
               const char* new_name, unsigned int flags) {
  // flags (RENAME_EXCHANGE, RENAME_NOREPLACE) mean the same to the backing fs.
  int rc = renameat2(inode_of(req, parent).fd, name, inode_of(req, new_parent).fd, new_name, flags);
  fuse_reply_err(req, err_of(rc));
}

void op_open(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
  // The kernel has resolved any symlink already; ino is the file to open.
  int fd = open(ProcPath(inode_of(req, ino).fd).c_str(), (fi->flags & ~O_NOFOLLOW) | O_CLOEXEC);
  if (fd < 0) {
    fuse_reply_err(req, errno);
    return;
  }
  fi->fh = static_cast<uint64_t>(fd);
  // Fails when the request was interrupted: the kernel will not release it.
  if (fuse_reply_open(req, fi) != 0) close(fd);
}

void op_create(fuse_req_t req, fuse_ino_t parent, const char* name, mode_t mode,
               fuse_file_info* fi) {
  Daemon& d = daemon_of(req);
  const Inode& dir = d.inodes.at(parent);
  // O_NOFOLLOW: a symlink swapped in underneath must not be followed as root.
  int fd = openat(dir.fd, name, fi->flags | O_CREAT | O_NOFOLLOW | O_CLOEXEC, mode);
  if (fd < 0) {
    fuse_reply_err(req, errno);
    return;
  }
  int err = give_to_caller(req, dir, fd);
  int path_fd = -1;
  if (err == 0) {
    path_fd = open(ProcPath(fd).c_str(), O_PATH | O_CLOEXEC);
    err = err_of(path_fd);
  }
  fuse_entry_param e;
  if (err == 0) err = make_entry(d, path_fd, &e);
  if (err != 0) {
    close(fd);
    fuse_reply_err(req, err);
    return;
  }
  fi->fh = static_cast<uint64_t>(fd);
  if (fuse_reply_create(req, &e, fi) != 0) {
    close(fd);
    d.inodes.forget(e.ino, 1);
  }
}

void op_read(fuse_req_t req, fuse_ino_t, size_t size, off_t offset, fuse_file_info* fi) {
  // libfuse reads from the fd straight into the reply (splicing if it can).
  fuse_bufvec data{};
  data.count = 1;
  data.buf[0].size = size;
  data.buf[0].flags = static_cast<fuse_buf_flags>(FUSE_BUF_IS_FD | FUSE_BUF_FD_SEEK);
  data.buf[0].fd = static_cast<int>(fi->fh);
  data.buf[0].pos = offset;
  fuse_reply_data(req, &data, FUSE_BUF_SPLICE_MOVE);
}

void op_write(fuse_req_t req, fuse_ino_t, const char* buf, size_t size, off_t offset,
              fuse_file_info* fi) {
  ssize_t n = pwrite(static_cast<int>(fi->fh), buf, size, offset);
  if (n < 0) {
    fuse_reply_err(req, errno);
  } else {
    fuse_reply_write(req, static_cast<size_t>(n));
  }
}

void op_flush(fuse_req_t req, fuse_ino_t, fuse_file_info* fi) {
  // The caller closed one of its copies: what close(2) would report (NFS-like
  // backing trees report write-back errors here), without closing ours.
  fuse_reply_err(req, err_of(close(dup(static_cast<int>(fi->fh)))));
}

void op_release(fuse_req_t req, fuse_ino_t, fuse_file_info* fi) {
  close(static_cast<int>(fi->fh));
  fuse_reply_err(req, 0);
}

void op_fsync(fuse_req_t req, fuse_ino_t, int datasync, fuse_file_info* fi) {
  int fd = static_cast<int>(fi->fh);
  fuse_reply_err(req, err_of(datasync != 0 ? fdatasync(fd) : fsync(fd)));
}

DirHandle& dir_of(fuse_file_info* fi) {
  return *reinterpret_cast<DirHandle*>(fi->fh);
}

void op_opendir(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
  int fd = openat(inode_of(req, ino).fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) {
    fuse_reply_err(req, errno);
    return;
  }
  DIR* dir = fdopendir(fd);
  if (dir == nullptr) {
    int err = errno;
    close(fd);
    fuse_reply_err(req, err);
    return;
  }
  auto* handle = new DirHandle;
  handle->dir = dir;
  fi->fh = reinterpret_cast<uint64_t>(handle);
  if (fuse_reply_open(req, fi) != 0) {
    closedir(dir);
    delete handle;
  }
}

void op_readdir(fuse_req_t req, fuse_ino_t, size_t size, off_t offset, fuse_file_info* fi) {
  DirHandle& handle = dir_of(fi);
  std::vector<char> buf(size);
  size_t used = 0;
  int err = 0;
  {
    std::lock_guard lock(handle.mutex);
    if (offset != handle.offset) {
      seekdir(handle.dir, offset);
      handle.offset = offset;
      handle.pending = nullptr;
    }
    for (;;) {
      if (handle.pending == nullptr) {
        errno = 0;  // readdir signals an error only through errno
        handle.pending = readdir(handle.dir);
        if (handle.pending == nullptr) {
          err = errno;
          break;
        }
      }
      const dirent& entry = *handle.pending;
      struct stat st {};
      st.st_ino = entry.d_ino;
      st.st_mode = static_cast<mode_t>(DTTOIF(entry.d_type));
      size_t need =
          fuse_add_direntry(req, buf.data() + used, size - used, entry.d_name, &st, entry.d_off);
      if (need > size - used) break;  // the next call starts with it
      used += need;
      handle.offset = entry.d_off;
      handle.pending = nullptr;
    }
  }
  if (err != 0 && used == 0) {
    fuse_reply_err(req, err);
  } else {
    fuse_reply_buf(req, buf.data(), used);
  }
}

void op_releasedir(fuse_req_t req, fuse_ino_t, fuse_file_info* fi) {
  DirHandle* handle = &dir_of(fi);
  closedir(handle->dir);
  delete handle;
  fuse_reply_err(req, 0);
}

void op_statfs(fuse_req_t req, fuse_ino_t ino) {
  struct statvfs st;
  if (fstatvfs(inode_of(req, ino).fd, &st) != 0) {
    fuse_reply_err(req, errno);
  } else {
    fuse_reply_statfs(req, &st);
  }
}

void op_access(fuse_req_t req, fuse_ino_t ino, int) {
  // Never called with default_permissions (the kernel decides); existence only.
  struct stat st;
  fuse_reply_err(req, stat_fd(inode_of(req, ino).fd, &st));
}

// Replies to a getxattr/listxattr whose `read(buffer, size)` call returned
// the value's size (with size 0: the size only).
template <typename Read>
void reply_xattr_value(fuse_req_t req, size_t size, Read read) {
  std::vector<char> value(size);
  ssize_t n = read(size == 0 ? nullptr : value.data(), size);
  if (n < 0) {
    fuse_reply_err(req, errno);
  } else if (size == 0) {
    fuse_reply_xattr(req, static_cast<size_t>(n));
  } else {
    fuse_reply_buf(req, value.data(), static_cast<size_t>(n));
  }
}

void op_getxattr(fuse_req_t req, fuse_ino_t ino, const char* name, size_t size) {
  const ProcPath path(inode_of(req, ino).fd);
  reply_xattr_value(
      req, size, [&](char* value, size_t len) { return getxattr(path.c_str(), name, value, len); });
}

void op_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size) {
  const ProcPath path(inode_of(req, ino).fd);
  reply_xattr_value(req, size,
                    [&](char* list, size_t len) { return listxattr(path.c_str(), list, len); });
}

void op_setxattr(fuse_req_t req, fuse_ino_t ino, const char* name, const char* value, size_t size,
                 int flags) {
  const ProcPath path(inode_of(req, ino).fd);
  fuse_reply_err(req, err_of(setxattr(path.c_str(), name, value, size, flags)));
}

void op_removexattr(fuse_req_t req, fuse_ino_t ino, const char* name) {
  const ProcPath path(inode_of(req, ino).fd);
  fuse_reply_err(req, err_of(removexattr(path.c_str(), name)));
}

fuse_lowlevel_ops operations() {
  fuse_lowlevel_ops ops{};
  ops.init = op_init;
  ops.lookup = op_lookup;
  ops.forget = op_forget;
  ops.forget_multi = op_forget_multi;
  ops.getattr = op_getattr;
  ops.setattr = op_setattr;
  ops.readlink = op_readlink;
  ops.mknod = op_mknod;
  ops.mkdir = op_mkdir;
  ops.symlink = op_symlink;
  ops.link = op_link;
  ops.unlink = op_unlink;
  ops.rmdir = op_rmdir;
  ops.rename = op_rename;
  ops.open = op_open;
  ops.create = op_create;
  ops.read = op_read;
  ops.write = op_write;
  ops.flush = op_flush;
  ops.release = op_release;
  ops.fsync = op_fsync;
  ops.opendir = op_opendir;
  ops.readdir = op_readdir;
  ops.releasedir = op_releasedir;
  ops.statfs = op_statfs;
  ops.access = op_access;
  ops.getxattr = op_getxattr;
  ops.listxattr = op_listxattr;
  ops.setxattr = op_setxattr;
  ops.removexattr = op_removexattr;
  return ops;
}

}  // namespace

int serve_passthrough(const FuseOptions& options, const std::function<void()>& mounted) {
  umask(0);  // the kernel already applied the caller's umask
  // Every inode the kernel remembers holds an fd: allow as many as we may.
  struct rlimit files;
  if (getrlimit(RLIMIT_NOFILE, &files) == 0 && files.rlim_cur < files.rlim_max) {
    files.rlim_cur = files.rlim_max;
    setrlimit(RLIMIT_NOFILE, &files);
  }

  int root_fd = open(options.backing.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
  struct stat root_st;
  if (root_fd < 0 || stat_fd(root_fd, &root_st) != 0) {
    std::fprintf(stderr, "open the backing folder '%s': %s\n", options.backing.c_str(),
                 std::strerror(errno));
    return 1;
  }
  Daemon daemon(root_fd, root_st, options.timeout_s);

  std::string prog = "leapfrog-fuse";
  std::string dash_o = "-o";
  std::string mount_opts = "allow_other,default_permissions,fsname=leapfrog,subtype=leapfrog";
  char* argv[] = {prog.data(), dash_o.data(), mount_opts.data(), nullptr};
  fuse_args args = FUSE_ARGS_INIT(3, argv);
  const fuse_lowlevel_ops ops = operations();
  fuse_session* session = fuse_session_new(&args, &ops, sizeof ops, &daemon);
  if (session == nullptr) {
    std::fprintf(stderr, "fuse_session_new failed\n");
    return 1;
  }
  if (fuse_session_mount(session, options.view.c_str()) != 0) {
    std::fprintf(stderr, "fuse_session_mount on '%s' failed\n", options.view.c_str());
    return 1;
  }
  mounted();

  fuse_loop_config* loop = fuse_loop_cfg_create();
  fuse_loop_cfg_set_max_threads(loop, kMaxThreads);
  fuse_loop_cfg_set_idle_threads(loop, kMaxThreads);
  int rc = fuse_session_loop_mt(session, loop);
  // The mount is gone (detached by the parent): nothing to unmount, and the
  // session goes with the process.
  if (rc != 0) std::fprintf(stderr, "fuse_session_loop_mt returned %d\n", rc);
  return rc == 0 ? 0 : 1;
}

}  // namespace leapfrog::fs
