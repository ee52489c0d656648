#pragma once
// What the end-to-end fixtures here set up alike: a test folder with logs/
// and a token file, a PostgreSQL of their own, the address `leapfrog serve`
// writes, and the logs printed when a test fails.

#include <google/protobuf/util/time_util.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "common/proto_time.h"
#include "coordinator/pg/embedded_postgres.h"
#include "coordinator/pg/test_dir.h"
#include "tests/process_util.h"

namespace leapfrog::testing {

// The names every e2e test uses; `using namespace leapfrog::testing` brings
// them in.
using coord::EmbeddedPostgres;
using coord::EmbeddedPostgresOptions;
using coord::testing::TestDir;
using nlohmann::json;
namespace stdfs = std::filesystem;

// 32 random hex digits: a token for the coordinator and its clients.
// A Duration as protobuf's JSON mapping prints it ("0.004153980s"), in ns;
// -1 when `text` is not one (empty: the field was unset).
inline int64_t ns_of_duration_json(const std::string& text) {
  google::protobuf::Duration d;
  return google::protobuf::util::TimeUtil::FromString(text, &d) ? leapfrog::ns_of(d) : -1;
}

inline std::string random_token() {
  std::random_device rd;
  std::string t;
  for (int i = 0; i < 32; ++i) t += "0123456789abcdef"[rd() % 16];
  return t;
}

// The address `leapfrog serve` wrote to `data_dir`/address once it listens,
// without the trailing newline; "" if none yet.
inline std::string read_address(const std::string& data_dir) {
  std::string a = slurp(data_dir + "/address");
  while (!a.empty() && (a.back() == '\n' || a.back() == ' ')) a.pop_back();
  return a;
}

// Waits until `serve` wrote its address to `data_dir` or exited; false on
// timeout.
inline bool wait_address(const std::string& data_dir, const Proc& serve,
                         std::chrono::milliseconds timeout) {
  return poll_until([&] { return !slurp(data_dir + "/address").empty() || serve.exited(); },
                    timeout);
}

// Prints on stderr the last `max` bytes of each non-empty file in `logs`.
inline void print_logs(const std::string& logs, size_t max) {
  for (const auto& e : stdfs::directory_iterator(logs)) {
    if (stdfs::file_size(e.path()) == 0) continue;
    std::fprintf(stderr, "---- %s ----\n%s\n", e.path().filename().c_str(),
                 tail_of(e.path(), max).c_str());
  }
}

// Prints on stderr the tail of each VM console file below `folder` (the
// coordinator's data folder keeps them).
inline void print_consoles(const std::string& folder) {
  for (const auto& e : stdfs::recursive_directory_iterator(folder)) {
    if (!e.is_regular_file() || e.path().string().find("console") == std::string::npos) continue;
    std::fprintf(stderr, "---- %s ----\n%s\n", e.path().c_str(), tail_of(e.path(), 3000).c_str());
  }
}

// Base of the e2e fixtures: the test folder, its logs and token, the test's
// PostgreSQL and the children spawn() started. The fixture's TearDown stops
// the children in its own order, then calls release().
class E2ETest : public ::testing::Test {
 protected:
  // Makes the test folder, dir_/logs and a token file in dir_/token.
  void make_test_dir() {
    dir_ = std::make_unique<TestDir>();
    logs_ = *dir_ / "logs";
    stdfs::create_directories(logs_);
    token_file_ = *dir_ / "token";
    std::ofstream(token_file_) << random_token() << "\n";
  }

  // Starts the test's PostgreSQL in dir_/pg.
  void start_postgres() {
    EmbeddedPostgresOptions o;
    o.for_tests = true;
    pg_ = std::make_unique<EmbeddedPostgres>(o);
    pg_->start(*dir_ / "pg");
  }

  // A child running `argv`, its output in logs_/<name>.out and .err.
  std::unique_ptr<Proc> logged_proc(const std::string& name, std::vector<std::string> argv) const {
    return std::make_unique<Proc>(std::move(argv), logs_ + "/" + name + ".out",
                                  logs_ + "/" + name + ".err");
  }

  // A child running `argv` as logged_proc, kept in procs_.
  Proc* spawn(const std::string& name, std::vector<std::string> argv) {
    procs_.push_back(logged_proc(name, std::move(argv)));
    return procs_.back().get();
  }

  // Drops the children (stopped by now), then PostgreSQL, then the folder.
  void release() {
    procs_.clear();
    pg_.reset();
    dir_.reset();
  }

  // Whether TearDown prints the logs: after a failure, or always with
  // LEAPFROG_E2E_LOGS=1.
  static bool show_logs() { return HasFailure() || std::getenv("LEAPFROG_E2E_LOGS"); }

  std::unique_ptr<TestDir> dir_;
  std::string logs_, token_file_;
  std::unique_ptr<EmbeddedPostgres> pg_;
  std::vector<std::unique_ptr<Proc>> procs_;
};

}  // namespace leapfrog::testing
