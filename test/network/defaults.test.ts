// The defaults rule (defaultConfig, defaultTraining in src/network/config.ts; docs/defaults.md): every
// default comes from the data's shape, never from a dataset's name.
import { describe, expect, it } from 'vitest';
import { defaultConfig, defaultThreads, defaultWidth, defaultTraining, resolveConfig, rowUpdateShare, tablesQueriedInTraining, DEFAULT_WIDE, HIDDEN_PARAMETER_BUDGET, RARE_ROW_SHARE, SAMPLED_OUTPUT_MIN_LABELS } from '../../src/network/config.js';
import type { SparseDataset } from '../../src/datasets/index.js';
import { runOf } from '../../src/train/fit-network.js';
import { Network } from '../../src/network/network.js';
import { synthesize } from '../../src/datasets/synth.js';
import { fit } from '../../src/train/fit-network.js';
import { NATIVE_MAX_THREADS, nativeThreads } from '../../src/native/addon.js';

const shape = (features: number, labels: number, points = 10_000) => ({ features, labels, points });

describe('defaultConfig', () => {
  it('a dense output layer: 1024 or 512 units while width x (nonzeros per point + labels) fits the budget, else 256; more dropout when wide', () => {
    const h = (f: number, l: number, nnzPerPoint: number) => defaultConfig({ features: f, labels: l, points: 1000, nnz: nnzPerPoint * 1000 }).layers[0]!;
    expect(h(1836, 159, 68.7)).toEqual({ size: 1024, activation: 'relu', dropout: 0.7 }); // Bibtex's shape: 233k multiply-adds
    expect(h(500, 983, 18.4)).toEqual({ size: 256, activation: 'relu', dropout: 0.5 }); // Delicious's
    expect(h(25_887, 554, 47)).toEqual({ size: 256, activation: 'relu', dropout: 0.5 }); // a 554-label text set's
    // The edges of DENSE_WIDTH_BUDGET (2^18): 1024 x 256 outputs, 512 x 512.
    expect(h(1000, 256, 0).size).toBe(1024);
    expect(h(1000, 255, 1.5).size).toBe(512);
    expect(h(1000, 512, 0).size).toBe(512);
    expect(h(1000, 513, 0).size).toBe(256);
    expect(defaultWidth({ features: 1000, labels: 200, points: 10, nnz: 10 * 100 })).toBe(512);
    // Nonzeros from a dataset's CSR offsets (a SparseDataset as the shape), or not counted without them.
    expect(defaultWidth({ features: 1000, labels: 200, points: 2, offsets: [0, 100, 200] })).toBe(512);
    expect(defaultWidth({ features: 1000, labels: 200 })).toBe(1024);
  });

  it('a sampled output layer: 256 units; any layer at most what the parameter budget allows, at least 128', () => {
    const h = (f: number, l: number) => defaultConfig(shape(f, l)).layers[0]!;
    expect(h(35_733, 22_868)).toEqual({ size: 256, activation: 'relu', dropout: 0.5 });
    expect(h(200_000, 13_000).size).toBe(256);
    expect(h(300_000, 13_000).size).toBe(128); // (features + labels) x 256 > 2^26
    expect(h(135_909, 670_091)).toEqual({ size: 128, activation: 'relu', dropout: 0.5 });
    const edge = HIDDEN_PARAMETER_BUDGET / 256;
    expect(h(edge - SAMPLED_OUTPUT_MIN_LABELS, SAMPLED_OUTPUT_MIN_LABELS).size).toBe(256);
    expect(h(edge - SAMPLED_OUTPUT_MIN_LABELS + 1, SAMPLED_OUTPUT_MIN_LABELS).size).toBe(128);
    // A dense output layer whose parameters would not fit: 256 only where they do.
    expect(defaultWidth({ features: HIDDEN_PARAMETER_BUDGET / 512, labels: 100 })).toBe(256);
    expect(defaultWidth({ features: HIDDEN_PARAMETER_BUDGET / 256, labels: 100 })).toBe(128);
  });

  it('gives a sampled output layer a wide part, and a dense one none', () => {
    const out = (l: number) => defaultConfig(shape(10_000, l)).layers.at(-1)!;
    expect(out(SAMPLED_OUTPUT_MIN_LABELS - 1).wide).toBeUndefined();
    expect(out(SAMPLED_OUTPUT_MIN_LABELS).wide).toEqual(DEFAULT_WIDE);
    expect(resolveConfig(defaultConfig(shape(135_909, 670_091))).layers.at(-1)!.wide).toEqual(DEFAULT_WIDE);
  });

  it('samples the output layer from 8,192 labels, with the logQ correction and about 2.5 neurons per DWTA bucket', () => {
    const out = (l: number) => defaultConfig(shape(10_000, l)).layers.at(-1)!;
    expect(out(SAMPLED_OUTPUT_MIN_LABELS - 1).sampling).toBeUndefined();
    expect(out(SAMPLED_OUTPUT_MIN_LABELS).sampling).toMatchObject({ hash: 'dwta', K: 4, L: 50, logQ: true });
    expect(out(50_000).sampling!.K).toBe(5);
    expect(out(670_091).sampling!.K).toBe(6);
    expect(out(3_000_000).sampling!.K).toBe(7);
    for (const l of [20_000, 670_091, 3_000_000]) {
      const K = out(l).sampling!.K!;
      const perBucket = l / 2 ** (3 * K);
      expect(perBucket).toBeGreaterThan(2.5 / 2 ** 1.5);
      expect(perBucket).toBeLessThan(2.5 * 2 ** 1.5);
    }
  });

  it('turns the tables\' candidates off (the wide part takes their place), whatever the number of points', () => {
    const budget = (points?: number) => defaultConfig({ features: 135_909, labels: 670_091, ...(points === undefined ? {} : { points }) }).layers.at(-1)!.sampling!.budget;
    for (const p of [30_000, 200_000, undefined]) expect(budget(p)).toBe(0);
  });

  it('resolves (every default is a valid configuration)', () => {
    for (const [f, l] of [[1836, 159], [500, 983], [135_909, 670_091], [2_000_000, 20_000]] as const) {
      expect(() => resolveConfig(defaultConfig(shape(f, l)))).not.toThrow();
    }
  });
});

describe('defaultTraining', () => {
  it('lr 1e-2 and all cores as HOGWILD workers with a sampled output layer; 2e-3 and one worker whose batches all cores share with a dense one', () => {
    const dense = resolveConfig(defaultConfig(shape(1836, 159)));
    const sampled = resolveConfig(defaultConfig(shape(135_909, 670_091)));
    expect(defaultTraining(dense, 8)).toEqual({ lr: 2e-3, workers: 1, threads: 8 });
    expect(defaultTraining(sampled, 8)).toEqual({ lr: 1e-2, workers: 8, threads: 1 });
  });

  it('gives intra-batch threads only to a lone worker, and all the cores only with a dense output layer', () => {
    const dense = resolveConfig(defaultConfig(shape(1836, 159)));
    const sampled = resolveConfig(defaultConfig(shape(135_909, 670_091)));
    expect(defaultThreads(dense, 8, 1)).toBe(8);
    expect(defaultThreads(dense, 8, 2)).toBe(1);
    expect(defaultThreads(sampled, 8, 1)).toBe(1);
  });

  it('clamps the intra-batch threads to what a native call takes on hosts with more cores', () => {
    const dense = resolveConfig(defaultConfig(shape(1836, 159)));
    expect(defaultTraining(dense, 384).threads).toBe(NATIVE_MAX_THREADS);
    expect(defaultThreads(dense, 384, 1)).toBe(NATIVE_MAX_THREADS);
    expect([0, 1, 2.5, 256, 257, 4096].map(nativeThreads)).toEqual([1, 1, 2, 256, 256, 256]);
  });

  it('queries hash tables in training only with a sampled hidden layer, table candidates or a per-sample fill', () => {
    expect(tablesQueriedInTraining(resolveConfig(defaultConfig(shape(135_909, 670_091))))).toBe(false);
    const out = (sampling: object) => resolveConfig({ inputDim: 50, seed: 1, layers: [{ size: 8 }, { size: 40, sampling: { hash: 'dwta', K: 2, L: 4, ...sampling } }] });
    expect(tablesQueriedInTraining(out({ budget: 0 }))).toBe(false);
    expect(tablesQueriedInTraining(out({ budget: 16 }))).toBe(true);
    expect(tablesQueriedInTraining(out({ budget: 0, sharedFill: false }))).toBe(true);
    const hidden = resolveConfig({ inputDim: 50, seed: 1, layers: [{ size: 8 }, { size: 16, sampling: { hash: 'simhash', K: 2, L: 3 } }, { size: 40 }] });
    expect(tablesQueriedInTraining(hidden)).toBe(true);
  });

  it('fit() trains a sampled output layer at 1e-2, under held-out validation and for a fixed number of epochs', async () => {
    const syn = synthesize({ shape: 'tiny', points: 600, seed: 5 });
    const cfg = { inputDim: syn.features, seed: 3, layers: [{ size: 24 }, { size: syn.labels, sampling: { hash: 'dwta' as const, K: 2, L: 4, logQ: true } }] };
    const held = await fit(new Network(cfg), syn, { workers: 0, validation: { maxEpochs: 1, minHoldout: 1, refitMaxPoints: 0 } });
    expect(held.validation![0]!.lr).toBe(1e-2);
    // A fixed epoch count: the same weights as lr 1e-2 given explicitly (one worker in this thread: deterministic).
    const weightsAfter = async (lr?: number) => {
      const net = new Network(cfg);
      await fit(net, syn, { epochs: 1, workers: 0, ...(lr !== undefined ? { lr } : {}) });
      return Array.from(net.spec.layers[1]!.weights);
    };
    const dflt = await weightsAfter();
    expect(dflt).toEqual(await weightsAfter(1e-2));
    expect(dflt).not.toEqual(await weightsAfter(5e-3));
  });
});

/** `points` points of `perPoint` distinct features drawn from `features` (a seeded LCG), one label of `labels` each. */
function randomRows(points: number, features: number, perPoint: number, labels = 8, seed = 1): SparseDataset {
  let x = seed;
  const next = () => (x = (Math.imul(x, 1103515245) + 12345) >>> 0) / 2 ** 32;
  const offsets = new Uint32Array(points + 1), indices: number[] = [];
  for (let i = 0; i < points; ++i) {
    const row = new Set<number>();
    while (row.size < perPoint) row.add(Math.floor(next() * features));
    indices.push(...[...row].sort((a, b) => a - b));
    offsets[i + 1] = indices.length;
  }
  const labelOffsets = Uint32Array.from({ length: points + 1 }, (_, i) => i);
  const labelIndices = Uint32Array.from({ length: points }, (_, i) => i % labels);
  return {
    points, features, labels, offsets, indices: Uint32Array.from(indices), values: new Float32Array(indices.length).fill(1),
    labelOffsets, labelIndices,
  } as SparseDataset;
}

describe('the dense rate by how often the first layer\'s rows are updated (rowUpdateShare, RARE_ROW_SHARE)', () => {
  it('averages 1 - (1 - df / N)^batch over the features the data holds, a feature repeated in a point counted once', () => {
    // 4 points over 6 features: f0 in all 4, f1 in 1 (twice in point 0), f2 in 2, f3..f5 in none.
    const data = { points: 4, features: 6, offsets: [0, 3, 5, 7, 8], indices: [0, 1, 1, 0, 2, 0, 2, 0] };
    expect(rowUpdateShare(data, 2)).toBeCloseTo((1 + (1 - 0.75 ** 2) + (1 - 0.5 ** 2)) / 3, 12);
    expect(rowUpdateShare(data, 1)).toBeCloseTo((1 + 0.25 + 0.5) / 3, 12);
    expect(rowUpdateShare({ points: 0, features: 3, offsets: [0], indices: [] }, 128)).toBe(0);
  });

  it('is the share of random batches that hold the feature (counted over drawn batches)', () => {
    const data = randomRows(400, 300, 4, 8, 7);
    // Every feature's batches of 16 drawn 2,000 times: the share holding it, averaged over the held features.
    let x = 3;
    const next = () => (x = (Math.imul(x, 1103515245) + 12345) >>> 0) / 2 ** 32;
    const held = new Set(data.indices), hits = new Float64Array(data.features);
    const draws = 2000;
    for (let d = 0; d < draws; ++d) {
      const inBatch = new Set<number>();
      for (let b = 0; b < 16; ++b) {
        const i = Math.floor(next() * data.points);
        for (let q = data.offsets[i]!; q < data.offsets[i + 1]!; ++q) inBatch.add(data.indices[q]!);
      }
      for (const f of inBatch) hits[f]! += 1;
    }
    let sum = 0;
    for (const f of held) sum += hits[f]! / draws;
    // With replacement here, without in training: the same share up to 1 / points per draw.
    expect(rowUpdateShare(data, 16)).toBeCloseTo(sum / held.size, 2);
  });

  it('a dense output layer trains at 4e-3 where its rows are updated in under a quarter of the batches, else 2e-3; a sampled one at 1e-2', () => {
    const dense = resolveConfig(defaultConfig(shape(10_000, 159)));
    const sampled = resolveConfig(defaultConfig(shape(10_000, 670_091)));
    const rare = randomRows(2000, 10_000, 5); // each feature in about 1 point of 1,000: 0.06 of the batches of 128
    const common = randomRows(2000, 40, 5); // in 1 point of 8: every batch
    expect(rowUpdateShare(rare, 128)).toBeLessThan(RARE_ROW_SHARE);
    expect(rowUpdateShare(common, 128)).toBeGreaterThan(RARE_ROW_SHARE);
    expect(defaultTraining(dense, 2, rare).lr).toBe(4e-3);
    expect(defaultTraining(dense, 2, common).lr).toBe(2e-3);
    expect(defaultTraining(dense, 2).lr).toBe(2e-3); // without the data
    expect(defaultTraining(sampled, 2, rare).lr).toBe(1e-2);
    // Larger batches meet every row more often: 4,096 points a batch hold the rare data's features too.
    expect(defaultTraining(dense, 2, rare, 4096).lr).toBe(2e-3);
  });

  it('fit() takes the rate from its training data and batch size, records it, and an explicit lr wins', async () => {
    const rare = randomRows(2000, 10_000, 5);
    const cfg = { inputDim: rare.features, seed: 3, layers: [{ size: 16 }, { size: rare.labels }] };
    const net = new Network(cfg);
    const held = await fit(net, rare, { workers: 0, validation: { maxEpochs: 1, minHoldout: 1, refitMaxPoints: 0 } });
    expect(held.validation![0]!.lr).toBe(4e-3);
    expect(runOf(net).lr).toBe(4e-3);
    const given = new Network(cfg);
    await fit(given, rare, { workers: 0, epochs: 1, lr: 1e-3 });
    expect(runOf(given).lr).toBe(1e-3);
    const common = randomRows(2000, 30, 5);
    const net2 = new Network({ ...cfg, inputDim: common.features });
    await fit(net2, common, { workers: 0, epochs: 1 });
    expect(runOf(net2).lr).toBe(2e-3);
  });

  it('the row-update raise and the k-fold raise of small folds do not compound: the larger holds', async () => {
    // 460 points, each feature in about one of them: rows updated in 1 - (1 - 1/460)^128 = 0.24 of the batches
    // (raise to 4e-3); 5 folds of 368 training points, 3 batches an epoch (kfoldRate: x 4/3). Compounded: 5.3e-3.
    const data = randomRows(460, 200_000, 3);
    expect(rowUpdateShare(data, 128)).toBeLessThan(RARE_ROW_SHARE);
    const net = new Network({ inputDim: data.features, seed: 3, layers: [{ size: 8 }, { size: data.labels }] });
    const st = await fit(net, data, { workers: 0, validation: { maxEpochs: 1 } });
    expect(st.selection!.method).toBe('kfold');
    expect(st.selection!.method === 'kfold' && st.selection!.lr).toBe(4e-3);
    expect(runOf(net).lr).toBe(4e-3);
  });
});
