#pragma once
// A private PostgreSQL cluster in a data folder, for `leapfrog up` and tests.
//
// The first start runs initdb (UTF8, C locale, superuser "leapfrog" with a
// generated password, scram-sha-256 for every connection) and creates the
// database "leapfrog". The server listens on 127.0.0.1 only, on a port chosen
// free at the first start and kept in the data folder, so a restart keeps the
// same URL; its unix socket sits in a private short folder under /tmp. As root,
// initdb and postgres run as the `postgres` system user, which then owns the
// data folder. The server log is `leapfrog-postgres.log` in the data folder.
//
// Files kept in the data folder beside the cluster: leapfrog.port,
// leapfrog.password (mode 0600), leapfrog-postgres.log.
//
// Not thread-safe: one thread drives start/stop/restart. The server is tied to
// the thread that started it (PR_SET_PDEATHSIG fires when that thread exits).

#include <sys/types.h>

#include <chrono>
#include <stdexcept>
#include <string>

namespace leapfrog::coord {

struct PgRunAs;  // who runs initdb and postgres (embedded_postgres.cc)

// The cluster could not be created, started or stopped. The message says what
// was wanted and carries the server log tail when there is one.
class PostgresError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct EmbeddedPostgresOptions {
  // Folder holding initdb and postgres.
  std::string bin_dir = "/usr/lib/postgresql/15/bin";
  // System user the server runs as when the process is root.
  std::string run_as = "postgres";
  // Tests only: initdb --no-sync, and fsync, synchronous_commit and
  // full_page_writes off. A crash of the machine may then corrupt the cluster.
  bool for_tests = false;
  // How long the server may take to accept connections (initdb excluded).
  std::chrono::milliseconds start_timeout{30000};
  // How long a fast shutdown may take before the server is killed.
  std::chrono::milliseconds stop_timeout{10000};
  // A server that someone else shut down cleanly (`pg_ctl restart`, `pg_ctl
  // stop` then `start`), or one adopted from them that went away, is not
  // started again by supervise() for this long: whoever stopped it may be
  // starting it, and two starts would race for the folder. A crashed or
  // killed server of ours is started again at once.
  std::chrono::milliseconds restart_grace{5000};
};

class EmbeddedPostgres {
 public:
  explicit EmbeddedPostgres(EmbeddedPostgresOptions options = {});
  ~EmbeddedPostgres();
  EmbeddedPostgres(const EmbeddedPostgres&) = delete;
  EmbeddedPostgres& operator=(const EmbeddedPostgres&) = delete;

  // Creates the cluster in `data_dir` if it holds none, starts the server and
  // waits until it accepts connections. Throws PostgresError.
  void start(const std::string& data_dir);
  // Fast shutdown (SIGINT); SIGKILL to the server's process group after
  // stop_timeout. No-op when not running.
  void stop();
  // stop() then start() on the same folder and port.
  void restart();
  // For a supervisor, called now and then from the thread that started the
  // server: true while a server runs in the folder. A server started there
  // by someone else (`pg_ctl restart`) is adopted, found through
  // postmaster.pid; if none runs, one is started on the same port (throws
  // PostgresError if it cannot be, the caller backs off and calls again),
  // after options.restart_grace when the server was stopped by someone else.
  // False before the first start and after stop().
  bool supervise();

  // True while the server process is alive.
  bool running() const;
  // libpq URL of a database on this server ("leapfrog" is made at the first
  // start); valid after start().
  std::string url(const std::string& database = "leapfrog") const;
  // TCP port on 127.0.0.1; 0 before the first start.
  int port() const { return port_; }
  const std::string& data_dir() const { return data_dir_; }
  // Folder of the unix socket while running ("" otherwise).
  const std::string& socket_dir() const { return socket_dir_; }
  // PID of the postmaster while running (0 otherwise): the one in
  // postmaster.pid once supervise() or stop() adopted it.
  pid_t pid() const { return pid_; }
  // How often supervise() started the server again.
  int restarts() const { return restarts_; }

 private:
  // One launch of postgres on port_; throws PortTaken (internal) if the
  // port was taken meanwhile.
  void start_once(const PgRunAs& user);
  // initdb into data_dir_, and the password file.
  void init_cluster(const PgRunAs& user);
  void cleanup_socket_dir();
  // Takes the postmaster named by postmaster.pid as ours if it is alive and
  // is not pid_ (the server was restarted behind our back); true if it did.
  bool adopt_from_pid_file();

  EmbeddedPostgresOptions options_;
  std::string data_dir_;
  std::string password_;
  std::string socket_dir_;
  int port_ = 0;
  pid_t pid_ = 0;
  int pidfd_ = -1;
  // Until then supervise() only adopts (restart_grace); epoch: no grace.
  std::chrono::steady_clock::time_point grace_until_{};
  bool stopped_ = true;  // by stop(), or never started: supervise() does nothing
  int restarts_ = 0;
};

}  // namespace leapfrog::coord
