// The timeline of one violation: a lane per actor with each operation as a bar
// from invoke to complete, a lane per possible version of the object the
// stale step depends on (its possible window), and the stale lookup
// highlighted. Drawn with an ECharts custom series; the axis is ECharts'.
import { chartIn, echarts } from './charts';
import { h } from './dom';
import type { HistoryOp, Version, Violation, ViolationDetail } from './api';

interface Bar {
  lane: number;
  start: number;
  end: number;
  color: string;
  label: string;
  tip: HTMLElement;
}

const us = (ns: number, t0: number) => (ns - t0) / 1000;
// An escape (a security bug) is drawn apart from the stale kinds.
const ESCAPE_COLOR = '#7b2d9e';

function tipOf(title: string, rows: [string, string][]): HTMLElement {
  return h('div', { class: 'tip' }, h('b', {}, title), ...rows.map(([k, v]) => h('div', {}, `${k}: ${v}`)));
}

// Version bars of an entry are coloured by what the name leads to, so a
// name that changes type (unlink + mkdir, a symlink renamed over a file)
// shows as bars of different colours.
const KIND_COLORS: Record<string, string> = {
  file: '#9bbbd4',
  dir: '#a7cf9a',
  symlink: '#e6c27a',
  absent: '#d9d9d9',
};

// "file → dir → absent" when the versions lead to nodes of more than one
// kind, else "".
export function kindChange(versions: { node_kind?: string }[]): string {
  const kinds: string[] = [];
  for (const ver of versions) {
    const k = ver.node_kind;
    if (k && kinds[kinds.length - 1] !== k) kinds.push(k);
  }
  return new Set(kinds).size > 1 ? kinds.join(' → ') : '';
}

// The first step of the walk whose entry changes type in the window.
export function typeChangeStep(d: ViolationDetail | null): { object: string; change: string; versions: Version[] } | null {
  // The object's own mutations around the window, in order, then its
  // versions in the window, then every step of the walk.
  const changes = (d?.history ?? []).filter((op) => !op.err && op.node_kind).map((op) => ({ node_kind: op.node_kind }));
  const around = kindChange(changes);
  if (around && d) return { object: d.object, change: around, versions: d.versions };
  for (const st of [{ object: d?.object ?? '', versions: d?.versions ?? [] }, ...(d?.steps ?? [])]) {
    const change = kindChange(st.versions);
    if (change) return { object: st.object, change, versions: st.versions };
  }
  return null;
}

export function explanation(v: Violation): string {
  const text = explanationOfKind(v);
  const flip = typeChangeStep(v.detail);
  return flip ? `${text} ${flip.object} changes type in the window: ${flip.change}.` : text;
}

function explanationOfKind(v: Violation): string {
  const d = v.detail;
  const obj = v.object || d?.object || 'the object';
  const versions = (d?.versions ?? [])
    .map((x) => (x.node_kind ? `${x.value} (${x.node_kind})` : x.value))
    .join(', ') || 'none recorded';
  switch (v.kind) {
    case 'stale-grant':
      return `The lookup succeeded, but every version of ${obj} possible at any time in its window (${versions}) denies actor ${v.actor} this step: no moment in the window explains the grant.`;
    case 'stale-deny':
      return `The lookup was refused, but every version of ${obj} possible in its window (${versions}) allows it: no moment in the window explains the refusal.`;
    case 'wrong-mount':
      return `The lookup saw a mount state that no version of ${obj} possible in its window (${versions}) gives.`;
    case 'stale-entry':
      return `The lookup's result needs an entry that no version of ${obj} possible in its window (${versions}) has.`;
    case 'escape':
      return `The scoped openat2 walk (RESOLVE_BENEATH or RESOLVE_IN_ROOT) succeeded, but every walk that reaches what it opened ends outside its root: no version of ${obj} possible in its window (${versions}) puts it beneath the root. A security bug.`;
    default:
      return `No time in the window explains what the operation observed (${versions}).`;
  }
}

// Draws the timeline of `v` into `container`; returns the chart to dispose.
export function drawTimeline(container: HTMLElement, v: Violation): echarts.ECharts | null {
  const d: ViolationDetail | null = v.detail;
  if (!d) return null;
  const t0 = d.invoke;
  const lanes: string[] = [];
  const bars: Bar[] = [];
  const lane = (name: string) => {
    let i = lanes.indexOf(name);
    if (i < 0) i = lanes.push(name) - 1;
    return i;
  };
  let lo = d.invoke - (d.epsilon_ns ?? 0);
  let hi = d.complete + (d.epsilon_ns ?? 0);
  const history: HistoryOp[] = d.history ?? [];
  for (const op of history) {
    lo = Math.min(lo, op.invoke);
    hi = Math.max(hi, op.complete);
  }
  const span = Math.max(hi - lo, 1000);
  lo -= span * 0.15;
  hi += span * 0.15;

  // A lane per possible version of `object`, coloured by what it leads to.
  const addVersions = (object: string, versions: Version[]) =>
    versions.forEach((ver, i) => {
      bars.push({
        lane: lane(`${object} v${i + 1}`),
        start: Math.max(ver.from ?? lo, lo),
        end: Math.min(ver.to ?? hi, hi),
        color: (ver.node_kind && KIND_COLORS[ver.node_kind]) || '#9bbbd4',
        label: ver.node_kind ? `${ver.value} (${ver.node_kind})` : ver.value,
        tip: tipOf(`possible version of ${object}`, [
          ['value', ver.value],
          ...(ver.node_kind ? ([['leads to', ver.node_kind]] as [string, string][]) : []),
          ['possible from', ver.from === null ? 'before the run' : `${us(ver.from, t0).toFixed(3)} µs`],
          ['possible until', ver.to === null ? 'the end' : `${us(ver.to, t0).toFixed(3)} µs`],
        ]),
      });
    });
  // Versions first (top), then mutators, then the stale lookup.
  addVersions(d.object, d.versions);
  // A name on the walk that changes type: its versions too.
  const flip = typeChangeStep(d);
  if (flip && flip.object !== d.object) addVersions(flip.object, flip.versions);
  for (const op of history) {
    bars.push({
      lane: lane(`actor ${op.actor} (${op.role || 'mutator'})`),
      start: op.invoke,
      end: op.complete,
      color: op.err ? '#bbbbbb' : (op.node_kind && KIND_COLORS[op.node_kind] && flip) ? KIND_COLORS[op.node_kind] : '#4a78b5',
      label: op.node_kind ? `${op.op} → ${op.value} (${op.node_kind})` : `${op.op} → ${op.value}`,
      tip: tipOf(`actor ${op.actor}: ${op.op}`, [
        ['sets', `${op.object} = ${op.value}`],
        ['invoke', `${us(op.invoke, t0).toFixed(3)} µs`],
        ['complete', `${us(op.complete, t0).toFixed(3)} µs`],
        ['result', op.err ? `errno ${op.err} (no change)` : 'ok'],
      ]),
    });
  }
  const lookupLane = lane(`actor ${d.actor} (observer)`);
  if ((d.epsilon_ns ?? 0) > 0) {
    bars.push({
      lane: lookupLane,
      start: d.invoke - d.epsilon_ns,
      end: d.complete + d.epsilon_ns,
      color: 'rgba(214,69,69,0.25)',
      label: '',
      tip: tipOf('window with guard band', [['epsilon', `${d.epsilon_ns} ns`]]),
    });
  }
  bars.push({
    lane: lookupLane,
    start: d.invoke,
    end: d.complete,
    color: v.kind === 'escape' ? ESCAPE_COLOR : '#d64545',
    label: v.kind === 'escape' ? `${d.op} ${d.path}: out of the root after step ${d.step}` : `${d.op} ${d.path}: step ${d.step} stale`,
    tip: tipOf(`${v.kind}: actor ${d.actor} ${d.op} ${d.path}`, [
      ['stale step', `${d.step} (${d.component}, ${d.object})`],
      ['observed', d.observed],
      ['any linearization allows', d.expected],
      ['invoke', '0 µs'],
      ['complete', `${us(d.complete, t0).toFixed(3)} µs`],
    ]),
  });

  const chart = chartIn(container);
  chart.setOption({
    animation: false,
    grid: { left: 190, right: 30, top: 20, bottom: 60 },
    tooltip: { trigger: 'item', formatter: (p: any) => bars[p.dataIndex].tip },
    dataZoom: [{ type: 'slider', xAxisIndex: 0, bottom: 10 }, { type: 'inside', xAxisIndex: 0 }],
    xAxis: {
      type: 'value',
      min: Math.floor(us(lo, t0)),
      max: Math.ceil(us(hi, t0)),
      name: "µs from the lookup's invoke",
      nameLocation: 'middle',
      nameGap: 25,
    },
    yAxis: { type: 'category', data: lanes, inverse: true },
    series: [
      {
        type: 'custom',
        encode: { x: [1, 2], y: 0 },
        data: bars.map((b) => ({ value: [b.lane, us(b.start, t0), us(b.end, t0)], itemStyle: { color: b.color }, name: b.label })),
        renderItem: (params: any, api: any) => {
          const a = api.coord([api.value(1), api.value(0)]);
          const b = api.coord([api.value(2), api.value(0)]);
          const height = api.size([0, 1])[1] * 0.55;
          const shape = echarts.graphic.clipRectByRect(
            { x: a[0], y: a[1] - height / 2, width: Math.max(b[0] - a[0], 2), height },
            { x: params.coordSys.x, y: params.coordSys.y, width: params.coordSys.width, height: params.coordSys.height },
          );
          const bar = bars[params.dataIndex];
          return (
            shape && {
              type: 'rect',
              shape,
              style: { fill: bar.color },
              textContent: { style: { text: bar.label, fill: '#111', fontSize: 11, overflow: 'truncate', width: Math.max(b[0] - a[0] - 6, 0) } },
              textConfig: { position: 'insideLeft' },
            }
          );
        },
      },
    ],
  });
  return chart;
}
