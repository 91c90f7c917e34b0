// Scaling of raw-valued inputs: numeric columns on very different scales (a price next to a ratio next
// to a count) are divided by their largest magnitude in the training data, so that every input lies in
// [-1, 1] like the binary and normalised features the defaults were tuned on. Term counts (bag-of-words
// rows: every value a non-negative integer) are compressed instead, each count n > 1 replaced by
// 1 + ln n as text classifiers weight term frequencies (sublinear tf), without dividing one word by another's
// largest count. The transform (per-feature divisors, or the count compression) is kept with the network
// (model files and checkpoints) and applied to every input it sees: fit(), predict(), evaluate(). Sparsity
// is kept (no centring): a zero stays a zero.
import { sharedFloat32, type SparseDataset } from '../datasets/csr.js';

/**
 * `FitOptions.inputScaling`: 'auto' chooses from the training data (see detectInputScale), 'maxabs' always
 * divides each feature by its largest |value|, 'log' always compresses values beyond +-1 (logCompress),
 * 'off' uses the inputs as they are.
 */
export type InputScaling = 'auto' | 'maxabs' | 'log' | 'off';

export const INPUT_SCALINGS: readonly InputScaling[] = ['auto', 'maxabs', 'log', 'off'];

/**
 * Features whose largest magnitudes differ by more than this factor are on "very different scales" even
 * when every value lies in [-1, 1]. L2-normalised tf-idf text stays far below it (its per-feature maxima
 * span about 10^1.5 on debian-tags and debian-deps); raw measurements in 1e-3 .. 1e4 exceed it.
 */
export const SCALE_SPREAD_LIMIT = 1e4;

/** What the training data looked like and what was decided (`FitStats.inputScaling`). */
export interface InputScaleReport {
  /** True when the inputs are transformed (divided per feature, or compressed). */
  scaled: boolean;
  /**
   * 'maxabs': each feature divided by its largest |value| in the training data; 'log': every value beyond
   * +-1 compressed to +-(1 + ln |value|) (logCompress); 'none': inputs as they are.
   */
  method: 'maxabs' | 'log' | 'none';
  /** Largest |value| in the training data. */
  maxAbs: number;
  /** Smallest and largest per-feature max |value| over the features that occur. */
  featureMaxAbs: [number, number];
  reason: string;
}

/** Per-feature max |value| over the nonzeros of `data` (0 for features that never occur). */
export function featureMaxAbs(data: SparseDataset, dim: number): Float64Array {
  const m = new Float64Array(dim);
  const nnz = data.offsets[data.points]!;
  for (let e = data.offsets[0]!; e < nnz; e++) {
    const j = data.indices[e]!, a = Math.abs(data.values[e]!);
    if (a > m[j]!) m[j] = a;
  }
  return m;
}

/**
 * Whether `data`'s values look like term counts: every value a non-negative integer and some above 1 (binary
 * rows have none above 1 and need nothing). Bag-of-words data read from counts has this shape; measurements
 * with a fractional value anywhere do not.
 */
export function looksLikeCounts(data: SparseDataset): boolean {
  let above = false;
  for (let e = data.offsets[0]!, end = data.offsets[data.points]!; e < end; e++) {
    const v = data.values[e]!;
    if (!(v >= 0 && Number.isInteger(v))) return false;
    if (v > 1) above = true;
  }
  return above;
}

/**
 * The count compression of 'log' scaling: x itself for |x| <= 1, sign(x) (1 + ln |x|) beyond (continuous and
 * monotone, with slope 1 at +-1): a term count n becomes 1 + ln n (1 -> 1, 2 -> 1.69, 10 -> 3.30,
 * 100 -> 5.61), binary and unit-range values stay as they are.
 */
export function logCompress(x: number): number {
  return x > 1 ? 1 + Math.log(x) : x < -1 ? -1 - Math.log(-x) : x;
}

/**
 * Decides whether `data` (training data) is raw-valued and returns its transform: per-feature divisors
 * (`scale`) or the count compression (`log`). 'auto':
 * - term counts (looksLikeCounts: non-negative integers, some above 1) are compressed ('log'): dividing
 *   each word by its own largest count would weigh words against each other by their rarest use (a word
 *   seen 13 times in one text counts 1/13 in every other), where 1 + ln n keeps a word seen once at 1
 *   everywhere. On seeded 300- and 1,000-point count subsamples of debian-tags and debian-deps (docs/defaults.md
 *   "Small training sets", three seeds each) this gave test P@1 +1.0, -0.3, +3.1 and +2.3 points over the
 *   divisors, P@3 and P@5 up on all four, and a seed spread under 1 point; the counts as they are and
 *   L2-normalised rows were worse than both;
 * - otherwise each feature is divided by its largest |value| when some value lies outside [-1, 1]
 *   (binary features, features scaled to [0, 1] and rows normalised to unit length never have one) or
 *   when the per-feature maxima of the features that occur span more than SCALE_SPREAD_LIMIT. Divisor of
 *   feature j: its max |value|, 1 for features that never occur (so a binary feature is left exactly as
 *   it is).
 */
export function detectInputScale(data: SparseDataset, dim: number, mode: InputScaling = 'auto'): { scale: Float32Array | null; log: boolean; report: InputScaleReport } {
  const m = featureMaxAbs(data, dim);
  let lo = Infinity, hi = 0;
  for (let j = 0; j < dim; j++) {
    const v = m[j]!;
    if (v > 0) {
      if (v < lo) lo = v;
      if (v > hi) hi = v;
    }
  }
  if (hi === 0) lo = 0;
  const range: [number, number] = [lo, hi];
  const fmt = (x: number) => x.toPrecision(3);
  if (mode === 'log' || (mode === 'auto' && looksLikeCounts(data))) {
    const reason = mode === 'log'
      ? 'inputScaling log: every value beyond +-1 replaced by +-(1 + ln |value|)'
      : `term counts (non-negative integers up to ${fmt(hi)}): each count n > 1 replaced by 1 + ln n`;
    return { scale: null, log: true, report: { scaled: true, method: 'log', maxAbs: hi, featureMaxAbs: range, reason } };
  }
  const outside = hi > 1;
  const spread = lo > 0 && hi / lo > SCALE_SPREAD_LIMIT;
  const scaledWhy = outside
    ? `values outside [-1, 1] (largest |value| ${fmt(hi)}; per-feature maxima ${fmt(lo)} .. ${fmt(hi)})`
    : `per-feature maxima spanning ${fmt(lo)} .. ${fmt(hi)} (more than ${SCALE_SPREAD_LIMIT}x)`;
  const scale = mode === 'maxabs' || (mode === 'auto' && (outside || spread));
  if (!scale) {
    const why = mode === 'off'
      ? 'input scaling is off'
      : `every value lies in [-1, 1] and the per-feature maxima span ${hi > 0 ? fmt(hi / lo) : 0}x (at most ${SCALE_SPREAD_LIMIT}x): inputs used as they are`;
    return { scale: null, log: false, report: { scaled: false, method: 'none', maxAbs: hi, featureMaxAbs: range, reason: why } };
  }
  const s = new Float32Array(dim);
  for (let j = 0; j < dim; j++) s[j] = m[j]! > 0 ? m[j]! : 1;
  const reason = mode === 'maxabs'
    ? 'inputScaling maxabs: each feature divided by its largest |value| in the training data'
    : `raw-valued inputs, ${scaledWhy}: each feature divided by its largest |value| in the training data`;
  return { scale: s, log: false, report: { scaled: true, method: 'maxabs', maxAbs: hi, featureMaxAbs: range, reason } };
}

/**
 * `data` with every value divided by its feature's divisor (`scale`; null: none) and, with `log`, compressed
 * (logCompress): a new values array (on a SharedArrayBuffer, so worker threads see it), every other array
 * shared with `data`. `data` itself when there is nothing to apply.
 */
export function applyInputScale(data: SparseDataset, scale: Float32Array | null, log = false): SparseDataset {
  if (!scale && !log) return data;
  const n = data.values.length;
  const values = sharedFloat32(n);
  for (let e = data.offsets[0]!, end = data.offsets[data.points]!; e < end; e++) values[e] = transformInput(data.values[e]!, data.indices[e]!, scale, log);
  return { ...data, values };
}

/**
 * Value `v` of feature `f` as the kernels see it (what applyInputScale writes): divided by the feature's
 * divisor, then compressed with `log`. For the code that reads one point in TypeScript (explanations, online
 * learning).
 */
export function transformInput(v: number, f: number, scale: Float32Array | null, log: boolean): number {
  const x = scale ? v / scale[f]! : v;
  return log ? logCompress(x) : x;
}

/** What predict/eval say when a model's inputs are transformed (null: they are not). */
export function inputTransformNote(scale: Float32Array | null, log: boolean): string | null {
  if (log) return "applying the model's input transform (term counts: each value n > 1 replaced by 1 + ln n)";
  if (scale) return "applying the model's input scaling (each feature divided by its largest |value| in the training data)";
  return null;
}

/** The section of a model or checkpoint that marks the count compression: one byte, 1. */
export const INPUT_LOG_SECTION = 'inputLog';

/** The inputLog section's contents. */
export const inputLogSection = (): Uint8Array => Uint8Array.of(1);

/** The first problem of a stored inputLog section (must be the one byte 1), or null. */
export function inputLogProblem(a: Uint8Array): string | null {
  return a.length === 1 && a[0] === 1 ? null : `section "${INPUT_LOG_SECTION}" must hold the one byte 1 but holds ${a.length} byte(s)${a.length ? ` starting with ${a[0]}` : ''}`;
}

/** The first problem of a stored divisor array (must be finite and positive), or null. */
export function inputScaleProblem(scale: Float32Array): string | null {
  for (let j = 0; j < scale.length; j++) {
    const v = scale[j]!;
    if (!(v > 0 && Number.isFinite(v))) return `section "inputScale" holds an invalid divisor (${v}) at index ${j}`;
  }
  return null;
}
