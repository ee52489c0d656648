// lookup-scale runs as rows (pg_scale.h).

#include "coordinator/store/pg_scale.h"

#include <charconv>
#include <cstdlib>
#include <map>
#include <nlohmann/json.hpp>
#include <utility>

#include "common/outcome/scale_proto.h"
#include "coordinator/store/pg_rows.h"
#include "coordinator/store/pg_util.h"

namespace leapfrog::coord {

namespace {

constexpr const char* kScaleScenario = "lookup-scale";

// A double exactly, as PostgreSQL's float8 input reads it back.
std::string exact(double v) {
  char digits[32];
  auto end = std::to_chars(digits, digits + sizeof digits, v).ptr;
  return std::string(digits, end);
}

std::string double_array(const std::vector<double>& items) {
  std::string out = "{";
  for (double v : items) {
    if (out.size() > 1) out += ',';
    out += exact(v);
  }
  return out + "}";
}

// A float8[] in PostgreSQL's text output ("{1.5,2}") back into numbers.
std::vector<double> parse_double_array(const std::string& text) {
  std::vector<double> out;
  if (text.size() < 2) return out;
  const std::string body = text.substr(1, text.size() - 2);
  size_t start = 0;
  while (start < body.size()) {
    size_t comma = body.find(',', start);
    if (comma == std::string::npos) comma = body.size();
    out.push_back(std::strtod(body.substr(start, comma - start).c_str(), nullptr));
    start = comma + 1;
  }
  return out;
}

// A float8 column exactly (its shortest text form, read by strtod).
double float8(const pqxx::field& f) {
  return std::strtod(f.c_str(), nullptr);
}

// The columns of one point, one array each, for insert_scale_points.
struct PointColumns {
  std::vector<std::string> tests, modes, samples;
  std::vector<int64_t> tasks;
  std::vector<double> ops, stddev, lo, hi, idle, other, cpu, window, host;
};

}  // namespace

std::optional<ParsedScaleRun> parse_scale_run(const v1::Outcome& outcome) {
  const auto scale = scale_run_of(outcome);
  if (!scale) return std::nullopt;
  ParsedScaleRun run;
  for (const auto& p : scale->points()) {
    ScalePointRow r;
    r.test = p.test();
    r.mode = leapfrog::to_string(p.mode());
    r.tasks = p.tasks();
    r.ops_per_sec = p.ops_per_sec();
    r.samples.assign(p.samples().begin(), p.samples().end());
    r.stddev = p.stddev();
    r.ci_low = p.ci95_low();
    r.ci_high = p.ci95_high();
    r.idle_pct = p.idle_pct();
    r.other_load = p.other_load();
    r.task_cpu_s = p.task_cpu_s();
    r.window_s = p.window_s();
    r.host_load = p.host_load();
    run.points.push_back(std::move(r));
  }
  if (scale->has_host()) run.host_json = leapfrog::to_json(from_proto(scale->host())).dump();
  return run;
}

bool is_scale_run(const std::string& scenario, int verdict) {
  return scenario == kScaleScenario && verdict == v1::VERDICT_PASS;
}

void store_scale_run(pqxx::work& txn, int64_t job_id, uint32_t attempt, const ParsedScaleRun& run) {
  const auto inserted = txn.exec_params(
      "INSERT INTO scale_runs (job_id, attempt, campaign_id, kernel_label, fs, seq, reported_at,"
      "  host)"
      " SELECT o.job_id, o.attempt, o.campaign_id, j.kernel_label, j.fs, o.seq, o.reported_at,"
      "  nullif($3, '')::jsonb"
      " FROM outcomes o JOIN jobs j ON j.id = o.job_id WHERE o.job_id = $1 AND o.attempt = $2"
      " ON CONFLICT (job_id, attempt) DO NOTHING RETURNING 1",
      job_id, static_cast<int64_t>(attempt), clean(run.host_json));
  if (inserted.empty()) return;  // kept before (a backfill that ran twice)
  PointColumns c;
  for (const auto& p : run.points) {
    c.tests.push_back(p.test);
    c.modes.push_back(p.mode);
    c.tasks.push_back(p.tasks);
    c.ops.push_back(p.ops_per_sec);
    c.samples.push_back(double_array(p.samples));
    c.stddev.push_back(p.stddev);
    c.lo.push_back(p.ci_low);
    c.hi.push_back(p.ci_high);
    c.idle.push_back(p.idle_pct);
    c.other.push_back(p.other_load);
    c.cpu.push_back(p.task_cpu_s);
    c.window.push_back(p.window_s);
    c.host.push_back(p.host_load);
  }
  txn.exec_params(
      "INSERT INTO scale_points (job_id, attempt, idx, testcase, mode, tasks, ops_per_sec, samples,"
      "  stddev, ci95_low, ci95_high, idle_pct, other_load, task_cpu_s, window_s, host_load)"
      " SELECT $1, $2, p.n - 1, p.t, p.m, p.k, p.ops, p.s::float8[], p.sd, p.lo, p.hi, p.idle,"
      "  p.other, p.cpu, p.win, p.host"
      " FROM unnest($3::text[], $4::text[], $5::bigint[], $6::float8[], $7::text[], $8::float8[],"
      "  $9::float8[], $10::float8[], $11::float8[], $12::float8[], $13::float8[], $14::float8[],"
      "  $15::float8[]) WITH ORDINALITY"
      "  AS p(t, m, k, ops, s, sd, lo, hi, idle, other, cpu, win, host, n)",
      job_id, static_cast<int64_t>(attempt), text_array(c.tests), text_array(c.modes),
      number_array(c.tasks), double_array(c.ops), text_array(c.samples), double_array(c.stddev),
      double_array(c.lo), double_array(c.hi), double_array(c.idle), double_array(c.other),
      double_array(c.cpu), double_array(c.window), double_array(c.host));
}

int backfill_scale_runs(pqxx::work& txn) {
  // Read in pages by key: at 10⁷ outcomes the lookup-scale ones are few, but
  // each carries its samples.
  int runs = 0;
  int64_t after_job = -1;
  int64_t after_attempt = -1;
  for (;;) {
    const auto rows = txn.exec_params(
        "SELECT o.job_id, o.attempt, o.outcome FROM outcomes o JOIN jobs j ON j.id = o.job_id"
        " WHERE j.scenario = $1 AND o.verdict = $2 AND (o.job_id, o.attempt) > ($3, $4)"
        "  AND NOT EXISTS (SELECT 1 FROM scale_runs r"
        "                  WHERE r.job_id = o.job_id AND r.attempt = o.attempt)"
        " ORDER BY o.job_id, o.attempt LIMIT 500",
        kScaleScenario, static_cast<int>(v1::VERDICT_PASS), after_job, after_attempt);
    if (rows.empty()) return runs;
    for (const auto& r : rows) {
      after_job = r[0].as<int64_t>();
      after_attempt = r[1].as<int64_t>();
      const auto outcome = parse_outcome(r[2]);
      if (auto run = parse_scale_run(outcome)) {
        store_scale_run(txn, after_job, static_cast<uint32_t>(after_attempt), *run);
        ++runs;
      }
    }
  }
}

std::vector<std::string> read_scale_kernels(pqxx::work& txn) {
  std::vector<std::string> out;
  for (const auto& r : txn.exec("SELECT DISTINCT kernel_label FROM scale_runs ORDER BY 1"))
    out.push_back(r[0].as<std::string>());
  return out;
}

std::vector<ScaleRun> read_scale_runs(pqxx::work& txn, const ScaleRunQuery& query) {
  std::vector<ScaleRun> out;
  if (query.per_kernel == 0) return out;
  // Per kernel, the newest runs by the index (kernel_label, seq DESC); by
  // campaign, every run of the campaigns of its newest runs.
  const std::string newest =
      query.by_campaign
          ? " CROSS JOIN LATERAL (SELECT * FROM scale_runs s WHERE s.kernel_label = k.kernel_label"
            "  AND s.campaign_id IN (SELECT c.campaign_id FROM scale_runs c"
            "   WHERE c.kernel_label = k.kernel_label GROUP BY c.campaign_id"
            "   ORDER BY max(c.seq) DESC LIMIT $2)) r"
          : " CROSS JOIN LATERAL (SELECT * FROM scale_runs s WHERE s.kernel_label = k.kernel_label"
            "  ORDER BY s.seq DESC LIMIT $2) r";
  const auto rows = txn.exec_params(
      "SELECT r.job_id, r.attempt, r.campaign_id, r.kernel_label, lf_us(r.reported_at),"
      "  coalesce(r.host::text, '')"
      " FROM (SELECT DISTINCT kernel_label FROM scale_runs"
      "  WHERE cardinality($1::text[]) = 0 OR kernel_label = ANY($1::text[])) k" +
          newest + " ORDER BY r.kernel_label, r.seq DESC",
      text_array(query.kernels), static_cast<int64_t>(query.per_kernel));
  std::map<std::pair<int64_t, uint32_t>, size_t> index;
  std::vector<int64_t> job_ids;
  std::vector<uint32_t> attempts;
  for (const auto& r : rows) {
    ScaleRun run;
    run.record.set_job_id(r[0].as<int64_t>());
    run.record.set_attempt(r[1].as<uint32_t>());
    run.record.set_campaign_id(r[2].as<int64_t>());
    run.record.set_kernel_label(r[3].as<std::string>());
    set_timestamp(run.record.mutable_reported_at(), r[4].as<int64_t>());
    run.host_json = r[5].as<std::string>();
    index[{run.record.job_id(), run.record.attempt()}] = out.size();
    job_ids.push_back(run.record.job_id());
    attempts.push_back(run.record.attempt());
    out.push_back(std::move(run));
  }
  if (out.empty() || !query.details) return out;
  const std::string keys = " JOIN unnest($1::bigint[], $2::int[]) AS k(job_id, attempt)";
  const auto outcomes = txn.exec_params(
      "SELECT " + std::string(kOutcomeColumns) + " FROM outcomes o JOIN jobs j ON j.id = o.job_id" +
          keys + " ON o.job_id = k.job_id AND o.attempt = k.attempt",
      number_array(job_ids), number_array(attempts));
  for (auto& o : outcome_records(txn, outcomes, false))
    out[index.at({o.job_id(), o.attempt()})].record = std::move(o);
  for (const auto& r : txn.exec_params(
           "SELECT p.job_id, p.attempt, p.testcase, p.mode, p.tasks, p.ops_per_sec,"
           "  p.samples::text, p.stddev, p.ci95_low, p.ci95_high, p.idle_pct, p.other_load,"
           "  p.task_cpu_s, p.window_s, p.host_load FROM scale_points p" +
               keys + " ON p.job_id = k.job_id AND p.attempt = k.attempt" +
               " ORDER BY p.job_id, p.attempt, p.idx",
           number_array(job_ids), number_array(attempts))) {
    ScalePointRow p;
    p.test = r[2].as<std::string>();
    p.mode = r[3].as<std::string>();
    p.tasks = r[4].as<uint32_t>();
    p.ops_per_sec = float8(r[5]);
    p.samples = parse_double_array(r[6].as<std::string>());
    p.stddev = float8(r[7]);
    p.ci_low = float8(r[8]);
    p.ci_high = float8(r[9]);
    p.idle_pct = float8(r[10]);
    p.other_load = float8(r[11]);
    p.task_cpu_s = float8(r[12]);
    p.window_s = float8(r[13]);
    p.host_load = float8(r[14]);
    out[index.at({r[0].as<int64_t>(), r[1].as<uint32_t>()})].points.push_back(std::move(p));
  }
  return out;
}

}  // namespace leapfrog::coord
