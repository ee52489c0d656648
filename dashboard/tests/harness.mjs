// A real `leapfrog up` in a temp data folder for the browser test: start,
// talk to its HTTP API and CLI, add agents, write into its database, stop.
import { execFileSync, spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';

// Polls `probe` until it returns something truthy; throws after `ms`.
export async function waitFor(what, ms, probe, every = 250) {
  const deadline = Date.now() + ms;
  let last;
  for (;;) {
    try {
      const v = await probe();
      if (v) return v;
    } catch (e) {
      last = e;
    }
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}${last ? `: ${last.message}` : ''}`);
    await new Promise((r) => setTimeout(r, every));
  }
}

// Protocol buffer wire format, just enough for the rows insertCrashOutcome and
// insertScaleOutcomes write.
function varint(n) {
  const out = [];
  while (n > 127) {
    out.push((n & 127) | 128);
    n = Math.floor(n / 128);
  }
  out.push(n);
  return Buffer.from(out);
}
const pbString = (field, s) => {
  const b = Buffer.from(s, 'utf8');
  return Buffer.concat([varint((field << 3) | 2), varint(b.length), b]);
};
const pbVarint = (field, n) => Buffer.concat([varint(field << 3), varint(n)]);
const pbBytes = (field, b) => Buffer.concat([varint((field << 3) | 2), varint(b.length), b]);
const f64 = (x) => {
  const b = Buffer.alloc(8);
  b.writeDoubleLE(x);
  return b;
};
const pbDouble = (field, x) => Buffer.concat([varint((field << 3) | 1), f64(x)]);
// google.protobuf.Duration of whole and fractional seconds.
const pbSeconds = (field, s) =>
  pbBytes(field, Buffer.concat([pbVarint(1, Math.floor(s)), pbVarint(2, Math.round((s - Math.floor(s)) * 1e9))]));

// A lookup-scale run as the agent reports it (v1.ScaleRun, Outcome field 28),
// from the points and host of the run's JSON (`leapfrog-agent run --json`),
// with the defaults the agent's reader gives an absent field.
function scaleRunBytes(outcomeJson) {
  const or = (v, d) => (v === undefined || v === null ? d : Number(v));
  const points = (outcomeJson.scale || []).map((p) =>
    pbBytes(1, Buffer.concat([
      pbString(1, p.test),
      pbVarint(2, p.mode === 'threads' ? 2 : 1),
      pbVarint(3, Number(p.tasks)),
      pbDouble(4, Number(p.ops_per_sec)),
      pbBytes(5, Buffer.concat((p.samples || []).map((x) => f64(Number(x))))),
      pbDouble(6, or(p.stddev, 0)),
      pbDouble(7, or(p.ci95_low, p.ops_per_sec)),
      pbDouble(8, or(p.ci95_high, p.ops_per_sec)),
      pbDouble(9, or(p.idle_pct, -1)),
      pbDouble(10, or(p.other_load, -1)),
      pbDouble(11, or(p.task_cpu_s, 0)),
      pbDouble(12, or(p.window_s, 0)),
      pbDouble(13, or(p.host_load, -1)),
    ])));
  const h = outcomeJson.scale_host;
  const host = h
    ? [pbBytes(2, Buffer.concat([
        pbVarint(1, or(h.cpus, 0)),
        pbSeconds(2, or(h.sample_s, 0)),
        pbSeconds(3, or(h.warmup_s, 0)),
        pbDouble(4, or(h.max_other_load, 0)),
        pbDouble(5, or(h.load_average, -1)),
        pbDouble(6, or(h.max_host_load, -1)),
        pbVarint(7, or(h.host_cpus, 0)),
        pbVarint(8, or(h.vcpus, 0)),
        pbString(9, h.vcpu_pinning || ''),
        ...(h.warnings || []).map((w) => pbString(10, w)),
        pbString(11, h.boot_id || ''),
      ]))]
    : [];
  return Buffer.concat([...points, ...host]);
}

// fetch, sent again once if it went out on a pooled connection the server had
// already closed (UND_ERR_SOCKET "other side closed"): the server closes idle
// connections after 5 s, and while a synchronous step (execFileSync of a
// kernel build) blocks the event loop, undici cannot drop them first. The
// request never reached the server, so sending it again is safe.
async function fetchOnce(url, init) {
  try {
    return await fetch(url, init);
  } catch (e) {
    if (e?.cause?.code !== 'UND_ERR_SOCKET') throw e;
    return fetch(url, init);
  }
}

export class Leapfrog {
  constructor(exe) {
    if (!exe || !fs.existsSync(exe)) throw new Error(`no leapfrog executable "${exe}"`);
    this.exe = path.resolve(exe);
    this.agentExe = path.join(path.dirname(this.exe), 'leapfrog-agent');
    this.children = [];
  }

  async start() {
    this.data = fs.mkdtempSync('/var/tmp/leapfrog-dash-');
    fs.chmodSync(this.data, 0o755);
    const log = fs.openSync(path.join(this.data, 'up.log'), 'w');
    // Kernels built into <data>/kcache (browser_test.mjs): their logs are shown.
    // The notifications page adds a webhook on loopback, which only an
    // allow-list lets through.
    const args = ['--data-dir', this.data, 'up', '--agents', '2', '--heartbeat-ms', '500',
      '--webhook-allow', '127.0.0.1'];
    this.up = spawn(this.exe, [...args, '--build-cache', path.join(this.data, 'kcache')], {
      stdio: ['ignore', log, log],
    });
    this.upExit = new Promise((resolve) => this.up.on('exit', resolve));
    let exited = false;
    this.upExit.then(() => (exited = true));
    await waitFor('leapfrog up to write its addresses', 60_000, () => {
      if (exited) throw new Error(`leapfrog up exited:\n${fs.readFileSync(path.join(this.data, 'up.log'), 'utf8')}`);
      return fs.existsSync(path.join(this.data, 'http')) && fs.existsSync(path.join(this.data, 'address'));
    });
    this.http = fs.readFileSync(path.join(this.data, 'http'), 'utf8').trim();
    this.address = fs.readFileSync(path.join(this.data, 'address'), 'utf8').trim();
    this.token = fs.readFileSync(path.join(this.data, 'token'), 'utf8').trim();
    await waitFor('two local agents', 30_000, async () => (await this.api('GET', '/api/agents')).body.agents.filter((r) => r.agent.online).length >= 2);
  }

  // An extra agent advertising kernel `label` (standing in for another build).
  startAgent(name, label) {
    const child = spawn(this.agentExe, ['connect', '--coordinator', this.address, '--token-file', path.join(this.data, 'token'),
      '--name', name, '--kernel-label', label, '--spool', path.join(this.data, `spool-${name}`), '--die-with-parent'], {
      stdio: ['ignore', 'ignore', fs.openSync(path.join(this.data, `${name}.log`), 'w')],
    });
    this.children.push(child);
    return child;
  }

  cli(args) {
    return execFileSync(this.exe, ['--data-dir', this.data, ...args], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] });
  }

  async api(method, p, body, token) {
    const headers = {};
    if (body !== undefined) headers['Content-Type'] = 'application/json';
    if (token) headers.Authorization = `Bearer ${token}`;
    const res = await fetchOnce(this.http + p, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
    return { status: res.status, body: await res.json().catch(() => null) };
  }

  async rawPost(p, raw, token) {
    const res = await fetchOnce(this.http + p, { method: 'POST', headers: { Authorization: `Bearer ${token}` }, body: raw });
    return { status: res.status, body: await res.json().catch(() => null) };
  }

  psql(sql) {
    const pg = path.join(this.data, 'postgres');
    const port = fs.readFileSync(path.join(pg, 'leapfrog.port'), 'utf8').trim();
    const password = fs.readFileSync(path.join(pg, 'leapfrog.password'), 'utf8').trim();
    const url = `postgresql://leapfrog:${encodeURIComponent(password)}@127.0.0.1:${port}/leapfrog`;
    return execFileSync('psql', [url, '-v', 'ON_ERROR_STOP=1', '-q', '-At', '-c', sql], { encoding: 'utf8' }).trim();
  }

  // Stores one campaign on `kernel` with a passing lookup-scale job per
  // outcome JSON (a kernel's run set, in report order), as an agent's reports
  // would be stored; returns the job ids.
  insertScaleOutcomes(kernel, outcomeJsons) {
    const campaign = Buffer.concat([pbString(1, `scale-${kernel}`), pbString(2, 'lookup-scale'), pbString(3, kernel), pbString(4, 'tmpfs')]);
    const spec = Buffer.concat([pbString(1, 'lookup-scale'), pbVarint(2, 1), pbString(3, 'tmpfs')]);
    const hex = (b) => `decode('${b.toString('hex')}', 'hex')`;
    const campaignId = Number(this.psql(`
      INSERT INTO campaigns (name, spec, schedule_id, job_count, created_at)
      VALUES ('scale-${kernel}', ${hex(campaign)}, 0, ${outcomeJsons.length}, now()) RETURNING id`).split('\n')[0]);
    return outcomeJsons.map((outcomeJson) => {
      const outcome = Buffer.concat([pbVarint(1, 1), pbBytes(28, scaleRunBytes(outcomeJson))]);
      const out = this.psql(`
        WITH a AS (SELECT id FROM agents ORDER BY name LIMIT 1),
             j AS (INSERT INTO jobs (campaign_id, scenario, fs, kernel_label, spec, state, attempt, max_attempts,
                                     agent_id, verdict, finished_at)
                   SELECT ${campaignId}, 'lookup-scale', 'tmpfs', '${kernel}', ${hex(spec)}, 'done', 1, 3, a.id, 1, now()
                   FROM a RETURNING id, campaign_id, agent_id)
        INSERT INTO outcomes (job_id, attempt, campaign_id, agent_id, verdict, ops, lookups_checked, offsets_checked,
                              violation_count, race_window_hits, error, outcome, reported_at)
        SELECT id, 1, campaign_id, agent_id, 1, 0, 0, 0, 0, 0, '', ${hex(outcome)}, now() FROM j
        RETURNING job_id`);
      const jobId = Number(out.split('\n')[0]);
      // The store also keeps a passing lookup-scale run and its points as rows
      // (coordinator/store/pg_scale.cc), with scale_point_from_json's defaults:
      // the scaling routes read those.
      const lit = (v) => `'${String(v).replace(/'/g, "''")}'`;
      const or = (v, d) => (v === undefined || v === null ? d : Number(v));
      const points = (outcomeJson.scale || []).map((p, i) =>
        `(${i}, ${lit(p.test)}, ${lit(p.mode)}, ${Number(p.tasks)}, ${Number(p.ops_per_sec)}, ` +
        `ARRAY[${(p.samples || []).map(Number).join(',')}]::float8[], ${or(p.stddev, 0)}, ` +
        `${or(p.ci95_low, p.ops_per_sec)}, ${or(p.ci95_high, p.ops_per_sec)}, ${or(p.idle_pct, -1)}, ` +
        `${or(p.other_load, -1)}, ${or(p.task_cpu_s, 0)}, ${or(p.window_s, 0)}, ${or(p.host_load, -1)})`);
      const host = outcomeJson.scale_host ? `${lit(JSON.stringify(outcomeJson.scale_host))}::jsonb` : 'NULL';
      this.psql(`
        INSERT INTO scale_runs (job_id, attempt, campaign_id, kernel_label, fs, seq, reported_at, host)
        SELECT o.job_id, o.attempt, o.campaign_id, j.kernel_label, j.fs, o.seq, o.reported_at, ${host}
        FROM outcomes o JOIN jobs j ON j.id = o.job_id WHERE o.job_id = ${jobId} AND o.attempt = 1;
        INSERT INTO scale_points (job_id, attempt, idx, testcase, mode, tasks, ops_per_sec, samples, stddev,
                                  ci95_low, ci95_high, idle_pct, other_load, task_cpu_s, window_s, host_load)
        SELECT ${jobId}, 1, p.* FROM (VALUES ${points.join(', ')})
          AS p(idx, testcase, mode, tasks, ops_per_sec, samples, stddev, ci95_low, ci95_high, idle_pct,
               other_load, task_cpu_s, window_s, host_load);`);
      return jobId;
    });
  }

  // Stores a done job whose outcome is a kernel crash with `console` as its
  // console tail, as a VM agent's report would be stored; returns the job id.
  insertCrashOutcome(console) {
    const campaign = Buffer.concat([pbString(1, 'console-e2e'), pbString(2, 'setattr-lookup'), pbString(3, 'host'), pbString(4, 'tmpfs')]);
    const spec = Buffer.concat([pbString(1, 'setattr-lookup'), pbVarint(2, 7), pbString(3, 'tmpfs')]);
    const outcome = Buffer.concat([pbVarint(1, 5), pbString(2, 'kernel crashed'), pbString(15, console)]);
    const hex = (b) => `decode('${b.toString('hex')}', 'hex')`;
    const out = this.psql(`
      WITH c AS (INSERT INTO campaigns (name, spec, schedule_id, job_count, created_at)
                 VALUES ('console-e2e', ${hex(campaign)}, 0, 1, now()) RETURNING id),
           a AS (SELECT id FROM agents ORDER BY name LIMIT 1),
           j AS (INSERT INTO jobs (campaign_id, scenario, fs, kernel_label, spec, state, attempt, max_attempts,
                                   agent_id, verdict, finished_at)
                 SELECT c.id, 'setattr-lookup', 'tmpfs', 'host', ${hex(spec)}, 'done', 1, 3, a.id, 5, now()
                 FROM c, a RETURNING id, campaign_id, agent_id)
      INSERT INTO outcomes (job_id, attempt, campaign_id, agent_id, verdict, ops, lookups_checked, offsets_checked,
                            violation_count, race_window_hits, error, outcome, reported_at)
      SELECT id, 1, campaign_id, agent_id, 5, 0, 0, 0, 0, 0, 'kernel crashed', ${hex(outcome)}, now() FROM j
      RETURNING job_id`);
    return Number(out.split('\n')[0]);
  }

  async stop() {
    for (const c of this.children) if (c.exitCode === null) c.kill('SIGTERM');
    if (this.up && this.up.exitCode === null) {
      this.up.kill('SIGTERM');
      const timeout = new Promise((r) => setTimeout(() => r('timeout'), 30_000));
      if ((await Promise.race([this.upExit, timeout])) === 'timeout') this.up.kill('SIGKILL');
    }
    if (this.data && !process.env.LEAPFROG_KEEP_DATA) fs.rmSync(this.data, { recursive: true, force: true });
  }
}
