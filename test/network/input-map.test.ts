// The input feature map (src/network/input-map.ts): a network whose layer 0 holds rows only for the features
// its training data held predicts exactly as the same network with a row per feature, the unseen ones zero.
import { describe, expect, it, beforeAll, afterAll } from 'vitest';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Network } from '../../src/network/network.js';
import { fit, resume } from '../../src/train/fit-network.js';
import { train } from '../../src/job/train.js';
import { inputMapOf, mapFeatures } from '../../src/network/input-map.js';
import { OnlineLearner } from '../../src/network/online.js';
import { readBinFile } from '../../src/util/binfile.js';
import type { SparseDataset } from '../../src/datasets/csr.js';
import { Xoshiro128 } from '../../src/util/rng.js';

/** `points` points over features < `used` (of `declared`), one label < `labels` each. */
function data(points: number, used: number, declared: number, labels: number, seed: number): SparseDataset {
  const r = new Xoshiro128(seed);
  const offsets = [0], indices: number[] = [], values: number[] = [], lo = [0], li: number[] = [];
  for (let p = 0; p < points; p++) {
    const fs = new Set<number>();
    const n = 1 + r.below(6);
    while (fs.size < n) fs.add(r.below(used));
    for (const f of [...fs].sort((a, b) => a - b)) indices.push(f), values.push(Math.fround(0.2 + r.nextFloat()));
    offsets.push(indices.length);
    li.push(p % labels), lo.push(li.length);
  }
  return {
    points, features: declared, labels, offsets: Uint32Array.from(offsets), indices: Uint32Array.from(indices),
    values: Float32Array.from(values), labelOffsets: Uint32Array.from(lo), labelIndices: Uint32Array.from(li),
  };
}

// Training holds features 0..59 of 100 but every fifth (never 5, 10, ...): 49 held, 51 unseen; the test
// points hold features up to 99.
function holes(d: SparseDataset): SparseDataset {
  const keep = (f: number) => f % 5 !== 0 || f === 0;
  const offsets = [0], indices: number[] = [], values: number[] = [];
  for (let i = 0; i < d.points; i++) {
    for (let e = d.offsets[i]!; e < d.offsets[i + 1]!; e++) if (keep(d.indices[e]!)) indices.push(d.indices[e]!), values.push(d.values[e]!);
    offsets.push(indices.length);
  }
  return { ...d, offsets: Uint32Array.from(offsets), indices: Uint32Array.from(indices), values: Float32Array.from(values) };
}
const trainData = holes(data(240, 60, 100, 6, 1));
const testData = data(50, 100, 100, 6, 2);
const config = { inputDim: 100, seed: 5, layers: [{ size: 16 }, { size: 6 }] };
const opts = { epochs: 4, workers: 1, batchSize: 32, validation: false } as const;

let dir: string;
beforeAll(async () => void (dir = await mkdtemp(join(tmpdir(), 'sl-input-map-'))));
afterAll(async () => rm(dir, { recursive: true, force: true }));

/** The reference: the same network with a row per feature, trained alike, the rows of the unseen features zeroed. */
async function zeroedReference(ids: Uint32Array): Promise<Network> {
  const full = new Network(config);
  await fit(full, trainData, opts);
  const l0 = full.spec.layers[0]!, w = l0.outDim, held = new Set(ids);
  for (let f = 0; f < config.inputDim; f++) if (!held.has(f)) l0.weights.fill(0, f * w, (f + 1) * w);
  return full;
}

describe('input feature map', () => {
  it('a mapped network predicts exactly as the unmapped one with the unseen features\' rows zeroed', async () => {
    const map = inputMapOf(trainData, config.inputDim)!;
    expect(map.ids.length).toBe(49);
    const mapped = new Network(config, { inputMap: map });
    expect(mapped.config.inputDim).toBe(49);
    expect(mapped.inputFeatures).toBe(100);
    await fit(mapped, trainData, opts);
    const ref = await zeroedReference(map.ids);
    // Row i is feature ids[i]'s row of the reference, bit for bit (the same draw, the same training).
    const w = ref.spec.layers[0]!.outDim;
    map.ids.forEach((f, i) => expect(mapped.spec.layers[0]!.weights.subarray(i * w, (i + 1) * w)).toEqual(ref.spec.layers[0]!.weights.subarray(f * w, (f + 1) * w)));
    const a = await mapped.predict(testData, { k: 4, workers: 0 }), b = await ref.predict(testData, { k: 4, workers: 0 });
    expect(a.labels).toEqual(b.labels);
    expect(a.scores).toEqual(b.scores);
    // The test points' unseen features matter to the unzeroed network: the check above can fail.
    const unzeroed = new Network(config);
    await fit(unzeroed, trainData, opts);
    expect((await unzeroed.predict(testData, { k: 4, workers: 0 })).scores).not.toEqual(b.scores);
    // Mapping twice (rows taken for ids) or not at all gives other inputs.
    const twice = mapFeatures(mapFeatures(testData, map), { features: 100, ids: map.ids });
    expect(twice.indices).not.toEqual(mapFeatures(testData, map).indices);
  });

  it('keeps the map through save and load (model version 3), and explain names the original features', async () => {
    const net = new Network(config, { inputMap: inputMapOf(trainData, config.inputDim)! });
    await fit(net, trainData, opts);
    const path = join(dir, 'mapped.sl');
    await net.save(path);
    const f = await readBinFile<Record<string, unknown>>(path);
    expect(f.meta['version']).toBe(3);
    expect(f.meta['inputFeatures']).toBe(100);
    const back = await Network.load(path);
    expect(back.inputMap!.features).toBe(100);
    expect(back.inputMap!.ids).toEqual(net.inputMap!.ids);
    const a = await net.predict(testData, { k: 3, workers: 0 }), b = await back.predict(testData, { k: 3, workers: 0 });
    expect(b.scores).toEqual(a.scores);
    // A point with held features 1, 2 and unseen 5, 99: explained over 1 and 2 (original ids).
    const point = { points: 1, features: 100, labels: 0, offsets: Uint32Array.of(0, 4), indices: Uint32Array.of(1, 2, 5, 99), values: Float32Array.of(1, 1, 1, 1), labelOffsets: Uint32Array.of(0, 0), labelIndices: new Uint32Array(0) };
    const { explanations } = await back.explain(point, { k: 1, workers: 0 });
    expect(explanations[0]![0]!.features.map((c) => c.feature).sort((x, y) => x - y)).toEqual([1, 2]);
    // Data beyond the declared features is still refused.
    await expect(back.predict({ ...testData, features: 101 }, { workers: 0 })).rejects.toThrow(/101 features but the network's inputDim is 100/);
  });

  it('loads a model file written before input maps (by the previous format) and predicts exactly as it did', async () => {
    const fx = JSON.parse(await readFile(join(import.meta.dirname, 'fixtures/model-before-input-map.json'), 'utf8')) as {
      test: { offsets: number[]; indices: number[]; values: number[] }; labels: number[]; scores: number[];
    };
    const net = await Network.load(join(import.meta.dirname, 'fixtures/model-before-input-map.sl'));
    expect(net.inputMap).toBeNull();
    expect(net.config.inputDim).toBe(40);
    const t = fx.test, points = t.offsets.length - 1;
    const test = { points, features: 40, labels: 0, offsets: Uint32Array.from(t.offsets), indices: Uint32Array.from(t.indices), values: Float32Array.from(t.values), labelOffsets: new Uint32Array(points + 1), labelIndices: new Uint32Array(0) };
    const p = await net.predict(test, { k: 3, workers: 0 });
    expect([...p.labels]).toEqual(fx.labels);
    // Bit for bit on the build that wrote it (x86-64, AVX-512); another ISA's kernels sum in another order.
    p.scores.forEach((v, i) => expect(v).toBeCloseTo(fx.scores[i]!, 5));
  });

  it('train() builds the map from the training data, and a checkpointed run resumes with it', async () => {
    const ck = join(dir, 'ck');
    const { network } = await train({ train: trainData, workers: 1, threads: 1, quiet: true, checkpoint: ck, training: { epochs: 2, batchSize: 32, validation: false } });
    expect(network.inputMap!.ids).toEqual(inputMapOf(trainData, 100)!.ids);
    expect(network.config.inputDim).toBe(49);
    const back = await resume(ck);
    expect(back.inputMap!.features).toBe(100);
    expect(back.inputMap!.ids).toEqual(network.inputMap!.ids);
    expect(back.spec.layers[0]!.weights).toEqual(network.spec.layers[0]!.weights);
    // Resumed training takes the data in its original ids (the map applied once, where it enters).
    await fit(back, trainData, { ...opts, epochs: 3 });
    expect(back.config.inputDim).toBe(49);
  });

  it('online learning ignores a feature the training data never held', async () => {
    const net = new Network(config, { inputMap: inputMapOf(trainData, config.inputDim)! });
    await fit(net, trainData, opts);
    const learner = new OnlineLearner(net);
    const ex = { points: 1, features: 100, labels: 6, offsets: Uint32Array.of(0, 2), indices: Uint32Array.of(1, 97), values: Float32Array.of(1, 1), labelOffsets: Uint32Array.of(0, 1), labelIndices: Uint32Array.of(2) };
    const r = await learner.learn(ex);
    expect(r.examples).toBe(1);
    expect(learner.network.config.inputDim).toBe(49);
    expect(learner.network.inputMap!.features).toBe(100);
  });
});
