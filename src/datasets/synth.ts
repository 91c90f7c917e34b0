// Seeded synthetic extreme-classification data at the shapes of real benchmarks.
//
// Data model (also in docs/data.md). Everything derives from one integer seed:
//
// - Label popularity is Zipf-Mandelbrot: the label of popularity rank r (0 = most frequent) is drawn with
//   probability proportional to (r + q)^-s. Ranks map to label ids through a seeded permutation, so
//   frequent labels are spread over the id range as in real data.
// - Each label has a prototype: 10-30 distinct feature ids drawn uniformly from [0, D) with random
//   positive weights (exponential). These are the label's "topic words"; they make the task learnable.
// - Background words follow a global Zipf-Mandelbrot distribution over features (again through a seeded
//   permutation of ids), like stop words and common terms.
// - A point has 1 + Geometric labels (mean avgLabels, so counts vary with a long tail), drawn without
//   repetition from the label distribution, and a target of about avgFeatures distinct features
//   (log-normal around the mean). Each feature draw comes, with probability `signal` (0.8), from the
//   prototype of one of the point's labels (label uniform, feature by prototype weight), otherwise from the
//   background distribution. Repeated draws of a feature raise its term count tf.
// - Values are tf-idf-like: (1 + ln tf) * idf, with idf = ln(2 + background rank) so common background
//   words weigh little; each row is L2-normalised, then rounded to 4 significant digits and to float32
//   (files stay compact and read back bit-exactly).
//
// Points come from one stream: the train file holds points 0..train-1 and the test file the next `test`
// points of the same stream, so test points follow the same prototypes and label frequencies, and
// `synthesize({ points: train + test })` returns exactly the rows of both files in that order.
// Labels are sorted within a row; features are sorted and unique.
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { writeFileAtomic } from '../util/atomic-write.js';
import { SplitMix64, Xoshiro128, shuffleInPlace } from '../util/rng.js';
import { CsrBuilder } from './csr-builder.js';
import type { SparseDataset } from './csr.js';
import { XCEncoder } from './xc-writer.js';
import { subset } from './split-reader.js';

/** Parameters of a synthetic dataset's distribution. */
export interface SynthShape {
  /** Feature dimension D. */
  features: number;
  /** Number of labels L. */
  labels: number;
  /** Mean number of nonzero features per point (the realised mean is slightly lower: draws can collide). */
  avgFeatures: number;
  /** Mean number of labels per point (>= 1; every point has at least one label). */
  avgLabels: number;
  /** Prototype size range per label (inclusive). */
  prototypeMin: number;
  prototypeMax: number;
  /** Label popularity: P(rank r) proportional to (r + q)^-s. */
  labelZipf: { s: number; q: number };
  /** Background feature popularity: P(rank r) proportional to (r + q)^-s. */
  featureZipf: { s: number; q: number };
  /** Fraction of feature draws taken from the point's label prototypes (the rest is background). */
  signal: number;
}

/** Shapes of real benchmarks (sizes from the Extreme Classification Repository) plus small test shapes. */
export const SHAPES = {
  /** For unit tests: 2,000 features, 100 labels, ~20 nonzeros, ~2 labels per point. */
  tiny: {
    features: 2000, labels: 100, avgFeatures: 20, avgLabels: 2, prototypeMin: 10, prototypeMax: 30,
    labelZipf: { s: 1, q: 2 }, featureZipf: { s: 1, q: 10 }, signal: 0.8,
  },
  /** For quick experiments: 20,000 features, 2,000 labels, ~40 nonzeros, ~3 labels per point. */
  small: {
    features: 20000, labels: 2000, avgFeatures: 40, avgLabels: 3, prototypeMin: 10, prototypeMax: 30,
    labelZipf: { s: 1, q: 10 }, featureZipf: { s: 1, q: 10 }, signal: 0.8,
  },
  /** Amazon-670K: 135,909 features, 670,091 labels, ~75 nonzeros, ~5.4 labels per point. */
  'amazon-670k': {
    features: 135909, labels: 670091, avgFeatures: 75, avgLabels: 5.45, prototypeMin: 10, prototypeMax: 30,
    labelZipf: { s: 1, q: 50 }, featureZipf: { s: 1, q: 20 }, signal: 0.8,
  },
  /** Delicious-200K: 782,585 features, 205,443 labels, ~300 nonzeros, ~75 labels per point. */
  'delicious-200k': {
    features: 782585, labels: 205443, avgFeatures: 300, avgLabels: 75.5, prototypeMin: 10, prototypeMax: 30,
    labelZipf: { s: 1, q: 20 }, featureZipf: { s: 1, q: 20 }, signal: 0.8,
  },
  /** WikiLSHTC-325K: 1,617,899 features, 325,056 labels, ~42 nonzeros, ~3.2 labels per point. */
  'wiki-325k': {
    features: 1617899, labels: 325056, avgFeatures: 42.5, avgLabels: 3.2, prototypeMin: 10, prototypeMax: 30,
    labelZipf: { s: 1, q: 50 }, featureZipf: { s: 1, q: 20 }, signal: 0.8,
  },
} as const satisfies Record<string, SynthShape>;

export type ShapeName = keyof typeof SHAPES;
export const SHAPE_NAMES = Object.keys(SHAPES) as ShapeName[];

/** Resolves a shape name (throws listing the known names) or validates a custom shape. */
export function resolveShape(shape: ShapeName | SynthShape): SynthShape {
  if (typeof shape === 'string') {
    const s = (SHAPES as Record<string, SynthShape>)[shape];
    if (!s) throw new Error(`Unknown synthetic shape '${shape}' (known: ${SHAPE_NAMES.join(', ')})`);
    return s;
  }
  const pos = (name: keyof SynthShape, v: number, integer: boolean): void => {
    if (!(Number.isFinite(v) && v > 0 && (!integer || Number.isInteger(v)))) {
      throw new Error(`Expected positive ${integer ? 'integer' : 'number'} for shape.${name} but received ${v}`);
    }
  };
  pos('features', shape.features, true);
  pos('labels', shape.labels, true);
  pos('avgFeatures', shape.avgFeatures, false);
  pos('prototypeMin', shape.prototypeMin, true);
  pos('prototypeMax', shape.prototypeMax, true);
  if (!(shape.avgLabels >= 1)) throw new Error(`Expected shape.avgLabels >= 1 but received ${shape.avgLabels}`);
  if (shape.prototypeMax < shape.prototypeMin || shape.prototypeMax > shape.features) {
    throw new Error(`Expected prototypeMin <= prototypeMax <= features but received ${shape.prototypeMin}, ${shape.prototypeMax}, ${shape.features}`);
  }
  if (!(shape.signal >= 0 && shape.signal <= 1)) throw new Error(`Expected shape.signal in [0, 1] but received ${shape.signal}`);
  return shape;
}

export function checkCount(name: string, v: number): void {
  if (!(Number.isInteger(v) && v >= 0 && v <= 0xffffffff)) {
    throw new Error(`Expected non-negative integer for ${name} but received ${v}`);
  }
}

export function checkSeed(seed: number): void {
  if (!(Number.isSafeInteger(seed) && seed >= 0)) throw new Error(`Expected non-negative integer for seed but received ${seed}`);
}

/** Cumulative Zipf-Mandelbrot distribution over n ranks, normalised to end at 1. */
export function zipfCdf(n: number, s: number, q: number): Float64Array {
  const cdf = new Float64Array(n);
  let acc = 0;
  for (let r = 0; r < n; r++) {
    acc += Math.pow(r + q, -s);
    cdf[r] = acc;
  }
  for (let r = 0; r < n; r++) cdf[r]! /= acc;
  cdf[n - 1] = 1;
  return cdf;
}

/** First rank whose cumulative probability exceeds u. */
export function sampleCdf(cdf: Float64Array, u: number): number {
  let lo = 0, hi = cdf.length - 1;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (cdf[mid]! > u) hi = mid;
    else lo = mid + 1;
  }
  return lo;
}

/** One point's rows, reused across points. */
export interface PointScratch {
  labels: Uint32Array;
  nLabels: number;
  ids: Uint32Array;
  values: Float32Array;
  nnz: number;
}

/** The seeded distribution: tables built once, then points drawn one at a time from `rng`. */
export class SynthModel {
  readonly shape: SynthShape;
  private readonly labelPerm: Uint32Array;
  private readonly labelCdf: Float64Array;
  private readonly featPerm: Uint32Array;
  private readonly featCdf: Float64Array;
  private readonly idf: Float32Array;
  private readonly protoOffsets: Uint32Array;
  private readonly protoFeatures: Uint32Array;
  private readonly protoCum: Float32Array;
  // Per-point scratch: term counts by feature id (0 = untouched) and label membership marks.
  private readonly tf: Float32Array;
  private readonly labelMark: Uint8Array;
  private readonly rng: Xoshiro128;
  private readonly scratch: PointScratch;
  private weights: Float64Array;

  constructor(shape: ShapeName | SynthShape, seed: number) {
    const sh = resolveShape(shape);
    checkSeed(seed);
    this.shape = sh;
    const sm = new SplitMix64(seed);
    const modelRng = new Xoshiro128(sm.next());
    this.rng = new Xoshiro128(sm.next());
    const D = sh.features, L = sh.labels;

    this.labelPerm = identity(L);
    shuffleInPlace(this.labelPerm, modelRng);
    this.labelCdf = zipfCdf(L, sh.labelZipf.s, sh.labelZipf.q);
    this.featPerm = identity(D);
    shuffleInPlace(this.featPerm, modelRng);
    this.featCdf = zipfCdf(D, sh.featureZipf.s, sh.featureZipf.q);
    this.idf = new Float32Array(D);
    for (let r = 0; r < D; r++) this.idf[this.featPerm[r]!] = Math.log(2 + r);

    // Prototypes, label by label: sizes, then distinct uniform features, then cumulative weights.
    const span = sh.prototypeMax - sh.prototypeMin + 1;
    this.protoOffsets = new Uint32Array(L + 1);
    for (let l = 0; l < L; l++) this.protoOffsets[l + 1] = this.protoOffsets[l]! + sh.prototypeMin + modelRng.below(span);
    const total = this.protoOffsets[L]!;
    this.protoFeatures = new Uint32Array(total);
    this.protoCum = new Float32Array(total);
    for (let l = 0; l < L; l++) {
      const a = this.protoOffsets[l]!, b = this.protoOffsets[l + 1]!;
      let sum = 0;
      for (let k = a; k < b; k++) {
        let f: number;
        do {
          f = modelRng.below(D);
        } while (contains(this.protoFeatures, a, k, f));
        this.protoFeatures[k] = f;
        sum += 0.1 - Math.log(1 - modelRng.nextFloat()); // exponential weight, bounded away from 0
        this.protoCum[k] = sum;
      }
      for (let k = a; k < b; k++) this.protoCum[k]! /= sum;
      this.protoCum[b - 1] = 1;
    }

    this.tf = new Float32Array(D);
    this.labelMark = new Uint8Array(L);
    this.weights = new Float64Array(64);
    this.scratch = { labels: new Uint32Array(64), nLabels: 0, ids: new Uint32Array(64), values: new Float32Array(64), nnz: 0 };
  }

  /** Draws the next point of the stream into the returned scratch (valid until the next call). */
  next(): Readonly<PointScratch> {
    const sh = this.shape, rng = this.rng, sc = this.scratch;
    const L = sh.labels, D = sh.features;

    // Labels: 1 + Geometric(mean avgLabels - 1), distinct, by popularity.
    let nLab = 1;
    if (sh.avgLabels > 1) {
      const p = 1 / sh.avgLabels;
      nLab += Math.floor(Math.log(1 - rng.nextFloat()) / Math.log(1 - p));
    }
    nLab = Math.min(nLab, L);
    if (sc.labels.length < nLab) sc.labels = new Uint32Array(Math.max(nLab, sc.labels.length * 2));
    const labels = sc.labels;
    let got = 0;
    for (let attempts = 0; got < nLab && attempts < 20 * nLab + 100; attempts++) {
      const l = this.labelPerm[sampleCdf(this.labelCdf, rng.nextFloat())]!;
      if (this.labelMark[l] === 0) {
        this.labelMark[l] = 1;
        labels[got++] = l;
      }
    }
    for (let i = 0; i < got; i++) this.labelMark[labels[i]!] = 0;
    const labelRow = labels.subarray(0, got).sort();
    sc.nLabels = got;

    // Features: draw until the target number of distinct ids (or give up after enough collisions).
    const sigma = 0.5;
    let target = Math.round(sh.avgFeatures * Math.exp(sigma * rng.normal() - (sigma * sigma) / 2));
    target = Math.max(1, Math.min(target, D, Math.ceil(sh.avgFeatures * 20)));
    if (sc.ids.length < target) {
      const cap = Math.max(target, sc.ids.length * 2);
      sc.ids = new Uint32Array(cap);
      sc.values = new Float32Array(cap);
      this.weights = new Float64Array(cap);
    }
    const ids = sc.ids, tf = this.tf;
    const protoOffsets = this.protoOffsets, protoCum = this.protoCum, protoFeatures = this.protoFeatures;
    const featPerm = this.featPerm, featCdf = this.featCdf, signal = sh.signal;
    let nnz = 0;
    for (let attempts = 0, maxAttempts = 8 * target; nnz < target && attempts < maxAttempts; attempts++) {
      let f: number;
      if (rng.nextFloat() < signal) {
        const l = labelRow[rng.below(got)]!;
        const a = protoOffsets[l]!, last = protoOffsets[l + 1]! - 1;
        const u = rng.nextFloat();
        let k = a;
        while (k < last && protoCum[k]! <= u) k++;
        f = protoFeatures[k]!;
      } else {
        f = featPerm[sampleCdf(featCdf, rng.nextFloat())]!;
      }
      if (tf[f] === 0) ids[nnz++] = f;
      tf[f]!++;
    }
    const row = ids.subarray(0, nnz).sort();
    // tf-idf, L2-normalised, rounded to 4 significant digits, float32.
    const w = this.weights;
    let norm = 0;
    for (let i = 0; i < nnz; i++) {
      const f = row[i]!;
      const x = (1 + Math.log(tf[f]!)) * this.idf[f]!;
      tf[f] = 0;
      w[i] = x;
      norm += x * x;
    }
    const inv = 1 / Math.sqrt(norm);
    for (let i = 0; i < nnz; i++) sc.values[i] = round4(w[i]! * inv);
    sc.nnz = nnz;
    return sc;
  }
}

/** Rounds a positive value to 4 significant digits (exactly as parsing the 4-digit decimal would). */
export function round4(x: number): number {
  const k = 3 - Math.floor(Math.log10(x));
  if (k < 0 || k > 22) return Number(x.toPrecision(4));
  const p = 10 ** k;
  return Math.round(x * p) / p;
}

export function identity(n: number): Uint32Array {
  const a = new Uint32Array(n);
  for (let i = 0; i < n; i++) a[i] = i;
  return a;
}

function contains(a: Uint32Array, start: number, end: number, v: number): boolean {
  for (let i = start; i < end; i++) if (a[i] === v) return true;
  return false;
}

/** Options of `synthesize`. */
export interface SynthesizeOptions {
  /** A named shape (see SHAPES) or a custom one. */
  shape: ShapeName | SynthShape;
  /** Number of points. */
  points: number;
  /** Seed of the whole distribution and stream. Default 1. */
  seed?: number;
}

/**
 * Generates `points` points in memory (the same rows `generateSynthetic` writes for the same seed).
 *
 * @example
 * ```ts
 * const data = synthesize({ shape: 'tiny', points: 1000, seed: 1 });
 * const { report } = await train({ train: data, epochs: 2 });
 * ```
 */
export function synthesize(opts: SynthesizeOptions): SparseDataset {
  checkCount('points', opts.points);
  const model = new SynthModel(opts.shape, opts.seed ?? 1);
  const sh = model.shape;
  return collectPoints(model, opts.points, sh, sh.avgFeatures, sh.avgLabels);
}

/**
 * The next `points` points of `model` as an in-memory dataset (the rows `writePointStream` would write);
 * `perPoint*` size the builder (estimates). Shared by the data models.
 */
export function collectPoints(
  model: PointStream, points: number, dims: { features: number; labels: number }, perPointNnz: number, perPointLabels: number,
): SparseDataset {
  const b = new CsrBuilder(points, points * perPointNnz, points * perPointLabels);
  for (let i = 0; i < points; i++) {
    const p = model.next();
    b.addRow(p.labels, 0, p.nLabels, p.ids, p.values, 0, p.nnz);
  }
  return b.toDataset(dims.features, dims.labels);
}

/** Options of `generateSynthetic`. */
export interface GenerateSyntheticOptions {
  /** A named shape (see SHAPES) or a custom one. */
  shape: ShapeName | SynthShape;
  /** Points in `train.txt`. */
  train: number;
  /** Points in `test.txt`. Default 0 (an empty test file with a header). */
  test?: number;
  /** Seed of the whole distribution and stream. Default 1. */
  seed?: number;
  /** Output folder (created if missing); receives `train.txt` and `test.txt`. */
  outDir: string;
  /** Called every few thousand points with (points written, train + test). Default: none. */
  onProgress?: (points: number, totalPoints: number) => void;
  /** fsync each file before renaming it into place. Default true. */
  fsync?: boolean;
}

/** Paths and sizes `generateSynthetic` wrote. */
export interface GenerateSyntheticResult {
  train: string;
  test: string;
  /** Bytes written to train.txt and test.txt together. */
  bytes: number;
  shape: SynthShape;
}

/**
 * Writes `train.txt` and `test.txt` (XC format) into `outDir`, streaming: only one point is held at a
 * time (plus the model's tables: prototypes are ~20 entries per label). Each file is written atomically.
 */
export async function generateSynthetic(opts: GenerateSyntheticOptions): Promise<GenerateSyntheticResult> {
  checkCount('train', opts.train);
  checkCount('test', opts.test ?? 0);
  const model = new SynthModel(opts.shape, opts.seed ?? 1);
  const r = await writePointStream(model, model.shape, opts);
  return { ...r, shape: model.shape };
}

/** A seeded stream of points (one generator's model): each call returns the next point's rows. */
export interface PointStream {
  next(): Readonly<PointScratch>;
}

/** Where and how `writePointStream` writes (the fields of `GenerateSyntheticOptions` it uses). */
export interface WriteStreamOptions {
  train: number;
  test?: number;
  outDir: string;
  onProgress?: (points: number, totalPoints: number) => void;
  fsync?: boolean;
}

/**
 * Writes the first `train` points of `model` to `outDir/train.txt` and the next `test` points to
 * `outDir/test.txt` (XC format, each file atomically), holding one point at a time. Shared by the data models.
 */
export async function writePointStream(
  model: PointStream, dims: { features: number; labels: number }, opts: WriteStreamOptions,
): Promise<{ train: string; test: string; bytes: number }> {
  const test = opts.test ?? 0;
  checkCount('train', opts.train);
  checkCount('test', test);
  const total = opts.train + test;
  let done = 0;
  async function* rows(count: number): AsyncGenerator<Uint8Array> {
    const enc = new XCEncoder();
    enc.header(count, dims.features, dims.labels);
    for (let i = 0; i < count; i++) {
      const p = model.next();
      enc.row(p.labels, 0, p.nLabels, p.ids, p.values, 0, p.nnz);
      done++;
      if (enc.length >= 4 * 1024 * 1024) {
        yield enc.bytes();
        enc.clear();
        opts.onProgress?.(done, total);
      }
    }
    yield enc.bytes();
    opts.onProgress?.(done, total);
  }
  await mkdir(opts.outDir, { recursive: true });
  const trainPath = join(opts.outDir, 'train.txt');
  const testPath = join(opts.outDir, 'test.txt');
  const fsync = opts.fsync ?? true;
  let bytes = await writeFileAtomic(trainPath, rows(opts.train), { fsync });
  bytes += await writeFileAtomic(testPath, rows(test), { fsync });
  return { train: trainPath, test: testPath, bytes };
}

/**
 * A train/test split from one generator stream (test = the `test` points after the `train` points), on
 * SharedArrayBuffers. `shape` may override a named shape's fields (e.g. fewer labels at Amazon-670K's
 * feature dimension).
 */
export function syntheticSplit(
  shape: ShapeName | SynthShape, train: number, test: number, seed = 1,
): { train: SparseDataset; test: SparseDataset } {
  const all = synthesize({ shape, points: train + test, seed });
  const range = (from: number, to: number) => Uint32Array.from({ length: to - from }, (_, i) => from + i);
  return { train: subset(all, range(0, train)), test: subset(all, range(train, train + test)) };
}
