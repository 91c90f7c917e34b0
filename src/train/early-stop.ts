// Training that decides its own length: a seeded slice of the training set is held out, P@k on it is
// measured after every epoch, the learning rate is cut when it stops improving, training stops after
// `patience` epochs without improvement, and the weights of the best epoch are restored at the end.
//
// "Improvement" means a gain worth an epoch (`minGain`): a new best counts only when it beats the last epoch
// that counted (the reference) by more than minGain. A plateau's new bests are record-breaking noise, a few
// hundredths of a point each on 1,500-5,000 held-out points: a rule that counted every one of them ran 7
// epochs at 200,000 points and 12 at 30,000 where the held-out P@1 had stopped moving after 2-5 (docs/defaults.md
// "How the defaults were chosen"). Against a fixed reference, slow real gains add up until they count.
// A held-out slice's noise alone moves the score by more than minGain, so `significance` (1 by default)
// also asks for a gain above the held-out points' own noise (one paired standard error): on debian-deps's
// 2,226 held-out points that error is about 0.002, twice minGain, and with minGain alone an epoch's noisy
// +0.002 counted as a gain: 7.8 epochs in the mean of five seeds against 6.6 with the bar, for the same
// test precision (docs/defaults.md "Fewer epochs: a gain above the held-out noise"). The bar scales with
// the slice: small slices need larger gains, large ones smaller.
//
// Why a plateau schedule rather than a fixed decay: the right number of epochs differs by two orders of
// magnitude between the datasets this engine is used on (Bibtex peaks after ~10 epochs of 38 batches,
// a 670k-label set after a few epochs of 230 batches); a schedule tied to a planned epoch count would
// need that count in advance, which is exactly what is not known. Halving the rate when the held-out
// score stalls lets Adam settle into the minimum it is circling (not measured on its own; at the 670k
// shape the held-out P@1 kept rising after each cut: docs/defaults.md "How the defaults were chosen").
//
// On small training sets one slice is too small to decide anything (15 points for 300: one point moves
// P@1 by 7 points), so below `minHoldout` held-out points the epoch count is chosen by k-fold
// cross-validation instead (kfoldSplit, bestMeanEpoch; the fold runs are in Network.fit) and the network
// then trains on all of the data: docs/defaults.md "Small training sets".
import { boundJson } from '../util/bounded-text.js';
import { Xoshiro128, shuffleInPlace } from '../util/rng.js';
import type { NetSpec } from '../native/network-types.js';
import type { RerankTry } from '../network/rerank.js';
import { calibrationProblem, type ProbabilityCalibration } from '../network/calibration.js';
import { checkKnownKeys } from '../util/suggest.js';
import { defaultTraining, type ResolvedNetworkConfig, type RowUpdateData } from '../network/config.js';

/** Options of the held-out validation that decides the number of epochs (`FitOptions.validation`). */
export interface ValidationOptions {
  /** Fraction of the training points held out (a seeded choice; never trained on). Default 0.05. */
  fraction?: number;
  /** At most this many points are held out (the evaluation runs after every epoch). Default 5000. */
  maxPoints?: number;
  /**
   * Epochs without a new best held-out score (a counted improvement: minGain) before the descent starts
   * (schedule 'anneal') or training stops ('plateau'). Default 1 with 'anneal', 3 with 'plateau'.
   */
  patience?: number;
  /** Upper bound on the number of epochs. Default 50. */
  maxEpochs?: number;
  /** The learning rate is multiplied by this after every epoch without a new best score. Default 0.5. */
  lrDecay?: number;
  /**
   * A new best must beat the previous one by more than this (in score units, fractions of 1). A positive
   * value cuts the long tail of 0.01-point gains (at 670k labels and 200,000 points, 0.001 would save
   * over half of the training time) but stops some runs early: on Delicious 0.001 stopped after 9
   * epochs at P@1 0.692 instead of 17 at 0.700. Default 0.
   */
  minDelta?: number;
  /**
   * A new best resets the patience count only when its score beats the reference epoch's (the last one that
   * did; the first epoch to start with) by more than `minGain`, in score units (and by more than
   * `significance` standard errors of the held-out noise: both bars apply). A smaller gain still keeps
   * its weights (fit() keeps the best epoch) and the rate, but counts as an epoch without improvement:
   * `patience` of them stop training. Gains add up against the reference, so a slow steady rise goes on.
   * Default 0.001 (0.1 points of the score).
   */
  minGain?: number;
  /**
   * Like minGain, in standard errors of the gain: a new best counts only when its paired gain over the
   * reference epoch (the mean over the held-out points of each point's score now minus then) is more than
   * `significance` times that gain's standard error (the differences' standard deviation over
   * sqrt(points)). Both bars apply, this one once a gain has cleared it (hasRisen: the first epochs can
   * rise by less than their churn's error before they rise steeply). 0: off. Default 1: over three to six
   * seeds on eight data sets (docs/defaults.md), fewer epochs where the held-out curve rises slowly
   * (debian-deps 7.8 -> 6.6 in the mean of five seeds, Bibtex 8.2 -> 6.8 of six) and no mean test P@1/3/5
   * more than 0.11 points from 0's, but at the 670k shape (0.16: one early stall, which hasRisen now
   * prevents); 2 lost 0.5 to 0.8 points of P@1, P@3 or P@5 on Bibtex and Delicious, whose slices of 244
   * and 646 points stalled too early.
   */
  significance?: number;
  /**
   * Held-out score compared between epochs: 'p1', or 'p135' = (P@1 + P@3 + P@5) / 3, which is less noisy
   * on small held-out sets and still ranks by precision at the top. Default 'p135'.
   */
  metric?: 'p1' | 'p135';
  /**
   * Smallest held-out slice trusted to stop training. When `fraction` of the training points (capped at
   * `maxPoints`) is fewer points than this, the number of epochs is chosen by k-fold cross-validation
   * instead (`folds`): every point is held out once, the mean held-out score over the folds picks the
   * epoch count, and the network is then trained on all of the data for that many epochs (see
   * selectEpochs). 1 turns k-fold selection off. Default 100 (training sets under 2,000 points).
   */
  minHoldout?: number;
  /** Folds of the k-fold selection used below `minHoldout` (at most one per training point). Default 5. */
  folds?: number;
  /**
   * Training sets of at most this many points (and at least `minHoldout` held-out points) are trained
   * twice: a copy of the network trains with the held-out slice, which chooses the epoch count (the best
   * epoch), the blend and the re-ranker's weight; then the network trains on all of the points for that
   * many epochs at the constant rate, as after k-fold selection, and takes the copy's blend and weight. The
   * slice is then trained on too: at 5,000 to 13,000 points it is 250 to 650 points that a single run never
   * learns from (Bibtex, ten splits: P@1 0.6464 -> 0.6485 in the mean). It costs a second run (about twice
   * the training time) and a copy of the network (skipped when the copy would exceed 2 GiB, or with an
   * external executor). 0: never. Default 20,000.
   */
  refitMaxPoints?: number;
  /**
   * An output layer with a wide part (held-out slice only): weigh the network's logit w_j . h + b_j against
   * the wide part's. Every epoch is scored with the network's logit multiplied by each of EPOCH_BLEND_SCALES
   * (its best is the epoch's score), the kept epoch by each of BLEND_SCALES (in its own pass when it was an
   * epoch of the 'anneal' descent, as it mostly is), and the best of those stays in
   * the model (the output layer's weights and biases are multiplied by it). Trained jointly, the network's
   * share is fitted to the training points and, at 10^5-10^6 labels, adds noise to the wide part's ranking
   * on new points. false keeps the network as trained. Default true.
   */
  blend?: boolean;
  /**
   * How the learning rate moves:
   * - 'anneal': constant while the held-out score improves (a gain over the reference epoch of more than
   *   minGain); after `patience` epochs that do not, it falls linearly to 0 over the next `annealEpochs`
   *   epochs, and training stops there (the best epoch is kept). The plateau's halvings and its `patience` epochs of
   *   confirmation are replaced by one short descent, which brings what the cuts brought (the held-out score
   *   jumps when the rate falls) without the epochs spent waiting for a stall to repeat;
   * - 'plateau': constant until an epoch brings no new best, then multiplied by lrDecay; training stops after
   *   `patience` epochs without improvement.
   * k-fold selection (small training sets) applies the same rule to the folds' mean score, and the network then
   * trains on all of the points along the curve it chose.
   * Default 'anneal'.
   */
  schedule?: 'anneal' | 'plateau';
  /**
   * schedule 'anneal': epochs over which the rate falls to 0 once the held-out score stalls; at least
   * ANNEAL_MIN_BATCHES batches (a few hundred points make an epoch of a few batches). Default 1.
   */
  annealEpochs?: number;
}

export type ResolvedValidation = Required<ValidationOptions>;

export const VALIDATION_KEYS = ['fraction', 'maxPoints', 'patience', 'maxEpochs', 'lrDecay', 'minDelta', 'minGain', 'significance', 'metric', 'minHoldout', 'folds', 'refitMaxPoints', 'blend', 'schedule', 'annealEpochs'] as const satisfies readonly (keyof ValidationOptions)[];

export function resolveValidation(v: ValidationOptions): ResolvedValidation {
  if (v === null || typeof v !== 'object') throw new Error('Expected an object or false for validation');
  checkKnownKeys(v, VALIDATION_KEYS, 'validation', (m) => new Error(m));
  const fraction = v.fraction ?? 0.05;
  if (!(typeof fraction === 'number' && fraction > 0 && fraction < 1)) throw new Error(`Expected number in (0, 1) for validation.fraction but received ${boundJson(v.fraction)}`);
  const int = (x: unknown, what: string, min: number): number => {
    if (!(typeof x === 'number' && Number.isInteger(x) && x >= min)) throw new Error(`Expected integer >= ${min} for validation.${what} but received ${boundJson(x)}`);
    return x;
  };
  const maxPoints = int(v.maxPoints ?? 5000, 'maxPoints', 1);
  const schedule = v.schedule ?? 'anneal';
  if (schedule !== 'anneal' && schedule !== 'plateau') throw new Error(`Expected 'anneal' or 'plateau' for validation.schedule but received ${boundJson(v.schedule)}`);
  const patience = int(v.patience ?? (schedule === 'anneal' ? 1 : 3), 'patience', 1);
  const maxEpochs = int(v.maxEpochs ?? 50, 'maxEpochs', 1);
  const lrDecay = v.lrDecay ?? 0.5;
  if (!(typeof lrDecay === 'number' && lrDecay > 0 && lrDecay <= 1)) throw new Error(`Expected number in (0, 1] for validation.lrDecay but received ${boundJson(v.lrDecay)}`);
  const minDelta = v.minDelta ?? 0;
  if (!(typeof minDelta === 'number' && minDelta >= 0 && minDelta < 1)) throw new Error(`Expected number in [0, 1) for validation.minDelta but received ${boundJson(v.minDelta)}`);
  const minGain = v.minGain ?? 0.001;
  if (!(typeof minGain === 'number' && minGain >= 0 && minGain < 1)) throw new Error(`Expected number in [0, 1) for validation.minGain but received ${boundJson(v.minGain)}`);
  const significance = v.significance ?? 1;
  if (!(typeof significance === 'number' && significance >= 0 && significance <= 10)) throw new Error(`Expected number in [0, 10] for validation.significance but received ${boundJson(v.significance)}`);
  const metric = v.metric ?? 'p135';
  if (metric !== 'p1' && metric !== 'p135') throw new Error(`Expected 'p1' or 'p135' for validation.metric but received ${boundJson(v.metric)}`);
  const minHoldout = int(v.minHoldout ?? DEFAULT_MIN_HOLDOUT, 'minHoldout', 1);
  const folds = int(v.folds ?? 5, 'folds', 2);
  const refitMaxPoints = int(v.refitMaxPoints ?? DEFAULT_REFIT_MAX_POINTS, 'refitMaxPoints', 0);
  const blend = v.blend ?? true;
  if (typeof blend !== 'boolean') throw new Error(`Expected boolean for validation.blend but received ${boundJson(v.blend)}`);
  const annealEpochs = int(v.annealEpochs ?? 1, 'annealEpochs', 1);
  return { fraction, maxPoints, patience, maxEpochs, lrDecay, minDelta, minGain, significance, metric, minHoldout, folds, refitMaxPoints, blend, schedule, annealEpochs };
}

/**
 * Weights of the network's logit against the wide part tried by ValidationOptions.blend, largest first (a tie
 * keeps the larger). Powers of two: the weights are scaled in place and back exactly. Never 0: the
 * network's share still orders the labels the wide part scores alike, and sampled inference's cluster
 * index is built from the (scaled) output rows.
 */
export const BLEND_SCALES = [1, 0.5, 0.25, 0.125, 0.0625] as const;

/**
 * The scales whose best is an epoch's held-out score (every other one of BLEND_SCALES: the score moves slowly
 * with the scale, and each try re-weights every candidate of every held-out point); the kept epoch is then
 * scored at the others too (an epoch of the 'anneal' descent in its own pass).
 */
export const EPOCH_BLEND_SCALES = [1, 0.25, 0.0625] as const;

/** The held-out score of one weight of the network's logit (ValidationOptions.blend). */
export interface BlendTry {
  scale: number;
  p1: number;
  p3: number;
  p5: number;
  /** ValidationOptions.metric of this try. */
  score: number;
}

/** What ValidationOptions.blend chose: the weight now on the network's logit, at the kept epoch. */
export interface BlendReport {
  /** The weight now on the network's logit (1: as trained). */
  scale: number;
  /** Held-out points scored. */
  points: number;
  /** The kept epoch (1-based), whose held-out scores chose it. */
  epoch: number;
  /** That epoch's score at every scale of BLEND_SCALES, largest first. */
  tried: BlendTry[];
}

/** Default `ValidationOptions.minHoldout`. */
export const DEFAULT_MIN_HOLDOUT = 100;

/** Default `ValidationOptions.refitMaxPoints`. */
export const DEFAULT_REFIT_MAX_POINTS = 0;

/** Points the held-out slice of `points` training points holds (holdoutSplit's rule). */
export function holdoutSize(points: number, fraction: number, maxPoints: number): number {
  return Math.max(1, Math.min(maxPoints, Math.round(fraction * points), points - 1));
}

/**
 * How fit() decides the number of epochs for `points` training points: 'holdout' (one held-out slice,
 * early stopping, the best epoch's weights) when the slice holds at least `minHoldout` points, else
 * 'kfold' (min(folds, points / 2) folds: at least 2 points in every fold, and at least 2 folds).
 */
export function selectionMethod(points: number, v: ResolvedValidation): 'holdout' | 'kfold' {
  const held = holdoutSize(points, v.fraction, v.maxPoints);
  return held < v.minHoldout && Math.min(v.folds, Math.floor(points / 2)) >= 2 ? 'kfold' : 'holdout';
}

/**
 * Seeded k-fold partition of rows 0..points-1: a shuffle cut into `folds` nearly equal parts; fold f's
 * held-out rows and training rows (the other folds), each in increasing row order. Deterministic in
 * (points, folds, seed).
 */
export function kfoldSplit(points: number, folds: number, seed: number): { train: Uint32Array; holdout: Uint32Array }[] {
  const order = new Uint32Array(points);
  for (let i = 0; i < points; i++) order[i] = i;
  shuffleInPlace(order, new Xoshiro128(BigInt(seed) * 7919n + 0x4b0fn));
  const out: { train: Uint32Array; holdout: Uint32Array }[] = [];
  for (let f = 0; f < folds; f++) {
    const a = Math.floor((f * points) / folds), b = Math.floor(((f + 1) * points) / folds);
    const holdout = order.slice(a, b).sort();
    const train = new Uint32Array(points - (b - a));
    train.set(order.subarray(0, a));
    train.set(order.subarray(b), a);
    out.push({ train: train.sort(), holdout });
  }
  return out;
}

/** How fit() chose the number of epochs (`FitStats.selection`, `train --json`'s `selection`). */
export type SelectionReport =
  | {
      method: 'holdout';
      /** Points held out (never trained on, unless `refit`). */
      points: number;
      /** Epoch whose weights were kept (the best held-out score); with `refit`, the epochs then trained on all points. */
      epochs: number;
      reason: string;
      /**
       * Present when the held-out run was a copy's and the network then trained on all of the points for
       * `epochs` epochs (ValidationOptions.refitMaxPoints): the copy's held-out score (ValidationOptions.metric)
       * and P@1 after each epoch it trained.
       */
      refit?: { scores: number[]; p1: number[] };
      /** With `refit` and a re-ranker whose weight is left to the data: the weight the copy chose, and its scores. */
      rerank?: { weight: number; tried: RerankTry[] };
      /** With `refit` and a blend chosen by the copy (ValidationOptions.blend): the network's logits get its scale. */
      blend?: BlendReport;
      /**
       * With `refit` under schedule 'anneal': the copy's descent (it began after `from` epochs and lasted
       * `epochs`), which the network's run on all of the points follows too.
       */
      anneal?: { from: number; epochs: number };
      /** With `refit` (FitOptions.calibration): the calibration the copy fitted on its held-out slice; the network takes it. */
      calibration?: ProbabilityCalibration;
    }
  | {
      method: 'kfold';
      folds: number;
      /** The selected number of epochs: the network was then trained on all of the data for that many. */
      epochs: number;
      /** Mean held-out score (ValidationOptions.metric) over the folds after each epoch 1..horizon. */
      scores: number[];
      /** Mean held-out P@1 over the folds after each epoch. */
      p1: number[];
      /** The held-out slice that one split would have had (below minHoldout). */
      holdoutPoints: number;
      reason: string;
      /**
       * With a re-ranker whose weight is left to the data (RerankConfig): the weight chosen by the folds (each
       * fold's network at the selected epoch, its classifiers trained on its own training folds, scored on its
       * held-out fold: every point scored once), and the mean score at every weight tried.
       */
      rerank?: { weight: number; tried: RerankTry[] };
      /** Under schedule 'anneal': the folds' descent (after `from` epochs, over `epochs`), which the network follows too. */
      anneal?: { from: number; epochs: number };
      /** The learning rate the folds trained at, and the network after them (kfoldRate when the rate was the default). */
      lr?: number;
      /**
       * FitOptions.calibration: fitted on every point's prediction by the fold that held it out, at the
       * selected epoch (the network's scores, without the re-ranker).
       */
      calibration?: ProbabilityCalibration;
    };

/** Batches per fold epoch from which k-fold selection trains at the default rate (kfoldRate). */
export const KFOLD_RATE_STEPS = 4;
/** The most kfoldRate multiplies the default rate by. */
export const KFOLD_RATE_MAX = 2;

/**
 * The learning rate of a run whose epoch count k-fold selection chooses, from the default rate `lr`, for
 * folds that train on `foldPoints` points at `batchSize`: lr x KFOLD_RATE_STEPS / (the folds' batches per
 * epoch), between 1 and KFOLD_RATE_MAX times lr (twice at 2 batches an epoch, 4/3 at 3, the default rate from
 * 4 on: training sets up to about 640 points at batch 128). Adam moves each weight by about the rate per
 * step whatever the gradient's size, so a network trained on a few hundred points climbs its curve in steps,
 * not epochs: at 2 steps an epoch (240 points a fold) the folds' mean score was still rising at maxEpochs
 * (50) on every 300-point set measured, and the chosen epochs were 28 to 48; at twice the rate the folds
 * choose 17 to 41 at the same test P@k (seed means within 0.3 points). At 7 steps an epoch (1,000 points)
 * the curve peaks within the epochs already and twice the rate lost up to 1 point (docs/defaults.md, "Small
 * training sets"). The network trains on all of the points at the folds' rate, so that the chosen epoch
 * count means the same there.
 */
export function kfoldRate(lr: number, foldPoints: number, batchSize: number): number {
  const steps = Math.max(1, Math.ceil(foldPoints / batchSize));
  return lr * Math.min(KFOLD_RATE_MAX, Math.max(1, KFOLD_RATE_STEPS / steps));
}

/**
 * A run's default learning rate: defaultTraining's, raised where Adam takes few steps by two rules, each to at
 * most twice the base rate, the larger holding (they do not compound): by how often the first layer's rows
 * are updated when `data` is given (defaultTraining with the data), and by kfoldRate when k-fold selection
 * trains `folds` (>= 2) folds on `points` points. One process (fit) and the label-sharded ranks (train
 * --distributed, every rank holding the whole training set) take it alike.
 */
export function defaultRunLr(c: ResolvedNetworkConfig, data: RowUpdateData | undefined, points: number, batchSize: number, folds: number): number {
  const base = defaultTraining(c, 1).lr;
  const byRows = data ? defaultTraining(c, 1, data, batchSize).lr : base;
  const byFolds = folds >= 2 ? kfoldRate(base, points - Math.ceil(points / folds), batchSize) : base;
  return Math.max(byRows, byFolds);
}

/** Epochs after the folds' best mean that the flat-curve stop (foldsFlat) needs before it judges the curve. */
export const FOLDS_FLAT_EPOCHS = 6;

/** Least-squares slope of `ys` against 0, 1, 2, ... (0 for fewer than 2 values). */
export function slope(ys: readonly number[]): number {
  const n = ys.length;
  if (n < 2) return 0;
  const xm = (n - 1) / 2;
  const ym = ys.reduce((t, y) => t + y, 0) / n;
  let num = 0, den = 0;
  for (let i = 0; i < n; i++) {
    num += (i - xm) * (ys[i]! - ym);
    den += (i - xm) * (i - xm);
  }
  return num / den;
}

/**
 * Whether k-fold selection under schedule 'anneal' stops after epoch `means.length` (the folds' mean score
 * after every epoch so far): the least-squares slope of the last FOLDS_FLAT_EPOCHS means is not positive (the
 * curve is flat or falling now: one that fell after its best and climbs again goes on), and the epochs left
 * cannot change the choice as the schedule intends. Inside the descent (`annealFrom` epochs done when it
 * began): FOLDS_FLAT_EPOCHS epochs after the best mean (the earliest of equal ones), once the descent has run
 * half its `annealFor` epochs (the rate at half or less: the climbs a descent brings come while the rate
 * falls). Before it: no sooner than the stall rule's own wait after the best (max(FOLDS_FLAT_EPOCHS, half
 * the best epoch)), and only when a descent begun now would not end by `maxEpochs`: on folds of 2 batches
 * an epoch it lasts 32 epochs, so after a stall past epoch 18 the folds ran at a barely lowered rate to
 * maxEpochs (of 24 such cut descents in 48 runs on the benchmark's subsamples, 3 held the chosen epoch, on
 * curves still rising, which the slope leaves on). Stopping never
 * changes the epochs already trained, so the choice (the best mean so far), the re-ranker's snapshot and the
 * calibration's pairs are those of the longer run whenever its best came before the stop: docs/small-sets.md.
 */
export function foldsFlat(means: readonly number[], annealFrom: number | undefined, annealFor: number, maxEpochs: number): boolean {
  const e = means.length;
  const best = bestMeanEpoch([means as number[]]).epochs;
  const descending = annealFrom !== undefined && e > annealFrom;
  // Before the descent, no sooner than the stall rule's own wait (half the best epoch).
  const wait = descending ? FOLDS_FLAT_EPOCHS : Math.max(FOLDS_FLAT_EPOCHS, Math.ceil(best / 2));
  if (e - best < wait || slope(means.slice(e - FOLDS_FLAT_EPOCHS)) > 0) return false;
  return descending ? e - annealFrom! >= annealFor / 2 : e + annealFor > maxEpochs;
}

/**
 * The epoch count chosen from per-fold score curves (fold f's score after epoch e is curves[f][e - 1];
 * all of one length): the epoch of the best mean score, the earliest of equal ones.
 */
export function bestMeanEpoch(curves: number[][]): { epochs: number; mean: number[] } {
  const n = curves[0]?.length ?? 0;
  const mean: number[] = [];
  for (let e = 0; e < n; e++) mean.push(curves.reduce((s, c) => s + c[e]!, 0) / curves.length);
  let best = 0;
  for (let e = 1; e < n; e++) if (mean[e]! > mean[best]!) best = e;
  return { epochs: n ? best + 1 : 0, mean };
}

/**
 * Splits rows 0..points-1 into training rows and held-out rows: a seeded shuffle, the first
 * min(maxPoints, round(fraction * points)) rows (at least 1, and at least 1 row left to train on) held
 * out. Both lists are returned in increasing row order. Deterministic in (points, seed).
 */
export function holdoutSplit(points: number, fraction: number, maxPoints: number, seed: number): { train: Uint32Array; holdout: Uint32Array } {
  const order = new Uint32Array(points);
  for (let i = 0; i < points; i++) order[i] = i;
  shuffleInPlace(order, new Xoshiro128(BigInt(seed) * 7919n + 0x401dn));
  const h = holdoutSize(points, fraction, maxPoints);
  const holdout = order.slice(0, h).sort();
  const train = order.slice(h).sort();
  return { train, holdout };
}

/** One epoch's held-out measurement, as reported in `FitStats.validation`. */
export interface ValidationPoint {
  /** 1-based epoch. */
  epoch: number;
  p1: number;
  p3: number;
  p5: number;
  /** The compared score (see ValidationOptions.metric). */
  score: number;
  /** The learning rate the epoch trained with (its mean over the epoch, when it fell during it: schedule 'anneal'). */
  lr: number;
  /**
   * ValidationOptions.blend: the weight of the network's logit that scored best this epoch (the scores above
   * are at it). Absent without a wide part or with blend off.
   */
  scale?: number;
  /**
   * On a new best after the first epoch: its paired gain over the reference epoch `ref` and the gain's
   * standard error (it counted when gain > max(minGain, significance x se), the second bar once an earlier
   * gain had cleared both: hasRisen; ValidationOptions.minGain).
   */
  gain?: { ref: number; gain: number; se: number };
}

/** Early stopping of a run with held-out validation: its state (scores so far) and the best epoch's weights. */
export interface EarlyStop {
  state: EarlyStopState;
  snapshot: WeightSnapshot | null;
}

/** Early-stopping state carried across epochs (and stored in checkpoints). */
export interface EarlyStopState {
  bestScore: number;
  /** 1-based epoch of the best score (0: none yet). */
  bestEpoch: number;
  /** Epochs since the last one that counted as an improvement (ValidationOptions.minGain). */
  bad: number;
  /** The reference epoch of ValidationOptions.minGain (0: none yet), its score and its per-point scores. */
  refScore?: number;
  refEpoch?: number;
  refPoints?: number[];
  /** Current learning-rate multiplier. */
  lrScale: number;
  /** schedule 'anneal': epochs completed when the held-out score stalled and the rate began to fall (absent: not yet). */
  annealFrom?: number;
  /** schedule 'anneal': the epochs the descent lasts (descentEpochs), set with annealFrom. */
  annealFor?: number;
  history: ValidationPoint[];
}

/** A descent (schedule 'anneal') lasts at least this many batches, whatever the epochs. */
export const ANNEAL_MIN_BATCHES = 64;

/** The epochs of a descent: ValidationOptions.annealEpochs, and at least ANNEAL_MIN_BATCHES batches. */
export function descentEpochs(annealEpochs: number, batchesPerEpoch: number): number {
  return Math.max(annealEpochs, Math.ceil(ANNEAL_MIN_BATCHES / Math.max(1, batchesPerEpoch)));
}

/**
 * The learning-rate multiplier of batch `batch` (of `batchesPerEpoch`) in 0-based epoch `epoch` under schedule
 * 'anneal': 1 until the stall (`annealFrom` epochs done; undefined: not yet), then falling linearly to 0 over
 * `annealEpochs` epochs.
 */
export function annealMultiplier(annealFrom: number | undefined, annealEpochs: number, epoch: number, batch: number, batchesPerEpoch: number): number {
  if (annealFrom === undefined || epoch < annealFrom) return 1;
  return Math.max(0, 1 - (epoch - annealFrom + batch / batchesPerEpoch) / annealEpochs);
}

export function initialEarlyStop(): EarlyStopState {
  return { bestScore: -1, bestEpoch: 0, bad: 0, lrScale: 1, history: [] };
}

/** Copy of every layer's weights and biases (the best epoch's), restorable into the live network. */
export class WeightSnapshot {
  /** Per layer its weights; layer 0's only the rows `rows0` lists, one after another, when given. */
  readonly weights: Float32Array[];
  readonly bias: Float32Array[];
  /** The output layer's wide weights (null without a wide part). */
  readonly wide: Float32Array | null;
  /**
   * `rows0` (increasing feature ids): keep only these rows of layer 0 (input-major: a row per feature), for a
   * run whose training can change no other row (lazy Adam updates only the rows its batches hold, so these are
   * its training data's features): restore() then leaves the other rows as they are. Default: every row.
   */
  constructor(spec: NetSpec, private readonly rows0: Uint32Array | null = null) {
    if (rows0 && !spec.layers[0]!.inputMajor) throw new Error('WeightSnapshot: rows0 needs an input-major layer 0');
    this.weights = spec.layers.map((l, k) => new Float32Array(k === 0 && rows0 ? rows0.length * l.outDim : l.weights.length));
    this.bias = spec.layers.map((l) => new Float32Array(l.bias.length));
    const w = spec.layers.at(-1)!.wide;
    this.wide = w ? new Float32Array(w.weights.length) : null;
  }
  take(spec: NetSpec): void {
    spec.layers.forEach((l, k) => {
      if (k === 0 && this.rows0) this.copyRows(l.weights, this.weights[0]!, l.outDim, true);
      else this.weights[k]!.set(l.weights);
      this.bias[k]!.set(l.bias);
    });
    if (this.wide) this.wide.set(spec.layers.at(-1)!.wide!.weights);
  }
  restore(spec: NetSpec): void {
    spec.layers.forEach((l, k) => {
      if (k === 0 && this.rows0) this.copyRows(l.weights, this.weights[0]!, l.outDim, false);
      else l.weights.set(this.weights[k]!);
      l.bias.set(this.bias[k]!);
    });
    if (this.wide) spec.layers.at(-1)!.wide!.weights.set(this.wide);
  }
  /** Layer 0's rows rows0 between the network's weights and the packed copy (`take`: into the copy). */
  private copyRows(net: Float32Array, packed: Float32Array, width: number, take: boolean): void {
    const rows = this.rows0!;
    for (let i = 0; i < rows.length; i++) {
      const at = rows[i]! * width;
      if (take) packed.set(net.subarray(at, at + width), i * width);
      else net.set(packed.subarray(i * width, (i + 1) * width), at);
    }
  }
}

/** The mean of now[i] - ref[i] over the points and its standard error (sample sd / sqrt(n)). */
export function pairedGain(now: ArrayLike<number>, ref: ArrayLike<number>): { gain: number; se: number } {
  const n = now.length;
  if (n !== ref.length || n === 0) throw new Error(`Expected two equally long non-empty score lists but received ${n} and ${ref.length}`);
  let sum = 0;
  for (let i = 0; i < n; i++) sum += now[i]! - ref[i]!;
  const gain = sum / n;
  let ss = 0;
  for (let i = 0; i < n; i++) ss += (now[i]! - ref[i]! - gain) ** 2;
  return { gain, se: n > 1 ? Math.sqrt(ss / (n - 1) / n) : 0 };
}

/**
 * Records epoch `p.epoch`'s measurement (`points`: its per-point scores, whose mean is p.score; needed by
 * `significance` and for the reported gain) and decides: `best` (a new best: snapshot the weights) and `stop`
 * (`patience` epochs without a counted improvement). An epoch that is not a new best cuts the rate by
 * lrDecay unless it stops. Mutates `s` (and p.gain).
 */
/** Whether held-out validation has ended the run whose state is `s` (earlyStopStep said stop). */
export function validationEnded(s: EarlyStopState, o: Pick<ResolvedValidation, 'schedule' | 'patience' | 'annealEpochs'>): boolean {
  if (o.schedule === 'anneal') return s.annealFrom !== undefined && (s.history.at(-1)?.epoch ?? 0) >= s.annealFrom + (s.annealFor ?? o.annealEpochs);
  return s.bad >= o.patience;
}

/**
 * Records epoch `p` and says whether it is a new best and whether training stops (see ValidationOptions);
 * `points`: its per-point scores (minGain's paired gain); `descent`: the epochs a descent that starts now lasts
 * (schedule 'anneal': descentEpochs of the run's batches per epoch).
 */
export function earlyStopStep(s: EarlyStopState, o: ResolvedValidation, p: ValidationPoint, points?: ArrayLike<number>, descent = o.annealEpochs): { best: boolean; stop: boolean } {
  s.history.push(p);
  if (o.schedule === 'anneal' && s.annealFrom !== undefined) {
    // Descending: the epochs of the descent are scored (the best is kept) until it ends.
    if (p.score > s.bestScore + o.minDelta) {
      s.bestScore = p.score;
      s.bestEpoch = p.epoch;
    }
    return { best: s.bestEpoch === p.epoch, stop: p.epoch >= s.annealFrom + (s.annealFor ?? o.annealEpochs) };
  }
  const best = p.score > s.bestScore + o.minDelta; // bestScore starts at -1: the first epoch is always a best
  let counts = best;
  if (best) {
    s.bestScore = p.score;
    s.bestEpoch = p.epoch;
    if (s.refScore !== undefined) {
      let bar = o.minGain;
      if (points && s.refPoints && s.refPoints.length === points.length) {
        const g = pairedGain(points, s.refPoints);
        p.gain = { ref: s.refEpoch ?? 0, gain: g.gain, se: g.se };
        if (hasRisen(s.history, o, p.epoch)) bar = Math.max(bar, o.significance * g.se);
      }
      counts = p.score - s.refScore > bar;
    }
  }
  if (counts) {
    s.bad = 0;
    s.refEpoch = p.epoch;
    s.refScore = p.score;
    if (points) s.refPoints = Array.from(points);
    return { best, stop: false };
  }
  s.bad++;
  if (o.schedule === 'anneal') {
    if (s.bad >= o.patience) {
      s.annealFrom = p.epoch; // the stall: the rate falls from the next epoch on
      s.annealFor = descent;
    }
    return { best, stop: false };
  }
  if (s.bad >= o.patience) return { best, stop: true };
  if (!best && o.schedule === 'plateau') s.lrScale *= o.lrDecay;
  return { best, stop: false };
}

/**
 * Whether a gain before epoch `epoch` cleared both bars (minGain and `significance` standard errors): the
 * held-out curve has risen measurably. Until then ValidationOptions.significance does not apply: a run's
 * first epochs can rise by less than their own churn's error and then steeply (the 670k shape, one seed of
 * five: +0.0016 +- 0.0018 after epoch 2, where the same seed's other runs gained about +0.004 +- 0.0011 in
 * epoch 3), and a stall there starts the descent before training has begun (that run: test P@3 and P@5 0.6
 * points lower). From the history, which checkpoints keep.
 */
export function hasRisen(history: readonly ValidationPoint[], o: Pick<ResolvedValidation, 'minGain' | 'significance'>, epoch: number): boolean {
  return history.some((h) => h.epoch < epoch && h.gain !== undefined && h.gain.gain > Math.max(o.minGain, o.significance * h.gain.se));
}

/** The first problem of a stored SelectionReport (a checkpoint's meta), or null. */
export function selectionProblem(x: unknown): string | null {
  if (x === null || typeof x !== 'object') return 'not an object';
  const r = x as Record<string, unknown>;
  const int = (v: unknown, min: number) => typeof v === 'number' && Number.isSafeInteger(v) && v >= min;
  const nums = (v: unknown) => Array.isArray(v) && v.length <= 1e6 && v.every((n) => typeof n === 'number' && Number.isFinite(n));
  if (typeof r.reason !== 'string') return 'reason is not a string';
  if (r.calibration !== undefined) {
    const problem = calibrationProblem(r.calibration, Number.MAX_SAFE_INTEGER);
    if (problem) return `invalid calibration: ${problem}`;
  }
  if (r.rerank !== undefined) {
    const k = r.rerank as { weight?: unknown; tried?: unknown } | null;
    if (!k || typeof k !== 'object' || typeof k.weight !== 'number' || !(Number.isFinite(k.weight) && k.weight >= 0) || !Array.isArray(k.tried)) return 'invalid rerank';
  }
  if (r.method === 'holdout') {
    if (!int(r.points, 1) || !int(r.epochs, 0)) return 'invalid holdout points or epochs';
    if (r.refit !== undefined) {
      const f = r.refit as { scores?: unknown; p1?: unknown } | null;
      if (!f || typeof f !== 'object' || !nums(f.scores) || !nums(f.p1)) return 'refit scores and p1 must be arrays of finite numbers';
    }
    if (r.blend !== undefined) {
      const b = r.blend as { scale?: unknown; tried?: unknown } | null;
      if (!b || typeof b !== 'object' || typeof b.scale !== 'number' || !(Number.isFinite(b.scale) && b.scale > 0) || !Array.isArray(b.tried)) return 'invalid blend';
    }
    if (r.anneal !== undefined) {
      const a = r.anneal as { from?: unknown; epochs?: unknown } | null;
      if (!a || typeof a !== 'object' || !int(a.from, 0) || !int(a.epochs, 1)) return 'invalid anneal';
    }
    if ((r.rerank !== undefined || r.blend !== undefined || r.anneal !== undefined || r.calibration !== undefined) && r.refit === undefined) {
      return 'rerank, blend, anneal and calibration are recorded only with refit';
    }
    return null;
  }
  if (r.method !== 'kfold') return `unknown method ${boundJson(r.method)}`;
  if (!int(r.folds, 2) || !int(r.epochs, 0) || !int(r.holdoutPoints, 0)) return 'invalid folds, epochs or holdoutPoints';
  if (!nums(r.scores) || !nums(r.p1)) return 'scores and p1 must be arrays of finite numbers';
  if (r.anneal !== undefined) {
    const a = r.anneal as { from?: unknown; epochs?: unknown } | null;
    if (!a || typeof a !== 'object' || !int(a.from, 0) || !int(a.epochs, 1)) return 'invalid anneal';
  }
  if (r.lr !== undefined && !(typeof r.lr === 'number' && Number.isFinite(r.lr) && r.lr > 0)) return 'lr must be a positive number';
  return null;
}
