import { getPages, post, type Schedule } from '../api';
import { h, table, when } from '../dom';
import type { Page } from '../router';

function list(v: string): string[] {
  return v
    .split(',')
    .map((x) => x.trim())
    .filter(Boolean);
}

export const schedulesPage: Page = async (root, _p, query) => {
  // Page by page: "More schedules" reads one page more on every refresh.
  const limit = Number(query.get('limit')) || 0;
  let pages = 1;
  const body = h('div', {});
  const message = h('p', { class: 'message', id: 'schedule-message' });
  const field = (name: string, placeholder: string, value = '') =>
    h('input', { name, placeholder, value, 'aria-label': name }) as HTMLInputElement;
  const f = {
    name: field('name', 'nightly'),
    cron: field('cron', '0 2 * * *', '0 2 * * *'),
    scenarios: field('scenarios', 'setattr-lookup, rename-lookup'),
    filesystems: field('filesystems', 'tmpfs, fuse-cached'),
    kernels: field('kernels', 'host'),
    duration: field('duration_s', 'seconds per job', '2'),
  };
  const refresh = async () => {
    const { items: schedules, next } = await getPages<Schedule>('/api/schedules', 'schedules', pages, limit);
    body.replaceChildren(
      table(
        ['id', 'name', 'cron (UTC)', 'runs', 'enabled', 'next run', 'last run', ''],
        schedules.map((s) => [
          s.id,
          s.name,
          s.cron,
          `${s.campaign?.scenarios.join(', ')} × ${s.campaign?.kernels.join(', ')} × ${s.campaign?.filesystems.join(', ')}`,
          s.enabled ? 'yes' : 'no',
          s.enabled ? when(s.next_run) : '—',
          when(s.last_run),
          h(
            'button',
            {
              'data-schedule': s.id,
              onclick: () => act(() => post(`/api/schedules/${s.id}/enabled`, { enabled: !s.enabled })),
            },
            s.enabled ? 'Disable' : 'Enable',
          ),
        ]),
        { id: 'schedules' },
      ),
      ...(next ? [h('button', { id: 'schedules-more', onclick: () => { pages++; refresh().catch(() => undefined); } }, 'More schedules')] : []),
    );
  };
  const act = async (fn: () => Promise<unknown>) => {
    try {
      await fn();
      message.textContent = 'Saved.';
      message.className = 'message ok';
    } catch (e) {
      message.textContent = `Refused: ${(e as Error).message}`;
      message.className = 'message bad';
    }
    await refresh();
  };
  const form = h(
    'form',
    { class: 'inline-form', id: 'schedule-form' },
    ...Object.values(f),
    h('button', { type: 'submit' }, 'Add schedule'),
  );
  form.addEventListener('submit', (ev) => {
    ev.preventDefault();
    act(() =>
      post('/api/schedules', {
        name: f.name.value,
        cron: f.cron.value,
        campaign: {
          name: f.name.value,
          scenarios: list(f.scenarios.value),
          filesystems: list(f.filesystems.value),
          kernels: list(f.kernels.value),
          duration: `${Number(f.duration.value) || 0}s`,
        },
      }),
    );
  });
  root.append(h('h1', {}, 'Schedules'), body, h('h2', {}, 'Add'), form, message);
  await refresh();
};
