// One outcome: numbers, error, console tail, and for violations the timeline
// of the chosen one with its stale step spelled out.
import { enumText, ns, seconds, type OutcomeRecord, type RaceStrategy, type Violation } from '../api';
import { h, table, verdictBadge, when } from '../dom';
import { drawTimeline, explanation } from '../timeline';

export function violationView(v: Violation, index: number): { element: HTMLElement; dispose: () => void } {
  const chartBox = h('div', { class: 'chart timeline', id: 'timeline' });
  const d = v.detail;
  const stale = h(
    'div',
    {
      class: 'stale-step',
      id: 'stale-step',
      'data-index': index,
      'data-kind': enumText(v.kind),
      'data-actor': v.actor,
      'data-step': v.step,
      'data-object': v.object,
      'data-invoke': v.invoke_ns,
      'data-complete': v.complete_ns,
    },
    h('b', {}, `${enumText(v.kind)}: actor ${v.actor} ${v.op} ${v.path}, step ${v.step} (${v.component}, ${v.object})`),
    h('div', {}, `observed: ${v.observed}`),
    h('div', {}, `any linearization allows: ${v.expected}`),
    h('div', { class: 'why' }, explanation(v)),
  );
  const steps = d
    ? table(
        ['step', 'component', 'object', 'possible versions in the window'],
        d.steps.map((s) => [
          s.step,
          s.component,
          s.object,
          s.versions.map((x) => `${x.value} [${x.from_ns ?? 'start'}, ${x.to_ns ?? 'end'}]`).join('; '),
        ]),
        { class: 'steps' },
      )
    : h('p', {}, 'The report carries no detail.');
  if (d) {
    const rows = steps.querySelectorAll('tbody tr');
    d.steps.forEach((s, i) => {
      if (s.step === v.step) rows[i]?.classList.add('stale');
    });
  }
  const element = h('div', { class: 'violation' }, stale, chartBox, h('h4', {}, 'The walk'), steps);
  let chart: ReturnType<typeof drawTimeline> = null;
  // Drawn once in the document, so the chart knows its size.
  requestAnimationFrame(() => {
    chart = drawTimeline(chartBox, v);
    if (chart) chartBox.setAttribute('data-drawn', 'true');
  });
  return { element, dispose: () => chart?.dispose() };
}

// The race strategy of a run in one line, with its fields as data attributes.
export function strategyView(s: RaceStrategy | undefined): HTMLElement {
  if (!s) return h('p', { class: 'strategy', 'data-alignment': '' }, 'strategy: not reported (an older agent)');
  const alignment = enumText(s.alignment);
  const free = s.observers - Math.min(s.observers, s.aligned_observers);
  const split = alignment === 'both' ? ` (${s.aligned_observers} aligned, ${free} free)` : '';
  const chosen = s.chosen_by_seed.length ? `; chosen by the seed: ${s.chosen_by_seed.join(', ')}` : '; all fixed by the spec';
  return h(
    'p',
    { class: 'strategy', 'data-alignment': alignment, 'data-observers': s.observers, 'data-pinned': String(s.pinned) },
    h('b', {}, 'strategy: '),
    `${alignment}, ${s.observers} observer${s.observers === 1 ? '' : 's'}${split}, ${s.pinned ? 'pinned to CPUs' : 'not pinned'}${chosen}; widening ${s.widening || '?'}`,
  );
}

const mib = (bytes: number) => (bytes / (1 << 20)).toFixed(1);

// `first`: the violation shown first (an issue shows its own signature's).
export function outcomeView(r: OutcomeRecord, first?: Violation): { element: HTMLElement; dispose: () => void } {
  const o = r.outcome;
  const box = h(
    'section',
    { class: 'outcome' },
    h('h3', {}, `Attempt ${r.attempt} `, verdictBadge(o?.verdict ?? ''), ` reported ${when(r.reported_at)} by ${r.agent_id}`),
  );
  if (!o) {
    box.append(h('p', {}, 'The report carries no outcome.'));
    return { element: box, dispose: () => {} };
  }
  box.append(
    h(
      'p',
      {},
      `${o.ops} ops, ${o.violation_count} violations, ${Math.round(o.ops_per_sec)} ops/s, ${seconds(o.elapsed).toFixed(2)} s, clock ${o.clock_source || '?'}, ε ${o.epsilon_ns} ns`,
    ),
    strategyView(o.strategy),
  );
  if (o.error) box.append(h('p', { class: 'error-text' }, `error: ${o.error}`));
  // Why the run was killed (the OOM killer, a signal, a crash): its own line.
  const killed = o.killed;
  if (killed && enumText(killed.reason)) {
    box.append(
      h('p', { class: 'error-text', id: 'run-killed', 'data-reason': killed.reason }, h('b', {}, 'killed: '), `${enumText(killed.reason)}${killed.line ? `: ${killed.line}` : ''}`),
    );
  }
  const rss = Number(o.run?.peak_rss_bytes ?? 0);
  const childRss = Number(o.run?.children_peak_rss_bytes ?? 0);
  if (rss || childRss) {
    box.append(h('p', { class: 'muted', id: 'peak-rss' }, `peak RSS: run ${mib(rss)} MiB, largest child ${mib(childRss)} MiB`));
  }
  if (o.console_tail) box.append(h('h4', {}, 'Console tail'), h('pre', { class: 'console' }, o.console_tail));
  let dispose = () => {};
  if (o.violations.length) {
    const holder = h('div', {});
    const pick = h(
      'select',
      { id: 'violation-pick' },
      ...o.violations.map((v, i) => h('option', { value: i }, `${i + 1}: ${enumText(v.kind)} actor ${v.actor} ${v.op} ${v.path}`)),
    ) as HTMLSelectElement;
    const show = (i: number) => {
      dispose();
      const view = violationView(o.violations[i], i);
      holder.replaceChildren(view.element);
      dispose = view.dispose;
    };
    pick.addEventListener('change', () => show(Number(pick.value)));
    box.append(h('h4', {}, `Violations (${o.violations.length} reported of ${o.violation_count})`), pick, holder);
    const i = first ? o.violations.findIndex((v) => ns(v.invoke_ns) === ns(first.invoke_ns) && v.actor === first.actor && v.step === first.step) : 0;
    pick.value = String(Math.max(i, 0));
    show(Math.max(i, 0));
  }
  return { element: box, dispose: () => dispose() };
}
