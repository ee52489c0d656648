// EmbeddedPostgres: initdb and postgres run with fork + exec (no shell), as
// the `postgres` user when we are root; readiness is polled with PQping.

#include "coordinator/pg/embedded_postgres.h"

#include <fcntl.h>
#include <grp.h>
#include <libpq-fe.h>
#include <netinet/in.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include "common/hex.h"

namespace leapfrog::coord {

namespace stdfs = std::filesystem;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

namespace {

constexpr const char* kSuperuser = "leapfrog";
constexpr const char* kPortFile = "leapfrog.port";
constexpr const char* kPasswordFile = "leapfrog.password";
constexpr const char* kLogFile = "leapfrog-postgres.log";
constexpr off_t kLogRotateBytes = 8 << 20;
constexpr size_t kLogTailBytes = 3000;
constexpr auto kInitdbTimeout = std::chrono::seconds(120);
constexpr auto kPollInterval = milliseconds(5);
// Attempts at starting when the chosen port turned out to be taken.
constexpr int kPortAttempts = 3;

std::string errno_text(const std::string& what, int err) {
  return what + ": " + std::strerror(err);
}

std::string describe_status(int status) {
  if (WIFEXITED(status)) return "exit status " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return "killed by signal " + std::to_string(WTERMSIG(status));
  return "status " + std::to_string(status);
}

int pidfd_open(pid_t pid) {
  return static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
}

// Waits until the process behind `pidfd` ends or `timeout` passes; true if it ended.
bool wait_pidfd(int pidfd, milliseconds timeout) {
  auto deadline = Clock::now() + timeout;
  for (;;) {
    auto left = std::chrono::duration_cast<milliseconds>(deadline - Clock::now());
    struct pollfd p = {pidfd, POLLIN, 0};
    int rc = poll(&p, 1, static_cast<int>(std::max<int64_t>(left.count(), 0)));
    if (rc > 0) return true;
    if (rc == 0) return false;
    if (errno != EINTR) return false;
  }
}

// Reaps `pid`; the raw status, or -1 (e.g. when SIGCHLD is ignored).
int reap(pid_t pid) {
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return -1;
  }
  return status;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  std::string s = ss.str();
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

// The last kLogTailBytes of `fd` from `from` on, on whole lines.
std::string log_tail(int fd, off_t from) {
  struct stat st;
  if (fd < 0 || fstat(fd, &st) != 0 || st.st_size <= from) return "";
  off_t start = std::max<off_t>(from, st.st_size - static_cast<off_t>(kLogTailBytes));
  std::string out(static_cast<size_t>(st.st_size - start), '\0');
  ssize_t n = pread(fd, out.data(), out.size(), start);
  out.resize(n > 0 ? static_cast<size_t>(n) : 0);
  if (start > from) {
    auto nl = out.find('\n');
    if (nl != std::string::npos) out.erase(0, nl + 1);
  }
  while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) out.pop_back();
  return out;
}

std::string random_hex(size_t bytes) {
  std::vector<unsigned char> buf(bytes);
  size_t got = 0;
  while (got < bytes) {
    ssize_t n = getrandom(buf.data() + got, bytes - got, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw PostgresError(errno_text("getrandom", errno));
    got += static_cast<size_t>(n);
  }
  return hex_encode(buf.data(), buf.size());
}

// True if nothing listens on 127.0.0.1:port (postgres binds with SO_REUSEADDR too).
bool port_is_free(int port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  struct sockaddr_in addr = {};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  bool ok = bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  close(fd);
  return ok;
}

int pick_free_port() {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) throw PostgresError(errno_text("socket", errno));
  struct sockaddr_in addr = {};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    int err = errno;
    close(fd);
    throw PostgresError(errno_text("pick a free port on 127.0.0.1", err));
  }
  close(fd);
  return ntohs(addr.sin_port);
}

void write_private_file(const std::string& path, const std::string& content, uid_t uid, gid_t gid,
                        bool chown_it) {
  int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) throw PostgresError(errno_text("create '" + path + "'", errno));
  bool ok = write(fd, content.data(), content.size()) == static_cast<ssize_t>(content.size());
  if (ok && chown_it) ok = fchown(fd, uid, gid) == 0;
  int err = errno;
  close(fd);
  if (!ok) throw PostgresError(errno_text("write '" + path + "'", err));
}

// The pid in the cluster's postmaster.pid if that process lives, else 0.
pid_t running_postmaster(const std::string& data_dir) {
  std::string content = read_file(data_dir + "/postmaster.pid");
  pid_t pid = static_cast<pid_t>(std::atol(content.c_str()));
  if (pid <= 0) return 0;
  if (kill(pid, 0) == 0 || errno == EPERM) return pid;
  return 0;
}

// A server failed to bind its port: another process took it after we checked.
class PortTaken : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace

struct PgRunAs {
  bool switch_user = false;  // we are root: drop to `name`
  std::string name;
  uid_t uid = 0;
  gid_t gid = 0;
  std::vector<gid_t> groups;

  static PgRunAs resolve(const std::string& name) {
    PgRunAs r;
    r.uid = geteuid();
    r.gid = getegid();
    r.name = "uid " + std::to_string(r.uid);
    if (r.uid != 0) return r;
    struct passwd pw;
    struct passwd* found = nullptr;
    std::vector<char> buf(16384);
    if (getpwnam_r(name.c_str(), &pw, buf.data(), buf.size(), &found) != 0 || found == nullptr) {
      throw PostgresError("PostgreSQL refuses to run as root and there is no user '" + name +
                          "' to run it as: install the postgresql package or set run_as");
    }
    r.switch_user = true;
    r.name = name;
    r.uid = pw.pw_uid;
    r.gid = pw.pw_gid;
    int n = 64;
    r.groups.resize(static_cast<size_t>(n));
    while (getgrouplist(name.c_str(), r.gid, r.groups.data(), &n) < 0) {
      r.groups.resize(static_cast<size_t>(n));
    }
    r.groups.resize(static_cast<size_t>(n));
    return r;
  }

  // Whether this user may enter a folder with this stat.
  bool can_search(const struct stat& st) const {
    if (uid == 0) return true;
    if (st.st_uid == uid) return st.st_mode & S_IXUSR;
    bool in_group = st.st_gid == gid;
    for (gid_t g : groups) in_group = in_group || st.st_gid == g;
    if (in_group) return st.st_mode & S_IXGRP;
    return st.st_mode & S_IXOTH;
  }
};

namespace {

// Forks and execs `args` as `user`, stdout and stderr on `out_fd`. Only
// async-signal-safe calls after fork: the caller may have threads.
pid_t spawn(const std::vector<std::string>& args, const PgRunAs& user, int out_fd) {
  std::vector<char*> argv;
  argv.reserve(args.size() + 1);
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  // A minimal environment; TZ=UTC makes initdb set the cluster's time zone to UTC.
  static const char* env_strings[] = {"PATH=/usr/bin:/bin", "LC_ALL=C", "LANG=C", "TZ=UTC",
                                      nullptr};
  char** envp = const_cast<char**>(env_strings);
  const gid_t* groups = user.groups.data();
  size_t ngroups = user.groups.size();
  int devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (devnull < 0) throw PostgresError(errno_text("open /dev/null", errno));
  pid_t parent = getpid();

  pid_t pid = fork();
  if (pid < 0) {
    int err = errno;
    close(devnull);
    throw PostgresError(errno_text("fork " + args[0], err));
  }
  if (pid == 0) {
    // Own process group: a Ctrl-C at the terminal reaches only the coordinator,
    // which then stops the server in order.
    setpgid(0, 0);
    if (user.switch_user) {
      if (setgroups(ngroups, groups) != 0 || setgid(user.gid) != 0 || setuid(user.uid) != 0) {
        _exit(126);
      }
    }
    // After setuid, which clears it. A fast shutdown when our parent thread ends.
    prctl(PR_SET_PDEATHSIG, SIGINT);
    if (getppid() != parent) _exit(1);
    struct sigaction dfl = {};
    dfl.sa_handler = SIG_DFL;
    for (int sig = 1; sig < NSIG; ++sig) sigaction(sig, &dfl, nullptr);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    if (chdir("/") != 0) _exit(126);
    dup2(devnull, STDIN_FILENO);
    dup2(out_fd, STDOUT_FILENO);
    dup2(out_fd, STDERR_FILENO);
    // No copies of the caller's descriptors (listening sockets, pipes).
    close_range(3, ~0U, 0);
    execve(argv[0], argv.data(), envp);
    _exit(127);
  }
  close(devnull);
  return pid;
}

std::string describe_exit(int status) {
  std::string why = describe_status(status);
  if (WIFEXITED(status) && WEXITSTATUS(status) == 127) why += " (cannot execute it)";
  if (WIFEXITED(status) && WEXITSTATUS(status) == 126) why += " (cannot switch user)";
  return why;
}

struct ChildResult {
  bool ended = false;
  int status = 0;
};

// Runs `args` to completion within `timeout`, output into `out_fd`.
ChildResult run_to_end(const std::vector<std::string>& args, const PgRunAs& user, int out_fd,
                       milliseconds timeout) {
  pid_t pid = spawn(args, user, out_fd);
  ChildResult r;
  int pidfd = pidfd_open(pid);
  r.ended = pidfd < 0 || wait_pidfd(pidfd, timeout);
  if (!r.ended) kill(pid, SIGKILL);
  r.status = reap(pid);
  if (pidfd >= 0) close(pidfd);
  return r;
}

// Checks that `user` can enter the folder and every parent.
void check_searchable(const stdfs::path& dir, const PgRunAs& user) {
  for (stdfs::path p = dir;; p = p.parent_path()) {
    struct stat st;
    if (stat(p.c_str(), &st) == 0 && !user.can_search(st)) {
      throw PostgresError("PostgreSQL data folder '" + dir.string() + "' is not usable: user '" +
                          user.name + "' cannot enter '" + p.string() +
                          "'; want a folder whose parents are all searchable (e.g. mode 0755)");
    }
    if (p == p.root_path() || p.empty()) break;
  }
}

}  // namespace

EmbeddedPostgres::EmbeddedPostgres(EmbeddedPostgresOptions options)
    : options_(std::move(options)) {}

EmbeddedPostgres::~EmbeddedPostgres() {
  try {
    stop();
  } catch (const std::exception& e) {
    spdlog::warn("pg_stop_failed data_dir={} error=\"{}\"", data_dir_, e.what());
  }
}

std::string EmbeddedPostgres::url(const std::string& database) const {
  return "postgresql://" + std::string(kSuperuser) + ":" + password_ +
         "@127.0.0.1:" + std::to_string(port_) + "/" + database;
}

bool EmbeddedPostgres::running() const {
  if (pid_ == 0) return false;
  struct pollfd p = {pidfd_, POLLIN, 0};
  return poll(&p, 1, 0) == 0;
}

void EmbeddedPostgres::start(const std::string& data_dir) {
  if (pid_ != 0) throw PostgresError("PostgreSQL is already running in '" + data_dir_ + "'");
  if (data_dir.empty()) throw PostgresError("PostgreSQL data folder: want a path, got \"\"");
  PgRunAs user = PgRunAs::resolve(options_.run_as);
  stdfs::path dir = stdfs::absolute(data_dir).lexically_normal();
  if (!dir.has_filename()) dir = dir.parent_path();  // a trailing slash
  std::string where = "PostgreSQL data folder '" + dir.string() + "'";

  // The folder: created if missing; it holds a cluster, or nothing yet.
  std::error_code ec;
  bool exists = stdfs::exists(dir, ec);
  if (exists && !stdfs::is_directory(dir, ec)) throw PostgresError(where + " is not a folder");
  if (!exists) {
    stdfs::create_directories(dir.parent_path(), ec);
    if (ec) throw PostgresError("create " + where + ": " + ec.message());
    if (mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
      throw PostgresError(errno_text("create " + where, errno));
    }
  }
  bool has_cluster = stdfs::exists(dir / "PG_VERSION", ec);
  if (!has_cluster) {
    bool empty = stdfs::is_empty(dir, ec);
    if (ec) throw PostgresError("read " + where + ": " + ec.message());
    if (!empty) {
      throw PostgresError(where +
                          " holds files but no PostgreSQL cluster; want an empty folder or one "
                          "made by leapfrog");
    }
    if (user.switch_user && chown(dir.c_str(), user.uid, user.gid) != 0) {
      throw PostgresError(errno_text("chown " + where + " to '" + user.name + "'", errno));
    }
    if (chmod(dir.c_str(), 0700) != 0) throw PostgresError(errno_text("chmod " + where, errno));
  }
  check_searchable(dir, user);
  data_dir_ = dir.string();

  // A private short folder for the unix socket (socket paths are capped at 107 bytes).
  char sock_template[] = "/tmp/lfpg-XXXXXX";
  if (mkdtemp(sock_template) == nullptr) throw PostgresError(errno_text("mkdtemp /tmp", errno));
  socket_dir_ = sock_template;
  try {
    if (user.switch_user && chown(socket_dir_.c_str(), user.uid, user.gid) != 0) {
      throw PostgresError(errno_text("chown '" + socket_dir_ + "'", errno));
    }
    if (!has_cluster) init_cluster(user);
    password_ = read_file(data_dir_ + "/" + kPasswordFile);
    if (password_.empty()) {
      throw PostgresError(where + " has no " + kPasswordFile + "; it was not made by leapfrog");
    }

    // The port kept in the folder while it is free, else a new one.
    std::string kept = read_file(data_dir_ + "/" + kPortFile);
    port_ = kept.empty() ? 0 : std::atoi(kept.c_str());
    bool new_port = port_ <= 0 || !port_is_free(port_);
    if (new_port && port_ > 0) {
      // Taken: by our own server (refuse, rather than race it), or by another program.
      pid_t running = running_postmaster(data_dir_);
      if (running > 0) {
        throw PostgresError(where + " is in use by a running server (pid " +
                            std::to_string(running) + ")");
      }
    }
    for (int attempt = 1;; ++attempt) {
      if (new_port) {
        int old = port_;
        port_ = pick_free_port();
        if (old > 0) {
          spdlog::warn("pg_port_changed data_dir={} old={} new={}", data_dir_, old, port_);
        }
      }
      try {
        start_once(user);
        if (new_port) {
          write_private_file(data_dir_ + "/" + kPortFile, std::to_string(port_) + "\n", user.uid,
                             user.gid, user.switch_user);
        }
        break;
      } catch (const PortTaken& e) {
        if (attempt >= kPortAttempts) {
          throw PostgresError("start PostgreSQL in '" + data_dir_ + "': port " +
                              std::to_string(port_) + " taken " + std::to_string(attempt) +
                              " times in a row; server log:\n" + e.what());
        }
        new_port = true;
      }
    }
  } catch (...) {
    cleanup_socket_dir();
    throw;
  }
}

void EmbeddedPostgres::init_cluster(const PgRunAs& user) {
  auto t0 = Clock::now();
  std::string password = random_hex(16);
  // initdb reads the password from a file; the socket folder is private to `user`.
  std::string pwfile = socket_dir_ + "/initdb-password";
  write_private_file(pwfile, password + "\n", user.uid, user.gid, user.switch_user);
  int out = memfd_create("leapfrog-initdb", MFD_CLOEXEC);
  if (out < 0) throw PostgresError(errno_text("memfd_create", errno));
  std::vector<std::string> args = {options_.bin_dir + "/initdb",
                                   "--pgdata=" + data_dir_,
                                   std::string("--username=") + kSuperuser,
                                   "--pwfile=" + pwfile,
                                   "--auth=scram-sha-256",
                                   "--encoding=UTF8",
                                   "--locale=C"};
  if (options_.for_tests) args.push_back("--no-sync");
  ChildResult r;
  try {
    r = run_to_end(args, user, out, kInitdbTimeout);
  } catch (...) {
    close(out);
    unlink(pwfile.c_str());
    throw;
  }
  std::string output = log_tail(out, 0);
  close(out);
  unlink(pwfile.c_str());
  if (!r.ended || !WIFEXITED(r.status) || WEXITSTATUS(r.status) != 0) {
    std::string why = r.ended ? describe_exit(r.status) : "timed out";
    throw PostgresError("initdb in '" + data_dir_ + "': " + why + ": " + output);
  }
  write_private_file(data_dir_ + "/" + kPasswordFile, password + "\n", user.uid, user.gid,
                     user.switch_user);
  spdlog::info("pg_initdb data_dir={} ms={}", data_dir_,
               std::chrono::duration_cast<milliseconds>(Clock::now() - t0).count());
}

void EmbeddedPostgres::start_once(const PgRunAs& user) {
  std::string log_path = data_dir_ + "/" + kLogFile;
  struct stat st;
  if (stat(log_path.c_str(), &st) == 0 && st.st_size > kLogRotateBytes) {
    rename(log_path.c_str(), (log_path + ".1").c_str());
  }
  int log_fd = open(log_path.c_str(), O_RDWR | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
  if (log_fd < 0) throw PostgresError(errno_text("open '" + log_path + "'", errno));
  if (user.switch_user && fchown(log_fd, user.uid, user.gid) != 0) {
    int err = errno;
    close(log_fd);
    throw PostgresError(errno_text("chown '" + log_path + "'", err));
  }
  off_t log_start = lseek(log_fd, 0, SEEK_END);

  std::vector<std::string> args = {options_.bin_dir + "/postgres",
                                   "-D",
                                   data_dir_,
                                   "-p",
                                   std::to_string(port_),
                                   "-c",
                                   "listen_addresses=127.0.0.1",
                                   "-c",
                                   "unix_socket_directories=" + socket_dir_,
                                   "-c",
                                   "logging_collector=off"};
  if (options_.for_tests) {
    for (const char* setting : {"fsync=off", "synchronous_commit=off", "full_page_writes=off"}) {
      args.push_back("-c");
      args.push_back(setting);
    }
  }
  auto t0 = Clock::now();
  pid_t pid = 0;
  try {
    pid = spawn(args, user, log_fd);
  } catch (...) {
    close(log_fd);
    throw;
  }
  int pidfd = pidfd_open(pid);

  // Stops the server if it still runs, and throws with the log written since this start.
  auto fail = [&](std::string why) {
    bool ended = pidfd >= 0 && wait_pidfd(pidfd, milliseconds(0));
    if (!ended) {
      kill(pid, SIGKILL);
      if (pidfd >= 0) wait_pidfd(pidfd, milliseconds(5000));
    }
    int status = reap(pid);
    if (ended) why = "the server exited (" + describe_exit(status) + ")";
    if (pidfd >= 0) close(pidfd);
    std::string tail = log_tail(log_fd, log_start);
    close(log_fd);
    if (tail.find("Address already in use") != std::string::npos) throw PortTaken(tail);
    spdlog::warn("pg_start_failed data_dir={} port={} why=\"{}\"", data_dir_, port_, why);
    std::string msg = "start PostgreSQL in '" + data_dir_ +
                      "' on 127.0.0.1:" + std::to_string(port_) + ": " + why;
    if (!tail.empty()) msg += "; server log:\n" + tail;
    throw PostgresError(msg);
  };
  if (pidfd < 0) fail(errno_text("pidfd_open", errno));

  std::string ping = "host=127.0.0.1 port=" + std::to_string(port_) +
                     " dbname=postgres user=" + kSuperuser + " connect_timeout=2";
  auto deadline = t0 + options_.start_timeout;
  for (;;) {
    if (wait_pidfd(pidfd, kPollInterval)) fail("");
    if (PQping(ping.c_str()) == PQPING_OK) break;
    if (Clock::now() > deadline) {
      fail("not accepting connections after " + std::to_string(options_.start_timeout.count()) +
           " ms");
    }
  }
  close(log_fd);
  pid_ = pid;
  pidfd_ = pidfd;
  stopped_ = false;
  auto ready_ms = std::chrono::duration_cast<milliseconds>(Clock::now() - t0).count();

  // The application database: made at the first start, checked at every start
  // in case the first was cut short.
  std::string conninfo = "host=127.0.0.1 port=" + std::to_string(port_) +
                         " dbname=postgres user=" + kSuperuser + " password=" + password_ +
                         " connect_timeout=10";
  PGconn* conn = PQconnectdb(conninfo.c_str());
  std::string error;
  if (PQstatus(conn) != CONNECTION_OK) {
    error = PQerrorMessage(conn);
  } else {
    PGresult* r = PQexec(conn, "SELECT 1 FROM pg_database WHERE datname = 'leapfrog'");
    if (PQresultStatus(r) != PGRES_TUPLES_OK) {
      error = PQresultErrorMessage(r);
    } else if (PQntuples(r) == 0) {
      PGresult* c = PQexec(conn, "CREATE DATABASE leapfrog");
      if (PQresultStatus(c) != PGRES_COMMAND_OK) error = PQresultErrorMessage(c);
      PQclear(c);
    }
    PQclear(r);
  }
  PQfinish(conn);
  if (!error.empty()) {
    while (!error.empty() && error.back() == '\n') error.pop_back();
    std::string dir = data_dir_;
    stop();
    throw PostgresError("create database 'leapfrog' in '" + dir + "': " + error);
  }
  spdlog::info("pg_started data_dir={} port={} pid={} ready_ms={}", data_dir_, port_, pid_,
               ready_ms);
}

bool EmbeddedPostgres::adopt_from_pid_file() {
  const pid_t real = running_postmaster(data_dir_);
  if (real <= 0 || real == pid_) return false;
  const int fd = pidfd_open(real);
  if (fd < 0) return false;
  if (pid_ != 0) {
    reap(pid_);  // ours, and gone by now; -1 when it was adopted itself
    close(pidfd_);
  }
  spdlog::warn("pg_adopted data_dir={} pid={} was={} (restarted by someone else)", data_dir_, real,
               pid_);
  pid_ = real;
  pidfd_ = fd;
  return true;
}

bool EmbeddedPostgres::supervise() {
  if (stopped_ || data_dir_.empty()) return false;
  if (pid_ != 0 && running()) return true;
  if (adopt_from_pid_file()) return true;
  if (pid_ != 0) {
    const int status = reap(pid_);
    close(pidfd_);
    pidfd_ = -1;
    // A clean exit is a shutdown someone asked for; an adopted server's end
    // (not our child) cannot be told apart from one.
    const bool asked = status < 0 || (WIFEXITED(status) && WEXITSTATUS(status) == 0);
    spdlog::warn("pg_died data_dir={} pid={} status=\"{}\" grace_ms={}", data_dir_, pid_,
                 status < 0 ? std::string("not our child") : describe_status(status),
                 asked ? options_.restart_grace.count() : 0);
    pid_ = 0;
    if (asked) grace_until_ = Clock::now() + options_.restart_grace;
  }
  if (Clock::now() < grace_until_) return false;
  // Backends outlive a killed postmaster by a moment; until they are gone a
  // new postmaster refuses the folder (the caller retries).
  const PgRunAs user = PgRunAs::resolve(options_.run_as);
  start_once(user);
  ++restarts_;
  spdlog::warn("pg_restarted data_dir={} pid={} restarts={}", data_dir_, pid_, restarts_);
  return true;
}

void EmbeddedPostgres::stop() {
  stopped_ = true;
  // The server running now may not be the one we started (`pg_ctl restart`).
  if (pid_ == 0) return;
  adopt_from_pid_file();
  auto t0 = Clock::now();
  // SIGINT: fast shutdown (sessions are ended, a checkpoint is written).
  kill(pid_, SIGINT);
  bool killed = false;
  if (!wait_pidfd(pidfd_, options_.stop_timeout)) {
    // Backends notice the postmaster's death and exit by themselves.
    kill(pid_, SIGKILL);
    wait_pidfd(pidfd_, milliseconds(5000));
    killed = true;
  }
  int status = reap(pid_);  // -1 for an adopted server (not our child)
  close(pidfd_);
  pidfd_ = -1;
  if (killed) {
    spdlog::warn("pg_killed data_dir={} pid={} after_ms={}", data_dir_, pid_,
                 options_.stop_timeout.count());
  } else {
    spdlog::info("pg_stopped data_dir={} pid={} status=\"{}\" ms={}", data_dir_, pid_,
                 status < 0 ? std::string("adopted") : describe_status(status),
                 std::chrono::duration_cast<milliseconds>(Clock::now() - t0).count());
  }
  pid_ = 0;
  cleanup_socket_dir();
}

void EmbeddedPostgres::restart() {
  if (data_dir_.empty()) throw PostgresError("restart PostgreSQL: it was never started");
  stop();
  start(data_dir_);
}

void EmbeddedPostgres::cleanup_socket_dir() {
  if (socket_dir_.empty()) return;
  std::error_code ec;
  stdfs::remove_all(socket_dir_, ec);
  socket_dir_.clear();
}

}  // namespace leapfrog::coord
