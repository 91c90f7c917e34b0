import { describe, expect, it } from 'vitest';
import {
  AMAZON_PROPENSITY,
  computeMetrics,
  DEFAULT_PROPENSITY,
  inversePropensity,
  labelFrequencies,
  NO_PREDICTION,
} from '../../src/network/metrics.js';
import { Xoshiro128 } from '../../src/util/rng.js';

const NO = NO_PREDICTION;
const L2_3 = 1 / Math.log2(3); // 0.6309297535714575, DCG weight of rank 2
const L2_5 = 1 / Math.log2(5); // 0.43067655807339306, DCG weight of rank 4

/** Builds CSR label arrays from lists. */
function csr(rows: number[][]): { labelOffsets: Uint32Array; labelIndices: Uint32Array } {
  const labelOffsets = new Uint32Array(rows.length + 1);
  rows.forEach((r, i) => (labelOffsets[i + 1] = labelOffsets[i]! + r.length));
  return { labelOffsets, labelIndices: Uint32Array.from(rows.flat()) };
}

describe('labelFrequencies', () => {
  it('counts occurrences per label', () => {
    expect(Array.from(labelFrequencies(Uint32Array.from([0, 2, 2, 3, 2]), 5))).toEqual([1, 0, 3, 1, 0]);
  });
  it('rejects ids outside the label range', () => {
    expect(() => labelFrequencies(Uint32Array.from([0, 4]), 4)).toThrow('Expected label ids < 4 but received 4 at position 1');
  });
});

describe('inversePropensity', () => {
  it('follows q = 1 + C (N_l + B)^-A with C = (ln N - 1)(B + 1)^A', () => {
    // N = 10, A = 0.55, B = 1.5: C = (ln 10 - 1) * 2.5^0.55 = 1.302585 * 1.655265 = 2.156120895719132.
    // N_l = 1: (1 + 1.5)^-0.55 = 1 / 2.5^0.55 cancels (B + 1)^A, so q = 1 + ln 10 - 1 = ln 10 exactly.
    // N_l = 0: 1 + 2.156121 * 1.5^-0.55 = 2.7251343234120733; N_l = 3: 1 + 2.156121 * 4.5^-0.55 = 1.9427710237221416.
    const q = inversePropensity(Uint32Array.from([0, 1, 3]), 10, 0.55, 1.5);
    expect(q[0]).toBeCloseTo(2.7251343234120733, 14);
    expect(q[1]).toBeCloseTo(Math.log(10), 14);
    expect(q[2]).toBeCloseTo(1.9427710237221416, 14);
    // Defaults are A = 0.55, B = 1.5.
    expect(inversePropensity(Uint32Array.from([0, 1, 3]), 10)).toEqual(q);
    expect(DEFAULT_PROPENSITY).toEqual({ A: 0.55, B: 1.5 });
  });
  it('uses the Amazon parameters when asked', () => {
    // N = 1000, A = 0.6, B = 2.6: C = (ln 1000 - 1) * 3.6^0.6 = 12.741014131254552;
    // N_l = 0: 1 + C * 2.6^-0.6 = 8.18157976686459; N_l = 100: 1 + C * 102.6^-0.6 = 1.7916178545232047.
    const q = inversePropensity([0, 100], 1000, AMAZON_PROPENSITY.A, AMAZON_PROPENSITY.B);
    expect(q[0]).toBeCloseTo(8.18157976686459, 13);
    expect(q[1]).toBeCloseTo(1.7916178545232047, 13);
  });
  it('validates its arguments', () => {
    expect(() => inversePropensity([1], 0)).toThrow('Expected positive integer for numTrain but received 0');
    expect(() => inversePropensity([1], 10, -1)).toThrow('Expected positive number for propensityA but received -1');
    expect(() => inversePropensity([1], 10, 0.5, 0)).toThrow('Expected positive number for propensityB but received 0');
  });
});

describe('computeMetrics', () => {
  it('P@k and nDCG@k on three points, one without labels', () => {
    const { labelOffsets, labelIndices } = csr([[1, 4], [0], []]);
    // prettier-ignore
    const topIdx = Uint32Array.from([
      4, 2, 1,   // y = {1, 4}: hits at ranks 1 and 3
      3, 0, NO,  // y = {0}: hit at rank 2; NO_PREDICTION is a miss
      0, 1, 2,   // y = {}: counts in the denominators with 0
    ]);
    const m = computeMetrics({ topIdx, kMax: 3, labelOffsets, labelIndices, ks: [1, 2, 3] });
    expect(m.points).toBe(3);
    // P@1 = (1 + 0 + 0)/3; P@2 = (1/2 + 1/2 + 0)/3; P@3 = (2/3 + 1/3 + 0)/3: all 1/3.
    expect(m.p1).toBeCloseTo(1 / 3, 15);
    expect(m.p2).toBeCloseTo(1 / 3, 15);
    expect(m.p3).toBeCloseTo(1 / 3, 15);
    // nDCG@1: row 0 = 1/1, row 1 = 0 -> 1/3.
    expect(m.ndcg1).toBeCloseTo(1 / 3, 15);
    // nDCG@2: row 0 = 1 / (1 + 1/log2 3) = 0.6131471927654584 (|y| = 2 so IDCG@2 = 1 + 0.6309);
    //         row 1 = (1/log2 3) / 1 = 0.6309297535714575 (|y| = 1 so IDCG = 1).
    expect(m.ndcg2).toBeCloseTo((1 / (1 + L2_3) + L2_3) / 3, 15);
    expect(m.ndcg2).toBeCloseTo((0.6131471927654584 + 0.6309297535714575) / 3, 15);
    // nDCG@3: row 0 = (1 + 1/log2 4) / (1 + 1/log2 3) = 1.5 / 1.6309297535714575 (IDCG capped at |y| = 2);
    //         row 1 = 0.6309297535714575.
    expect(m.ndcg3).toBeCloseTo((1.5 / 1.6309297535714575 + 0.6309297535714575) / 3, 15);
    expect(m.psp1).toBeUndefined();
  });

  it('default ks are 1, 3, 5', () => {
    const { labelOffsets, labelIndices } = csr([[2, 5, 7]]);
    // hits at ranks 1 (5), 3 (7) and 4 (2).
    const m = computeMetrics({ topIdx: Uint32Array.from([5, 9, 7, 2, 1]), kMax: 5, labelOffsets, labelIndices });
    expect(Object.keys(m).sort()).toEqual(['ndcg1', 'ndcg3', 'ndcg5', 'p1', 'p3', 'p5', 'points']);
    expect(m.p1).toBe(1);
    expect(m.p3).toBeCloseTo(2 / 3, 15);
    expect(m.p5).toBeCloseTo(3 / 5, 15);
    expect(m.ndcg1).toBe(1);
    // IDCG@3 = IDCG@5 = 1 + 1/log2 3 + 1/log2 4 = 2.1309297535714575 (|y| = 3).
    // DCG@3 = 1 + 1/log2 4 = 1.5; DCG@5 = 1.5 + 1/log2 5 = 1.930676558073393.
    expect(m.ndcg3).toBeCloseTo(1.5 / 2.1309297535714575, 15);
    expect(m.ndcg5).toBeCloseTo((1.5 + L2_5) / 2.1309297535714575, 15);
  });

  it('PSP@k is the ratio of dataset totals (pyxclib), with hand-set propensities', () => {
    const q = Float64Array.from([1, 2, 4, 8]); // q_l = 1/p_l for labels 0..3
    const { labelOffsets, labelIndices } = csr([[0, 2], [1, 3], [3], []]);
    // prettier-ignore
    const topIdx = Uint32Array.from([
      2, 1,  // y = {0,2}: hit rank 1 (q 4).   best by q: 2 (4), 0 (1) -> best@1 = 4, best@2 = 5
      1, 0,  // y = {1,3}: hit rank 1 (q 2).   best: 3 (8), 1 (2)      -> best@1 = 8, best@2 = 10
      0, 3,  // y = {3}:   hit rank 2 (q 8).   best: 3 (8)             -> best@1 = 8, best@2 = 8
      0, 1,  // y = {}:    adds 0 to both totals
    ]);
    const m = computeMetrics({ topIdx, kMax: 2, labelOffsets, labelIndices, invPropensity: q, ks: [1, 2] });
    // PSP@1 = (4 + 2 + 0) / (4 + 8 + 8) = 6/20; PSP@2 = (4 + 2 + 8) / (5 + 10 + 8) = 14/23.
    // (A mean of per-point ratios would give (1 + 0.25 + 0 + 0)/4 = 0.3125 for PSP@1.)
    expect(m.psp1).toBe(6 / 20);
    expect(m.psp2).toBe(14 / 23);
    // P@1 = (1 + 1 + 0 + 0)/4; P@2 = (1/2 + 1/2 + 1/2 + 0)/4.
    expect(m.p1).toBe(0.5);
    expect(m.p2).toBe(0.375);
  });

  it('PSP@k with propensities computed from training frequencies', () => {
    // Training set of N = 10 points; label 0 seen 3 times, label 1 once, label 2 never.
    const freq = labelFrequencies(Uint32Array.from([0, 0, 0, 1]), 3);
    const q = inversePropensity(freq, 10); // [1.9427710237221416, ln 10 = 2.302585092994046, 2.7251343234120733]
    const { labelOffsets, labelIndices } = csr([[0, 2], [1]]);
    // Row 0 predicts [0, 1]: hit label 0 at rank 1; best@1 = q2, best@2 = q2 + q0.
    // Row 1 predicts [2, 1]: hit label 1 at rank 2; best@1 = best@2 = q1.
    const m = computeMetrics({ topIdx: Uint32Array.from([0, 1, 2, 1]), kMax: 2, labelOffsets, labelIndices, invPropensity: q, ks: [1, 2] });
    const [q0, q1, q2] = [1.9427710237221416, 2.302585092994046, 2.7251343234120733];
    // PSP@1 = q0 / (q2 + q1) = 1.9427710237221416 / 5.027719416406119 = 0.3864117...
    expect(m.psp1).toBeCloseTo(q0 / (q2 + q1), 14);
    // PSP@2 = (q0 + q1) / (q2 + q0 + q1) = 4.245356116716188 / 6.970490440128261 = 0.6090474...
    expect(m.psp2).toBeCloseTo((q0 + q1) / (q2 + q0 + q1), 14);
  });

  it('is exactly invariant to the order of the rows', () => {
    const rng = new Xoshiro128(42);
    const n = 600, kMax = 5, numLabels = 40;
    const rows: number[][] = [];
    const preds: number[][] = [];
    for (let i = 0; i < n; i++) {
      const y = new Set<number>();
      const ny = rng.below(7); // 0..6 labels, some rows empty
      while (y.size < ny) y.add(rng.below(numLabels));
      rows.push([...y].sort((a, b) => a - b));
      const p = new Set<number>();
      // Bias predictions towards true labels so there are plenty of hits.
      while (p.size < kMax) p.add(rng.below(2) === 0 && ny > 0 ? rows[i]![rng.below(ny)]! : rng.below(numLabels));
      const arr = [...p];
      if (rng.below(10) === 0) arr[kMax - 1] = NO; // some short prediction lists
      preds.push(arr);
    }
    const freq = Uint32Array.from({ length: numLabels }, (_, l) => (l * 7) % 13);
    const invPropensity = inversePropensity(freq, 1000, 0.6, 2.6);
    const run = (order: number[]) => {
      const { labelOffsets, labelIndices } = csr(order.map((i) => rows[i]!));
      const topIdx = Uint32Array.from(order.flatMap((i) => preds[i]!));
      return computeMetrics({ topIdx, kMax, labelOffsets, labelIndices, invPropensity, ks: [1, 2, 3, 4, 5] });
    };
    const identity = Array.from({ length: n }, (_, i) => i);
    const base = run(identity);
    expect(base.p1).toBeGreaterThan(0.3); // the data is not degenerate
    for (let t = 0; t < 5; t++) {
      const order = identity.slice();
      for (let i = n - 1; i > 0; i--) {
        const j = rng.below(i + 1);
        [order[i], order[j]] = [order[j]!, order[i]!];
      }
      expect(run(order)).toStrictEqual(base); // bit-identical, not just close
    }

    // Cross-check against a direct per-row implementation of the definitions.
    for (const k of [1, 2, 3, 4, 5]) {
      let p = 0, nd = 0, num = 0, den = 0;
      for (let i = 0; i < n; i++) {
        const y = new Set(rows[i]);
        let hits = 0, dcg = 0, idcg = 0;
        for (let r = 0; r < k; r++) {
          const l = preds[i]![r]!;
          if (y.has(l)) {
            hits++;
            dcg += 1 / Math.log2(r + 2);
            num += invPropensity[l]!;
          }
        }
        for (let r = 0; r < Math.min(k, y.size); r++) idcg += 1 / Math.log2(r + 2);
        const qs = rows[i]!.map((l) => invPropensity[l]!).sort((a, b) => b - a);
        for (let r = 0; r < Math.min(k, qs.length); r++) den += qs[r]!;
        p += hits / k;
        if (idcg > 0) nd += dcg / idcg;
      }
      expect(base[`p${k}`]).toBeCloseTo(p / n, 12);
      expect(base[`ndcg${k}`]).toBeCloseTo(nd / n, 12);
      expect(base[`psp${k}`]).toBeCloseTo(num / den, 12);
    }
  });

  it('returns zeros for an empty test set', () => {
    const m = computeMetrics({ topIdx: new Uint32Array(0), kMax: 5, labelOffsets: Uint32Array.of(0), labelIndices: new Uint32Array(0), invPropensity: [1] });
    expect(m).toEqual({ points: 0, p1: 0, p3: 0, p5: 0, ndcg1: 0, ndcg3: 0, ndcg5: 0, psp1: 0, psp3: 0, psp5: 0 });
  });

  it('validates shapes and cut-offs with clear messages', () => {
    const { labelOffsets, labelIndices } = csr([[1], [2]]);
    const topIdx = Uint32Array.from([1, 2, 3, 4]);
    expect(() => computeMetrics({ topIdx, kMax: 2, labelOffsets, labelIndices })).toThrow('Expected every k in ks to be <= kMax (2) but received 3');
    expect(() => computeMetrics({ topIdx, kMax: 2, labelOffsets, labelIndices, ks: [0] })).toThrow('Expected positive integer for k but received 0');
    expect(() => computeMetrics({ topIdx, kMax: 3, labelOffsets, labelIndices, ks: [1] })).toThrow(
      'Expected topIdx of length n * kMax = 2 * 3 = 6 but received 4',
    );
    expect(() => computeMetrics({ topIdx, kMax: 2, labelOffsets, labelIndices, ks: [1], invPropensity: [1, 1] })).toThrow(
      'Expected label ids < 2 (the length of invPropensity) but row 1 has label 2',
    );
  });
});
