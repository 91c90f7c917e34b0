// The prediction server end to end: it listens on an ephemeral loopback port, answers real HTTP requests
// (single points, batches, both modes, concurrent requests batched together) exactly as Network.predict
// answers the same points, refuses bad requests with the documented 4xx, survives fuzzed bodies, and
// stops gracefully with requests in flight.
import { request as httpRequest } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Network } from '../../src/network/network.js';
import { serve, type PredictionServer } from '../../src/serve/server.js';
import { subset, synthesize } from '../../src/datasets/index.js';
import type { SparseDataset } from '../../src/datasets/csr.js';
import { fuzzBodies } from '../../bench/serve-fuzz.js';
import { fit } from '../../src/train/fit-network.js';

const train = synthesize({ shape: 'small', points: 3000, seed: 5 });
const test = subset(synthesize({ shape: 'small', points: 3200, seed: 5 }), Array.from({ length: 200 }, (_, i) => 3000 + i));
let net: Network;
let server: PredictionServer;

beforeAll(async () => {
  net = new Network({ inputDim: train.features, seed: 9, layers: [{ size: 32 }, { size: train.labels, sampling: { hash: 'dwta', K: 4, L: 8, logQ: true } }] });
  await fit(net, train, { epochs: 2, workers: 0 });
  server = await serve(net, { port: 0, workers: 2, maxBatch: 16, candidates: 200 });
}, 120_000);
afterAll(async () => {
  await server?.close();
});

/** `{"id": value}` of row i. */
function features(d: SparseDataset, i: number): Record<string, number> {
  const f: Record<string, number> = {};
  for (let p = d.offsets[i]!; p < d.offsets[i + 1]!; p++) f[String(d.indices[p])] = d.values[p]!;
  return f;
}

interface Reply { status: number; body: any; headers: Record<string, string | string[] | undefined> }

/** One HTTP request on a fresh connection (raw body allowed). */
function call(method: string, path: string, body?: string | Buffer, headers: Record<string, string> = {}): Promise<Reply> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(`${server.url}${path}`, { method, headers: { ...headers, connection: 'close' } }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8');
        let parsed: unknown = text;
        try {
          parsed = JSON.parse(text);
        } catch { /* not JSON */ }
        resolve({ status: res.statusCode!, body: parsed, headers: res.headers });
      });
    });
    req.on('error', reject);
    if (body !== undefined) req.end(body);
    else req.end();
  });
}
const post = (body: unknown) => call('POST', '/predict', typeof body === 'string' ? body : JSON.stringify(body));

describe('serve: answers', () => {
  it('GET /health and GET /model describe the server and the model', async () => {
    const h = await call('GET', '/health');
    expect(h.status).toBe(200);
    expect(h.body.status).toBe('ok');
    const m = await call('GET', '/model');
    expect(m.status).toBe(200);
    expect(m.body).toMatchObject({ inputDim: train.features, labels: train.labels, text: false, labelNames: false, workers: 2 });
    expect(m.body.layers).toEqual([{ size: 32, activation: 'relu', sampled: false }, { size: train.labels, activation: 'softmax', sampled: true }]);
    expect(m.body.defaults).toEqual({ k: 5, mode: 'exact', candidates: 200 });
  });

  it('single points and batches equal Network.predict on the same points, exact and sampled', async () => {
    for (const mode of ['exact', 'sampled'] as const) {
      const want = await net.predict(test, { k: 3, mode, candidates: 200, workers: 0 });
      const one = await post({ features: features(test, 7), k: 3, mode });
      expect(one.status).toBe(200);
      expect(one.body.labels).toEqual(Array.from(want.labels.subarray(21, 24)));
      expect(one.body.scores.map((s: number) => Math.fround(s))).toEqual(Array.from(want.scores.subarray(21, 24)));
      const rows = Array.from({ length: 64 }, (_, i) => i + 100);
      const b = await post({ instances: rows.map((i) => ({ features: features(test, i) })), k: 3, mode });
      expect(b.status).toBe(200);
      expect(b.body.predictions).toHaveLength(64);
      rows.forEach((r, j) => expect(b.body.predictions[j].labels).toEqual(Array.from(want.labels.subarray(r * 3, r * 3 + 3))));
    }
  });

  it('concurrent requests each get their own answer (how they are batched: batcher.test.ts)', async () => {
    const want = await net.predict(test, { k: 2, workers: 0 });
    const before = server.stats();
    const replies = await Promise.all(Array.from({ length: 120 }, (_, i) => post({ features: features(test, i), k: 2 })));
    replies.forEach((r, i) => {
      expect(r.status).toBe(200);
      expect(r.body.labels).toEqual(Array.from(want.labels.subarray(i * 2, i * 2 + 2)));
    });
    const after = server.stats();
    expect(after.points - before.points).toBe(120);
    // At most one call per request (fewer when requests arrived while the workers were busy).
    expect(after.batches - before.batches).toBeLessThanOrEqual(120);
  });

  it('k defaults to 5; zero-valued features are ignored; a point without features is answered', async () => {
    const r = await post({ features: {} });
    expect(r.status).toBe(200);
    expect(r.body.labels).toHaveLength(5);
    const f = features(test, 3);
    const a = await post({ features: f, k: 4 });
    const b = await post({ features: { ...f, '0': 0 }, k: 4 });
    expect(b.body).toEqual(a.body);
  });
});

describe('serve: refusals', () => {
  const cases: [string, unknown, number, string][] = [
    ['bad JSON', '{"features": {', 400, 'invalid JSON: '],
    ['not an object', '[1,2]', 400, 'expected a JSON object with "text", "features" or "instances" but received an array'],
    ['nothing to predict', {}, 400, 'expected one of "text", "features" or "instances" in the request'],
    ['two inputs', { features: {}, instances: [] }, 400, 'expected only one of "text", "features" or "instances" but received "features" and "instances"'],
    ['unknown field', { feature: {} }, 400, 'unknown field "feature" (did you mean features?) (expected one of text, features, instances, k, mode, threshold)'],
    ['unknown feature id', { features: { [String(train.features)]: 1 } }, 400, `unknown feature "${train.features}": feature ids are integers from 0 to ${train.features - 1}`],
    ['non-integer feature id', { features: { 'x1': 1 } }, 400, `unknown feature "x1": feature ids are integers from 0 to ${train.features - 1}`],
    ['negative feature id', { features: { '-1': 1 } }, 400, `unknown feature "-1": feature ids are integers from 0 to ${train.features - 1}`],
    ['non-number value', { features: { '1': '2' } }, 400, 'expected a finite number for feature 1 but received a string'],
    ['k = 0', { features: {}, k: 0 }, 400, 'expected an integer from 1 to 100 for "k" but received 0'],
    ['k too large', { features: {}, k: 101 }, 400, 'expected an integer from 1 to 100 for "k" but received 101'],
    ['k not an integer', { features: {}, k: 1.5 }, 400, 'expected an integer from 1 to 100 for "k" but received 1.5'],
    ['bad mode', { features: {}, mode: 'fast' }, 400, 'expected "exact", "sampled" or "auto" for "mode" but received "fast"'],
    ['text without a vectorizer', { text: 'hello' }, 400, 'this model was not trained on text (it has no text vectorizer): send "features" ({"feature id": value, ...}) instead'],
    ['instances not an array', { instances: {} }, 400, 'expected an array for "instances" but received an object'],
    ['empty instances', { instances: [] }, 400, 'expected at least one instance in "instances" but received an empty array'],
    ['bad instance', { instances: [{ features: {} }, 3] }, 400, 'instances[1]: expected an object with "text" or "features" but received number 3'],
    ['bad feature in an instance', { instances: [{ features: {} }, { features: { a: 1 } }] }, 400, `instances[1]: unknown feature "a": feature ids are integers from 0 to ${train.features - 1}`],
    ['too many instances', { instances: Array.from({ length: 1025 }, () => ({ features: {} })) }, 413, 'too many instances: 1025 (this server accepts at most 1024 per request)'],
  ];
  for (const [what, body, status, message] of cases) {
    it(`${what}: ${status}`, async () => {
      const r = await post(body);
      expect(r.status).toBe(status);
      if (message.endsWith(': ')) expect(r.body.error.startsWith(message)).toBe(true);
      else expect(r.body.error).toBe(message);
    });
  }

  it('routes and methods: 404 and 405 with Allow', async () => {
    expect((await call('GET', '/nope')).status).toBe(404);
    const r = await call('GET', '/predict');
    expect([r.status, r.headers.allow]).toEqual([405, 'POST']);
    expect((await call('POST', '/health', '{}')).status).toBe(405);
  });

  it('bodies over the limit get 413 (declared or streamed), invalid UTF-8 gets 400', async () => {
    const big = Buffer.alloc(2 << 20, 0x20);
    const r = await call('POST', '/predict', big);
    expect(r.status).toBe(413);
    expect(r.body.error).toBe(`request body too large: ${2 << 20} bytes (this server accepts at most ${1 << 20})`);
    const bad = await call('POST', '/predict', Buffer.from([0x7b, 0xff, 0xfe, 0x7d]));
    expect([bad.status, bad.body.error]).toEqual([400, 'the request body is not valid UTF-8']);
  });

  it('a full queue answers 429 with Retry-After', async () => {
    const small = await serve(net, { port: 0, workers: 1, maxQueue: 64, maxInstances: 64, maxBatch: 64 });
    try {
      const body = JSON.stringify({ instances: Array.from({ length: 64 }, (_, i) => ({ features: features(test, i) })) });
      const replies = await Promise.all(Array.from({ length: 12 }, () => fetch(`${small.url}/predict`, { method: 'POST', body })));
      const statuses = replies.map((r) => r.status);
      expect(statuses).toContain(200);
      expect(statuses).toContain(429);
      const busy = replies.find((r) => r.status === 429)!;
      expect(busy.headers.get('retry-after')).toBe('1');
      expect(((await busy.json()) as { error: string }).error).toMatch(/^the server is busy \(\d+ points queued, at most 64\): retry later$/);
    } finally {
      await small.close();
    }
  });
});

describe('serve: robustness', () => {
  it('fuzzed bodies get 4xx and the server keeps answering correctly', async () => {
    const valid = JSON.stringify({ instances: [{ features: features(test, 1) }, { features: features(test, 2) }], k: 3, mode: 'sampled' });
    const next = fuzzBodies(valid, 12345);
    const counts: Record<number, number> = {};
    for (let round = 0; round < 100; round++) {
      const replies = await Promise.all(Array.from({ length: 20 }, () => call('POST', '/predict', next())));
      for (const r of replies) {
        counts[r.status] = (counts[r.status] ?? 0) + 1;
        expect(r.status === 200 || (r.status >= 400 && r.status < 500), `status ${r.status}: ${JSON.stringify(r.body)}`).toBe(true);
        if (r.status !== 200) expect(typeof r.body.error).toBe('string');
      }
    }
    expect(counts[400]).toBeGreaterThan(1000);
    const want = await net.predict(test, { k: 3, workers: 0 });
    const r = await post({ features: features(test, 5), k: 3 });
    expect(r.body.labels).toEqual(Array.from(want.labels.subarray(15, 18)));
  }, 60_000);

  it('close() answers the requests in flight, then refuses connections', async () => {
    const s = await serve(net, { port: 0, workers: 1, maxBatch: 8 });
    const want = await net.predict(test, { k: 1, workers: 0 });
    const pending = Array.from({ length: 40 }, (_, i) =>
      fetch(`${s.url}/predict`, { method: 'POST', body: JSON.stringify({ instances: [{ features: features(test, i) }], k: 1 }) }).then(async (r) => ({ status: r.status, body: (await r.json()) as { predictions: { labels: number[] }[] } })),
    );
    const settled = Promise.allSettled(pending); // refused connections reject: handled from the start
    // Stop while requests are queued or running.
    while (s.stats().queued + s.stats().inFlight === 0) await new Promise((r) => setTimeout(r, 1));
    const inFlight = s.stats().queued;
    await s.close();
    const replies = await settled;
    // Every request already queued was answered, correctly; the others got 503 or a refused connection.
    let answered = 0;
    replies.forEach((r, i) => {
      if (r.status === 'fulfilled') {
        expect([200, 503]).toContain(r.value.status);
        if (r.value.status === 200) {
          answered++;
          expect(r.value.body.predictions[0]!.labels[0]).toBe(want.labels[i]);
        }
      }
    });
    expect(answered).toBeGreaterThanOrEqual(Math.max(1, inFlight));
    await expect(fetch(`${s.url}/health`)).rejects.toThrow();
  });
});

describe('serve: the default mode', () => {
  it("is the library's 'auto': sampled for a sampled output layer with a wide part, exact otherwise; a request may ask for \"auto\"", async () => {
    const wide = new Network({ inputDim: train.features, seed: 9, layers: [{ size: 32 }, { size: train.labels, sampling: { hash: 'dwta', K: 4, L: 8, logQ: true }, wide: {} }] });
    await fit(wide, train, { epochs: 1, workers: 0 });
    const s = await serve(wide, { port: 0, workers: 0, candidates: 8 });
    try {
      const info = (await (await fetch(`${s.url}/model`)).json()) as { defaults: { mode: string } };
      expect(info.defaults.mode).toBe('sampled');
      const points = subset(test, Uint32Array.from({ length: 20 }, (_, i) => i));
      const sampled = await wide.predict(points, { k: 3, candidates: 8, workers: 0 });
      const exact = await wide.predict(points, { k: 3, mode: 'exact', workers: 0 });
      let differ = 0;
      for (let i = 0; i < 20; i++) {
        const body = (mode?: string) => JSON.stringify({ features: features(points, i), k: 3, ...(mode ? { mode } : {}) });
        const dflt = (await (await fetch(`${s.url}/predict`, { method: 'POST', body: body() })).json()) as { labels: number[]; scores: number[] };
        const auto = (await (await fetch(`${s.url}/predict`, { method: 'POST', body: body('auto') })).json()) as { labels: number[]; scores: number[] };
        const want = Array.from(sampled.labels.subarray(i * 3, i * 3 + 3)), wantScores = Array.from(sampled.scores.subarray(i * 3, i * 3 + 3));
        for (const got of [dflt, auto]) {
          expect(got.labels).toEqual(want);
          got.scores.forEach((v, j) => expect(v).toBeCloseTo(wantScores[j]!, 5));
        }
        // Sampled scores are a softmax over the scored candidates only: larger than exact ones.
        if (Math.abs(dflt.scores[0]! - exact.scores[i * 3]!) > 1e-4) differ++;
      }
      // The modes differ somewhere on these points, so the check above tells them apart.
      expect(differ).toBeGreaterThan(0);
    } finally {
      await s.close();
    }
    // The test's main model has a sampled output layer without a wide part: exact (GET /model above).
    expect(((await (await fetch(`${server.url}/model`)).json()) as { defaults: { mode: string } }).defaults.mode).toBe('exact');
  }, 120_000);
});

describe('serve: a model trained on text', () => {
  it('answers {"text": ...} like Network.predict on the vectorised text, with label names', async () => {
    const { TextVectorizer } = await import('../../src/text/vectorizer.js');
    const docs = Array.from({ length: 60 }, (_, i) => `topic${i % 6} word${i % 6}a filler${i % 4} Übergröße ${i % 6 === 0 ? 'naïve café' : 'plain'}`);
    const v = TextVectorizer.fit(docs, { minDf: 1 });
    const tnet = new Network({ inputDim: v.features, seed: 4, layers: [{ size: 8 }, { size: 6 }] });
    tnet.textVectorizer = v;
    tnet.labelNames = ['alpha', 'beta', 'gamma', 'delta', 'epsilon', 'zeta'];
    const s = await serve(tnet, { port: 0, workers: 1 });
    try {
      const info = (await (await fetch(`${s.url}/model`)).json()) as { text: boolean; labelNames: boolean; inputDim: number };
      expect(info).toMatchObject({ text: true, labelNames: true, inputDim: v.features });
      const texts = ['TOPIC3 word3a café', 'nothing known here', 'übergröße filler2'];
      const want = await tnet.predict(v.transform(texts), { k: 3, workers: 0 });
      const r = await fetch(`${s.url}/predict`, { method: 'POST', body: JSON.stringify({ instances: [{ text: texts[0] }, { text: texts[1] }, { features: { '0': 1 } }, { text: texts[2] }], k: 3 }) });
      expect(r.status).toBe(200);
      const body = (await r.json()) as { predictions: { labels: number[]; scores: number[]; names: string[] }[] };
      for (const [j, i] of [[0, 0], [1, 1], [3, 2]] as const) {
        const ids = Array.from(want.labels.subarray(i * 3, i * 3 + 3));
        expect(body.predictions[j]!.labels).toEqual(ids);
        expect(body.predictions[j]!.names).toEqual(ids.map((id) => tnet.labelNames![id]));
      }
      const bad = await fetch(`${s.url}/predict`, { method: 'POST', body: JSON.stringify({ text: 42 }) });
      expect([bad.status, ((await bad.json()) as { error: string }).error]).toEqual([400, 'expected a string for "text" but received number 42']);
    } finally {
      await s.close();
    }
  });
});
