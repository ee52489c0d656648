#pragma once
// The SQL of PgStore's prepared statements (pg_statements.cc), with those of
// pg_summaries and pg_agents: every pooled connection prepares them all.

#include <string>
#include <vector>

#include "coordinator/store/pg_pool.h"

namespace leapfrog::coord {

// Every statement PgStore's pools prepare.
std::vector<PgStatement> store_statements();
// The SQL of the statement `name`; throws std::out_of_range for another name.
std::string store_statement_sql(const std::string& name);

}  // namespace leapfrog::coord
