import { enumText, get, ISSUE_STATUSES, type Issue, type ListIssues } from '../api';
import { ago, h, latestOnly, link, table, when } from '../dom';
import type { Page } from '../router';

function bestRate(i: Issue): string {
  if (!i.rates.length) return '—';
  return i.rates.map((r) => `${r.kernel_label} ${(r.rate * 100).toFixed(0)} % [${(r.lower * 100).toFixed(0)}–${(r.upper * 100).toFixed(0)}]`).join(', ');
}

export const issuesPage: Page = async (root, _p, query) => {
  const select = (name: string, options: string[]) => {
    const s = h('select', { name, id: `filter-${name}` }, h('option', { value: '' }, `any ${name}`), ...options.map((o) => h('option', { value: o }, o))) as HTMLSelectElement;
    s.value = query.get(name) ?? '';
    return s;
  };
  const { issues } = await get<ListIssues>('/api/issues');
  const uniq = (f: (i: Issue) => string[]) => [...new Set(issues.flatMap(f))].filter(Boolean).sort();
  const filters = {
    status: select('status', ISSUE_STATUSES),
    scenario: select('scenario', uniq((i) => [i.scenario])),
    kernel: select('kernel', uniq((i) => i.kernels.map((k) => k.kernel_label))),
    kind: select('kind', uniq((i) => [enumText(i.kind)])),
  };
  const body = h('div', {});
  root.append(h('h1', {}, 'Issues'), h('div', { class: 'inline-form' }, ...Object.values(filters)), body);
  const begin = latestOnly();
  const refresh = async () => {
    const current = begin();
    const q = new URLSearchParams();
    for (const [k, s] of Object.entries(filters)) if (s.value) q.set(k, s.value);
    history.replaceState(null, '', `#/issues${q.toString() ? `?${q}` : ''}`);
    // Page by page: "More issues" asks for the next one.
    let issues: Issue[] = [];
    let next = '';
    const more = async () => {
      const page = new URLSearchParams(q);
      if (next) page.set('page', next);
      const d = await get<ListIssues>(`/api/issues?${page}`);
      if (!current()) return; // a later filter's answer owns the table
      issues = issues.concat(d.issues);
      next = d.next_page_token;
      render();
    };
    const render = () => body.replaceChildren(
      issues.length
        ? table(
            ['id', 'status', 'kind', 'scenario', 'title', 'count', 'first seen', 'last seen', 'kernels', 'reproduction rate'],
            issues.map((i) => [
              link(`#/issues/${i.id}`, `#${i.id}`),
              h('span', { class: `badge s-${enumText(i.status)}` }, enumText(i.status)),
              enumText(i.kind),
              i.scenario,
              link(`#/issues/${i.id}`, i.title),
              i.count,
              when(i.first_seen),
              ago(i.last_seen),
              i.kernels.map((k) => k.kernel_label).join(', '),
              bestRate(i),
            ]),
            { id: 'issues' },
          )
        : h('p', {}, 'No issue matches.'),
      ...(next ? [h('button', { id: 'issues-more', onclick: () => more() }, 'More issues')] : []),
    );
    await more();
  };
  for (const s of Object.values(filters)) s.addEventListener('change', () => refresh());
  await refresh();
};
