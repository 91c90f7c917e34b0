// Calibrated per-label probabilities (docs/serving.md "Probabilities"). A network's scores are a softmax
// over all labels: they share one unit of mass, so a point with four relevant labels gets about 0.25 on
// each, and "every label above 0.5" means nothing in a multi-label task. A calibration maps the score s of
// each of a point's top `shortlist` labels (by score; rank r = 0, 1, ...) to an estimate of P(label is
// relevant | x) by Platt scaling of where the candidate stands among the point's candidates:
//
//   p = sigmoid(a (ln s - ln s_1) + c ln(1 + r) + b + delta_j)
//
// where s_1 is the point's best score and delta_j a per-label shift. (a, c, b) are fitted by maximum
// likelihood on every (point, candidate) pair of held-out points (points the weights never trained on: the
// training procedure calls fitCalibration with its held-out slice's predictions, src/train/fit-calibration.ts);
// delta_j only for a label with at least `minPositives` held-out positives among the pairs, with a Gaussian
// prior centred on 0 (few positives stay near the pooled map), and 0 otherwise. Both features are ratios of
// scores within the point's candidates, which do not depend on the softmax's normaliser: exact prediction
// (every label) and sampled prediction (a few thousand candidates: larger scores at 670k labels) map alike.
// On debian-deps (test set, fitted on half of it) the log score alone left an ECE of 0.058 and a top-label
// ECE of 0.18; the log score with the rank and the best score's level, 0.016 and 0.06 (but the level depends
// on the normaliser: at the 670k shape a map fitted on sampled scores put exact ones at ECE 0.24); the gap
// to the best score with the rank, 0.010 and 0.014. The score s is whatever predict() returns for the label
// (network, wide part, blend and re-ranker included), so the calibration fits any procedure that produced
// the scores.
//
// The held-out points also choose the default threshold: the one of best micro-F1 when each point's
// labels are those of its shortlist whose probability reaches it. Labels outside a point's shortlist have
// no probability (they are below every threshold): the F1 counts their positives as misses.
//
// ECE (expected calibration error) here is over every (point, candidate) pair of the shortlists: 15 equal
// bins of the probability, the pair-weighted mean of |mean probability - fraction relevant| per bin.
import type { SparseDataset } from '../datasets/csr.js';
import { contains } from './metrics.js';

/** Settings of the calibration fitted by training (FitOptions.calibration). */
export interface CalibrationOptions {
  /** Candidates per point that get a probability: each point's top `shortlist` labels by score. Default 10. */
  shortlist?: number;
  /** Held-out positives a label needs to get its own shift. Default 10. */
  minPositives?: number;
  /** Precision of the Gaussian prior on a label's shift (in pseudo-pairs: larger keeps shifts nearer 0). Default 4. */
  prior?: number;
}

export const DEFAULT_CALIBRATION_SHORTLIST = 10;
const DEFAULT_MIN_POSITIVES = 10;
const DEFAULT_PRIOR = 4;
/** Bins of the reported expected calibration error. */
export const ECE_BINS = 15;
/** Scores below this are taken as it (ln 0 is -inf; a softmax score in float32 can be 0). */
const MIN_SCORE = 1e-30;
/** Features of a pair: ln s - ln s_1, ln(1 + rank). */
const F = 2;

/** What the held-out points said about the calibration (stored with it; train prints it). */
export interface CalibrationReport {
  /** Held-out points and (point, candidate) pairs it was fitted on, and how many pairs were relevant. */
  points: number;
  pairs: number;
  positives: number;
  /** Labels with their own shift. */
  ownLabels: number;
  /** Expected calibration error on the held-out pairs, of the softmax scores taken as probabilities and of the probabilities. */
  eceScores: number;
  ece: number;
  /** Micro- and macro-F1 on the held-out points at `threshold`. */
  microF1: number;
  macroF1: number;
  /** The best micro-F1 of a fixed top-k cut on the held-out points, and its k. */
  topkMicroF1: number;
  topk: number;
}

/**
 * A fitted calibration: stored in the model file (as JSON, in its meta) and applied by predict()
 * (`Predictions.probabilities`). Plain JSON values, so that a checkpoint's selection report can carry one.
 */
export interface ProbabilityCalibration {
  /** Each point's top `shortlist` labels by score get a probability. */
  shortlist: number;
  /** The pooled map: weights of ln s - ln s_1 and ln(1 + rank), and the intercept. */
  weights: number[];
  bias: number;
  /** Labels with their own shift of the intercept, ascending, and their shifts. */
  labels: number[];
  shifts: number[];
  /** Default threshold of threshold selection: the best micro-F1 on the held-out points. */
  threshold: number;
  report: CalibrationReport;
}

/** (point, candidate) pairs: each candidate's features and whether it is one of the point's labels. */
export interface CalibrationPairs {
  points: number;
  /** Per pair: label id, F features (pairs x F), relevant (1) or not (0); pairs of point i at [offsets[i], offsets[i + 1]). */
  labels: Uint32Array;
  x: Float64Array;
  /** Per pair: the score itself (for the ECE of the scores taken as probabilities). */
  scores: Float64Array;
  y: Uint8Array;
  offsets: Uint32Array;
  /** Relevant labels of every point (with those outside its candidates): for recall. */
  truths: number;
  /** Points each label is relevant to (whether a candidate or not): for the per-label F1. */
  relevant: Map<number, number>;
}

/** The features of the candidate at `rank` of a point whose best score is `top`. */
function features(out: Float64Array, at: number, score: number, rank: number, top: number): void {
  out[at] = Math.log(Math.max(MIN_SCORE, score)) - Math.log(Math.max(MIN_SCORE, top));
  out[at + 1] = Math.log1p(rank);
}

/**
 * The pairs of top-k predictions (points x k label ids, descending score; 0xFFFFFFFF: none) and their
 * scores, against the true labels of `data` (CSR, ascending within a row): each point's first `take`
 * candidates (default all k).
 */
export function calibrationPairs(
  labels: Uint32Array, scores: Float32Array, k: number, data: Pick<SparseDataset, 'points' | 'labelOffsets' | 'labelIndices'>, take = k,
): CalibrationPairs {
  const n = data.points;
  const offsets = new Uint32Array(n + 1);
  let m = 0;
  for (let i = 0; i < n; i++) {
    for (let r = 0; r < Math.min(take, k); r++) if (labels[i * k + r] !== 0xffffffff) m++;
    offsets[i + 1] = m;
  }
  const relevant = new Map<number, number>();
  for (let e = data.labelOffsets[0]!; e < data.labelOffsets[n]!; e++) relevant.set(data.labelIndices[e]!, (relevant.get(data.labelIndices[e]!) ?? 0) + 1);
  const out: CalibrationPairs = {
    points: n, labels: new Uint32Array(m), x: new Float64Array(m * F), scores: new Float64Array(m), y: new Uint8Array(m), offsets, truths: data.labelOffsets[n]! - data.labelOffsets[0]!, relevant,
  };
  let p = 0;
  for (let i = 0; i < n; i++) {
    const lo = data.labelOffsets[i]!, hi = data.labelOffsets[i + 1]!;
    for (let r = 0; r < Math.min(take, k); r++) {
      const l = labels[i * k + r]!;
      if (l === 0xffffffff) continue;
      out.labels[p] = l;
      features(out.x, p * F, scores[i * k + r]!, r, scores[i * k]!);
      out.scores[p] = scores[i * k + r]!;
      out.y[p] = contains(data.labelIndices, lo, hi, l) ? 1 : 0;
      p++;
    }
  }
  return out;
}

/** The pairs of several sets of points (the k-fold folds' held-out points), one after the other. */
export function concatPairs(parts: readonly CalibrationPairs[]): CalibrationPairs {
  let points = 0, m = 0, truths = 0;
  for (const p of parts) {
    points += p.points;
    m += p.y.length;
    truths += p.truths;
  }
  const out: CalibrationPairs = {
    points, labels: new Uint32Array(m), x: new Float64Array(m * F), scores: new Float64Array(m), y: new Uint8Array(m), offsets: new Uint32Array(points + 1), truths, relevant: new Map(),
  };
  let i = 0, e = 0;
  for (const p of parts) {
    out.labels.set(p.labels, e);
    out.x.set(p.x, e * F);
    out.scores.set(p.scores, e);
    out.y.set(p.y, e);
    for (let r = 1; r <= p.points; r++) out.offsets[i + r] = e + p.offsets[r]!;
    i += p.points;
    e += p.y.length;
    for (const [l, c] of p.relevant) out.relevant.set(l, (out.relevant.get(l) ?? 0) + c);
  }
  return out;
}

const sigmoid = (t: number): number => (t >= 0 ? 1 / (1 + Math.exp(-t)) : Math.exp(t) / (1 + Math.exp(t)));
/** -log sigmoid(z) for y = 1, -log(1 - sigmoid(z)) for y = 0, without overflow. */
const logLoss = (z: number, y: number): number => {
  const s = y ? -z : z;
  return s > 0 ? s + Math.log1p(Math.exp(-s)) : Math.log1p(Math.exp(s));
};

/**
 * Maximum-likelihood weights of p = sigmoid(w . x + b) over rows x of X (n x d, row-major) with a ridge
 * `lambda` on every weight: Newton's method on the convex negative log-likelihood, halving steps that do
 * not decrease it. Returns [w..., b].
 */
export function logisticFit(X: Float64Array, y: Uint8Array, d: number, lambda = 1e-6): number[] {
  const n = y.length, D = d + 1;
  const w = new Array<number>(D).fill(0);
  const z = (v: number[], i: number) => {
    let t = v[d]!;
    for (let j = 0; j < d; j++) t += v[j]! * X[i * d + j]!;
    return t;
  };
  const loss = (v: number[]) => {
    let f = 0;
    for (let j = 0; j < D; j++) f += 0.5 * lambda * v[j]! * v[j]!;
    for (let i = 0; i < n; i++) f += logLoss(z(v, i), y[i]!);
    return f;
  };
  let f = loss(w);
  for (let iter = 0; iter < 100; iter++) {
    const g = w.map((v) => lambda * v);
    const H = Array.from({ length: D }, (_, a) => Array.from({ length: D }, (_, b) => (a === b ? lambda + 1e-12 : 0)));
    for (let i = 0; i < n; i++) {
      const p = sigmoid(z(w, i));
      const r = p - y[i]!, q = Math.max(p * (1 - p), 1e-12);
      for (let a = 0; a < D; a++) {
        const xa = a === d ? 1 : X[i * d + a]!;
        g[a] += r * xa;
        for (let b = 0; b <= a; b++) H[a]![b] += q * xa * (b === d ? 1 : X[i * d + b]!);
      }
    }
    for (let a = 0; a < D; a++) for (let b = a + 1; b < D; b++) H[a]![b] = H[b]![a]!;
    const step = solve(H, g);
    if (!step) break;
    let t = 1, next = loss(w.map((v, j) => v - step[j]!));
    while (next > f && t > 1e-8) {
      t /= 2;
      next = loss(w.map((v, j) => v - t * step[j]!));
    }
    if (!(next <= f)) break;
    for (let j = 0; j < D; j++) w[j] -= t * step[j]!;
    const gain = f - next;
    f = next;
    if (gain < 1e-10 * Math.max(1, f)) break;
  }
  return w;
}

/** Solves H s = g (symmetric positive definite, small) by Gaussian elimination with pivoting; null if singular. */
function solve(H: number[][], g: number[]): number[] | null {
  const D = g.length;
  const A = H.map((row, i) => [...row, g[i]!]);
  for (let c = 0; c < D; c++) {
    let piv = c;
    for (let r = c + 1; r < D; r++) if (Math.abs(A[r]![c]!) > Math.abs(A[piv]![c]!)) piv = r;
    if (!(Math.abs(A[piv]![c]!) > 1e-300)) return null;
    [A[c], A[piv]] = [A[piv]!, A[c]!];
    for (let r = c + 1; r < D; r++) {
      const m = A[r]![c]! / A[c]![c]!;
      for (let k = c; k <= D; k++) A[r]![k] -= m * A[c]![k]!;
    }
  }
  const s = new Array<number>(D).fill(0);
  for (let r = D - 1; r >= 0; r--) {
    let t = A[r]![D]!;
    for (let k = r + 1; k < D; k++) t -= A[r]![k]! * s[k]!;
    s[r] = t / A[r]![r]!;
  }
  return s;
}

/** The MAP shift delta of the intercept for pairs with pooled logits z0 (prior: Gaussian of precision `lambda` at 0). */
function shiftFit(z0: number[], y: number[], lambda: number): number {
  let d = 0;
  const loss = (v: number) => 0.5 * lambda * v * v + z0.reduce((f, z, i) => f + logLoss(z + v, y[i]!), 0);
  let f = loss(d);
  for (let iter = 0; iter < 50; iter++) {
    let g = lambda * d, h = lambda;
    z0.forEach((z, i) => {
      const p = sigmoid(z + d);
      g += p - y[i]!;
      h += Math.max(p * (1 - p), 1e-12);
    });
    let t = 1, next = loss(d - g / h);
    while (next > f && t > 1e-8) {
      t /= 2;
      next = loss(d - (t * g) / h);
    }
    if (!(next <= f)) break;
    d -= (t * g) / h;
    const gain = f - next;
    f = next;
    if (gain < 1e-12 * Math.max(1, f)) break;
  }
  return d;
}

/** Each calibration's own labels by id (built on first use). */
const ownIndexes = new WeakMap<ProbabilityCalibration, Map<number, number>>();

/** The pooled logit of the features at x[at ..]. */
function pooledLogit(c: ProbabilityCalibration, x: ArrayLike<number>, at: number): number {
  let t = c.bias;
  for (let j = 0; j < F; j++) t += c.weights[j]! * x[at + j]!;
  return t;
}

/** The shift of `label` under `c` (0: the pooled map). */
function shiftOf(c: ProbabilityCalibration, label: number): number {
  let own = ownIndexes.get(c);
  if (!own) ownIndexes.set(c, (own = new Map(c.labels.map((l, j) => [l, j]))));
  const j = own.get(label);
  return j === undefined ? 0 : c.shifts[j]!;
}

/** Probability of label `label` at score `score`, the candidate at `rank` (0: best) of a point whose best score is `top`. */
export function calibratedProbability(c: ProbabilityCalibration, label: number, score: number, rank: number, top: number): number {
  const x = new Float64Array(F);
  features(x, 0, score, rank, top);
  return sigmoid(pooledLogit(c, x, 0) + shiftOf(c, label));
}

/**
 * Probabilities of top-k predictions (points x k, descending score; 0xFFFFFFFF: none, probability 0),
 * candidates past the shortlist included (they get the same map, beyond the ranks it was fitted on).
 */
export function calibrate(c: ProbabilityCalibration, labels: Uint32Array, scores: Float32Array, k: number): Float32Array {
  const out = new Float32Array(labels.length);
  for (let e = 0; e < labels.length; e++) {
    const l = labels[e]!;
    const i = Math.floor(e / k);
    out[e] = l === 0xffffffff ? 0 : calibratedProbability(c, l, scores[e]!, e - i * k, scores[i * k]!);
  }
  return out;
}

/**
 * Fits a calibration on held-out pairs (calibrationPairs of the held-out points' top `shortlist`
 * predictions) and chooses the threshold of best held-out micro-F1.
 */
export function fitCalibration(pairs: CalibrationPairs, shortlist: number, opts: CalibrationOptions = {}): ProbabilityCalibration {
  const minPositives = opts.minPositives ?? DEFAULT_MIN_POSITIVES;
  const prior = opts.prior ?? DEFAULT_PRIOR;
  const m = pairs.y.length;
  const w = logisticFit(pairs.x, pairs.y, F);
  const c: ProbabilityCalibration = {
    shortlist, weights: w.slice(0, F), bias: w[F]!, labels: [], shifts: [], threshold: 0.5,
    report: { points: pairs.points, pairs: m, positives: 0, ownLabels: 0, eceScores: 0, ece: 0, microF1: 0, macroF1: 0, topkMicroF1: 0, topk: 1 },
  };
  // Labels with enough positives: their shift, on their own pairs.
  const pos = new Map<number, number>();
  for (let e = 0; e < m; e++) if (pairs.y[e]) pos.set(pairs.labels[e]!, (pos.get(pairs.labels[e]!) ?? 0) + 1);
  const own = [...pos].filter(([, n]) => n >= minPositives).map(([l]) => l).sort((u, v) => u - v);
  const members = new Map<number, { z: number[]; y: number[] }>(own.map((l) => [l, { z: [], y: [] }]));
  for (let e = 0; e < m; e++) {
    const g = members.get(pairs.labels[e]!);
    if (!g) continue;
    g.z.push(pooledLogit(c, pairs.x, e * F));
    g.y.push(pairs.y[e]!);
  }
  c.labels = own;
  c.shifts = own.map((l) => shiftFit(members.get(l)!.z, members.get(l)!.y, prior));
  const probs = new Float64Array(m);
  let positives = 0;
  for (let e = 0; e < m; e++) {
    probs[e] = sigmoid(pooledLogit(c, pairs.x, e * F) + shiftOf(c, pairs.labels[e]!));
    positives += pairs.y[e]!;
  }
  c.threshold = bestThreshold(probs, pairs.y, pairs.truths);
  const at = thresholdF1(pairs, probs, c.threshold);
  const cut = bestTopkF1(pairs, shortlist);
  c.report = {
    points: pairs.points, pairs: m, positives, ownLabels: own.length,
    eceScores: expectedCalibrationError(pairs.scores, pairs.y).ece, ece: expectedCalibrationError(probs, pairs.y).ece,
    microF1: at.micro, macroF1: at.macro, topkMicroF1: cut.micro, topk: cut.k,
  };
  return c;
}

/** The threshold of best micro-F1 = 2 TP / (predicted + truths) when every pair whose probability reaches it is predicted. */
export function bestThreshold(probs: Float64Array, y: Uint8Array, truths: number): number {
  const order = Array.from(probs.keys()).sort((u, v) => probs[v]! - probs[u]!);
  let tp = 0, best = -1, bestT = 0.5;
  for (let r = 0; r < order.length; r++) {
    tp += y[order[r]!]!;
    // Predict the first r + 1 pairs: only a cut between two different probabilities is a threshold.
    const next = r + 1 < order.length ? probs[order[r + 1]!]! : -Infinity;
    if (next === probs[order[r]!]) continue;
    const f1 = (2 * tp) / (r + 1 + truths);
    if (f1 > best) {
      best = f1;
      bestT = next === -Infinity ? probs[order[r]!]! / 2 : (probs[order[r]!]! + next) / 2;
    }
  }
  return bestT;
}

/** Expected calibration error over pairs (ECE_BINS equal bins of the probability) and the bins themselves. */
export function expectedCalibrationError(probs: ArrayLike<number>, y: ArrayLike<number>): { ece: number; bins: { count: number; meanProbability: number; fractionRelevant: number }[] } {
  const count = new Float64Array(ECE_BINS), sumP = new Float64Array(ECE_BINS), sumY = new Float64Array(ECE_BINS);
  for (let e = 0; e < probs.length; e++) {
    const p = probs[e]!;
    const b = Math.min(ECE_BINS - 1, Math.max(0, Math.floor(p * ECE_BINS)));
    count[b]!++;
    sumP[b] += p;
    sumY[b] += y[e]!;
  }
  let ece = 0;
  const n = probs.length;
  const bins = [];
  for (let b = 0; b < ECE_BINS; b++) {
    const c = count[b]!;
    bins.push({ count: c, meanProbability: c ? sumP[b]! / c : 0, fractionRelevant: c ? sumY[b]! / c : 0 });
    if (c) ece += (c / n) * Math.abs(sumP[b]! / c - sumY[b]! / c);
  }
  return { ece, bins };
}

/**
 * Micro- and macro-F1 when each point's predicted labels are the pairs whose `probs` reach `threshold`.
 * Macro-F1: the mean per-label F1 over the labels relevant to some point or predicted for some point.
 */
export function thresholdF1(pairs: CalibrationPairs, probs: ArrayLike<number>, threshold: number): SetF1 {
  return setF1(pairs, (e) => probs[e]! >= threshold);
}

/** Micro- and macro-F1 of the top-k cut (each point's first k candidates). */
export function topkF1(pairs: CalibrationPairs, k: number): SetF1 {
  return setF1(pairs, (e, rank) => rank < k);
}

/** The fixed top-k cut (k = 1 .. maxK) of best micro-F1. */
export function bestTopkF1(pairs: CalibrationPairs, maxK: number): SetF1 & { k: number } {
  let best = { k: 1, ...topkF1(pairs, 1) };
  for (let k = 2; k <= maxK; k++) {
    const f = topkF1(pairs, k);
    if (f.micro > best.micro) best = { k, ...f };
  }
  return best;
}

/** F1 of a choice of labels per point. */
export interface SetF1 {
  micro: number;
  macro: number;
  /** Labels predicted over all points. */
  predicted: number;
}

function setF1(pairs: CalibrationPairs, chosen: (e: number, rank: number) => boolean): SetF1 {
  let tp = 0, predicted = 0;
  const perLabel = new Map<number, { tp: number; pred: number }>();
  for (let i = 0; i < pairs.points; i++) {
    for (let e = pairs.offsets[i]!; e < pairs.offsets[i + 1]!; e++) {
      if (!chosen(e, e - pairs.offsets[i]!)) continue;
      const l = pairs.labels[e]!;
      let s = perLabel.get(l);
      if (!s) perLabel.set(l, (s = { tp: 0, pred: 0 }));
      predicted++;
      s.pred++;
      if (pairs.y[e]) {
        tp++;
        s.tp++;
      }
    }
  }
  const micro = predicted + pairs.truths > 0 ? (2 * tp) / (predicted + pairs.truths) : 0;
  let sum = 0, labels = 0;
  for (const [l, rel] of pairs.relevant) {
    const s = perLabel.get(l);
    sum += s ? (2 * s.tp) / (s.pred + rel) : 0;
    labels++;
  }
  for (const l of perLabel.keys()) if (!pairs.relevant.has(l)) labels++; // predicted, never relevant: F1 0
  return { micro, macro: labels > 0 ? sum / labels : 0, predicted };
}

/** What `Network.evaluate` reports about the probabilities of a calibrated network (EvaluateOptions). */
export interface CalibrationMetrics {
  /** The threshold the F1 below are at (the model's, or EvaluateOptions.threshold). */
  threshold: number;
  /** Candidates per point with a probability, and the (point, candidate) pairs scored. */
  shortlist: number;
  pairs: number;
  /** Expected calibration error over the pairs (ECE_BINS bins): of the probabilities, and of the softmax scores taken as probabilities. */
  ece: number;
  eceScores: number;
  /** ECE of each point's best label alone (its probability against whether it is relevant). */
  eceTop1: number;
  /** Micro- and macro-F1 when each point's labels are its candidates whose probability reaches `threshold`, and how many labels that predicts per point. */
  microF1: number;
  macroF1: number;
  labelsPerPoint: number;
  /** Micro- and macro-F1 of every fixed top-k cut, k = 1 .. shortlist. */
  topk: { k: number; microF1: number; macroF1: number }[];
  /** The reliability diagram: per bin, pairs, mean probability and fraction relevant. */
  bins: { count: number; meanProbability: number; fractionRelevant: number }[];
}

/**
 * Calibration metrics of top-`k` predictions (points x k, k >= c.shortlist; descending score) of points
 * whose true labels are in `data`: the first c.shortlist candidates of each point are the pairs.
 */
export function calibrationMetrics(
  c: ProbabilityCalibration, labels: Uint32Array, scores: Float32Array, k: number,
  data: Pick<SparseDataset, 'points' | 'labelOffsets' | 'labelIndices'>, threshold = c.threshold,
): CalibrationMetrics {
  const S = c.shortlist;
  if (k < S) throw new Error(`Expected at least the calibration's ${S} candidates per point but received ${k}`);
  const l = new Uint32Array(data.points * S), s = new Float32Array(data.points * S);
  for (let i = 0; i < data.points; i++) {
    l.set(labels.subarray(i * k, i * k + S), i * S);
    s.set(scores.subarray(i * k, i * k + S), i * S);
  }
  const pairs = calibrationPairs(l, s, S, data);
  const probs = new Float64Array(pairs.y.length);
  for (let e = 0; e < probs.length; e++) probs[e] = sigmoid(pooledLogit(c, pairs.x, e * F) + shiftOf(c, pairs.labels[e]!));
  const top1p: number[] = [], top1y: number[] = [];
  for (let i = 0; i < pairs.points; i++) {
    const e = pairs.offsets[i]!;
    if (pairs.offsets[i + 1]! > e) {
      top1p.push(probs[e]!);
      top1y.push(pairs.y[e]!);
    }
  }
  const cal = expectedCalibrationError(probs, pairs.y);
  const at = thresholdF1(pairs, probs, threshold);
  return {
    threshold, shortlist: S, pairs: probs.length, ece: cal.ece, eceScores: expectedCalibrationError(pairs.scores, pairs.y).ece,
    eceTop1: expectedCalibrationError(top1p, top1y).ece, microF1: at.micro, macroF1: at.macro, labelsPerPoint: at.predicted / Math.max(1, pairs.points),
    topk: Array.from({ length: S }, (_, j) => {
      const f = topkF1(pairs, j + 1);
      return { k: j + 1, microF1: f.micro, macroF1: f.macro };
    }),
    bins: cal.bins,
  };
}

/** A calibrated model's probability metrics (Network.evaluate's `calibration`) in one line (eval, train --test). */
export function calibrationLine(c: CalibrationMetrics): string {
  const best = c.topk.reduce((a, t) => (t.microF1 > a.microF1 ? t : a));
  return `probabilities: ECE ${c.ece.toFixed(4)} (softmax scores ${c.eceScores.toFixed(4)}; top label ${c.eceTop1.toFixed(4)}); ` +
    `threshold ${c.threshold.toFixed(3)}: micro-F1 ${c.microF1.toFixed(4)} macro-F1 ${c.macroF1.toFixed(4)} (${c.labelsPerPoint.toFixed(2)} labels per point); ` +
    `best top-k cut: k ${best.k} micro-F1 ${best.microF1.toFixed(4)} macro-F1 ${best.macroF1.toFixed(4)}`;
}

/** Checks a stored calibration (JSON from a file) against the network's label count; the first problem or null. */
export function calibrationProblem(c: unknown, outputs: number): string | null {
  if (c === null || typeof c !== 'object') return 'the calibration is not an object';
  const o = c as ProbabilityCalibration;
  if (!Array.isArray(o.labels) || !Array.isArray(o.shifts)) return 'the calibration has no per-label lists';
  if (o.report === null || typeof o.report !== 'object') return 'the calibration has no report';
  return pairsProblem(o, outputs);
}

function pairsProblem(c: ProbabilityCalibration, outputs: number): string | null {
  const finite = (v: unknown) => typeof v === 'number' && Number.isFinite(v);
  if (!(Number.isInteger(c.shortlist) && c.shortlist >= 1 && c.shortlist <= 4096)) return `invalid calibration shortlist ${c.shortlist}`;
  if (!Array.isArray(c.weights) || c.weights.length !== F || !c.weights.every(finite) || !finite(c.bias)) return 'the calibration\'s pooled map is not 2 finite weights and a finite intercept';
  if (!(typeof c.threshold === 'number' && c.threshold > 0 && c.threshold < 1)) return `invalid calibration threshold ${c.threshold}`;
  const n = c.labels.length;
  if (c.shifts.length !== n) return 'the calibration has different numbers of labels and shifts';
  for (let j = 0; j < n; j++) {
    if (!Number.isInteger(c.labels[j]) || c.labels[j]! < 0 || c.labels[j]! >= outputs) return `the calibration names label ${c.labels[j]} (the network has ${outputs})`;
    if (j > 0 && c.labels[j]! <= c.labels[j - 1]!) return 'the calibration labels are not strictly ascending';
    if (!finite(c.shifts[j])) return 'the calibration holds a non-finite shift';
  }
  return null;
}
