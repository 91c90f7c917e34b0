// The change-triggered rebuild policy: a sketch of code drift decides whether a scheduled check rebuilds.
import { describe, expect, it } from 'vitest';
import { Network } from '../../src/network/network.js';
import { synthesize } from '../../datasets/index.js';

const data = synthesize({ shape: 'tiny', points: 2000, seed: 5 });
const config = () => ({
  inputDim: data.features,
  layers: [{ size: 32 }, { size: data.labels, sampling: { hash: 'dwta' as const, K: 3, L: 8, budget: 16 } }],
  seed: 6,
});

describe('change-triggered rebuilds', () => {
  it('the drift sketch is 0 right after a rebuild and grows when the weights move', async () => {
    const net = new Network(config());
    await net.fit(data, { epochs: 1, workers: 0 }); // ends with a rebuild from the final weights
    expect(net.codeChangeFraction()).toBe(0);
    const w = net.spec.layers[1]!.weights;
    for (let i = 0; i < w.length; i++) w[i] = -w[i]! + 0.05 * Math.sin(i); // every row moves a lot
    expect(net.codeChangeFraction()).toBeGreaterThan(0.5);
  });

  it('a threshold no drift reaches never rebuilds; a tiny one rebuilds at every check', async () => {
    const batches = Math.ceil(data.points / 128) * 2; // 32 batches, checks every 4
    const calm = new Network(config());
    const a = await calm.fit(data, { epochs: 2, workers: 0, rebuild: { policy: 'change', checkEvery: 4, threshold: 1 } });
    expect(a.rebuilds).toBe(0);
    const eager = new Network(config());
    const b = await eager.fit(data, { epochs: 2, workers: 0, lr: 1e-2, rebuild: { policy: 'change', checkEvery: 4, threshold: 1e-6 } });
    expect(b.rebuilds).toBe(Math.floor((batches - 1) / 4));
    expect(eager.lastCodeChange).toBeGreaterThan(0);
  });
});
