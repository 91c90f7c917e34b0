// The output layer's wide part (native/net_wide.h, src/network/wide.ts): its gradients against finite
// differences of the loss, exact prediction against the TypeScript reference, sampled prediction's own
// proposals, the choice of pairs against a brute-force recomputation, and model/checkpoint round trips.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { native } from '../../src/native/addon.js';
import type { LayerGrads, NetSpec, WideState } from '../../src/native/network-types.js';
import { buildWide, mergeWide, pickWide, wideProblem } from '../../src/network/wide.js';
import { shardLabels } from '../../src/train/sharded.js';
import { Network } from '../../src/network/network.js';
import { BLEND_SCALES, EPOCH_BLEND_SCALES } from '../../src/train/early-stop.js';
import { DEFAULT_WIDE, defaultConfig, resolveWide } from '../../src/network/config.js';
import { fileInfo } from '../../src/cli/info.js';
import { synthesize } from '../../src/datasets/synth.js';
import { Xoshiro128 } from '../../src/util/rng.js';
import { checkFiniteDifferences, FD_HYPER, sliceLoss, fixedSampling, ids, makeNet, randomData, randomizeBiases } from './helpers.js';
import { refBuildWide, refForward, refFromState, refPredict, type RefData } from './reference.js';
import { fit, resume, resumeInfo } from '../../src/train/fit-network.js';

const H = FD_HYPER;

/** A wide part over `dim` features and `labels` labels: each feature names a random subset of labels, random weights. */
function randomWide(dim: number, labels: number, seed: number, density = 0.5): WideState {
  const rng = new Xoshiro128(seed);
  const lab: number[] = [], w: number[] = [];
  const offsets = new Uint32Array(dim + 1);
  for (let f = 0; f < dim; f++) {
    for (let j = 0; j < labels; j++) {
      if (rng.nextFloat() < density) {
        lab.push(j);
        w.push(Math.fround(rng.nextFloat() - 0.5));
      }
    }
    offsets[f + 1] = lab.length;
  }
  return { inputDim: dim, offsets, labels: Uint32Array.from(lab), weights: Float32Array.from(w), accum: new Float32Array(lab.length) };
}

/** Mode-1 gradients of every weight (network and wide part) against central differences of the mode-2 loss. */
function checkGradients(net: NetSpec, data: RefData, pts: Uint32Array): void {
  const gradScale = 0.5;
  const grads: LayerGrads[] = net.layers.map((l) => ({ weights: new Float32Array(l.weights.length), bias: new Float32Array(l.outDim) }));
  const wide = net.layers.at(-1)!.wide!;
  const gradWide = new Float32Array(wide.weights.length);
  native().netTrainSlice(net, data, pts, { ...H, mode: 1, gradScale, grads, gradWide }, new Float64Array(4));
  const lossNow = () => sliceLoss(net, data, pts, gradScale);
  const nonzero = checkFiniteDifferences(wide.weights, gradWide, lossNow, 'wide');
  net.layers.forEach((l, k) => {
    checkFiniteDifferences(l.weights, grads[k]!.weights, lossNow, `layer ${k} weights`);
    checkFiniteDifferences(l.bias, grads[k]!.bias, lossNow, `layer ${k} bias`);
  });
  // Meaningful only if many wide gradients are clearly non-zero.
  expect(nonzero).toBeGreaterThan(wide.weights.length / 8);
}

describe('wide part: gradients match finite differences of the loss', () => {
  const data = randomData(8, 10, 7, 201, { labelCounts: [1, 2, 3, 0] });
  it('dense output 10 -> 6 -> 7', () => {
    const net = makeNet(10, [6, 7], 202);
    randomizeBiases(net, 203);
    net.layers[1]!.wide = randomWide(10, 7, 204);
    checkGradients(net, data, ids(8));
  });
  it('sampled output with a batch-shared set and table candidates, 10 -> 6 -> 9', () => {
    const d9 = randomData(8, 10, 9, 205, { labelCounts: [1, 2, 1, 0] });
    const net = makeNet(10, [6, 9], 206);
    randomizeBiases(net, 207);
    net.layers[1]!.sampling = fixedSampling(6, 9, [1, 4, 7], { minActive: 5 });
    net.layers[1]!.wide = randomWide(10, 9, 208, 0.6);
    checkGradients(net, d9, ids(8));
  });
});

/** Sample `row`'s hard negatives as the kernel picks them: the `m` labels outside its own with the largest wide scores. */
function refWideNegatives(w: WideState, data: RefData, row: number, m: number): number[] {
  const own = new Set(Array.from(data.labelIndices.subarray(data.labelOffsets[row]!, data.labelOffsets[row + 1]!)));
  const score = new Map<number, number>();
  for (let q = data.offsets[row]!; q < data.offsets[row + 1]!; q++) {
    for (let e = w.offsets[data.indices[q]!]!; e < w.offsets[data.indices[q]! + 1]!; e++) {
      const j = w.labels[e]!;
      if (!own.has(j)) score.set(j, (score.get(j) ?? 0) + data.values[q]! * w.weights[e]!);
    }
  }
  return [...score.entries()].sort((a, b) => b[1] - a[1] || a[0] - b[0]).slice(0, m).map(([j]) => j);
}

describe('wide part: hard negatives in training (sampling.wideNegatives)', () => {
  const data = randomData(8, 10, 12, 231, { labelCounts: [1, 2, 1] });
  function net(m: number): NetSpec {
    const n = makeNet(10, [6, 12], 232);
    randomizeBiases(n, 233);
    // No shared random set and no table candidates: each sample's active set is its labels + its hard negatives.
    n.layers[1]!.sampling = { ...fixedSampling(6, 12, [1, 4, 7], { minActive: 0, budget: 0 }), wideNegatives: m };
    n.layers[1]!.wide = randomWide(10, 12, 234, 0.4);
    return n;
  }
  it('the loss is the softmax over each sample\'s labels and its m best-scored other labels (TypeScript reference)', () => {
    for (const m of [0, 1, 3, 50]) {
      const n = net(m);
      const ref = refFromState(n.layers);
      let want = 0;
      for (let r = 0; r < data.points; r++) {
        const own = Array.from(data.labelIndices.subarray(data.labelOffsets[r]!, data.labelOffsets[r + 1]!));
        const set = [...own, ...refWideNegatives(n.layers[1]!.wide!, data, r, m)];
        want += refForward(ref, data, r, r, () => set).loss;
      }
      expect(sliceLoss(n, data, ids(8), 1), `m = ${m}`).toBeCloseTo(want, 4);
    }
  });
  it('gradients match finite differences with hard negatives on', () => {
    checkGradients(net(3), data, ids(8));
  });
  it('the option is validated and reaches the sampled layer', () => {
    expect(resolveWide({}, 'w').negatives).toBe(0);
    expect(() => resolveWide({ negatives: -1 }, 'layers[1].wide')).toThrow('layers[1].wide.negatives');
    expect(() => resolveWide({ negatives: 1.5 }, 'layers[1].wide')).toThrow('layers[1].wide.negatives');
    const n = new Network({ inputDim: 10, layers: [{ size: 16 }, { size: 40, sampling: { K: 2, L: 2 }, wide: { negatives: 7 } }] });
    expect(n.spec.layers[1]!.sampling!.wideNegatives).toBe(7);
    expect(defaultConfig({ features: 100, labels: 20000 }).layers[1]!.wide!.negatives).toBe(DEFAULT_WIDE.negatives);
  });
});

describe('wide part: prediction', () => {
  const data = randomData(12, 10, 7, 211, { labelCounts: [1, 2] });
  it('exact top-k equals the TypeScript reference (network + wide logits)', () => {
    const net = makeNet(10, [6, 7], 212);
    randomizeBiases(net, 213);
    net.layers[1]!.wide = randomWide(10, 7, 214);
    for (const w of [net.layers[1]!.wide.weights]) for (let e = 0; e < w.length; e++) w[e] = w[e]! * 6; // the wide part decides
    const k = 3;
    const idx = new Uint32Array(12 * k), val = new Float32Array(12 * k);
    native().netPredictSlice(net, data, ids(12), k, 0, idx, val);
    const ref = refFromState(net.layers);
    let differs = 0;
    const plain = makeNet(10, [6, 7], 212);
    randomizeBiases(plain, 213);
    const pIdx = new Uint32Array(12 * k), pVal = new Float32Array(12 * k);
    native().netPredictSlice(plain, data, ids(12), k, 0, pIdx, pVal);
    for (let i = 0; i < 12; i++) {
      const r = refPredict(ref, data, i, k);
      expect(Array.from(idx.subarray(i * k, i * k + k))).toEqual(r.idx);
      for (let e = 0; e < k; e++) expect(val[i * k + e]).toBeCloseTo(r.val[e]!, 5);
      if (idx[i * k] !== pIdx[i * k]) differs++;
    }
    expect(differs).toBeGreaterThan(0); // the wide part changed some top-1 (the test would be vacuous otherwise)
  });

  it('sampled prediction adds the labels only the wide part proposes', () => {
    // Sampled candidates are fixed to {1, 4}; the wide part gives label 6 a large score on feature 0.
    const net = makeNet(10, [6, 9], 215);
    net.layers[1]!.sampling = fixedSampling(6, 9, [1, 4], { minActive: 0, budget: 2 });
    const offsets = new Uint32Array(11).fill(1);
    offsets[0] = 0;
    net.layers[1]!.wide = { inputDim: 10, offsets, labels: Uint32Array.of(6), weights: Float32Array.of(50), accum: new Float32Array(1) };
    const one: RefData = {
      points: 1, offsets: Uint32Array.of(0, 2), indices: Uint32Array.of(0, 3), values: Float32Array.of(1, 0.5),
      labelOffsets: Uint32Array.of(0, 0), labelIndices: new Uint32Array(0),
    };
    const idx = new Uint32Array(3), val = new Float32Array(3);
    native().netPredictSlice(net, one, ids(1), 3, 1, idx, val);
    expect(idx[0]).toBe(6);
    expect([...idx].sort()).toEqual([1, 4, 6]);
    delete net.layers[1]!.wide;
    native().netPredictSlice(net, one, ids(1), 3, 1, idx, val);
    expect([...idx.subarray(0, 2)].sort()).toEqual([1, 4]);
  });

  it('proposes the k labels with the largest wide scores outside the candidates, ties to the smaller id', () => {
    // Candidates {1, 4}; k = 4 proposals (max(k, candidates / 4)) from the 7 other labels the wide part
    // scores. The network's logits are all 0, so the wide scores rank alone. Label 1 is a candidate with the
    // largest wide score; 3, 5 and 7 tie at 40 for the last two proposals, which go to 3 and 5.
    const net = makeNet(10, [6, 9], 216);
    net.layers[1]!.weights.fill(0);
    net.layers[1]!.bias.fill(0);
    net.layers[1]!.sampling = fixedSampling(6, 9, [1, 4], { minActive: 0, budget: 2 });
    const wl = [1, 0, 2, 7, 5, 6, 3, 8], ww = [100, 50, 45, 40, 40, 30, 40, 10];
    const offsets = new Uint32Array(11).fill(wl.length);
    offsets[0] = 0;
    net.layers[1]!.wide = { inputDim: 10, offsets, labels: Uint32Array.from(wl), weights: Float32Array.from(ww), accum: new Float32Array(wl.length) };
    const one: RefData = {
      points: 1, offsets: Uint32Array.of(0, 1), indices: Uint32Array.of(0), values: Float32Array.of(1),
      labelOffsets: Uint32Array.of(0, 0), labelIndices: new Uint32Array(0),
    };
    const k = 4, idx = new Uint32Array(k), val = new Float32Array(k);
    native().netPredictSlice(net, one, ids(1), k, 1, idx, val);
    // Scored: candidates 1 and 4, proposals 0, 2, 3, 5 (7 loses the tie); the top 4 of those.
    expect([...idx]).toEqual([1, 0, 2, 3]);
    // Softmax over the 6 scored labels: 4's wide score is 0, and 7 is not among them.
    const z = [100, 50, 45, 40, 40, 0], lse = 100 + Math.log(z.reduce((t, v) => t + Math.exp(v - 100), 0));
    expect(val[3]).toBeCloseTo(Math.exp(40 - lse), 6);
  });

  it('never proposes a label whose wide score is NaN in place of one that ranks', () => {
    // Candidates {1, 4}, 4 proposals from labels 6 (NaN, touched first), 0, 2, 3, 5, 7, 8.
    const net = makeNet(10, [6, 9], 218);
    net.layers[1]!.weights.fill(0);
    net.layers[1]!.bias.fill(0);
    net.layers[1]!.sampling = fixedSampling(6, 9, [1, 4], { minActive: 0, budget: 2 });
    const wl = [6, 0, 2, 3, 5, 7, 8], ww = [NaN, 50, 45, 40, 35, 30, 10];
    const offsets = new Uint32Array(11).fill(wl.length);
    offsets[0] = 0;
    net.layers[1]!.wide = { inputDim: 10, offsets, labels: Uint32Array.from(wl), weights: Float32Array.from(ww), accum: new Float32Array(wl.length) };
    const one: RefData = {
      points: 1, offsets: Uint32Array.of(0, 1), indices: Uint32Array.of(0), values: Float32Array.of(1),
      labelOffsets: Uint32Array.of(0, 0), labelIndices: new Uint32Array(0),
    };
    const k = 4, idx = new Uint32Array(k), val = new Float32Array(k);
    native().netPredictSlice(net, one, ids(1), k, 1, idx, val);
    expect([...idx]).toEqual([0, 2, 3, 5]);
  });

  it('proposals and scores equal a brute-force reference, with the vector and the scalar walk', () => {
    // 300 labels, lists of 0 to 140 entries (whole 16-lane steps and tails), 6 rows of 12 nonzeros; the
    // network's logits are 0, so a point's top k are the k best of its candidates' wide sums (0 without
    // any) and of every other label its lists name (k <= the proposals, max(k, candidates / 4)). The sums
    // are float32, added in the order of the row's nonzeros, as the walk adds them.
    const N = 300, D = 40, k = 8, rows = 6, cands = [3, 17, 42, 99, 150, 151, 299];
    const rng = new Xoshiro128(331);
    const lab: number[] = [], w: number[] = [];
    const offsets = new Uint32Array(D + 1);
    for (let f = 0; f < D; f++) {
      const len = f % 5 === 0 ? 0 : Math.floor(rng.nextFloat() * 141);
      const pick = new Set<number>();
      while (pick.size < len) pick.add(Math.floor(rng.nextFloat() * N));
      for (const j of [...pick].sort((a, b) => a - b)) {
        lab.push(j);
        w.push(Math.fround(rng.nextFloat() * 4 - 1));
      }
      offsets[f + 1] = lab.length;
    }
    const net = makeNet(D, [6, N], 332);
    net.layers[1]!.weights.fill(0);
    net.layers[1]!.bias.fill(0);
    net.layers[1]!.sampling = fixedSampling(6, N, cands, { minActive: 0, budget: cands.length });
    net.layers[1]!.wide = { inputDim: D, offsets, labels: Uint32Array.from(lab), weights: Float32Array.from(w), accum: new Float32Array(lab.length) };
    const dOff = [0], dIdx: number[] = [], dVal: number[] = [];
    for (let i = 0; i < rows; i++) {
      const fs = new Set<number>();
      while (fs.size < 12) fs.add(Math.floor(rng.nextFloat() * D));
      for (const f of [...fs].sort((a, b) => a - b)) {
        dIdx.push(f);
        dVal.push(Math.fround(rng.nextFloat() + 0.1));
      }
      dOff.push(dIdx.length);
    }
    const data: RefData = {
      points: rows, offsets: Uint32Array.from(dOff), indices: Uint32Array.from(dIdx), values: Float32Array.from(dVal),
      labelOffsets: new Uint32Array(rows + 1), labelIndices: new Uint32Array(0),
    };
    const expected: number[][] = [];
    for (let i = 0; i < rows; i++) {
      const sum = new Map<number, number>();
      for (let q = dOff[i]!; q < dOff[i + 1]!; q++) {
        const f = dIdx[q]!, x = dVal[q]!;
        for (let e = offsets[f]!; e < offsets[f + 1]!; e++) sum.set(lab[e]!, Math.fround((sum.get(lab[e]!) ?? 0) + Math.fround(x * w[e]!)));
      }
      for (const j of cands) if (!sum.has(j)) sum.set(j, 0);
      expected.push([...sum.entries()].sort((a, b) => b[1] - a[1] || a[0] - b[0]).slice(0, k).map(([j]) => j));
    }
    const vector = native().netWideVector(true);
    const got = (allow: boolean) => {
      native().netWideVector(allow);
      const idx = new Uint32Array(rows * k), val = new Float32Array(rows * k);
      native().netPredictSlice(net, data, ids(rows), k, 1, idx, val);
      return Array.from({ length: rows }, (_, i) => Array.from(idx.subarray(i * k, i * k + k)));
    };
    try {
      expect(got(false)).toEqual(expected);
      expect(got(true)).toEqual(expected);
    } finally {
      native().netWideVector(true);
    }
    expect(native().netWideVector(true)).toBe(vector);
    expect(vector).toBe(native().netKernelIsa === 'avx512');
  });

  it('sums a row of more than 65,535 list entries (4-byte places) as a short one', () => {
    // 10 features of 7,000 entries each, cycling over the 9 labels: every label repeated thousands of times.
    const net = makeNet(10, [6, 9], 217);
    net.layers[1]!.weights.fill(0);
    net.layers[1]!.bias.fill(0);
    net.layers[1]!.sampling = fixedSampling(6, 9, [1, 4], { minActive: 0, budget: 2 });
    const per = 7000, labels = new Uint32Array(10 * per), weights = new Float32Array(10 * per);
    const want = new Float64Array(9);
    for (let e = 0; e < labels.length; e++) {
      labels[e] = (e * 5) % 9;
      weights[e] = 0.0001 * (labels[e]! + 1) + 0.00003 * (e % 2);
      want[labels[e]!] = Math.fround(want[labels[e]!]! + weights[e]!); // in float, in the kernel's order
    }
    const offsets = Uint32Array.from({ length: 11 }, (_, f) => f * per);
    net.layers[1]!.wide = { inputDim: 10, offsets, labels, weights, accum: new Float32Array(labels.length) };
    const one: RefData = {
      points: 1, offsets: Uint32Array.of(0, 10), indices: Uint32Array.from({ length: 10 }, (_, f) => f), values: new Float32Array(10).fill(1),
      labelOffsets: Uint32Array.of(0, 0), labelIndices: new Uint32Array(0),
    };
    const k = 4, idx = new Uint32Array(k), val = new Float32Array(k);
    native().netPredictSlice(net, one, ids(1), k, 1, idx, val);
    // Scored: candidates 1 and 4 and the 4 labels with the largest sums outside them; the top 4 of those.
    const bySum = (a: number, b: number) => want[b]! - want[a]!;
    const scored = [1, 4, ...[0, 2, 3, 5, 6, 7, 8].sort(bySum).slice(0, 4)];
    const top = [...scored].sort(bySum).slice(0, k);
    expect(new Set(want).size).toBe(9); // distinct sums: the order is the test's, not a tie-break's
    expect([...idx]).toEqual(top);
    const z = scored.map((j) => want[j]!), mx = Math.max(...z), lse = mx + Math.log(z.reduce((t, v) => t + Math.exp(v - mx), 0));
    top.forEach((j, q) => expect(val[q]).toBeCloseTo(Math.exp(want[j]! - lse), 6));
  });
});

/**
 * netPredictSlice with logit scales (held-out blending): each scale's top-k equals a prediction with the
 * output layer's weights and biases multiplied by that scale in place (powers of two: exact in float).
 */
function checkScales(net: NetSpec, data: RefData, sampled: 0 | 1, k: number): void {
  const scales = [1, 0.5, 0.25, 0.0625];
  const n = data.points, S = scales.length;
  const idx = new Uint32Array(n * S * k), val = new Float32Array(n * S * k);
  native().netPredictSlice(net, data, ids(n), k, sampled, idx, val, Float32Array.from(scales));
  const out = net.layers.at(-1)!;
  let moved = 0;
  scales.forEach((x, si) => {
    const w = out.weights.slice(), b = out.bias.slice();
    for (let e = 0; e < w.length; e++) out.weights[e] = w[e]! * x;
    for (let e = 0; e < b.length; e++) out.bias[e] = b[e]! * x;
    const one = new Uint32Array(n * k), oneVal = new Float32Array(n * k);
    native().netPredictSlice(net, data, ids(n), k, sampled, one, oneVal);
    out.weights.set(w);
    out.bias.set(b);
    for (let i = 0; i < n; i++) {
      const at = (i * S + si) * k;
      expect(Array.from(idx.subarray(at, at + k)), `point ${i}, scale ${x}`).toEqual(Array.from(one.subarray(i * k, i * k + k)));
      for (let e = 0; e < k; e++) expect(val[at + e]).toBeCloseTo(oneVal[i * k + e]!, 5);
      if (si > 0 && idx[at] !== idx[i * S * k]) moved++;
    }
  });
  expect(moved).toBeGreaterThan(0); // some top-1 depends on the scale (the test would be vacuous otherwise)
}

describe('wide part: prediction under several logit scales in one pass', () => {
  it('exact, and sampled with the tables\' candidates', () => {
    const data = randomData(40, 10, 9, 216, { labelCounts: [1, 2] });
    const net = makeNet(10, [6, 9], 217);
    randomizeBiases(net, 218);
    net.layers[1]!.wide = randomWide(10, 9, 219);
    for (const w of [net.layers[1]!.wide.weights]) for (let e = 0; e < w.length; e++) w[e] = w[e]! * 2;
    for (const w of [net.layers[1]!.weights]) for (let e = 0; e < w.length; e++) w[e] = w[e]! * 4;
    checkScales(net, data, 0, 3);
    net.layers[1]!.sampling = fixedSampling(6, 9, [1, 4, 5, 7], { minActive: 0, budget: 4 });
    checkScales(net, data, 1, 3);
  });

  it('sampled with the cluster index (a trained network)', async () => {
    const syn = synthesize({ shape: 'tiny', points: 1500, seed: 220 });
    const net = new Network({
      inputDim: syn.features, seed: 221,
      layers: [{ size: 16 }, { size: syn.labels, sampling: { K: 3, L: 4, budget: 0, minActive: 20 }, wide: { ...DEFAULT_WIDE } }],
    });
    await fit(net, syn, { epochs: 1, workers: 0, validation: false });
    net.buildClusterIndex();
    const spec = { layers: net.spec.layers.slice() };
    const last = spec.layers.length - 1;
    const s = spec.layers[last]!.sampling!;
    spec.layers[last] = { ...spec.layers[last]!, sampling: { ...s, index: { ...s.index!, budget: 30 } } };
    const part = { ...syn, points: 200 };
    checkScales(spec, part, 1, 5);
  });

  it('refuses scales that are empty, too many or not finite', () => {
    const data = randomData(4, 10, 7, 222);
    const net = makeNet(10, [6, 7], 223);
    const run = (sc: Float32Array) => native().netPredictSlice(net, data, ids(4), 2, 0, new Uint32Array(4 * 2 * sc.length), new Float32Array(4 * 2 * sc.length), sc);
    expect(() => run(new Float32Array(0))).toThrow('scales must hold 1 to 64 values');
    expect(() => run(new Float32Array(65))).toThrow('scales must hold 1 to 64 values');
    expect(() => run(Float32Array.of(1, NaN))).toThrow('scales[1] is not finite');
  });
});

describe('wide part: pairs chosen from the training data', () => {
  it.each([0, 0.3])('keeps each label\'s maxPerLabel features of largest summed value holding minShare %s of its norm, feature-major, labels ascending', (minShare) => {
    const data = randomData(40, 30, 12, 221, { maxNnz: 8, labelCounts: [1, 2, 3] });
    const M = 4;
    const w = buildWide(data as never, null, 30, 12, M, 2, minShare);
    expect(wideProblem(w, 12)).toBeNull();
    if (minShare > 0) expect(w.labels.length).toBeLessThan(buildWide(data as never, null, 30, 12, M, 2, 0).labels.length); // the cut bites
    // Brute force: per label the summed values, top M by (sum desc, feature asc).
    const want = new Map<string, number>();
    for (let j = 0; j < 12; j++) {
      const sums = new Map<number, number>();
      for (let i = 0; i < data.points; i++) {
        const labs = Array.from(data.labelIndices.subarray(data.labelOffsets[i]!, data.labelOffsets[i + 1]!));
        if (!labs.includes(j)) continue;
        for (let q = data.offsets[i]!; q < data.offsets[i + 1]!; q++) sums.set(data.indices[q]!, (sums.get(data.indices[q]!) ?? 0) + Math.abs(data.values[q]!));
      }
      const all = Math.sqrt([...sums.values()].reduce((t, v) => t + v * v, 0));
      const sorted = [...sums.entries()].sort((a, b) => b[1] - a[1] || a[0] - b[0]);
      const top = sorted.slice(0, M).filter(([, v], r) => r === 0 || v >= minShare * all);
      const norm = Math.sqrt(top.reduce((t, [, v]) => t + v * v, 0));
      for (const [f, v] of top) want.set(`${f},${j}`, (2 * v) / norm);
    }
    const got = new Map<string, number>();
    for (let f = 0; f < 30; f++) for (let e = w.offsets[f]!; e < w.offsets[f + 1]!; e++) got.set(`${f},${w.labels[e]}`, w.weights[e]!);
    expect([...got.keys()].sort()).toEqual([...want.keys()].sort());
    for (const [key, v] of want) expect(got.get(key)).toBeCloseTo(v, 5);
  });
  it.each([
    [0, 16, 0],
    [0.1, 4, 8],
    [0.3, 64, 2],
  ])('native buildWide equals the TypeScript reference (minShare %s, maxPerLabel %s, init %s), on all rows and on a subset', (minShare, M, init) => {
    // Values on a coarse grid tie sums often (the order by feature id decides), zeros mark features as seen.
    const data = randomData(300, 200, 40, 223, { maxNnz: 30, labelCounts: [1, 2, 3, 5] });
    for (let q = 0; q < data.values.length; q++) data.values[q] = q % 7 === 0 ? 0 : Math.round(data.values[q]! * 4) / 4;
    const subset = Uint32Array.from({ length: 150 }, (_, i) => (i * 7) % 300);
    for (const rows of [null, subset]) {
      const got = buildWide(data as never, rows, 200, 40, M, init, minShare);
      const want = refBuildWide(data as never, rows, 200, 40, M, init, minShare);
      expect(want.labels.length).toBeGreaterThan(0);
      expect(Array.from(got.offsets)).toEqual(Array.from(want.offsets));
      expect(Array.from(got.labels)).toEqual(Array.from(want.labels));
      for (let e = 0; e < want.weights.length; e++) expect(got.weights[e]).toBeCloseTo(want.weights[e]!, 6);
      expect(got.accum.length).toBe(want.labels.length);
    }
  });
  it('native buildWide gives the same pairs on 1, 2 and 3 threads (blocks of 256 labels), equal to the TypeScript reference', () => {
    const data = randomData(900, 150, 700, 227, { maxNnz: 20, labelCounts: [1, 2, 4] });
    const want = refBuildWide(data as never, null, 150, 700, 8, 2, 0.1);
    const one = buildWide(data as never, null, 150, 700, 8, 2, 0.1, null, 1);
    expect(Array.from(one.offsets)).toEqual(Array.from(want.offsets));
    expect(Array.from(one.labels)).toEqual(Array.from(want.labels));
    for (let e = 0; e < want.weights.length; e++) expect(one.weights[e]).toBeCloseTo(want.weights[e]!, 6);
    for (const threads of [2, 3]) {
      const got = buildWide(data as never, null, 150, 700, 8, 2, 0.1, null, threads);
      expect(Array.from(got.offsets)).toEqual(Array.from(one.offsets));
      expect(Array.from(got.labels)).toEqual(Array.from(one.labels));
      expect(Array.from(got.weights)).toEqual(Array.from(one.weights));
    }
    expect(() => buildWide(data as never, null, 150, 700, 8, 2, 0.1, null, 0)).toThrow(/threads must be in \[1, 1024\]/);
  });
  it('native buildWide refuses ids out of range, naming them', () => {
    const data = randomData(10, 20, 5, 224, { maxNnz: 4, labelCounts: [1, 2] });
    expect(() => buildWide(data as never, null, 3, 5, 4)).toThrow(/feature id \d+ of point \d+ is >= inputDim 3/);
    expect(() => buildWide(data as never, null, 20, 1, 4)).toThrow(/label id \d+ of point \d+ is >= labels 1/);
    expect(() => buildWide(data as never, Uint32Array.of(10), 20, 5, 4)).toThrow(/rows\[0\] = 10 is out of range/);
    expect(() => buildWide(data as never, null, 20, 5, 0)).toThrow(/maxPerLabel must be positive/);
  });
  it('starts a label whose features are all 0-valued at weight 0 (never at a non-finite one)', () => {
    const zero: RefData = {
      points: 2, offsets: Uint32Array.of(0, 2, 3), indices: Uint32Array.of(1, 4, 2), values: Float32Array.of(0, 0, 0.5),
      labelOffsets: Uint32Array.of(0, 1, 2), labelIndices: Uint32Array.of(0, 1),
    };
    const w = buildWide(zero as never, null, 6, 2, 8, 8, 0);
    expect(wideProblem(w, 2)).toBeNull();
    expect(w.labels.length).toBe(3);
    for (const x of w.weights) expect(Number.isFinite(x)).toBe(true);
    expect(Array.from(w.weights)).toEqual([0, 8, 0]); // features 1 (label 0), 2 (label 1, its unit centroid x 8), 4 (label 0)
  });

  it('label-sharded: a slice builds exactly the whole part\'s pairs of its labels, relabelled; the slices merge back to the whole', () => {
    const data = randomData(60, 30, 14, 223, { maxNnz: 8, labelCounts: [1, 2, 3] });
    const whole = buildWide(data as never, null, 30, 14, 4, 2, 0.2);
    const freq = new Uint32Array(14);
    for (const j of data.labelIndices) freq[j]!++;
    for (const R of [1, 2, 3]) {
      const sh = shardLabels(freq, R);
      const slices = sh.labelsOf.map((labels) => {
        const w = buildWide(data as never, null, 30, 14, 4, 2, 0.2, labels);
        expect(wideProblem(w, labels.length)).toBeNull();
        const localOf = new Int32Array(14).fill(-1);
        labels.forEach((j, e) => { localOf[j] = e; });
        const want = pickWide(whole, localOf);
        // Bit for bit: the same pairs, the same initial weights, under the slice's rows.
        expect(Array.from(w.offsets)).toEqual(Array.from(want.offsets));
        expect(Array.from(w.labels)).toEqual(Array.from(want.labels));
        expect(Array.from(w.weights)).toEqual(Array.from(want.weights));
        if (R > 1) expect(w.labels.length).toBeLessThan(whole.labels.length);
        // Back to global ids: the slices' parts merge to the whole part.
        return { ...w, labels: w.labels.map((r) => labels[r]!) };
      });
      const m = mergeWide(slices, 30);
      expect(wideProblem(m, 14)).toBeNull();
      expect(Array.from(m.offsets)).toEqual(Array.from(whole.offsets));
      expect(Array.from(m.labels)).toEqual(Array.from(whole.labels));
      expect(Array.from(m.weights)).toEqual(Array.from(whole.weights));
    }
    expect(() => buildWide(data as never, null, 30, 14, 4, 2, 0.2, Uint32Array.of(3, 2))).toThrow('buildWide: slice[1] = 2 is not an ascending label id < 14');
  });

  it('refuses a damaged wide part', () => {
    const w = randomWide(5, 4, 222);
    expect(wideProblem(w, 4)).toBeNull();
    expect(wideProblem(w, 3)).toMatch(/is not a label id/);
    const bad = { ...w, offsets: w.offsets.slice() };
    bad.offsets[2] = bad.offsets[1]! - 1 >= 0 ? bad.offsets[1]! - 1 : 0;
    if (w.offsets[1]! > 0) expect(wideProblem(bad, 4)).toMatch(/decreases|ascending/);
  });
});

describe('wide part in Network: training, save/load, checkpoints', () => {
  let dir = '';
  afterAll(async () => {
    if (dir) await rm(dir, { recursive: true, force: true });
  });
  const syn = synthesize({ shape: 'tiny', points: 600, seed: 5 });
  const config = (wide: boolean) => ({
    inputDim: syn.features,
    seed: 3,
    layers: [
      { size: 32, activation: 'relu' as const },
      { size: syn.labels, activation: 'softmax' as const, ...(wide ? { wide: { maxPerLabel: 16, lr: 0.1, init: 4 } } : {}) },
    ],
  });
  it('builds its pairs at the first fit, trains them, and a saved model predicts the same after loading', async () => {
    dir = await mkdtemp(join(tmpdir(), 'sublinear-wide-'));
    const net = new Network(config(true));
    expect(net.spec.layers[1]!.wide!.labels.length).toBe(0);
    await fit(net, syn, { epochs: 2, workers: 0, validation: false });
    const w = net.spec.layers[1]!.wide!;
    expect(w.labels.length).toBeGreaterThan(0);
    expect(w.accum.some((a) => a > 0)).toBe(true); // Adagrad moved them
    const before = await net.predict(syn, { k: 3, workers: 0 });
    await net.save(join(dir, 'm.sl'));
    expect((await fileInfo(join(dir, 'm.sl'))).widePairs).toBe(w.labels.length); // `sublinear info` reports it
    const again = await Network.load(join(dir, 'm.sl'));
    expect(Array.from(again.spec.layers[1]!.wide!.weights)).toEqual(Array.from(w.weights));
    const after = await again.predict(syn, { k: 3, workers: 0 });
    expect(Array.from(after.labels)).toEqual(Array.from(before.labels));
    // A model without a wide part predicts differently on the same weights (the wide part is used).
    const m = await net.evaluate(syn, { workers: 0 });
    expect(m.p1).toBeGreaterThan(0.3);
  });
  it('held-out scoring of a sampled output layer with a wide part uses sampled inference (a cluster index each epoch)', async () => {
    const sampledCfg = {
      inputDim: syn.features, seed: 3,
      layers: [{ size: 32, activation: 'relu' as const }, { size: syn.labels, activation: 'softmax' as const, sampling: { K: 2, L: 4, minActive: 20 }, wide: { maxPerLabel: 16 } }],
    };
    const net = new Network(sampledCfg);
    const st = await fit(net, syn, { epochs: 3, workers: 0, validation: { minHoldout: 10, fraction: 0.2, patience: 5, refitMaxPoints: 0 } });
    expect(st.validation!.length).toBe(3);
    expect(net.clusterIndexSeconds).toBeGreaterThan(0); // built for the held-out scoring
    const plain = new Network({ ...sampledCfg, layers: [sampledCfg.layers[0]!, { ...sampledCfg.layers[1]!, wide: undefined }] });
    await fit(plain, syn, { epochs: 3, workers: 0, validation: { minHoldout: 10, fraction: 0.2, patience: 5, refitMaxPoints: 0 } });
    expect(plain.clusterIndexSeconds).toBe(0); // exact held-out scoring without a wide part
  });

  it('blend: the network\'s logit is weighted by the best held-out scale, the output layer scaled exactly', async () => {
    const cfg = {
      inputDim: syn.features, seed: 3,
      layers: [{ size: 32, activation: 'relu' as const }, { size: syn.labels, activation: 'softmax' as const, sampling: { K: 2, L: 4, minActive: 20 }, wide: { maxPerLabel: 16, negatives: 4 } }],
    };
    // A constant rate and no stop: both runs train the same weights whatever their held-out scores say.
    const v = { minHoldout: 10, fraction: 0.2, patience: 5, lrDecay: 1, refitMaxPoints: 0 };
    const plain = new Network(cfg);
    const byEpoch: { w: Float32Array; b: Float32Array; wide: Float32Array }[] = [];
    const sp = await fit(plain, syn, {
      epochs: 3, workers: 0, validation: { ...v, blend: false },
      onEpochEnd: () => {
        const o = plain.spec.layers[1]!;
        byEpoch.push({ w: o.weights.slice(), b: o.bias.slice(), wide: o.wide!.weights.slice() });
      },
    });
    expect(sp.blend).toBeUndefined();
    expect(sp.validation!.every((p) => p.scale === undefined)).toBe(true);
    const net = new Network(cfg);
    const st = await fit(net, syn, { epochs: 3, workers: 0, validation: v });
    const b = st.blend!;
    expect(b.points).toBe(st.validationPoints);
    expect(b.epoch).toBe(st.bestEpoch);
    const tried = b.tried;
    expect(tried.map((t) => t.scale)).toEqual([...BLEND_SCALES]);
    expect(new Set(tried.map((t) => t.score)).size).toBeGreaterThan(1); // the scale changes the ranking
    const best = tried.reduce((x, t) => (t.score > x.score ? t : x)); // the first (largest scale) of ties
    expect(b.scale).toBe(best.scale);
    // Every epoch was scored at its best of EPOCH_BLEND_SCALES: the history holds it; the kept one at all scales.
    expect(st.validation!.every((p) => (EPOCH_BLEND_SCALES as readonly number[]).includes(p.scale!))).toBe(true);
    const epochBest = tried.filter((t) => (EPOCH_BLEND_SCALES as readonly number[]).includes(t.scale)).reduce((x, t) => (t.score > x.score ? t : x));
    expect(st.validation![b.epoch - 1]!.score).toBe(epochBest.score);
    expect(st.validation![b.epoch - 1]!.scale).toBe(epochBest.scale);
    // The kept epoch's output layer times the scale, bit for bit (the wide part as trained).
    const o = net.spec.layers[1]!, kept = byEpoch[b.epoch - 1]!;
    expect(Array.from(o.weights)).toEqual(Array.from(kept.w, (w) => Math.fround(w * b.scale)));
    expect(Array.from(o.bias)).toEqual(Array.from(kept.b, (w) => Math.fround(w * b.scale)));
    expect(Array.from(o.wide!.weights)).toEqual(Array.from(kept.wide));
  });

  it('blend after a held-out selection on a copy (refitMaxPoints): the copy\'s scale on the weights trained on all points', async () => {
    const cfg = {
      inputDim: syn.features, seed: 3,
      layers: [{ size: 32, activation: 'relu' as const }, { size: syn.labels, activation: 'softmax' as const, sampling: { K: 2, L: 4, minActive: 20 }, wide: { maxPerLabel: 16, negatives: 4 } }],
    };
    const net = new Network(cfg);
    const st = await fit(net, syn, { epochs: 3, workers: 0, lr: 0.005, validation: { minHoldout: 10, fraction: 0.2, schedule: 'plateau', patience: 5, refitMaxPoints: 20_000 } });
    const sel = st.selection!;
    if (sel.method !== 'holdout' || !sel.refit || !sel.blend) throw new Error(`expected a refit with a blend, got ${JSON.stringify(sel)}`);
    expect(st.blend).toEqual(sel.blend);
    const fixed = new Network(cfg);
    await fit(fixed, syn, { epochs: sel.epochs, workers: 0, lr: 0.005, validation: false });
    const o = net.spec.layers[1]!, f = fixed.spec.layers[1]!;
    expect(Array.from(o.weights)).toEqual(Array.from(f.weights, (w) => Math.fround(w * sel.blend!.scale)));
    expect(Array.from(o.wide!.weights)).toEqual(Array.from(f.wide!.weights));
  });

  it('a checkpointed run resumes to the same weights as an uninterrupted one', async () => {
    dir ||= await mkdtemp(join(tmpdir(), 'sublinear-wide-'));
    const full = new Network(config(true));
    await fit(full, syn, { epochs: 3, workers: 0, validation: false });
    const ck = join(dir, 'ck');
    const first = new Network(config(true));
    const ctl = new AbortController();
    await fit(first, syn, {
      epochs: 3, workers: 0, validation: false, signal: ctl.signal, checkpoint: { dir: ck, every: 3 },
      onEpochEnd: (epoch) => { if (epoch === 0) ctl.abort(); },
    });
    const resumed = await resume(ck);
    expect(resumeInfo(resumed)!.position.epoch).toBe(1); // stopped after one of three epochs
    expect(resumed.spec.layers[1]!.wide!.accum.some((a) => a > 0)).toBe(true);
    await fit(resumed, syn, { workers: 0 });
    expect(Array.from(resumed.spec.layers[1]!.wide!.weights)).toEqual(Array.from(full.spec.layers[1]!.wide!.weights));
    expect(Array.from(resumed.spec.layers[1]!.weights)).toEqual(Array.from(full.spec.layers[1]!.weights));
  });
});
