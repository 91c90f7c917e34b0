// End-to-end learning with the raw kernels: a synthetic problem where each of 50 labels owns a few
// distinctive features is learned to P@1 > 0.9 on held-out points by calling netTrainSlice in a loop.
import { describe, expect, it } from 'vitest';
import { native } from '../../src/native/addon.js';
import type { NetSpec } from '../../src/native/network-types.js';
import { shuffleInPlace, Xoshiro128 } from '../../src/util/rng.js';
import { fixedSampling, ids, makeNet, toCsr } from './helpers.js';
import type { RefData } from './reference.js';

const LABELS = 50, DIM = 1000;

/** Label l owns features 10l .. 10l+9; a point of label l has 4 of them plus 6 random noise features. */
function synthetic(points: number, seed: number): RefData {
  const rng = new Xoshiro128(seed);
  const rows = [];
  for (let p = 0; p < points; p++) {
    const l = rng.below(LABELS);
    const fs = new Set<number>();
    while (fs.size < 4) fs.add(10 * l + rng.below(10));
    while (fs.size < 10) fs.add(500 + rng.below(DIM - 500));
    const f = [...fs].sort((a, b) => a - b);
    rows.push({ f, v: f.map(() => 1), l: [l] });
  }
  return toCsr(rows);
}

function fit(net: NetSpec, data: RefData, epochs: number): number[] {
  const losses: number[] = [];
  const order = ids(data.points);
  const stats = new Float64Array(4);
  let batch = 0;
  for (let e = 0; e < epochs; e++) {
    shuffleInPlace(order, new Xoshiro128(e + 1));
    let sum = 0;
    for (let s = 0; s < data.points; s += 32) {
      const b = order.subarray(s, Math.min(s + 32, data.points));
      native().netTrainSlice(net, data, b, { mode: 0, lr: 0.005, beta1: 0.9, beta2: 0.999, eps: 1e-8, gradScale: 1 / b.length, seed: batch++ }, stats);
      sum += stats[0]!;
    }
    losses.push(sum / data.points);
  }
  return losses;
}

function precisionAt1(net: NetSpec, data: RefData, sampled: 0 | 1): number {
  const idx = new Uint32Array(data.points), val = new Float32Array(data.points);
  native().netPredictSlice(net, data, ids(data.points), 1, sampled, idx, val);
  let hit = 0;
  for (let p = 0; p < data.points; p++) if (idx[p] === data.labelIndices[data.labelOffsets[p]!]) hit++;
  return hit / data.points;
}

describe('learning a synthetic problem', () => {
  const train = synthetic(2000, 601), test = synthetic(500, 602);

  it('dense output: P@1 > 0.9 on held-out points', () => {
    const net = makeNet(DIM, [32, LABELS], 603);
    expect(precisionAt1(net, test, 0)).toBeLessThan(0.2);
    const losses = fit(net, train, 5);
    expect(losses.at(-1)!).toBeLessThan(losses[0]! * 0.5);
    expect(precisionAt1(net, test, 0)).toBeGreaterThan(0.9);
  });

  it('sampled output (labels + 10 fixed candidates + random fill to 20): exact P@1 > 0.9', () => {
    const net = makeNet(DIM, [32, LABELS], 604);
    net.layers[1]!.sampling = fixedSampling(32, LABELS, [0, 5, 10, 15, 20, 25, 30, 35, 40, 45], { minActive: 20 });
    fit(net, train, 6);
    expect(precisionAt1(net, test, 0)).toBeGreaterThan(0.9);
  });
});
