// Online learning (src/network/online.ts): labels held out of a network's training are learned from a few
// examples each (P@1 among them from nothing to most of it) without losing the others; growth shares the
// hidden layers and reuses the output layer's memory; sampled prediction finds the added labels; one writer.
import { describe, expect, it } from 'vitest';
import { Network } from '../../src/network/network.js';
import { OnlineLearner } from '../../src/network/online.js';
import { fit } from '../../src/train/fit-network.js';
import { subset, synthesize } from '../../src/datasets/index.js';
import { sharedFloat32, sharedUint32, type SparseDataset } from '../../src/datasets/csr.js';

/** Rows `rows` of d, labels >= `keep` dropped (and a row left without labels dropped) unless `all`. */
function cut(d: SparseDataset, rows: number[], keep: number, all = false): SparseDataset {
  const kept: number[] = [], labs: number[][] = [];
  for (const i of rows) {
    const ls = Array.from(d.labelIndices.subarray(d.labelOffsets[i]!, d.labelOffsets[i + 1]!)).filter((l) => all || l < keep);
    if (ls.length === 0) continue;
    kept.push(i);
    labs.push(ls);
  }
  const s = subset(d, Uint32Array.from(kept));
  const labelOffsets = sharedUint32(kept.length + 1);
  const labelIndices = sharedUint32(labs.reduce((t, l) => t + l.length, 0));
  let p = 0;
  labs.forEach((ls, i) => {
    for (const l of ls) labelIndices[p++] = l;
    labelOffsets[i + 1] = p;
  });
  return { ...s, labels: all ? d.labels : keep, labelOffsets, labelIndices };
}

const LABELS = 100, KEEP = 85;
const data = synthesize({ shape: 'tiny', points: 6000, seed: 41 });
const trainRows = Array.from({ length: 5000 }, (_, i) => i), testRows = Array.from({ length: 1000 }, (_, i) => 5000 + i);

/** P@1 among the held-out labels (the first label >= KEEP of the top 20) on test points that have one, and P@1 on the others. */
async function score(net: Network, test: SparseDataset, mode: 'exact' | 'sampled' = 'exact'): Promise<{ heldOut: number; others: number }> {
  const K = 20;
  const p = await net.predict(test, { k: K, workers: 0, mode });
  let n = 0, hit = 0, m = 0, hitO = 0;
  for (let i = 0; i < test.points; i++) {
    const truth = new Set(Array.from(test.labelIndices.subarray(test.labelOffsets[i]!, test.labelOffsets[i + 1]!)));
    if (![...truth].some((l) => l >= KEEP)) {
      m++;
      if (truth.has(p.labels[i * K]!)) hitO++;
      continue;
    }
    n++;
    for (let r = 0; r < K; r++) {
      const l = p.labels[i * K + r]!;
      if (l !== 0xffffffff && l >= KEEP) {
        if (truth.has(l)) hit++;
        break;
      }
    }
  }
  return { heldOut: hit / n, others: hitO / m };
}

describe('OnlineLearner', () => {
  it('learns labels held out of training from 10 examples each, keeps the others, and its growth reuses memory', async () => {
    const base = new Network({ inputDim: data.features, seed: 7, layers: [{ size: 64 }, { size: KEEP, wide: { init: 4 } }] });
    await fit(base, cut(data, trainRows, KEEP), { epochs: 8, workers: 0, validation: false });
    const served = await (async () => {
      // As a server has it: loaded from a file (inference-sized).
      const { mkdtemp, rm } = await import('node:fs/promises');
      const { tmpdir } = await import('node:os');
      const { join } = await import('node:path');
      const dir = await mkdtemp(join(tmpdir(), 'sublinear-online-'));
      try {
        await base.save(join(dir, 'm.sl'));
        return await Network.load(join(dir, 'm.sl'));
      } finally {
        await rm(dir, { recursive: true, force: true });
      }
    })();
    const test = cut(data, testRows, LABELS, true);
    const before = await score(served, test);
    // Up to 10 training points of each held-out label, with all of their labels, 8 per call.
    const per = new Map<number, number[]>();
    for (const i of trainRows) {
      for (let e = data.labelOffsets[i]!; e < data.labelOffsets[i + 1]!; e++) {
        const l = data.labelIndices[e]!;
        if (l >= KEEP && (per.get(l)?.length ?? 0) < 10) per.set(l, [...(per.get(l) ?? []), i]);
      }
    }
    const rows = [...new Set([...per.values()].flat())].sort((a, b) => a - b);
    const stream = cut(data, rows, LABELS, true);
    const learner = new OnlineLearner(served);
    const hidden = served.spec.layers[0]!;
    let buffers = 0, lastBuffer: ArrayBufferLike | null = null;
    for (let s = 0; s < stream.points; s += 8) {
      const part = cut(stream, Array.from({ length: Math.min(8, stream.points - s) }, (_, i) => s + i), LABELS, true);
      let max = 0;
      for (const l of part.labelIndices) max = Math.max(max, l);
      const r = await learner.learn({ ...part, labels: max + 1 });
      expect(r.examples).toBe(part.points);
      const out = learner.network.spec.layers.at(-1)!;
      if (out.weights.buffer !== lastBuffer) buffers++;
      lastBuffer = out.weights.buffer;
      // The hidden layer is the served network's own (never copied, never changed).
      expect(learner.network.spec.layers[0]).toBe(hidden);
    }
    const net = learner.network;
    expect(net.config.layers.at(-1)!.size).toBe(LABELS);
    expect(buffers).toBe(1); // one move (room for 1,024 more rows), then longer views of it
    const after = await score(net, test);
    expect(before.heldOut).toBe(0); // there were no such outputs
    expect(after.heldOut).toBeGreaterThan(0.5);
    expect(after.others).toBeGreaterThan(before.others - 0.05);
    // The served network is untouched for labels it has: its old rows are where they were, moved or not.
    const old = served.spec.layers.at(-1)!;
    expect(net.inputScale).toBe(served.inputScale);
    expect(net.labelFreq![KEEP]).toBeGreaterThan(0);
    expect(old.outDim).toBe(KEEP);
  }, 120_000);

  it('a sampled output layer finds the added labels (they join the cluster index\'s head); learn() calls cannot overlap', async () => {
    const base = new Network({
      inputDim: data.features, seed: 8,
      layers: [{ size: 64 }, { size: KEEP, sampling: { hash: 'dwta', K: 2, L: 8, logQ: true, budget: 0 }, wide: { init: 4 } }],
    });
    await fit(base, cut(data, trainRows, KEEP), { epochs: 6, workers: 0, validation: false });
    await base.predict(cut(data, testRows.slice(0, 10), KEEP), { k: 1, mode: 'sampled', workers: 0, candidates: 20 }); // builds the index
    const learner = new OnlineLearner(base);
    const rows = trainRows.filter((i) => Array.from(data.labelIndices.subarray(data.labelOffsets[i]!, data.labelOffsets[i + 1]!)).some((l) => l >= KEEP)).slice(0, 300);
    const stream = cut(data, rows, LABELS, true);
    const first = learner.learn({ ...stream, labels: LABELS });
    await expect(learner.learn({ ...stream, labels: LABELS })).rejects.toThrow('OnlineLearner.learn: a call is already running (one writer at a time)');
    await first;
    const net = learner.network;
    const head = net.spec.layers.at(-1)!.sampling!.index!.head;
    for (let l = KEEP; l < LABELS; l++) expect(head).toContain(l);
    const test = cut(data, testRows, LABELS, true);
    const sampled = await score(net, test, 'sampled');
    expect(sampled.heldOut).toBeGreaterThan(0.4);
  }, 120_000);

  it('refuses examples that do not fit: more features than the network\'s inputs, too many new labels', async () => {
    const net = new Network({ inputDim: 50, seed: 1, layers: [{ size: 8 }, { size: 4 }] });
    const learner = new OnlineLearner(net, { maxNewLabels: 10 });
    const one = (features: number, label: number): SparseDataset => ({
      points: 1, features, labels: label + 1, offsets: sharedUint32(2).fill(1, 1), indices: sharedUint32(1), values: sharedFloat32(1).fill(1),
      labelOffsets: Uint32Array.of(0, 1), labelIndices: Uint32Array.of(label),
    });
    await expect(learner.learn(one(60, 0))).rejects.toThrow("The examples have 60 features but the network's inputDim is 50");
    await expect(learner.learn(one(50, 20))).rejects.toThrow('The examples add 17 labels (ids up to 20); one call may add at most 10');
    expect(() => new OnlineLearner(new Network({ inputDim: 5, seed: 1, layers: [{ size: 3 }] }))).toThrow('Online learning needs a hidden layer below the output layer');
  });

  it('grow() keeps the input scaling of a network trained on raw values (it used to drop it), the calibration and the re-ranker', async () => {
    const raw = synthesize({ shape: 'tiny', points: 800, seed: 3 });
    const values = sharedFloat32(raw.values.length);
    for (let e = 0; e < values.length; e++) values[e] = raw.values[e]! * 40;
    const net = new Network({ inputDim: raw.features, seed: 2, layers: [{ size: 16 }, { size: raw.labels, rerank: { weight: 1 } }] });
    await fit(net, { ...raw, values }, { epochs: 2, workers: 0 });
    expect(net.inputScale).not.toBeNull();
    net.calibration = { shortlist: 5, weights: [1, -1], bias: 0, labels: [2], shifts: [0.5], threshold: 0.4, report: {} as never };
    const grown = net.grow(raw.labels + 3);
    expect(grown.inputScale).toBe(net.inputScale);
    expect(grown.calibration).toBe(net.calibration); // new labels take its pooled map
    const p = await net.predict({ ...raw, values }, { k: 3, workers: 0 });
    const q = await grown.predict({ ...raw, values }, { k: 3, workers: 0 });
    // The new labels' rows are a new network's (seeded), so compare the old labels' order only where the top is old.
    expect(q.labels[0]).toBe(p.labels[0]);
    expect(grown.rerank!.bias).toHaveLength(raw.labels + 3);
    expect(grown.rerank!.bias[raw.labels]).toBe(-1);
    expect(grown.rerank!.offsets[raw.labels + 3]).toBe(net.rerank!.offsets[raw.labels]);
  });
});
