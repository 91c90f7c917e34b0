// netTrainSlice against the float64 reference (test/network/reference.ts): Adam (mode 0), gradients
// (mode 1) and loss (mode 2) on tiny dense and sampled networks, lazy-Adam bookkeeping, and statistics.
import { describe, expect, it } from 'vitest';
import { native } from '../../src/native/addon.js';
import type { LayerGrads, NetSpec, TrainHyper } from '../../src/native/network-types.js';
import { fixedSampling, ids, makeNet, maxRelDiff, randomData, randomizeBiases, snapshot, toCsr } from './helpers.js';
import { refFromState, refTrainSlice, zeroGrads, type ActiveSets, type RefData, type RefLayer } from './reference.js';

const HYPER = { lr: 0.01, beta1: 0.9, beta2: 0.999, eps: 1e-8 };

function train(net: NetSpec, data: RefData, pointIds: Uint32Array, h: Partial<TrainHyper> & { mode: 0 | 1 | 2 }): Float64Array {
  const stats = new Float64Array(4);
  native().netTrainSlice(net, data, pointIds, { ...HYPER, gradScale: 1 / pointIds.length, seed: 7, ...h }, stats);
  return stats;
}

function expectStateClose(net: NetSpec, ref: RefLayer[], tol = 1e-5): void {
  net.layers.forEach((l, k) => {
    const r = ref[k]!;
    expect(maxRelDiff(l.weights, r.W), `layer ${k} weights`).toBeLessThan(tol);
    expect(maxRelDiff(l.bias, r.b), `layer ${k} bias`).toBeLessThan(tol);
    expect(maxRelDiff(l.mWeights, r.mW), `layer ${k} m`).toBeLessThan(tol);
    expect(maxRelDiff(l.vWeights, r.vW), `layer ${k} v`).toBeLessThan(tol);
    expect(maxRelDiff(l.mBias, r.mb), `layer ${k} mBias`).toBeLessThan(tol);
    expect(maxRelDiff(l.vBias, r.vb), `layer ${k} vBias`).toBeLessThan(tol);
    expect(Array.from(l.rowSteps), `layer ${k} rowSteps`).toEqual(Array.from(r.rowSteps));
    expect(Array.from(l.biasSteps), `layer ${k} biasSteps`).toEqual(Array.from(r.biasSteps));
  });
}

/** Active sets of a network whose sampled layers use fixedSampling(cands): labels first (last layer), then cands. */
function fixedSets(net: NetSpec, cands: Map<number, number[]>, data: RefData): ActiveSets {
  const last = net.layers.length - 1;
  return (k, _pos, row) => {
    const c = cands.get(k);
    if (!c) return null;
    if (k !== last) return c;
    const labels = Array.from(data.labelIndices.subarray(data.labelOffsets[row]!, data.labelOffsets[row + 1]!));
    return [...labels, ...c.filter((j) => !labels.includes(j))];
  };
}

function runAdamCase(net: NetSpec, data: RefData, batches: Uint32Array[], sets?: ActiveSets): void {
  const ref = refFromState(net.layers);
  for (const b of batches) {
    const stats = train(net, data, b, { mode: 0 });
    const r = refTrainSlice(ref, data, b, { mode: 0, ...HYPER, gradScale: 1 / b.length }, sets);
    expect(stats[0]).toBeCloseTo(r.loss, 4);
    expect(stats[1]).toBe(b.length);
    expect(stats[2]).toBe(r.active);
    expectStateClose(net, ref);
  }
}

function runGradCase(net: NetSpec, data: RefData, b: Uint32Array, sets?: ActiveSets): void {
  const before = snapshot(net);
  const ref = refFromState(net.layers);
  const grads: LayerGrads[] = net.layers.map((l) => ({ weights: new Float32Array(l.weights.length), bias: new Float32Array(l.outDim) }));
  // Pre-existing content: gradients are added, not written.
  grads.forEach((g) => g.bias.fill(0.5));
  const refG = zeroGrads(ref);
  refG.b.forEach((g) => g.fill(0.5));
  const stats = train(net, data, b, { mode: 1, grads });
  const r = refTrainSlice(ref, data, b, { mode: 1, ...HYPER, gradScale: 1 / b.length }, sets, refG);
  expect(stats[0]).toBeCloseTo(r.loss, 4);
  grads.forEach((g, k) => {
    expect(maxRelDiff(g.weights, refG.W[k]!), `layer ${k} dW`).toBeLessThan(1e-5);
    expect(maxRelDiff(g.bias, refG.b[k]!), `layer ${k} db`).toBeLessThan(1e-5);
  });
  // Mode 1 leaves the network untouched.
  net.layers.forEach((l, k) => {
    expect(l.weights).toEqual(before[k]!.weights);
    expect(l.rowSteps).toEqual(before[k]!.rowSteps);
  });
}

describe('netTrainSlice: dense networks equal the reference', () => {
  const data = randomData(12, 30, 12, 11, { labelCounts: [1, 3, 0, 2, 1] });
  const batches = [ids(5), ids(5, 5), Uint32Array.of(10, 11, 0, 3)];

  it('30 -> 8 -> 12, Adam over three slices (points with 0, 1, 2 and 3 labels)', () => {
    const net = makeNet(30, [8, 12], 1);
    randomizeBiases(net, 2);
    runAdamCase(net, data, batches);
  });

  it('30 -> 8 -> 6 -> 12 (two hidden layers), Adam', () => {
    const net = makeNet(30, [8, 6, 12], 3);
    randomizeBiases(net, 4);
    runAdamCase(net, data, batches);
  });

  it('linear hidden activation, Adam', () => {
    const net = makeNet(30, [8, 6, 12], 5, 'linear');
    runAdamCase(net, data, batches);
  });

  it('wider layers exercise the full vector blocks (70 -> 40 -> 37 -> 45, 40 samples)', () => {
    const wide = randomData(40, 70, 45, 12, { maxNnz: 12 });
    const net = makeNet(70, [40, 37, 45], 6);
    randomizeBiases(net, 7);
    runAdamCase(net, wide, [ids(40), ids(33, 7)]);
  });

  it('a single softmax layer (layer 0 is the output)', () => {
    const net = makeNet(30, [12], 8);
    runAdamCase(net, data, batches);
  });

  it('mode 1 adds gradients into the buffers and leaves the state alone', () => {
    runGradCase(makeNet(30, [8, 12], 9), data, ids(12));
    runGradCase(makeNet(30, [8, 6, 12], 10), data, ids(12));
  });

  it('an empty slice, or one whose points have no labels, reports zeros and changes nothing', () => {
    const net = makeNet(30, [8, 12], 12);
    const before = snapshot(net);
    expect(Array.from(train(net, data, new Uint32Array(0), { mode: 0, gradScale: 1 }))).toEqual([0, 0, 0, 0]);
    expect(Array.from(train(net, data, Uint32Array.of(2, 7), { mode: 0 }))).toEqual([0, 2, 0, 0]); // 0 labels each
    net.layers.forEach((l, k) => {
      expect(l.weights).toEqual(before[k]!.weights);
      expect(l.rowSteps).toEqual(before[k]!.rowSteps);
      expect(l.biasSteps).toEqual(before[k]!.biasSteps);
    });
  });

  it('mode 2 returns the loss and changes nothing', () => {
    const net = makeNet(30, [8, 6, 12], 11);
    const before = snapshot(net);
    const ref = refFromState(net.layers);
    const stats = train(net, data, ids(12), { mode: 2 });
    expect(stats[0]).toBeCloseTo(refTrainSlice(ref, data, ids(12), { mode: 2, ...HYPER, gradScale: 1 }).loss, 4);
    net.layers.forEach((l, k) => expect(l.weights).toEqual(before[k]!.weights));
  });
});

describe('netTrainSlice: lazy Adam', () => {
  it('touches only the slice rows: untouched rows and their steps are unchanged', () => {
    // Points use features < 10 only; layer 0 rows 10..29 must not move.
    const rows = [
      { f: [0, 3, 7], v: [1, 0.5, 0.25], l: [2] },
      { f: [1, 9], v: [0.7, 1.2], l: [0, 5] },
    ];
    const csr = toCsr(rows);
    const net = makeNet(30, [8, 12], 21);
    const before = snapshot(net);
    train(net, csr, ids(2), { mode: 0 });
    train(net, csr, Uint32Array.of(1), { mode: 0 });
    const L0 = net.layers[0]!;
    for (let f = 0; f < 30; f++) {
      const row = L0.weights.subarray(f * 8, f * 8 + 8);
      const was = before[0]!.weights.subarray(f * 8, f * 8 + 8);
      const expected = [0, 3, 7].includes(f) ? 1 : [1, 9].includes(f) ? 2 : 0;
      expect(L0.rowSteps[f], `feature ${f}`).toBe(expected);
      if (expected === 0) expect(Array.from(row)).toEqual(Array.from(was));
      else expect(Array.from(row)).not.toEqual(Array.from(was));
    }
    expect(L0.biasSteps[0]).toBe(2);
    // Dense layer 1: every neuron is active, so every row takes a step per slice.
    expect(Array.from(net.layers[1]!.rowSteps)).toEqual(new Array(12).fill(2));
  });

  it('a sampled output layer steps only active rows (labels + candidates)', () => {
    const data = randomData(6, 30, 20, 31, { labelCounts: [1, 2] });
    const net = makeNet(30, [8, 20], 22);
    const cands = [3, 4, 11, 19];
    net.layers[1]!.sampling = fixedSampling(8, 20, cands);
    const stats = train(net, data, ids(6), { mode: 0 });
    const touched = new Set(cands);
    for (let i = 0; i < data.labelIndices.length; i++) touched.add(data.labelIndices[i]!);
    const steps = net.layers[1]!.rowSteps;
    for (let j = 0; j < 20; j++) expect(steps[j], `neuron ${j}`).toBe(touched.has(j) ? 1 : 0);
    // Missed labels: those outside the candidate buckets.
    let missed = 0;
    for (let i = 0; i < data.labelIndices.length; i++) if (!cands.includes(data.labelIndices[i]!)) missed++;
    expect(stats[3]).toBe(missed);
  });
});

describe('netTrainSlice: sampled layers equal the reference with known candidate sets', () => {
  const data = randomData(10, 30, 20, 41, { labelCounts: [1, 3, 2, 0] });

  it('sampled output layer, Adam over two slices', () => {
    const net = makeNet(30, [8, 20], 42);
    randomizeBiases(net, 43);
    const cands = new Map([[1, [0, 5, 6, 7, 13, 18]]]);
    net.layers[1]!.sampling = fixedSampling(8, 20, cands.get(1)!);
    runAdamCase(net, data, [ids(5), ids(5, 5)], fixedSets(net, cands, data));
  });

  it('step counters at 2^32 - 2 and 2^32 - 1 saturate and give finite updates equal to the reference (dense and sampled)', () => {
    // A checkpoint may hold any count; before saturation, 2^32 - 1 wrapped to 0 and the bias-correction
    // cache returned an unset entry (NaN weights with 2 workers).
    const data = randomData(10, 30, 20, 51, { labelCounts: [1, 2] });
    for (const sampled of [false, true]) {
      const net = makeNet(30, [8, 20], 52);
      randomizeBiases(net, 53);
      const cands = new Map([[1, [0, 5, 6, 7, 13, 18]]]);
      if (sampled) net.layers[1]!.sampling = fixedSampling(8, 20, cands.get(1)!);
      for (const l of net.layers) {
        for (let j = 0; j < l.rowSteps.length; j++) l.rowSteps[j] = j % 2 ? 0xffffffff : 0xfffffffe;
        l.biasSteps[0] = 0xffffffff;
      }
      runAdamCase(net, data, [ids(5), ids(5, 5), ids(10)], sampled ? fixedSets(net, cands, data) : undefined);
      for (const l of net.layers) {
        for (let i = 0; i < l.weights.length; i++) expect(Number.isFinite(l.weights[i]!)).toBe(true);
        expect(l.biasSteps[0]).toBe(0xffffffff);
        expect(Math.min(...l.rowSteps)).toBeGreaterThanOrEqual(0xfffffffe);
      }
    }
  });

  it('sampled hidden layer feeding a dense output, and sampled hidden feeding sampled output', () => {
    for (const outSampled of [false, true]) {
      const net = makeNet(30, [8, 16, 20], 44 + Number(outSampled));
      randomizeBiases(net, 46);
      const cands = new Map<number, number[]>([[1, [1, 2, 3, 8, 9, 15]]]);
      net.layers[1]!.sampling = fixedSampling(8, 16, cands.get(1)!);
      if (outSampled) {
        cands.set(2, [0, 4, 10, 12, 17]);
        net.layers[2]!.sampling = fixedSampling(16, 20, cands.get(2)!);
      }
      runAdamCase(net, data, [ids(6), ids(4, 6)], fixedSets(net, cands, data));
    }
  });

  it('mode 1 gradients through sampled layers', () => {
    const net = makeNet(30, [8, 16, 20], 47);
    const cands = new Map<number, number[]>([
      [1, [0, 2, 5, 7, 11]],
      [2, [1, 3, 4, 19]],
    ]);
    net.layers[1]!.sampling = fixedSampling(8, 16, cands.get(1)!);
    net.layers[2]!.sampling = fixedSampling(16, 20, cands.get(2)!);
    runGradCase(net, data, ids(10), fixedSets(net, cands, data));
  });

  it('per-sample random fill reaches minActive with distinct ids, reproducibly per seed', () => {
    const net = makeNet(30, [8, 20], 48);
    net.layers[1]!.sampling = { ...fixedSampling(8, 20, [1, 2], { minActive: 9 }), sharedFill: false };
    const b = Uint32Array.of(0, 1, 2); // 1, 3 and 2 labels: every sample has labels
    const s1 = train(net, data, b, { mode: 2, seed: 5 });
    // Active set: labels + candidates + fill up to 9 per sample.
    expect(s1[2]).toBe(27);
    const s2 = train(net, data, b, { mode: 2, seed: 5 });
    expect(s2[0]).toBe(s1[0]);
    const s3 = train(net, data, b, { mode: 2, seed: 6 });
    expect(s3[0]).not.toBe(s1[0]);
  });

  it('shared fill: one set S of minActive random ids per slice, plus each sample\'s labels and candidates outside S', () => {
    const net = makeNet(30, [8, 20], 48);
    net.layers[1]!.sampling = fixedSampling(8, 20, [1, 2], { minActive: 9 });
    const b = Uint32Array.of(0, 1, 2);
    const own = [0, 1, 2].map((r) => new Set([1, 2, ...data.labelIndices.subarray(data.labelOffsets[r]!, data.labelOffsets[r + 1]!)]));
    const s1 = train(net, data, b, { mode: 0, seed: 5 });
    // Rows stepped: S (9 ids) and every sample's labels and candidates; the active count is 3 * 9 plus
    // the per-sample ids that S does not hold.
    const steps = net.layers[1]!.rowSteps;
    const stepped = [...steps.keys()].filter((j) => steps[j] === 1);
    expect(steps.every((v) => v <= 1)).toBe(true);
    const union = new Set(own.flatMap((s) => [...s]));
    for (const j of union) expect(steps[j], `own id ${j}`).toBe(1);
    const outside = stepped.filter((j) => !union.has(j)).length;
    expect(outside).toBeLessThanOrEqual(9);
    expect(stepped.length).toBeGreaterThanOrEqual(9);
    expect(s1[2]).toBeGreaterThanOrEqual(27);
    expect(s1[2]).toBeLessThanOrEqual(27 + own.reduce((a, s) => a + s.size, 0));
    // Reproducible per seed, different across seeds (loss only).
    const fresh = () => {
      const n = makeNet(30, [8, 20], 48);
      n.layers[1]!.sampling = fixedSampling(8, 20, [1, 2], { minActive: 9 });
      return n;
    };
    const a = train(fresh(), data, b, { mode: 2, seed: 5 }), a2 = train(fresh(), data, b, { mode: 2, seed: 5 });
    expect(a2[0]).toBe(a[0]);
    expect(a2[2]).toBe(a[2]);
    expect(train(fresh(), data, b, { mode: 2, seed: 6 })[0]).not.toBe(a[0]);
  });
});

describe('netTrainSlice: batch-shared sets (sharedFill) computed as a dense block equal the reference', () => {
  /** Active sets with in-batch negatives and no random fill: own labels, then the batch's labels, then cands. */
  function batchSets(net: NetSpec, cands: number[], data: RefData, batch: Uint32Array): ActiveSets {
    const last = net.layers.length - 1;
    const labelsOf = (r: number) => Array.from(data.labelIndices.subarray(data.labelOffsets[r]!, data.labelOffsets[r + 1]!));
    const batchLabels = [...new Set([...batch].flatMap(labelsOf))];
    return (k, _pos, row) => {
      if (k !== last) return null;
      const own = labelsOf(row);
      return [...new Set([...own, ...batchLabels, ...cands])];
    };
  }

  function sampledNet(sizes: number[], seed: number, cands: number[], extra: object = {}): NetSpec {
    const net = makeNet(30, sizes, seed);
    randomizeBiases(net, seed + 1);
    const last = net.layers.length - 1;
    net.layers[last]!.sampling = { ...fixedSampling(sizes[last - 1]!, sizes[last]!, cands), batchNegatives: true, ...extra };
    return net;
  }

  it('Adam over two slices: S = the slice\'s labels (batchNegatives, no fill), extras = candidates outside S', () => {
    const data = randomData(40, 30, 45, 61, { labelCounts: [1, 3, 2, 5, 0] });
    const cands = [0, 5, 6, 7, 13, 18, 33, 44];
    const net = sampledNet([37, 45], 62, cands);
    const ref = refFromState(net.layers);
    for (const b of [ids(23), ids(17, 23)]) {
      const stats = train(net, data, b, { mode: 0 });
      const r = refTrainSlice(ref, data, b, { mode: 0, ...HYPER, gradScale: 1 / b.length }, batchSets(net, cands, data, b));
      expect(stats[0]).toBeCloseTo(r.loss, 4);
      expect(stats[2]).toBe(r.active);
      expectStateClose(net, ref);
    }
  });

  it('two hidden layers, and mode 1 gradients', () => {
    const data = randomData(12, 30, 20, 63, { labelCounts: [1, 3, 2] });
    const cands = [2, 9, 11];
    const net = sampledNet([8, 6, 20], 64, cands);
    runAdamCase(net, data, [ids(12)], batchSets(net, cands, data, ids(12)));
    const net2 = sampledNet([8, 6, 20], 65, cands);
    runGradCase(net2, data, ids(12), batchSets(net2, cands, data, ids(12)));
  });

  it('per-sample fill with batchNegatives gives the same sets through the row list (sharedFill false)', () => {
    const data = randomData(12, 30, 20, 66, { labelCounts: [1, 2] });
    const cands = [4, 8];
    const net = sampledNet([8, 20], 67, cands, { sharedFill: false });
    runAdamCase(net, data, [ids(12)], batchSets(net, cands, data, ids(12)));
  });
});

describe('netTrainSlice: the logQ correction of a shared set', () => {
  // With no candidates outside S, every active neuron of a sample is in S, so the corrected logit
  // z_j - log q_j is the reference's logit with bias b_j + logQ_j; the gradient w.r.t. b_j is the same.
  it('equals the reference with -log q folded into the biases of the forward pass', () => {
    const data = randomData(24, 30, 25, 71, { labelCounts: [1, 3, 2] });
    const net = makeNet(30, [9, 25], 72);
    randomizeBiases(net, 73);
    const last = net.layers[1]!;
    last.sampling = { ...fixedSampling(9, 25, []), batchNegatives: true };
    const logQ = new Float32Array(new SharedArrayBuffer(25 * 4));
    for (let j = 0; j < 25; j++) logQ[j] = Math.fround(0.3 * (j % 7) - 0.5);
    last.sampling.logQ = logQ;
    const ref = refFromState(net.layers);
    for (let j = 0; j < 25; j++) ref[1]!.b[j]! += logQ[j]!;
    const b = ids(24);
    const batchLabels = [...new Set([...b].flatMap((r) => Array.from(data.labelIndices.subarray(data.labelOffsets[r]!, data.labelOffsets[r + 1]!))))];
    const sets: ActiveSets = (k, _pos, row) => (k === 1 ? [...new Set([...data.labelIndices.subarray(data.labelOffsets[row]!, data.labelOffsets[row + 1]!), ...batchLabels])] : null);
    const stats = train(net, data, b, { mode: 0 });
    const r = refTrainSlice(ref, data, b, { mode: 0, ...HYPER, gradScale: 1 / b.length }, sets);
    expect(stats[0]).toBeCloseTo(r.loss, 4);
    for (let j = 0; j < 25; j++) ref[1]!.b[j]! -= logQ[j]!;
    expectStateClose(net, ref);
    // And it changes training: without the correction the loss differs.
    const plain = makeNet(30, [9, 25], 72);
    randomizeBiases(plain, 73);
    plain.layers[1]!.sampling = { ...fixedSampling(9, 25, []), batchNegatives: true };
    expect(train(plain, data, b, { mode: 2 })[0]).not.toBeCloseTo(stats[0]!, 3);
  });
});
