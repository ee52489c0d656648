// The schema, as numbered migrations. Conventions: times are timestamptz,
// converted from and to microseconds since the epoch by lf_ts/lf_us; proto
// messages are bytea (SerializeAsString; outcomes.outcome packed, migration
// 17) beside the columns queries filter on; enums are their proto numbers.

#include "coordinator/store/migrations.h"

#include <spdlog/spdlog.h>

#include <pqxx/pqxx>
#include <set>

#include "coordinator/store/pg_legacy.h"
#include "coordinator/store/pg_scale.h"
#include "coordinator/store/pg_summaries.h"
#include "coordinator/store/pg_util.h"
#include "coordinator/store/store.h"

namespace leapfrog::coord {

namespace {

// Key of the advisory lock held while migrating ("leapfrog" in ASCII).
constexpr long long kMigrationLock = 0x6c65617066726f67LL;

const char* const kInitialSchema = R"sql(
-- Microseconds since the epoch <-> timestamptz, exactly.
CREATE FUNCTION lf_ts(us bigint) RETURNS timestamptz
  LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
  AS $$ SELECT timestamptz 'epoch' + us * interval '1 microsecond' $$;
CREATE FUNCTION lf_us(ts timestamptz) RETURNS bigint
  LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
  AS $$ SELECT (extract(epoch FROM ts) * 1000000)::bigint $$;

CREATE TABLE agents (
  id            text PRIMARY KEY,         -- random uuid, handed to the agent
  name          text NOT NULL UNIQUE,     -- chosen by the agent; register is idempotent on it
  kernel_label  text NOT NULL,
  capabilities  bytea NOT NULL,           -- v1.Capabilities
  registered_at timestamptz NOT NULL,
  last_seen     timestamptz NOT NULL
);

CREATE TABLE kernels (
  label    text PRIMARY KEY,
  version  text NOT NULL,
  sha256   text NOT NULL,
  source   text NOT NULL,
  added_at timestamptz NOT NULL
);

CREATE TABLE schedules (
  id       bigserial PRIMARY KEY,
  name     text NOT NULL,
  cron     text NOT NULL,
  spec     bytea NOT NULL,                -- v1.CampaignSpec of each firing
  enabled  boolean NOT NULL DEFAULT true,
  next_run timestamptz NOT NULL,
  last_run timestamptz                    -- NULL until it fires
);

CREATE TABLE campaigns (
  id          bigserial PRIMARY KEY,
  name        text NOT NULL,
  spec        bytea NOT NULL,             -- v1.CampaignSpec
  schedule_id bigint NOT NULL DEFAULT 0,  -- 0: made by hand (no FK: removing a schedule keeps history)
  job_count   integer NOT NULL,
  created_at  timestamptz NOT NULL
);

CREATE TABLE jobs (
  id             bigserial PRIMARY KEY,
  campaign_id    bigint NOT NULL REFERENCES campaigns ON DELETE CASCADE,
  scenario       text NOT NULL,
  fs             text NOT NULL,
  kernel_label   text NOT NULL,
  spec           bytea NOT NULL,          -- v1.ScenarioSpec
  state          text NOT NULL DEFAULT 'queued' CHECK (state IN ('queued', 'leased', 'done')),
  -- Leases handed out so far; the current attempt. Every lease gets a new
  -- number, so (id, attempt) names one lease and its one outcome.
  attempt        integer NOT NULL DEFAULT 0,
  -- Leases the agent gave back (release_job); they do not count against max_attempts.
  released       integer NOT NULL DEFAULT 0,
  max_attempts   integer NOT NULL CHECK (max_attempts > 0),
  agent_id       text,                    -- lease holder (leased), reporter (done)
  lease_deadline timestamptz,             -- leased only
  verdict        integer,                 -- v1.Verdict, done only
  reason         text,                    -- why it ended as INFRA_FAILURE
  finished_at    timestamptz
);
-- Leasing scans this in id order for one kernel label.
CREATE INDEX jobs_queued ON jobs (kernel_label, id) WHERE state = 'queued';
CREATE INDEX jobs_leased ON jobs (lease_deadline) WHERE state = 'leased';
CREATE INDEX jobs_campaign ON jobs (campaign_id);

CREATE TABLE outcomes (
  job_id            bigint NOT NULL REFERENCES jobs ON DELETE CASCADE,
  attempt           integer NOT NULL,
  seq               bigint GENERATED ALWAYS AS IDENTITY UNIQUE,  -- report order
  campaign_id       bigint NOT NULL,
  agent_id          text NOT NULL,
  verdict           integer NOT NULL,     -- v1.Verdict
  ops               bigint NOT NULL,
  lookups_checked   bigint NOT NULL,
  offsets_checked   bigint NOT NULL,
  violation_count   bigint NOT NULL,      -- found in total; rows below may be capped
  race_window_hits  bigint NOT NULL,
  error             text NOT NULL,
  outcome           bytea NOT NULL,       -- v1.Outcome without its violations (rows below)
  reported_at       timestamptz NOT NULL,
  PRIMARY KEY (job_id, attempt)
);
CREATE INDEX outcomes_campaign ON outcomes (campaign_id, seq);
CREATE INDEX outcomes_failed ON outcomes (seq) WHERE verdict <> 1;

-- One row per v1.Violation of an outcome: what a dashboard timeline draws.
CREATE TABLE violations (
  job_id      bigint NOT NULL,
  attempt     integer NOT NULL,
  idx         integer NOT NULL,           -- position in Outcome.violations
  kind        text NOT NULL,
  actor       integer NOT NULL,
  op          text NOT NULL,
  path        text NOT NULL,
  step        integer NOT NULL,
  component   text NOT NULL,
  object      text NOT NULL,
  observed    text NOT NULL,
  expected    text NOT NULL,
  invoke_ns   bigint NOT NULL,
  complete_ns bigint NOT NULL,
  detail      text NOT NULL,              -- JSON as the agent sent it (not validated)
  PRIMARY KEY (job_id, attempt, idx),
  FOREIGN KEY (job_id, attempt) REFERENCES outcomes ON DELETE CASCADE
);
)sql";


// Triage (coordinator/triage/): issues grouped from failed outcomes by
// signature, and the actions run from them.
const char* const kTriageSchema = R"sql(
-- Failed outcomes with seq <= seq are grouped into issues (one row). The next
-- scan reads up to horizon_seq, the newest seq when the horizon was taken,
-- once every transaction running then (xid < horizon_xmax) has ended.
CREATE TABLE triage_watermark (
  id           integer PRIMARY KEY CHECK (id = 1),
  seq          bigint NOT NULL,
  horizon_seq  bigint NOT NULL,
  horizon_xmax xid8
);
INSERT INTO triage_watermark VALUES (1, 0, 0, NULL);

CREATE TABLE issues (
  id              bigserial PRIMARY KEY,
  signature       text NOT NULL UNIQUE,    -- coordinator/triage/signature.h
  kind            text NOT NULL,           -- violation, crash, hang, boot-failure
  scenario        text NOT NULL,
  title           text NOT NULL,
  status          integer NOT NULL,        -- v1.IssueStatus
  duplicate_of    bigint,                  -- status DUPLICATE only
  first_seen      timestamptz NOT NULL,
  last_seen       timestamptz NOT NULL,
  count           bigint NOT NULL,
  fixed_at        timestamptz,             -- set when marked FIXED
  regressions     integer NOT NULL DEFAULT 0,
  example_job     bigint NOT NULL,         -- first outcome (job, attempt)
  example_attempt integer NOT NULL,
  example_kernel  text NOT NULL,
  example_spec    bytea NOT NULL,          -- v1.ScenarioSpec
  example_violation bytea NOT NULL         -- v1.Violation (empty for crashes)
);
CREATE INDEX issues_last_seen ON issues (last_seen DESC);

CREATE TABLE issue_kernels (
  issue_id     bigint NOT NULL REFERENCES issues ON DELETE CASCADE,
  kernel_label text NOT NULL,
  count        bigint NOT NULL,
  first_seen   timestamptz NOT NULL,
  last_seen    timestamptz NOT NULL,
  PRIMARY KEY (issue_id, kernel_label)
);

CREATE TABLE issue_notes (
  id       bigserial PRIMARY KEY,
  issue_id bigint NOT NULL REFERENCES issues ON DELETE CASCADE,
  at       timestamptz NOT NULL,
  text     text NOT NULL
);
CREATE INDEX issue_notes_issue ON issue_notes (issue_id, id);

-- Latest measured reproduction rate per (issue, kernel).
CREATE TABLE issue_rates (
  issue_id     bigint NOT NULL REFERENCES issues ON DELETE CASCADE,
  kernel_label text NOT NULL,
  rate         bytea NOT NULL,             -- v1.ReproRate
  PRIMARY KEY (issue_id, kernel_label)
);

CREATE TABLE triage_actions (
  id         bigserial PRIMARY KEY,
  kind       integer NOT NULL,             -- v1.ActionKind
  issue_id   bigint NOT NULL,              -- 0: replay of an outcome with no issue yet
  state      integer NOT NULL,             -- v1.ActionState
  action     bytea NOT NULL,               -- v1.Action as last advanced
  machine    text NOT NULL,                -- the engine's private state (JSON)
  created_at timestamptz NOT NULL,
  updated_at timestamptz NOT NULL
);
CREATE INDEX triage_actions_running ON triage_actions (id) WHERE state = 1;
CREATE INDEX triage_actions_issue ON triage_actions (issue_id, id);
)sql";

// Built kernels carry patches, a build status and a log: the whole
// v1.Kernel goes into `details`; `status` is what campaigns and pages filter on.
const char* const kKernelDetails = R"sql(
ALTER TABLE kernels ADD COLUMN status text NOT NULL DEFAULT 'ready';
ALTER TABLE kernels ADD COLUMN details bytea;
)sql";

// Kernel build jobs (CampaignSpec.builds): a build job carries its
// v1.KernelBuild in `build` (scenario and fs are "kernel-build"; only builder
// leases take it); a test job on a label
// being built waits in state 'waiting' for its build job (`wait_build`), and
// once the kernel built needs an agent whose `uname -r` is `release`.
const char* const kKernelBuildJobs = R"sql(
ALTER TABLE jobs DROP CONSTRAINT jobs_state_check;
ALTER TABLE jobs ADD CONSTRAINT jobs_state_check
  CHECK (state IN ('queued', 'leased', 'done', 'waiting'));
ALTER TABLE jobs ADD COLUMN build bytea;          -- v1.KernelBuild, build jobs only
ALTER TABLE jobs ADD COLUMN wait_build bigint;    -- the build job a waiting job waits for
ALTER TABLE jobs ADD COLUMN release text;         -- required `uname -r`; NULL: any
CREATE INDEX jobs_build_queued ON jobs (id) WHERE state = 'queued' AND build IS NOT NULL;
CREATE INDEX jobs_waiting ON jobs (wait_build) WHERE state = 'waiting';
)sql";

// A report of an attempt the job had moved past is dropped, unless it found
// violations: then it is kept as an extra outcome of the job, marked
// `superseded`, and leaves the job as it was (its current attempt decides).
const char* const kSupersededOutcomes = R"sql(
ALTER TABLE outcomes ADD COLUMN superseded boolean NOT NULL DEFAULT false;
)sql";

// Summaries kept as outcomes arrive (store/pg_summaries.h): what the
// overview, campaign pages and counters read instead of every job and
// outcome. `cells` is written with the campaign; the verdict counts by every
// transaction that stores an outcome or ends a job, before it commits.
const char* const kSummariesSchema = R"sql(
CREATE TABLE cells (
  campaign_id  bigint NOT NULL REFERENCES campaigns ON DELETE CASCADE,
  scenario     text NOT NULL,
  kernel_label text NOT NULL,
  fs           text NOT NULL,
  jobs         integer NOT NULL,          -- jobs of the cell, all states
  PRIMARY KEY (campaign_id, scenario, kernel_label, fs)
);
CREATE TABLE cell_verdicts (
  campaign_id  bigint NOT NULL,
  scenario     text NOT NULL,
  kernel_label text NOT NULL,
  fs           text NOT NULL,
  verdict      integer NOT NULL,          -- v1.Verdict
  done         integer NOT NULL,          -- jobs done with this verdict
  outcomes     bigint NOT NULL,           -- outcomes stored with it (extras too)
  violations   bigint NOT NULL,           -- their violation_count, summed
  PRIMARY KEY (campaign_id, scenario, kernel_label, fs, verdict),
  FOREIGN KEY (campaign_id, scenario, kernel_label, fs) REFERENCES cells ON DELETE CASCADE
);
-- The same counts per campaign (the sum of its cells).
CREATE TABLE campaign_verdicts (
  campaign_id bigint NOT NULL REFERENCES campaigns ON DELETE CASCADE,
  verdict     integer NOT NULL,
  done        integer NOT NULL,
  outcomes    bigint NOT NULL,
  violations  bigint NOT NULL,
  PRIMARY KEY (campaign_id, verdict)
);
-- The jobs of running campaigns not done yet (queued, leased, waiting).
CREATE INDEX jobs_pending ON jobs (campaign_id, state) WHERE state <> 'done';

INSERT INTO cells
  SELECT campaign_id, scenario, kernel_label, fs, count(*) FROM jobs GROUP BY 1, 2, 3, 4;
)sql";

// Notifications (coordinator/notify/): subscriptions, the events stored once
// by key where their fact is committed, and the outbox of one delivery per
// (event, subscription), marked delivered only after the target took it.
const char* const kNotifySchema = R"sql(
CREATE TABLE subscriptions (
  id           bigserial PRIMARY KEY,
  name         text NOT NULL,
  subscription bytea NOT NULL,            -- v1.Subscription (filter and target)
  created_at   timestamptz NOT NULL
);
CREATE TABLE notify_events (
  id         bigserial PRIMARY KEY,
  key        text NOT NULL UNIQUE,        -- "issue-new:12": the fact, once
  kind       integer NOT NULL,            -- v1.EventKind
  event      bytea NOT NULL,              -- v1.Event without id and at
  created_at timestamptz NOT NULL
);
CREATE TABLE notify_outbox (
  event_id        bigint NOT NULL REFERENCES notify_events ON DELETE CASCADE,
  subscription_id bigint NOT NULL REFERENCES subscriptions ON DELETE CASCADE,
  state           text NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'delivered', 'failed')),
  attempts        integer NOT NULL DEFAULT 0,
  next_attempt    timestamptz NOT NULL,
  last_error      text NOT NULL DEFAULT '',
  delivered_at    timestamptz,
  PRIMARY KEY (event_id, subscription_id)
);
CREATE INDEX notify_outbox_due ON notify_outbox (next_attempt) WHERE state = 'pending';
CREATE INDEX notify_outbox_subscription ON notify_outbox (subscription_id);
-- Nightlies compared with the night before (one row each, nothing new or not).
CREATE TABLE notify_checked (
  campaign_id bigint PRIMARY KEY,
  checked_at  timestamptz NOT NULL
);
-- Campaigns up to first_campaign existed before notifications: never compared.
CREATE TABLE notify_state (
  id             integer PRIMARY KEY CHECK (id = 1),
  first_campaign bigint NOT NULL
);
INSERT INTO notify_state SELECT 1, coalesce(max(id), 0) FROM campaigns;
)sql";

// Agent secrets (agent_secret.h): the coordinator keeps the SHA-256 of each
// agent's latest secret, and each lease the key it was taken with, so that
// only its holder heartbeats, releases and reports on it. No default: the
// columns are added without rewriting the tables.
const char* const kAgentKeys = R"sql(
ALTER TABLE agents ADD COLUMN secret_sha256 text;  -- hex; NULL: registered before secrets
-- holders[n]: the first 128 bits of the key that leased attempt n, NULL for a
-- lease taken before keys existed or by a trusted caller (the agent id decides).
ALTER TABLE jobs ADD COLUMN holders uuid[];
)sql";

}  // namespace

// Retention (pg_retention.cc) looks at each outcome once, oldest first; a
// column added with a constant default rewrites nothing.
const char* const kRetention = R"sql(
ALTER TABLE outcomes ADD COLUMN trimmed boolean NOT NULL DEFAULT false;
CREATE INDEX outcomes_untrimmed ON outcomes (reported_at) WHERE NOT trimmed;
CREATE INDEX issues_example ON issues (example_job, example_attempt);
)sql";

// VM launchers (FailAgentJob): each registration's id and the key of its
// secret, and the agent names each claimed before booting the VM that
// registers under it. A launcher ends the jobs of those agents only.
const char* const kVmLaunchers = R"sql(
CREATE TABLE launchers (
  id            text PRIMARY KEY,         -- random uuid, handed to the launcher
  name          text NOT NULL,            -- for the log: host and pid
  kernel_label  text NOT NULL,            -- the kernel its VMs boot
  secret_sha256 text NOT NULL,            -- hex key of its secret
  registered_at timestamptz NOT NULL
);
CREATE TABLE launcher_claims (
  agent_name  text PRIMARY KEY,           -- lf.name= of the VMs it boots
  launcher_id text NOT NULL REFERENCES launchers ON DELETE CASCADE,
  claimed_at  timestamptz NOT NULL
);
)sql";

// lookup-scale runs as rows (pg_scale.h): one row per passing run, written
// with its outcome, and its points; backfilled from the outcomes stored
// before (their JSON, in the outcome bytea: done in C++, migration's `then`).
const char* const kScaleRuns = R"sql(
CREATE TABLE scale_runs (
  job_id       bigint NOT NULL,
  attempt      integer NOT NULL,
  campaign_id  bigint NOT NULL,
  kernel_label text NOT NULL,
  fs           text NOT NULL,
  seq          bigint NOT NULL,           -- the outcome's seq: report order
  reported_at  timestamptz NOT NULL,
  host         jsonb,                     -- its "scale_host"; NULL when it had none
  PRIMARY KEY (job_id, attempt),
  FOREIGN KEY (job_id, attempt) REFERENCES outcomes ON DELETE CASCADE
);
-- The latest runs of a kernel: the first rows of its range.
CREATE INDEX scale_runs_kernel ON scale_runs (kernel_label, seq DESC);
CREATE TABLE scale_points (
  job_id      bigint NOT NULL,
  attempt     integer NOT NULL,
  idx         integer NOT NULL,            -- position among the run's valid points
  testcase    text NOT NULL,
  mode        text NOT NULL,
  tasks       bigint NOT NULL,
  ops_per_sec float8 NOT NULL,
  samples     float8[] NOT NULL,           -- ops/s of each timed sample
  stddev      float8 NOT NULL,
  ci95_low    float8 NOT NULL,
  ci95_high   float8 NOT NULL,
  idle_pct    float8 NOT NULL,
  other_load  float8 NOT NULL,
  task_cpu_s  float8 NOT NULL,
  window_s    float8 NOT NULL,
  host_load   float8 NOT NULL,
  PRIMARY KEY (job_id, attempt, idx),
  FOREIGN KEY (job_id, attempt) REFERENCES scale_runs ON DELETE CASCADE
);
)sql";

// The outcome lists filter on the job's scenario and kernel (page_outcomes):
// with both, the jobs of that cell by index, not a scan of every job
// (docs/bench.md, the growth bench's plans).
const char* const kJobsByCell = R"sql(
CREATE INDEX jobs_scenario_kernel ON jobs (scenario, kernel_label);
)sql";

// Each outcome carries its job's scenario and kernel, so that the failed
// outcomes of one scenario or kernel are an index walk in report order, not
// a read of every failed outcome joined to its job (issue 23; docs/bench.md).
// A trigger fills them from the job on every insert, however the row comes
// (the report batch, a kernel build's outcome, COPY), so no writer can leave
// them out; jobs never change scenario or kernel.
const char* const kOutcomeCells = R"sql(
ALTER TABLE outcomes ADD COLUMN scenario text, ADD COLUMN kernel_label text;
UPDATE outcomes o SET scenario = j.scenario, kernel_label = j.kernel_label
  FROM jobs j WHERE j.id = o.job_id;
CREATE FUNCTION lf_outcome_cell() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  SELECT j.scenario, j.kernel_label INTO NEW.scenario, NEW.kernel_label
    FROM jobs j WHERE j.id = NEW.job_id;
  RETURN NEW;
END $$;
CREATE TRIGGER outcomes_cell BEFORE INSERT ON outcomes
  FOR EACH ROW EXECUTE FUNCTION lf_outcome_cell();
CREATE INDEX outcomes_scenario ON outcomes (scenario, seq);
CREATE INDEX outcomes_kernel ON outcomes (kernel_label, seq);
CREATE INDEX outcomes_failed_scenario ON outcomes (scenario, seq) WHERE verdict <> 1;
CREATE INDEX outcomes_failed_kernel ON outcomes (kernel_label, seq) WHERE verdict <> 1;
CREATE INDEX outcomes_failed_cell ON outcomes (kernel_label, scenario, seq) WHERE verdict <> 1;
)sql";

// A violation's typed detail (v1.ViolationDetail), kept once: detail is then
// '' (rows stored before keep the agent's JSON there, and detail_pb NULL).
const char* const kViolationDetail = R"sql(
ALTER TABLE violations ADD COLUMN detail_pb bytea;
)sql";

// Violation details kept once per outcome (v1.ViolationDetails), not per
// row: an outcome's violations share most of their walk, versions and
// history, and PostgreSQL compresses a value only over 2 KB, so one value
// per outcome is stored at a small part of the size of its rows' details.
// Rows stored before keep their detail_pb, which readers still take.
const char* const kViolationDetails = R"sql(
CREATE TABLE violation_details (
  job_id   bigint NOT NULL,
  attempt  integer NOT NULL,
  details  bytea COMPRESSION lz4 NOT NULL,  -- v1.ViolationDetails, by violations.idx
  PRIMARY KEY (job_id, attempt),
  FOREIGN KEY (job_id, attempt) REFERENCES outcomes ON DELETE CASCADE
);
)sql";

// Smaller indexes (issue 23's storage target; docs/bench.md, "Storage per
// outcome"). Every read of violations takes all the rows of one outcome
// (job_id, attempt) and orders them by idx itself: an index on the outcome's
// key alone serves them, and PostgreSQL keeps it deduplicated, one entry per
// outcome with the row ids of its 5-50 rows, where the primary key held one
// 36-byte entry per row. The outcome's rows are written once, by the
// transaction that inserts the outcome (ON CONFLICT DO NOTHING), so the key
// needs no unique index to stay unique. jobs_scenario_kernel (migration 12)
// served the outcome lists' filters until migration 13 put scenario and
// kernel on outcomes: no statement filters jobs by them since.
const char* const kCompactIndexes = R"sql(
CREATE INDEX violations_outcome ON violations (job_id, attempt);
ALTER TABLE violations DROP CONSTRAINT violations_pkey;
DROP INDEX jobs_scenario_kernel;
)sql";

// Outcome values deflated (pg_util.h pack_outcome): ~430 bytes of the
// ~600-byte outcome row are the value, which PostgreSQL never compresses in
// a row that small; deflated it is ~250. Values stored before are packed by
// pack_stored_outcomes, in C++ (the migration's `then`).
const char* const kPackedOutcomes = R"sql(
COMMENT ON COLUMN outcomes.outcome IS
  'v1.Outcome without its violations; deflated behind a 0x00 byte when smaller (pg_util.h)';
)sql";

int pack_stored_outcomes(pqxx::work& txn) {
  return rewrite_outcome_values(txn, [](const std::string& stored) -> std::optional<std::string> {
    if (stored.empty() || stored[0] == 0) return std::nullopt;  // empty, or packed already
    std::string p = pack_outcome(stored);
    if (p.size() >= stored.size()) return std::nullopt;
    return p;
  });
}

// The shape outcomes had before every part was typed, converted
// (pg_legacy.h): in C++, the migration's `then`. violations.detail stays,
// empty, for the coordinators before it; violations.kind keeps the kind's
// word (common/ktap/words.h), as it always had, not the enum's number.
const char* const kLegacyUpgraded = R"sql(
COMMENT ON COLUMN violations.detail IS
  'empty since migration 18 (the details are typed, in violation_details)';
)sql";

const char* const kWordsTyped = R"sql(
COMMENT ON COLUMN triage_actions.action IS
  'v1.Action as last advanced; bisect steps carry BisectStepVerdict since migration 19';
)sql";

const char* const kBuildTimes = R"sql(
COMMENT ON COLUMN kernels.details IS
  'v1.Kernel; its build time is a Duration (build_time) since migration 20';
)sql";

// A campaign's jobs in id order: its job pages are walks of this index
// (pg_statements.cc page_jobs).
const char* const kJobsByCampaign = R"sql(
CREATE INDEX jobs_campaign_id ON jobs (campaign_id, id);
DROP INDEX jobs_campaign;
)sql";

// The counts of a running job's latest heartbeat (v1.JobProgress), for the
// attempt that sent them: shown while the job runs, kept when it ends.
const char* const kJobProgress = R"sql(
ALTER TABLE jobs
  ADD COLUMN progress_attempt    integer,
  ADD COLUMN progress_operations bigint,
  ADD COLUMN progress_lookups    bigint,
  ADD COLUMN progress_violations bigint,
  ADD COLUMN progress_at         timestamptz;
COMMENT ON COLUMN jobs.progress_attempt IS
  'the attempt whose heartbeat sent the progress_* counts (v1.JobProgress)';
)sql";

const std::vector<Migration>& schema_migrations() {
  // Each version is applied once, in list order; a database made before
  // version 7 existed (with 8 and 9) gets 7 on its next start.
  static const std::vector<Migration> all = {
      {1, "agents, kernels, schedules, campaigns, jobs, outcomes, violations", kInitialSchema},
      {2, "triage: issues, notes, rates, actions", kTriageSchema},
      {3, "kernel build status and details", kKernelDetails},
      {4, "kernel build jobs, waiting jobs, required release", kKernelBuildJobs},
      {5, "superseded outcomes that carry violations", kSupersededOutcomes},
      {6, "summaries by verdict per campaign and per cell",
       std::string(kSummariesSchema) + "INSERT INTO cell_verdicts " + kRecountCellVerdicts +
           ";\nINSERT INTO campaign_verdicts " + kRecountCampaignVerdicts + ";\n"},
      {7, "agent secrets: the key of each agent and of each lease", kAgentKeys},
      {8, "notifications: subscriptions, events, outbox", kNotifySchema},
      {9, "retention: outcomes looked at by apply_retention", kRetention},
      {10, "vm launchers: their keys and the agent names they claim", kVmLaunchers},
      {11, "lookup-scale runs and points as rows, backfilled", kScaleRuns,
       [](pqxx::work& txn) { backfill_scale_runs(txn); }},
      {12, "jobs by scenario and kernel, for the outcome filters", kJobsByCell},
      {13, "outcomes carry their job's scenario and kernel, indexed", kOutcomeCells},
      {14, "violations: the typed detail", kViolationDetail},
      {15, "violation details kept once per outcome, compressed", kViolationDetails},
      {16, "violations indexed by outcome; jobs_scenario_kernel dropped", kCompactIndexes},
      {17, "outcome values deflated, the stored ones packed", kPackedOutcomes,
       [](pqxx::work& txn) { pack_stored_outcomes(txn); }},
      {18, "old outcome JSON, violation kinds and details typed", kLegacyUpgraded,
       [](pqxx::work& txn) {
         const LegacyUpgrade u = upgrade_legacy_rows(txn);
         spdlog::info("legacy_upgraded outcomes={} violations={} examples={}", u.outcomes,
                      u.violations, u.examples);
       }},
      {19, "bisect steps' verdicts, events' and subscriptions' issue kinds typed", kWordsTyped,
       [](pqxx::work& txn) {
         const WordUpgrade u = upgrade_stored_words(txn);
         spdlog::info("stored_words_typed bisects={} events={} subscriptions={}", u.bisects,
                      u.events, u.subscriptions);
       }},
      {20, "kernels' and build outcomes' build times as Durations", kBuildTimes,
       [](pqxx::work& txn) {
         const BuildTimeUpgrade u = upgrade_build_times(txn);
         spdlog::info("build_times_typed kernels={} outcomes={}", u.kernels, u.outcomes);
       }},
      {21, "jobs indexed by (campaign_id, id) for the campaign's job pages", kJobsByCampaign},
      {22, "jobs keep the counts of their latest heartbeat", kJobProgress},
  };
  return all;
}

int apply_migrations(pqxx::connection_base& conn) {
  const auto& all = schema_migrations();
  pqxx::work txn(conn, "migrate");
  // Held until commit: a second replica waits here, then finds nothing to do.
  txn.exec_params("SELECT pg_advisory_xact_lock($1)", kMigrationLock);
  txn.exec(
      "CREATE TABLE IF NOT EXISTS schema_migrations ("
      " version integer PRIMARY KEY,"
      " name text NOT NULL,"
      " applied_at timestamptz NOT NULL DEFAULT now())");
  std::set<int> applied;
  for (const auto& row : txn.exec("SELECT version FROM schema_migrations")) {
    applied.insert(row[0].as<int>());
  }
  if (!applied.empty() && *applied.rbegin() > all.back().version) {
    throw StoreError("the database schema is at version " + std::to_string(*applied.rbegin()) +
                         "; this coordinator knows versions up to " +
                         std::to_string(all.back().version) + ": upgrade the coordinator",
                     false);
  }
  int count = 0;
  for (const auto& m : all) {
    if (applied.count(m.version)) continue;
    txn.exec(m.sql);
    if (m.then) m.then(txn);
    txn.exec_params("INSERT INTO schema_migrations (version, name) VALUES ($1, $2)", m.version,
                    m.name);
    spdlog::info("schema_migrated version={} name=\"{}\"", m.version, m.name);
    ++count;
  }
  txn.commit();
  return count;
}

}  // namespace leapfrog::coord
