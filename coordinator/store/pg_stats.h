#pragma once
// What PgStore and its pools say about themselves for monitoring (GET
// /metrics): gauges read from the summaries and partial indexes, never from a
// scan of the outcomes, and how busy each connection pool is.

#include <cstdint>
#include <map>
#include <string>

namespace leapfrog::coord {

// One connection pool, now.
struct PgPoolUse {
  std::string pool;      // "store", "reports"
  int size = 0;          // most connections open at once
  int open = 0;          // open now (lent out or idle)
  int idle = 0;          // open and not lent out
  int waiting = 0;       // callers waiting for a connection
  uint64_t waits = 0;    // callers that had to wait, since the start
};

// Counts over the whole database (every campaign, every replica).
struct PgStoreStats {
  // Jobs by jobs.state ("queued", "leased", "waiting", "done").
  std::map<std::string, uint64_t> jobs_by_state;
  // Stored outcomes (extras included) by v1.Verdict, from the summaries.
  std::map<int, uint64_t> outcomes_by_verdict;
  // Issues by v1.IssueStatus.
  std::map<int, uint64_t> issues_by_status;
  uint64_t agents = 0;         // registered
  uint64_t agents_online = 0;  // seen since the `online_since` asked for
  int schema_version = 0;      // the newest migration applied
  int schema_wanted = 0;       // the newest this coordinator knows
};

}  // namespace leapfrog::coord
