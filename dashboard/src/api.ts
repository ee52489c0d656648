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
  OutcomeRecord,
  ListCampaignsResponse as ListCampaigns,
  ListSchedulesResponse as ListSchedules,
  Schedule,
} from '../gen/leapfrog/v1/control';
export type { Action, Issue, IssueKernel, ListActionsResponse as ListActions, ListIssuesResponse as ListIssues, ReproRate } from '../gen/leapfrog/v1/triage';
export type { Event, ListSubscriptionsResponse as ListSubscriptions, Subscription } from '../gen/leapfrog/v1/notify';
export type {
  JobProgress,
  MutationTrace,
  Outcome,
  PossibleVersion,
  RaceStrategy,
  ScaleHost,
  ScalePoint,
  ScaleRun,
  ScenarioSpec,
  StepTrace,
  Violation,
  ViolationDetail,
} from '../gen/leapfrog/v1/common';
export type {
  AgentRow,
  AgentsPage,
  CampaignMatrix,
  CampaignPage,
  EventList,
  IssuePage,
  JobPage,
  KernelPage,
  OutcomesPage,
  Overview,
  PointChange,
  ScaleRunSummary,
  ScaleSummary,
  ScalingPage,
  ScalingRegression,
  ScalingRun,
} from '../gen/leapfrog/v1/http';

// An enum's name as people read it: "VERDICT_KERNEL_CRASH" -> "kernel-crash",
// "ISSUE_STATUS_NEW" -> "new", an UNSPECIFIED one ""; other text as it is.
const ENUM_PREFIXES = ['VERDICT_', 'JOB_STATE_', 'CAMPAIGN_STATE_', 'ISSUE_STATUS_', 'ACTION_KIND_', 'ISSUE_KIND_', 'ACTION_STATE_', 'EVENT_KIND_', 'SCALE_MODE_', 'CPU_PINNING_', 'ALIGNMENT_', 'NODE_KIND_', 'VIOLATION_KIND_', 'BISECT_STEP_', 'KERNEL_STATUS_', 'RUN_KILL_'];
export function enumText(v: string | undefined | null): string {
  if (!v) return '';
  const prefix = ENUM_PREFIXES.find((p) => v.startsWith(p));
  if (!prefix) return v;
  const rest = v.slice(prefix.length);
  return rest === 'UNSPECIFIED' ? '' : rest.toLowerCase().replace(/_/g, '-');
}

// A nanosecond count as the mapping prints a 64-bit integer ("1500"), as a
// number; 0 when unset. Run-relative times fit a double exactly.
export const ns = (v: string | undefined): number => (v ? Number(v) : 0);

// Seconds of a Duration as the mapping prints it ("1.5s"); 0 when unset.
export const seconds = (d: string | undefined): number => (d ? parseFloat(d) : 0);

export interface Counts {
  [what: string]: number;
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


// Issue statuses as the status picker and ?status= spell them (the server
// takes these or the enum's names).
export const ISSUE_STATUSES = ['new', 'triaged', 'fixed', 'invalid', 'duplicate', 'regression'];
