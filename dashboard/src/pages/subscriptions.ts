import { ApiError, del, enumText, getWithToken, post, type EventList, type ListSubscriptions, type Subscription } from '../api';
import { h, table, when } from '../dom';
import type { Page } from '../router';

const kinds = ['new-issue', 'regression', 'nightly-failed', 'nightly-not-run', 'action-result'];

function list(v: string): string[] {
  return v
    .split(',')
    .map((x) => x.trim())
    .filter(Boolean);
}

function filterText(s: Subscription): string {
  const f = s.filter;
  if (!f) return 'every event';
  const parts = [f.events.length ? f.events.map(enumText).join(', ') : 'every event'];
  if (f.kernel) parts.push(`kernel ${f.kernel}`);
  if (f.scenario) parts.push(`scenario ${f.scenario}`);
  if (enumText(f.issue_kind)) parts.push(`issue kind ${enumText(f.issue_kind)}`);
  if (f.schedule_id !== '0') parts.push(`schedule ${f.schedule_id}`);
  return parts.join('; ');
}

// Subscriptions (webhooks and mails) and the latest events; every read here
// needs the token, as the subscriptions hold URLs and addresses.
export const subscriptionsPage: Page = async (root) => {
  const body = h('div', {});
  const events = h('div', {});
  const message = h('p', { class: 'message', id: 'subscription-message' });
  const field = (name: string, placeholder: string) =>
    h('input', { name, placeholder, 'aria-label': name }) as HTMLInputElement;
  const f = {
    name: field('name', 'kernel-ci'),
    target: field('target', 'https://hook.example/x or ci@example.org'),
    events: field('events', kinds.join(', ')),
    kernel: field('kernel', 'kernel label or glob, e.g. 6.1-*'),
    scenario: field('scenario', 'scenario or glob'),
  };
  const refresh = async () => {
    try {
      const { subscriptions } = await getWithToken<ListSubscriptions>('/api/subscriptions');
      body.replaceChildren(
        subscriptions.length === 0
          ? h('p', { id: 'no-subscriptions' }, 'No subscriptions yet.')
          : table(
              ['id', 'name', 'events', 'target', 'delivered', 'pending', 'failed', 'last error', ''],
              subscriptions.map((s) => [
                s.id,
                s.name,
                filterText(s),
                s.webhook?.url ?? (s.email?.to ?? []).join(', '),
                s.delivered,
                s.pending,
                s.failed,
                s.last_error || '—',
                h('button', { 'data-subscription': s.id, onclick: () => act(() => del(`/api/subscriptions/${s.id}`)) }, 'Remove'),
              ]),
              { id: 'subscriptions' },
            ),
      );
      const recent = await getWithToken<EventList>('/api/notifications?limit=20');
      events.replaceChildren(
        table(
          ['id', 'when', 'kind', 'what'],
          recent.events.map((e) => [e.id, when(e.at), enumText(e.kind), e.summary]),
          { id: 'notify-events' },
        ),
      );
    } catch (e) {
      const need = e instanceof ApiError && e.status === 401;
      body.replaceChildren(
        h('p', { class: 'message bad', id: 'subscriptions-refused' }, need ? 'Set the token (top right) to see the subscriptions.' : `Could not load: ${(e as Error).message}`),
      );
      events.replaceChildren();
    }
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
  const form = h('form', { class: 'inline-form', id: 'subscription-form' }, ...Object.values(f), h('button', { type: 'submit' }, 'Subscribe'));
  form.addEventListener('submit', (ev) => {
    ev.preventDefault();
    const target = f.target.value.trim();
    const mail = !/^https?:\/\//.test(target);
    act(() =>
      post('/api/subscriptions', {
        name: f.name.value,
        ...(mail ? { email: list(target) } : { webhook: target }),
        filter: { events: list(f.events.value), kernel: f.kernel.value.trim(), scenario: f.scenario.value.trim() },
      }),
    );
  });
  root.append(
    h('h1', {}, 'Notifications'),
    h('p', {}, 'Webhooks and mails of new issues, regressions, nightlies that newly fail or did not run, and triage results.'),
    body,
    h('h2', {}, 'Subscribe'),
    form,
    message,
    h('h2', {}, 'Latest events'),
    events,
  );
  await refresh();
};
