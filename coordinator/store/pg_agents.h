#pragma once
// The agents' steady traffic, written in groups: touches (last_seen) are
// queued and written by a thread of their own, many agents per statement;
// concurrent heartbeats (renew_lease) share one statement. At 1,000 agents
// that is hundreds of calls a second, each of which would otherwise be a
// statement and a commit of its own, holding a pooled connection.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "coordinator/clock.h"
#include "coordinator/store/pg_pool.h"

namespace leapfrog::coord {

// One touch_agent_async call; `barrier` items carry no touch (list_agents
// waits for one so that it sees every touch queued before it).
struct PgTouch {
  std::string agent_id;
  int64_t at_us = 0;
  bool barrier = false;
};

// One renew_lease call.
struct PgRenew {
  std::string agent_id;
  int64_t job_id = 0;
  uint32_t attempt = 0;
  int64_t deadline_us = 0;
  std::string key;  // Store's `key`
  // The run's counts (HeartbeatRequest.progress) and when they came; -1:
  // the heartbeat carried none, and the stored ones stay.
  int64_t operations = -1;
  int64_t lookups_judged = -1;
  int64_t violations = -1;
  int64_t progress_us = 0;
};

using PgTouchWriter = PgBatchWriter<PgTouch, bool>;
using PgRenewals = PgGroupCommit<PgRenew, std::optional<TimePoint>>;

// The statements below, prepared on every pooled connection.
std::vector<PgStatement> agent_statements();
// Writes a batch of touches in one statement (the latest time of each agent).
void write_touches(PgPool& pool, PgTouchWriter::Batch& batch);
// Renews a batch of leases in as few statements as its distinct jobs allow;
// each item gets the new deadline, or nullopt if the lease is not the
// caller's (PgStore::renew_lease then tells a wrong key apart).
void write_renewals(PgPool& pool, PgRenewals::Batch& batch);

}  // namespace leapfrog::coord
