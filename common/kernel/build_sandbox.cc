#include "common/kernel/build_sandbox.h"

#include <fcntl.h>
#include <ftw.h>
#include <grp.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>

#include "common/kernel/kernel_build.h"
#include "common/process.h"

namespace leapfrog::kbuild {

namespace sfs = std::filesystem;

namespace {

// Folders no build has business reading, hidden whatever the caller adds.
const char* const kAlwaysHidden[] = {"/root", "/home", "/var/lib/leapfrog", "/etc/leapfrog",
                                     "/var/spool/leapfrog", "/run"};

// nftw has no user pointer: hand_over walks one tree at a time.
thread_local uid_t walk_uid;
thread_local gid_t walk_gid;

int own_entry(const char* path, const struct stat* st, int type, struct FTW*) {
  if (type == FTW_SL || type == FTW_SLN) {
    if (st->st_uid != walk_uid || st->st_gid != walk_gid) ::lchown(path, walk_uid, walk_gid);
    return 0;
  }
  if (st->st_uid != walk_uid || st->st_gid != walk_gid) ::lchown(path, walk_uid, walk_gid);
  if (st->st_mode & S_IRWXO) ::chmod(path, st->st_mode & 07770 & ~static_cast<mode_t>(S_IRWXO));
  return 0;
}

}  // namespace

BuildSandbox::BuildSandbox(const SandboxConfig& config, const std::string& cache_dir)
    : config_(config), cache_dir_(cache_dir) {
  if (!config_.enabled) return;
  if (::geteuid() != 0)
    throw BuildError("sandbox",
                     "the build sandbox needs root (to run the build as \"" + config_.user + "\")",
                     "");
  const struct passwd* pw = ::getpwnam(config_.user.c_str());
  if (pw == nullptr)
    throw BuildError("sandbox",
                     "no system user \"" + config_.user +
                         "\" for the build sandbox: deploy/install-deps.sh creates it (useradd "
                         "--system --no-create-home --shell /usr/sbin/nologin " +
                         config_.user + ")",
                     "");
  if (pw->pw_uid == 0)
    throw BuildError("sandbox", "the build user \"" + config_.user + "\" is root", "");
  uid_ = pw->pw_uid;
  gid_ = pw->pw_gid;
  setpriv_ = find_in_path("setpriv");
  bwrap_ = find_in_path("bwrap");
  if (setpriv_.empty())
    throw BuildError("sandbox", "the build sandbox needs setpriv (Debian package util-linux)", "");
  if (bwrap_.empty())
    throw BuildError("sandbox", "the build sandbox needs bwrap (Debian package bubblewrap)", "");
}

void BuildSandbox::let_through(const std::string& path, bool listable) const {
  if (!config_.enabled) return;
  if (::chown(path.c_str(), 0, gid_) != 0 ||
      ::chmod(path.c_str(), listable ? 0750 : 0710) != 0)
    throw BuildError("sandbox", "cannot let the build user through \"" + path + "\"", "");
}

void BuildSandbox::hand_over(const std::string& path) const {
  if (!config_.enabled) return;
  walk_uid = uid_;
  walk_gid = gid_;
  if (::nftw(path.c_str(), own_entry, 64, FTW_PHYS) != 0 && errno != ENOENT)
    throw BuildError("sandbox", "cannot hand \"" + path + "\" to the build user", "");
}

namespace {

// Whether uid/gid may search the folder `st` describes.
bool searchable(const struct stat& st, uid_t uid, gid_t gid) {
  if (st.st_uid == uid) return st.st_mode & S_IXUSR;
  if (st.st_gid == gid) return st.st_mode & S_IXGRP;
  return st.st_mode & S_IXOTH;
}

// Stdout and stderr to the log, stdin from `stdin_fd` or /dev/null.
SpawnOptions logged(int log_fd, int stdin_fd) {
  SpawnOptions opts;
  opts.stdin_path = "/dev/null";
  opts.stdin_fd = stdin_fd;
  opts.stdout_fd = log_fd;
  opts.stderr_to_stdout = true;
  return opts;
}

}  // namespace

int run_logged_here(const std::vector<std::string>& argv, int log_fd, int stdin_fd) {
  std::vector<std::string> direct = argv;
  const std::string exe = find_in_path(direct.front());
  if (exe.empty()) return 127;
  direct.front() = exe;
  return run_process(direct, logged(log_fd, stdin_fd));
}

int BuildSandbox::run(const std::vector<std::string>& argv, const std::vector<Bind>& binds,
                      int log_fd, int stdin_fd) const {
  if (!config_.enabled) return run_logged_here(argv, log_fd, stdin_fd);
  const SpawnOptions opts = logged(log_fd, stdin_fd);
  std::vector<std::string> cmd = {setpriv_,
                                  "--reuid=" + std::to_string(uid_),
                                  "--regid=" + std::to_string(gid_),
                                  "--clear-groups",
                                  "--no-new-privs",
                                  "--",
                                  bwrap_,
                                  "--unshare-all",
                                  "--die-with-parent",
                                  "--new-session",
                                  "--clearenv",
                                  "--setenv", "PATH", "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin",
                                  "--setenv", "HOME", "/tmp",
                                  "--setenv", "LANG", "C.UTF-8",
                                  "--ro-bind", "/", "/",
                                  "--dev", "/dev",
                                  "--proc", "/proc",
                                  "--tmpfs", "/tmp"};
  std::error_code ec;
  auto hide = [&](const std::string& p) {
    const auto st = sfs::status(p, ec);
    if (ec || !sfs::exists(st)) return;
    if (sfs::is_directory(st))
      cmd.insert(cmd.end(), {"--tmpfs", p});
    else
      cmd.insert(cmd.end(), {"--ro-bind", "/dev/null", p});
  };
  for (const char* p : kAlwaysHidden) hide(p);
  hide(cache_dir_);
  for (const auto& p : config_.hide) hide(sfs::absolute(p, ec).lexically_normal().string());
  // The binds, after the hiding so that they show through it. bubblewrap
  // mounts them as the build user, who must be able to reach each.
  for (const auto& b : binds) {
    const sfs::path path = sfs::absolute(b.path, ec).lexically_normal();
    sfs::path at = "/";
    for (const auto& part : path.parent_path()) {
      if (part == "/") continue;
      at /= part;
      struct stat st {};
      if (::stat(at.c_str(), &st) != 0 || !searchable(st, uid_, gid_))
        throw BuildError("sandbox",
                         "the build user \"" + config_.user + "\" cannot reach \"" + path.string() +
                             "\": \"" + at.string() + "\" does not let it through (chmod o+x, or move the cache)",
                         "");
    }
    cmd.insert(cmd.end(), {b.writable ? "--bind" : "--ro-bind", path.string(), path.string()});
  }
  cmd.insert(cmd.end(), {"--", "/bin/sh", "-c", "umask 027 && exec \"$@\"", "sh"});
  cmd.insert(cmd.end(), argv.begin(), argv.end());
  return run_process(cmd, opts);
}

}  // namespace leapfrog::kbuild
