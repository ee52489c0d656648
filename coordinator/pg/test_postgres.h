#pragma once
// Tests: one embedded PostgreSQL per test suite, and a fresh database per test.
// Derive as `class FooTest : public testing::PostgresSuite<FooTest>`; each suite
// gets its own cluster.

#include <gtest/gtest.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <pqxx/pqxx>
#include <string>

#include "coordinator/pg/embedded_postgres.h"
#include "coordinator/pg/test_dir.h"

namespace leapfrog::coord::testing {

template <typename Suite>
class PostgresSuite : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    spdlog::set_level(spdlog::level::warn);
    dir_ = new TestDir();
    EmbeddedPostgresOptions options;
    options.for_tests = true;
    pg_ = new EmbeddedPostgres(options);
    pg_->start(*dir_ / "pg");
  }
  static void TearDownTestSuite() {
    delete pg_;
    delete dir_;
  }

  // Creates a new, empty database named `<prefix>_<pid>_<n>` and returns its name.
  static std::string fresh_database(const std::string& prefix) {
    static int counter = 0;
    const std::string db =
        prefix + "_" + std::to_string(getpid()) + "_" + std::to_string(++counter);
    pqxx::connection admin(pg_->url());
    pqxx::nontransaction(admin).exec("CREATE DATABASE " + db);
    return db;
  }

  static inline TestDir* dir_ = nullptr;
  static inline EmbeddedPostgres* pg_ = nullptr;
};

}  // namespace leapfrog::coord::testing
