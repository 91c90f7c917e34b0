// netPredictSlice: exact top-k equals the reference (ids, order and probabilities); sampled prediction
// returns only LSH candidates; padding when k exceeds the computed set.
import { describe, expect, it } from 'vitest';
import { native } from '../../src/native/addon.js';
import type { NetSpec } from '../../src/native/network-types.js';
import { fixedSampling, ids, makeNet, randomData, randomizeBiases } from './helpers.js';
import { refFromState, refPredict, type ActiveSets, type RefData } from './reference.js';

function predict(net: NetSpec, data: RefData, pts: Uint32Array, k: number, sampled: 0 | 1) {
  const idx = new Uint32Array(pts.length * k), val = new Float32Array(pts.length * k);
  native().netPredictSlice(net, data, pts, k, sampled, idx, val);
  return { idx, val };
}

function expectMatchesReference(net: NetSpec, data: RefData, pts: Uint32Array, k: number, sampled: 0 | 1, sets?: ActiveSets) {
  const ref = refFromState(net.layers);
  const got = predict(net, data, pts, k, sampled);
  pts.forEach((row, i) => {
    const r = refPredict(ref, data, row, k, sets);
    expect(Array.from(got.idx.subarray(i * k, i * k + k)), `row ${row}`).toEqual(r.idx);
    for (let e = 0; e < k; e++) expect(got.val[i * k + e]!).toBeCloseTo(r.val[e]!, 5);
  });
  return got;
}

describe('netPredictSlice exact', () => {
  const data = randomData(20, 30, 12, 201);

  it('equals the reference top-k on 30 -> 8 -> 12 and 30 -> 8 -> 6 -> 12', () => {
    for (const sizes of [[8, 12], [8, 6, 12]]) {
      const net = makeNet(30, sizes, 202);
      randomizeBiases(net, 203);
      expectMatchesReference(net, data, ids(20), 4, 0);
    }
  });

  it('pads with 4294967295 / 0 when k exceeds the number of labels; probabilities sum to 1', () => {
    const net = makeNet(30, [8, 12], 204);
    const got = expectMatchesReference(net, data, Uint32Array.of(3, 0, 19), 15, 0);
    for (let i = 0; i < 3; i++) {
      let sum = 0;
      for (let e = 0; e < 15; e++) sum += got.val[i * 15 + e]!;
      expect(sum).toBeCloseTo(1, 5);
      expect(Array.from(got.idx.subarray(i * 15 + 12, i * 15 + 15))).toEqual([0xffffffff, 0xffffffff, 0xffffffff]);
    }
  });

  it('a single softmax layer', () => {
    expectMatchesReference(makeNet(30, [12], 205), data, ids(20), 3, 0);
  });

  it('many outputs and several slices of candidates (70 -> 16 -> 700, k = 3 and 10)', () => {
    const wide = randomData(45, 70, 700, 206, { maxNnz: 10 });
    const net = makeNet(70, [16, 700], 207);
    randomizeBiases(net, 208);
    expectMatchesReference(net, wide, ids(45), 3, 0);
    expectMatchesReference(net, wide, ids(37, 8), 10, 0);
  });

  it('threads: the points in one range per thread give the reference top-k and the bits of one thread', () => {
    // 150 points: up to 4 ranges of >= 32; 37 outputs (row-block tails); two logit scales (out (n, S, k)).
    const many = randomData(150, 70, 37, 210, { maxNnz: 12 });
    const net = makeNet(70, [16, 37], 211);
    randomizeBiases(net, 212);
    const pts = ids(150), k = 5, scales = Float32Array.of(1, 0.5);
    const run = (threads?: number) => {
      const idx = new Uint32Array(pts.length * 2 * k), val = new Float32Array(pts.length * 2 * k);
      const scored = native().netPredictSlice(net, many, pts, k, 0, idx, val, scales, threads);
      return { idx, val, scored };
    };
    const one = run();
    const single = expectMatchesReference(net, many, pts, k, 0);
    for (let i = 0; i < pts.length; i++) {
      expect(Array.from(one.idx.subarray(i * 2 * k, i * 2 * k + k))).toEqual(Array.from(single.idx.subarray(i * k, i * k + k)));
    }
    for (const threads of [2, 3, 4, 7]) {
      const t = run(threads);
      expect(Buffer.from(t.idx.buffer).equals(Buffer.from(one.idx.buffer)), `${threads} threads: ids`).toBe(true);
      expect(Buffer.from(t.val.buffer).equals(Buffer.from(one.val.buffer)), `${threads} threads: probabilities`).toBe(true);
      expect(t.scored).toBe(one.scored);
    }
    expect(() => run(0)).toThrow(/threads must be in \[1, 256\]/);
  });

  it('exact mode computes every neuron of sampled layers', () => {
    const net = makeNet(30, [8, 16, 12], 209);
    net.layers[1]!.sampling = fixedSampling(8, 16, [0, 1]);
    net.layers[2]!.sampling = fixedSampling(16, 12, [5]);
    expectMatchesReference(net, data, ids(20), 5, 0);
  });
});

describe('netPredictSlice sampled', () => {
  const data = randomData(15, 30, 20, 211);

  it('scores only the candidates of the sampled output layer', () => {
    const net = makeNet(30, [8, 20], 212);
    randomizeBiases(net, 213);
    const cands = [2, 3, 9, 14, 17];
    net.layers[1]!.sampling = fixedSampling(8, 20, cands);
    const sets: ActiveSets = (k) => (k === 1 ? cands : null);
    const got = expectMatchesReference(net, data, ids(15), 7, 1, sets);
    for (let i = 0; i < 15; i++) {
      const row = Array.from(got.idx.subarray(i * 7, i * 7 + 7));
      expect(row.slice(0, 5).every((j) => cands.includes(j))).toBe(true);
      expect(row.slice(5)).toEqual([0xffffffff, 0xffffffff]);
      expect(got.val.subarray(i * 7, i * 7 + 7).reduce((a, b) => a + b, 0)).toBeCloseTo(1, 5);
    }
  });

  it('sampled hidden layer with known candidates', () => {
    const net = makeNet(30, [8, 16, 20], 214);
    const c1 = [0, 3, 4, 10, 11, 15];
    net.layers[1]!.sampling = fixedSampling(8, 16, c1);
    expectMatchesReference(net, data, ids(15), 4, 1, (k) => (k === 1 ? c1 : null));
  });

  it('random fill: minActive distinct ids, reproducible for the same points', () => {
    const net = makeNet(30, [8, 20], 215);
    net.layers[1]!.sampling = fixedSampling(8, 20, [1], { minActive: 6 });
    const a = predict(net, data, ids(15), 8, 1);
    const b = predict(net, data, ids(15), 8, 1);
    expect(a.idx).toEqual(b.idx);
    for (let i = 0; i < 15; i++) {
      const row = Array.from(a.idx.subarray(i * 8, i * 8 + 8));
      const real = row.filter((j) => j !== 0xffffffff);
      expect(real.length).toBe(6);
      expect(new Set(real).size).toBe(6);
      expect(real).toContain(1);
    }
  });
});
