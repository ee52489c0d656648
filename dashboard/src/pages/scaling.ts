import { get, type ScalePoint } from '../api';
import { chartIn } from '../charts';
import { h, table, when } from '../dom';
import type { Page } from '../router';

interface Run {
  kernel: string;
  job_id: number;
  campaign_id: number;
  fs: string;
  reported_at: string;
  points: ScalePoint[];
}

export const scalingPage: Page = async (root, _params, query) => {
  const { kernels } = await get<{ kernels: string[] }>('/api/scaling');
  const chosen = query.getAll('kernel').filter((k) => kernels.includes(k));
  if (!chosen.length) chosen.push(...kernels.slice(0, 2));
  const pickA = h('select', { id: 'kernel-a' }, ...kernels.map((k) => h('option', { value: k }, k))) as HTMLSelectElement;
  const pickB = h('select', { id: 'kernel-b' }, h('option', { value: '' }, '(none)'), ...kernels.map((k) => h('option', { value: k }, k))) as HTMLSelectElement;
  const pickTest = h('select', { id: 'scale-test' }) as HTMLSelectElement;
  pickA.value = chosen[0] ?? '';
  pickB.value = chosen[1] ?? '';
  const chartBox = h('div', { class: 'chart', id: 'scaling-chart' });
  const compare = h('div', {});
  const runsInfo = h('div', {});
  root.append(
    h('h1', {}, 'Scaling'),
    h('p', {}, 'lookup-scale ops/s against task count; the latest passing run per kernel.'),
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
  let runs: Run[] = [];
  const draw = () => {
    const test = pickTest.value;
    const [mode, name] = test.split(':');
    const series = runs.map((r) => ({
      name: r.kernel,
      type: 'line',
      symbolSize: 6,
      data: r.points.filter((p) => p.mode === mode && p.test === name).map((p) => [p.tasks, p.ops_per_sec]),
    }));
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
    if (runs.length === 2) {
      const [a, b] = runs;
      const pts = (r: Run) => new Map(r.points.filter((p) => p.mode === mode && p.test === name).map((p) => [p.tasks, p.ops_per_sec]));
      const pa = pts(a);
      const pb = pts(b);
      const tasks = [...new Set([...pa.keys(), ...pb.keys()])].sort((x, y) => x - y);
      compare.replaceChildren(
        table(
          ['tasks', `${a.kernel} ops/s`, `${b.kernel} ops/s`, 'change'],
          tasks.map((t) => {
            const x = pa.get(t);
            const y = pb.get(t);
            const pct = x && y !== undefined ? ((y - x) / x) * 100 : null;
            return [t, x === undefined ? '—' : Math.round(x), y === undefined ? '—' : Math.round(y), pct === null ? '—' : `${pct >= 0 ? '+' : ''}${pct.toFixed(1)} %`];
          }),
          { id: 'scaling-compare' },
        ),
      );
    } else {
      compare.replaceChildren(h('p', {}, 'Pick a second kernel to compare.'));
    }
  };
  const load = async () => {
    const ks = [pickA.value, pickB.value].filter(Boolean);
    const q = [...new Set(ks)].map((k) => `kernel=${encodeURIComponent(k)}`).join('&');
    runs = (await get<{ runs: Run[] }>(`/api/scaling?${q}`)).runs;
    const tests = [...new Set(runs.flatMap((r) => r.points.map((p) => `${p.mode}:${p.test}`)))].sort();
    const keep = pickTest.value;
    pickTest.replaceChildren(...tests.map((t) => h('option', { value: t }, t.replace(':', ' '))));
    if (tests.includes(keep)) pickTest.value = keep;
    runsInfo.replaceChildren(
      ...runs.map((r) => h('div', {}, `${r.kernel}: job #${r.job_id} (campaign #${r.campaign_id}, ${r.fs}), ${when(r.reported_at)}`)),
    );
    draw();
  };
  pickA.addEventListener('change', load);
  pickB.addEventListener('change', load);
  pickTest.addEventListener('change', draw);
  await load();
  return () => chart.dispose();
};
