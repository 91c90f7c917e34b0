// The worker pool: shared memory really shared, one worker bit-identical to the serial engine,
// and exactly-once batch accounting under injected worker failures.
import { describe, expect, it } from 'vitest';
import { Network } from '../../src/network/network.js';
import { synthesize } from '../../src/datasets/index.js';
import { fit } from '../../src/train/fit-network.js';

const data = synthesize({ shape: 'tiny', points: 1500, seed: 11 });
const config = () => ({
  inputDim: data.features,
  layers: [{ size: 32 }, { size: data.labels, sampling: { hash: 'dwta' as const, K: 3, L: 8, budget: 16 } }],
  seed: 4,
});

function bytesOf(net: Network): Buffer[] {
  return net.spec.layers.flatMap((l) => [l.weights, l.bias, l.mWeights, l.vWeights].map((a) => Buffer.from(a.buffer, a.byteOffset, a.byteLength)));
}

describe('HOGWILD worker pool', () => {
  it('updates made by a worker thread are visible to the main thread (shared memory)', async () => {
    const net = new Network(config());
    const before = Float32Array.from(net.spec.layers[1]!.weights);
    await fit(net, data, { epochs: 1, workers: 1 });
    const after = net.spec.layers[1]!.weights;
    let changed = 0;
    for (let i = 0; i < after.length; i++) if (after[i] !== before[i]) changed++;
    expect(changed).toBeGreaterThan(0);
    expect(net.spec.layers[1]!.weights.buffer).toBeInstanceOf(SharedArrayBuffer);
  });

  it('one worker gives bit-identical weights to the serial engine', async () => {
    const serial = new Network(config());
    const pooled = new Network(config());
    await fit(serial, data, { epochs: 2, workers: 0, rebuild: { first: 3 } });
    await fit(pooled, data, { epochs: 2, workers: 1, rebuild: { first: 3 } });
    const a = bytesOf(serial), b = bytesOf(pooled);
    for (let i = 0; i < a.length; i++) expect(b[i]!.equals(a[i]!)).toBe(true);
  });

  it('two workers train (lock-free) and account for every sample exactly once', async () => {
    const net = new Network(config());
    const stats = await fit(net, data, { epochs: 2, workers: 2 });
    expect(stats.samples).toBe(2 * data.points);
    expect(stats.batches).toBe(2 * Math.ceil(data.points / 128));
  });

  it('a batch whose worker fails before updating is retried once and counted once (the weights: test/train/faults.test.ts)', async () => {
    const net = new Network(config());
    const stats = await fit(net, data, { epochs: 1, workers: 2, faultInjection: { batch: 3, failures: 1 } });
    expect(stats.samples).toBe(data.points);
    expect(stats.batches).toBe(Math.ceil(data.points / 128));
    expect(stats.lostBatches).toBe(0);
  });

  it('a batch that fails twice stops training with a clear error', async () => {
    const net = new Network(config());
    await expect(fit(net, data, { epochs: 1, workers: 2, faultInjection: { batch: 2, failures: 2 } })).rejects.toThrow(
      /training stopped: batch 2 of epoch 1 failed twice: injected failure before the update \(attempt 1\) \(first: injected failure before the update \(attempt 0\)\)/,
    );
  });
});

describe('split batches', () => {
  it('splitting each batch across two workers still processes every sample exactly once', async () => {
    const net = new Network(config());
    const stats = await fit(net, data, { epochs: 2, workers: 2, split: true });
    expect(stats.samples).toBe(2 * data.points);
    expect(stats.batches).toBe(2 * Math.ceil(data.points / 128));
  });
  it('with one worker, split equals whole batches bit for bit', async () => {
    const a = new Network(config()), b = new Network(config());
    await fit(a, data, { epochs: 1, workers: 1, split: true });
    await fit(b, data, { epochs: 1, workers: 1 });
    const x = bytesOf(a), y = bytesOf(b);
    for (let i = 0; i < x.length; i++) expect(x[i]!.equals(y[i]!)).toBe(true);
  });
});
