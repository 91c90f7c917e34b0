// The change-triggered rebuild policy: a sketch of code drift decides whether a scheduled check rebuilds.
import { describe, expect, it } from 'vitest';
import { Network } from '../../src/network/network.js';
import { synthesize } from '../../src/datasets/index.js';
import { fit } from '../../src/train/fit-network.js';

const data = synthesize({ shape: 'tiny', points: 2000, seed: 5 });
const config = () => ({
  inputDim: data.features,
  layers: [{ size: 32 }, { size: data.labels, sampling: { hash: 'dwta' as const, K: 3, L: 8, budget: 16 } }],
  seed: 6,
});

describe('change-triggered rebuilds', () => {
  it('the drift sketch is 0 right after a rebuild and grows when the weights move', async () => {
    const net = new Network(config());
    await fit(net, data, { epochs: 1, workers: 0 }); // ends with a rebuild from the final weights
    expect(net.codeChangeFraction()).toBe(0);
    const w = net.spec.layers[1]!.weights;
    for (let i = 0; i < w.length; i++) w[i] = -w[i]! + 0.05 * Math.sin(i); // every row moves a lot
    expect(net.codeChangeFraction()).toBeGreaterThan(0.5);
  });

  it('a threshold no drift reaches never rebuilds; a tiny one rebuilds at every check', async () => {
    const batches = Math.ceil(data.points / 128) * 2; // 32 batches, checks every 4
    const calm = new Network(config());
    const a = await fit(calm, data, { epochs: 2, workers: 0, rebuild: { policy: 'change', checkEvery: 4, threshold: 1 } });
    expect(a.rebuilds).toBe(0);
    const eager = new Network(config());
    const b = await fit(eager, data, { epochs: 2, workers: 0, lr: 1e-2, rebuild: { policy: 'change', checkEvery: 4, threshold: 1e-6 } });
    expect(b.rebuilds).toBe(Math.floor((batches - 1) / 4));
    expect(eager.lastCodeChange).toBeGreaterThan(0);
  });

  it('an output layer whose training queries no tables (budget 0, the batch-shared set) is never rebuilt on schedule', async () => {
    const layers = (budget: number) => [{ size: 32 }, { size: data.labels, sampling: { hash: 'dwta' as const, K: 3, L: 8, budget, minActive: 20 } }];
    const idle = new Network({ inputDim: data.features, seed: 6, layers: layers(0) });
    expect(idle.tablesInTraining).toBe(false);
    const a = await fit(idle, data, { epochs: 4, workers: 0 });
    expect(a.rebuilds).toBe(0);
    expect(a.history.every((e) => e.labelRecall === undefined)).toBe(true);
    // Nor built before the first batch or after the last: allocated and empty; sampled prediction probes the index.
    expect(a.indexSeconds).toBe(0);
    const t = idle.spec.layers[1]!.sampling!.tables;
    expect(t.ids.length).toBeGreaterThan(0);
    expect(t.fill.every((x) => x === 0)).toBe(true);
    const pred = await idle.predict(data, { k: 1, mode: 'sampled', workers: 0, candidates: 20 });
    expect(pred.outputsScoredPerPoint).toBeLessThan(data.labels);
    const used = new Network({ inputDim: data.features, seed: 6, layers: layers(16) });
    expect(used.tablesInTraining).toBe(true);
    const b = await fit(used, data, { epochs: 4, workers: 0 });
    expect(b.rebuilds).toBeGreaterThan(0); // 64 batches: a rebuild after 50
    expect(b.indexSeconds).toBeGreaterThan(0);
    expect(used.spec.layers[1]!.sampling!.tables.fill.some((x) => x > 0)).toBe(true);
    expect(b.history.every((e) => e.labelRecall !== undefined)).toBe(true);
    // A sampled hidden layer queries its tables whatever the output layer does.
    expect(new Network({ inputDim: data.features, layers: [{ size: 32 }, { size: 64, sampling: { K: 3, L: 4 } }, { size: data.labels, sampling: { K: 3, L: 8, budget: 0 } }] }).tablesInTraining).toBe(true);
  });
});
