// Sampled layers with real LSH tables (DWTA hash parameters from src/lsh, tables built by lshRehash from
// the layer's weights): the active sets and the missed-label statistic equal what TypeScript computes from
// the same tables, and a synthetic problem is learned with the tables rebuilt every epoch.
import { describe, expect, it } from 'vitest';
import { allocateTables, generateHashSpec } from '../../src/lsh/index.js';
import { native } from '../../src/native/addon.js';
import type { LayerSampling, NetSpec } from '../../src/native/network-types.js';
import { shuffleInPlace, Xoshiro128 } from '../../src/util/rng.js';
import { ids, makeNet, randomData, randomizeBiases, toCsr } from './helpers.js';
import { refForward, refFromState, type RefData } from './reference.js';

function dwtaSampling(inDim: number, N: number, seed: number, query: Partial<LayerSampling['query']> = {}): LayerSampling {
  const hash = generateHashSpec({ family: 'dwta', K: 2, L: 6, dim: inDim, seed, binSize: 4, rangeBits: 4 });
  const tables = allocateTables({ L: 6, N, rangeBits: hash.rangeBits, bucketSize: 8, slack: 1, policy: 'fifo' });
  return { hash, tables, query: { mode: 0, budget: 0xffffffff, minFreq: 1, minActive: 0, ...query } };
}

function rebuild(net: NetSpec, seed: number): void {
  for (const l of net.layers) if (l.sampling) native().lshRehash(l.sampling.hash, l.sampling.tables, l.weights, 0, l.sampling.tables.L, seed);
}

/** Ids in the bucket that `key` selects in table t. */
function bucket(s: LayerSampling, t: number, key: number): number[] {
  const T = s.tables, B = 2 ** T.rangeBits;
  const start = T.offsets[t * (B + 1) + key]!, len = T.fill[t * B + key]!;
  return Array.from(T.ids.subarray(t * T.tableCapacity + start, t * T.tableCapacity + start + len));
}

describe('sampled output layer with real DWTA tables', () => {
  it('active sets = labels + union of the query buckets; missed = labels in no bucket', () => {
    const data = randomData(24, 30, 40, 701, { labelCounts: [1, 2, 4] });
    const net = makeNet(30, [16, 40], 702);
    randomizeBiases(net, 703);
    const s = dwtaSampling(16, 40, 704);
    net.layers[1]!.sampling = s;
    rebuild(net, 705);
    const stats = new Float64Array(4);
    native().netTrainSlice(net, data, ids(24), { mode: 2, lr: 0, beta1: 0.9, beta2: 0.999, eps: 1e-8, seed: 1 }, stats);
    // TypeScript side: hidden activation (reference forward), its keys, the buckets.
    const ref = refFromState(net.layers);
    let active = 0, missed = 0, nonEmpty = 0;
    for (let p = 0; p < 24; p++) {
      const h = Float32Array.from(refForward(ref, data, p, p).acts[0]!);
      const keys = new Uint32Array(6);
      native().lshHashDense(s.hash, h, 1, 0, 6, keys);
      const cands = new Set<number>();
      for (let t = 0; t < 6; t++) for (const j of bucket(s, t, keys[t]!)) cands.add(j);
      if (cands.size > 0) nonEmpty++;
      const labels = Array.from(data.labelIndices.subarray(data.labelOffsets[p]!, data.labelOffsets[p + 1]!));
      for (const l of labels) if (!cands.has(l)) missed++;
      active += new Set([...labels, ...cands]).size;
    }
    expect(nonEmpty).toBe(24);
    expect(stats[2]).toBe(active);
    expect(stats[3]).toBe(missed);
    expect(missed).toBeGreaterThan(0);
    expect(missed).toBeLessThan(data.labelIndices.length);
  });

  it('budget caps the candidates taken from the tables (labels not counted)', () => {
    const data = randomData(10, 30, 40, 711, { labelCounts: [3] });
    const net = makeNet(30, [16, 40], 712);
    net.layers[1]!.sampling = dwtaSampling(16, 40, 713, { budget: 2 });
    rebuild(net, 714);
    const stats = new Float64Array(4);
    native().netTrainSlice(net, data, ids(10), { mode: 2, lr: 0, beta1: 0.9, beta2: 0.999, eps: 1e-8, seed: 1 }, stats);
    expect(stats[2]).toBeLessThanOrEqual(10 * (3 + 2));
    expect(stats[2]).toBeGreaterThanOrEqual(10 * 3);
  });
});

describe('learning with real LSH sampling', () => {
  const LABELS = 200, DIM = 2000;
  /** Label l owns features 10l .. 10l+9; points carry 4 of them plus 6 noise features. */
  function synthetic(points: number, seed: number): RefData {
    const rng = new Xoshiro128(seed);
    const rows = [];
    for (let p = 0; p < points; p++) {
      const l = rng.below(LABELS);
      const fs = new Set<number>();
      while (fs.size < 4) fs.add(10 * l + rng.below(10));
      while (fs.size < 10) fs.add(rng.below(DIM));
      const f = [...fs].sort((a, b) => a - b);
      rows.push({ f, v: f.map(() => 1), l: [l] });
    }
    return toCsr(rows);
  }

  it('DWTA-sampled softmax (200 labels, 30 active) learns: exact P@1 > 0.9, sampled P@1 > 0.6', () => {
    const train = synthetic(4000, 721), test = synthetic(600, 722);
    const net = makeNet(DIM, [64, LABELS], 723);
    const hash = generateHashSpec({ family: 'dwta', K: 2, L: 16, dim: 64, seed: 724, binSize: 8, rangeBits: 6 });
    const tables = allocateTables({ L: 16, N: LABELS, rangeBits: hash.rangeBits, bucketSize: 16, slack: 1, policy: 'fifo' });
    net.layers[1]!.sampling = { hash, tables, query: { mode: 0, budget: 24, minFreq: 1, minActive: 30 }, sharedFill: false };
    const stats = new Float64Array(4);
    const order = ids(train.points);
    let batch = 0, active = 0, samples = 0;
    for (let e = 0; e < 8; e++) {
      rebuild(net, 800 + e);
      shuffleInPlace(order, new Xoshiro128(e));
      for (let s = 0; s < train.points; s += 64) {
        const b = order.subarray(s, s + 64);
        native().netTrainSlice(net, train, b, { mode: 0, lr: 0.003, beta1: 0.9, beta2: 0.999, eps: 1e-8, gradScale: 1 / b.length, seed: batch++ }, stats);
        active += stats[2]!;
        samples += stats[1]!;
      }
    }
    expect(active / samples).toBe(30); // labels + 24 table candidates, filled to minActive (per sample)
    rebuild(net, 900);
    const p1 = (sampled: 0 | 1) => {
      const idx = new Uint32Array(test.points), val = new Float32Array(test.points);
      native().netPredictSlice(net, test, ids(test.points), 1, sampled, idx, val);
      let hit = 0;
      for (let p = 0; p < test.points; p++) if (idx[p] === test.labelIndices[test.labelOffsets[p]!]) hit++;
      return hit / test.points;
    };
    const exact = p1(0), sampled = p1(1);
    expect(exact).toBeGreaterThan(0.9);
    expect(sampled).toBeGreaterThan(0.6);
  });
});
