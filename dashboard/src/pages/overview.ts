import { get, type Campaign, type CampaignMatrix, type Counts, type Overview, type ScalingRegression } from '../api';
import { chartIn, verdictColors } from '../charts';
import { h, link, when } from '../dom';
import type { Page } from '../router';

function scalingFlags(rs: ScalingRegression[]): HTMLElement[] {
  if (!rs.length) return [];
  return [
    h(
      'ul',
      { id: 'scaling-regressions', class: 'warnings' },
      ...rs.map((r) => {
        const worst = r.drops.reduce((a, b) => ((b.change_pct ?? 0) < (a.change_pct ?? 0) ? b : a));
        return h(
          'li',
          { 'data-kernel': r.kernel_label },
          `Scaling regression on ${r.kernel_label}: ${r.drops.length} point${r.drops.length > 1 ? 's' : ''} significantly slower than the campaign before (${r.after_runs || 1} runs against ${r.before_runs || 1}), worst ${worst.test} ${worst.mode} ${worst.tasks} tasks ${(worst.change_pct ?? 0).toFixed(1)} % — `,
          link(`#/campaigns/${r.after_campaign_id}`, `campaign #${r.after_campaign_id}`),
          ', ',
          link(`#/scaling?kernel=${encodeURIComponent(r.kernel_label)}`, 'scaling'),
        );
      }),
    ),
  ];
}

const FAILURES = ['violation', 'kernel-crash', 'hang', 'boot-failure', 'error', 'infra-failure', 'inconclusive'];
const ORDER = ['pass', ...FAILURES, 'leased', 'queued'];

// The cell's worst state, which colours it.
function worst(c: Counts): string {
  for (const k of [...FAILURES, 'leased', 'queued', 'pass']) if (c[k]) return k;
  return 'none';
}

function cellText(c: Counts): HTMLElement {
  return h('div', {}, ...ORDER.filter((k) => c[k]).map((k) => h('div', { class: 'count' }, `${k} ${c[k]}`)));
}

export function matrixTable(m: CampaignMatrix, campaignId: string): HTMLElement {
  const cols: [string, string][] = [];
  for (const k of m.kernels) for (const fs of m.filesystems) cols.push([k, fs]);
  const cells = new Map(m.cells.map((c) => [`${c.scenario}|${c.kernel_label}|${c.fs}`, c.counts]));
  return h(
    'table',
    { class: 'matrix' },
    h('thead', {}, h('tr', {}, h('th', {}, 'scenario'), ...cols.map(([k, fs]) => h('th', {}, `${k} / ${fs}`)))),
    h(
      'tbody',
      {},
      ...m.scenarios.map((s) =>
        h(
          'tr',
          {},
          h('th', {}, s),
          ...cols.map(([k, fs]) => {
            const c = cells.get(`${s}|${k}|${fs}`);
            if (!c) return h('td', { class: 'cell empty' }, '');
            return h(
              'td',
              { class: `cell c-${worst(c)}`, 'data-scenario': s, 'data-kernel': k, 'data-fs': fs, 'data-state': worst(c) },
              h('a', { href: `#/campaigns/${campaignId}` }, cellText(c)),
            );
          }),
        ),
      ),
    ),
  );
}

export const overviewPage: Page = async (root) => {
  const head = h('div', {});
  const matrix = h('div', {});
  const running = h('div', {});
  const trendBox = h('div', { class: 'chart', id: 'trend-chart' });
  root.append(
    h('h1', {}, 'Overview'),
    head,
    h('div', { class: 'two' }, h('section', {}, h('h2', {}, 'Matrix'), matrix), h('section', {}, h('h2', {}, 'Trend'), trendBox)),
    h('h2', {}, 'Running'),
    running,
  );
  const chart = chartIn(trendBox);
  const refresh = async () => {
    const o = await get<Overview>('/api/overview');
    const c = o.campaign;
    if (!c) {
      head.replaceChildren(h('p', { class: 'big' }, 'No campaign has run yet.'));
    } else {
      const bad = FAILURES.reduce((n, k) => n + (c.by_verdict[k] ?? 0), 0);
      head.replaceChildren(
        h(
          'p',
          { class: `big ${bad ? 'bad' : 'good'}`, id: 'verdict-summary' },
          bad ? `${bad} failing job${bad > 1 ? 's' : ''}` : c.state === 'CAMPAIGN_STATE_DONE' ? 'Clean' : 'Running, clean so far',
          ' — ',
          o.scheduled ? 'last nightly ' : 'latest campaign (no schedule has run) ',
          link(`#/campaigns/${c.id}`, `#${c.id} ${c.spec?.name ?? ''}`),
          `, ${when(c.created_at)}, ${c.by_state.done ?? 0}/${c.jobs} jobs done`,
        ),
        ...warningList(c.warnings),
        ...scalingFlags(o.scaling_regressions),
      );
    }
    matrix.replaceChildren(o.matrix && c ? matrixTable(o.matrix, c.id) : h('p', {}, '—'));
    running.replaceChildren(
      o.running.length
        ? h('div', {}, ...o.running.map((r) => progress(r)))
        : h('p', {}, 'No campaign is running.'),
    );
    const kinds = ORDER.filter((k) => k !== 'leased' && k !== 'queued');
    chart.setOption({
      animation: false,
      tooltip: { trigger: 'axis' },
      legend: { top: 0 },
      grid: { left: 40, right: 10, top: 40, bottom: 30 },
      xAxis: { type: 'category', data: o.trend.map((t) => `#${t.id} ${(t.created_at ?? '').slice(5, 10)}`) },
      yAxis: { type: 'value', name: 'jobs' },
      series: kinds.map((k) => ({
        name: k,
        type: 'bar',
        stack: 'jobs',
        color: verdictColors[k],
        data: o.trend.map((t) => t.by_verdict[k] ?? 0),
      })),
    });
  };
  await refresh();
  const timer = setInterval(() => refresh().catch(() => undefined), 3000);
  return () => {
    clearInterval(timer);
    chart.dispose();
  };
};

// Why a campaign's queued jobs have no agent to run them (the API's
// `warnings`): a list, or nothing when there is none.
export function warningList(warnings: string[]): HTMLElement[] {
  return warnings.length ? [h('ul', { id: 'campaign-warnings', class: 'warnings' }, ...warnings.map((w) => h('li', {}, w)))] : [];
}

export function progress(c: Campaign): HTMLElement {
  const done = c.by_state.done ?? 0;
  const pct = c.jobs ? Math.round((100 * done) / c.jobs) : 100;
  return h(
    'div',
    { class: 'progress-row', 'data-campaign': c.id },
    link(`#/campaigns/${c.id}`, `#${c.id} ${c.spec?.name ?? ''}`),
    h('div', { class: 'progress' }, h('div', { class: 'bar', style: `width:${pct}%` })),
    `${done}/${c.jobs} done, ${c.by_state.leased ?? 0} running, ${c.by_state.queued ?? 0} queued`,
  );
}
