// Scaling of raw-valued inputs: numeric columns on very different scales (a price next to a ratio next
// to a count) are divided by their largest magnitude in the training data, so that every input lies in
// [-1, 1] like the binary and normalised features the defaults were tuned on. The transform is a
// per-feature divisor, kept with the network (model files and checkpoints) and applied to every input
// it sees: fit(), predict(), evaluate(). Sparsity is kept (no centring): a zero stays a zero.
import { sharedFloat32, type SparseDataset } from '../datasets/csr.js';

/** `FitOptions.inputScaling`: 'auto' scales raw-valued data (see detectInputScale), 'maxabs' always, 'off' never. */
export type InputScaling = 'auto' | 'maxabs' | 'off';

export const INPUT_SCALINGS: readonly InputScaling[] = ['auto', 'maxabs', 'off'];

/**
 * Features whose largest magnitudes differ by more than this factor are on "very different scales" even
 * when every value lies in [-1, 1]. L2-normalised tf-idf text stays far below it (its per-feature maxima
 * span about 10^1.5 on debian-tags and debian-deps); raw measurements in 1e-3 .. 1e4 exceed it.
 */
export const SCALE_SPREAD_LIMIT = 1e4;

/** What the training data looked like and what was decided (`FitStats.inputScaling`). */
export interface InputScaleReport {
  /** True when the inputs are scaled (each feature divided by `scale[j]`). */
  scaled: boolean;
  /** 'maxabs': each feature divided by its largest |value| in the training data. */
  method: 'maxabs' | 'none';
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
 * Decides whether `data` (training data) is raw-valued and returns the per-feature divisors when it is
 * scaled. 'auto' scales when some value lies outside [-1, 1] (binary features, features scaled to
 * [0, 1] and rows normalised to unit length never have one) or when the per-feature maxima of the
 * features that occur span more than SCALE_SPREAD_LIMIT. Divisor of feature j: its max |value|, 1 for
 * features that never occur (so a binary feature is left exactly as it is).
 */
export function detectInputScale(data: SparseDataset, dim: number, mode: InputScaling = 'auto'): { scale: Float32Array | null; report: InputScaleReport } {
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
    return { scale: null, report: { scaled: false, method: 'none', maxAbs: hi, featureMaxAbs: range, reason: why } };
  }
  const s = new Float32Array(dim);
  for (let j = 0; j < dim; j++) s[j] = m[j]! > 0 ? m[j]! : 1;
  const reason = mode === 'maxabs'
    ? 'inputScaling maxabs: each feature divided by its largest |value| in the training data'
    : `raw-valued inputs, ${scaledWhy}: each feature divided by its largest |value| in the training data`;
  return { scale: s, report: { scaled: true, method: 'maxabs', maxAbs: hi, featureMaxAbs: range, reason } };
}

/**
 * `data` with every value divided by its feature's divisor: a new values array (on a SharedArrayBuffer,
 * so worker threads see it), every other array shared with `data`.
 */
export function applyInputScale(data: SparseDataset, scale: Float32Array): SparseDataset {
  const n = data.values.length;
  const values = sharedFloat32(n);
  for (let e = data.offsets[0]!, end = data.offsets[data.points]!; e < end; e++) values[e] = data.values[e]! / scale[data.indices[e]!]!;
  return { ...data, values };
}

/** The first problem of a stored divisor array (must be finite and positive), or null. */
export function inputScaleProblem(scale: Float32Array): string | null {
  for (let j = 0; j < scale.length; j++) {
    const v = scale[j]!;
    if (!(v > 0 && Number.isFinite(v))) return `section "inputScale" holds an invalid divisor (${v}) at index ${j}`;
  }
  return null;
}
