// Prediction server under load: `sublinear serve` in a child process, driven over loopback by autocannon
// (a real HTTP load generator, in this process). Four scenarios: single-point and 64-point requests, exact
// and sampled; for each, requests/s, points/s and the p50/p99 latency autocannon measured. Then a fuzz run:
// --fuzz malformed bodies (bench/serve-fuzz.ts, plus some over the body limit) must all get 4xx, and the
// server must still answer a valid request exactly as before.
//
//   npm run bench:serve -- [--model m.sl --points test.txt] [--duration 10] [--connections 16] [--workers n] [--learning] [--json]
//
// --learning adds the latency of predictions while the server learns (serve --learn, POST /learn): single-
// point requests at a fixed --rate, first with nothing else running, then while a client posts /learn
// requests of 16 of the points (with their own labels; every 8th request also names a new label id, so the
// model grows) one after the other; p50/p99 of both and the examples learned per second.
//
// Without --model, a small synthetic model is trained first (a smoke run). The load generator shares the
// machine with the server: on a 2-core machine it takes a good part of one core.
// Last stdout line: {"cpu", "workers", "connections", "duration", "scenarios": [...], "fuzz": {...}}.
import { mkdtemp, rm } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { availableParallelism, cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import { readXC } from '../src/datasets/xc-reader.js';
import { subset, synthesize } from '../src/datasets/index.js';
import type { SparseDataset } from '../src/datasets/csr.js';
import { Network } from '../src/network/network.js';
import { defineCommand, UsageError } from '../src/cli/args.js';
import { benchMain } from './cli.js';
import { fuzzBodies } from './serve-fuzz.js';
import { fit } from '../src/train/fit-network.js';
import { startServer } from './serve-child.js';

/** The part of autocannon's API used here (it ships no types). */
interface AutocannonResult {
  requests: { average: number; total: number };
  latency: { p50: number; p99: number; average: number; max: number };
  non2xx: number;
  errors: number;
  timeouts: number;
  duration: number;
  statusCodeStats: Record<string, { count: number }>;
}
type Autocannon = (opts: Record<string, unknown>) => Promise<AutocannonResult>;
const autocannon = createRequire(import.meta.url)('autocannon') as Autocannon;

interface Args {
  model?: string;
  points?: string;
  duration: number;
  warmup: number;
  connections: number;
  batchConnections: number;
  sizes: string;
  modes: string;
  workers?: number;
  fuzz: number;
  learning: boolean;
  rate: number;
  json: boolean;
}

export const serveBenchCmd = defineCommand({
  name: 'bench:serve',
  summary: 'Prediction server under an HTTP load generator (autocannon, loopback): requests/s and p50/p99 latency, then a fuzz run.',
  flags: {
    model: { type: 'string', valueName: 'file', description: 'model to serve (default: train a small synthetic one first)' },
    points: { type: 'string', valueName: 'file', description: 'XC file whose points are sent (required with --model; e.g. its test set)' },
    duration: { type: 'integer', min: 1, default: 10, valueName: 's', description: 'seconds of load per scenario' },
    warmup: { type: 'integer', min: 0, default: 2, valueName: 's', description: 'seconds of untimed load before each scenario' },
    connections: { type: 'integer', min: 1, default: 16, valueName: 'n', description: 'concurrent connections of the load generator (single-point requests, fuzz run)' },
    batchConnections: { type: 'integer', min: 1, default: 4, valueName: 'n', description: 'concurrent connections for requests of more than one point' },
    sizes: { type: 'string', default: '1,64', valueName: 'list', description: 'points per request of the scenarios' },
    modes: { type: 'string', default: 'exact,sampled', valueName: 'list', description: 'modes of the scenarios' },
    workers: { type: 'integer', min: 0, valueName: 'n', description: 'server prediction threads (default: number of cores)' },
    fuzz: { type: 'integer', min: 0, default: 10_000, valueName: 'n', description: 'malformed requests of the fuzz run' },
    learning: { type: 'boolean', description: 'also measure prediction latency while the server learns (POST /learn), against idle' },
    rate: { type: 'integer', min: 1, default: 200, valueName: 'n', description: '--learning: single-point requests per second of both runs' },
    json: { type: 'boolean', description: 'print only the JSON line' },
  },
  run: async (o) => {
    await measure(o as Args);
    return 0;
  },
});

/** `{"id": value}` of row i. */
function features(d: SparseDataset, i: number): Record<string, number> {
  const f: Record<string, number> = {};
  for (let p = d.offsets[i]!; p < d.offsets[i + 1]!; p++) f[String(d.indices[p])] = d.values[p]!;
  return f;
}

async function measure(a: Args): Promise<void> {
  const log = (s: string) => {
    if (!a.json) process.stdout.write(s + '\n');
  };
  if (a.model && !a.points) throw new UsageError('option --points is required with --model (the points to send)');
  let dir: string | undefined;
  let model = a.model;
  let points: SparseDataset;
  if (model) {
    points = await readXC(a.points!);
  } else {
    dir = await mkdtemp(join(tmpdir(), 'sublinear-bench-serve-'));
    const train = synthesize({ shape: 'small', points: 4000, seed: 2 });
    points = subset(synthesize({ shape: 'small', points: 5000, seed: 2 }), Array.from({ length: 1000 }, (_, i) => 4000 + i));
    const net = new Network({ inputDim: train.features, seed: 1, layers: [{ size: 64 }, { size: train.labels, sampling: { hash: 'dwta', K: 4, L: 16, logQ: true } }] });
    log('training a small synthetic model (no --model given)');
    await fit(net, train, { epochs: 2 });
    model = join(dir, 'model.sl');
    await net.save(model);
  }
  const { child, url } = await startServer(model, [
    '--max-queue', '65536', ...(a.workers !== undefined ? ['--workers', String(a.workers)] : []),
    ...(a.learning ? ['--learn', '--snapshot', join(tmpdir(), `sublinear-bench-serve-snapshot-${process.pid}.sl`)] : []),
  ]);
  try {
    const info = (await (await fetch(`${url}/model`)).json()) as { labels: number; inputDim: number; workers: number; defaults: { candidates: number } };
    log(`serving ${model}: ${info.inputDim} features, ${info.labels} labels, ${info.workers} workers, sampled candidates ${info.defaults.candidates}; ${url}`);
    const n = Math.min(points.points, 2000);
    const scenarios = [];
    const sizes = a.sizes.split(',').map(Number);
    if (sizes.some((x) => !Number.isInteger(x) || x < 1)) throw new UsageError(`Expected positive integers for --sizes but received ${JSON.stringify(a.sizes)}`);
    const modes = a.modes.split(',');
    if (modes.some((m) => m !== 'exact' && m !== 'sampled')) throw new UsageError(`Expected exact and/or sampled for --modes but received ${JSON.stringify(a.modes)}`);
    for (const size of sizes) {
      for (const mode of modes as ('exact' | 'sampled')[]) {
        const connections = size === 1 ? a.connections : a.batchConnections;
        // Distinct bodies, handed out in turn across all connections.
        const bodies = Array.from({ length: Math.max(1, Math.floor(n / size)) }, (_, b) => JSON.stringify(
          size === 1 ? { features: features(points, b), k: 5, mode } : { instances: Array.from({ length: size }, (_, j) => ({ features: features(points, (b * size + j) % points.points) })), k: 5, mode },
        ));
        let turn = 0;
        const requests = [{
          method: 'POST', path: '/predict', headers: { 'content-type': 'application/json' },
          setupRequest: (req: Record<string, unknown>) => ({ ...req, body: bodies[turn++ % bodies.length] }),
        }];
        if (a.warmup > 0) await autocannon({ url, connections, duration: a.warmup, requests, timeout: 60 });
        const r = await autocannon({ url, connections, duration: a.duration, requests, timeout: 60 });
        const s = {
          name: `${size === 1 ? 'single point' : `${size} points`}, ${mode}`, pointsPerRequest: size, mode, connections,
          requestsPerSec: r.requests.average, pointsPerSec: r.requests.average * size,
          p50ms: r.latency.p50, p99ms: r.latency.p99, maxMs: r.latency.max,
          requests: r.requests.total, non2xx: r.non2xx, errors: r.errors, timeouts: r.timeouts,
        };
        scenarios.push(s);
        log(`${s.name.padEnd(24)} ${s.requestsPerSec.toFixed(0).padStart(7)} req/s ${s.pointsPerSec.toFixed(0).padStart(8)} points/s  p50 ${s.p50ms} ms  p99 ${s.p99ms} ms  (${connections} connections; non-2xx ${s.non2xx}, errors ${s.errors})`);
      }
    }

    let fuzz: Record<string, unknown> | undefined;
    if (a.fuzz > 0) {
      const valid = JSON.stringify({ features: features(points, 0), k: 3 });
      const before = await (await fetch(`${url}/predict`, { method: 'POST', body: valid })).text();
      const next = fuzzBodies(JSON.stringify({ instances: [{ features: features(points, 1) }, { features: features(points, 2) }], k: 3 }), 7);
      // Every 500th body is over the 1 MiB body limit.
      const huge = ' '.repeat(1.5 * 2 ** 20) + valid;
      let sent = 0;
      const requests = [{ method: 'POST', path: '/predict', setupRequest: (req: Record<string, unknown>) => ({ ...req, body: ++sent % 500 === 0 ? huge : next() }) }];
      const r = await autocannon({ url, connections: a.connections, amount: a.fuzz, requests, timeout: 30 });
      const codes = Object.fromEntries(Object.entries(r.statusCodeStats).map(([code, v]) => [code, v.count]));
      const after = await fetch(`${url}/predict`, { method: 'POST', body: valid });
      const afterText = await after.text();
      fuzz = { requests: r.requests.total, statusCodes: codes, errors: r.errors, timeouts: r.timeouts, servesAfter: after.status === 200 && afterText === before };
      log(`fuzz: ${r.requests.total} malformed requests, status codes ${JSON.stringify(codes)}, connection errors ${r.errors}; afterwards the same valid request gets the same answer: ${fuzz.servesAfter}`);
    }
    let learning: Record<string, unknown> | undefined;
    if (a.learning) {
      const mode = modes[0] as 'exact' | 'sampled';
      const bodies = Array.from({ length: Math.min(n, 1000) }, (_, b) => JSON.stringify({ features: features(points, b), k: 5, mode }));
      let turn = 0;
      const requests = [{ method: 'POST', path: '/predict', headers: { 'content-type': 'application/json' }, setupRequest: (req: Record<string, unknown>) => ({ ...req, body: bodies[turn++ % bodies.length] }) }];
      const fixed = { url, connections: a.connections, duration: a.duration, overallRate: a.rate, requests, timeout: 60 };
      await autocannon({ ...fixed, duration: Math.max(1, a.warmup) });
      const idle = await autocannon(fixed);
      // The learning client: /learn requests of 16 points with their labels, back to back, while the load runs.
      let stop = false, learned = 0, calls = 0, failed = 0, next = 0, labels = info.labels;
      const learner = (async () => {
        while (!stop) {
          const examples = Array.from({ length: 16 }, () => {
            const i = next++ % points.points;
            const ls = Array.from(points.labelIndices.subarray(points.labelOffsets[i]!, points.labelOffsets[i + 1]!)).filter((l) => l < labels);
            return { features: features(points, i), labels: ls.length ? ls : [0] };
          });
          if (calls % 8 === 7) examples[0]!.labels.push(labels); // a new label id: the model grows by one
          const r = await fetch(`${url}/learn`, { method: 'POST', body: JSON.stringify({ examples }) });
          const body = (await r.json()) as { learned?: number; labels?: number };
          calls++;
          if (r.status !== 200) failed++;
          else {
            learned += body.learned!;
            labels = body.labels!;
          }
        }
      })();
      const t0 = performance.now();
      const busy = await autocannon(fixed);
      const seconds = (performance.now() - t0) / 1000;
      stop = true;
      await learner;
      const row = (r: AutocannonResult) => ({ requestsPerSec: r.requests.average, p50ms: r.latency.p50, p99ms: r.latency.p99, maxMs: r.latency.max, non2xx: r.non2xx, errors: r.errors });
      learning = { mode, rate: a.rate, idle: row(idle), learning: row(busy), learnCalls: calls, learnFailed: failed, examplesPerSec: learned / seconds, labelsAfter: labels, p99Ratio: busy.latency.p99 / Math.max(idle.latency.p99, 1e-9) };
      log(`learning (${mode}, ${a.rate} requests/s): idle p50 ${idle.latency.p50} ms p99 ${idle.latency.p99} ms; while learning p50 ${busy.latency.p50} ms p99 ${busy.latency.p99} ms ` +
        `(${(learned / seconds).toFixed(0)} examples/s learned in ${calls} calls, ${failed} failed; non-2xx ${idle.non2xx} + ${busy.non2xx})`);
    }
    const result = { cpu: cpus()[0]?.model ?? 'unknown', cores: availableParallelism(), workers: info.workers, duration: a.duration, model, labels: info.labels, scenarios, fuzz, ...(learning ? { learning } : {}) };
    process.stdout.write(JSON.stringify(result) + '\n');
  } finally {
    child.kill('SIGTERM');
    await new Promise((r) => child.once('exit', r));
    if (dir) await rm(dir, { recursive: true, force: true });
  }
}

await benchMain(import.meta.url, serveBenchCmd, 'npm run bench:serve --');
