// Extreme-classification metrics over a whole test set: P@k, nDCG@k and propensity-scored PSP@k, with
// the definitions of the Extreme Classification Repository and pyxclib (xclib.evaluation.xc_metrics),
// so numbers reported by sublinear can be compared with published tables.
//
// Independence of row order is exact, not approximate: floating-point sums depend on the order of their
// terms, so nothing is summed per row. Every row only increments integer counters (hits per rank and per
// ideal-DCG class, and per-label counts for PSP), and the floating-point weights are applied to those
// counters at the end, in an order that does not depend on the rows. Shuffling the test set (or splitting
// it across workers and adding the counters) therefore gives bit-identical metrics.

/** Marks "no prediction" in a top-k row (fewer than k labels were scored). Counts as a miss. */
export const NO_PREDICTION = 0xffffffff;

/** Propensity model parameters (Jain et al. 2016): A and B of q_l = 1 + C (N_l + B)^-A. */
export interface PropensityParams {
  A: number;
  B: number;
}
/** A = 0.55, B = 1.5: the default for most datasets of the Extreme Classification Repository. */
export const DEFAULT_PROPENSITY: Readonly<PropensityParams> = Object.freeze({ A: 0.55, B: 1.5 });
/** A = 0.6, B = 2.6: the repository's values for the Amazon datasets (Amazon-670K, AmazonCat-13K, ...). */
export const AMAZON_PROPENSITY: Readonly<PropensityParams> = Object.freeze({ A: 0.6, B: 2.6 });
/** A = 0.5, B = 0.4: the repository's values for the Wikipedia datasets. */
export const WIKIPEDIA_PROPENSITY: Readonly<PropensityParams> = Object.freeze({ A: 0.5, B: 0.4 });

/**
 * Metrics of one evaluation, keyed `p<k>`, `ndcg<k>` and `psp<k>` for every k asked for
 * (`{ p1, p3, p5, ndcg1, ndcg3, ndcg5, psp1, psp3, psp5, points }` with the default ks).
 * Values are fractions in [0, 1] (not percentages). `psp<k>` keys are present only when inverse
 * propensities were given.
 */
export interface Metrics {
  /** Test points evaluated, including points without any label (they count as all misses). */
  points: number;
  [precisionAtK: `p${number}`]: number;
  [ndcgAtK: `ndcg${number}`]: number;
  [pspAtK: `psp${number}`]: number;
}

/** Input of `computeMetrics`. */
export interface MetricsInput {
  /** (n, kMax) predicted label ids, each row sorted by descending score; NO_PREDICTION pads short rows. */
  topIdx: Uint32Array;
  /** Columns of `topIdx`. */
  kMax: number;
  /** (n + 1) CSR row starts of the true labels (the test set's `labelOffsets`). */
  labelOffsets: Uint32Array;
  /** True label ids, strictly increasing within a row (the CSR contract of docs/design.md). */
  labelIndices: Uint32Array;
  /**
   * Inverse propensity q_l = 1/p_l of every label (see `inversePropensity`), indexed by label id.
   * Default: none, and no `psp<k>` is reported.
   */
  invPropensity?: ArrayLike<number>;
  /** Cut-offs k, each a positive integer <= kMax. Default [1, 3, 5]. */
  ks?: readonly number[];
}

/**
 * Number of occurrences of every label id in `labelIndices` (a training set's N_l).
 * Throws if an id is >= numLabels.
 */
export function labelFrequencies(labelIndices: Uint32Array, numLabels: number): Uint32Array {
  if (!Number.isInteger(numLabels) || numLabels < 0) {
    throw new Error(`Expected non-negative integer for numLabels but received ${numLabels}`);
  }
  const freq = new Uint32Array(numLabels);
  for (let i = 0; i < labelIndices.length; i++) {
    const l = labelIndices[i]!;
    if (l >= numLabels) throw new Error(`Expected label ids < ${numLabels} but received ${l} at position ${i}`);
    freq[l]!++;
  }
  return freq;
}

/**
 * Inverse propensities q_l = 1 + C (N_l + B)^-A with C = (ln N - 1)(B + 1)^A (Jain, Prabhu and Varma,
 * KDD 2016; pyxclib's compute_inv_propesity), where N = `numTrain` training points and N_l = `freqs[l]`,
 * label l's frequency in the training set. Rare labels get large weights; a label never seen in training
 * gets the largest, 1 + C B^-A.
 *
 * `A` defaults to 0.55 and `B` to 1.5; use AMAZON_PROPENSITY (0.6, 2.6) for the Amazon datasets.
 */
export function inversePropensity(
  freqs: ArrayLike<number>,
  numTrain: number,
  A: number = DEFAULT_PROPENSITY.A,
  B: number = DEFAULT_PROPENSITY.B,
): Float64Array {
  if (!Number.isInteger(numTrain) || numTrain <= 0) {
    throw new Error(`Expected positive integer for numTrain but received ${numTrain}`);
  }
  if (!Number.isFinite(A) || A <= 0) throw new Error(`Expected positive number for propensityA but received ${A}`);
  if (!Number.isFinite(B) || B <= 0) throw new Error(`Expected positive number for propensityB but received ${B}`);
  const C = (Math.log(numTrain) - 1) * Math.pow(B + 1, A);
  const q = new Float64Array(freqs.length);
  for (let l = 0; l < freqs.length; l++) q[l] = 1 + C * Math.pow(freqs[l]! + B, -A);
  return q;
}

/**
 * P@k, nDCG@k and PSP@k of top-k predictions against the true labels, averaged over all n test points.
 *
 * Definitions (for a point with true label set y and predictions pred_1..pred_k, best first):
 * - P@k = (1/k) Σ_{r<=k} [pred_r ∈ y], averaged over points.
 * - nDCG@k = DCG@k / IDCG@k with DCG@k = Σ_{r<=k} [pred_r ∈ y] / log2(r+1) and
 *   IDCG@k = Σ_{r<=min(k,|y|)} 1/log2(r+1), averaged over points.
 * - PSP@k (pyxclib's normalised form, also the repository's reference code): the dataset total of
 *   Σ_{r<=k} [pred_r ∈ y] q_{pred_r}, divided by the dataset total of the best achievable value, the sum
 *   of the min(k, |y|) largest q_l over l ∈ y. It is a ratio of totals (not a mean of per-point ratios),
 *   so it lies in [0, 1] and 1 means "as good as predicting every point's rarest labels first".
 *
 * Points without labels are kept in the denominators of P@k and nDCG@k and score 0 there (the
 * repository's convention: the model cannot be right on them). They add 0 to both totals of PSP@k.
 * With no points at all, or (PSP) no labels at all, the metric is 0.
 * NO_PREDICTION entries and ids outside the label range are misses.
 *
 * @example
 * ```ts
 * const freqs = labelFrequencies(train.labelIndices, train.labels);
 * const invPropensity = inversePropensity(freqs, train.points, 0.6, 2.6); // Amazon-670K
 * const pred = await net.predict(test, { k: 5 });
 * const m = computeMetrics({ topIdx: pred.labels, kMax: 5, labelOffsets: test.labelOffsets,
 *   labelIndices: test.labelIndices, invPropensity });
 * console.log(`P@1 ${(100 * m.p1).toFixed(2)}  PSP@5 ${(100 * m.psp5!).toFixed(2)}`);
 * ```
 */
export function computeMetrics(input: MetricsInput): Metrics {
  const { topIdx, kMax, labelOffsets, labelIndices, invPropensity } = input;
  const ks = input.ks ?? [1, 3, 5];
  if (!Number.isInteger(kMax) || kMax <= 0) throw new Error(`Expected positive integer for kMax but received ${kMax}`);
  if (!Array.isArray(ks) || ks.length === 0) throw new Error('Expected a non-empty list of cut-offs for ks');
  for (const k of ks) {
    if (!Number.isInteger(k) || k <= 0) throw new Error(`Expected positive integer for k but received ${k}`);
    if (k > kMax) throw new Error(`Expected every k in ks to be <= kMax (${kMax}) but received ${k}`);
  }
  if (labelOffsets.length === 0) throw new Error('Expected labelOffsets with n + 1 entries but received an empty array');
  const n = labelOffsets.length - 1;
  if (topIdx.length !== n * kMax) {
    throw new Error(`Expected topIdx of length n * kMax = ${n} * ${kMax} = ${n * kMax} but received ${topIdx.length}`);
  }
  if (labelOffsets[0] !== 0 || labelOffsets[n] !== labelIndices.length) {
    throw new Error(`Expected labelOffsets to run from 0 to labelIndices.length (${labelIndices.length}) but it runs from ${labelOffsets[0]} to ${labelOffsets[n]}`);
  }

  // hits[c * kMax + r]: number of rows with min(kMax, |y|) = c whose prediction at rank r (0-based) is a
  // true label. P@k and nDCG@k for every k <= kMax follow from these (kMax + 1) * kMax integers.
  const hits = new Float64Array((kMax + 1) * kMax); // exact integers (< 2^53)
  const numLabels = invPropensity ? invPropensity.length : 0;
  // PSP counters, per cut-off j and label l: how often l was a hit within the top ks[j] (numerator) and
  // how often l was among a row's best min(ks[j], |y|) labels (denominator). 8 * |ks| bytes per label
  // (16 MB for Amazon-670K with 3 cut-offs), the price of exact order independence.
  const pspNum = invPropensity ? ks.map(() => new Uint32Array(numLabels)) : [];
  const pspDen = invPropensity ? ks.map(() => new Uint32Array(numLabels)) : [];
  let bestScratch = new Uint32Array(16);

  for (let i = 0; i < n; i++) {
    const lo = labelOffsets[i]!, hi = labelOffsets[i + 1]!;
    if (hi < lo) throw new Error(`Expected non-decreasing labelOffsets but row ${i} runs from ${lo} to ${hi}`);
    const ny = hi - lo;
    if (ny === 0) continue; // all misses: contributes 0 to every numerator, still counted in n
    const c = Math.min(kMax, ny);
    const row = i * kMax;
    for (let r = 0; r < kMax; r++) {
      const p = topIdx[row + r]!;
      if (p === NO_PREDICTION || !contains(labelIndices, lo, hi, p)) continue;
      hits[c * kMax + r]!++;
      if (invPropensity) {
        for (let j = 0; j < ks.length; j++) if (r < ks[j]!) pspNum[j]![p]!++;
      }
    }
    if (invPropensity) {
      // The row's labels by descending q (ties by ascending id, so the choice depends on the row only).
      if (bestScratch.length < ny) bestScratch = new Uint32Array(Math.max(ny, bestScratch.length * 2));
      const best = bestScratch.subarray(0, ny);
      for (let t = 0; t < ny; t++) {
        const l = labelIndices[lo + t]!;
        if (l >= numLabels) {
          throw new Error(`Expected label ids < ${numLabels} (the length of invPropensity) but row ${i} has label ${l}`);
        }
        best[t] = l;
      }
      best.sort((a, b) => invPropensity[b]! - invPropensity[a]! || a - b);
      for (let j = 0; j < ks.length; j++) {
        const m = Math.min(ks[j]!, ny);
        const den = pspDen[j]!;
        for (let t = 0; t < m; t++) den[best[t]!]!++;
      }
    }
  }

  const out: Metrics = { points: n };
  // disc[r] = 1 / log2(r + 2): the DCG weight of 0-based rank r; idcg[m] = Σ_{r<m} disc[r].
  const disc = new Float64Array(kMax);
  const idcg = new Float64Array(kMax + 1);
  for (let r = 0; r < kMax; r++) {
    disc[r] = 1 / Math.log2(r + 2);
    idcg[r + 1] = idcg[r]! + disc[r]!;
  }
  for (let j = 0; j < ks.length; j++) {
    const k = ks[j]!;
    let hitTotal = 0;
    let ndcgTotal = 0;
    for (let c = 1; c <= kMax; c++) {
      let dcgWeighted = 0;
      for (let r = 0; r < k; r++) {
        const h = hits[c * kMax + r]!;
        hitTotal += h;
        dcgWeighted += h * disc[r]!;
      }
      ndcgTotal += dcgWeighted / idcg[Math.min(k, c)]!;
    }
    out[`p${k}`] = n === 0 ? 0 : hitTotal / (k * n);
    out[`ndcg${k}`] = n === 0 ? 0 : ndcgTotal / n;
    if (invPropensity) {
      let num = 0, den = 0;
      const cn = pspNum[j]!, cd = pspDen[j]!;
      for (let l = 0; l < numLabels; l++) {
        const q = invPropensity[l]!;
        if (cn[l]) num += cn[l]! * q;
        if (cd[l]) den += cd[l]! * q;
      }
      out[`psp${k}`] = den === 0 ? 0 : num / den;
    }
  }
  return out;
}

/**
 * Each point's precision at every k of `ks` (<= kMax), averaged over the ks: the per-point terms whose mean
 * over the points is the mean of computeMetrics' P@k over `ks` (ks [1] gives P@1, [1, 3, 5] the 'p135' score).
 * Early stopping compares two epochs point by point with them (src/train/early-stop.ts pairedGain).
 */
export function pointPrecisions(topIdx: Uint32Array, kMax: number, labelOffsets: Uint32Array, labelIndices: Uint32Array, ks: readonly number[]): Float64Array {
  const n = labelOffsets.length - 1;
  if (topIdx.length !== n * kMax) throw new Error(`Expected topIdx of length n * kMax = ${n * kMax} but received ${topIdx.length}`);
  ks.forEach((k, j) => {
    if (!Number.isInteger(k) || k <= 0 || k > kMax || (j > 0 && k <= ks[j - 1]!)) throw new Error(`Expected ascending integers in [1, ${kMax}] for ks but received ${ks.join(', ')}`);
  });
  const out = new Float64Array(n);
  for (let i = 0; i < n; i++) {
    const lo = labelOffsets[i]!, hi = labelOffsets[i + 1]!;
    let t = 0, hits = 0, r = 0;
    for (const k of ks) {
      for (; r < k; r++) {
        const p = topIdx[i * kMax + r]!;
        if (p !== NO_PREDICTION && contains(labelIndices, lo, hi, p)) hits++;
      }
      t += hits / k;
    }
    out[i] = t / ks.length;
  }
  return out;
}

/** Binary search of `x` in the sorted slice a[lo, hi) (a row of a CSR label list). */
export function contains(a: Uint32Array, lo: number, hi: number, x: number): boolean {
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    const v = a[mid]!;
    if (v === x) return true;
    if (v < x) lo = mid + 1;
    else hi = mid;
  }
  return false;
}

/** P@k, nDCG@k, PSP@k for every k of `ks`, on one line ('-' where a metric was not computed). */
export function metricLine(m: Metrics, ks: readonly number[] = [1, 3, 5]): string {
  const f = (k: string) => (m[k as keyof Metrics] as number | undefined)?.toFixed(4) ?? '-';
  return ['p', 'ndcg', 'psp'].flatMap((name) => ks.map((k) => `${name === 'p' ? 'P' : name === 'ndcg' ? 'nDCG' : 'PSP'}@${k} ${f(`${name}${k}`)}`)).join('  ');
}
