// What an operator needs of the server: GET /metrics in the Prometheus text format (parsed with a
// Prometheus text-format parser, and every line checked against the format's grammar), a bearer token on
// every route but liveness, a refusal to listen beyond loopback without one, and reloads of the model file
// (POST /admin/reload; SIGHUP is in test/cli/serve.test.ts) under autocannon load that lose no request,
// with readiness false while one runs.
import { createRequire } from 'node:module';
import { copyFile, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Network } from '../../src/network/network.js';
import { fit } from '../../src/train/fit-network.js';
import { serve, type PredictionServer } from '../../src/serve/server.js';
import { exposureProblem, isLoopback } from '../../src/serve/auth.js';
import { subset, synthesize } from '../../src/datasets/index.js';
import type { SparseDataset } from '../../src/datasets/csr.js';

const require = createRequire(import.meta.url);
const parsePrometheus = require('parse-prometheus-text-format') as (text: string) => { name: string; help: string; type: string; metrics: any[] }[];
const autocannon = require('autocannon') as (o: Record<string, unknown>) => Promise<{ requests: { total: number }; non2xx: number; errors: number; timeouts: number; statusCodeStats: Record<string, { count: number }> }>;

const all = synthesize({ shape: 'tiny', points: 2200, seed: 31 });
const train = subset(all, Uint32Array.from({ length: 2000 }, (_, i) => i));
const test = subset(all, Uint32Array.from({ length: 200 }, (_, i) => 2000 + i));
let dir: string;
let modelA: string, modelB: string;
let netA: Network, netB: Network;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'sublinear-ops-'));
  netA = new Network({ inputDim: train.features, seed: 1, layers: [{ size: 48 }, { size: train.labels }] });
  await fit(netA, train, { validation: { maxEpochs: 3, minHoldout: 50, refitMaxPoints: 0 }, workers: 0 });
  netB = new Network({ inputDim: train.features, seed: 2, layers: [{ size: 48 }, { size: train.labels }] });
  await fit(netB, train, { epochs: 1, workers: 0 });
  modelA = join(dir, 'a.sl');
  modelB = join(dir, 'b.sl');
  await netA.save(modelA);
  await netB.save(modelB);
}, 120_000);
afterAll(async () => {
  if (dir) await rm(dir, { recursive: true, force: true });
});

function features(d: SparseDataset, i: number): Record<string, number> {
  const f: Record<string, number> = {};
  for (let p = d.offsets[i]!; p < d.offsets[i + 1]!; p++) f[String(d.indices[p])] = d.values[p]!;
  return f;
}

/** One line of the text exposition format: a comment, or `name{labels} value`. */
const SAMPLE = /^[a-zA-Z_:][a-zA-Z0-9_:]*(\{([a-zA-Z_][a-zA-Z0-9_]*="(\\\\|\\"|\\n|[^"\\\n])*",?)*\})? (-?[0-9.]+(e[+-]?[0-9]+)?|[+-]Inf|NaN)$/;

describe('GET /metrics', () => {
  let server: PredictionServer;
  beforeAll(async () => {
    server = await serve(modelA, { port: 0, workers: 1 });
  });
  afterAll(async () => {
    await server?.close();
  });

  it('is the Prometheus text format: every line is a comment or a sample, and a text-format parser reads the families the server keeps', async () => {
    for (let i = 0; i < 5; i++) await fetch(`${server.url}/predict`, { method: 'POST', body: JSON.stringify({ features: features(test, i) }) });
    await fetch(`${server.url}/predict`, { method: 'POST', body: '{' }); // a 400
    const r = await fetch(`${server.url}/metrics`);
    expect(r.status).toBe(200);
    expect(r.headers.get('content-type')).toBe('text/plain; version=0.0.4; charset=utf-8');
    const text = await r.text();
    expect(text.endsWith('\n')).toBe(true);
    for (const line of text.trimEnd().split('\n')) {
      if (line.startsWith('# HELP ') || line.startsWith('# TYPE ')) continue;
      expect(line).toMatch(SAMPLE);
    }
    const families = new Map(parsePrometheus(text).map((f) => [f.name, f]));
    const requests = families.get('sublinear_http_requests_total')!;
    expect(requests.type).toBe('COUNTER');
    const count = (route: string, code: string) => Number(requests.metrics.find((m) => m.labels.route === route && m.labels.code === code)?.value ?? 0);
    expect(count('/predict', '200')).toBe(5);
    expect(count('/predict', '400')).toBe(1);
    expect(families.get('sublinear_http_request_duration_seconds')!.type).toBe('HISTOGRAM');
    // (The parser folds a histogram's labelled series into one: read /predict's buckets from the lines.)
    const bucket = /^sublinear_http_request_duration_seconds_bucket\{route="\/predict",le="([^"]+)"\} (\d+)$/;
    const buckets = text.split('\n').map((l) => bucket.exec(l)).filter((m) => m !== null).map((m) => [m![1]!, Number(m![2])] as const);
    expect(buckets.at(-1)).toEqual(['+Inf', 6]);
    for (let b = 1; b < buckets.length; b++) {
      expect(Number(buckets[b]![0] === '+Inf' ? Infinity : buckets[b]![0])).toBeGreaterThan(Number(buckets[b - 1]![0]));
      expect(buckets[b]![1]).toBeGreaterThanOrEqual(buckets[b - 1]![1]); // cumulative
    }
    expect(text).toContain('sublinear_http_request_duration_seconds_count{route="/predict"} 6\n');
    expect(families.get('sublinear_batch_points')!.type).toBe('HISTOGRAM');
    expect(Number(families.get('sublinear_predicted_points_total')!.metrics[0].value)).toBe(5);
    for (const [name, type] of [['sublinear_queue_points', 'GAUGE'], ['sublinear_batches_in_flight', 'GAUGE'], ['sublinear_ready', 'GAUGE'], ['sublinear_model_labels', 'GAUGE'], ['sublinear_learned_examples_total', 'COUNTER'], ['process_resident_memory_bytes', 'GAUGE'], ['process_cpu_seconds_total', 'COUNTER']] as const) {
      expect(families.get(name)?.type, name).toBe(type);
    }
    expect(Number(families.get('sublinear_ready')!.metrics[0].value)).toBe(1);
    expect(Number(families.get('sublinear_model_labels')!.metrics[0].value)).toBe(train.labels);
  });
});

describe('the token and the loopback default', () => {
  it('every route but liveness and the page needs the bearer token; a wrong one is refused too', async () => {
    const token = 'a-token-of-24-characters';
    const server = await serve(netA, { port: 0, workers: 0, token });
    try {
      const body = JSON.stringify({ features: features(test, 0) });
      const get = (path: string, auth?: string) => fetch(`${server.url}${path}`, { headers: auth ? { authorization: auth } : {} });
      for (const path of ['/model', '/metrics', '/health', '/v2', '/v2/health/ready', '/v2/models/model']) {
        const r = await get(path);
        expect(r.status, path).toBe(401);
        expect(r.headers.get('www-authenticate')).toBe('Bearer realm="sublinear"');
        expect(await r.json()).toEqual({ error: 'a bearer token is required: send "Authorization: Bearer <token>"' });
        expect((await get(path, 'Bearer wrong-token-of-many-chars')).status, path).toBe(401);
        expect((await get(path, `Bearer ${token}`)).status, path).toBe(200);
      }
      const post = (auth?: string) => fetch(`${server.url}/predict`, { method: 'POST', body, headers: auth ? { authorization: auth } : {} });
      expect((await post()).status).toBe(401);
      expect((await post(`Basic ${token}`)).status).toBe(401);
      expect((await post(`Bearer ${token}`)).status).toBe(200);
      expect((await get('/v2/health/live')).status).toBe(200);
      const page = await get('/');
      expect(page.status).toBe(200);
      expect(page.headers.get('content-type')).toBe('text/html; charset=utf-8');
    } finally {
      await server.close();
    }
  });

  it('refuses to listen beyond loopback without a token unless told insecure', async () => {
    expect(['127.0.0.1', '127.8.9.10', 'localhost', '::1', '[::1]', '::ffff:127.0.0.1'].every(isLoopback)).toBe(true);
    expect(['0.0.0.0', '::', '10.0.0.1', '192.168.1.2', 'example.org'].some(isLoopback)).toBe(false);
    await expect(serve(netA, { port: 0, workers: 0, host: '0.0.0.0' })).rejects.toThrow(
      'refusing to listen on 0.0.0.0 without a token: anyone who can reach this machine could use the model (and, with learning on, change it). Give a token (serve --token FILE), or listen on 127.0.0.1, or pass --insecure to listen anyway',
    );
    await expect(serve(netA, { port: 0, workers: 0, host: '::' })).rejects.toThrow('refusing to listen on :: without a token');
    expect(exposureProblem('0.0.0.0', 'x'.repeat(16), false)).toBeNull();
    expect(exposureProblem('0.0.0.0', undefined, true)).toBeNull();
    await expect(serve(netA, { port: 0, workers: 0, token: 'short' })).rejects.toThrow('ServeOptions.token: the token must be at least 16 characters long (it has 5)');
  });
});

describe('reloading the model file', () => {
  it('POST /admin/reload swaps the model under autocannon load without a failed request; readiness is false meanwhile; a bad file keeps the old model', async () => {
    const file = join(dir, 'live.sl');
    await copyFile(modelA, file);
    const server = await serve(file, { port: 0, workers: 2 });
    try {
      const bodies = Array.from({ length: 50 }, (_, i) => JSON.stringify({ features: features(test, i), k: 3 }));
      let turn = 0;
      const load = autocannon({
        url: server.url, connections: 8, duration: 4,
        requests: [{ method: 'POST', path: '/predict', headers: { 'content-type': 'application/json' }, setupRequest: (r: Record<string, unknown>) => ({ ...r, body: bodies[turn++ % bodies.length] }) }],
      });
      const readiness: number[] = [];
      await new Promise((r) => setTimeout(r, 500));
      for (let i = 0; i < 3; i++) {
        // Alternate the file between the two models; poll readiness while the reload runs.
        await copyFile(i % 2 === 0 ? modelB : modelA, file);
        const reload = fetch(`${server.url}/admin/reload`, { method: 'POST' });
        let done = false;
        void reload.finally(() => (done = true));
        while (!done) readiness.push((await fetch(`${server.url}/v2/health/ready`)).status);
        const r = await reload;
        expect(r.status).toBe(200);
        expect(await r.json()).toMatchObject({ reloaded: true, labels: train.labels });
        await new Promise((res) => setTimeout(res, 300));
      }
      const result = await load;
      expect(result.requests.total).toBeGreaterThan(100);
      expect({ non2xx: result.non2xx, errors: result.errors, timeouts: result.timeouts }).toEqual({ non2xx: 0, errors: 0, timeouts: 0 });
      expect(readiness).toContain(400);
      expect((await fetch(`${server.url}/v2/health/ready`)).status).toBe(200);
      // The file now holds model B (3 reloads: B, A, B): the server answers as B, not as the A it started with.
      const probe = subset(test, Uint32Array.from({ length: 20 }, (_, i) => i));
      const b = await netB.predict(probe, { k: 3, workers: 0 }), a = await netA.predict(probe, { k: 3, workers: 0 });
      expect(Array.from(b.labels)).not.toEqual(Array.from(a.labels));
      const answers = await (await fetch(`${server.url}/predict`, { method: 'POST', body: JSON.stringify({ instances: Array.from({ length: 20 }, (_, i) => ({ features: features(test, i) })), k: 3 }) })).json() as { predictions: { labels: number[] }[] };
      expect(answers.predictions.flatMap((p) => p.labels)).toEqual(Array.from(b.labels));
      const one = answers.predictions[3]!;
      // A damaged file: 500, the reason, and the old model still answers.
      await writeFile(file, 'not a model');
      const bad = await fetch(`${server.url}/admin/reload`, { method: 'POST' });
      expect(bad.status).toBe(500);
      expect(((await bad.json()) as { error: string }).error).toMatch(/^reload failed, still serving the previous model: .*live\.sl/);
      const again = await (await fetch(`${server.url}/predict`, { method: 'POST', body: JSON.stringify({ features: features(test, 3), k: 3 }) })).json() as { labels: number[] };
      expect(again.labels).toEqual(one.labels);
      const metrics = await (await fetch(`${server.url}/metrics`)).text();
      expect(metrics).toContain('sublinear_model_reloads_total{result="ok"} 3');
      expect(metrics).toContain('sublinear_model_reloads_total{result="error"} 1');
    } finally {
      await server.close();
    }
  }, 60_000);
});
