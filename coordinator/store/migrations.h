#pragma once
// Versioned schema migrations, applied at start. Each migration runs once, in
// order, recorded in schema_migrations. All pending ones run in one transaction
// under an advisory lock, so replicas starting together apply them once.
// Never edit a released migration: append a new one.

#include <functional>
#include <pqxx/connection_base>
#include <pqxx/transaction>
#include <string>
#include <vector>

namespace leapfrog::coord {

struct Migration {
  int version;       // 1, 2, ...: increasing (a gap is allowed)
  std::string name;  // what it does, for schema_migrations
  std::string sql;   // one or more statements
  // Run after `sql` in the same transaction, for what SQL alone cannot do
  // (rows made from the protos stored in bytea); empty: none.
  std::function<void(pqxx::work&)> then;
};

// Every migration this coordinator knows, by version.
const std::vector<Migration>& schema_migrations();

// Applies the pending migrations; returns how many. Throws StoreError if the
// database holds a newer schema than this coordinator knows; pqxx errors pass
// through.
int apply_migrations(pqxx::connection_base& conn);

// Migration 17's `then`: packs (pack_outcome) every stored outcome value not
// packed yet that packing makes smaller; returns how many it packed.
int pack_stored_outcomes(pqxx::work& txn);

}  // namespace leapfrog::coord
