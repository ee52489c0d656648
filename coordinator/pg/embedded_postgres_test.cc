// EmbeddedPostgres against the real server binaries: initdb, start, connect,
// restart, two clusters at once, and the errors a user meets.

#include "coordinator/pg/embedded_postgres.h"

#include <gtest/gtest.h>
#include <libpq-fe.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <signal.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <thread>

#include "coordinator/pg/test_dir.h"

namespace leapfrog::coord {
namespace {

using testing::TestDir;

EmbeddedPostgresOptions test_options() {
  EmbeddedPostgresOptions o;
  o.for_tests = true;
  return o;
}

// Runs `sql` on `url`; the first column of the first row, or "ERROR: ..." .
std::string query(const std::string& url, const std::string& sql) {
  PGconn* conn = PQconnectdb(url.c_str());
  if (PQstatus(conn) != CONNECTION_OK) {
    std::string e = std::string("ERROR: ") + PQerrorMessage(conn);
    PQfinish(conn);
    return e;
  }
  PGresult* r = PQexec(conn, sql.c_str());
  std::string out;
  auto status = PQresultStatus(r);
  if (status == PGRES_TUPLES_OK && PQntuples(r) > 0) {
    out = PQgetvalue(r, 0, 0);
  } else if (status != PGRES_TUPLES_OK && status != PGRES_COMMAND_OK) {
    out = std::string("ERROR: ") + PQresultErrorMessage(r);
  }
  PQclear(r);
  PQfinish(conn);
  return out;
}

TEST(EmbeddedPostgres, StartsConnectsAndStops) {
  TestDir tmp;
  EmbeddedPostgres pg(test_options());
  pg.start(tmp / "data");
  EXPECT_TRUE(pg.running());
  EXPECT_GT(pg.port(), 0);
  EXPECT_LT(pg.socket_dir().size(), 40u);
  EXPECT_NE(pg.url().find("@127.0.0.1:" + std::to_string(pg.port()) + "/leapfrog"),
            std::string::npos);
  EXPECT_EQ(query(pg.url(), "SELECT current_database()"), "leapfrog");
  EXPECT_EQ(query(pg.url(), "SHOW server_encoding"), "UTF8");
  EXPECT_EQ(query(pg.url(), "SHOW fsync"), "off");
  // The server runs unprivileged even when the test is root.
  struct stat st;
  ASSERT_EQ(stat(("/proc/" + std::to_string(pg.pid())).c_str(), &st), 0);
  EXPECT_NE(st.st_uid, 0u);

  // Without the password the server refuses, also on 127.0.0.1.
  std::string no_password =
      "host=127.0.0.1 port=" + std::to_string(pg.port()) + " dbname=leapfrog user=leapfrog";
  EXPECT_EQ(query(no_password, "SELECT 1").rfind("ERROR:", 0), 0u);

  std::string url = pg.url();
  std::string sock = pg.socket_dir();
  pg.stop();
  EXPECT_FALSE(pg.running());
  EXPECT_EQ(pg.pid(), 0);
  EXPECT_FALSE(std::filesystem::exists(sock));
  EXPECT_EQ(query(url, "SELECT 1").rfind("ERROR:", 0), 0u);
  pg.stop();  // a second stop is a no-op
}

TEST(EmbeddedPostgres, RestartKeepsDataAndUrl) {
  TestDir tmp;
  std::string url;
  {
    EmbeddedPostgres pg(test_options());
    pg.start(tmp / "data");
    url = pg.url();
    ASSERT_EQ(query(url, "CREATE TABLE t (v int); INSERT INTO t VALUES (42)"), "");
    pid_t before = pg.pid();
    pg.restart();
    EXPECT_NE(pg.pid(), before);
    EXPECT_EQ(pg.url(), url);
    EXPECT_EQ(query(url, "SELECT v FROM t"), "42");
  }  // the destructor stops the server
  EXPECT_EQ(query(url, "SELECT 1").rfind("ERROR:", 0), 0u);

  // A new object on the same folder: same cluster, same URL.
  EmbeddedPostgres again(test_options());
  again.start(tmp / "data");
  EXPECT_EQ(again.url(), url);
  EXPECT_EQ(query(url, "SELECT v FROM t"), "42");
}

TEST(EmbeddedPostgres, TwoClustersAtOnce) {
  TestDir tmp;
  EmbeddedPostgres a(test_options());
  EmbeddedPostgres b(test_options());
  a.start(tmp / "a");
  b.start(tmp / "b");
  EXPECT_NE(a.port(), b.port());
  ASSERT_EQ(query(a.url(), "CREATE TABLE only_in_a (v int)"), "");
  EXPECT_EQ(query(a.url(), "SELECT count(*) FROM only_in_a"), "0");
  EXPECT_EQ(query(b.url(), "SELECT count(*) FROM only_in_a").rfind("ERROR:", 0), 0u);
  // One folder cannot serve two servers, and the refusal leaves the first alone.
  EmbeddedPostgres c(test_options());
  try {
    c.start(tmp / "a");
    FAIL() << "a second server started on the same folder";
  } catch (const PostgresError& e) {
    EXPECT_NE(std::string(e.what()).find("in use by a running server (pid " +
                                         std::to_string(a.pid()) + ")"),
              std::string::npos)
        << e.what();
  }
  EXPECT_TRUE(a.running());
  a.restart();
  EXPECT_EQ(query(a.url(), "SELECT count(*) FROM only_in_a"), "0");
}

TEST(EmbeddedPostgres, PortTakenWhileStoppedMovesToAnother) {
  TestDir tmp;
  EmbeddedPostgres pg(test_options());
  pg.start(tmp / "data");
  int port = pg.port();
  pg.stop();

  int fd = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in addr = {};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(listen(fd, 1), 0);
  pg.start(tmp / "data");
  close(fd);
  EXPECT_NE(pg.port(), port);
  EXPECT_EQ(query(pg.url(), "SELECT 1"), "1");
}

TEST(EmbeddedPostgres, FolderWithOtherFilesIsRefused) {
  TestDir tmp;
  std::filesystem::create_directories(tmp / "data");
  std::ofstream(tmp / "data/notes.txt") << "mine\n";
  EmbeddedPostgres pg(test_options());
  try {
    pg.start(tmp / "data");
    FAIL() << "started in a folder holding other files";
  } catch (const PostgresError& e) {
    EXPECT_NE(std::string(e.what()).find("holds files but no PostgreSQL cluster"),
              std::string::npos)
        << e.what();
  }
  EXPECT_FALSE(pg.running());
}

TEST(EmbeddedPostgres, FileInsteadOfFolderIsRefused) {
  TestDir tmp;
  std::ofstream(tmp / "file") << "x\n";
  EmbeddedPostgres pg(test_options());
  EXPECT_THROW(pg.start(tmp / "file"), PostgresError);
  EXPECT_THROW(pg.start(tmp / "file/data"), PostgresError);
}

TEST(EmbeddedPostgres, UnreachableFolderIsRefusedAsRoot) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root: the server then runs as 'postgres'";
  TestDir tmp;
  std::filesystem::create_directories(tmp / "private");
  chmod((tmp / "private").c_str(), 0700);
  EmbeddedPostgres pg(test_options());
  try {
    pg.start(tmp / "private/data");
    FAIL() << "started under a 0700 folder";
  } catch (const PostgresError& e) {
    EXPECT_NE(std::string(e.what()).find("cannot enter '" + (tmp / "private") + "'"),
              std::string::npos)
        << e.what();
  }
}

TEST(EmbeddedPostgres, BrokenConfigReportsTheServerLog) {
  TestDir tmp;
  EmbeddedPostgres pg(test_options());
  pg.start(tmp / "data");
  pg.stop();
  std::ofstream(tmp / "data/postgresql.conf", std::ios::app) << "no_such_setting = 1\n";
  try {
    pg.start(tmp / "data");
    FAIL() << "started with a broken postgresql.conf";
  } catch (const PostgresError& e) {
    std::string what = e.what();
    EXPECT_NE(what.find("the server exited"), std::string::npos) << what;
    EXPECT_NE(what.find("no_such_setting"), std::string::npos) << what;
  }
  EXPECT_FALSE(pg.running());
  EXPECT_TRUE(pg.socket_dir().empty());
}

// Polls `pred` every few milliseconds for up to `seconds`; true if it held.
template <class Pred>
bool within(int seconds, Pred pred) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
  while (!pred()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return true;
}

// The pid on postmaster.pid's first line, 0 if none.
pid_t pid_file_of(const std::string& data_dir) {
  std::ifstream in(data_dir + "/postmaster.pid");
  long pid = 0;
  in >> pid;
  return static_cast<pid_t>(pid);
}

TEST(EmbeddedPostgres, SuperviseStartsAKilledServerAgainOnItsPort) {
  TestDir tmp;
  EmbeddedPostgres pg(test_options());
  EXPECT_FALSE(pg.supervise()) << "nothing to supervise before the first start";
  pg.start(tmp / "data");
  ASSERT_EQ(query(pg.url(), "CREATE TABLE kept AS SELECT 1 AS x"), "");
  // for_tests turns synchronous_commit off: make the table outlive the kill.
  ASSERT_EQ(query(pg.url(), "CHECKPOINT"), "");
  const pid_t first = pg.pid();
  const int port = pg.port();
  EXPECT_TRUE(pg.supervise());
  EXPECT_EQ(pg.restarts(), 0);

  ASSERT_EQ(kill(first, SIGKILL), 0);
  ASSERT_TRUE(within(10, [&] { return !pg.running(); }));
  // Its backends may hold the folder for a moment: a supervisor retries.
  ASSERT_TRUE(within(30, [&] {
    try {
      return pg.supervise();
    } catch (const PostgresError&) {
      return false;
    }
  }));
  EXPECT_TRUE(pg.running());
  EXPECT_NE(pg.pid(), first);
  EXPECT_EQ(pg.pid(), pid_file_of(pg.data_dir()));
  EXPECT_EQ(pg.port(), port);
  EXPECT_EQ(pg.restarts(), 1);
  EXPECT_EQ(query(pg.url(), "SELECT count(*) FROM kept"), "1");
  pg.stop();
  EXPECT_FALSE(pg.supervise()) << "a stopped server is not started again";
}

TEST(EmbeddedPostgres, AServerRestartedBehindItsBackIsAdoptedAndStopped) {
  TestDir tmp;
  EmbeddedPostgres pg(test_options());
  pg.start(tmp / "data");
  const pid_t first = pg.pid();
  const std::string pg_ctl = "/usr/lib/postgresql/15/bin/pg_ctl -D " + pg.data_dir() + " -l " +
                             pg.data_dir() + "/pg_ctl.log -w -m fast restart > /dev/null";
  ASSERT_EQ(std::system(((geteuid() == 0 ? "runuser -u postgres -- " : "") + pg_ctl).c_str()), 0);
  const pid_t real = pid_file_of(pg.data_dir());
  ASSERT_GT(real, 0);
  ASSERT_NE(real, first);

  EXPECT_TRUE(pg.supervise());
  EXPECT_EQ(pg.pid(), real);
  EXPECT_EQ(pg.restarts(), 0) << "adopted, not started again";
  EXPECT_TRUE(pg.running());
  EXPECT_EQ(query(pg.url(), "SELECT 1"), "1");

  // stop() stops the server that really runs, so the next start finds the folder free.
  pg.stop();
  EXPECT_TRUE(within(10, [&] { return kill(real, 0) != 0; }))
      << "postmaster " << real << " left running";
  pg.start(tmp / "data");
  EXPECT_EQ(query(pg.url(), "SELECT 1"), "1");
}

// `pg_ctl` as the server's own user, the way an operator runs it.
int pg_ctl(const EmbeddedPostgres& pg, const std::string& action) {
  const std::string cmd = "/usr/lib/postgresql/15/bin/pg_ctl -D " + pg.data_dir() + " -l " +
                          pg.data_dir() + "/pg_ctl.log -w -m fast " + action + " > /dev/null";
  return std::system(((geteuid() == 0 ? "runuser -u postgres -- " : "") + cmd).c_str());
}

// `pg_ctl restart` stops the server, then starts it: a supervise() that came
// in between and started its own made that start fail.
TEST(EmbeddedPostgres, AServerStoppedByAnOperatorIsLeftForThemToStartDuringTheGrace) {
  TestDir tmp;
  EmbeddedPostgresOptions o = test_options();
  o.restart_grace = std::chrono::seconds(3);
  EmbeddedPostgres pg(o);
  pg.start(tmp / "data");
  const pid_t first = pg.pid();
  ASSERT_EQ(pg_ctl(pg, "stop"), 0);
  ASSERT_TRUE(within(10, [&] { return !pg.running(); }));

  // The middle of an outside restart: nothing runs, and nothing is started.
  EXPECT_FALSE(pg.supervise());
  EXPECT_EQ(pg.restarts(), 0);
  EXPECT_LE(pid_file_of(pg.data_dir()), 0) << "supervise() started a server in the grace";
  // The operator's start succeeds, and is adopted.
  ASSERT_EQ(pg_ctl(pg, "start"), 0);
  EXPECT_TRUE(pg.supervise());
  EXPECT_NE(pg.pid(), first);
  EXPECT_EQ(pg.pid(), pid_file_of(pg.data_dir()));
  EXPECT_EQ(pg.restarts(), 0);

  // Stopped and not started by anyone: supervise() starts it after the grace.
  ASSERT_EQ(pg_ctl(pg, "stop"), 0);
  const auto stopped = std::chrono::steady_clock::now();
  ASSERT_TRUE(within(30, [&] {
    try {
      return pg.supervise();
    } catch (const PostgresError&) {
      return false;
    }
  }));
  EXPECT_GE(std::chrono::steady_clock::now() - stopped, o.restart_grace);
  EXPECT_EQ(pg.restarts(), 1);
  EXPECT_EQ(query(pg.url(), "SELECT 1"), "1");
  pg.stop();
}

// stop() also finds the real server when no supervise() came between.
TEST(EmbeddedPostgres, StopAfterAnOutsideRestartStopsTheRealServer) {
  TestDir tmp;
  EmbeddedPostgres pg(test_options());
  pg.start(tmp / "data");
  const std::string pg_ctl = "/usr/lib/postgresql/15/bin/pg_ctl -D " + pg.data_dir() + " -l " +
                             pg.data_dir() + "/pg_ctl.log -w -m fast restart > /dev/null";
  ASSERT_EQ(std::system(((geteuid() == 0 ? "runuser -u postgres -- " : "") + pg_ctl).c_str()), 0);
  const pid_t real = pid_file_of(pg.data_dir());
  pg.stop();
  EXPECT_TRUE(within(10, [&] { return kill(real, 0) != 0; }))
      << "postmaster " << real << " left running";
}

}  // namespace
}  // namespace leapfrog::coord
