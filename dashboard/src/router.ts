// Hash routes (#/campaigns/3): a page renders into the main element and
// returns what stops its polling and charts.

export type Cleanup = () => void;
export type Page = (root: HTMLElement, params: string[], query: URLSearchParams) => Promise<Cleanup | void>;

export interface Route {
  pattern: RegExp;
  page: Page;
}

export function parseHash(): { path: string; query: URLSearchParams } {
  const raw = location.hash.replace(/^#/, '') || '/';
  const [path, q] = raw.split('?');
  return { path, query: new URLSearchParams(q ?? '') };
}
