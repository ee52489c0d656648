#pragma once
// Report batching: the report_outcome calls that arrive while a batch is
// being written are judged (report_acceptance.h) and stored together, in one
// transaction: one statement for the outcome rows and their jobs, one COPY
// for the violation rows (pg_reports.cc).

#include <cstdint>
#include <string>

#include "coordinator/clock.h"
#include "coordinator/store/pg_pool.h"
#include "coordinator/store/store.h"
#include "leapfrog/v1/common.pb.h"

namespace leapfrog::coord {

// One report_outcome call, queued for group commit.
struct PgReport {
  const std::string& agent_id;
  int64_t job_id;
  uint32_t attempt;
  const v1::Outcome& outcome;
  TimePoint now;
  std::string key;  // Store's `key`
};

using PgReports = PgBatchWriter<PgReport, ReportResult>;
using ReportBatch = PgReports::Batch;

// Writes `batch` in one transaction and hands each caller its result. A batch
// failing for a reason other than the database being unavailable is written
// again one report at a time, so that only the report at fault fails. A build
// job's report (rare) is a transaction of its own (store_build_report).
void write_reports(PgPool& pool, ReportBatch& batch);

}  // namespace leapfrog::coord
