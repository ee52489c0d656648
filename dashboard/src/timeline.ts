// The timeline of one violation: a lane per actor with each operation as a bar
// from invoke to complete, a lane per possible version of the object the
// stale step depends on (its possible window), and the stale lookup
// highlighted. Drawn with an ECharts custom series; the axis is ECharts'.
import { chartIn, echarts } from './charts';
import { h } from './dom';
import { enumText, ns, type MutationTrace, type PossibleVersion, type Violation } from './api';

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

// What a version or mutation leads to, as a word: "file", "dir", "symlink",
// "absent"; "" when not an entry or not known.
const kindOf = (x: { node_kind?: string }) => enumText(x.node_kind);

// "file → dir → absent" when the versions lead to nodes of more than one
// kind, else "".
export function kindChange(versions: { node_kind?: string }[]): string {
  const kinds: string[] = [];
  for (const ver of versions) {
    const k = kindOf(ver);
    if (k && kinds[kinds.length - 1] !== k) kinds.push(k);
  }
  return new Set(kinds).size > 1 ? kinds.join(' → ') : '';
}

// The first step of the walk whose entry changes type in the window.
export function typeChangeStep(v: Violation): { object: string; change: string; versions: PossibleVersion[] } | null {
  const d = v.detail;
  // The object's own mutations around the window, in order, then its
  // versions in the window, then every step of the walk.
  const changes = (d?.history ?? []).filter((op) => !op.err && kindOf(op));
  const around = kindChange(changes);
  if (around && d) return { object: v.object, change: around, versions: d.versions };
  for (const st of [{ object: v.object, versions: d?.versions ?? [] }, ...(d?.steps ?? [])]) {
    const change = kindChange(st.versions);
    if (change) return { object: st.object, change, versions: st.versions };
  }
  return null;
}

export function explanation(v: Violation): string {
  const text = explanationOfKind(v);
  const flip = typeChangeStep(v);
  return flip ? `${text} ${flip.object} changes type in the window: ${flip.change}.` : text;
}

function explanationOfKind(v: Violation): string {
  const d = v.detail;
  const obj = v.object || 'the object';
  const versions = (d?.versions ?? [])
    .map((x) => (kindOf(x) ? `${x.value} (${kindOf(x)})` : x.value))
    .join(', ') || 'none recorded';
  switch (enumText(v.kind)) {
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
  const d = v.detail;
  if (!d) return null;
  const t0 = ns(v.invoke_ns);
  const complete = ns(v.complete_ns);
  const epsilon = ns(d.epsilon_ns);
  const kind = enumText(v.kind);
  const lanes: string[] = [];
  const bars: Bar[] = [];
  const lane = (name: string) => {
    let i = lanes.indexOf(name);
    if (i < 0) i = lanes.push(name) - 1;
    return i;
  };
  let lo = t0 - epsilon;
  let hi = complete + epsilon;
  const history: MutationTrace[] = d.history ?? [];
  for (const op of history) {
    lo = Math.min(lo, ns(op.invoke_ns));
    hi = Math.max(hi, ns(op.complete_ns));
  }
  const span = Math.max(hi - lo, 1000);
  lo -= span * 0.15;
  hi += span * 0.15;

  // A lane per possible version of `object`, coloured by what it leads to.
  // An unset from_ns: the initial version; an unset to_ns: still current.
  const addVersions = (object: string, versions: PossibleVersion[]) =>
    versions.forEach((ver, i) => {
      const k = kindOf(ver);
      bars.push({
        lane: lane(`${object} v${i + 1}`),
        start: ver.from_ns === undefined ? lo : Math.max(ns(ver.from_ns), lo),
        end: ver.to_ns === undefined ? hi : Math.min(ns(ver.to_ns), hi),
        color: (k && KIND_COLORS[k]) || '#9bbbd4',
        label: k ? `${ver.value} (${k})` : ver.value,
        tip: tipOf(`possible version of ${object}`, [
          ['value', ver.value],
          ...(k ? ([['leads to', k]] as [string, string][]) : []),
          ['possible from', ver.from_ns === undefined ? 'before the run' : `${us(ns(ver.from_ns), t0).toFixed(3)} µs`],
          ['possible until', ver.to_ns === undefined ? 'the end' : `${us(ns(ver.to_ns), t0).toFixed(3)} µs`],
        ]),
      });
    });
  // Versions first (top), then mutators, then the stale lookup.
  addVersions(v.object, d.versions);
  // A name on the walk that changes type: its versions too.
  const flip = typeChangeStep(v);
  if (flip && flip.object !== v.object) addVersions(flip.object, flip.versions);
  for (const op of history) {
    const k = kindOf(op);
    bars.push({
      lane: lane(`actor ${op.actor} (mutator)`),
      start: ns(op.invoke_ns),
      end: ns(op.complete_ns),
      color: op.err ? '#bbbbbb' : (k && KIND_COLORS[k] && flip) ? KIND_COLORS[k] : '#4a78b5',
      label: k ? `${op.op} → ${op.value} (${k})` : `${op.op} → ${op.value}`,
      tip: tipOf(`actor ${op.actor}: ${op.op}`, [
        ['sets', `${op.object} = ${op.value}`],
        ['invoke', `${us(ns(op.invoke_ns), t0).toFixed(3)} µs`],
        ['complete', `${us(ns(op.complete_ns), t0).toFixed(3)} µs`],
        ['result', op.err ? `errno ${op.err} (no change)` : 'ok'],
      ]),
    });
  }
  const lookupLane = lane(`actor ${v.actor} (observer)`);
  if (epsilon > 0) {
    bars.push({
      lane: lookupLane,
      start: t0 - epsilon,
      end: complete + epsilon,
      color: 'rgba(214,69,69,0.25)',
      label: '',
      tip: tipOf('window with guard band', [['epsilon', `${epsilon} ns`]]),
    });
  }
  bars.push({
    lane: lookupLane,
    start: t0,
    end: complete,
    color: kind === 'escape' ? ESCAPE_COLOR : '#d64545',
    label: kind === 'escape' ? `${v.op} ${v.path}: out of the root after step ${v.step}` : `${v.op} ${v.path}: step ${v.step} stale`,
    tip: tipOf(`${kind}: actor ${v.actor} ${v.op} ${v.path}`, [
      ['stale step', `${v.step} (${v.component}, ${v.object})`],
      ['observed', v.observed],
      ['any linearization allows', v.expected],
      ['invoke', '0 µs'],
      ['complete', `${us(complete, t0).toFixed(3)} µs`],
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
