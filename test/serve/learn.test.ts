// POST /learn, /snapshot and /explain on a text model with label names: a new label named in examples is
// added and predicted by the next request; examples stream in while autocannon predicts, and no request
// fails; a snapshot writes a model file that loads and answers the same; learning is refused unless on;
// /explain answers tokens whose contributions add up to the score.
import { createRequire } from 'node:module';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { Network } from '../../src/network/network.js';
import { OnlineLearner } from '../../src/network/online.js';
import { fit } from '../../src/train/fit-network.js';
import { serve, type PredictionServer } from '../../src/serve/server.js';
import { TextVectorizer } from '../../src/text/vectorizer.js';
import { LabelNames, labelledDataset } from '../../src/text/labels.js';
import { parseTextLine } from '../../src/datasets/text-reader.js';
import { topicLines } from '../text/synthetic-text.js';

const autocannon = createRequire(import.meta.url)('autocannon') as (o: Record<string, unknown>) => Promise<{ requests: { total: number }; non2xx: number; errors: number; timeouts: number }>;

let dir: string;
let net: Network;
/** Texts of topics 0-9; the model trains on topics 0-7 (its vocabulary knows every topic's words). */
const lines = topicLines(2000, 0, 10, 5).map((l, i) => parseTextLine(l, 'mem', i + 1));

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'sublinear-learn-'));
  const v = TextVectorizer.fit(lines.map((l) => l.text));
  const seen = lines.filter((l) => !['topic8', 'topic9'].includes(l.labels[0]!));
  const names = new LabelNames();
  const d = labelledDataset({ points: seen.length, texts: seen.map((l) => l.text), labels: seen.map((l) => l.labels), lines: new Uint32Array(seen.length) }, v, names, true).dataset;
  net = new Network({ inputDim: v.features, seed: 4, layers: [{ size: 32 }, { size: names.size, wide: { init: 4 } }] });
  net.textVectorizer = v;
  net.labelNames = names.names;
  await fit(net, d, { validation: { maxEpochs: 6, minHoldout: 50, refitMaxPoints: 0 }, workers: 0 });
  await net.save(join(dir, 'text.sl'));
}, 120_000);
afterAll(async () => {
  if (dir) await rm(dir, { recursive: true, force: true });
});

const post = (s: PredictionServer, path: string, body: unknown) =>
  fetch(`${s.url}${path}`, { method: 'POST', body: JSON.stringify(body), headers: { 'content-type': 'application/json' } }).then(async (r) => ({ status: r.status, body: (await r.json()) as any }));

describe('POST /learn', () => {
  it('is refused (403) unless learning is on', async () => {
    const server = await serve(join(dir, 'text.sl'), { port: 0, workers: 0 });
    try {
      const r = await post(server, '/learn', { examples: [{ text: 'w8a w8b', labels: ['topic8'] }] });
      expect(r).toEqual({ status: 403, body: { error: 'learning is off: start the server with --learn (ServeOptions.learn) to accept POST /learn' } });
    } finally {
      await server.close();
    }
  });

  it('adds a label named in examples, visible to the next prediction, while autocannon predicts without a failure; /snapshot writes it', async () => {
    const file = join(dir, 'live.sl');
    await net.save(file);
    const server = await serve(file, { port: 0, workers: 2, learn: true });
    try {
      const probe = { text: 'w8a tool w8c the w8d', k: 3 };
      const before = await post(server, '/predict', probe);
      expect(before.body.names).not.toContain('topic8');
      const bodies = lines.slice(0, 100).map((l) => JSON.stringify({ text: l.text, k: 3 }));
      let turn = 0;
      const load = autocannon({
        url: server.url, connections: 4, duration: 3,
        requests: [{ method: 'POST', path: '/predict', headers: { 'content-type': 'application/json' }, setupRequest: (r: Record<string, unknown>) => ({ ...r, body: bodies[turn++ % bodies.length] }) }],
      });
      // Examples of two new labels, 4 per request, while the load runs.
      const examples = lines.filter((l) => ['topic8', 'topic9'].includes(l.labels[0]!)).slice(0, 60);
      const replies = [];
      for (let s = 0; s < examples.length; s += 4) {
        replies.push(await post(server, '/learn', { examples: examples.slice(s, s + 4).map((l) => ({ text: l.text, labels: l.labels })) }));
      }
      const result = await load;
      expect(result.requests.total).toBeGreaterThan(50);
      expect({ non2xx: result.non2xx, errors: result.errors, timeouts: result.timeouts }).toEqual({ non2xx: 0, errors: 0, timeouts: 0 });
      expect(replies.every((r) => r.status === 200)).toBe(true);
      expect(replies.reduce((t, r) => t + r.body.learned, 0)).toBe(60);
      expect(replies.reduce((t, r) => t + r.body.newLabels, 0)).toBe(2);
      expect(replies.at(-1)!.body.labels).toBe(10);
      const after = await post(server, '/predict', probe);
      expect(after.body.names[0]).toBe('topic8');
      expect(((await (await fetch(`${server.url}/model`)).json()) as { labels: number }).labels).toBe(10);
      const metrics = await (await fetch(`${server.url}/metrics`)).text();
      expect(metrics).toContain('sublinear_learned_examples_total 60\n');
      expect(metrics).toContain('sublinear_learned_new_labels_total 2\n');
      // Bad examples: 400 with the reason; nothing learned.
      expect(await post(server, '/learn', { examples: [{ text: 'x', labels: [] }] })).toMatchObject({ status: 400, body: { error: 'examples[0]: expected a non-empty array of labels for "labels" but received an array' } });
      expect(await post(server, '/learn', { examples: [{ text: 'x', labels: ['a,b'] }] })).toMatchObject({ status: 400 });
      expect(await post(server, '/learn', { examples: [{ text: 'x', labels: [20] }] })).toMatchObject({ status: 400, body: { error: "label id 20 is past the model's 10 labels: name a new label instead" } });
      // The snapshot: the model file, rewritten atomically; it loads with the new labels and answers alike.
      const snap = await post(server, '/snapshot', {});
      expect(snap.status).toBe(200);
      expect(snap.body.file).toBe(file);
      const back = await Network.load(file);
      expect(back.labelNames).toHaveLength(10);
      const p = await back.predict(back.textVectorizer!.transform([probe.text]), { k: 3, workers: 0 });
      expect(Array.from(p.labels, (l) => back.labelNames![l])).toEqual(after.body.names);
    } finally {
      await server.close();
    }
  }, 60_000);
});

describe('the learner\'s thread', () => {
  it('leaves the served network as an OnlineLearner on the caller\'s thread leaves its own, from the same examples (rows shared, replaced objects and counters taken over)', async () => {
    const file = join(dir, 'mirror.sl');
    await net.save(file);
    const server = await serve(file, { port: 0, workers: 0, learn: true });
    const direct = await Network.load(file);
    const learner = new OnlineLearner(direct);
    try {
      const v = direct.textVectorizer!;
      const names = [...direct.labelNames!];
      const examples = lines.filter((l) => ['topic8', 'topic9', 'topic2'].includes(l.labels[0]!)).slice(0, 40);
      for (let s = 0; s < examples.length; s += 8) {
        const part = examples.slice(s, s + 8);
        const r = await post(server, '/learn', { examples: part.map((l) => ({ text: l.text, labels: l.labels })) });
        expect(r.status).toBe(200);
        // The same request, as the server maps it: new names get the next ids.
        const ids = part.map((l) => [...new Set(l.labels.map((n) => {
          if (!names.includes(n)) names.push(n);
          return names.indexOf(n);
        }))].sort((a, b) => a - b));
        const rows = v.transform(part.map((l) => l.text));
        const labelOffsets = new Uint32Array(part.length + 1);
        ids.forEach((ls, i) => (labelOffsets[i + 1] = labelOffsets[i]! + ls.length));
        await learner.learn({ ...rows, labels: names.length, labelOffsets, labelIndices: Uint32Array.from(ids.flat()) }, { labelNames: [...names] });
      }
      const a = server.network, b = learner.network;
      expect(a.config.layers.at(-1)!.size).toBe(10);
      expect(b.config.layers.at(-1)!.size).toBe(10);
      const oa = a.spec.layers.at(-1)!, ob = b.spec.layers.at(-1)!;
      expect(oa.weights).toEqual(ob.weights);
      expect(oa.bias).toEqual(ob.bias);
      for (const k of ['offsets', 'labels', 'weights'] as const) expect(oa.wide![k]).toEqual(ob.wide![k]);
      expect(a.labelFreq).toEqual(b.labelFreq);
      expect(a.trainPoints).toBe(b.trainPoints);
      expect(a.labelNames).toEqual(b.labelNames);
      expect(a.spec.layers[0]!.weights).toEqual(b.spec.layers[0]!.weights); // the hidden layer: never written
    } finally {
      await server.close();
    }
  }, 60_000);

  it('learns off the event loop, at the lowest priority: the loop stays idle during a long call', async () => {
    const server = await serve(net, { port: 0, workers: 1, learn: { passes: 100, replay: 8 } });
    try {
      // The learner's thread runs at nice 19 (Linux: /proc/self/task/<tid>/stat, field 19).
      if (existsSync('/proc/self/task')) {
        const nices = readdirSync('/proc/self/task').map((t) => Number(readFileSync(`/proc/self/task/${t}/stat`, 'utf8').replace(/^.*\) /s, '').split(' ')[16]));
        expect(nices).toContain(19);
      }
      const examples = lines.filter((l) => ['topic8', 'topic9'].includes(l.labels[0]!)).slice(0, 200);
      const elu0 = performance.eventLoopUtilization();
      const t0 = performance.now();
      // Calls until half a second has passed (long enough to measure, however fast the machine).
      let seconds = 0;
      for (let calls = 0; seconds < 0.5 && calls < 50; calls++) {
        const r = await post(server, '/learn', { examples: examples.map((l) => ({ text: l.text, labels: l.labels })) });
        expect(r.status).toBe(200);
        seconds = (performance.now() - t0) / 1000;
      }
      const elu = performance.eventLoopUtilization(elu0);
      expect(seconds).toBeGreaterThanOrEqual(0.5);
      // On the event loop (the learner's steps in slices taking half of it) this was 0.5 or more.
      expect(elu.utilization).toBeLessThan(0.25);
    } finally {
      await server.close();
    }
  }, 60_000);
});

describe('POST /explain', () => {
  it('answers the labels with their probabilities, and per label the tokens by contribution, which add up to the score', async () => {
    const server = await serve(net, { port: 0, workers: 1 });
    try {
      const r = await post(server, '/explain', { text: 'w3a the w3b package w3c', k: 2, top: 10 });
      expect(r.status).toBe(200);
      const want = await post(server, '/predict', { text: 'w3a the w3b package w3c', k: 2 });
      expect(r.body.labels).toEqual(want.body.labels);
      expect(r.body.probabilities).toEqual(want.body.probabilities);
      expect(r.body.decomposition).toMatch(/^exact gradient x input/);
      const e = r.body.explanations[0];
      expect(e.name).toBe(want.body.names[0]);
      // Every feature of the point is one of its tokens (top 10 > its 5 distinct words: all of them, rest 0).
      expect(e.features.map((f: any) => f.token).sort()).toEqual(['package', 'the', 'w3a', 'w3b', 'w3c']);
      expect(e.rest).toBe(0);
      const sum = e.features.reduce((t: number, f: any) => t + f.contribution, e.bias + e.rest);
      expect(sum).toBeCloseTo(e.score, 3);
      expect(e.features[0].token).toMatch(/^w3/);
      const bad = await post(server, '/explain', { text: 'x', top: 0 });
      expect(bad).toEqual({ status: 400, body: { error: 'expected an integer from 1 to 100 for "top" but received 0' } });
    } finally {
      await server.close();
    }
  });
});
