// Hostile-request fuzzing of the prediction server: `sublinear serve` (the real command, in a child process)
// gets --requests malformed requests over loopback, each derived from (seed, index) alone, so a failure is
// replayed by its pair:
//
//   node dist/bench/fuzz-http.js [--requests N] [--seed S] [--connections C] [--model m.sl] [--json]
//
// Defaults: --requests 10000, --seed 1, --connections 8; without --model a small model is trained first.
// The kinds of case (httpCase): malformed bodies (bench/serve-fuzz.ts: flipped bytes, cut-off JSON, wrong
// types, out-of-range ids, deep nesting), bodies over the server's --max-body (declared and streamed), wrong
// methods, unknown paths, and raw bytes on a socket that are not valid HTTP (a bad request line or version,
// a header too large, a bad Content-Length, bad chunked framing, both Content-Length and chunked).
//
// The contract checked for each case (caseProblem): an answer within 10 s whose status is 4xx, with a JSON
// `error` message for the server's own refusals; a body that happens to be a valid request may get 200
// with predictions. Never a 5xx, a connection closed without an answer, or a hang. After all cases: the
// server process is alive, answers the same valid request exactly as before, and its resident memory grew
// by less than --max-growth-mb (default 128). Exit code 1 when anything failed, with the seed and the
// failing cases' indices; the last stdout line is a JSON report.
import type { ChildProcess } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { synthesize } from '../src/datasets/synth.js';
import { Network } from '../src/network/network.js';
import { fit } from '../src/train/fit-network.js';
import { defineCommand } from '../src/cli/args.js';
import { benchMain } from './cli.js';
import { CaseRng } from './case-rng.js';
import { fuzzBodies } from './serve-fuzz.js';
import { startServer } from './serve-child.js';

export type HttpCaseKind = 'body' | 'oversize' | 'method' | 'path' | 'raw';
export const HTTP_CASE_KINDS: readonly HttpCaseKind[] = ['body', 'oversize', 'method', 'path', 'raw'];

/** One request: sent with fetch (method, path, body), or as raw bytes on a socket (`raw`). */
export interface HttpCase {
  kind: HttpCaseKind;
  method: string;
  path: string;
  body?: Buffer;
  /** The body is sent in pieces without a Content-Length (chunked), so only its streamed size can be refused. */
  streamed?: boolean;
  raw?: Buffer;
}

/** The server's limits the cases are built against. */
export interface HttpFuzzTarget {
  /** A valid POST /predict body for the served model. */
  valid: string;
  /** The server's --max-body, bytes. */
  maxBodyBytes: number;
}

/** Request lines and headers that are not valid HTTP/1.1 (Node's parser refuses them: 400, or 431 for a header too large). */
const RAW: readonly ((r: CaseRng) => string)[] = [
  () => 'GARBAGE\r\n\r\n',
  (r) => `POST /predict HTTP/${r.pick(['9.9', '1.x', '2.0', ''])}\r\nHost: x\r\n\r\n`,
  (r) => `POST /predict HTTP/1.1\r\nHost: x\r\nContent-Length: ${r.pick(['abc', '-1', '1e3', '99999999999999999999', '1, 2'])}\r\n\r\n{}`,
  (r) => `POST /predict HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n${r.pick(['zz', '-1', '1\r\n{', 'fffffffffffffffff'])}\r\n\r\n`,
  () => 'POST /predict HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n',
  (r) => `GET /health HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(20_000 + r.int(50_000))}\r\n\r\n`,
  (r) => `POST /predict HTTP/1.1\r\nHost: x\r\n${r.pick(['Bad Header', ': empty-name', 'X-\u0001: ctl', 'Content-Length : 2'])}\r\n\r\n{}`,
  (r) => `${r.pick(['POST', 'get', 'P0ST', ''])} ${r.pick(['/predict', 'predict', '*', '/%', ''])} HTTP/1.1\r\nHost: x\r\n\r\n`,
];

/** The case of (seed, index): its kind and bytes. */
export function httpCase(seed: number, index: number, t: HttpFuzzTarget): HttpCase {
  const r = new CaseRng(seed, index);
  const kind = r.pick(['body', 'body', 'body', 'body', 'oversize', 'method', 'path', 'raw', 'raw'] as const);
  switch (kind) {
    case 'body':
      return { kind, method: 'POST', path: '/predict', body: fuzzBodies(t.valid, r.int(2 ** 31))() };
    case 'oversize': {
      // A valid body padded past the limit: refused whole, declared (413 before reading) or streamed.
      const body = Buffer.from(' '.repeat(t.maxBodyBytes + 1 + r.int(4096)) + t.valid);
      return { kind, method: 'POST', path: '/predict', body, streamed: r.chance(0.5) };
    }
    case 'method':
      return { kind, method: r.pick(['GET', 'PUT', 'DELETE', 'PATCH', 'OPTIONS']), path: r.pick(['/predict', '/health?x=1', '/model']), body: undefined };
    case 'path':
      return { kind, method: r.pick(['GET', 'POST']), path: r.pick(['/index.html', '/predict/', '/predictx', '/%2e%2e/etc/passwd', `/${'a'.repeat(r.int(4000))}`, '/model/../predict']), body: undefined };
    case 'raw':
      return { kind, method: '', path: '', raw: Buffer.from(r.pick(RAW)(r), 'latin1') };
  }
}

/** What the server answered: a status (null: no answer), the body, or how the exchange failed. */
export interface HttpAnswer {
  status: number | null;
  body: string;
  error?: string;
}

/** The contract for one answer; null when it holds. */
export function caseProblem(c: HttpCase, a: HttpAnswer): string | null {
  if (a.status === null) return `no answer: ${a.error ?? 'connection closed'}`;
  if (a.status >= 500) return `status ${a.status}: ${a.body.slice(0, 200)}`;
  if (a.status === 200) {
    // Only a body case can be a valid request by chance (a wrong field that the server takes as its default).
    if (c.kind !== 'body' && !(c.kind === 'method' && c.method === 'GET')) return `status 200 for a ${c.kind} case: ${a.body.slice(0, 200)}`;
    return null;
  }
  if (a.status < 400) return `status ${a.status}: ${a.body.slice(0, 200)}`;
  // The server's own refusals carry a message; Node's parser refusals (raw cases) have an empty body.
  if (c.kind !== 'raw') {
    try {
      if (typeof (JSON.parse(a.body) as { error?: unknown }).error !== 'string') return `status ${a.status} without an error message: ${a.body.slice(0, 200)}`;
    } catch {
      return `status ${a.status} with a body that is not JSON: ${a.body.slice(0, 200)}`;
    }
  }
  return null;
}

const CASE_TIMEOUT_MS = 10_000;

/** Sends one case to the server at `url` and waits for its answer (CASE_TIMEOUT_MS at most). */
export async function sendCase(url: string, c: HttpCase): Promise<HttpAnswer> {
  if (c.raw) return sendRaw(url, c.raw);
  try {
    const body = c.body && c.streamed
      ? new ReadableStream<Uint8Array>({ start(ctl) {
        for (let o = 0; o < c.body!.length; o += 16384) ctl.enqueue(c.body!.subarray(o, o + 16384));
        ctl.close();
      } })
      : c.body;
    const r = await fetch(`${url}${c.path}`, {
      method: c.method, body, signal: AbortSignal.timeout(CASE_TIMEOUT_MS), ...(c.streamed ? { duplex: 'half' } : {}),
    } as RequestInit);
    return { status: r.status, body: await r.text() };
  } catch (e) {
    // A server that refuses a streamed body (413) closes the connection while the client still sends: the
    // answer may still have been read. fetch reports that as a failed request without a status.
    const err = e as Error & { cause?: { code?: string; message?: string } };
    return { status: null, body: '', error: `${err.message}${err.cause ? ` (${err.cause.code ?? err.cause.message})` : ''}` };
  }
}

/** Raw bytes on a fresh connection; the answer's status line. */
function sendRaw(url: string, bytes: Buffer): Promise<HttpAnswer> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve) => {
    const s = connect(Number(port), hostname);
    let got = '';
    let done = false;
    const finish = (a: HttpAnswer) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      s.destroy();
      resolve(a);
    };
    const timer = setTimeout(() => finish({ status: null, body: got, error: `no answer within ${CASE_TIMEOUT_MS} ms` }), CASE_TIMEOUT_MS);
    s.on('connect', () => s.write(bytes));
    s.on('data', (d) => {
      got += d.toString('latin1');
      const m = /^HTTP\/1\.[01] (\d{3}) /.exec(got);
      if (m && got.includes('\r\n\r\n')) finish({ status: Number(m[1]), body: got.slice(got.indexOf('\r\n\r\n') + 4) });
    });
    // An error while writing (the server closed after answering) is not the answer: wait for data or close.
    s.on('error', () => {});
    s.on('close', () => {
      const m = /^HTTP\/1\.[01] (\d{3}) /.exec(got);
      finish(m ? { status: Number(m[1]), body: '' } : { status: null, body: got, error: 'connection closed without an answer' });
    });
  });
}

export interface HttpFuzzReport {
  seed: number;
  requests: number;
  /** Per kind, the statuses of the answers (`none`: no answer). */
  statuses: Record<HttpCaseKind, Record<string, number>>;
  failures: { index: number; kind: HttpCaseKind; problem: string }[];
  seconds: number;
}

/** Sends cases 0 .. requests - 1 of `seed` over `connections` concurrent clients. */
export async function runHttpFuzz(url: string, t: HttpFuzzTarget, o: { requests: number; seed: number; connections: number }): Promise<HttpFuzzReport> {
  const t0 = performance.now();
  const statuses = Object.fromEntries(HTTP_CASE_KINDS.map((k) => [k, {}])) as HttpFuzzReport['statuses'];
  const failures: HttpFuzzReport['failures'] = [];
  let next = 0;
  const client = async () => {
    for (let i = next++; i < o.requests; i = next++) {
      const c = httpCase(o.seed, i, t);
      const a = await sendCase(url, c);
      const key = a.status === null ? 'none' : String(a.status);
      statuses[c.kind][key] = (statuses[c.kind][key] ?? 0) + 1;
      const problem = caseProblem(c, a);
      if (problem) failures.push({ index: i, kind: c.kind, problem });
    }
  };
  await Promise.all(Array.from({ length: o.connections }, client));
  failures.sort((a, b) => a.index - b.index);
  return { seed: o.seed, requests: o.requests, statuses, failures, seconds: (performance.now() - t0) / 1000 };
}

/** Resident memory of process `pid` now and at its peak, MiB (Linux /proc; null elsewhere). */
async function rssOf(pid: number): Promise<{ rss: number; peak: number } | null> {
  try {
    const s = await readFile(`/proc/${pid}/status`, 'utf8');
    const kb = (k: string) => Number(new RegExp(`^${k}:\\s+(\\d+) kB`, 'm').exec(s)?.[1] ?? NaN);
    return { rss: kb('VmRSS') / 1024, peak: kb('VmHWM') / 1024 };
  } catch {
    return null;
  }
}

export const fuzzHttpCmd = defineCommand({
  name: 'bench/fuzz-http',
  summary: 'Hostile-request fuzzing of `sublinear serve`: every malformed request gets a 4xx, memory stays bounded.',
  description:
    'Case i of seed s is derived from (s, i) alone: a failure is replayed with the same --seed and at least\n' +
    'i + 1 --requests. Exit code 1 when a case fails, the server dies, answers a valid request differently\n' +
    'afterwards, or grows by more than --max-growth-mb.',
  flags: {
    requests: { type: 'integer', min: 1, default: 10_000, valueName: 'n', description: 'malformed requests' },
    seed: { type: 'integer', min: 0, default: 1, valueName: 's', description: 'seed of every case' },
    connections: { type: 'integer', min: 1, default: 8, valueName: 'n', description: 'concurrent clients' },
    model: { type: 'string', valueName: 'file', description: 'model to serve (default: a small synthetic one, trained first)' },
    maxGrowthMb: { type: 'integer', min: 1, default: 128, valueName: 'MiB', description: 'most the server\'s resident memory may grow' },
    json: { type: 'boolean', description: 'print only the JSON report' },
  },
  run: async (o, io) => {
    const say = (s: string) => void (o.json ? undefined : io.out(s));
    const dir = await mkdtemp(join(tmpdir(), 'sublinear-fuzz-http-'));
    let child: ChildProcess | undefined;
    try {
      let model = o.model;
      if (!model) {
        const data = synthesize({ shape: 'tiny', points: 500, seed: 3 });
        const net = new Network({ inputDim: data.features, seed: 1, layers: [{ size: 16 }, { size: data.labels, sampling: { hash: 'dwta', K: 3, L: 8 } }] });
        await fit(net, data, { epochs: 1, workers: 0 });
        model = join(dir, 'model.sl');
        await net.save(model);
      }
      const maxBodyBytes = 64 * 1024;
      const started = await startServer(model, ['--workers', '1', '--max-body', String(maxBodyBytes)]);
      child = started.child;
      const { url } = started;
      const info = (await (await fetch(`${url}/model`)).json()) as { inputDim: number };
      const valid = JSON.stringify({ instances: [{ features: { 0: 0.5, [String(info.inputDim - 1)]: 1 } }, { features: { 1: 1 } }], k: 3 });
      const probe = JSON.stringify({ features: { 2: 1, [String(info.inputDim >> 1)]: 0.25 }, k: 3 });
      const ask = async () => {
        const r = await fetch(`${url}/predict`, { method: 'POST', body: probe });
        return `${r.status} ${await r.text()}`;
      };
      const before = await ask();
      const mem0 = await rssOf(child.pid!);
      say(`fuzz-http: ${o.requests} requests (seed ${o.seed}) to sublinear serve (${url}, --max-body ${maxBodyBytes}), ${o.connections} connections\n`);
      const report = await runHttpFuzz(url, { valid, maxBodyBytes }, o);
      const alive = child.exitCode === null && child.signalCode === null;
      const after = alive ? await ask().catch((e: Error) => `failed: ${e.message}`) : 'the server exited';
      const mem1 = await rssOf(child.pid!);
      const growth = mem0 && mem1 ? mem1.peak - mem0.rss : null;
      const problems = [
        ...(alive ? [] : [`the server exited (code ${child.exitCode}, signal ${child.signalCode})`]),
        ...(after === before ? [] : [`a valid request was answered ${JSON.stringify(before.slice(0, 200))} before and ${JSON.stringify(after.slice(0, 200))} after`]),
        ...(growth !== null && growth > o.maxGrowthMb ? [`resident memory grew by ${growth.toFixed(0)} MiB (limit ${o.maxGrowthMb})`] : []),
      ];
      for (const k of HTTP_CASE_KINDS) say(`  ${k}: ${Object.entries(report.statuses[k]).sort().map(([s, n]) => `${n} x ${s}`).join(', ') || 'none'}\n`);
      say(`  server memory: ${mem0 ? `${mem0.rss.toFixed(0)} MiB before, peak ${mem1!.peak.toFixed(0)} MiB` : 'not measured (no /proc)'}; a valid request answered the same afterwards: ${after === before}\n`);
      for (const f of report.failures.slice(0, 20)) say(`  FAIL case ${f.index} (${f.kind}): ${f.problem}\n`);
      if (report.failures.length > 20) say(`  ... ${report.failures.length - 20} more failing cases\n`);
      for (const p of problems) say(`  FAIL ${p}\n`);
      const failed = report.failures.length + problems.length;
      say(failed ? `${failed} failure(s); replay with --seed ${o.seed}\n` : `no failures (${report.seconds.toFixed(1)} s)\n`);
      io.out(JSON.stringify({ ...report, memoryMB: mem0 && mem1 ? { before: mem0.rss, peak: mem1.peak } : null, servesAfter: after === before, problems }) + '\n');
      return failed ? 1 : 0;
    } finally {
      if (child && child.exitCode === null && child.signalCode === null) {
        child.kill('SIGTERM');
        await new Promise((r) => child!.once('exit', r));
      }
      await rm(dir, { recursive: true, force: true });
    }
  },
});

await benchMain(import.meta.url, fuzzHttpCmd, 'node dist/bench/fuzz-http.js');
