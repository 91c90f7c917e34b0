// Shared pieces of the dense baselines (TensorFlow.js and PyTorch): option and result types, option
// validation, the batch order, CSR batch gathering and P@1. Both baselines train the same network as
// sublinear: sparse input -> hidden ReLU layer(s) -> full softmax over all labels, multi-label targets
// split evenly over a point's labels (y_j = 1/|labels|), softmax cross-entropy, Adam, Glorot-uniform
// weights, zero biases. Points without labels carry no gradient and are skipped in training; they still
// count (as misses) in P@1.

import type { SparseDataset } from '../../src/datasets/csr.js';
import { Xoshiro128, shuffleInPlace } from '../../src/util/rng.js';

/** One periodic evaluation. `seconds` is training wall-clock time, evaluation time excluded. */
export interface EvalRecord {
  seconds: number;
  samples: number;
  batches: number;
  p1: number;
  /** Mean training loss of the batches since the previous record (NaN before the first batch). */
  loss: number;
}

/** When to evaluate: every N batches, every S seconds of training time, or both (whichever comes first). */
export type EvalEvery = number | { batches?: number; seconds?: number };

export interface BaselineOptions {
  train: SparseDataset;
  /** Held-out points for P@1. Without it, no evaluation is done and finalP1 is NaN. */
  test?: SparseDataset;
  /** Hidden layer sizes, e.g. [128] or [128, 128]. */
  hidden: number[];
  /** Stop after this many epochs (default 1 when no other limit is given). */
  epochs?: number;
  /** Stop after this many batches. */
  maxBatches?: number;
  /** Stop once training time (evaluation excluded) reaches this many seconds (checked after each batch). */
  maxSeconds?: number;
  batchSize: number;
  lr: number;
  /** Adam beta1 (default 0.9), beta2 (default 0.999), epsilon (default 1e-8). */
  beta1?: number;
  beta2?: number;
  eps?: number;
  seed: number;
  /** Periodic evaluation on a fixed subset of `evalPoints` test points. Absent: only the final evaluation. */
  evalEvery?: EvalEvery;
  /** Size of the periodic-evaluation subset (default min(test.points, 2000)); drawn once from the seed. */
  evalPoints?: number;
  /** Also evaluate before the first batch (default true when evalEvery is set). */
  evalAtStart?: boolean;
  /** Test points used for finalP1 (default: all). */
  finalEvalPoints?: number;
  onEval?: (record: EvalRecord) => void;
  /** Batches excluded from `steadySamplesPerSec` (allocator/JIT warm-up; default 0). */
  warmupBatches?: number;
}

export interface BaselineResult {
  /** Which system and backend produced it, e.g. 'tfjs-wasm' or 'pytorch'. */
  system: string;
  /** Trained samples per second of training time. */
  samplesPerSec: number;
  /** Samples per second over the batches after the first `warmupBatches` (NaN if none ran). */
  steadySamplesPerSec: number;
  /** Training wall-clock seconds, evaluation excluded. */
  seconds: number;
  /** Wall-clock seconds of each training batch, in order (their sum is `seconds`). The median is robust
   * to other processes competing for the cores during a short run. */
  batchSeconds: number[];
  /** Training samples processed (points with at least one label). */
  samples: number;
  batches: number;
  /** P@1 on the final evaluation set (NaN without test data). */
  finalP1: number;
  /** Periodic P@1 on the eval subset, against training seconds (includes a final point at the end). */
  curve: { seconds: number; samples: number; p1: number }[];
  /** A batch loss was NaN or infinite; training stopped at that batch. */
  diverged: boolean;
  /** Mean loss over the last up-to-10 batches. */
  finalLoss: number;
  /** Seconds spent in evaluation (not part of `seconds`). */
  evalSeconds: number;
  /** Peak resident set size of the training process, bytes. */
  peakRssBytes: number;
  /** Extra facts (threads, optimiser, versions). */
  info: Record<string, string | number | boolean>;
}

export interface ResolvedBaselineOptions {
  hidden: number[];
  epochs: number;
  maxBatches: number;
  maxSeconds: number;
  batchSize: number;
  lr: number;
  beta1: number;
  beta2: number;
  eps: number;
  seed: number;
  evalEveryBatches: number;
  evalEverySeconds: number;
  evalPoints: number;
  evalAtStart: boolean;
  finalEvalPoints: number;
  warmupBatches: number;
}

function posInt(name: string, v: unknown): number {
  if (typeof v !== 'number' || !Number.isInteger(v) || v <= 0)
    throw new Error(`Expected positive integer for ${name} but received ${String(v)}`);
  return v;
}
function posNum(name: string, v: unknown): number {
  if (typeof v !== 'number' || !Number.isFinite(v) || v <= 0)
    throw new Error(`Expected positive number for ${name} but received ${String(v)}`);
  return v;
}
function unit(name: string, v: unknown): number {
  if (typeof v !== 'number' || !(v >= 0 && v < 1)) throw new Error(`Expected number in [0, 1) for ${name} but received ${String(v)}`);
  return v;
}

/** Validates the options and fills in defaults. */
export function resolveOptions(o: BaselineOptions): ResolvedBaselineOptions {
  if (!o.train || !(o.train.offsets instanceof Uint32Array)) throw new Error('Expected a SparseDataset for train');
  if (!Array.isArray(o.hidden) || o.hidden.length < 1) throw new Error('Expected at least one hidden layer size in hidden');
  o.hidden.forEach((h, i) => posInt(`hidden[${i}]`, h));
  if (o.test) {
    if (o.test.features > o.train.features)
      throw new Error(`test has ${o.test.features} features but train only ${o.train.features}`);
    if (o.test.labels > o.train.labels) throw new Error(`test has ${o.test.labels} labels but train only ${o.train.labels}`);
  }
  const noLimit = o.epochs === undefined && o.maxBatches === undefined && o.maxSeconds === undefined;
  const epochs = o.epochs === undefined ? (noLimit ? 1 : Infinity) : posNum('epochs', o.epochs);
  const maxBatches = o.maxBatches === undefined ? Infinity : posInt('maxBatches', o.maxBatches);
  const maxSeconds = o.maxSeconds === undefined ? Infinity : posNum('maxSeconds', o.maxSeconds);
  let evalEveryBatches = Infinity, evalEverySeconds = Infinity;
  if (o.evalEvery !== undefined) {
    if (typeof o.evalEvery === 'number') evalEveryBatches = posInt('evalEvery', o.evalEvery);
    else {
      if (o.evalEvery.batches !== undefined) evalEveryBatches = posInt('evalEvery.batches', o.evalEvery.batches);
      if (o.evalEvery.seconds !== undefined) evalEverySeconds = posNum('evalEvery.seconds', o.evalEvery.seconds);
    }
  }
  const testN = o.test?.points ?? 0;
  const evalPoints = Math.min(testN, o.evalPoints === undefined ? 2000 : posInt('evalPoints', o.evalPoints));
  const finalEvalPoints = Math.min(testN, o.finalEvalPoints === undefined ? testN : posInt('finalEvalPoints', o.finalEvalPoints));
  return {
    hidden: o.hidden.slice(),
    epochs, maxBatches, maxSeconds,
    batchSize: posInt('batchSize', o.batchSize),
    lr: posNum('lr', o.lr),
    beta1: unit('beta1', o.beta1 ?? 0.9),
    beta2: unit('beta2', o.beta2 ?? 0.999),
    eps: posNum('eps', o.eps ?? 1e-8),
    seed: o.seed,
    evalEveryBatches, evalEverySeconds,
    evalPoints,
    evalAtStart: o.evalAtStart ?? o.evalEvery !== undefined,
    finalEvalPoints,
    warmupBatches: o.warmupBatches === undefined || o.warmupBatches === 0 ? 0 : posInt('warmupBatches', o.warmupBatches),
  };
}

/** Row ids of `ds` that have at least one label (the points that train). */
export function labelledRows(ds: SparseDataset): Uint32Array {
  let n = 0;
  for (let i = 0; i < ds.points; i++) if (ds.labelOffsets[i + 1]! > ds.labelOffsets[i]!) n++;
  const out = new Uint32Array(n);
  for (let i = 0, k = 0; i < ds.points; i++) if (ds.labelOffsets[i + 1]! > ds.labelOffsets[i]!) out[k++] = i;
  return out;
}

/** A seeded random subset of `k` of the `n` rows, in increasing order (the fixed eval subset). */
export function evalSubset(n: number, k: number, seed: number): Uint32Array {
  const all = new Uint32Array(n);
  for (let i = 0; i < n; i++) all[i] = i;
  if (k >= n) return all;
  shuffleInPlace(all, new Xoshiro128(seed ^ 0x5eed));
  return all.slice(0, k).sort();
}

/** Gathered CSR slice of a batch: features with per-point segment ids, and label pairs with weights. */
export interface GatheredBatch {
  size: number;
  idx: Int32Array;      // (nnz) feature ids
  vals: Float32Array;   // (nnz)
  seg: Int32Array;      // (nnz) position of the point in the batch, non-decreasing
  labelRows: Int32Array;    // (k) position of the point in the batch
  labelCols: Int32Array;    // (k) label id
  labelWeights: Float32Array; // (k) 1 / |labels of the point|
}

export function gatherBatch(ds: SparseDataset, rows: Uint32Array): GatheredBatch {
  let nnz = 0, nl = 0;
  for (let b = 0; b < rows.length; b++) {
    const r = rows[b]!;
    nnz += ds.offsets[r + 1]! - ds.offsets[r]!;
    nl += ds.labelOffsets[r + 1]! - ds.labelOffsets[r]!;
  }
  const idx = new Int32Array(nnz), vals = new Float32Array(nnz), seg = new Int32Array(nnz);
  const labelRows = new Int32Array(nl), labelCols = new Int32Array(nl), labelWeights = new Float32Array(nl);
  let p = 0, q = 0;
  for (let b = 0; b < rows.length; b++) {
    const r = rows[b]!;
    for (let j = ds.offsets[r]!, e = ds.offsets[r + 1]!; j < e; j++, p++) {
      idx[p] = ds.indices[j]!;
      vals[p] = ds.values[j]!;
      seg[p] = b;
    }
    const ls = ds.labelOffsets[r]!, le = ds.labelOffsets[r + 1]!;
    const w = 1 / (le - ls);
    for (let j = ls; j < le; j++, q++) {
      labelRows[q] = b;
      labelCols[q] = ds.labelIndices[j]!;
      labelWeights[q] = w;
    }
  }
  return { size: rows.length, idx, vals, seg, labelRows, labelCols, labelWeights };
}

/** Number of rows among `rows` whose label list contains `pred[b]` (top-1 hits). */
export function countTop1Hits(ds: SparseDataset, rows: Uint32Array, pred: ArrayLike<number>): number {
  let hits = 0;
  for (let b = 0; b < rows.length; b++) {
    const r = rows[b]!, want = pred[b]!;
    // label ids are strictly increasing within a row: binary search
    let lo = ds.labelOffsets[r]!, hi = ds.labelOffsets[r + 1]!;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      const v = ds.labelIndices[mid]!;
      if (v === want) { hits++; break; }
      if (v < want) lo = mid + 1;
      else hi = mid;
    }
  }
  return hits;
}

/** Rows per evaluation forward pass so that the (rows x labels) logits stay near 2^25 floats (128 MiB). */
export function evalBatchRows(labels: number): number {
  return Math.max(1, Math.min(4096, Math.floor(2 ** 25 / Math.max(1, labels))));
}

/** Glorot/Xavier-uniform fill: U(-a, a), a = sqrt(6 / (fanIn + fanOut)). */
export function glorotUniform(out: Float32Array, fanIn: number, fanOut: number, rng: Xoshiro128): Float32Array {
  const a = Math.sqrt(6 / (fanIn + fanOut));
  for (let i = 0; i < out.length; i++) out[i] = (2 * rng.nextFloat() - 1) * a;
  return out;
}

/** The shuffled training order of one epoch (labelled rows only). */
export function epochOrder(rows: Uint32Array, rng: Xoshiro128): Uint32Array {
  return shuffleInPlace(rows.slice(), rng);
}

/** Throughput after the warm-up batches: tracks (seconds, samples) at the end of batch `warmup`. */
export class SteadyRate {
  private s0 = 0;
  private n0 = 0;
  constructor(private readonly warmup: number) {}
  /** Call after each batch with the running totals. */
  batchDone(batches: number, seconds: number, samples: number): void {
    if (batches === this.warmup) { this.s0 = seconds; this.n0 = samples; }
  }
  rate(batches: number, seconds: number, samples: number): number {
    if (batches <= this.warmup || seconds <= this.s0) return NaN;
    return (samples - this.n0) / (seconds - this.s0);
  }
}

/** Median of a list (NaN when empty). */
export function median(xs: readonly number[]): number {
  if (!xs.length) return NaN;
  const s = [...xs].sort((a, b) => a - b), m = s.length >> 1;
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
}
