#pragma once
// lookup-scale runs kept as rows (schema migration 11): each passing run's
// points go into scale_points, and the run itself into scale_runs, in the
// transaction that stores its outcome. "The latest run of each kernel" and
// "its last two runs" are then index scans over scale_runs (kernel_label,
// seq), exact for runs of any age, instead of a scan of recent outcomes'
// JSON. The rows come from the outcome's typed Outcome.scale, or for an
// outcome stored before it from its JSON (common/outcome/scale_proto.h's
// scale_run_of): a run without a valid point is kept out.

#include <cstdint>
#include <optional>
#include <pqxx/pqxx>
#include <string>
#include <vector>

#include "coordinator/store/store.h"

namespace leapfrog::coord {

// What a passing lookup-scale outcome holds for the rows.
struct ParsedScaleRun {
  std::string host_json;  // its "scale_host" object as JSON, "" when absent
  std::vector<ScalePointRow> points;
};

// The run of an outcome (scale_run_of); nullopt when it has no valid point.
std::optional<ParsedScaleRun> parse_scale_run(const v1::Outcome& outcome);

// Whether an outcome of `scenario` with `verdict` is a run scale_runs keeps.
bool is_scale_run(const std::string& scenario, int verdict);

// Writes the rows of a run whose outcome (job_id, attempt) this transaction
// stored. The job's kernel and file system come from the job row.
void store_scale_run(pqxx::work& txn, int64_t job_id, uint32_t attempt, const ParsedScaleRun& run);

// Every passing lookup-scale outcome that has no rows yet gets them, from its
// stored outcome (migration 11's backfill; tests recount with it). Returns how
// many runs it wrote.
int backfill_scale_runs(pqxx::work& txn);

// Kernels with a kept run, by label.
std::vector<std::string> read_scale_kernels(pqxx::work& txn);

// The newest query.per_kernel runs of each kernel (ScaleRunQuery).
std::vector<ScaleRun> read_scale_runs(pqxx::work& txn, const ScaleRunQuery& query);

}  // namespace leapfrog::coord
