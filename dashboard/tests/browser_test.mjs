// End-to-end test of the dashboard in a real browser (Debian's chromium, driven
// by playwright-core) against a real `leapfrog up`: embedded PostgreSQL, the
// coordinator and local agents, filled by real campaigns including the
// positive control (setattr-lookup on fuse-cached gives stale-grant
// violations). Screenshots of every page go to the artifacts folder.
//
// usage: node tests/browser_test.mjs --leapfrog BUILD/bin/leapfrog --artifacts DIR
// Needs root (scenarios mount file systems). Prints "N passed, M failed".

import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { chromium } from 'playwright-core';
import { Leapfrog, waitFor } from './harness.mjs';
import { kernelBuild, sha256File, writeToyKernel } from './toy_kernel.mjs';

const args = Object.fromEntries(
  process.argv.slice(2).reduce((acc, a, i, all) => (a.startsWith('--') ? [...acc, [a.slice(2), all[i + 1]]] : acc), []),
);
const artifacts = path.resolve(args.artifacts ?? 'artifacts');
fs.mkdirSync(artifacts, { recursive: true });

const results = [];
async function check(name, fn) {
  const t0 = Date.now();
  try {
    await fn();
    results.push([name, null]);
    console.log(`ok   ${name} (${Date.now() - t0} ms)`);
  } catch (e) {
    results.push([name, e]);
    console.log(`FAIL ${name}: ${e.stack ?? e}`);
  }
}
function assert(cond, message) {
  if (!cond) throw new Error(message);
}

const PATCHED = 'lf-patched';
const BROKEN = 'lf-broken';
const lf = new Leapfrog(args.leapfrog);
let context;
try {
  await lf.start();
  console.log(`leapfrog up: ${lf.http}, data in ${lf.data}`);
  // A second agent that stands in for another kernel build, for the scaling overlay.
  lf.startAgent('k2-agent', 'k2');

  // ---- kernels with patch series, by the real `leapfrog kernel build` ----
  const toy = writeToyKernel(path.join(lf.data, 'ktoy'));
  const kcache = path.join(lf.data, 'kcache');
  const goodSeries = [toy.patches.p1, toy.patches.p2];
  const badSeries = [toy.patches.p1, toy.patches.p3];
  const built = kernelBuild(lf, PATCHED, toy.tree, goodSeries, kcache, ['--cmdline', 'lf.toy=1']);
  assert(built.status === 0, `kernel build ${PATCHED}: exit ${built.status}\n${built.stderr}`);
  const broken = kernelBuild(lf, BROKEN, toy.tree, badSeries, kcache);
  assert(broken.status === 2, `kernel build ${BROKEN} should fail with 2: exit ${broken.status}\n${broken.stderr}`);
  // The nightly's findings are made on the patched kernel: an agent advertises it.
  lf.startAgent('patched-agent', PATCHED);

  // ---- fill the database for real ----
  // A nightly: a schedule firing every minute, disabled once it fired.
  const spec = {
    name: 'nightly-e2e',
    scenarios: ['setattr-lookup'],
    filesystems: ['fuse-cached', 'tmpfs'],
    kernels: [PATCHED],
    duration: '2s',
  };
  const sched = await lf.api('POST', '/api/schedules', { name: 'nightly-e2e', cron: '* * * * *', campaign: spec }, lf.token);
  assert(sched.status === 200, `add schedule: ${sched.status} ${JSON.stringify(sched.body)}`);
  const nightlyId = await waitFor('the schedule to fire', 90_000, async () => {
    const { body } = await lf.api('GET', '/api/campaigns');
    return body.campaigns.find((c) => c.schedule_id === sched.body.id)?.id;
  });
  await lf.api('POST', `/api/schedules/${sched.body.id}/enabled`, { enabled: false }, lf.token);
  // lookup-scale on two kernels (host and the k2 stand-in), by the CLI.
  lf.cli(['campaign', 'run', '--name', 'scale-e2e', '--scenario', 'lookup-scale', '--kernel', 'host', '--kernel', 'k2',
    '--fs', 'tmpfs', '--param', 'point_ms=40', '--param', 'warmup_ms=20', '--param', 'samples=3', '--param', 'mode=0', '--param', 'test=0',
    '--param', 'max_tasks=2', '--wait']);
  // Two kernels of three runs (boots) each, with known samples: the 1-task
  // points the same, the 2-task ones 30 % faster, so the table must say
  // "within noise" and "significant". Each run's mean differs by up to 1 %
  // from its boot to the next; the newest runs (factor 1) are drawn.
  const base = [1000, 1012, 991, 1006, 995];
  const scalePoint = (tasks, samples) => {
    const mean = samples.reduce((a, b) => a + b, 0) / samples.length;
    const sd = Math.sqrt(samples.reduce((a, x) => a + (x - mean) ** 2, 0) / (samples.length - 1));
    const half = (2.776445 * sd) / Math.sqrt(samples.length);
    return { test: 'lseek1', mode: 'processes', tasks, ops_per_sec: mean, samples, n: samples.length, stddev: sd,
      ci95_low: mean - half, ci95_high: mean + half, idle_pct: 0, other_load: 0 };
  };
  const host = { cpus: 2, sample_s: 1, warmup_s: 1, max_other_load: 0, load_average: 0.5, warnings: [] };
  const runSet = (kernel, fast, extra) => [0.99, 1.01, 1].map((f, i) => ({ scenario: 'lookup-scale', verdict: 'pass',
    scale_host: { ...host, ...extra, boot_id: `${kernel}-boot-${i}` },
    scale: [scalePoint(1, base.map((x) => f * x)), scalePoint(2, base.map((x) => fast * f * x))] }));
  lf.insertScaleOutcomes('scale-a', runSet('scale-a', 2, {}));
  lf.insertScaleOutcomes('scale-b', runSet('scale-b', 2.6, { warnings: ['2 tasks on 1 CPUs: points above 1 tasks share CPUs'] }));
  const nightly = await waitFor('the nightly campaign to finish', 180_000, async () => {
    const { body } = await lf.api('GET', `/api/campaigns/${nightlyId}`);
    return body.campaign.state === 'CAMPAIGN_STATE_DONE' && body;
  });
  const violatingJob = nightly.jobs.find((j) => j.spec.fs === 'fuse-cached' && j.verdict === 'VERDICT_VIOLATION');
  assert(violatingJob, `the positive control did not fire: ${JSON.stringify(nightly.jobs)}`);
  // A kernel-crash outcome whose console holds markup, written into the real
  // database the way a VM agent's report lands (a crash needs a VM here).
  const hostile = '[   12.5] BUG: <script>window.__xss=1</script><img src=x onerror="window.__xss=2"> & more';
  const crashJob = lf.insertCrashOutcome(hostile);
  // A name that changes type (typeflip-lookup), seen stale through the FUSE
  // cache: its timeline draws what each version of the name leads to. Three
  // seeds: on a loaded machine a run's violations can all be lookups long
  // after the flip (one version in the window), and one run then has no name
  // changing kind to draw.
  const flip = JSON.parse(lf.cli(['campaign', 'run', '--name', 'typeflip-e2e', '--scenario', 'typeflip-lookup',
    '--fs', 'fuse-cached', '--kernel', 'host', '--duration', '2s', '--seeds', '3', '--wait', '--json']));

  // ---- the API itself ----
  await check('api: unknown ids are 404', async () => {
    for (const p of ['/api/campaigns/999999', '/api/jobs/999999', '/api/nothing-here', '/api/kernels/no-such-kernel']) {
      const r = await lf.api('GET', p);
      assert(r.status === 404 && r.body.error, `${p}: ${r.status} ${JSON.stringify(r.body)}`);
    }
  });
  await check('api: kernels carry their patch series and build record', async () => {
    const { body } = await lf.api('GET', '/api/kernels');
    const byLabel = Object.fromEntries(body.kernels.map((k) => [k.label, k]));
    const good = byLabel[PATCHED], bad = byLabel[BROKEN];
    assert(good && bad, `kernels listed: ${Object.keys(byLabel)}`);
    assert(good.status === 'KERNEL_STATUS_READY' && bad.status === 'KERNEL_STATUS_BUILD_FAILURE', `statuses ${good.status} ${bad.status}`);
    for (const [k, series] of [[good, goodSeries], [bad, badSeries]]) {
      assert(k.patches.length === series.length, `${k.label}: ${k.patches.length} patches`);
      k.patches.forEach((p, i) => {
        assert(p.name === path.basename(series[i]), `${k.label} patch ${i}: ${p.name}`);
        assert(p.sha256 === sha256File(series[i]), `${k.label} patch ${i}: sha256 ${p.sha256}`);
        assert(fs.readFileSync(series[i], 'utf8').includes(`Subject: ${p.subject}\n`) && p.subject, `${k.label} patch ${i}: subject ${p.subject}`);
      });
    }
    assert(/^6\.1\.0-lf[0-9a-f]{8}$/.test(good.release) && parseFloat(good.build_time) > 0 && good.sha256 && good.cmdline === 'lf.toy=1', `ready kernel ${JSON.stringify(good)}`);
    assert(bad.build_log_tail.includes("error: 'BREAK_BUILD' undeclared"), `failure tail ${JSON.stringify(bad.build_log_tail)}`);
    const one = await lf.api('GET', `/api/kernels/${BROKEN}`);
    assert(one.status === 200 && one.body.kernel.label === BROKEN, `GET /api/kernels/${BROKEN}: ${one.status}`);
    const log = one.body.build_log;
    assert(log && log.readable && log.text.includes("error: 'BREAK_BUILD' undeclared") && log.text.includes('$ patch -p1'), `whole log ${JSON.stringify(log)}`);
    assert(log.text === fs.readFileSync(log.path, 'utf8'), 'the whole log differs from the file');
  });

  await check('api: a finding carries the patch series of its kernel', async () => {
    const { body } = await lf.api('GET', `/api/jobs/${violatingJob.job_id}`);
    assert(violatingJob.kernel_label === PATCHED, `the violation was found on ${violatingJob.kernel_label}`);
    const k = body.kernels[PATCHED];
    assert(k && k.patches.map((p) => p.name).join() === goodSeries.map((p) => path.basename(p)).join(), `job kernels ${JSON.stringify(body.kernels)}`);
    const crash = await lf.api('GET', `/api/jobs/${crashJob}`);
    assert(!('host' in crash.body.kernels), `an unregistered kernel is ${JSON.stringify(crash.body.kernels)}`);
  });

  await check('api: actions without the right token are 401', async () => {
    const body = { name: 'x', cron: '0 2 * * *', campaign: spec };
    for (const tok of [undefined, 'wrong']) {
      const r = await lf.api('POST', '/api/schedules', body, tok);
      assert(r.status === 401 && r.body.error, `token ${tok}: ${r.status}`);
    }
    const r = await lf.api('POST', `/api/schedules/${sched.body.id}/enabled`, { enabled: true });
    assert(r.status === 401, `enable without token: ${r.status}`);
  });
  await check('api: bad bodies are 400 with a message', async () => {
    const cases = [
      ['not json', /not JSON/],
      [JSON.stringify({ name: 'x', cron: 'every night', campaign: spec }), /cron|field/i],
      [JSON.stringify({ name: 'x', cron: '0 2 * * *', campaign: { ...spec, scenarios: ['no-such'] } }), /no-such|scenario/],
      [JSON.stringify({ name: 'x', cron: '0 2 * * *', campaign: { ...spec, params: { a: 'b' } } }), /bad campaign: .*params/],
      [JSON.stringify({ name: 'x', cron: '0 2 * * *', campaign: { ...spec, duration_s: 2 } }), /bad campaign: .*duration_s/],
    ];
    for (const [raw, want] of cases) {
      const r = await lf.rawPost('/api/schedules', raw, lf.token);
      assert(r.status === 400 && want.test(r.body.error), `${raw}: ${r.status} ${JSON.stringify(r.body)}`);
    }
  });

  // ---- the browser ----
  const profile = fs.mkdtempSync(path.join(os.tmpdir(), 'leapfrog-chromium-'));
  context = await chromium.launchPersistentContext(profile, {
    executablePath: '/usr/bin/chromium',
    headless: true,
    viewport: { width: 1400, height: 1000 },
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
      '--disable-component-update', '--disable-sync'],
  });
  const page = context.pages()[0] ?? (await context.newPage());
  const consoleErrors = [];
  page.on('console', (m) => m.type() === 'error' && consoleErrors.push(`${page.url()}: ${m.text()}`));
  page.on('pageerror', (e) => consoleErrors.push(`${page.url()}: ${e.message}`));
  const visit = async (hash, shot) => {
    console.log(`  visit #${hash}`);
    await page.goto(`${lf.http}/#${hash}`);
    await page.waitForSelector('.page[data-ready]', { timeout: 20_000 });
    await page.waitForLoadState('networkidle');
    if (shot) await page.screenshot({ path: path.join(artifacts, `${shot}.png`), fullPage: true });
  };

  await check('every page loads with no console errors', async () => {
    const pages = [
      ['/', 'overview'],
      ['/campaigns', 'campaigns'],
      [`/campaigns/${nightlyId}`, 'campaign'],
      [`/jobs/${violatingJob.job_id}`, 'job-violation'],
      [`/jobs/${crashJob}`, 'job-crash'],
      ['/issues', 'issues'],
      ['/scaling', 'scaling'],
      ['/agents', 'agents'],
      ['/schedules', 'schedules'],
      ['/kernels', 'kernels'],
      [`/kernels/${PATCHED}`, 'kernel-ready'],
      [`/kernels/${BROKEN}`, 'kernel-build-failure'],
    ];
    for (const [hash, name] of pages) {
      await visit(hash, name);
      const err = await page.$('#page-error');
      assert(!err, `${hash}: ${err && (await err.textContent())}`);
    }
    assert(consoleErrors.length === 0, `console errors:\n${consoleErrors.join('\n')}`);
  });

  await check('the overview matrix shows the violation cell', async () => {
    await visit('/');
    const cell = page.locator('td.cell[data-scenario="setattr-lookup"][data-fs="fuse-cached"]');
    assert((await cell.getAttribute('data-state')) === 'violation', `cell state ${await cell.getAttribute('data-state')}`);
    assert(/violation \d+/.test(await cell.textContent()), 'no violation count in the cell');
    const clean = page.locator('td.cell[data-scenario="setattr-lookup"][data-fs="tmpfs"]');
    assert((await clean.getAttribute('data-state')) === 'pass', 'the tmpfs cell is not pass');
    assert(/last nightly/.test(await page.textContent('#verdict-summary')), 'the overview does not show the nightly');
  });

  await check('a job page draws the timeline of the stored violation', async () => {
    const { body } = await lf.api('GET', `/api/jobs/${violatingJob.job_id}`);
    const stored = body.outcomes[0].outcome.violations[0];
    await visit(`/jobs/${violatingJob.job_id}`);
    await page.waitForSelector('#timeline[data-drawn] canvas', { timeout: 10_000 });
    await sameStep(page, stored);
    assert(stored.detail.history.length > 0, 'the stored violation has no history excerpt');
  });

  await check('a name that changes type shows its kinds on the timeline', async () => {
    const { body } = await lf.api('GET', `/api/campaigns/${flip.campaign}`);
    const fired = body.jobs.filter((j) => j.verdict === 'VERDICT_VIOLATION');
    assert(fired.length > 0, `typeflip-lookup on fuse-cached did not fire: ${JSON.stringify(body.jobs)}`);
    const kinds = (vers) => new Set((vers ?? []).map((x) => x.node_kind).filter((k) => k && k !== 'NODE_KIND_UNSPECIFIED')).size;
    const flips = (v) => [v.detail?.versions, (v.detail?.history ?? []).filter((op) => !op.err), ...(v.detail?.steps ?? []).map((st) => st.versions)].some((x) => kinds(x) > 1);
    let job = null;
    let idx = -1;
    const seen = [];
    for (const j of fired) {
      const vs = (await lf.api('GET', `/api/jobs/${j.job_id}`)).body.outcomes[0].outcome.violations;
      seen.push(...vs.map((v) => v.detail?.steps));
      idx = vs.findIndex(flips);
      if (idx >= 0) {
        job = j;
        break;
      }
    }
    assert(job, `no violation of ${fired.length} violating runs has a walk with a name changing kind: ${JSON.stringify(seen).slice(0, 4000)}`);
    await visit(`/jobs/${job.job_id}`);
    await page.selectOption('#violation-pick', String(idx));
    await page.waitForSelector(`#stale-step[data-index="${idx}"]`, { timeout: 10_000 });
    await page.waitForSelector('#timeline[data-drawn] canvas', { timeout: 10_000 });
    const why = await page.textContent('.why');
    assert(/entry\(.*\) changes type in the window: (file|dir|symlink|absent)( → (file|dir|symlink|absent))+\./.test(why), `explanation: ${why}`);
    await page.screenshot({ path: path.join(artifacts, 'timeline-typeflip.png'), fullPage: true });
  });

  await check('console text with <script> is shown as text', async () => {
    await visit(`/jobs/${crashJob}`);
    const text = await page.textContent('pre.console');
    assert(text.includes('<script>window.__xss=1</script>'), `console shows ${JSON.stringify(text)}`);
    assert((await page.$$('pre.console *')).length === 0, 'the console tail became elements');
    assert((await page.evaluate(() => window.__xss)) === undefined, 'injected code ran');
  });

  await check('scaling overlays two kernels with a before/after table', async () => {
    await visit('/scaling?kernel=host&kernel=k2', 'scaling');
    await page.waitForSelector('#scaling-chart canvas');
    const rows = await page.$$eval('#scaling-compare tbody tr', (trs) => trs.map((tr) => [...tr.children].map((td) => td.textContent)));
    assert(rows.length >= 2, `compare rows ${JSON.stringify(rows)}`);
    for (const r of rows) {
      assert(/^[+-]\d+\.\d %$/.test(r[3]), `change column ${r[3]}`);
      // One real run per kernel: the noise between boots is unknown, so no
      // verdict, whatever the samples of the two runs say.
      assert(r[6] === 'one run: not judged' && r[7] === '1 / 1', `verdict and runs columns ${JSON.stringify(r)}`);
    }
    assert((await page.$$('#scaling-compare .sig-one-run-not-judged')).length === rows.length, 'no "one run" label');
    const bars = Number(await page.getAttribute('#scaling-chart', 'data-error-bars'));
    assert(bars >= 4, `error bars drawn: ${bars}`);
  });

  await check('scaling marks a change within noise or significant, with error bars', async () => {
    await visit('/scaling?kernel=scale-a&kernel=scale-b', 'scaling-significance');
    await page.waitForSelector('#scaling-compare tbody tr');
    const rows = await page.$$eval('#scaling-compare tbody tr', (trs) => trs.map((tr) => [...tr.children].map((td) => td.textContent)));
    assert(rows.length === 2, `compare rows ${JSON.stringify(rows)}`);
    assert(rows[0][0] === '1' && rows[0][3] === '+0.0 %' && rows[0][6] === 'within noise', `1 task: ${JSON.stringify(rows[0])}`);
    assert(rows[1][0] === '2' && rows[1][3] === '+30.0 %' && rows[1][6] === 'significant', `2 tasks: ${JSON.stringify(rows[1])}`);
    assert(rows[0][7] === '3 / 3' && rows[1][7] === '3 / 3', `runs column: ${JSON.stringify(rows)}`);
    assert(/± \d+\.\d %/.test(rows[1][1]), `interval in ${rows[1][1]}`);
    assert((await page.$$('#scaling-compare .sig-within-noise')).length === 1, 'no "within noise" label');
    const bars = Number(await page.getAttribute('#scaling-chart', 'data-error-bars'));
    assert(bars === 4, `error bars drawn: ${bars}`);
    const warn = await page.textContent('#scaling-runs');
    assert(warn.includes('2 tasks on 1 CPUs'), `machine warning: ${warn}`);
  });

  await check('scaling CLI: compare says within noise and significant; csv is will-it-scale\'s', async () => {
    const text = lf.cli(['scaling', 'compare', 'scale-a', 'scale-b', '--test', 'lseek1']);
    const lines = text.split('\n');
    const one = lines.find((l) => /^lseek1\s+processes\s+1 /.test(l));
    const two = lines.find((l) => /^lseek1\s+processes\s+2 /.test(l));
    assert(one && one.includes('within noise'), `1 task: ${text}`);
    assert(two && two.includes('significant') && two.includes('+30.0%'), `2 tasks: ${text}`);
    assert(text.includes('scale-b: 2 tasks on 1 CPUs'), `warnings: ${text}`);
    assert(/^lseek1\s+processes\s+2\s+3\/3 /.test(two), `runs column: ${two}`);
    const j = JSON.parse(lf.cli(['scaling', 'compare', 'scale-a', 'scale-b', '--json']));
    assert(j.points.map((p) => p.verdict).join() === 'within noise,significant', JSON.stringify(j.points));
    assert(j.before_jobs.length === 3 && j.points[1].after_runs.length === 3 && j.points[1].after.n === 3, JSON.stringify(j));
    // The newest run of each alone: not judged, though its samples differ by 30 %.
    const last = lf.cli(['scaling', 'compare', 'scale-a', 'scale-b', '--test', 'lseek1', '--last', '1']);
    const lastTwo = last.split('\n').find((l) => /^lseek1\s+processes\s+2 /.test(l));
    assert(lastTwo && lastTwo.includes('one run: not judged') && lastTwo.includes('+30.0%'), `--last 1: ${last}`);
    const csv = lf.cli(['scaling', 'csv', 'scale-a', '--test', 'lseek1']).trim().split('\n');
    assert(csv[0] === 'tasks,processes,processes_idle,threads,threads_idle,linear', csv[0]);
    assert(csv[1] === '0,0,100,0,100,0', csv[1]);
    assert(csv[2] === '1,1000,0.00,-1,-1.00,1000' && csv[3] === '2,2001,0.00,-1,-1.00,2000', csv.join('|'));
  });

  await check('agents show kernel, place and heartbeat', async () => {
    await visit('/agents');
    const text = await page.textContent('#agents');
    assert(text.includes('k2-agent') && text.includes('k2') && text.includes('local-0'), text);
    assert(/online/.test(text), 'no agent online');
  });

  await check('a campaign pages its jobs: "More jobs" adds the next page, and the last has none', async () => {
    const { body } = await lf.api('GET', `/api/campaigns/${nightlyId}?limit=1000`);
    const all = body.jobs.map((j) => `#${j.job_id}`).sort();
    assert(all.length >= 2 && body.jobs_next_page_token === "", `want one page of 2 jobs or more: ${all}`);
    await visit(`/campaigns/${nightlyId}?limit=1`);
    const rows = () => page.$$eval('#jobs tbody tr', (trs) => trs.length);
    assert((await rows()) === 1, `rows on the first page of one: ${await rows()}`);
    const said = await page.textContent('#jobs-shown');
    assert(said.includes(`The first 1 of ${all.length} jobs`), said);
    for (let n = 2; n <= all.length; n++) {
      await page.click('#jobs-more');
      await page.waitForFunction((want) => document.querySelectorAll('#jobs tbody tr').length === want, n, { timeout: 10_000 });
    }
    assert((await page.$('#jobs-more')) === null, 'a "More jobs" button after the last page');
    assert((await page.$('#jobs-shown')) === null, 'the whole list still says it is a part');
    const shown = await page.$$eval('#jobs tbody tr td:first-child', (tds) => tds.map((td) => td.textContent.trim()).sort());
    assert(JSON.stringify(shown) === JSON.stringify(all), `shown ${shown}, listed ${all}`);
  });

  await check('agents page through the list: "More agents" adds the next page, and the last has none', async () => {
    const { body } = await lf.api('GET', '/api/agents');
    const all = body.agents.map((a) => a.agent.name).sort();
    assert(all.length >= 3, `want 3 agents or more: ${all}`);
    await visit('/agents?limit=1');
    const rows = () => page.$$eval('#agents tbody tr', (trs) => trs.length);
    assert((await rows()) === 1, `rows on the first page of one: ${await rows()}`);
    for (let n = 2; n <= all.length; n++) {
      await page.click('#agents-more');
      await page.waitForFunction((want) => document.querySelectorAll('#agents tbody tr').length === want, n, { timeout: 10_000 });
    }
    assert((await page.$('#agents-more')) === null, 'a "More agents" button after the last page');
    const shown = await page.$$eval('#agents tbody tr td:first-child', (tds) => tds.map((td) => td.textContent.trim()).sort());
    assert(JSON.stringify(shown) === JSON.stringify(all), `shown ${shown}, listed ${all}`);
  });

  await check('schedules: an action without the token is refused, with it it works', async () => {
    await page.evaluate(() => localStorage.removeItem('leapfrog.token'));
    await visit('/schedules');
    await page.fill('#schedule-form input[name=name]', 'ui-nightly');
    await page.fill('#schedule-form input[name=scenarios]', 'setattr-lookup');
    await page.fill('#schedule-form input[name=filesystems]', 'tmpfs');
    await page.click('#schedule-form button[type=submit]');
    await page.waitForFunction(() => /Refused/.test(document.querySelector('#schedule-message')?.textContent ?? ''));
    assert(/token/.test(await page.textContent('#schedule-message')), 'the refusal does not name the token');
    let { body } = await lf.api('GET', '/api/schedules');
    assert(!body.schedules.some((s) => s.name === 'ui-nightly'), 'the schedule was added without a token');
    await page.fill('#token', lf.token);
    await page.click('#save-token');
    await page.click('#schedule-form button[type=submit]');
    await page.waitForFunction(() => /Saved/.test(document.querySelector('#schedule-message')?.textContent ?? ''));
    ({ body } = await lf.api('GET', '/api/schedules'));
    const added = body.schedules.find((s) => s.name === 'ui-nightly');
    assert(added && added.enabled && added.next_run, 'the schedule was not added');
    await page.click(`button[data-schedule="${added.id}"]`);
    await page.waitForFunction((id) => document.querySelector(`button[data-schedule="${id}"]`)?.textContent === 'Enable', added.id);
    ({ body } = await lf.api('GET', '/api/schedules'));
    assert(!body.schedules.find((s) => s.id === added.id).enabled, 'disable did not persist');
    await page.screenshot({ path: path.join(artifacts, 'schedules.png'), fullPage: true });
  });

  await check('notifications: the page needs the token to read, then adds and removes a subscription', async () => {
    await page.evaluate(() => localStorage.removeItem('leapfrog.token'));
    await visit('/subscriptions');
    assert(await page.$('#subscriptions-refused'), 'the subscriptions were shown without a token');
    const anon = await lf.api('GET', '/api/subscriptions');
    assert(anon.status === 401, `GET /api/subscriptions without a token: ${anon.status}`);
    await page.fill('#token', lf.token);
    await page.click('#save-token');
    await page.reload();
    await page.waitForSelector('#no-subscriptions, #subscriptions', { timeout: 20_000 });
    await page.fill('#subscription-form input[name=name]', 'ui-hook');
    await page.fill('#subscription-form input[name=target]', 'http://127.0.0.1:9/hook');
    await page.fill('#subscription-form input[name=events]', 'new-issue, regression');
    await page.fill('#subscription-form input[name=kernel]', 'k*');
    await page.click('#subscription-form button[type=submit]');
    await page.waitForFunction(() => /Saved/.test(document.querySelector('#subscription-message')?.textContent ?? ''));
    const { body } = await lf.api('GET', '/api/subscriptions', undefined, lf.token);
    const added = body.subscriptions.find((s) => s.name === 'ui-hook');
    assert(added && added.webhook.url === 'http://127.0.0.1:9/hook' && added.filter.kernel === 'k*', `added: ${JSON.stringify(added)}`);
    assert(added.filter.events.join(',') === 'EVENT_KIND_NEW_ISSUE,EVENT_KIND_REGRESSION', `events: ${added.filter.events}`);
    assert(await page.$('#notify-events'), 'no events table');
    await page.screenshot({ path: path.join(artifacts, 'subscriptions.png'), fullPage: true });
    await page.click(`button[data-subscription="${added.id}"]`);
    await page.waitForFunction((id) => !document.querySelector(`button[data-subscription="${id}"]`), added.id);
  });

  await check('the kernels page shows status badges, releases and patch counts', async () => {
    await visit('/kernels');
    const rows = await page.$$eval('#kernels tbody tr', (trs) => trs.map((tr) => [...tr.children].map((td) => td.textContent.trim())));
    const row = (l) => rows.find((r) => r[0] === l);
    assert(row(PATCHED) && row(PATCHED)[1] === 'ready' && /^6\.1\.0-lf/.test(row(PATCHED)[2]) && row(PATCHED)[3] === '2', `row ${row(PATCHED)}`);
    assert(row(BROKEN) && row(BROKEN)[1] === 'build-failure' && row(BROKEN)[3] === '2', `row ${row(BROKEN)}`);
    assert(await page.$(`#kernels .badge.k-build-failure`), 'no build-failure badge');
    await page.click(`#kernels a[href="#/kernels/${BROKEN}"]`);
    await page.waitForSelector(`.page[data-page="/kernels/${BROKEN}"][data-ready]`);
  });

  await check('a failed kernel shows its series and the log tail', async () => {
    await visit(`/kernels/${BROKEN}`);
    await patchSeriesShown(page, '#patches', badSeries);
    const tail = await page.textContent('#build-log-tail');
    assert(tail.includes("fs/namei.c:3:9: error: 'BREAK_BUILD' undeclared"), `tail ${JSON.stringify(tail)}`);
    assert((await page.textContent('h1 .badge')) === 'build-failure', 'no failure badge in the title');
    await page.click('#build-log summary');
    assert((await page.textContent('#build-log pre')).includes('$ patch -p1'), 'the whole log is not shown');
    await page.click('#build-log summary');
    await page.screenshot({ path: path.join(artifacts, 'kernel-build-failure.png'), fullPage: true });
  });

  await triageChecks({ lf, page, visit, check, assert, sameStep, artifacts, violatingJob, crashJob, hostile, goodSeries });

  await check('a ready kernel shows its series and what was found on it', async () => {
    await visit(`/kernels/${PATCHED}`);
    await patchSeriesShown(page, '#patches', goodSeries);
    assert(!(await page.$('#build-log-tail')), 'a ready kernel shows a failure tail');
    assert((await page.textContent('#kernel-facts')).includes('lf.toy=1'), 'no cmdline');
    assert((await page.textContent('#kernel-issues')).includes('stale-grant'), 'the issue found on it is not listed');
    assert(await page.$(`#kernel-outcomes a[href="#/jobs/${violatingJob.job_id}"]`), 'the violating job is not listed');
    await page.screenshot({ path: path.join(artifacts, 'kernel-ready.png'), fullPage: true });
  });

  await check('a kernel pages its outcomes: "More outcomes" adds the next page, and the last has none', async () => {
    const { body } = await lf.api('GET', `/api/outcomes?kernel=${PATCHED}&limit=1000`);
    const all = body.outcomes.map((o) => `#${o.job_id}`);
    assert(all.length >= 2 && body.next_page_token === '', `want one page of 2 outcomes or more: ${all}`);
    await visit(`/kernels/${PATCHED}?limit=1`);
    const rows = () => page.$$eval('#kernel-outcomes tbody tr', (trs) => trs.length);
    assert((await rows()) === 1, `rows on the first page of one: ${await rows()}`);
    // The next pages come from /api/outcomes (OutcomeRecords), the first from the kernel's page.
    for (let n = 2; n <= all.length; n++) {
      await page.click('#kernel-outcomes-more');
      await page.waitForFunction((want) => document.querySelectorAll('#kernel-outcomes tbody tr').length === want, n, { timeout: 10_000 });
    }
    assert((await page.$('#kernel-outcomes-more')) === null, 'a "More outcomes" button after the last page');
    const shown = await page.$$eval('#kernel-outcomes tbody tr', (trs) => trs.map((tr) => [...tr.querySelectorAll('td')].map((td) => td.textContent.trim())));
    assert(JSON.stringify(shown.map((r) => r[0])) === JSON.stringify(all), `shown ${shown.map((r) => r[0])}, listed ${all}`);
    body.outcomes.forEach((o, i) => {
      const want = o.outcome.verdict.slice('VERDICT_'.length).toLowerCase().replace(/_/g, '-');
      assert(shown[i][2] === o.spec.scenario && shown[i][3] === o.spec.fs && shown[i][5] === want && shown[i][6] === o.outcome.violation_count,
        `row ${i} ${JSON.stringify(shown[i])} vs ${JSON.stringify({ spec: o.spec, verdict: want, violations: o.outcome.violation_count })}`);
    });
  });

  await check('a job page shows the patch series of its kernel', async () => {
    await visit(`/jobs/${violatingJob.job_id}`);
    await patchSeriesShown(page, `#job-kernel .kernel-card[data-kernel="${PATCHED}"] table.patches`, goodSeries);
    await visit(`/jobs/${crashJob}`);
    assert((await page.getAttribute('#job-kernel .kernel-card', 'data-registered')) === 'false', 'the host kernel shows as registered');
  });

  await check('no console errors over the whole run', async () => {
    // The refused actions above make the browser log their 401 responses.
    const unexpected = consoleErrors.filter((e) => !/status of 401/.test(e));
    assert(unexpected.length === 0, `console errors:\n${unexpected.join('\n')}`);
  });
} catch (e) {
  results.push(['setup', e]);
  console.log(`FAIL setup: ${e.stack ?? e}`);
} finally {
  if (context) await context.close().catch(() => undefined);
  await lf.stop();
}

// The patch table at `sel` lists `series` in order, with names and subjects.
async function patchSeriesShown(page, sel, series) {
  const rows = await page.$$eval(`${sel} tbody tr`, (trs) => trs.map((tr) => [...tr.children].map((td) => td.textContent.trim())));
  assert(rows.length === series.length, `${sel}: ${rows.length} rows for ${series.length} patches`);
  series.forEach((p, i) => {
    const subject = /^Subject: (.*)$/m.exec(fs.readFileSync(p, 'utf8'))[1];
    assert(rows[i][0] === String(i + 1) && rows[i][1] === path.basename(p) && rows[i][2] === subject, `${sel} row ${i}: ${rows[i]}`);
    assert(sha256File(p).startsWith(rows[i][3]) && rows[i][3].length === 12, `${sel} row ${i} sha ${rows[i][3]}`);
  });
}

// An outcome's RaceStrategy as the mapping prints it, with its alignment as
// the word a spec and the page use ("ALIGNMENT_FUZZY" -> "fuzzy").
function strategyOf(st) {
  if (!st) return st;
  assert(st.alignment.startsWith('ALIGNMENT_'), `alignment ${st.alignment}`);
  return { ...st, alignment: st.alignment.slice('ALIGNMENT_'.length).toLowerCase() };
}

// The highlighted step on the page is the stored violation's (protobuf's
// mapping: its kind the enum's name, VIOLATION_KIND_STALE_GRANT, shown as
// the word; its 64-bit times strings).
async function sameStep(page, stored) {
  const el = page.locator('#stale-step');
  const attr = async (n) => el.getAttribute(`data-${n}`);
  assert(stored.kind.startsWith('VIOLATION_KIND_'), `kind ${stored.kind}`);
  const kind = stored.kind.slice('VIOLATION_KIND_'.length).toLowerCase().replace(/_/g, '-');
  assert((await attr('kind')) === kind, `kind ${await attr('kind')} vs ${stored.kind}`);
  assert(Number(await attr('actor')) === stored.actor, 'actor differs');
  assert(Number(await attr('step')) === stored.step, `step ${await attr('step')} vs ${stored.step}`);
  assert((await attr('object')) === stored.object, `object ${await attr('object')} vs ${stored.object}`);
  assert(Number(await attr('invoke')) === Number(stored.invoke_ns), 'invoke differs');
  assert(Number(await attr('complete')) === Number(stored.complete_ns), 'complete differs');
  const text = await el.textContent();
  assert(text.includes(stored.observed) && text.includes(stored.object), `stale step text: ${text}`);
  const staleRow = await page.$$eval('table.steps tr.stale td:first-child', (tds) => tds.map((t) => Number(t.textContent)));
  assert(staleRow.length > 0 && staleRow.every((s) => s === stored.step), `highlighted walk rows ${staleRow}`);
}

// Triage pages: the issue of the positive control, its timeline, status,
// notes and a replay, all through the page.
async function triageChecks({ lf, page, visit, check, assert, sameStep, artifacts, crashJob, goodSeries }) {
  const issue = await waitFor('the violation grouped into an issue', 60_000, async () => {
    const { body } = await lf.api('GET', '/api/issues?scenario=setattr-lookup&kind=violation');
    return body.issues.find((i) => i.title.startsWith('stale-grant'));
  });
  await visit('/issues', 'issues');
  await check('the issues list shows the issue and filters it', async () => {
    assert((await page.textContent('#issues')).includes(issue.title), 'the issue is not listed');
    // The answer to the first filter is held back until the second one has
    // been drawn: a slow, older answer must not overwrite the newer table
    // (it did, and the list showed issues the filters exclude).
    let heldBack = null;
    const slow = (u) => u.pathname === '/api/issues' && u.searchParams.get('kind') === 'violation' && !u.searchParams.get('status');
    await page.route(slow, async (route) => {
      const response = await route.fetch();
      heldBack = (async () => {
        await page.waitForSelector('#issues', { state: 'detached' });
        await route.fulfill({ response });
      })();
    });
    await page.selectOption('#filter-kind', 'violation');
    await page.selectOption('#filter-status', 'fixed');
    await page.waitForFunction(() => !document.querySelector('#issues') && document.body.textContent.includes('No issue matches'));
    await waitFor('the first filter\'s request', 10_000, async () => heldBack !== null);
    await heldBack;
    await page.unroute(slow);
    await page.waitForTimeout(300); // let the page handle the old answer
    assert(!(await page.$('#issues')), 'an older answer overwrote the filtered list');
    assert(new URL(page.url()).hash.includes('status=fixed'), `the URL lost the filter: ${page.url()}`);
  });

  await check('the issue page draws the timeline of the stored violation', async () => {
    const { body } = await lf.api('GET', `/api/issues/${issue.id}`);
    assert(body.example && body.issue.example_violation, 'the issue has no example violation');
    await visit(`/issues/${issue.id}`);
    await page.waitForSelector('#timeline[data-drawn] canvas', { timeout: 10_000 });
    await sameStep(page, body.issue.example_violation);
    await page.screenshot({ path: path.join(artifacts, 'issue.png'), fullPage: true });
  });

  await check('the issue page shows how the example occurrence raced (its strategy)', async () => {
    const { body } = await lf.api('GET', `/api/issues/${issue.id}`);
    const st = strategyOf(body.example?.outcome?.strategy);
    // The nightly left the strategy to each job's seed: the agent chose and reported it.
    assert(st && ['fuzzy', 'free', 'both'].includes(st.alignment), `no strategy in the example outcome: ${JSON.stringify(body.example)}`);
    assert(st.chosen_by_seed.includes('alignment') && st.observers >= 1, `strategy ${JSON.stringify(st)}`);
    assert(typeof st.widening === 'string' && st.widening.startsWith('o'), `widening summary ${JSON.stringify(st.widening)}`);
    await visit(`/issues/${issue.id}`);
    const shown = '.outcome .strategy';
    await page.waitForSelector(shown, { timeout: 10_000 });
    assert((await page.getAttribute(shown, 'data-alignment')) === st.alignment, 'the page shows another alignment');
    assert(Number(await page.getAttribute(shown, 'data-observers')) === st.observers, 'the page shows another observer count');
    assert((await page.getAttribute(shown, 'data-pinned')) === String(st.pinned), 'the page shows another pinning');
    const text = await page.textContent(shown);
    assert(text.includes(st.alignment) && text.includes(`${st.observers} observer`) && text.includes(st.widening), text);
    await page.locator(shown).screenshot({ path: path.join(artifacts, 'issue-strategy.png') });
  });

  await check('the issue page shows the patch series of the kernel it was found on', async () => {
    await visit(`/issues/${issue.id}`);
    const card = `#issue-kernels .kernel-card[data-kernel="${PATCHED}"]`;
    await patchSeriesShown(page, `${card} table.patches`, goodSeries);
    assert((await page.textContent(`${card} .badge`)) === 'ready', 'no ready badge on the card');
    await page.locator('#issue-kernels').screenshot({ path: path.join(artifacts, 'issue-found-on.png') });
    await page.click(`${card} a[href="#/kernels/${PATCHED}"]`);
    await page.waitForSelector(`.page[data-page="/kernels/${PATCHED}"][data-ready]`);
  });

  await check('a status change without the token is refused', async () => {
    await page.evaluate(() => localStorage.removeItem('leapfrog.token'));
    await visit(`/issues/${issue.id}`);
    await page.selectOption('#status', 'invalid');
    await page.click('#save-status');
    await page.waitForFunction(() => /refused/.test(document.querySelector('#action-message')?.textContent ?? ''));
    const { body } = await lf.api('GET', `/api/issues/${issue.id}`);
    assert(body.issue.status === issue.status, `status changed to ${body.issue.status}`);
  });

  await check('a status change persists across a reload', async () => {
    await page.evaluate((t) => localStorage.setItem('leapfrog.token', t), lf.token);
    await visit(`/issues/${issue.id}`);
    await page.selectOption('#status', 'triaged');
    await page.click('#save-status');
    await page.waitForFunction(() => document.querySelector('#issue-status')?.textContent === 'triaged');
    await page.reload();
    await page.waitForSelector('.page[data-ready]');
    assert((await page.textContent('#issue-status')) === 'triaged', 'the status did not persist');
    assert((await page.inputValue('#status')) === 'triaged', 'the status picker does not show it');
  });

  await check('a note with markup is shown as text', async () => {
    const note = '<b>bold?</b><script>window.__xss=3</script>';
    await page.fill('#note-text', note);
    await page.click('#add-note');
    await page.waitForFunction((n) => [...document.querySelectorAll('.note-text')].some((e) => e.textContent === n), note);
    assert((await page.$$('.note-text *')).length === 0, 'the note became elements');
    assert((await page.evaluate(() => window.__xss)) === undefined, 'injected code ran');
  });

  await check('replay starts a job and shows its rate when it finishes', async () => {
    await page.fill('#replay-runs', '2');
    await page.click('#replay');
    const action = await waitFor('the replay action', 20_000, async () => {
      const { body } = await lf.api('GET', `/api/issues/${issue.id}`);
      return body.issue.actions.find((a) => a.kind === 'ACTION_KIND_REPLAY');
    });
    assert(action.campaign_ids.length > 0 || action.state === 'ACTION_STATE_RUNNING', 'the replay queued nothing');
    await page.waitForSelector(`#action-${action.id}[data-kind=replay]`, { timeout: 10_000 });
    const done = await waitFor('the replay to finish', 300_000, async () => {
      const { body } = await lf.api('GET', `/api/actions/${action.id}`);
      return body.state !== 'ACTION_STATE_RUNNING' && body;
    }, 1000);
    assert(done.state === 'ACTION_STATE_DONE' && done.rate, `replay ended ${done.state}: ${done.error}`);
    await page.waitForSelector(`#action-${action.id} .rate`, { timeout: 10_000 });
    const shown = Number(await page.getAttribute(`#action-${action.id} .rate`, 'data-rate'));
    assert(shown === done.rate.rate, `page rate ${shown} vs stored ${done.rate.rate}`);
    assert(done.rate.runs === 2, `runs ${done.rate.runs}`);
    // The replay races as the example did: its spec carries the example's strategy.
    const example = strategyOf((await lf.api('GET', `/api/issues/${issue.id}`)).body.example.outcome.strategy);
    assert(done.spec.align === example.alignment && done.spec.observers === example.observers &&
      done.spec.pin === (example.pinned ? 'CPU_PINNING_ON' : 'CPU_PINNING_OFF'), `replay spec ${JSON.stringify(done.spec)} vs example ${JSON.stringify(example)}`);
    await page.waitForSelector(`#action-${action.id} .action-strategy[data-align="${example.alignment}"]`, { timeout: 10_000 });
    // ... and its runs did: the agents report the same strategy, fixed by the spec this time.
    const replayed = (await lf.api('GET', `/api/campaigns/${done.campaign_ids[0]}`)).body.jobs;
    assert(replayed.length === 2, `replay jobs ${JSON.stringify(replayed)}`);
    for (const j of replayed) {
      const run = strategyOf((await lf.api('GET', `/api/jobs/${j.job_id}`)).body.outcomes.at(-1)?.outcome?.strategy);
      assert(run && run.alignment === example.alignment && run.observers === example.observers &&
        run.pinned === example.pinned && run.chosen_by_seed.length === 0, `replay job ${j.job_id} raced ${JSON.stringify(run)}`);
    }
    await page.screenshot({ path: path.join(artifacts, 'issue-replayed.png'), fullPage: true });
  });

  await check('a crash issue shows its console tail as text', async () => {
    const { body } = await lf.api('GET', '/api/issues');
    const crash = body.issues.find((i) => i.example_job_id === String(crashJob));
    assert(crash, `the crash outcome of job ${crashJob} was not grouped: ${JSON.stringify(body.issues.map((i) => i.title))}`);
    await visit(`/issues/${crash.id}`, 'issue-crash');
    const text = await page.textContent('pre.console');
    assert(text.includes('<script>window.__xss=1</script>'), `console shows ${JSON.stringify(text)}`);
    assert((await page.$$('pre.console *')).length === 0, 'the console tail became elements');
    assert((await page.evaluate(() => window.__xss)) === undefined, 'injected code ran');
  });

  // Last of these: its jobs stay queued for good.
  await check('a campaign that no agent can run says why, in the CLI and on its page', async () => {
    const out = JSON.parse(lf.cli(['campaign', 'run', '--name', 'stuck-e2e', '--scenario', 'setattr-lookup',
      '--kernel', BROKEN, '--kernel', 'no-such-label', '--fs', 'tmpfs', '--json']));
    assert(out.warnings.length === 2, `CLI warnings ${JSON.stringify(out.warnings)}`);
    const { body } = await lf.api('GET', `/api/campaigns/${out.campaign}`);
    const warnings = body.campaign.warnings;
    assert(warnings.some((w) => w.includes(`"${BROKEN}"`) && w.includes('last build failed')), `API warnings ${JSON.stringify(warnings)}`);
    assert(warnings.some((w) => w.includes('"no-such-label"') && w.includes('check the label')), `API warnings ${JSON.stringify(warnings)}`);
    await visit(`/campaigns/${out.campaign}`, 'campaign-unserved');
    const shown = await page.$$eval('#campaign-warnings li', (lis) => lis.map((li) => li.textContent));
    assert(JSON.stringify(shown) === JSON.stringify(warnings), `page shows ${JSON.stringify(shown)}`);
    // A campaign that ran shows none.
    const { body: list } = await lf.api('GET', '/api/campaigns');
    const ran = list.campaigns.find((c) => c.state === 'CAMPAIGN_STATE_DONE');
    assert(ran, 'no finished campaign');
    await visit(`/campaigns/${ran.id}`);
    assert(!(await page.$('#campaign-warnings')), `campaign ${ran.id} shows warnings`);
    // The overview features the nightly, which ran: no warnings there either.
    const { body: o } = await lf.api('GET', '/api/overview');
    assert(Array.isArray(o.campaign.warnings) && o.campaign.warnings.length === 0, `overview warnings ${JSON.stringify(o.campaign.warnings)}`);
    await visit('/');
    assert(!(await page.$('#campaign-warnings')), 'the overview shows warnings');
  });
}

const failed = results.filter(([, e]) => e).length;
console.log(`${results.length - failed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
