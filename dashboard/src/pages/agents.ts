import { getPages, type Agent, type Paged } from '../api';
import { ago, h, link, table } from '../dom';
import type { Page } from '../router';

export const agentsPage: Page = async (root, _p, query) => {
  const body = h('div', {});
  root.append(h('h1', {}, 'Agents'), body);
  // Page by page: "More agents" reads one page more on every refresh.
  const limit = Number(query.get('limit')) || 0;
  let pages = 1;
  const refresh = async () => {
    const { items: agents, next, first } = await getPages<Agent, { now: string } & Paged>('/api/agents', 'agents', pages, limit);
    const now = first.now;
    const nowMs = new Date(now).getTime();
    body.replaceChildren(
      table(
        ['name', 'status', 'kernel', 'uname', 'where', 'cpus', 'file systems', 'current job', 'last heartbeat'],
        agents.map((a) => [
          a.name,
          h('span', { class: `badge ${a.online ? 'online' : 'offline'}` }, a.online ? 'online' : 'offline'),
          a.kernel,
          a.uname,
          a.vm ? `VM on ${a.host}` : `host ${a.host}`,
          a.cpus,
          a.filesystems.join(', '),
          a.current_job
            ? h('span', {}, link(`#/jobs/${a.current_job.id}`, `#${a.current_job.id}`), ` ${a.current_job.spec.scenario} / ${a.current_job.spec.fs}`)
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
