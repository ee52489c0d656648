#include "coordinator/store/pg_pool.h"

#include <spdlog/spdlog.h>

#include <algorithm>

namespace leapfrog::coord {

PgPool::PgPool(std::string url, int size, std::vector<PgStatement> statements,
               std::vector<PgSetting> settings)
    : url_(std::move(url)),
      size_(std::max(size, 1)),
      statements_(std::move(statements)),
      settings_(std::move(settings)) {}

PgPool::~PgPool() = default;

PgPool::Handle PgPool::acquire() {
  std::unique_lock<std::mutex> lock(mu_);
  if (idle_.empty() && open_ >= size_) {
    ++waiting_;
    ++waits_;
    cv_.wait(lock, [&] { return !idle_.empty() || open_ < size_; });
    --waiting_;
  }
  if (!idle_.empty()) {
    auto conn = std::move(idle_.back());
    idle_.pop_back();
    return Handle(this, std::move(conn), true);
  }
  ++open_;
  lock.unlock();
  try {
    auto conn = std::make_unique<pqxx::connection>(url_);
    // libpqxx prepares each statement on the server at its first use.
    for (const auto& s : statements_) conn->prepare(s.name, s.sql);
    for (const auto& s : settings_) conn->set_variable(s.name, s.value);
    return Handle(this, std::move(conn), false);
  } catch (...) {
    lock.lock();
    --open_;
    cv_.notify_one();
    throw;
  }
}

void PgPool::drop_idle() {
  std::vector<std::unique_ptr<pqxx::connection>> dropped;
  {
    std::lock_guard<std::mutex> lock(mu_);
    dropped.swap(idle_);
    open_ -= static_cast<int>(dropped.size());
  }
  cv_.notify_all();
}

PgPoolUse PgPool::use(const std::string& name) {
  std::lock_guard<std::mutex> lock(mu_);
  return PgPoolUse{name, size_, open_, static_cast<int>(idle_.size()), waiting_, waits_};
}

void PgPool::give_back(std::unique_ptr<pqxx::connection> conn, bool broken) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (broken || !conn || !conn->is_open()) {
      --open_;
    } else {
      idle_.push_back(std::move(conn));
    }
  }
  cv_.notify_one();
  // A broken connection is closed here, outside the lock.
}

// Class 08 (connection exception), 57P01-57P03 (admin shutdown, crash
// shutdown, cannot connect now: starting up), 53300 (too many connections).
bool pg_connection_lost(const std::string& sqlstate) {
  return sqlstate.rfind("08", 0) == 0 || sqlstate == "57P01" || sqlstate == "57P02" ||
         sqlstate == "57P03" || sqlstate == "53300";
}

// Serialization failure, deadlock.
bool pg_transient(const std::string& sqlstate) {
  return sqlstate == "40001" || sqlstate == "40P01";
}

std::string pg_one_line(const char* message) {
  std::string s;
  for (const char* p = message; *p; ++p) {
    bool space = *p == '\n' || *p == '\t' || *p == ' ';
    if (!space) {
      s += *p;
    } else if (!s.empty() && s.back() != ' ') {
      s += ' ';
    }
  }
  while (!s.empty() && s.back() == ' ') s.pop_back();
  return s;
}

StoreError pg_unavailable(const char* call, const std::string& why) {
  spdlog::warn("store_unavailable call={} error=\"{}\"", call, why);
  return StoreError(std::string(call) + ": database unavailable: " + why, true);
}

void pg_rethrow_as_store_error(const char* call) {
  try {
    throw;
  } catch (const pqxx::broken_connection& e) {
    // libpqxx 6 reports every failed connection attempt this way (refused,
    // starting up, also a bad password): the message tells them apart.
    throw pg_unavailable(call, pg_one_line(e.what()));
  } catch (const pqxx::sql_error& e) {
    if (pg_connection_lost(e.sqlstate())) throw pg_unavailable(call, pg_one_line(e.what()));
    throw StoreError(std::string(call) + ": " + pg_one_line(e.what()), false);
  } catch (const StoreError&) {
    throw;
  } catch (const std::exception& e) {
    throw StoreError(std::string(call) + ": " + pg_one_line(e.what()), false);
  }
}

}  // namespace leapfrog::coord
