// Network.load builds an inference-sized network (no Adam moments, step counters, output tables or wide
// Adagrad sums), planned as such; fit() and grow() on it allocate the training state and train exactly as a
// network loaded with its full state does.
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Network } from '../../src/network/network.js';
import { loadModel } from '../../src/network/model-file.js';
import { MemoryLimitError, planMemory, planNetworkMemory } from '../../src/network/memory-plan.js';
import { synthesize } from '../../src/datasets/synth.js';
import type { SparseDataset } from '../../src/datasets/csr.js';
import type { NetworkConfig } from '../../src/network/config.js';
import { fit } from '../../src/train/fit-network.js';

let dir: string;
let train: SparseDataset;
let test: SparseDataset;
/** A sampled hidden layer (queried through its tables) and a sampled output layer with a wide part. */
let config: NetworkConfig;
let trained: Network;
let modelPath: string;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'sublinear-inference-load-'));
  train = synthesize({ shape: 'tiny', points: 300, seed: 11 });
  test = synthesize({ shape: 'tiny', points: 60, seed: 12 });
  config = {
    inputDim: train.features,
    seed: 5,
    layers: [
      { size: 32 },
      { size: 24, activation: 'relu', sampling: { hash: 'simhash', K: 3, L: 4, budget: 12 } },
      { size: train.labels, sampling: { hash: 'dwta', K: 2, L: 6, budget: 16, minActive: 16 }, wide: { maxPerLabel: 4 } },
    ],
  };
  trained = new Network(config);
  await fit(trained, train, { epochs: 2, workers: 0 });
  modelPath = join(dir, 'model.sl');
  await trained.save(modelPath);
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

/** The network of a model file with its full training state, as Network.load built it before. */
const loadFull = (path: string) => loadModel(path, (c) => new Network(c));

describe('Network.load: an inference-sized network', () => {
  it('holds weights, biases and the wide part\'s weights only, and predicts as the trained network', async () => {
    const net = await Network.load(modelPath);
    expect(net.hasTrainingState).toBe(false);
    let weights = 0;
    for (const l of net.spec.layers) {
      for (const a of [l.mWeights, l.vWeights, l.mBias, l.vBias, l.rowSteps, l.biasSteps]) expect(a.length).toBe(0);
      expect(l.sampling?.tables.ids.length ?? 0).toBe(0);
      weights += l.weights.byteLength + l.bias.byteLength;
    }
    const wide = net.spec.layers[2]!.wide!;
    expect(wide.labels.length).toBeGreaterThan(0);
    expect(wide.accum.length).toBe(0);
    expect(net.memoryBytes()).toBe(weights + wide.offsets.byteLength + wide.labels.byteLength + wide.weights.byteLength);
    // The full state is several times larger (moments, counters, three layers' tables, Adagrad sums).
    expect((await loadFull(modelPath)).memoryBytes()).toBeGreaterThan(2.5 * net.memoryBytes());
    for (const mode of ['exact', 'sampled'] as const) {
      const a = await trained.predict(test, { k: 5, mode, workers: 0 });
      const b = await net.predict(test, { k: 5, mode, workers: 0 });
      expect(Buffer.from(b.labels.buffer).equals(Buffer.from(a.labels.buffer)), mode).toBe(true);
      expect(Buffer.from(b.scores.buffer).equals(Buffer.from(a.scores.buffer)), mode).toBe(true);
    }
    // Sampled inference allocated the tables it queries (the hidden layer's), not the output layer's.
    expect(net.spec.layers[1]!.sampling!.tables.ids.length).toBeGreaterThan(0);
    expect(net.spec.layers[2]!.sampling!.tables.ids.length).toBe(0);
    expect(net.hasTrainingState).toBe(false);
  });

  it('fit() allocates the training state and trains bit for bit as the fully loaded network (also after a sampled prediction)', async () => {
    for (const predictFirst of [false, true]) {
      const lean = await Network.load(modelPath);
      const full = await loadFull(modelPath);
      expect(full.hasTrainingState).toBe(true);
      if (predictFirst) {
        await lean.predict(test, { k: 3, mode: 'sampled', workers: 0 });
        await full.predict(test, { k: 3, mode: 'sampled', workers: 0 });
      }
      const a = await fit(lean, train, { epochs: 1, workers: 0 });
      const b = await fit(full, train, { epochs: 1, workers: 0 });
      expect(lean.hasTrainingState).toBe(true);
      expect(a.lastLoss).toBe(b.lastLoss);
      lean.spec.layers.forEach((l, k) => {
        const f = full.spec.layers[k]!;
        for (const key of ['weights', 'bias', 'mWeights', 'vWeights', 'rowSteps'] as const) {
          expect(Buffer.from(l[key].buffer, l[key].byteOffset, l[key].byteLength).equals(Buffer.from(f[key].buffer, f[key].byteOffset, f[key].byteLength)), `${predictFirst} layer ${k} ${key}`).toBe(true);
        }
      });
      expect(lean.memoryBytes()).toBe(full.memoryBytes());
    }
  });

  it('grow() from an inference-sized network equals grow() from the fully loaded one, and trains', async () => {
    const labels = train.labels + 7;
    const a = (await Network.load(modelPath)).grow(labels);
    const b = (await loadFull(modelPath)).grow(labels);
    expect(a.hasTrainingState).toBe(true);
    a.spec.layers.forEach((l, k) => {
      const f = b.spec.layers[k]!;
      for (const key of ['weights', 'bias', 'mWeights', 'vWeights', 'mBias', 'vBias', 'rowSteps', 'biasSteps'] as const) {
        expect(Array.from(l[key]), `layer ${k} ${key}`).toEqual(Array.from(f[key]));
      }
    });
    const sa = await fit(a, train, { epochs: 1, workers: 0 });
    const sb = await fit(b, train, { epochs: 1, workers: 0 });
    expect(sa.lastLoss).toBe(sb.lastLoss);
  });

  it('is planned for inference: a limit between the inference and the training plans loads', async () => {
    // Weights dominate (2000 x 256 + 256 x 500): the training plan triples them (Adam moments) and adds tables.
    const path = join(dir, 'wide-hidden.sl');
    await new Network({ inputDim: 2000, layers: [{ size: 256 }, { size: 500, sampling: { hash: 'dwta', K: 3, L: 8 } }] }).save(path);
    const net = await Network.load(path);
    const inference = planNetworkMemory(net.config, 0, undefined, false, true).totalBytes;
    const training = planNetworkMemory(net.config, 0).totalBytes;
    expect(training).toBeGreaterThan(2 * inference);
    await expect(Network.load(path, { maxMemory: Math.floor((inference + training) / 2) })).resolves.toBeInstanceOf(Network);
    const err = await Network.load(path, { maxMemory: inference - 1 }).catch((e: unknown) => e as Error);
    expect(err).toBeInstanceOf(MemoryLimitError);
    expect(err.message).toMatch(/wide-hidden\.sl: Not enough memory: the configuration needs [\d.]+ MB \(layer 0 weights 2\.05 MB, /);
    expect(err.message).not.toContain('Adam');
    expect(err.message).not.toContain('tables');
  });

  it('fit() checks the training plan against the load\'s maxMemory before allocating it (a file may declare huge tables)', async () => {
    // A tiny network whose output layer asks for 16 tables of 2^24 buckets (valid: rangeBits <= 24): a
    // model file holds no tables, so it loads in a few kB; training them would take gigabytes.
    const path = join(dir, 'huge-tables.sl');
    const cfg: NetworkConfig = { inputDim: train.features, seed: 1, layers: [{ size: 8 }, { size: train.labels, sampling: { hash: 'dwta', K: 2, L: 16, rangeBits: 24 } }] };
    await new Network(cfg, { inference: true }).save(path);
    const limit = 64 * 2 ** 20;
    const net = await Network.load(path, { maxMemory: limit });
    expect(net.memoryBytes()).toBeLessThan(2 ** 20);
    const err = await fit(net, train, { epochs: 1, workers: 0 }).catch((e: unknown) => e as Error);
    expect(err).toBeInstanceOf(MemoryLimitError);
    expect(err.message).toMatch(/^Not enough memory: the configuration needs 4\.30 GB \(output layer hash tables 4\.29 GB, .*\) but the limit is 67\.1 MB \(maxMemory given to Network\.load\)$/);
    expect(net.hasTrainingState).toBe(false); // nothing was allocated
  });
});

describe('planMemory with inference', () => {
  it('counts weights, the tables of sampled hidden layers, the output layer\'s cluster index and prediction scratch', () => {
    const plan = planMemory({
      inputDim: 10,
      workers: 2,
      batchSize: 4,
      inference: true,
      layers: [{ size: 4 }, { size: 6, sampled: { L: 2, rangeBits: 3, bucketSize: 4, slack: 1 } }, { size: 9, sampled: { L: 3, rangeBits: 3, bucketSize: 4, slack: 1 } }],
    });
    expect(plan.parts).toEqual([
      // Per worker, a slice of 4: 12 B * 4 * (hidden 4 + 6 + 128) = 6,624, plus 12 B * 9 outputs = 108.
      { name: 'worker scratch (2 workers)', bytes: 2 * 6732 },
      // 10 x 4 weights + 4 biases, 4 B each.
      { name: 'layer 0 weights', bytes: 176 },
      // L = 2, B = 8, N = 6: offsets 2*9 + fill 2*8 + seen 2*8 + ids 2*(6 + 8) + keys 2*6 = 90 u32.
      { name: 'layer 1 hash tables', bytes: 360 },
      // C = round(sqrt(9)) = 3 centres of 6 + 2 floats, C + 1 offsets, 12 B per label.
      { name: 'output layer cluster index', bytes: 4 * 3 * 8 + 4 * 4 + 12 * 9 },
      // 6 x 9 weights + 9 biases.
      { name: 'output layer weights', bytes: 252 },
      // 4 x 6 weights + 6 biases.
      { name: 'layer 1 weights', bytes: 120 },
    ].sort((x, y) => y.bytes - x.bytes));
  });

  it('Amazon-670K: the 1.95 GB training plan is 400 MB for inference with one worker', () => {
    const layers = [{ size: 128 }, { size: 670091, sampled: { L: 50, rangeBits: 18, bucketSize: 128, slack: 1 } }];
    const plan = planMemory({ inputDim: 135909, workers: 1, layers, inference: true });
    // Weights 4 * (17,396,352 + 128) + 4 * (85,771,648 + 670,091); cluster index C = 819: 4 * 819 * 130 +
    // 4 * 820 + 12 * 670,091; scratch 12 * 256 * (128 + 128) + 12 * 670,091.
    expect(plan.totalBytes).toBe(4 * (17_396_352 + 128) + 4 * (85_771_648 + 670_091) + (4 * 819 * 130 + 4 * 820 + 12 * 670_091) + (12 * 256 * 256 + 12 * 670_091));
    expect(plan.parts.map((p) => p.name)).toEqual(['output layer weights', 'layer 0 weights', 'worker scratch (1 worker)', 'output layer cluster index']);
  });
});

describe('fit({ releaseTrainingState }): the trained network left inference-sized', () => {
  it('keeps the weights, the re-ranker and the saved bytes of a run without it; gives the moments\' pages back; trains on as a loaded model', async () => {
    // A dense output layer with held-out validation and the re-ranker (the release comes before it).
    const data = synthesize({ shape: 'tiny', points: 600, seed: 21 });
    const dense: NetworkConfig = { inputDim: data.features, seed: 3, layers: [{ size: 48 }, { size: data.labels, rerank: {} }] };
    const opts = { epochs: 3, workers: 0, threads: 1, validation: { minHoldout: 100 } } as const;
    const kept = new Network(dense);
    const released = new Network(dense);
    const moments = released.spec.layers.map((l) => [l.mWeights, l.vWeights, l.rowSteps] as const);
    const a = await fit(kept, data, opts);
    const b = await fit(released, data, { ...opts, releaseTrainingState: true });
    expect(b.lastLoss).toBe(a.lastLoss);
    expect(a.rerank && !('skipped' in a.rerank) && a.rerank.points > 0).toBe(true); // the re-ranker ran after the release
    expect(b.rerank?.weight).toBe(a.rerank?.weight);
    expect(kept.hasTrainingState).toBe(true);
    expect(released.hasTrainingState).toBe(false);
    for (const l of released.spec.layers) for (const x of [l.mWeights, l.vWeights, l.mBias, l.vBias, l.rowSteps, l.biasSteps]) expect(x.length).toBe(0);
    // The arrays the run trained with were zeroed in place (netReleasePages), not merely dropped.
    for (const [m, v, steps] of moments) {
      expect(m.some((x) => x !== 0)).toBe(false);
      expect(v.some((x) => x !== 0)).toBe(false);
      expect(steps.some((x) => x !== 0)).toBe(false);
    }
    expect(kept.spec.layers[0]!.mWeights.some((x) => x !== 0)).toBe(true); // they were not zero to begin with
    const pa = join(dir, 'kept.sl'), pb = join(dir, 'released.sl');
    await kept.save(pa);
    await released.save(pb);
    expect((await readFile(pb)).equals(await readFile(pa))).toBe(true);
    const qa = await kept.predict(data, { k: 5, workers: 0 });
    const qb = await released.predict(data, { k: 5, workers: 0 });
    expect(Buffer.from(qb.scores.buffer).equals(Buffer.from(qa.scores.buffer))).toBe(true);
    // Trained again: as the model loaded from its file (moments and counters from zero), not as `kept` goes on.
    const loaded = await Network.load(pa);
    const more = { epochs: 1, workers: 0, threads: 1, validation: false } as const;
    const c = await fit(released, data, more);
    const d = await fit(loaded, data, more);
    expect(c.lastLoss).toBe(d.lastLoss);
    expect(Buffer.from(released.spec.layers[0]!.weights.buffer).equals(Buffer.from(loaded.spec.layers[0]!.weights.buffer))).toBe(true);
  });
});
