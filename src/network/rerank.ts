// The output layer's re-ranker (RerankConfig, native/net_rerank.cc): per-label sparse linear classifiers
// trained on the network's shortlists, and how their scores re-order the network's top candidates.
import type { SparseDataset } from '../datasets/csr.js';
import { native } from '../native/addon.js';
import type { ResolvedRerank } from './config.js';
import type { RerankArrays } from '../native/network-types.js';
import { computeMetrics, pointPrecisions } from './metrics.js';

/** A trained re-ranker: the classifiers, and their weight against the network's log-probabilities. */
export interface RerankState extends RerankArrays {
  /** The classifiers' weight (RerankConfig.weight, or the one chosen on held-out points); 0: not applied. */
  weight: number;
  /** Network candidates re-scored per point (RerankConfig.shortlist). */
  shortlist: number;
}

/** One weight's held-out score (FitStats.rerank). */
export interface RerankTry {
  weight: number;
  p1: number;
  p3: number;
  p5: number;
  /** ValidationOptions.metric at this weight. */
  score: number;
}

/** What fit() trained and chose for the re-ranker (FitStats.rerank). */
export interface RerankReport {
  /** The classifiers' weight now applied; 0: none applied (the network's predictions stand, the classifiers are dropped). */
  weight: number;
  /** Held-out points that chose the weight (0 when RerankConfig.weight gave it). */
  points: number;
  /** The held-out score at every weight of RERANK_WEIGHTS, smallest first (empty when the weight was given). */
  tried: RerankTry[];
  /** Classifier weights kept over all labels, and the bytes of the re-ranker (0 when dropped). */
  entries: number;
  bytes: number;
  /** Seconds: the training rows' shortlists, the classifiers, the held-out choice. */
  seconds: number;
  /** Present when nothing was trained: why. */
  skipped?: string;
}

/**
 * Weights of the classifiers' scores tried on the held-out points, smallest first (a tie keeps the smaller:
 * the network as trained unless the classifiers help). The classifiers' margins are near +-1 and the
 * network's log-probabilities span a few units, so these run from a nudge to the classifiers deciding.
 * Measured best on held-out or test data: 0.5 (Delicious), 1 (a text set's tail), 2 (Bibtex, 554 debtags),
 * 4 (22,868 package dependencies).
 */
export const RERANK_WEIGHTS = [0, 0.25, 0.5, 1, 2, 4, 8] as const;

/** Tolerance on the projected gradients that ends a label's descent early (LIBLINEAR's default for it). */
const SOLVER_EPS = 0.1;

/**
 * Trains the classifiers of labels [0, labels) on rows `rows` of `data` (null: all) and their shortlists
 * (rows.length x S label ids, the network's top S of each row in order). Weight 0 until chosen. `only`: the
 * classifiers of those labels alone (a label-sharded rank's), each as without it; the others stay empty.
 */
export function trainRerank(
  data: SparseDataset, rows: Uint32Array | null, shortlist: Uint32Array, S: number, shape: { labels: number; features: number },
  cfg: ResolvedRerank, threads: number, seed: number, only?: Uint32Array,
): RerankState {
  const m = native().rerankTrain({
    data, rows, shortlist, S, labels: shape.labels, features: shape.features,
    C: cfg.C, eps: SOLVER_EPS, maxIter: cfg.maxIter, prune: cfg.prune, threads, seed, ...(only ? { only } : {}),
  });
  return { ...m, weight: cfg.weight ?? 0, shortlist: cfg.shortlist };
}

/** The classifiers' scores (rows x S) of candidates (rows x S; 0xFFFFFFFF: none, -inf) for rows of data (null: all); `features`: the network's input features. */
export function rerankScores(
  r: RerankArrays, data: SparseDataset, rows: Uint32Array | null, candidates: Uint32Array, S: number, features: number, threads: number,
): Float32Array {
  const out = new Float32Array(candidates.length);
  native().rerankScore({ data, rows, candidates, S, features, model: r, threads, out });
  return out;
}

/**
 * The k best of each point's S candidates (labels, probs: the network's, points x S, descending) under
 * log p_j + weight x s_j (s: the classifiers' scores, points x S); ties keep the network's order. The
 * probabilities returned are the network's mass on the S candidates, shared out by the new scores
 * (softmax over the S), computed in double. outLabels/outScores: (points, k); a missing candidate stays
 * 0xFFFFFFFF / 0. Native (native/net_rerank.cc); test/network/rerank.test.ts holds the reference.
 */
export function rerankCombine(
  labels: Uint32Array, probs: Float32Array, s: Float32Array, S: number, weight: number, k: number,
  outLabels: Uint32Array, outScores: Float32Array,
): void {
  native().rerankCombine({ labels, probs, scores: s, S, weight, k, outLabels, outScores });
}

/** Checks a stored re-ranker against the network's labels and input features; the first problem or null. */
export function rerankProblem(r: RerankState, labels: number, inputDim: number): string | null {
  if (!(Number.isFinite(r.weight) && r.weight >= 0)) return `invalid re-ranker weight ${r.weight}`;
  if (!(Number.isInteger(r.shortlist) && r.shortlist >= 1 && r.shortlist <= 4096)) return `invalid re-ranker shortlist ${r.shortlist}`;
  if (r.offsets.length !== labels + 1 || r.bias.length !== labels) return `the re-ranker has ${r.bias.length} labels but the network has ${labels}`;
  const nnz = r.features.length;
  if (r.weights.length !== nnz) return 'the re-ranker has different numbers of features and weights';
  if (r.offsets[0] !== 0 || r.offsets[labels] !== nnz) return 'the re-ranker offsets do not run from 0 to its number of entries';
  for (let j = 0; j < labels; j++) {
    const e0 = r.offsets[j]!, e1 = r.offsets[j + 1]!;
    if (e0 > e1) return `the re-ranker offsets decrease at label ${j}`;
    for (let e = e0; e < e1; e++) {
      if (r.features[e]! >= inputDim) return `the re-ranker names feature ${r.features[e]} (the network has ${inputDim})`;
      if (e > e0 && r.features[e]! <= r.features[e - 1]!) return `the re-ranker's features of label ${j} are not strictly ascending`;
    }
  }
  for (const a of [r.weights, r.bias]) for (let e = 0; e < a.length; e++) if (!Number.isFinite(a[e]!)) return 'the re-ranker holds a non-finite weight';
  return null;
}

/** Bytes of a re-ranker (its arrays). */
export function rerankBytes(r: RerankArrays): number {
  return r.offsets.byteLength + r.features.byteLength + r.weights.byteLength + r.bias.byteLength;
}

/**
 * Sums over the points of `part` of P@1, P@3, P@5 and the per-point score (pointPrecisions over `ks`) at
 * every weight of RERANK_WEIGHTS: the network's top S of each point (labels, probs) re-scored with the
 * classifiers' scores s.
 */
export function rerankWeightSums(
  part: SparseDataset, labels: Uint32Array, probs: Float32Array, s: Float32Array, S: number, ks: number[],
): { p1: number; p3: number; p5: number; score: number }[] {
  const top = new Uint32Array(part.points * 5), scores = new Float32Array(part.points * 5);
  return RERANK_WEIGHTS.map((weight) => {
    rerankCombine(labels, probs, s, S, weight, 5, top, scores);
    const m = computeMetrics({ topIdx: top, kMax: 5, labelOffsets: part.labelOffsets, labelIndices: part.labelIndices });
    let score = 0;
    for (const v of pointPrecisions(top, 5, part.labelOffsets, part.labelIndices, ks)) score += v;
    return { p1: m.p1! * part.points, p3: m.p3! * part.points, p5: m.p5! * part.points, score };
  });
}

/** Sums of rerankWeightSums over `points` points as the mean held-out score of each weight. */
export function rerankTries(sums: { p1: number; p3: number; p5: number; score: number }[], points: number): RerankTry[] {
  return RERANK_WEIGHTS.map((weight, w) => ({
    weight, p1: sums[w]!.p1 / points, p3: sums[w]!.p3 / points, p5: sums[w]!.p5 / points, score: sums[w]!.score / points,
  }));
}
