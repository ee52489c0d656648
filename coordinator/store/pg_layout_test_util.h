#pragma once
// For the store's tests: an outcome as migration 14's layout stored it.

#include <cstdint>
#include <pqxx/pqxx>
#include <string>

#include "leapfrog/v1/common.pb.h"

namespace leapfrog::coord {

// Moves the typed details of the stored outcome (job_id, attempt), whose
// violations are `o`'s, into each violation row's detail_pb and drops its
// violation_details value, as an outcome stored before migration 15 has
// them. Returns how many violation_details rows it dropped.
inline size_t move_details_into_rows(const std::string& url, int64_t job_id, uint32_t attempt,
                                      const v1::Outcome& o) {
  pqxx::connection conn(url);
  pqxx::work txn(conn);
  for (int i = 0; i < o.violations_size(); ++i)
    txn.exec_params(
        "UPDATE violations SET detail_pb = $3 WHERE job_id = $1 AND attempt = $2 AND idx = $4",
        job_id, attempt, pqxx::binarystring(o.violations(i).detail().SerializeAsString()), i);
  const size_t dropped =
      txn.exec_params("DELETE FROM violation_details WHERE job_id = $1 AND attempt = $2", job_id,
                      attempt)
          .affected_rows();
  txn.commit();
  return dropped;
}

}  // namespace leapfrog::coord
