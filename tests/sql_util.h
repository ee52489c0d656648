#pragma once
// End-to-end tests read PostgreSQL directly (libpq): what the coordinator
// stored is the evidence, not what it says it stored.

#include <libpq-fe.h>

#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace leapfrog::testing {

using Rows = std::vector<std::vector<std::string>>;

// Runs one query (or command: no rows); nullopt when the server cannot be
// reached or the query fails (`error` says why).
inline std::optional<Rows> try_sql(const std::string& url, const std::string& query,
                                   std::string* error = nullptr) {
  PGconn* conn = PQconnectdb(url.c_str());
  if (PQstatus(conn) != CONNECTION_OK) {
    if (error) *error = "cannot connect: " + std::string(PQerrorMessage(conn));
    PQfinish(conn);
    return std::nullopt;
  }
  PGresult* r = PQexec(conn, query.c_str());
  std::optional<Rows> out;
  const auto status = PQresultStatus(r);
  if (status == PGRES_TUPLES_OK || status == PGRES_COMMAND_OK) {
    Rows rows;
    for (int i = 0; i < PQntuples(r); ++i) {
      std::vector<std::string> row;
      for (int j = 0; j < PQnfields(r); ++j) row.push_back(PQgetisnull(r, i, j) ? "" : PQgetvalue(r, i, j));
      rows.push_back(std::move(row));
    }
    out = std::move(rows);
  } else if (error) {
    *error = PQresultErrorMessage(r);
  }
  PQclear(r);
  PQfinish(conn);
  return out;
}

// One query; throws with the query and the reason if it fails.
inline Rows sql_once(const std::string& url, const std::string& query) {
  std::string error;
  auto rows = try_sql(url, query, &error);
  if (!rows) throw std::runtime_error("query failed: " + query + ": " + error);
  return std::move(*rows);
}

}  // namespace leapfrog::testing
