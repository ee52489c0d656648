import { getPages, type AgentRow, type AgentsPage } from '../api';
import { ago, h, link, table } from '../dom';
import type { Page } from '../router';

export const agentsPage: Page = async (root, _p, query) => {
  const body = h('div', {});
  root.append(h('h1', {}, 'Agents'), body);
  // Page by page: "More agents" reads one page more on every refresh.
  const limit = Number(query.get('limit')) || 0;
  let pages = 1;
  const refresh = async () => {
    const { items: rows, next, first } = await getPages<AgentRow, AgentsPage>('/api/agents', 'agents', pages, limit);
    const agents = rows.map((r) => ({ ...r.agent!, job: r.current_job }));
    const nowMs = first.now ? new Date(first.now).getTime() : Date.now();
    body.replaceChildren(
      table(
        ['name', 'status', 'kernel', 'uname', 'where', 'cpus', 'file systems', 'current job', 'last heartbeat'],
        agents.map((a) => [
          a.name,
          h('span', { class: `badge ${a.online ? 'online' : 'offline'}` }, a.online ? 'online' : 'offline'),
          a.capabilities?.kernel_label ?? '',
          a.capabilities?.uname ?? '',
          a.capabilities?.vm ? `VM on ${a.capabilities.host}` : `host ${a.capabilities?.host ?? ''}`,
          a.capabilities?.cpus ?? '',
          (a.capabilities?.filesystems ?? []).join(', '),
          a.job
            ? h('span', {}, link(`#/jobs/${a.job.job_id}`, `#${a.job.job_id}`), ` ${a.job.spec?.scenario} / ${a.job.spec?.fs}`)
            : 'idle',
          ago(a.last_seen, nowMs),
        ]),
        { id: 'agents' },
      ),
      ...(next ? [h('button', { id: 'agents-more', onclick: () => { pages++; refresh().catch(() => undefined); } }, 'More agents')] : []),
    );
    body.querySelectorAll('tbody tr').forEach((tr, i) => {
      if (!agents[i].online) tr.classList.add('offline-row');
    });
  };
  await refresh();
  const timer = setInterval(() => refresh().catch(() => undefined), 3000);
  return () => clearInterval(timer);
};
