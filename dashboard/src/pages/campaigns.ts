import { enumText, get, type CampaignPage, type JobInfo, type JobPage, type ListCampaigns } from '../api';
import { ago, h, link, table, verdictBadge, when } from '../dom';
import type { Page } from '../router';
import { matrixTable, progress, warningList } from './overview';
import { kernelCard, kernelHref } from './kernels';
import { outcomeView } from './outcome_view';

export const campaignsPage: Page = async (root) => {
  const body = h('div', {});
  root.append(h('h1', {}, 'Campaigns'), body);
  const refresh = async () => {
    const { campaigns } = await get<ListCampaigns>('/api/campaigns?limit=100');
    body.replaceChildren(
      table(
        ['id', 'name', 'created', 'schedule', 'progress', 'verdicts', 'violations'],
        campaigns.map((c) => [
          link(`#/campaigns/${c.id}`, `#${c.id}`),
          c.spec?.name ?? '',
          `${when(c.created_at)} (${ago(c.created_at)})`,
          c.schedule_id !== '0' ? `#${c.schedule_id}` : 'by hand',
          progress(c),
          Object.entries(c.by_verdict)
            .map(([k, n]) => `${k} ${n}`)
            .join(', '),
          c.violations,
        ]),
        { id: 'campaigns' },
      ),
    );
  };
  await refresh();
  const timer = setInterval(() => refresh().catch(() => undefined), 3000);
  return () => clearInterval(timer);
};

export const campaignPage: Page = async (root, [id], query) => {
  const head = h('div', {});
  const matrix = h('div', {});
  const jobs = h('div', {});
  root.append(h('h1', {}, `Campaign #${id}`), head, h('h2', {}, 'Matrix'), matrix, h('h2', {}, 'Jobs'), jobs);
  // Page by page (a nightly has thousands of jobs): "More jobs" reads one
  // page more on every refresh.
  const limit = Number(query.get('limit')) || 200;
  let pages = 1;
  const refresh = async () => {
    const d = await get<CampaignPage>(`/api/campaigns/${id}?limit=${limit}`);
    let shown = d.jobs;
    let next = d.jobs_next_page_token;
    for (let i = 1; i < pages && next; i++) {
      const more = await get<CampaignPage>(`/api/campaigns/${id}?limit=${limit}&page=${encodeURIComponent(next)}`);
      shown = shown.concat(more.jobs);
      next = more.jobs_next_page_token;
    }
    const c = d.campaign!;
    head.replaceChildren(
      h('p', {}, `${c.spec?.name ?? ''}, created ${when(c.created_at)}, ${enumText(c.state)}; `, c.schedule_id !== '0' ? `schedule #${c.schedule_id}` : 'made by hand'),
      progress(c),
      // Queued jobs that no agent can run: say why, or the campaign just looks slow.
      ...warningList(c.warnings),
    );
    matrix.replaceChildren(d.matrix ? matrixTable(d.matrix, c.id) : h('p', {}, '—'));
    jobs.replaceChildren(
      table(
        ['job', 'scenario', 'fs', 'kernel', 'seed', 'state', 'attempt', 'verdict', 'reason'],
        shown.map((j) => [
          link(`#/jobs/${j.job_id}`, `#${j.job_id}`),
          j.spec?.scenario ?? '',
          j.spec?.fs ?? '',
          j.kernel_label,
          j.spec?.seed ?? '',
          enumText(j.state),
          j.attempt,
          verdictBadge(j.verdict),
          j.reason,
        ]),
        { id: 'jobs' },
      ),
      // A page of the jobs: say so rather than look complete.
      ...(next
        ? [
            h('p', { class: 'muted', id: 'jobs-shown' }, `The first ${shown.length} of ${c.jobs} jobs; the matrix counts them all.`),
            h('button', { id: 'jobs-more', onclick: () => { pages++; refresh().catch(() => undefined); } }, 'More jobs'),
          ]
        : []),
    );
    return c.state;
  };
  let state = await refresh();
  const timer = setInterval(async () => {
    if (state === 'CAMPAIGN_STATE_RUNNING') state = await refresh().catch(() => state);
  }, 3000);
  return () => clearInterval(timer);
};

// A running job's counts from its latest heartbeat, and how long they have
// not moved (`since`: when the page first saw them as they are), so that a
// stuck job shows.
function progressLine(j: JobInfo, since: number, now = Date.now()): HTMLElement {
  const p = j.progress;
  if (!p) return h('p', { class: 'muted', id: 'job-progress' }, j.state === 'JOB_STATE_LEASED' ? 'No progress reported yet.' : '');
  const still = Math.round((now - since) / 1000);
  const stuck = j.state === 'JOB_STATE_LEASED' && still >= 30;
  return h(
    'p',
    { id: 'job-progress', class: stuck ? 'warnings' : '', 'data-operations': p.operations, 'data-lookups': p.lookups_judged, 'data-violations': p.violations },
    h('b', {}, j.state === 'JOB_STATE_LEASED' ? 'running: ' : 'last progress: '),
    `${p.operations} operations, ${p.lookups_judged} lookups judged, ${p.violations} violations (heartbeat ${ago(p.updated_at ?? null, now)})`,
    stuck ? `; no change for ${still} s` : '',
  );
}

export const jobPage: Page = async (root, [id]) => {
  const d = await get<JobPage>(`/api/jobs/${id}`);
  const j = d.job!;
  const countsOf = (x: JobInfo) => `${x.progress?.operations}/${x.progress?.lookups_judged}/${x.progress?.violations}`;
  let counts = countsOf(j);
  let since = Date.now();
  const live = progressLine(j, since);
  root.append(
    h('h1', {}, `Job #${j.job_id}`),
    h(
      'p',
      {},
      `${j.spec?.scenario} on ${j.spec?.fs}, kernel `,
      d.kernels[j.kernel_label] ? link(kernelHref(j.kernel_label), j.kernel_label) : j.kernel_label,
      `, seed ${j.spec?.seed}; campaign `,
      link(`#/campaigns/${j.campaign_id}`, `#${j.campaign_id}`),
      `; ${enumText(j.state)}, attempt ${j.attempt} `,
      verdictBadge(j.verdict),
    ),
    live,
    h('div', { id: 'job-kernel' }, kernelCard(j.kernel_label, d.kernels[j.kernel_label] ?? null)),
  );
  const cleanups: (() => void)[] = [];
  // While the job runs, its counts move with each heartbeat.
  let state = j.state;
  const timer = setInterval(async () => {
    if (state === 'JOB_STATE_DONE') return;
    const now = await get<JobPage>(`/api/jobs/${id}`).catch(() => null);
    if (!now?.job) return;
    state = now.job.state;
    if (countsOf(now.job) !== counts) {
      counts = countsOf(now.job);
      since = Date.now();
    }
    root.querySelector('#job-progress')?.replaceWith(progressLine(now.job, since));
  }, 3000);
  cleanups.push(() => clearInterval(timer));
  if (!d.outcomes.length) root.append(h('p', {}, 'No outcome yet.'));
  for (const o of d.outcomes) {
    const view = outcomeView(o);
    root.append(view.element);
    cleanups.push(view.dispose);
  }
  return () => cleanups.forEach((f) => f());
};
