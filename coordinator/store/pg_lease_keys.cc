#include "coordinator/store/pg_lease_keys.h"

namespace leapfrog::coord {

std::string holder_sql(const std::string& param) {
  // nullif first: ''::uuid would be an error, and SQL does not promise to
  // evaluate an OR's sides in order.
  return "left(nullif(" + param + ", ''), 32)::uuid";
}

std::string key_matches_sql(const std::string& attempt, const std::string& param) {
  return "(holders[" + attempt + "] IS NULL OR " + param + " = '' OR holders[" + attempt +
         "] = " + holder_sql(param) + ")";
}

LeaseHolders::LeaseHolders(int lower, const std::string& joined) : lower_(lower) {
  if (joined.empty()) return;
  size_t at = 0;
  for (;;) {
    const size_t comma = joined.find(',', at);
    keys_.push_back(joined.substr(at, comma == std::string::npos ? std::string::npos : comma - at));
    if (comma == std::string::npos) break;
    at = comma + 1;
  }
}

std::string LeaseHolders::of(uint32_t attempt) const {
  const int64_t i = static_cast<int64_t>(attempt) - lower_;
  if (i < 0 || i >= static_cast<int64_t>(keys_.size())) return "";
  return keys_[static_cast<size_t>(i)];
}

std::string wrong_key(const std::string& holder, const std::string& key, int64_t job_id,
                      uint32_t attempt) {
  if (holder.empty() || key.empty() || key.compare(0, 32, holder) == 0) return "";
  return other_key_message(job_id, attempt);
}

std::string other_key_message(int64_t job_id, uint32_t attempt) {
  return "job " + std::to_string(job_id) + " attempt " + std::to_string(attempt) +
         " was leased with another agent_secret";
}

}  // namespace leapfrog::coord
