import { enumText, get, ISSUE_STATUSES, post, type Action, type Issue, type IssuePage, type ReproRate } from '../api';
import { h, link, table, when } from '../dom';
import type { Page } from '../router';
import { kernelCard, kernelHref } from './kernels';
import { outcomeView } from './outcome_view';

const pct = (x: number) => `${(x * 100).toFixed(1)} %`;

function rateText(r: ReproRate): string {
  return `${pct(r.rate)} (95 % CI ${pct(r.lower)}–${pct(r.upper)}) over ${r.runs} runs on ${r.kernel_label}: ${r.reproduced} reproduced${r.other_failures ? `, ${r.other_failures} failed otherwise` : ''}`;
}

function actionView(a: Action, issueId: string): HTMLElement {
  const kind = enumText(a.kind);
  const state = enumText(a.state);
  const box = h(
    'div',
    { class: `action a-${state}`, id: `action-${a.id}`, 'data-kind': kind, 'data-state': state },
    h('b', {}, `#${a.id} ${kind}${a.kernel_label ? ` on ${a.kernel_label}` : ''}: ${state}`),
    ` — ${a.progress}`,
    ' ',
    ...a.campaign_ids.map((c) => h('span', {}, link(`#/campaigns/${c}`, `campaign #${c}`), ' ')),
  );
  if (a.error) box.append(h('div', { class: 'error-text' }, a.error));
  // Replays race as the example did: the spec carries its resolved strategy.
  if (kind === 'replay' && a.spec) {
    const align = a.spec.align || 'seed';
    const pin = enumText(a.spec.pin) || 'seed';
    box.append(h('div', { class: 'action-strategy', 'data-align': align, 'data-observers': a.spec.observers, 'data-pin': pin }, `races as: seed ${a.spec.seed}, align ${align}, ${a.spec.observers || 'seed-chosen'} observers, pin ${pin}`));
  }
  if (kind === 'replay' && a.rate && state === 'done') box.append(h('div', { class: 'rate', 'data-rate': a.rate.rate }, `rate ${rateText(a.rate)}`));
  if (kind === 'bisect' && a.bisect) {
    const b = a.bisect;
    if (b.first_bad) box.append(h('div', { class: 'first-bad' }, `first bad kernel: ${b.first_bad} (last good ${b.last_good || '—'}, rate ${pct(b.rate)}, ${b.runs_per_step} runs per step)`));
    if (b.skipped.length) box.append(h('div', {}, `skipped: ${b.skipped.join(', ')}`));
    if (b.steps.length)
      box.append(table(['kernel', 'verdict', 'runs', 'reproduced', 'other failures'], b.steps.map((s) => [s.kernel_label, enumText(s.verdict), s.runs, s.reproduced, s.other_failures])));
  }
  if (kind === 'minimize' && a.minimize) {
    const m = a.minimize;
    box.append(h('div', {}, `${m.kept} of ${m.tried} candidates kept`));
    if (state === 'done') {
      box.append(h('h4', {}, 'Minimal spec'), h('pre', { class: 'spec' }, JSON.stringify(m.minimal_spec, null, 2)));
      if (m.c_reproducer) box.append(h('a', { href: `/api/actions/${a.id}/reproducer.c`, download: `issue-${issueId}-repro.c`, class: 'button' }, 'Download C reproducer'));
      else if (m.c_reproducer_error) box.append(h('div', {}, `no C reproducer: ${m.c_reproducer_error}`));
    }
    if (m.log.length) box.append(h('details', {}, h('summary', {}, 'log'), h('pre', {}, m.log.join('\n'))));
  }
  return box;
}

export const issuePage: Page = async (root, [id]) => {
  const head = h('div', {});
  const example = h('div', {});
  const foundOn = h('div', { id: 'issue-kernels' });
  const message = h('p', { class: 'message', id: 'action-message' });
  const actions = h('div', { id: 'actions' });
  const rates = h('div', {});
  const notes = h('div', { id: 'notes' });
  const statusSel = h('select', { id: 'status' }, ...ISSUE_STATUSES.map((s) => h('option', { value: s }, s))) as HTMLSelectElement;
  const dupInput = h('input', { id: 'duplicate-of', placeholder: 'duplicate of #', size: 8 }) as HTMLInputElement;
  const noteText = h('textarea', { id: 'note-text', rows: 2, cols: 60, placeholder: 'note' }) as HTMLTextAreaElement;
  const replayKernel = h('select', { id: 'replay-kernel' }) as HTMLSelectElement;
  const replayRuns = h('input', { id: 'replay-runs', value: '5', size: 4 }) as HTMLInputElement;
  const bisectKernels = h('input', { id: 'bisect-kernels', placeholder: 'k1, k2, …, kn (good first, bad last)', size: 40 }) as HTMLInputElement;
  let issue: Issue;
  let dispose = () => {};

  const say = (text: string, ok: boolean) => {
    message.textContent = text;
    message.className = `message ${ok ? 'ok' : 'bad'}`;
  };
  const act = async (what: string, fn: () => Promise<unknown>) => {
    try {
      await fn();
      say(`${what}: done`, true);
    } catch (e) {
      say(`${what} refused: ${(e as Error).message}`, false);
    }
    await refresh();
  };

  const refresh = async () => {
    const d = await get<IssuePage>(`/api/issues/${id}`);
    const first = !issue;
    issue = d.issue!;
    head.replaceChildren(
      h('p', {}, h('span', { class: `badge s-${enumText(issue.status)}`, id: 'issue-status' }, enumText(issue.status)), ` ${enumText(issue.kind)} in ${issue.scenario}; seen ${issue.count} times, first ${when(issue.first_seen)}, last ${when(issue.last_seen)}`, issue.duplicate_of !== '0' ? h('span', {}, ', duplicate of ', link(`#/issues/${issue.duplicate_of}`, `#${issue.duplicate_of}`)) : '', issue.regressions ? `, reopened ${issue.regressions}×` : ''),
      h('p', { class: 'signature' }, `signature: ${issue.signature}`),
      h('p', { class: 'report' }, 'report for a kernel list: ', h('a', { id: 'report-markdown', href: `/api/issues/${id}/report?format=markdown`, download: `issue-${id}.md` }, 'Markdown'), ', ', h('a', { id: 'report-mail', href: `/api/issues/${id}/report?format=mail`, download: `issue-${id}.eml` }, 'mail with the reproducer attached')),
      table(['kernel', 'count', 'first seen', 'last seen'], issue.kernels.map((k) => [d.kernels[k.kernel_label] ? link(kernelHref(k.kernel_label), k.kernel_label) : k.kernel_label, k.count, when(k.first_seen), when(k.last_seen)])),
    );
    if (first) {
      statusSel.value = enumText(issue.status);
      const labels = [...new Set([...issue.kernels.map((k) => k.kernel_label), issue.example_kernel].filter(Boolean))];
      foundOn.replaceChildren(...labels.map((l) => kernelCard(l, d.kernels[l] ?? null)));
      replayKernel.replaceChildren(...issue.kernels.map((k) => h('option', { value: k.kernel_label }, k.kernel_label)));
      if (d.example) {
        const view = outcomeView(d.example, issue.example_violation);
        example.replaceChildren(h('p', {}, 'Example: ', link(`#/jobs/${d.example.job_id}`, `job #${d.example.job_id}`), ` attempt ${d.example.attempt}`), view.element);
        dispose = view.dispose;
      } else {
        example.replaceChildren(h('p', {}, 'The example outcome is gone.'));
      }
    }
    rates.replaceChildren(issue.rates.length ? h('ul', {}, ...issue.rates.map((r) => h('li', {}, rateText(r)))) : h('p', {}, 'Not replayed yet.'));
    notes.replaceChildren(...issue.notes.map((n) => h('div', { class: 'note' }, h('span', { class: 'when' }, when(n.at)), ' ', h('span', { class: 'note-text' }, n.text))));
    actions.replaceChildren(...issue.actions.map((a) => actionView(a, issue.id)));
    return issue.actions.some((a) => a.state === 'ACTION_STATE_RUNNING');
  };

  root.append(
    h('h1', {}, `Issue #${id}`),
    head,
    h('h2', {}, 'Found on'),
    foundOn,
    h('h2', {}, 'What happened'),
    example,
    h('h2', {}, 'Status and notes'),
    h(
      'div',
      { class: 'inline-form' },
      statusSel,
      dupInput,
      h('button', { id: 'save-status', onclick: () => act('status', () => post(`/api/issues/${id}/status`, { status: statusSel.value, duplicate_of: Number(dupInput.value) || 0 })) }, 'Save status'),
    ),
    notes,
    h('div', { class: 'inline-form' }, noteText, h('button', { id: 'add-note', onclick: () => act('note', async () => { await post(`/api/issues/${id}/notes`, { text: noteText.value }); noteText.value = ''; }) }, 'Add note')),
    h('h2', {}, 'Reproduce'),
    rates,
    h(
      'div',
      { class: 'inline-form' },
      'replay on ',
      replayKernel,
      ' runs ',
      replayRuns,
      h('button', { id: 'replay', onclick: () => act('replay', () => post(`/api/issues/${id}/replay`, { kernel: replayKernel.value, runs: Number(replayRuns.value) })) }, 'Replay'),
      h('button', { id: 'minimize', onclick: () => act('minimize', () => post(`/api/issues/${id}/minimize`, {})) }, 'Minimize'),
      bisectKernels,
      h('button', { id: 'bisect', onclick: () => act('bisect', () => post(`/api/issues/${id}/bisect`, { kernels: bisectKernels.value.split(',').map((x) => x.trim()).filter(Boolean) })) }, 'Bisect'),
    ),
    message,
    h('h2', {}, 'Actions'),
    actions,
  );
  await refresh();
  const timer = setInterval(() => refresh().catch(() => undefined), 2000);
  return () => {
    clearInterval(timer);
    dispose();
  };
};
