#pragma once
// Versioned schema migrations, applied at start. Each migration runs once, in
// order, recorded in schema_migrations. All pending ones run in one transaction
// under an advisory lock, so replicas starting together apply them once.
// Never edit a released migration: append a new one.

#include <pqxx/connection_base>
#include <string>
#include <vector>

namespace leapfrog::coord {

struct Migration {
  int version;       // 1, 2, ...: increasing (a gap is allowed)
  std::string name;  // what it does, for schema_migrations
  std::string sql;   // one or more statements
};

// Every migration this coordinator knows, by version.
const std::vector<Migration>& schema_migrations();

// Applies the pending migrations; returns how many. Throws StoreError if the
// database holds a newer schema than this coordinator knows; pqxx errors pass
// through.
int apply_migrations(pqxx::connection_base& conn);

}  // namespace leapfrog::coord
