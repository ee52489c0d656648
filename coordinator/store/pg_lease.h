#pragma once
// Group lease: the lease_job calls that arrive while a lease statement runs
// are served together, one autocommit statement per set of capabilities
// (lease_jobs hands the n-th caller the n-th oldest matching job), by writer
// threads of their own: a caller (a gRPC callback handler) queues its lease
// and is called back, and no caller's thread waits for the database.

#include <cstdint>
#include <optional>
#include <string>

#include "coordinator/store/pg_pool.h"
#include "coordinator/store/store.h"

namespace leapfrog::coord {

// One lease_job call, queued for a group lease.
struct PgLease {
  std::string agent_id;
  std::string kernel_label;
  std::string filesystems;  // text[] literal
  int64_t deadline_us;
  std::string release;  // the agent's `uname -r`: jobs on a rebuilt kernel need it
  std::string key;      // Store's `key`, recorded with the lease
};

using PgLeases = PgBatchWriter<PgLease, std::optional<v1::Job>>;
using LeaseBatch = PgLeases::Batch;

// Leases a job for each caller of `batch`, one autocommit statement per set
// of capabilities; callers left without a job get nullopt. A failed statement
// fails the callers it served.
void write_leases(PgPool& pool, LeaseBatch& batch);

}  // namespace leapfrog::coord
