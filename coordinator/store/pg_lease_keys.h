#pragma once
// The keys leases are taken with (Store's `key`, migration 7), as PgStore
// keeps them: jobs.holders[n] is the first 128 bits of the key that leased
// attempt n, as a uuid; agents.secret_sha256 is the whole key of the agent's
// latest registration.

#include <cstdint>
#include <string>
#include <vector>

namespace leapfrog::coord {

// SQL for the uuid a lease records for the key in parameter `param` ("$6"):
// NULL for kTrustedCaller.
std::string holder_sql(const std::string& param);

// SQL that holds when the key in `param` may act on the lease of `attempt`
// (a column or expression): it was taken with that key, without one, or the
// caller is trusted.
std::string key_matches_sql(const std::string& attempt, const std::string& param);

// The holders of one job, as lock_jobs reads them: the lower bound of the
// array and its elements joined by commas (NULL as "", uuids without dashes).
class LeaseHolders {
 public:
  LeaseHolders() = default;
  LeaseHolders(int lower, const std::string& joined);
  // The holder of `attempt`, 32 hex digits, or "" when none is recorded.
  std::string of(uint32_t attempt) const;

 private:
  int lower_ = 1;
  std::vector<std::string> keys_;
};

// Why a call on (job, attempt) was refused: its lease was taken with another
// key (WrongAgentSecret's message).
std::string other_key_message(int64_t job_id, uint32_t attempt);

// "" when `key` may act on a lease recorded with `holder` (32 hex digits or
// ""), else why not (for WrongAgentSecret).
std::string wrong_key(const std::string& holder, const std::string& key, int64_t job_id,
                      uint32_t attempt);

}  // namespace leapfrog::coord
