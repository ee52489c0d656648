// The dashboard's only way to the coordinator: the JSON API of docs/api.md.

const TOKEN_KEY = 'leapfrog.token';

export class ApiError extends Error {
  constructor(
    public status: number,
    message: string,
  ) {
    super(message);
  }
}

export function token(): string {
  return localStorage.getItem(TOKEN_KEY) ?? '';
}

export function setToken(t: string): void {
  if (t) localStorage.setItem(TOKEN_KEY, t);
  else localStorage.removeItem(TOKEN_KEY);
}

async function call<T>(method: string, path: string, body?: unknown, withToken = false): Promise<T> {
  const headers: Record<string, string> = {};
  if (method !== 'GET' || withToken) {
    if (method !== 'GET') headers['Content-Type'] = 'application/json';
    const t = token();
    if (t) headers['Authorization'] = `Bearer ${t}`;
  }
  const res = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  const data = await res.json().catch(() => ({ error: `HTTP ${res.status}` }));
  if (!res.ok) throw new ApiError(res.status, data.error ?? `HTTP ${res.status}`);
  return data as T;
}

export const get = <T>(path: string) => call<T>('GET', path);
export const post = <T>(path: string, body: unknown = {}) => call<T>('POST', path, body);
// Reads that need the token on any address (subscriptions hold URLs and addresses).
export const getWithToken = <T>(path: string) => call<T>('GET', path, undefined, true);
export const del = <T>(path: string) => call<T>('DELETE', path);

// A notification subscription (docs/notifications.md).
export interface Subscription {
  id: number;
  name: string;
  filter: { events: string[]; kernel: string; scenario: string; issue_kind: string; schedule_id: number };
  webhook?: string;
  email?: string[];
  created_at: string;
  delivered: number;
  pending: number;
  failed: number;
  last_error: string;
}

// One event of /api/notifications.
export interface NotifyEvent {
  id: number;
  key: string;
  kind: string;
  at: string;
  summary: string;
  link: string;
}

export interface Counts {
  [what: string]: number;
}

export interface Campaign {
  id: number;
  name: string;
  created_at: string;
  state: 'running' | 'done';
  jobs: number;
  by_state: Counts;
  by_verdict: Counts;
  violations: number;
  schedule_id: number;
  spec: CampaignSpec;
}

export interface CampaignSpec {
  name: string;
  scenarios: string[];
  kernels: string[];
  filesystems: string[];
  seeds: number;
  duration_s: number;
  params: Record<string, number>;
}

export interface Matrix {
  scenarios: string[];
  kernels: string[];
  filesystems: string[];
  cells: { scenario: string; kernel: string; fs: string; counts: Counts }[];
}

export interface Job {
  id: number;
  campaign_id: number;
  spec: { scenario: string; fs: string; seed: number; params: Record<string, number>; observers?: number; align?: string; pin?: string };
  kernel: string;
  state: string;
  attempt: number;
  agent_id: string;
  verdict: string;
  reason: string;
}

export interface Version {
  value: string;
  from: number | null;
  to: number | null;
  // Entries, mounts and "..": what the value leads to (file, dir, symlink, absent).
  node_kind?: string;
}

export interface HistoryOp {
  actor: number;
  role: string;
  op: string;
  object: string;
  value: string;
  invoke: number;
  complete: number;
  err: number;
  // Entries, mounts and "..": what `value` leads to (file, dir, symlink, absent).
  node_kind?: string;
}

export interface ViolationDetail {
  actor: number;
  op: string;
  path: string;
  invoke: number;
  complete: number;
  epsilon_ns: number;
  step: number;
  component: string;
  object: string;
  observed: string;
  expected: string;
  versions: Version[];
  steps: { step: number; component: string; object: string; versions: Version[] }[];
  history?: HistoryOp[];
}

export interface Violation {
  kind: string;
  actor: number;
  op: string;
  path: string;
  invoke_ns: number;
  complete_ns: number;
  step: number;
  component: string;
  object: string;
  observed: string;
  expected: string;
  detail: ViolationDetail | null;
}

export interface ScalePoint {
  test: string;
  mode: string;
  tasks: number;
  // Mean over the samples, summed over tasks.
  ops_per_sec: number;
  // The timed samples and their 95 % interval (absent from older runs).
  samples?: number[];
  n?: number;
  stddev?: number;
  ci95_low?: number;
  ci95_high?: number;
  idle_pct?: number;
  other_load?: number;
  // In a VM: CPUs busy on its host outside it (-1 unknown; absent before).
  host_load?: number;
}

// The machine a lookup-scale run measured on (Outcome JSON "scale_host").
export interface ScaleHost {
  cpus: number;
  sample_s: number;
  warmup_s: number;
  max_other_load: number;
  load_average: number;
  // In a VM, what its launcher said about the host (absent from older runs;
  // max_host_load -1 when not in a VM).
  max_host_load?: number;
  host_cpus?: number;
  vcpus?: number;
  vcpu_pinning?: string;
  warnings: string[];
}

// One summary side of a compared point.
export interface ScaleSummary {
  n: number;
  mean: number;
  stddev: number;
  ci95_low: number;
  ci95_high: number;
}

// A point of the second run against the first (Welch's t-test).
export interface ScaleChange {
  test: string;
  mode: string;
  tasks: number;
  // Over the boots' means (n: boots); each run's own samples in *_runs.
  before: ScaleSummary;
  after: ScaleSummary;
  before_runs?: ScaleRunSummary[];
  after_runs?: ScaleRunSummary[];
  change_pct: number;
  ci95_low_pct: number;
  ci95_high_pct: number;
  p_value: number | null;
  // p_value adjusted (Benjamini-Hochberg) over the comparison's judged points.
  p_adjusted: number|null;
  verdict: 'significant' | 'within noise' | 'too few samples' | 'loaded: not judged' | 'one run: not judged';
}

// One run of a compared set, by its own samples.
export interface ScaleRunSummary extends ScaleSummary {
  job_id: number;
  boot_id: string;
  loaded: boolean;
}

// How a run raced (Outcome.strategy): what the spec fixed, what the seed chose.
export interface Strategy {
  alignment: 'fuzzy' | 'free' | 'both' | string;
  observers: number;
  aligned_observers: number;
  free_observers: number;
  pinned: boolean;
  chosen_by_seed: string[];
  widening: string;
}

export interface Outcome {
  job_id: number;
  attempt: number;
  campaign_id: number;
  spec: Job['spec'];
  kernel: string;
  agent_id: string;
  reported_at: string;
  // An extra outcome: its attempt had been superseded, kept for its violations.
  superseded: boolean;
  verdict: string;
  error: string;
  ops: number;
  violation_count: number;
  violations_by_kind: Counts;
  ops_per_sec: number;
  elapsed_s: number;
  clock_source: string;
  epsilon_ns: number;
  console_tail: string;
  violations: Violation[];
  scale: ScalePoint[];
  strategy: Strategy | null;
  // The run's detail (Outcome.run; an old row's agent JSON).
  mutations: number;
  rounds: number;
  steps_checked: number;
  unjudged: number;
  over_budget: number;
  setup_s: number;
  timing: { mutator_mean_ns: number; observer_mean_ns: number; delay_span_ns: number; warmup_rounds: number };
  notes: string[];
}

export interface Agent {
  id: string;
  name: string;
  kernel: string;
  uname: string;
  host: string;
  vm: boolean;
  cpus: number;
  filesystems: string[];
  last_seen: string;
  online: boolean;
  current_job: Job | null;
}

export interface Schedule {
  id: number;
  name: string;
  cron: string;
  enabled: boolean;
  next_run: string | null;
  last_run: string | null;
  campaign: CampaignSpec;
}

export interface Rate {
  kernel: string;
  runs: number;
  reproduced: number;
  rate: number;
  lower: number;
  upper: number;
  other_failures: number;
  measured_at: string | null;
  action_id: number;
}

export interface Action {
  id: number;
  kind: 'replay' | 'minimize' | 'bisect';
  issue_id: number;
  state: 'running' | 'done' | 'failed';
  progress: string;
  error: string;
  created_at: string;
  updated_at: string;
  campaign_ids: number[];
  kernel: string;
  runs: number;
  kernels: string[];
  spec: Job['spec'];
  rate: Rate | null;
  bisect: {
    first_bad: string;
    last_good: string;
    rate: number;
    runs_per_step: number;
    skipped: string[];
    steps: { kernel: string; verdict: string; runs: number; reproduced: number; other_failures: number; campaign_id: number }[];
  } | null;
  minimize: {
    minimal_spec: Job['spec'] & Record<string, unknown>;
    tried: number;
    kept: number;
    has_c_reproducer: boolean;
    c_reproducer_error: string;
    log: string[];
  } | null;
}

export interface Issue {
  id: number;
  signature: string;
  title: string;
  kind: string;
  scenario: string;
  status: string;
  duplicate_of: number;
  first_seen: string;
  last_seen: string;
  count: number;
  kernels: { kernel: string; count: number; first_seen: string; last_seen: string }[];
  notes: { at: string; text: string }[];
  example: { job_id: number; attempt: number; kernel: string };
  example_violation: Violation | null;
  rates: Rate[];
  actions: Action[];
  fixed_at: string | null;
  regressions: number;
}

export const ISSUE_STATUSES = ['new', 'triaged', 'fixed', 'invalid', 'duplicate', 'regression'];

export interface KernelPatch {
  name: string;
  sha256: string;
  subject: string;
}

export interface Kernel {
  label: string;
  version: string;
  sha256: string;
  source: string;
  added_at: string | null;
  cmdline: string;
  status: 'ready' | 'build-failure' | string;
  patches: KernelPatch[];
  inputs_hash: string;
  release: string;
  build_seconds: number;
  build_log_tail: string;
  build_log_path: string;
}

// One page of a list: `next_page` (null when nothing follows) asks for the next.
export interface Paged {
  next_page: string | null;
}

// The first `pages` pages of the list at `path` (items under `key`), read in
// order, each of `limit` items (0: the server's default); `first` is the
// first answer (for fields beside the list), `next` set when more follow.
export async function getPages<T, B extends Paged = Paged>(
  path: string,
  key: string,
  pages: number,
  limit = 0,
): Promise<{ items: T[]; next: string | null; first: B }> {
  let items: T[] = [];
  let next: string | null = null;
  let first: B | undefined;
  for (let i = 0; i < pages && (i === 0 || next); i++) {
    const q = new URLSearchParams();
    if (limit) q.set('limit', String(limit));
    if (next) q.set('page', next);
    const body: B = await get<B>(`${path}${q.toString() ? `?${q}` : ''}`);
    first ??= body;
    items = items.concat((body as unknown as Record<string, T[]>)[key]);
    next = body.next_page;
  }
  return { items, next, first: first as B };
}

// GET /api/kernels/{label}: the first page of its outcomes and issues.
export interface KernelDetail {
  kernel: Kernel;
  build_log: { path: string; readable: boolean; size: number; truncated: boolean; text: string; error: string } | null;
  outcomes: { job_id: number; attempt: number; campaign_id: number; scenario: string; fs: string; seed: number; verdict: string; violation_count: number; error: string; reported_at: string }[];
  outcomes_next_page: string | null;
  issues: { id: number; title: string; kind: string; scenario: string; count: number; first_seen: string; last_seen: string }[];
  issues_next_page: string | null;
}

// The `kernels` map of finding views: null for a label no kernel was registered under.
export type KernelsByLabel = Record<string, Kernel | null>;
