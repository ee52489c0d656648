// The dashboard's only way to the coordinator: the JSON API of docs/api.md.
// The answers' types are generated from proto/leapfrog/v1/*.proto into gen/
// (scripts/gen-api.mjs) and describe protobuf's JSON mapping as the
// coordinator prints it: .proto field names, 64-bit integers as strings,
// enums by name, times as RFC 3339 strings, unset messages absent.

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

export type {
  AgentInfo,
  Campaign,
  CampaignSpec,
  JobInfo,
  Kernel,
  KernelPatch,
  ListCampaignsResponse as ListCampaigns,
  ListSchedulesResponse as ListSchedules,
  Schedule,
} from '../gen/leapfrog/v1/control';
export type { Action, Issue, IssueKernel, ListActionsResponse as ListActions, ListIssuesResponse as ListIssues, ReproRate } from '../gen/leapfrog/v1/triage';
export type { Event, ListSubscriptionsResponse as ListSubscriptions, Subscription } from '../gen/leapfrog/v1/notify';
export type { ScaleHost, ScalePoint, ScaleRun, ScenarioSpec } from '../gen/leapfrog/v1/common';
export type {
  AgentRow,
  AgentsPage,
  CampaignMatrix,
  CampaignPage,
  EventList,
  KernelPage,
  Overview,
  PointChange,
  ScaleRunSummary,
  ScaleSummary,
  ScalingPage,
  ScalingRegression,
  ScalingRun,
} from '../gen/leapfrog/v1/http';
import type { Kernel } from '../gen/leapfrog/v1/control';

// An enum's name as people read it: "VERDICT_KERNEL_CRASH" -> "kernel-crash",
// "ISSUE_STATUS_NEW" -> "new", an UNSPECIFIED one ""; other text as it is.
const ENUM_PREFIXES = ['VERDICT_', 'JOB_STATE_', 'CAMPAIGN_STATE_', 'ISSUE_STATUS_', 'ACTION_KIND_', 'ACTION_STATE_', 'EVENT_KIND_', 'SCALE_MODE_', 'CPU_PINNING_', 'ALIGNMENT_', 'NODE_KIND_', 'VIOLATION_KIND_'];
export function enumText(v: string | undefined | null): string {
  if (!v) return '';
  const prefix = ENUM_PREFIXES.find((p) => v.startsWith(p));
  if (!prefix) return v;
  const rest = v.slice(prefix.length);
  return rest === 'UNSPECIFIED' ? '' : rest.toLowerCase().replace(/_/g, '-');
}

// Seconds of a Duration as the mapping prints it ("1.5s"); 0 when unset.
export const seconds = (d: string | undefined): number => (d ? parseFloat(d) : 0);

export interface Counts {
  [what: string]: number;
}

// The old JSON shape of a scenario spec, as the outcome routes (still
// hand-written: /api/jobs outcomes, /api/outcomes, an issue's example) print it.
export interface LegacySpec {
  scenario: string;
  fs: string;
  seed: number;
  params: Record<string, number>;
  observers?: number;
  align?: string;
  pin?: string;
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

export interface LegacyScalePoint {
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
  spec: LegacySpec;
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
  scale: LegacyScalePoint[];
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

// One page of a list: `next_page_token` ("" when nothing follows) asks for the next.
export interface Paged {
  next_page_token: string;
}

// The first `pages` pages of the list at `path` (items under `key`), read in
// order, each of `limit` items (0: the server's default); `first` is the
// first answer (for fields beside the list), `next` set when more follow.
export async function getPages<T, B extends Paged = Paged>(
  path: string,
  key: string,
  pages: number,
  limit = 0,
): Promise<{ items: T[]; next: string; first: B }> {
  let items: T[] = [];
  let next = '';
  let first: B | undefined;
  for (let i = 0; i < pages && (i === 0 || next); i++) {
    const q = new URLSearchParams();
    if (limit) q.set('limit', String(limit));
    if (next) q.set('page', next);
    const body: B = await get<B>(`${path}${q.toString() ? `?${q}` : ''}`);
    first ??= body;
    items = items.concat((body as unknown as Record<string, T[]>)[key]);
    next = body.next_page_token;
  }
  return { items, next, first: first as B };
}

// The `kernels` map of finding views: null for a label no kernel was registered under.
export type KernelsByLabel = Record<string, Kernel | null>;

// Issue statuses as the status picker and ?status= spell them (the server
// takes these or the enum's names).
export const ISSUE_STATUSES = ['new', 'triaged', 'fixed', 'invalid', 'duplicate', 'regression'];
