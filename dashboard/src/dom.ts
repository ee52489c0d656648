// Element building without HTML parsing: every string becomes a text node, so
// console text, notes and names from agents can never turn into markup.

type Child = Node | string | number | null | undefined | false;
type Attrs = Record<string, string | number | boolean | EventListener | undefined>;

export function h(tag: string, attrs: Attrs = {}, ...children: Child[]): HTMLElement {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === false) continue;
    if (typeof v === 'function') e.addEventListener(k.replace(/^on/, ''), v);
    else if (v === true) e.setAttribute(k, '');
    else e.setAttribute(k, String(v));
  }
  append(e, ...children);
  return e;
}

export function append(parent: Node, ...children: Child[]): void {
  for (const c of children) {
    if (c === null || c === undefined || c === false) continue;
    parent.appendChild(typeof c === 'string' || typeof c === 'number' ? document.createTextNode(String(c)) : c);
  }
}

export function clear(e: HTMLElement): HTMLElement {
  e.replaceChildren();
  return e;
}

export function table(headers: string[], rows: Child[][], attrs: Attrs = {}): HTMLElement {
  return h(
    'table',
    attrs,
    h('thead', {}, h('tr', {}, ...headers.map((x) => h('th', {}, x)))),
    h('tbody', {}, ...rows.map((r) => h('tr', {}, ...r.map((c) => h('td', {}, c))))),
  );
}

export function when(iso: string | null | undefined): string {
  if (!iso) return '—';
  const d = new Date(iso);
  return d.toISOString().replace('T', ' ').replace(/\.\d+Z$/, 'Z');
}

export function ago(iso: string | null | undefined, now = Date.now()): string {
  if (!iso) return 'never';
  const s = Math.round((now - new Date(iso).getTime()) / 1000);
  if (s < 60) return `${Math.max(s, 0)} s ago`;
  if (s < 3600) return `${Math.round(s / 60)} min ago`;
  if (s < 86400) return `${Math.round(s / 3600)} h ago`;
  return `${Math.round(s / 86400)} d ago`;
}

export function link(href: string, text: string): HTMLElement {
  return h('a', { href }, text);
}

// A verdict: the enum's name ("VERDICT_KERNEL_CRASH") or the short one
// ("kernel-crash") the outcome routes still print, shown short.
export function verdictBadge(verdict: string): HTMLElement {
  const v = verdict.startsWith('VERDICT_') ? verdict.slice(8).toLowerCase().replace(/_/g, '-').replace('unspecified', '') : verdict;
  return h('span', { class: `badge v-${v || 'none'}` }, v || '—');
}

// Latest wins: a page that refetches on every filter change calls begin()
// before each fetch, and drops an answer once a later begin() has started,
// so a slow answer to an old filter never overwrites a newer one.
export function latestOnly(): () => () => boolean {
  let generation = 0;
  return () => {
    const mine = ++generation;
    return () => mine === generation;
  };
}
