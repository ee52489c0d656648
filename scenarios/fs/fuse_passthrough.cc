#include "scenarios/fs/fuse_passthrough.h"

// 3.12: fuse_loop_mt takes a fuse_loop_config, so we can raise the thread cap
// (default 10) for many concurrent observers.
#define FUSE_USE_VERSION 312
#include <fuse.h>

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <utility>

#include "scenarios/fs/sys_util.h"
#include "scenarios/fs/workspace.h"

namespace leapfrog::fs {

namespace {

constexpr auto kStartDeadline = std::chrono::seconds(5);
constexpr auto kStopDeadline = std::chrono::seconds(2);
constexpr unsigned kMaxThreads = 64;
constexpr size_t kMaxLogBytes = 16 * 1024;
// Fd number the ready pipe gets inside the daemon (after stdin/out/err).
constexpr int kReadyFd = 3;

// ---- Daemon side: the operations. They run as root on backing_root + path;
// the kernel has already checked the caller's permissions (default_permissions).

std::string backing_root;  // set in the daemon process only
double cache_timeout_s = 0;

std::string real(const char* path) {
  return backing_root + path;
}

int fail() {
  return -errno;
}

// New objects belong to the caller, as on a local file system.
int give_to_caller(const std::string& path) {
  const fuse_context* ctx = fuse_get_context();
  if (ctx->uid == 0 && ctx->gid == 0) return 0;
  return lchown(path.c_str(), ctx->uid, ctx->gid) == 0 ? 0 : fail();
}

void* op_init(fuse_conn_info* conn, fuse_config* cfg) {
  cfg->use_ino = 1;      // report the backing inode numbers
  cfg->hard_remove = 1;  // no .fuse_hidden files in the backing tree
  cfg->entry_timeout = cache_timeout_s;
  cfg->attr_timeout = cache_timeout_s;
  cfg->negative_timeout = cache_timeout_s;
  // ACLs are stored as xattrs in the backing tree; the kernel enforces them.
  if (conn->capable & FUSE_CAP_POSIX_ACL) conn->want |= FUSE_CAP_POSIX_ACL;
  return nullptr;
}

int op_getattr(const char* path, struct stat* st, fuse_file_info* fi) {
  int rc = fi ? fstat(static_cast<int>(fi->fh), st) : lstat(real(path).c_str(), st);
  return rc == 0 ? 0 : fail();
}

int op_access(const char* path, int) {
  // Never called with default_permissions (the kernel decides); existence only.
  struct stat st;
  return lstat(real(path).c_str(), &st) == 0 ? 0 : fail();
}

int op_readlink(const char* path, char* buf, size_t size) {
  if (size == 0) return -EINVAL;
  ssize_t n = readlink(real(path).c_str(), buf, size - 1);
  if (n < 0) return fail();
  buf[n] = '\0';
  return 0;
}

int op_mknod(const char* path, mode_t mode, dev_t rdev) {
  std::string p = real(path);
  if (mknod(p.c_str(), mode, rdev) != 0) return fail();
  return give_to_caller(p);
}

int op_mkdir(const char* path, mode_t mode) {
  std::string p = real(path);
  if (mkdir(p.c_str(), mode) != 0) return fail();
  return give_to_caller(p);
}

int op_unlink(const char* path) {
  return unlink(real(path).c_str()) == 0 ? 0 : fail();
}

int op_rmdir(const char* path) {
  return rmdir(real(path).c_str()) == 0 ? 0 : fail();
}

int op_symlink(const char* target, const char* link_path) {
  std::string p = real(link_path);
  if (symlink(target, p.c_str()) != 0) return fail();  // target stays literal
  return give_to_caller(p);
}

int op_rename(const char* from, const char* to, unsigned int flags) {
  return renameat2(AT_FDCWD, real(from).c_str(), AT_FDCWD, real(to).c_str(), flags) == 0 ? 0
                                                                                         : fail();
}

int op_link(const char* from, const char* to) {
  return link(real(from).c_str(), real(to).c_str()) == 0 ? 0 : fail();
}

int op_chmod(const char* path, mode_t mode, fuse_file_info* fi) {
  int rc = fi ? fchmod(static_cast<int>(fi->fh), mode) : chmod(real(path).c_str(), mode);
  return rc == 0 ? 0 : fail();
}

int op_chown(const char* path, uid_t uid, gid_t gid, fuse_file_info* fi) {
  int rc = fi ? fchown(static_cast<int>(fi->fh), uid, gid) : lchown(real(path).c_str(), uid, gid);
  return rc == 0 ? 0 : fail();
}

int op_truncate(const char* path, off_t size, fuse_file_info* fi) {
  int rc = fi ? ftruncate(static_cast<int>(fi->fh), size) : truncate(real(path).c_str(), size);
  return rc == 0 ? 0 : fail();
}

int op_utimens(const char* path, const struct timespec tv[2], fuse_file_info* fi) {
  int rc = fi ? futimens(static_cast<int>(fi->fh), tv)
              : utimensat(AT_FDCWD, real(path).c_str(), tv, AT_SYMLINK_NOFOLLOW);
  return rc == 0 ? 0 : fail();
}

int op_open(const char* path, fuse_file_info* fi) {
  // O_NOFOLLOW: a symlink swapped in underneath must not be followed as root.
  int fd = open(real(path).c_str(), fi->flags | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return fail();
  fi->fh = static_cast<uint64_t>(fd);
  return 0;
}

int op_create(const char* path, mode_t mode, fuse_file_info* fi) {
  std::string p = real(path);
  int fd = open(p.c_str(), fi->flags | O_CREAT | O_NOFOLLOW | O_CLOEXEC, mode);
  if (fd < 0) return fail();
  int rc = give_to_caller(p);
  if (rc != 0) {
    close(fd);
    return rc;
  }
  fi->fh = static_cast<uint64_t>(fd);
  return 0;
}

int op_read(const char*, char* buf, size_t size, off_t offset, fuse_file_info* fi) {
  ssize_t n = pread(static_cast<int>(fi->fh), buf, size, offset);
  return n < 0 ? fail() : static_cast<int>(n);
}

int op_write(const char*, const char* buf, size_t size, off_t offset, fuse_file_info* fi) {
  ssize_t n = pwrite(static_cast<int>(fi->fh), buf, size, offset);
  return n < 0 ? fail() : static_cast<int>(n);
}

int op_fsync(const char*, int datasync, fuse_file_info* fi) {
  int fd = static_cast<int>(fi->fh);
  return (datasync ? fdatasync(fd) : fsync(fd)) == 0 ? 0 : fail();
}

int op_release(const char*, fuse_file_info* fi) {
  close(static_cast<int>(fi->fh));
  return 0;
}

int op_statfs(const char* path, struct statvfs* st) {
  return statvfs(real(path).c_str(), st) == 0 ? 0 : fail();
}

DIR* dir_of(fuse_file_info* fi) {
  return reinterpret_cast<DIR*>(fi->fh);
}

int op_opendir(const char* path, fuse_file_info* fi) {
  DIR* dir = opendir(real(path).c_str());
  if (dir == nullptr) return fail();
  fi->fh = reinterpret_cast<uint64_t>(dir);
  return 0;
}

int op_readdir(const char*, void* buf, fuse_fill_dir_t filler, off_t, fuse_file_info* fi,
               fuse_readdir_flags) {
  // Offset-less filling: the library buffers the whole listing and serves
  // offsets itself; it calls us again (offset 0) only after a rewind.
  DIR* dir = dir_of(fi);
  rewinddir(dir);
  for (;;) {
    errno = 0;  // readdir signals an error only through errno
    dirent* entry = readdir(dir);
    if (entry == nullptr) return errno == 0 ? 0 : fail();
    struct stat st;
    std::memset(&st, 0, sizeof st);
    st.st_ino = entry->d_ino;
    st.st_mode = static_cast<mode_t>(DTTOIF(entry->d_type));
    if (filler(buf, entry->d_name, &st, 0, static_cast<fuse_fill_dir_flags>(0)) != 0) return 0;
  }
}

int op_releasedir(const char*, fuse_file_info* fi) {
  closedir(dir_of(fi));
  return 0;
}

int op_setxattr(const char* path, const char* name, const char* value, size_t size, int flags) {
  return lsetxattr(real(path).c_str(), name, value, size, flags) == 0 ? 0 : fail();
}

int op_getxattr(const char* path, const char* name, char* value, size_t size) {
  ssize_t n = lgetxattr(real(path).c_str(), name, value, size);
  return n < 0 ? fail() : static_cast<int>(n);
}

int op_listxattr(const char* path, char* list, size_t size) {
  ssize_t n = llistxattr(real(path).c_str(), list, size);
  return n < 0 ? fail() : static_cast<int>(n);
}

int op_removexattr(const char* path, const char* name) {
  return lremovexattr(real(path).c_str(), name) == 0 ? 0 : fail();
}

fuse_operations make_operations() {
  fuse_operations ops;
  std::memset(&ops, 0, sizeof ops);
  ops.init = op_init;
  ops.getattr = op_getattr;
  ops.access = op_access;
  ops.readlink = op_readlink;
  ops.mknod = op_mknod;
  ops.mkdir = op_mkdir;
  ops.unlink = op_unlink;
  ops.rmdir = op_rmdir;
  ops.symlink = op_symlink;
  ops.rename = op_rename;
  ops.link = op_link;
  ops.chmod = op_chmod;
  ops.chown = op_chown;
  ops.truncate = op_truncate;
  ops.utimens = op_utimens;
  ops.open = op_open;
  ops.create = op_create;
  ops.read = op_read;
  ops.write = op_write;
  ops.fsync = op_fsync;
  ops.release = op_release;
  ops.statfs = op_statfs;
  ops.opendir = op_opendir;
  ops.readdir = op_readdir;
  ops.releasedir = op_releasedir;
  ops.setxattr = op_setxattr;
  ops.getxattr = op_getxattr;
  ops.listxattr = op_listxattr;
  ops.removexattr = op_removexattr;
  return ops;
}

// Runs in the forked daemon; never returns. Its stdout/stderr go to `log_fd`;
// one byte on `ready_fd` says the mount is in place.
[[noreturn]] void daemon_main(const FuseOptions& options, int ready_fd, int log_fd) {
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  sigset_t all;
  sigemptyset(&all);
  sigprocmask(SIG_SETMASK, &all, nullptr);
  dup2(log_fd, STDOUT_FILENO);
  dup2(log_fd, STDERR_FILENO);
  dup2(ready_fd, kReadyFd);
  // Hold no copies of the caller's fds (pipes whose EOF it may wait for).
  close_range(kReadyFd + 1, ~0U, 0);
  int devnull = open("/dev/null", O_RDONLY);
  if (devnull >= 0 && devnull != STDIN_FILENO) {
    dup2(devnull, STDIN_FILENO);
    close(devnull);
  }
  umask(0);  // the kernel already applied the caller's umask

  backing_root = options.backing;
  cache_timeout_s = options.timeout_s;

  std::string prog = "leapfrog-fuse";
  std::string dash_o = "-o";
  std::string mount_opts = "allow_other,default_permissions,fsname=leapfrog,subtype=leapfrog";
  char* argv[] = {prog.data(), dash_o.data(), mount_opts.data(), nullptr};
  fuse_args args = FUSE_ARGS_INIT(3, argv);
  fuse_operations ops = make_operations();
  fuse* f = fuse_new(&args, &ops, sizeof ops, nullptr);
  if (f == nullptr) {
    std::fprintf(stderr, "fuse_new failed\n");
    _exit(1);
  }
  if (fuse_mount(f, options.view.c_str()) != 0) {
    std::fprintf(stderr, "fuse_mount on '%s' failed\n", options.view.c_str());
    _exit(1);
  }
  char ok = 1;
  if (write(kReadyFd, &ok, 1) != 1) _exit(1);
  close(kReadyFd);

  fuse_loop_config* loop = fuse_loop_cfg_create();
  fuse_loop_cfg_set_max_threads(loop, kMaxThreads);
  int rc = fuse_loop_mt(f, loop);
  // The mount is gone (detached by stop()); nothing to unmount or free.
  _exit(rc == 0 ? 0 : 1);
}

// The first kMaxLogBytes of the daemon's log (a memfd), trailing newlines cut.
std::string read_log(int fd) {
  if (fd < 0) return "";
  std::string out(kMaxLogBytes, '\0');
  ssize_t n = pread(fd, out.data(), out.size(), 0);
  out.resize(n > 0 ? static_cast<size_t>(n) : 0);
  while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) out.pop_back();
  return out;
}

}  // namespace

FusePassthrough::FusePassthrough(FuseOptions options, pid_t pid, int log_fd)
    : options_(std::move(options)), pid_(pid), log_fd_(log_fd) {}

FusePassthrough::~FusePassthrough() {
  stop();
}

std::string FusePassthrough::daemon_output() const {
  return read_log(log_fd_);
}

std::unique_ptr<FusePassthrough> FusePassthrough::start(const FuseOptions& options) {
  int probe = open("/dev/fuse", O_RDWR | O_CLOEXEC);
  if (probe < 0) throw SetupError(errno_message("FUSE is not available: /dev/fuse", errno));
  close(probe);

  struct stat parent_st;
  std::string parent = options.view + "/..";
  if (stat(parent.c_str(), &parent_st) != 0) {
    throw SetupError(errno_message("stat '" + parent + "'", errno));
  }

  int log_fd = memfd_create("leapfrog-fuse-log", MFD_CLOEXEC);
  if (log_fd < 0) throw SetupError(errno_message("memfd_create", errno));
  int ready[2];
  if (pipe2(ready, O_CLOEXEC) != 0) {
    close(log_fd);
    throw SetupError(errno_message("pipe", errno));
  }

  pid_t pid = fork();
  if (pid < 0) {
    int err = errno;
    close(ready[0]);
    close(ready[1]);
    close(log_fd);
    throw SetupError(errno_message("fork the FUSE daemon", err));
  }
  if (pid == 0) daemon_main(options, ready[1], log_fd);
  close(ready[1]);

  // From here the object owns pid and log; its destructor cleans up on failure.
  std::unique_ptr<FusePassthrough> fuse(new FusePassthrough(options, pid, log_fd));
  auto failed = [&](const std::string& why) {
    close(ready[0]);
    std::string output = fuse->daemon_output();
    fuse->stop();
    std::string msg = "start FUSE passthrough on '" + options.view + "': " + why;
    if (!output.empty()) msg += ": " + output;
    return SetupError(msg);
  };

  auto deadline = std::chrono::steady_clock::now() + kStartDeadline;
  char byte = 0;
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) throw failed("the daemon did not mount within 5 s");
    struct pollfd p = {ready[0], POLLIN, 0};
    int rc = poll(&p, 1, static_cast<int>(left.count()));
    if (rc < 0 && errno == EINTR) continue;
    if (rc < 0) throw failed(errno_message("poll", errno));
    if (rc == 0) continue;
    ssize_t n = read(ready[0], &byte, 1);
    if (n == 1) break;
    if (n < 0 && errno == EINTR) continue;
    int status = 0;
    if (wait_child_for(pid, std::chrono::milliseconds(500), &status)) {
      fuse->pid_ = 0;
      throw failed("the daemon ended (" + describe_status(status) + ")");
    }
    throw failed("the daemon closed its ready pipe");
  }
  close(ready[0]);

  // Blocks until the daemon has answered FUSE_INIT, so the mount is live after.
  struct stat view_st;
  if (stat(options.view.c_str(), &view_st) != 0) {
    throw failed(errno_message("stat the mount", errno));
  }
  if (view_st.st_dev == parent_st.st_dev) throw failed("the view is not a mount point");
  spdlog::info("fuse_started view={} backing={} pid={} timeout_s={}", options.view, options.backing,
               pid, options.timeout_s);
  return fuse;
}

void FusePassthrough::stop() {
  if (!stopped_) {
    stopped_ = true;
    // EINVAL: not mounted (the daemon failed before mounting).
    if (umount2(options_.view.c_str(), MNT_DETACH) != 0 && errno != EINVAL) {
      spdlog::warn("fuse_umount_failed view={} error=\"{}\"", options_.view, std::strerror(errno));
    }
  }
  if (pid_ != 0) {
    int status = 0;
    if (!wait_child_for(pid_, kStopDeadline, &status)) {
      // Something still holds the mount (an open file, a cwd): cut it off.
      kill(pid_, SIGKILL);
      status = wait_child(pid_);
      spdlog::warn("fuse_daemon_killed view={} pid={}", options_.view, pid_);
    } else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      spdlog::warn("fuse_daemon_failed view={} pid={} status=\"{}\" output=\"{}\"", options_.view,
                   pid_, describe_status(status), daemon_output());
    } else {
      spdlog::debug("fuse_stopped view={} pid={}", options_.view, pid_);
    }
    pid_ = 0;
  }
  if (log_fd_ >= 0) {
    close(log_fd_);
    log_fd_ = -1;
  }
}

}  // namespace leapfrog::fs
