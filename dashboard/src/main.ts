import './style.css';
import { setToken, token } from './api';
import { h } from './dom';
import { parseHash, type Cleanup, type Route } from './router';
import { agentsPage } from './pages/agents';
import { campaignPage, campaignsPage, jobPage } from './pages/campaigns';
import { issuePage } from './pages/issue';
import { issuesPage } from './pages/issues';
import { kernelPage, kernelsPage } from './pages/kernels';
import { overviewPage } from './pages/overview';
import { scalingPage } from './pages/scaling';
import { schedulesPage } from './pages/schedules';
import { subscriptionsPage } from './pages/subscriptions';

const routes: Route[] = [
  { pattern: /^\/$/, page: overviewPage },
  { pattern: /^\/campaigns$/, page: campaignsPage },
  { pattern: /^\/campaigns\/(\d+)$/, page: campaignPage },
  { pattern: /^\/jobs\/(\d+)$/, page: jobPage },
  { pattern: /^\/issues$/, page: issuesPage },
  { pattern: /^\/issues\/(\d+)$/, page: issuePage },
  { pattern: /^\/scaling$/, page: scalingPage },
  { pattern: /^\/agents$/, page: agentsPage },
  { pattern: /^\/schedules$/, page: schedulesPage },
  { pattern: /^\/subscriptions$/, page: subscriptionsPage },
  { pattern: /^\/kernels$/, page: kernelsPage },
  { pattern: /^\/kernels\/([^/]+)$/, page: kernelPage },
];

const nav: [string, string][] = [
  ['#/', 'Overview'],
  ['#/campaigns', 'Campaigns'],
  ['#/issues', 'Issues'],
  ['#/scaling', 'Scaling'],
  ['#/agents', 'Agents'],
  ['#/schedules', 'Schedules'],
  ['#/subscriptions', 'Notifications'],
  ['#/kernels', 'Kernels'],
];

const app = document.getElementById('app')!;
let cleanup: Cleanup | void;
let generation = 0;

async function render() {
  const { path, query } = parseHash();
  if (cleanup) cleanup();
  cleanup = undefined;
  const mine = ++generation;
  app.replaceChildren();
  document.querySelectorAll('#nav a').forEach((a) => a.classList.toggle('active', a.getAttribute('href') === `#${path}` || (path.startsWith(a.getAttribute('href')!.slice(1)) && a.getAttribute('href') !== '#/')));
  const route = routes.find((r) => r.pattern.test(path));
  if (!route) {
    app.append(h('h1', {}, 'Not found'), h('p', {}, `No page "${path}".`));
    return;
  }
  const root = h('div', { class: 'page', 'data-page': path });
  app.append(root);
  try {
    const c = await route.page(root, path.match(route.pattern)!.slice(1), query);
    if (mine === generation) {
      cleanup = c;
      root.setAttribute('data-ready', 'true');
    } else if (c) c();
  } catch (e) {
    root.append(h('p', { class: 'message bad', id: 'page-error' }, `Could not load: ${(e as Error).message}`));
    root.setAttribute('data-ready', 'true');
  }
}

function tokenBox(): HTMLElement {
  const input = h('input', { type: 'password', id: 'token', placeholder: 'token for actions', size: 16 }) as HTMLInputElement;
  const state = h('span', { id: 'token-state' }, token() ? 'token set' : 'read-only');
  const save = h('button', {
    id: 'save-token',
    onclick: () => {
      setToken(input.value.trim());
      input.value = '';
      state.textContent = token() ? 'token set' : 'read-only';
    },
  }, 'Use');
  return h('span', {}, input, save, ' ', state);
}

document.getElementById('nav')!.append(...nav.map(([href, text]) => h('a', { href }, text)));
document.getElementById('token-box')!.append(tokenBox());
window.addEventListener('hashchange', render);
render();
