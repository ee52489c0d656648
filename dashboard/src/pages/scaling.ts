import { enumText, get, seconds, type PointChange, type ScalePoint, type ScaleSummary, type ScalingPage, type ScalingRun } from '../api';
import { chartIn } from '../charts';
import { h, latestOnly, table, when } from '../dom';
import type { Page } from '../router';

// A run's points with their mode as people read it ("processes").
const pointsOf = (r: ScalingRun) => (r.run?.points ?? []).map((p: ScalePoint) => ({ ...p, mode: enumText(p.mode), n: p.samples.length }));

const palette = ['#5470c6', '#ee6666', '#3a9d5d', '#c77d00'];

const pct = (x: number | undefined) => x === undefined ? '—' :  `${x >= 0 ? '+' : ''}${x.toFixed(1)} %`;
// "1234567 ± 2.1 %": the mean and the half-width of its 95 % interval.
const withInterval = (s: ScaleSummary) => {
  const mean = s.mean ?? 0;
  return s.n > 1 && mean > 0 && s.ci95_high !== undefined ? `${Math.round(mean)} ± ${((100 * (s.ci95_high - mean)) / mean).toFixed(1)} %` : `${Math.round(mean)}`;
};
// A side over its boots; a side of one boot by its run's own samples.
const sideText = (set: ScaleSummary | undefined, runs: { samples?: ScaleSummary }[]) =>
  withInterval((set?.n === 1 && runs.length === 1 ? runs[0].samples : set) ?? { n: 0 });
// The verdicts that come with no interval or p-value.
const unjudged = (v: string) => v === 'too few samples' || v === 'one run: not judged';
// The points whose p-values were adjusted together: those the test judged.
const tested = (c: PointChange) => c.verdict === 'significant' || c.verdict === 'within noise';
// A p-value cell: '—' where no test was made.
const pValue = (p: number | undefined, verdict: string) => (p === undefined || unjudged(verdict) ? '—' : p < 0.001 ? '< 0.001' : p.toFixed(3));

export const scalingPage: Page = async (root, _params, query) => {
  const { kernels } = await get<ScalingPage>('/api/scaling');
  const chosen = query.getAll('kernel').filter((k) => kernels.includes(k));
  // last=N: each kernel's newest N runs instead of its latest campaign's.
  const last = Number(query.get('last') ?? 0);
  if (!chosen.length) chosen.push(...kernels.slice(0, 2));
  const pickA = h('select', { id: 'kernel-a' }, ...kernels.map((k) => h('option', { value: k }, k))) as HTMLSelectElement;
  const pickB = h('select', { id: 'kernel-b' }, h('option', { value: '' }, '(none)'), ...kernels.map((k) => h('option', { value: k }, k))) as HTMLSelectElement;
  const pickTest = h('select', { id: 'scale-test' }) as HTMLSelectElement;
  pickA.value = chosen[0] ?? '';
  pickB.value = chosen[1] ?? '';
  const chartBox = h('div', { class: 'chart', id: 'scaling-chart' });
  const compare = h('div', {});
  const runsInfo = h('div', { id: 'scaling-runs' });
  root.append(
    h('h1', {}, 'Scaling'),
    h('p', {}, 'lookup-scale ops/s against task count, summed over tasks; the latest passing run per kernel. Bars: the 95 % interval of each point\'s mean over its samples.'),
    h('div', { class: 'inline-form' }, 'before: ', pickA, ' after: ', pickB, ' test: ', pickTest),
    chartBox,
    runsInfo,
    h('h2', {}, 'Before / after'),
    compare,
  );
  if (!kernels.length) {
    chartBox.replaceChildren(h('p', {}, 'No lookup-scale run has passed yet.'));
    return;
  }
  const chart = chartIn(chartBox);
  let data: ScalingPage = { kernels, runs: [], comparison: undefined };
  // How many error bars the chart drew, for people reading the DOM (and the browser test).
  let bars = 0;
  chart.on('finished', () => {
    chartBox.dataset.errorBars = String(bars);
  });
  const draw = () => {
    const [mode, name] = pickTest.value.split(':');
    const mine = (p: { mode: string; test: string }) => p.mode === mode && p.test === name;
    bars = 0;
    const series = data.runs.flatMap((r, i) => {
      const color = palette[i % palette.length];
      const pts = pointsOf(r).filter(mine);
      return [
        { name: r.kernel_label, type: 'line', color, symbolSize: 6, data: pts.map((p) => [p.tasks, p.ops_per_sec]) },
        {
          name: r.kernel_label,
          type: 'custom',
          color,
          z: 3,
          encode: { x: 0, y: [1, 2] },
          data: pts.filter((p) => p.n > 1).map((p) => [p.tasks, p.ci95_low, p.ci95_high]),
          renderItem: (_params: unknown, api: { value: (d: number) => number; coord: (v: number[]) => number[] }) => {
            bars++;
            const lo = api.coord([api.value(0), api.value(1)]);
            const hi = api.coord([api.value(0), api.value(2)]);
            const style = { stroke: color, lineWidth: 1.5 };
            const line = (x1: number, y1: number, x2: number, y2: number) => ({ type: 'line', shape: { x1, y1, x2, y2 }, style });
            return {
              type: 'group',
              children: [line(lo[0], lo[1], hi[0], hi[1]), line(lo[0] - 5, lo[1], lo[0] + 5, lo[1]), line(hi[0] - 5, hi[1], hi[0] + 5, hi[1])],
            };
          },
        },
      ];
    });
    chart.setOption(
      {
        animation: false,
        tooltip: { trigger: 'axis' },
        legend: { top: 0 },
        grid: { left: 80, right: 20, top: 40, bottom: 40 },
        xAxis: { type: 'value', name: 'tasks', minInterval: 1, nameLocation: 'middle', nameGap: 25 },
        yAxis: { type: 'value', name: 'ops/s' },
        series,
      },
      true,
    );
    chartBox.dataset.errorBars = String(bars);
    const cmp = data.comparison;
    if (cmp) {
      const rows = cmp.points.filter(mine).sort((x, y) => x.tasks - y.tasks);
      compare.replaceChildren(
        table(
          ['tasks', `${cmp.before} ops/s`, `${cmp.after} ops/s`, 'change', '95 % interval', 'p (adjusted)', 'verdict', 'runs'],
          rows.map((c) => [
            c.tasks,
            sideText(c.before, c.before_runs),
            sideText(c.after, c.after_runs),
            pct(c.change_pct),
            unjudged(c.verdict) ? '—' : `[${pct(c.ci95_low_pct)}, ${pct(c.ci95_high_pct)}]`,
            pValue(c.p_adjusted ?? c.p_value, c.verdict),
            h('span', { class: `badge sig-${c.verdict.replace(/[^a-z]+/g, '-')}` }, c.verdict),
            `${c.before?.n ?? 0} / ${c.after?.n ?? 0}`,
          ]),
          { id: 'scaling-compare' },
        ),
        h(
          'p',
          { id: 'scaling-sets' },
          `${cmp.before}: ${cmp.before_jobs.length} run(s), ${cmp.after}: ${cmp.after_jobs.length} run(s), ${last > 0 ? `each kernel's newest ${last}` : 'each kernel\'s latest campaign'}. `,
          `Welch's t-test over the runs' means, one per boot ("runs": boots before / after), its p adjusted (Benjamini-Hochberg) over the ${cmp.points.filter(tested).length} points of this comparison that were judged: "significant" only when the adjusted p is below 5 %, i.e. the runs say the change is beyond the boot-to-boot noise; "one run: not judged" when a side has a single boot (its ± is then that run's own samples'); "loaded: not judged" when any run shared its CPUs (or, in a VM, its host) with other work.`,
        ),
      );
    } else {
      compare.replaceChildren(h('p', {}, 'Pick a second kernel to compare.'));
    }
  };
  const begin = latestOnly();
  const load = async () => {
    const current = begin();
    const ks = [pickA.value, pickB.value].filter(Boolean);
    const q = [...new Set(ks)].map((k) => `kernel=${encodeURIComponent(k)}`).join('&') + (last > 0 ? `&last=${last}` : '');
    const answer = await get<ScalingPage>(`/api/scaling?${q}`);
    if (!current()) return; // a later pick's answer owns the page
    data = answer;
    const tests = [...new Set(data.runs.flatMap((r) => pointsOf(r).map((p) => `${p.mode}:${p.test}`)))].sort();
    const keep = pickTest.value;
    pickTest.replaceChildren(...tests.map((t) => h('option', { value: t }, t.replace(':', ' '))));
    if (tests.includes(keep)) pickTest.value = keep;
    runsInfo.replaceChildren(
      ...data.runs.map((r) =>
        h(
          'div',
          {},
          `${r.kernel_label}: job #${r.job_id} (campaign #${r.campaign_id}, ${r.fs}), ${when(r.reported_at)}`,
          r.run?.host ? `, ${r.run.host.cpus} CPUs, ${seconds(r.run.host.sample)} s samples` : '',
          ...(r.run?.host?.warnings ?? []).map((w) => h('div', { class: 'warnings scale-warning' }, w)),
        ),
      ),
    );
    draw();
  };
  pickA.addEventListener('change', load);
  pickB.addEventListener('change', load);
  pickTest.addEventListener('change', draw);
  await load();
  return () => chart.dispose();
};
