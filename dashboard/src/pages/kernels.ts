// Kernels: the registered kernels with their build status, one kernel's patch
// series, build record and log, and the card that finding views show for the
// kernel a finding was made on.
import { enumText, get, getPages, seconds, type Kernel, type KernelPage, type OutcomesPage } from '../api';
import { h, link, table, verdictBadge, when } from '../dom';
import type { Page } from '../router';

export const kernelHref = (label: string) => `#/kernels/${encodeURIComponent(label)}`;

// "ready" or "build-failure" (a kernel registered before builds had no status: ready).
export const kernelStatus = (k: Kernel): string => enumText(k.status) || 'ready';

export function kernelStatusBadge(k: Kernel): HTMLElement {
  return h('span', { class: `badge k-${kernelStatus(k)}`, 'data-status': kernelStatus(k) }, kernelStatus(k));
}

// "4 min 12 s"; a build from the cache took 0 s; a plain image was never built here.
function buildTime(k: Kernel): string {
  const took = seconds(k.build_time);
  if (!k.inputs_hash && !took) return kernelStatus(k) === 'build-failure' ? '—' : 'not built here';
  if (!took) return kernelStatus(k) === 'build-failure' ? '—' : 'from the build cache';
  const s = Math.round(took);
  return s < 60 ? `${took.toFixed(1)} s` : `${Math.floor(s / 60)} min ${s % 60} s`;
}

// A build log as text, lines that say what went wrong marked so the eye lands on them.
const problem = /error:|\*\*\*|FAILED|Hunk #|failed|does not apply|No such file/;
function logView(text: string, id?: string, tail = false): HTMLElement {
  const pre = h('pre', { class: `log${tail ? ' tail' : ''}`, id });
  for (const line of text.replace(/\n$/, '').split('\n')) pre.append(problem.test(line) ? h('span', { class: 'log-problem' }, line) : line, '\n');
  return pre;
}

const short = (sha: string) => (sha ? sha.slice(0, 12) : '—');

function patchTable(k: Kernel, id?: string): HTMLElement {
  if (!k.patches.length) return h('p', { class: 'muted' }, 'No patches: the source as it is.');
  const t = table(
    ['#', 'patch', 'subject', 'sha256'],
    k.patches.map((p, i) => [i + 1, h('span', { class: 'patch-name' }, p.name), p.subject ? h('span', { class: 'patch-subject' }, p.subject) : h('span', { class: 'muted' }, 'no Subject: header'), h('code', { title: p.sha256 }, short(p.sha256))]),
    { class: 'patches', id },
  );
  return t;
}

// The kernel a finding was made on, with its patch series; `k` null when no
// kernel of that label is registered (e.g. the host's own kernel).
export function kernelCard(label: string, k: Kernel | null): HTMLElement {
  if (!k)
    return h(
      'div',
      { class: 'kernel-card', 'data-kernel': label, 'data-registered': 'false' },
      h('b', {}, `kernel ${label}`),
      h('span', { class: 'muted' }, ' — not a registered kernel, so no build record or patch series'),
    );
  return h(
    'div',
    { class: `kernel-card k-${kernelStatus(k)}`, 'data-kernel': label, 'data-registered': 'true' },
    h('div', { class: 'kernel-card-head' }, h('b', {}, 'kernel '), link(kernelHref(label), label), ' ', kernelStatusBadge(k), k.release ? h('span', { class: 'muted' }, ` ${k.release}`) : '', k.cmdline ? h('span', { class: 'muted' }, ` · cmdline ${k.cmdline}`) : ''),
    k.patches.length ? h('div', { class: 'muted' }, `patch series (${k.patches.length}):`) : '',
    patchTable(k),
  );
}

export const kernelsPage: Page = async (root, _p, query) => {
  // Page by page: "More kernels" reads one page more.
  const limit = Number(query.get('limit')) || 0;
  const body = h('div', {});
  root.append(h('h1', {}, 'Kernels'), body);
  let pages = 1;
  const render = async () => {
    const { items: kernels, next } = await getPages<Kernel>('/api/kernels', 'kernels', pages, limit);
    body.replaceChildren(...kernelList(kernels, next !== ''), ...(next ? [h('button', { id: 'kernels-more', onclick: () => { pages++; render().catch(() => undefined); } }, 'More kernels')] : []));
  };
  await render();
};

function kernelList(kernels: Kernel[], more: boolean): HTMLElement[] {
  const failed = kernels.filter((k) => kernelStatus(k) === 'build-failure').length;
  return [
    h('p', {}, `${kernels.length}${more ? ' shown' : ' registered'}, ${failed} failed to build. Register with `, h('code', {}, 'leapfrog kernel add'), ' or build with ', h('code', {}, 'leapfrog kernel build LABEL --source DIR --patch F…')),
    kernels.length
      ? table(
          ['kernel', 'status', 'release', 'patches', 'build time', 'source', 'added'],
          kernels.map((k) => [
            link(kernelHref(k.label), k.label),
            kernelStatusBadge(k),
            k.release || (kernelStatus(k) === 'ready' ? k.version.split(' ')[0] : '') || '—',
            h('span', { class: 'num' }, k.patches.length),
            buildTime(k),
            h('span', { class: 'source' }, k.source || '—'),
            when(k.added_at),
          ]),
          { id: 'kernels', class: 'kernels' },
        )
      : h('p', {}, 'No kernel registered yet.'),
  ];
}

export const kernelPage: Page = async (root, [raw], query) => {
  const label = decodeURIComponent(raw);
  // Outcomes a page: ?limit= of the page's URL, else the server's default (50).
  const limit = Number(query.get('limit')) || 0;
  const d = await get<KernelPage>(`/api/kernels/${encodeURIComponent(label)}${limit ? `?limit=${limit}` : ''}`);
  const k = d.kernel!;
  const outcomes = h('div', {});
  const facts: [string, Node | string][] = [
    ['status', kernelStatusBadge(k)],
    ['release', k.release || '—'],
    kernelStatus(k) === 'build-failure' ? ['failure', h('span', { class: 'error-text' }, k.version || '—')] : ['version', k.version || '—'],
    ['boot cmdline', k.cmdline ? h('code', {}, k.cmdline) : '—'],
    ['source', k.source || '—'],
    ['build time', buildTime(k)],
    ['image sha256', k.sha256 ? h('code', { title: k.sha256 }, short(k.sha256)) : '—'],
    ['inputs hash', k.inputs_hash ? h('code', { title: k.inputs_hash }, short(k.inputs_hash)) : '—'],
    ['build log', k.build_log_path ? h('code', {}, k.build_log_path) : '—'],
    ['added', when(k.added_at)],
  ];
  root.append(
    h('h1', {}, `Kernel ${k.label} `, kernelStatusBadge(k)),
    h('table', { class: 'facts', id: 'kernel-facts' }, h('tbody', {}, ...facts.map(([name, v]) => h('tr', {}, h('th', {}, name), h('td', {}, v))))),
    h('h2', {}, `Patch series (${k.patches.length})`),
    patchTable(k, 'patches'),
  );
  if (kernelStatus(k) === 'build-failure') {
    root.append(
      h('h2', {}, 'Why the build failed'),
      h('p', { class: 'error-text', id: 'build-failure-reason' }, k.version || 'the build failed', k.build_log_tail ? ' — the end of the build log:' : ''),
      k.build_log_tail ? logView(k.build_log_tail, 'build-log-tail', true) : h('p', { class: 'muted' }, 'The build left no log.'),
    );
  }
  const log = d.build_log;
  if (log) {
    const summary = log.readable ? `Whole build log (${(Number(log.size) / 1024).toFixed(1)} KiB${log.truncated ? ', last 256 KiB shown' : ''})` : 'Whole build log: not readable here';
    root.append(
      h(
        'details',
        { class: 'build-log', id: 'build-log' },
        h('summary', {}, summary),
        log.readable ? logView(log.text) : h('p', { class: 'muted' }, log.error),
      ),
    );
  }
  root.append(
    h('h2', {}, 'Issues found on it'),
    d.issues.length
      ? table(
          ['issue', 'kind', 'scenario', 'title', 'count here', 'last seen'],
          d.issues.map(({ issue: i, on_kernel: here }) => [link(`#/issues/${i!.id}`, `#${i!.id}`), enumText(i!.kind), i!.scenario, link(`#/issues/${i!.id}`, i!.title), here?.count ?? '0', when(here?.last_seen)]),
          { id: 'kernel-issues' },
        )
      : h('p', { class: 'muted' }, 'None.'),
    ...(d.issues_next_page_token ? [link(`#/issues?kernel=${encodeURIComponent(label)}`, 'All issues found on it')] : []),
    h('h2', {}, 'Recent outcomes on it'),
    outcomes,
  );
  // Page by page: "More outcomes" asks for the next page of this kernel's.
  // Rows of this page (KernelOutcome), and of the outcome list's next pages (OutcomeRecord).
  type Row = { job_id: string; campaign_id: string; scenario: string; fs: string; seed: string; verdict: string; violation_count: string | number; reported_at?: string };
  let rows: Row[] = d.outcomes.map((o) => ({ ...o, scenario: o.spec?.scenario ?? '', fs: o.spec?.fs ?? '', seed: o.spec?.seed ?? '' }));
  let next = d.outcomes_next_page_token;
  const render = () =>
    outcomes.replaceChildren(
      rows.length
        ? table(
            ['job', 'campaign', 'scenario', 'fs', 'seed', 'verdict', 'violations', 'reported'],
            rows.map((o) => [link(`#/jobs/${o.job_id}`, `#${o.job_id}`), link(`#/campaigns/${o.campaign_id}`, `#${o.campaign_id}`), o.scenario, o.fs, o.seed, verdictBadge(o.verdict), o.violation_count, when(o.reported_at)]),
            { id: 'kernel-outcomes' },
          )
        : h('p', { class: 'muted' }, kernelStatus(k) === 'build-failure' ? 'None: campaigns cannot run on a kernel that did not build.' : 'None yet.'),
      ...(next
        ? [h('button', {
            id: 'kernel-outcomes-more',
            onclick: async () => {
              // The same list and order as the kernel's own: its token goes on.
              const q = new URLSearchParams({ kernel: label, limit: String(limit || 50), page: next ?? '' });
              const more = await get<OutcomesPage>(`/api/outcomes?${q}`);
              rows = rows.concat(
                more.outcomes.map((o) => ({
                  job_id: o.job_id,
                  campaign_id: o.campaign_id,
                  scenario: o.spec?.scenario ?? '',
                  fs: o.spec?.fs ?? '',
                  seed: o.spec?.seed ?? '',
                  verdict: o.outcome?.verdict ?? '',
                  violation_count: o.outcome?.violation_count ?? '0',
                  reported_at: o.reported_at,
                })),
              );
              next = more.next_page_token;
              render();
            },
          }, 'More outcomes')]
        : []),
    );
  render();
};
