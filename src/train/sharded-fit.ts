// fit() of a label-sharded network (src/train/sharded.ts): the procedure of src/train/fit-network.ts, run by the
// ranks together, so that R ranks make the decisions one process makes.
//
// Every rank runs this with the same data, options and seed, and every decision is taken from values that are
// alike on every rank: the batches (epochOrder, batchSeed), the held-out split (holdoutSplit), the held-out
// scores (sampled or exact prediction merged from the ranks: src/train/sharded-index.ts), early stopping
// (earlyStopStep), the blend, the re-ranker's weight. A signal on any rank, and rank 0's clock for periodic
// checkpoints, reach every rank through the next step's exchange (ShardFlags), so that all ranks stop or write a
// checkpoint after the same step.
//
// What one process's fit() does and this does alike: input scaling (the caller applies it), held-out
// validation with the 'anneal' or 'plateau' schedule and its best-epoch weights (each rank keeps a copy of its
// slices), the wide part's pairs chosen from the rows trained on, the blend of the network's logits against the
// wide part, the re-ranker (each rank trains its labels' classifiers on the shortlists predicted by all), a
// fixed number of epochs without validation, the calibrated probabilities (fitted on the held-out slice with
// every rank's predictions), and the training on all of the points after a selection phase (k-fold selection on
// small training sets, the refit of a held-out copy: src/train/sharded-select.ts runs it, `selection` here
// follows it). Not here: HOGWILD workers (a rank is one thread).
import { subset } from '../datasets/split-reader.js';
import type { SparseDataset } from '../datasets/csr.js';
import { defaultTraining, resolveConfig, type ResolvedNetworkConfig, type ResolvedRerank } from '../network/config.js';
import { computeMetrics, pointPrecisions } from '../network/metrics.js';
import { defaultCandidates } from '../network/network.js';
import { rerankBytes, rerankCombine, rerankScores, rerankTries, rerankWeightSums, trainRerank, type RerankReport, type RerankState, type RerankTry } from '../network/rerank.js';
import { buildWide, wideProblem } from '../network/wide.js';
import { calibrationPairs, DEFAULT_CALIBRATION_SHORTLIST, fitCalibration, type CalibrationOptions, type ProbabilityCalibration } from '../network/calibration.js';
import { Xoshiro128, shuffleInPlace } from '../util/rng.js';
import { PhaseTimer } from '../util/phases.js';
import {
  annealMultiplier, BLEND_SCALES, descentEpochs, earlyStopStep, EPOCH_BLEND_SCALES, holdoutSplit, initialEarlyStop, resolveValidation, selectionMethod,
  validationEnded, WeightSnapshot, type BlendTry, type EarlyStopState, type ResolvedValidation, type SelectionReport, type ValidationOptions,
  type ValidationPoint,
} from './early-stop.js';
import { batchSeed, DivergedError, DIVERGED_LOSS, epochOrder, type FitProgress, type FitStats } from './fit.js';
import { buildShardIndex, predictSharded, type ShardIndex, type ShardPredictions } from './sharded-index.js';
import { ShardFlags, wideByLabel, type ShardedModel } from './sharded.js';

/** Where a sharded run stands (a checkpoint's position): epochs finished, batches of the next epoch, batches in all. */
export interface ShardPosition {
  epoch: number;
  batch: number;
  batchesDone: number;
}

/** What a checkpoint of a sharded run holds besides the weights (ShardedFitOptions.checkpoint). */
export interface ShardRunState {
  /** Held-out early stopping so far (null without validation). */
  earlyStop: EarlyStopState | null;
  /** This rank's copy of its slices at the best epoch so far (null: none yet, or no validation). */
  snapshot: WeightSnapshot | null;
  /** The validation of the run (null: a fixed number of epochs), and the number of epochs it may run. */
  validation: ResolvedValidation | null;
  epochs: number;
  /** The selection phase the run follows (k-fold or a refit's copy: its epochs, schedule, blend, re-ranker weight, calibration), or null. */
  selection: SelectionReport | null;
}

/** Options of fitSharded: FitOptions's that a sharded run takes, plus its checkpoints and resume. */
export interface ShardedFitOptions {
  /** As FitOptions.epochs: default decided by held-out validation; given, exactly that many passes (no validation). */
  epochs?: number;
  /** As FitOptions.validation (its selection phase, k-fold or refit, run before: `selection`). */
  validation?: ValidationOptions | false;
  /**
   * The selection phase's report (src/train/sharded-select.ts): the network trains on all of the points for its
   * epochs (along its descent under 'anneal'), takes its blend, trains the re-ranker at its weight and takes its
   * calibration, as one process after its selection. Default none.
   */
  selection?: SelectionReport;
  /** Why a held-out slice chooses although the set is small (the selection phase could not run), for the report. */
  holdoutWhy?: string;
  /** As FitOptions.calibration: the calibrated probabilities, fitted on the held-out points. Default {} (on). */
  calibration?: CalibrationOptions | false;
  /** Default 128. */
  batchSize?: number;
  /** Default: defaultTraining's (1e-2 sampled, 2e-3 dense). */
  lr?: number;
  beta1?: number;
  beta2?: number;
  eps?: number;
  /** Threads of the re-ranker's classifier training. Default 1. */
  threads?: number;
  /** Stops after the step in progress on every rank (the reason, e.g. 'SIGINT', is the report's). Default none. */
  signal?: AbortSignal;
  /**
   * Checkpoints: `due` says, from the batches done and whether rank 0's clock says one is due, whether to write
   * one now (its answer must be alike on every rank); `save` writes one (a collective). A final one is written
   * when training ends or stops. Default none.
   */
  checkpoint?: {
    /** Milliseconds between time-based checkpoints (rank 0's clock), or undefined. */
    everyMs?: number;
    due(batchesDone: number, clockDue: boolean): boolean;
    save(position: ShardPosition, reason: 'periodic' | 'end' | 'abort', state: ShardRunState): Promise<void>;
  };
  /** A resumed run: where it stands, and its early stopping (its weights are already in the model). */
  resume?: {
    position: ShardPosition; earlyStop: EarlyStopState | null; snapshot: WeightSnapshot | null; validation: ResolvedValidation | null; epochs: number;
    selection?: SelectionReport | null;
  };
  /** Rank 0's progress (about every `progressEvery` seconds) and epoch ends. */
  onProgress?: (p: FitProgress) => void;
  progressEvery?: number;
  onEpochEnd?: (epoch: number, stats: FitStats) => void | Promise<void>;
  /** Where the phases' seconds go. */
  phases?: PhaseTimer;
}

/** What fitSharded leaves besides the statistics: the held-out slice and its index, for the caller's evaluation. */
export interface ShardedFit {
  stats: FitStats;
  /** The trained re-ranker's part of this rank (labels it does not own have no classifier), or null. */
  rerank: RerankState | null;
  /** The calibrated probabilities (alike on every rank), or null. */
  calibration: ProbabilityCalibration | null;
  /**
   * The cluster index of the final weights (default rounds), built for the re-ranker's shortlists, or null: the
   * test set's sampled prediction takes it instead of building the same index again.
   */
  index: ShardIndex | null;
}

/**
 * Trains a label-sharded network as fit() trains one network (a collective: every rank calls it with the same
 * data and options). `data` is the training data as every rank holds it (input-scaled already).
 */
export async function fitSharded(model: ShardedModel, data: SparseDataset, o: ShardedFitOptions = {}): Promise<ShardedFit> {
  const phases = o.phases ?? new PhaseTimer();
  const g = resolveConfig(model.global);
  const seed = g.seed;
  const out = model.net.spec.layers.at(-1)!;
  const r = o.resume;
  // Validation: on when the number of epochs is left to the data (a resumed run goes on as it started).
  const valOpt = o.validation === undefined ? (o.epochs === undefined ? {} : false) : o.validation;
  // After a selection phase: all of the points for its epochs, no held-out slice.
  const sel = r ? r.selection ?? null : o.selection ?? null;
  const validation = r ? r.validation : sel || valOpt === false ? null : resolveValidation(valOpt);
  const epochs = r ? r.epochs : sel ? sel.epochs : o.epochs ?? (validation ? validation.maxEpochs : 5);
  const batchSize = o.batchSize ?? 128;
  const lr = o.lr ?? defaultTraining(g, 1).lr;
  const adam = { beta1: o.beta1 ?? 0.9, beta2: o.beta2 ?? 0.999, eps: o.eps ?? 1e-8 };
  if (validation && !r && selectionMethod(data.points, validation) === 'kfold' && o.holdoutWhy === undefined) {
    throw new Error(`${data.points} training points: the epochs are chosen by k-fold cross-validation (fewer than minHoldout ${validation.minHoldout} held-out points): ` +
      'run the selection phase first (selectSharded) and pass its report as `selection`');
  }
  // The held-out slice and the rows trained on (all of them without validation).
  const split = validation ? holdoutSplit(data.points, validation.fraction, validation.maxPoints, seed) : null;
  const rows = split ? split.train : null;
  const holdout = split ? subset(data, split.holdout) : null;
  const nTrain = rows ? rows.length : data.points;
  const batchesPerEpoch = Math.ceil(nTrain / batchSize);
  // The wide part's pairs come from the rows trained on (not the held-out ones), as one process chooses them.
  const wideCfg = g.layers.at(-1)!.wide;
  if (wideCfg && out.wide && out.wide.labels.length === 0 && !r) {
    const end = phases.start('wide');
    out.wide = buildWide(data, rows, g.inputDim, g.layers.at(-1)!.size, wideCfg.maxPerLabel, wideCfg.init, wideCfg.minShare, model.labels);
    const bad = wideProblem(out.wide, out.outDim);
    if (bad) throw new Error(`the slice's wide part is malformed: ${bad}`);
    out.wide.byLabel = wideByLabel(out.wide, model.labels.length);
    end();
  }
  model.prepareLogQ(data.points, batchSize);
  // Early stopping (held-out validation): state, this rank's best-epoch slices, the learning-rate schedule.
  const state: EarlyStopState | null = validation ? (r?.earlyStop ?? initialEarlyStop()) : null;
  let snapshot: WeightSnapshot | null = r?.snapshot ?? null;
  const descent = validation ? descentEpochs(validation.annealEpochs, batchesPerEpoch) : 0;
  // The rate's descent: decided by the held-out slice as it goes, or the selection's (run on all of the points).
  const lrAt = (e: number, b: number) =>
    validation?.schedule === 'anneal' && state ? annealMultiplier(state.annealFrom, state.annealFor ?? validation.annealEpochs, e, b, batchesPerEpoch)
    : sel?.anneal ? annealMultiplier(sel.anneal.from, sel.anneal.epochs, e, b, batchesPerEpoch) : 1;
  let stopRun = !!(validation && state && validationEnded(state, validation));
  const wideLr = model.wideLr;

  // The loop (src/train/fit.ts fitLoop's, one batch at a time): every rank runs the same steps.
  const start = r?.position ?? { epoch: 0, batch: 0, batchesDone: 0 };
  let batchesDone = start.batchesDone;
  let samples = 0, batches = 0, lastLoss = NaN, epochsDone = start.epoch;
  let aborted: string | null = null;
  const history: FitStats['history'] = [];
  const t0 = performance.now();
  let callbackSeconds = 0;
  let lastReport = t0, repLoss = 0, repSamples = 0;
  let lastClock = t0;
  let lastYield = t0;
  const progressEvery = o.progressEvery ?? 0.5;
  const signalFlag = () => (o.signal?.aborted ? ShardFlags.stop | (o.signal.reason === 'SIGINT' ? ShardFlags.interrupt : 0) : 0);
  const posOf = (epoch: number, batch: number): ShardPosition =>
    batch >= batchesPerEpoch ? { epoch: epoch + 1, batch: 0, batchesDone } : { epoch, batch, batchesDone };
  const runState = (): ShardRunState => ({ earlyStop: state, snapshot, validation, epochs, selection: sel });
  const stats = (): FitStats => {
    const trainSeconds = (performance.now() - t0) / 1000 - callbackSeconds;
    return {
      epochs: epochsDone, history, batches, samples, trainSeconds, rebuildSeconds: 0, indexSeconds: 0, rebuilds: 0,
      samplesPerSec: samples / Math.max(trainSeconds, 1e-9), lastLoss, aborted: aborted !== null, lostBatches: 0,
    };
  };
  const report = (epoch: number, batch: number) => {
    const now = performance.now();
    const s = stats();
    o.onProgress?.({
      epoch, epochs, epochsIsLimit: !!validation, batch, batchesPerEpoch, samples: s.samples,
      loss: repSamples ? repLoss / repSamples : NaN, samplesPerSec: s.samplesPerSec,
      etaSeconds: ((epochs * batchesPerEpoch - (epoch * batchesPerEpoch + batch)) * batchSize) / Math.max(s.samplesPerSec, 1e-9),
      epochEtaSeconds: (Math.max(0, batchesPerEpoch - batch) * batchSize) / Math.max(s.samplesPerSec, 1e-9),
      avgActive: 0, labelMissRate: 0,
    });
    lastReport = now;
    repLoss = repSamples = 0;
  };
  let posEpoch = start.epoch, posBatch = start.batch;
  for (let epoch = start.epoch; epoch < epochs && !aborted && !stopRun; epoch++) {
    const order = epochOrder(nTrain, seed, epoch, true);
    if (rows) for (let i = 0; i < nTrain; i++) order[i] = rows[order[i]!]!;
    let epochLoss = 0, epochSamples = 0;
    let b = epoch === start.epoch ? start.batch : 0;
    const epochBase = batchesDone - b;
    for (; b < batchesPerEpoch; b++) {
      const pointIds = order.subarray(b * batchSize, Math.min((b + 1) * batchSize, nTrain));
      const scale = lrAt(epoch, b);
      // The step runs synchronously: yield to the event loop now and then (every YIELD_MS), or a signal's
      // handler (the CLI's SIGINT/SIGTERM) would not run until training ends.
      if (performance.now() - lastYield >= YIELD_MS) {
        await new Promise<void>((done) => setImmediate(done));
        lastYield = performance.now();
      }
      // Flags for this step: a signal here, rank 0's clock for a periodic checkpoint.
      const clockDue = model.comm.rank === 0 && o.checkpoint?.everyMs !== undefined && performance.now() - lastClock >= o.checkpoint.everyMs;
      model.localFlags = signalFlag() | (clockDue ? ShardFlags.checkpoint : 0);
      const res = model.step(data, {
        pointIds, seed: batchSeed(seed, epochBase + b), lr: lr * (state?.lrScale ?? 1) * scale, ...adam,
        gradScale: 1 / pointIds.length, ...(wideLr !== undefined ? { wideLr: wideLr * (state?.lrScale ?? 1) * scale } : {}),
      });
      batchesDone = epochBase + b + 1;
      const meanLoss = res.lossSum / Math.max(1, res.samples);
      if (!(meanLoss <= DIVERGED_LOSS)) throw new DivergedError(b, epoch, meanLoss, lr * scale);
      samples += res.samples;
      batches++;
      epochLoss += res.lossSum;
      epochSamples += res.samples;
      repLoss += res.lossSum;
      repSamples += res.samples;
      const flags = model.agreedFlags;
      if (flags & ShardFlags.stop) {
        aborted = o.signal?.aborted && typeof o.signal.reason === 'string' ? o.signal.reason : flags & ShardFlags.interrupt ? 'SIGINT' : 'SIGTERM';
        b++;
        break;
      }
      if (o.checkpoint && b + 1 < batchesPerEpoch && o.checkpoint.due(batchesDone, (flags & ShardFlags.checkpoint) !== 0)) {
        const c0 = performance.now();
        await o.checkpoint.save(posOf(epoch, b + 1), 'periodic', runState());
        lastClock = performance.now();
        callbackSeconds += (lastClock - c0) / 1000;
      }
      if ((performance.now() - lastReport) / 1000 >= progressEvery && model.comm.rank === 0) report(epoch, b + 1);
    }
    posEpoch = epoch;
    posBatch = b;
    if (epochSamples > 0) lastLoss = epochLoss / epochSamples;
    if (aborted) break;
    epochsDone = epoch + 1;
    history.push({ epoch: epoch + 1, trainSeconds: (performance.now() - t0) / 1000 - callbackSeconds, loss: lastLoss, activePerSample: model.report().activePerStep / Math.max(1, batchSize) });
    if (model.comm.rank === 0) report(epoch, b);
    const c0 = performance.now();
    // The replicated parts compared across the ranks once an epoch (repaired from rank 0 if they differ).
    model.verify();
    if (validation && state && holdout) {
      // The held-out score of this epoch (at each of EPOCH_BLEND_SCALES with a wide part), early stopping's step.
      const epochLr = lr * state.lrScale * lrAt(epoch, 0.5 * batchesPerEpoch);
      const blending = validation.blend && !!out.wide;
      const tried = await phases.time('heldout', async () => scoreHoldout(model, holdout, validation, blending ? EPOCH_BLEND_SCALES : null, seed));
      const best = tried.reduce((a, t) => (t.score > a.score ? t : a));
      const point: ValidationPoint = { epoch: epoch + 1, p1: best.p1, p3: best.p3, p5: best.p5, score: best.score, lr: epochLr, ...(blending ? { scale: best.scale! } : {}) };
      const step = earlyStopStep(state, validation, point, best.points, descent);
      if (step.best) (snapshot ??= new WeightSnapshot(model.net.spec)).take(model.net.spec);
      if (step.stop) stopRun = true;
    }
    if (o.onEpochEnd) {
      const s = stats();
      await o.onEpochEnd(epoch, validation && state ? { ...s, validation: state.history, bestEpoch: state.bestEpoch, validationPoints: holdout!.points } : s);
    }
    callbackSeconds += (performance.now() - c0) / 1000;
  }
  // The final checkpoint (completed or stopped), before the best weights are restored: resuming it with
  // more epochs continues exactly like a longer run.
  if (o.checkpoint) {
    const c0 = performance.now();
    // A stop at the end of an epoch keeps its position there (not the next epoch's start): a resumed run then
    // scores that epoch's held-out slice first, as the uninterrupted run did.
    const at = aborted && posBatch >= batchesPerEpoch ? { epoch: posEpoch, batch: posBatch, batchesDone } : posOf(posEpoch, posBatch);
    await o.checkpoint.save(at, aborted ? 'abort' : 'end', runState());
    callbackSeconds += (performance.now() - c0) / 1000;
  }
  const st = stats();
  phases.add('train', st.trainSeconds);
  let rerank: RerankState | null = null;
  let index: ShardIndex | null = null;
  if (validation && state && holdout) {
    const last = state.history.at(-1);
    // Keep the best epoch's weights.
    if (snapshot && last && state.bestEpoch !== last.epoch) snapshot.restore(model.net.spec);
    st.validation = state.history;
    st.bestEpoch = state.bestEpoch;
    if (validation.schedule === 'anneal' && state.annealFrom !== undefined) st.anneal = { from: state.annealFrom, epochs: state.annealFor ?? validation.annealEpochs };
    st.validationPoints = holdout.points;
    st.selection = {
      method: 'holdout', points: holdout.points, epochs: state.bestEpoch,
      reason: `${holdout.points} held-out points (${o.holdoutWhy ?? `at least minHoldout ${validation.minHoldout}`}): the best epoch's weights are kept (not trained again on all points: ` +
        `${validation.refitMaxPoints === 0 ? 'refitMaxPoints is 0' : data.points > validation.refitMaxPoints ? `more than refitMaxPoints ${validation.refitMaxPoints} training points` : r ? 'resumed part-way through its held-out run' : o.holdoutWhy ?? 'no selection phase'})`,
    };
    // The network's weight against the wide part at the kept epoch: the other scales scored on the restored
    // weights (the epoch's own scales were scored on the same weights).
    const kept = state.history[state.bestEpoch - 1];
    if (kept?.scale !== undefined && !aborted) {
      const tried = await phases.time('blend', async () => scoreHoldout(model, holdout, validation, BLEND_SCALES, seed));
      const all = tried.map(({ points: _, ...t }) => t as BlendTry).sort((a, b) => b.scale - a.scale);
      const best = all.reduce((a, t) => (t.score > a.score ? t : a)); // ties: the larger scale
      scaleOutputLogits(model, best.scale);
      st.blend = { scale: best.scale, points: holdout.points, epoch: state.bestEpoch, tried: all };
    }
  }
  // After a selection phase (a refit's copy): its blend, on the weights trained on all of the points.
  if (sel) {
    if (sel.method === 'holdout' && sel.blend && !aborted) {
      scaleOutputLogits(model, sel.blend.scale);
      st.blend = sel.blend;
    }
    st.selection = sel;
  }
  // The re-ranker, on the kept weights' shortlists of the rows trained on (after a selection phase: all of
  // them, at the weight the selection chose).
  const rr = g.layers.at(-1)!.rerank;
  if (rr && !aborted) {
    const chosen = sel?.rerank;
    if (chosen && chosen.weight === 0) {
      st.rerank = { weight: 0, points: chosenOn(sel!, data.points), tried: chosen.tried, entries: 0, bytes: 0, seconds: 0 };
    } else {
      const t = await trainRerankerSharded(model, data, rows, validation && state ? holdout : null, validation, chosen ? { ...rr, weight: chosen.weight } : rr, seed, o.threads ?? 1, phases);
      if (chosen) t.report = { ...t.report, tried: chosen.tried, points: chosenOn(sel!, data.points) };
      st.rerank = t.report;
      rerank = t.state;
      index = t.index;
    }
  }
  // The calibrated probabilities, of the final scores (blend and re-ranker included), on points the kept
  // weights never trained on: the held-out slice (every rank's predictions merged, the same fit on every
  // rank), else the selection's.
  let calibration: ProbabilityCalibration | null = null;
  if (o.calibration !== false && !aborted) {
    const copt = o.calibration || {};
    if (validation && state && holdout) {
      calibration = await phases.time('calibration', async () => {
        const K = Math.min(copt.shortlist ?? DEFAULT_CALIBRATION_SHORTLIST, g.layers.at(-1)!.size);
        if (!Number.isInteger(K) || K < 1 || K > 4096) throw new Error(`Expected integer from 1 to 4096 for calibration.shortlist but received ${JSON.stringify(copt.shortlist)}`);
        const rrUse = st.rerank && st.rerank.weight > 0 ? { state: rerank, weight: st.rerank.weight, shortlist: rr!.shortlist } : null;
        const pred = shardPredictFinal(model, holdout, K, seed, rrUse, o.threads ?? 1, undefined, index ?? undefined);
        return fitCalibration(calibrationPairs(pred.labels[0]!, pred.scores[0]!, K, holdout), K, copt);
      });
    } else if (sel?.calibration) {
      calibration = sel.calibration;
    }
    st.calibration = calibration
      ? { threshold: calibration.threshold, shortlist: calibration.shortlist, ...calibration.report }
      : { skipped: sel ? 'the selection that chose the epochs recorded none (a run resumed from a checkpoint written before calibration)' : 'no held-out points (validation is off)' };
  }
  st.phases = phases.snapshot();
  if (aborted) st.aborted = true;
  return { stats: aborted ? { ...st, aborted: true } : st, rerank, calibration, index };
}

/** The points a selection chose the re-ranker's weight on: every point (k-fold), or the copy's held-out slice. */
function chosenOn(sel: SelectionReport, points: number): number {
  return sel.method === 'kfold' ? points : sel.points;
}

/** Milliseconds of steps between yields to the event loop (where signal handlers run). */
const YIELD_MS = 20;

/** Multiplies this rank's output rows (weights and biases: the network's logits) by f. */
function scaleOutputLogits(model: ShardedModel, f: number): void {
  if (f === 1) return;
  const out = model.net.spec.layers.at(-1)!;
  for (const a of [out.weights, out.bias]) for (let e = 0; e < a.length; e++) a[e] = a[e]! * f;
}

/** Whether a network's held-out slice (and test set, mode 'auto') is scored sampled: a sampled output layer with a wide part. */
export function scoresSampled(g: ResolvedNetworkConfig): boolean {
  const last = g.layers.at(-1)!;
  return !!last.sampling && !!last.wide;
}

/** k-means rounds of the index that scores the held-out slice (fit-network.ts HOLDOUT_INDEX_ITERS). */
const HOLDOUT_INDEX_ITERS = 2;

/**
 * The held-out scores of the weights as they are now, as one process's scoreHoldout computes them: sampled
 * (a fresh index of HOLDOUT_INDEX_ITERS rounds) for a sampled output layer with a wide part, else exact;
 * one result per scale (null: the weights as they are).
 */
async function scoreHoldout(
  model: ShardedModel, holdout: SparseDataset, validation: ResolvedValidation, scales: readonly number[] | null, seed: number,
): Promise<{ p1: number; p3: number; p5: number; score: number; points: Float64Array; scale?: number }[]> {
  const preds = shardPredict(model, holdout, 5, scales, seed, HOLDOUT_INDEX_ITERS);
  return preds.labels.map((labels, si) => {
    const m = computeMetrics({ topIdx: labels, kMax: 5, labelOffsets: holdout.labelOffsets, labelIndices: holdout.labelIndices });
    const p1 = m.p1!, p3 = m.p3!, p5 = m.p5!;
    const points = pointPrecisions(labels, 5, holdout.labelOffsets, holdout.labelIndices, validation.metric === 'p1' ? [1] : [1, 3, 5]);
    return { p1, p3, p5, score: validation.metric === 'p1' ? p1 : (p1 + p3 + p5) / 3, points, ...(scales ? { scale: scales[si]! } : {}) };
  });
}

/**
 * One process's predictScaled of `data` on the sharded network, in `mode` (default: sampled when the output layer
 * is sampled with a wide part, else exact: inference mode 'auto'): sampled with `index` or a fresh one of `iters`
 * rounds (default 8), exact in one pass per scale. A collective.
 */
export function shardPredict(
  model: ShardedModel, data: SparseDataset, k: number, scales: readonly number[] | null, seed: number, iters?: number, index?: ShardIndex,
  mode?: 'exact' | 'sampled',
): ShardPredictions & { index: ShardIndex | null } {
  const g = resolveConfig(model.global);
  const N = g.layers.at(-1)!.size;
  if ((mode ?? (scoresSampled(g) ? 'sampled' : 'exact')) === 'sampled' && g.layers.at(-1)!.sampling) {
    const ix = index ?? buildShardIndex(model, seed, iters !== undefined ? { iters } : {});
    return { ...predictSharded(model, ix, data, k, scales, defaultCandidates(N)), index: ix };
  }
  const runs = (scales ?? [1]).map((x) => model.predictTopK(data, k, 1024, x));
  return { labels: runs.map((p) => p.labels), scores: runs.map((p) => p.scores), outputsScoredPerPoint: N, index: null };
}

/**
 * The re-ranker's scores of candidates (rows x S global ids) on the sharded network (a collective): each rank
 * scores the candidates whose labels it owns with its classifiers, the others 0 there, and the ranks add up.
 * 0xFFFFFFFF candidates score -inf.
 */
export function shardRerankScores(model: ShardedModel, rr: RerankState, data: SparseDataset, candidates: Uint32Array, S: number, threads: number): Float32Array {
  const g = resolveConfig(model.global);
  const s = rerankScores(rr, data, null, candidates, S, g.inputDim, threads);
  for (let e = 0; e < s.length; e++) {
    const j = candidates[e]!;
    if (j === 0xffffffff) s[e] = model.comm.rank === 0 ? -Infinity : 0;
    else if (model.localOf[j]! < 0) s[e] = 0;
  }
  if (model.comm.size > 1) model.comm.allreduceSum(s);
  return s;
}

/**
 * The re-ranker trained on the sharded network as fit-network.ts's trainReranker trains it: the shortlists of
 * (a seeded sample of) the rows trained on, predicted by all ranks; each rank trains the classifiers of its own
 * labels (the same per-label problems, seeds and solver as one process); the weight chosen on the held-out
 * points with every rank's scores. Returns this rank's part (null when the weight is 0) and the report (alike
 * on every rank).
 */
async function trainRerankerSharded(
  model: ShardedModel, data: SparseDataset, rows: Uint32Array | null, holdout: SparseDataset | null, validation: ResolvedValidation | null,
  cfg: ResolvedRerank, seed: number, threads: number, phases: PhaseTimer,
): Promise<{ state: RerankState | null; report: RerankReport; index: ShardIndex | null }> {
  const t0 = performance.now();
  if (!holdout && cfg.weight === undefined) {
    return { state: null, report: { weight: 0, points: 0, tried: [], entries: 0, bytes: 0, seconds: 0, skipped: 'no held-out points to choose its weight (rerank.weight trains it without them)' }, index: null };
  }
  const g = resolveConfig(model.global);
  const outDim = g.layers.at(-1)!.size;
  const S = Math.min(cfg.shortlist, outDim);
  const mode = g.layers.at(-1)!.sampling ? 'sampled' : 'exact';
  const trainRows = rows ?? Uint32Array.from({ length: data.points }, (_, i) => i);
  let predRows = trainRows;
  if (trainRows.length > cfg.shortlistRows) {
    predRows = shuffleInPlace(trainRows.slice(), new Xoshiro128(BigInt(seed) * 7919n + 0x5e1en)).slice(0, cfg.shortlistRows).sort();
  }
  // The index of the weights as they now are (scaled by the blend): one process rebuilds it (8 rounds) here.
  let index: ShardIndex | null = null;
  const top = await phases.time('rerank.shortlists', async () => {
    // (Sampled for a sampled output layer, with or without a wide part: one process's mode here.)
    const p = shardPredict(model, predRows.length === data.points ? data : subset(data, predRows), S, null, seed, undefined, undefined, mode);
    index = p.index;
    return p;
  });
  const shortlist = new Uint32Array(trainRows.length * S).fill(0xffffffff);
  for (let t = 0, q = 0; q < predRows.length; t++) {
    if (trainRows[t] !== predRows[q]) continue;
    shortlist.set(top.labels[0]!.subarray(q * S, q * S + S), t * S);
    q++;
  }
  const endClassifiers = phases.start('rerank.classifiers');
  const state = trainRerank(data, trainRows, shortlist, S, { labels: outDim, features: g.inputDim }, cfg, threads, seed, model.labels);
  endClassifiers();
  const endWeight = phases.start('rerank.weight');
  const tried: RerankTry[] = [];
  if (holdout && cfg.weight === undefined) {
    const held = shardPredict(model, holdout, S, null, seed, undefined, index ?? undefined, mode);
    const s = shardRerankScores(model, state, holdout, held.labels[0]!, S, threads);
    const ks = validation?.metric === 'p1' ? [1] : [1, 3, 5];
    tried.push(...rerankTries(rerankWeightSums(holdout, held.labels[0]!, held.scores[0]!, s, S, ks), holdout.points));
    state.weight = tried.reduce((a, t) => (t.score > a.score ? t : a)).weight; // ties: the smaller weight
  }
  endWeight();
  const kept = state.weight > 0;
  // Every rank's classifier weights and bytes, added up (the report is one process's).
  const size = new Float64Array([kept ? ownEntries(state, model.labels) : 0, kept ? rerankBytes(state) : 0]);
  if (model.comm.size > 1) model.comm.allreduceSum(size);
  return {
    state: kept ? state : null,
    index,
    report: {
      weight: state.weight, points: tried.length ? holdout!.points : 0, tried, entries: size[0]!,
      // One process's re-ranker: its offsets and biases once, every rank's weights.
      bytes: kept ? size[1]! - (model.comm.size - 1) * (state.offsets.byteLength + state.bias.byteLength) : 0,
      seconds: (performance.now() - t0) / 1000,
    },
  };
}

/** Classifier weights of `labels` (this rank's) in a re-ranker over every label. */
function ownEntries(r: RerankState, labels: Uint32Array): number {
  let n = 0;
  for (const j of labels) n += r.offsets[j + 1]! - r.offsets[j]!;
  return n;
}

/**
 * Top-k of every point of `data` on the sharded network with its re-ranker (Network.predict's): the network's
 * top max(k, shortlist) re-scored by the classifiers of every rank. Without one, the network's top-k. A
 * collective; every rank returns the whole result. `index`: the cluster index of the weights as they are (default
 * rounds; ShardedFit.index), else sampled prediction builds it.
 */
export function shardPredictFinal(
  model: ShardedModel, data: SparseDataset, k: number, seed: number, rr: { state: RerankState | null; weight: number; shortlist: number } | null, threads: number,
  mode?: 'exact' | 'sampled', index?: ShardIndex,
): ShardPredictions {
  if (!rr || rr.weight === 0) return shardPredict(model, data, k, null, seed, undefined, index, mode);
  const N = resolveConfig(model.global).layers.at(-1)!.size;
  const S = Math.min(Math.max(k, rr.shortlist), N);
  const top = shardPredict(model, data, S, null, seed, undefined, index, mode);
  const empty: RerankState = { offsets: new Uint32Array(N + 1), features: new Uint32Array(0), weights: new Float32Array(0), bias: new Float32Array(N).fill(-1), weight: rr.weight, shortlist: rr.shortlist };
  const s = shardRerankScores(model, rr.state ?? empty, data, top.labels[0]!, S, threads);
  const labels = new Uint32Array(data.points * k), scores = new Float32Array(data.points * k);
  rerankCombine(top.labels[0]!, top.scores[0]!, s, S, rr.weight, k, labels, scores);
  return { labels: [labels], scores: [scores], outputsScoredPerPoint: top.outputsScoredPerPoint };
}
