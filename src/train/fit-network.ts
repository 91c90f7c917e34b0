// Training a Network: fit() (the fit loop of fit.ts wrapped in what a run needs around it: resuming a
// checkpointed run, input scaling, held-out validation and early stopping, the choice of the epoch count on
// copies of the network (k-fold or a held-out copy), the blend of the wide part, the re-ranker, checkpoints)
// and resume() (a network restored from a checkpoint, whose next fit() continues the run).
//
// The Network itself (src/network/network.ts) is the model: it predicts, evaluates, grows, saves and loads.
// What a training run carries from one fit() to the next (where a resumed run stands, its early stopping,
// the checkpoint directory it writes to) is kept here, per network (runOf), not in the model.
import { stat } from 'node:fs/promises';
import { dirname } from 'node:path';
import { subset } from '../datasets/split-reader.js';
import { toShared, type SparseDataset } from '../datasets/csr.js';
import { Xoshiro128, shuffleInPlace } from '../util/rng.js';
import { native, nativeThreads } from '../native/addon.js';
import { tablesProblem } from '../lsh/tables-check.js';
import { featuresOf, mapFeatures, networkInput } from '../network/input-map.js';
import { defaultThreads, defaultTraining, storedConfig, type NetworkConfig, type ResolvedNetworkConfig, type ResolvedRerank } from '../network/config.js';
import { allocateTrainingState, releaseTrainingState } from '../network/allocate.js';
import { checkMemory, planNetworkMemory } from '../network/memory-plan.js';
import { createExecutor, defaultWorkers, type Executor } from '../network/executor.js';
import type { LoadLimits } from '../network/file-layout.js';
import type { LayerState } from '../native/network-types.js';
import { applyInputScale, detectInputScale, INPUT_SCALINGS, type InputScaleReport } from '../network/input-scale.js';
import { computeMetrics, labelFrequencies, pointPrecisions } from '../network/metrics.js';
import { defaultCandidates, loadMemoryLimit, Network, type Predictions } from '../network/network.js';
import { RERANK_WEIGHTS, rerankBytes, rerankScores, rerankTries, rerankWeightSums, trainRerank, type RerankReport, type RerankTry } from '../network/rerank.js';
import { RebuildSchedule } from '../network/schedule.js';
import { allocateWide, buildWide } from '../network/wide.js';
import {
  Checkpointer, dataFingerprint, loadLatestCheckpoint, readCheckpoint,
  type DataFingerprint, type SavedFitOptions, type SkippedCheckpoint, type TrainingPosition,
} from './checkpoint.js';
import {
  annealMultiplier, defaultRunLr, descentEpochs, earlyStopStep, foldsFlat, holdoutSize, holdoutSplit, initialEarlyStop, kfoldSplit, bestMeanEpoch, resolveValidation, selectionMethod, validationEnded, WeightSnapshot,
  BLEND_SCALES, EPOCH_BLEND_SCALES, type BlendTry, type EarlyStop, type ResolvedValidation, type SelectionReport, type ValidationPoint,
} from './early-stop.js';
import { fitLoop, resolveFitOptions, type FitControl, type FitOptions, type FitStart, type FitStats } from './fit.js';
import { calibrateAtEnd, calibrationShortlist, foldCalibration, type HeldRerankScores } from './fit-calibration.js';
import { calibrationPairs, type CalibrationPairs } from '../network/calibration.js';
import { assertUnlocked } from './lock.js';
import { sharedSetLogQ } from './logq.js';
import { PhaseTimer } from '../util/phases.js';

/** What a network carries from one fit() to the next within a training run. */
export interface Run {
  /** Set by `resume`: the checkpoint the network was restored from (null otherwise). */
  resumeInfo: ResumeInfo | null;
  /**
   * Early stopping of the fit() in progress or restored from a checkpoint (held-out scores so far and the
   * best epoch's weights); null without validation.
   */
  earlyStop: EarlyStop | null;
  /** A resume not yet consumed by fit(): its data fingerprint. */
  pendingResume: { data: DataFingerprint } | null;
  /** The checkpoint the network last wrote or was restored from: fit() may keep writing to that directory. */
  lastCheckpoint: { dir: string; batchesDone: number } | null;
  /** ValidationOptions.blend: every scale's held-out score, by 1-based epoch, of the fit() in progress. */
  blendTried: Map<number, BlendTry[]>;
  /** The phase timer of the fit() in progress (FitOptions.phases). */
  phases: PhaseTimer;
  /** The learning rate of the last fit() (given, or the default it chose from the network and the data). */
  lr?: number;
}

const runs = new WeakMap<Network, Run>();

/** The run state of `net` (a fresh one for a network that has not trained or been resumed). */
export function runOf(net: Network): Run {
  let r = runs.get(net);
  if (!r) runs.set(net, (r = { resumeInfo: null, earlyStop: null, pendingResume: null, lastCheckpoint: null, blendTried: new Map(), phases: new PhaseTimer() }));
  return r;
}

/** Where a network restored by `resume` came from; null for any other network. */
export function resumeInfo(net: Network): ResumeInfo | null {
  return runs.get(net)?.resumeInfo ?? null;
}

/**
 * Network state (weights, Adam moments, tables) that the fold networks of k-fold selection may hold
 * together: 2 GiB. Fewer folds are used when 5 copies would not fit, one held-out slice when 2 would not.
 */
export const KFOLD_MEMORY = 2 * 1024 ** 3;

/**
 * Bytes each fold of k-fold selection holds besides its network state: with a re-ranker whose weight the
 * folds choose (RerankConfig.weight unset), a copy of its weights and biases at the best mean epoch so far.
 */
export function kfoldSnapshotBytes(c: ResolvedNetworkConfig): number {
  const rr = c.layers.at(-1)!.rerank;
  if (!rr || rr.weight !== undefined) return 0;
  let bytes = 0, prev = c.inputDim;
  for (const l of c.layers) {
    bytes += 4 * (prev * l.size + l.size);
    prev = l.size;
  }
  return bytes;
}

/**
 * Bytes of one copy of k-fold selection for a network of `config` whose copies take `inputs` input features
 * (compactInputs): its network state and its snapshot (kfoldSnapshotBytes). At most KFOLD_MEMORY for all folds.
 */
export function kfoldCopyBytes(config: ResolvedNetworkConfig, inputs: number): number {
  const c = { ...config, inputDim: inputs };
  return planNetworkMemory(c, 1).totalBytes + kfoldSnapshotBytes(c);
}

/** k-means rounds of the cluster index that scores the held-out slice in sampled mode (Network.scoreHoldout). */
const HOLDOUT_INDEX_ITERS = 2;

/**
 * Folds of the k-fold selection of `network` on `points` training points (fewer than 2: none, the held-out
 * slice is used): validation.folds, at most points / 2, as many copies on `inputs` (compactInputs; null: the
 * whole input) as fit side by side in KFOLD_MEMORY (kfoldCopyBytes).
 */
export function kfoldFolds(network: Network, points: number, validation: ResolvedValidation, inputs: Uint32Array | null): number {
  const copy = kfoldCopyBytes(network.config, inputs?.length ?? network.config.inputDim);
  return Math.min(validation.folds, Math.floor(points / 2), Math.floor(KFOLD_MEMORY / Math.max(1, copy)));
}

export interface ResumeOptions extends LoadLimits {
  /**
   * Receives warnings, e.g. that the newest checkpoint is damaged and an older one is used.
   * Default: written to stderr as `sublinear: <message>`.
   */
  onWarning?: (message: string) => void;
  /**
   * Called with the checkpoint's network configuration after the file is verified (and its memory plan
   * checked against `maxMemory`) and before the network's memory is allocated; throw to refuse. The error
   * is passed on as is and no older checkpoint is tried. Default: none.
   */
  beforeAllocate?: (config: NetworkConfig) => void;
}

/** Where a network restored by `resume` came from (resumeInfo). */
export interface ResumeInfo {
  /** The checkpoint file loaded. */
  file: string;
  /** Where its run stood: the next fit() starts at network epoch and batch. */
  position: TrainingPosition;
  /** The run's fit options; the next fit() defaults to them. */
  fitOptions: SavedFitOptions;
  /** `CheckpointOptions.extra` of the run (the CLI: data paths and flags). */
  extra: unknown;
  /** 'periodic', 'end' (its fit completed), 'abort' or 'start' (CheckpointReason). */
  reason: string;
  /** ISO time of the write. */
  savedAt: string;
  /** Newer checkpoint files that were damaged and skipped (renamed to `<file>.corrupt`). */
  skipped: SkippedCheckpoint[];
}

/**
 * Trains on `data` (CSR rows with labels). Resolves with throughput and timing statistics.
 *
 * On a network restored by `resume`, the first fit() continues the checkpointed run: it starts
 * at the saved epoch and batch, and options not given default to the run's (epochs, batchSize, lr,
 * betas, eps, shuffle); `data` must be the same training set (checked by a fingerprint), and batchSize
 * and shuffle cannot change in the middle of an epoch. With one worker (or workers: 0) the result is
 * bit-identical to the uninterrupted run.
 */
export async function fit(network: Network, data: SparseDataset, opts: FitOptions = {}): Promise<FitStats> {
  // An executor passed in (FitOptions.executor) is closed by fit() however it ends, also when it throws
  // before training starts (bad data, a locked checkpoint directory, a resume mismatch).
  const handedOver = { done: false };
  try {
    return await fitWith(network, data, opts, handedOver);
  } catch (e) {
    if (!handedOver.done) await opts.executor?.close().catch(() => {});
    throw e;
  }
}

async function fitWith(network: Network, data: SparseDataset, opts: FitOptions, handedOver: { done: boolean }): Promise<FitStats> {
  // A mapped network (src/network/input-map.ts) trains on its rows: the data's features renumbered, those
  // without a row (a warm start's or resumed run's new features) ignored. The checkpoint fingerprint is
  // of the data as given.
  const given = data;
  data = networkInput(network, data, 'training data');
  const phases = (runOf(network).phases = opts.phases ?? new PhaseTimer());
  const allocate0 = performance.now();
  // An inference-sized network (Network.load) gets its optimizer state and tables now, zero as a loaded
  // model's always were; its tables are then empty and are built before the first batch. The load
  // checked the inference plan only: the training plan (a file may declare hash tables of 2^24 buckets
  // for a tiny network) is checked first, against the load's maxMemory.
  if (!network.hasTrainingState) {
    const limit = loadMemoryLimit(network);
    checkMemory(planNetworkMemory(network.config, opts.workers ?? 0, data), limit !== undefined ? { maxBytes: limit, limitName: 'maxMemory given to Network.load' } : {});
  }
  if (allocateTrainingState(network.config, network.spec)) network.tablesFresh = false;
  // Every page of the training state mapped now (with the kernels' huge-page advice): a new network's Adam
  // moments would otherwise be first touched page by page in the first epoch (measured at the 670k shape:
  // the first epoch ran at 3/4 of the later ones' speed). Not when the training data holds under half of the
  // input features (small text sets: 3,000-8,000 of 26,000-36,000): lazy Adam never writes the other rows'
  // moments, and mapping them cost 0.4-0.5 s and their memory on 300 points of debian-tags.
  // Those moments are then left to 4 KiB pages too (LayerState.smallPages): huge pages would zero 2 MiB around
  // every written row, nearly all of the moments (212 MB on 300 points of debian-tags: the kernel zeroing pages
  // fell from 7% to 3% of the command's CPU samples, its peak RSS from 727 to 581 MB).
  const few = fewInputs(data, network.config.inputDim);
  smallMomentPages(network.spec.layers[0]!, few);
  if (!few) native().netPrefault(network.spec);
  phases.add('allocate', (performance.now() - allocate0) / 1000);
  network.indexFresh = false; // training moves the weights the cluster index was built from
  network.rerank = null; // its classifiers learnt from the shortlists of weights that training now moves
  network.calibration = null; // fitted to the scores of the weights that training now moves
  data = toShared(data);
  const run = runOf(network);
  const resumed = run.pendingResume !== null && run.resumeInfo !== null;
  let fingerprint: DataFingerprint | null = null;
  let start: FitStart = { epoch: 0, batch: 0 };
  if (resumed) {
    const info = run.resumeInfo!;
    opts = { ...savedAsFitOptions(info.fitOptions), ...definedOnly(opts) };
    fingerprint = await dataFingerprint(given);
    checkResumeData(info.file, run.pendingResume!.data, fingerprint);
    const o = resolveFitOptions(opts);
    const p = info.position;
    if (p.batch > 0) {
      const at = `(${info.file} is at batch ${p.batch} of epoch ${p.epoch + 1})`;
      if (o.batchSize !== info.fitOptions.batchSize) {
        throw new Error(`Cannot change batchSize from ${info.fitOptions.batchSize} to ${o.batchSize} when resuming mid-epoch ${at}; resume with batchSize ${info.fitOptions.batchSize}`);
      }
      if (o.shuffle !== info.fitOptions.shuffle) {
        throw new Error(`Cannot change shuffle from ${info.fitOptions.shuffle} to ${o.shuffle} when resuming mid-epoch ${at}`);
      }
    }
    start = { epoch: p.epoch, batch: p.batch };
  }
  // Raw-valued inputs: decided by the first fit() of a network (a trained or resumed one keeps its
  // transform). The checkpoint fingerprint is of the data as given.
  if (opts.checkpoint) fingerprint ??= await dataFingerprint(given);
  const scaling = opts.inputScaling ?? 'auto';
  if (!INPUT_SCALINGS.includes(scaling)) throw new Error(`Expected 'auto', 'maxabs', 'log' or 'off' for inputScaling but received ${JSON.stringify(opts.inputScaling)}`);
  let inputScaling: InputScaleReport | undefined;
  if (network.inputScale === null && !network.inputLog && network.batchesDone === 0 && !resumed) {
    const d = detectInputScale(data, network.config.inputDim, scaling);
    network.inputScale = d.scale;
    network.inputLog = d.log;
    inputScaling = d.report;
  }
  if (network.inputLog) {
    if (!inputScaling) {
      const raw = detectInputScale(data, network.config.inputDim, 'off').report;
      inputScaling = {
        scaled: true, method: 'log', maxAbs: raw.maxAbs, featureMaxAbs: raw.featureMaxAbs,
        reason: 'the network\'s stored input transform (term counts compressed, decided by its first training) is applied',
      };
    }
    data = applyInputScale(data, network.inputScale, true);
  } else if (network.inputScale) {
    data = applyInputScale(data, network.inputScale);
    if (!inputScaling) {
      let lo = Infinity, hi = 0;
      for (const v of network.inputScale) {
        if (v < lo) lo = v;
        if (v > hi) hi = v;
      }
      inputScaling = {
        scaled: true, method: 'maxabs', maxAbs: hi, featureMaxAbs: [lo, hi],
        reason: 'the network\'s stored input scaling (decided by its first training) is applied',
      };
    }
  }
  // Held-out validation: on by default when the number of epochs is left to the data (a resumed run
  // goes on as it started: its saved options say).
  const valOpt = opts.validation === undefined ? (opts.epochs === undefined ? {} : false) : opts.validation;
  let validation: ResolvedValidation | null = valOpt === false ? null : resolveValidation(valOpt);
  if (validation && opts.epochs === undefined) opts = { ...opts, epochs: validation.maxEpochs };
  // Folds that fit in KFOLD_MEMORY of network state (they train side by side); fewer than 2: one slice.
  const wantKfold = validation !== null && selectionMethod(data.points, validation) === 'kfold';
  // The copies' input: the features the training data holds (compactInputs).
  const kfoldInputs = wantKfold && !opts.executor ? compactInputs(network, data) : null;
  const folds = wantKfold && !opts.executor ? kfoldFolds(network, data.points, validation!, kfoldInputs) : 0;
  const dflt = defaultTraining(network.config, defaultWorkers());
  // The default rate (defaultRunLr); the row-update rule not with an external executor (train --distributed
  // replicated), whose ranks each hold a part of the data and must agree on one rate.
  if (!resumed && opts.lr === undefined) {
    opts = { ...opts, lr: defaultRunLr(network.config, opts.executor ? undefined : data, data.points, resolveFitOptions(opts).batchSize, folds) };
  }
  if (opts.threads === undefined && !opts.executor) opts = { ...opts, threads: defaultThreads(network.config, defaultWorkers(), opts.workers ?? dflt.workers) };
  const o = resolveFitOptions(opts);
  runOf(network).lr = o.lr;
  // A resumed schedule keeps its restored state unless different rebuild options are given.
  if (opts.rebuild && network.schedule && !(resumed && sameRebuild(opts.rebuild, network.schedule))) {
    // The loop counts batches over the network's life: the new schedule starts from here.
    network.schedule = new RebuildSchedule(opts.rebuild);
    network.schedule.next = network.batchesDone + network.schedule.interval;
  }
  let checkpointer: Checkpointer | undefined;
  if (opts.checkpoint) {
    const c = opts.checkpoint;
    fingerprint ??= await dataFingerprint(given);
    const saved: SavedFitOptions = {
      epochs: o.epochs, batchSize: o.batchSize, lr: o.lr, beta1: o.beta1, beta2: o.beta2, eps: o.eps, shuffle: o.shuffle,
      rebuild: network.schedule ? network.schedule.options() : null,
      validation,
    };
    checkpointer = new Checkpointer(
      {
        ...c,
        onSaved: async (info) => {
          run.lastCheckpoint = { dir: c.dir, batchesDone: info.batchesDone };
          await c.onSaved?.(info);
        },
      },
      network, saved, fingerprint, opts.onWarning, () => run.earlyStop,
    );
    try {
      await checkpointer.prepare(network.batchesDone, run.lastCheckpoint);
    } catch (e) {
      await checkpointer.close();
      throw e;
    }
  }
  // Small training sets: the epoch count is chosen by k-fold cross-validation, then the network trains on
  // all of the data for that many epochs (constant rate, no held-out slice). A resumed run that had
  // finished its selection carries the result in its saved options; one stopped during the selection
  // resumes at its start and selects again (deterministic: the same folds and fold runs).
  let selection: SelectionReport | undefined = resumed ? run.resumeInfo!.fitOptions.selection ?? undefined : undefined;
  const holdoutWhy = !wantKfold
    ? `at least minHoldout ${validation?.minHoldout}`
    : opts.executor
      ? 'fewer than minHoldout, but k-fold selection does not run on an external executor (train --distributed)'
      : 'fewer than minHoldout, but two copies of the network for k-fold selection exceed 2 GiB';
  // Training sets up to validation.refitMaxPoints: the held-out slice chooses on a copy of the network,
  // then the network trains on all of the points (null: it does; else why not).
  const refitWhy = !validation ? 'no validation'
    : wantKfold ? 'fewer than minHoldout held-out points'
    : validation.refitMaxPoints === 0 ? 'refitMaxPoints is 0'
    : data.points > validation.refitMaxPoints ? `more than refitMaxPoints ${validation.refitMaxPoints} training points`
    : opts.executor ? 'an external executor (train --distributed)'
    : resumed && (start.epoch > 0 || start.batch > 0) ? 'resumed part-way through its held-out run'
    : network.memoryBytes() + kfoldSnapshotBytes(network.config) > KFOLD_MEMORY ? 'a copy of the network would exceed 2 GiB'
    : null;
  /** Set when the signal stopped the run during its selection phase: this network is untrained. */
  let stoppedInSelection = false;
  if (validation && (folds >= 2 || refitWhy === null)) {
    // The selection phase's position (TrainingPosition.phase): this network as the run began. Written
    // before the selection, so that a run killed during it resumes (selecting again, deterministically:
    // the same folds or slice, the same result), and again if the signal stops it.
    const selectionStart: TrainingPosition = { epoch: start.epoch, batch: start.batch, batchesDone: network.batchesDone, phase: 'selection' };
    let picked: SelectionReport | null;
    try {
      await checkpointer?.save(selectionStart, 'start', 0, true);
      picked = folds >= 2
        ? await phases.time('selection.kfold', () => selectEpochs(network, data, validation!, folds, kfoldInputs, opts, o))
        : await selectOnHoldout(network, data, validation, { ...opts, phases: phases.nested('selection.') }, o);
    } catch (e) {
      await checkpointer?.close();
      throw e;
    }
    // Stopped during the selection (signal): nothing is trained; a checkpoint of the run's start keeps
    // its options (validation on), so a resume selects again (and gets the same result).
    if (!picked) stoppedInSelection = true;
    if (!picked && checkpointer) {
      try {
        await checkpointer.save(selectionStart, 'abort', 0, true);
      } catch (e) {
        await checkpointer.close();
        throw e;
      }
    }
    if (picked) {
      selection = picked;
      opts = { ...opts, epochs: picked.epochs, validation: false };
      checkpointer?.setOptions({ ...checkpointer.savedOptions, epochs: picked.epochs, validation: null, selection: picked });
    } else {
      opts = { ...opts, validation: false };
    }
    validation = null;
  }
  let exec: Executor;
  try {
    exec = opts.executor ?? createExecutor(opts.workers ?? dflt.workers, { predictThreads: opts.threads });
  } catch (e) {
    await checkpointer?.close();
    throw e;
  }
  handedOver.done = true; // from here the finally below closes it
  try {
    let indexSeconds = 0;
    // Tables that nothing queries in training are not built: the output layer's, with no table candidates
    // and the batch-shared set (the defaults), are used by no query at all (prediction probes the cluster
    // index). They stay allocated and empty (valid, as checkpoints hold them) until a fit that queries them.
    const tablesUsed = network.tablesInTraining;
    if (!network.tablesFresh && tablesUsed) indexSeconds += await network.rebuildTables(exec);
    network.labelFreq = labelFrequencies(data.labelIndices, network.config.layers.at(-1)!.size);
    network.config.layers.forEach((l, k) => {
      const s = network.spec.layers[k]!.sampling;
      if (!s) return;
      if (l.sampling?.logQ && k === network.config.layers.length - 1) s.logQ = sharedSetLogQ(network.labelFreq!, data.points, o.batchSize, l.sampling.minActive);
      else delete s.logQ;
    });
    network.trainPoints = data.points;
    // From here on the network moves past the checkpoint: a later fit() is an ordinary one.
    run.pendingResume = null;
    const control: FitControl = { lrScale: 1, stop: false };
    // A refit after a copy's held-out selection, or the run after k-fold selection, under schedule 'anneal'
    // descends where the selection did.
    const descent = selection?.anneal;
    if (descent) control.lrAt = (e, b, bpe) => annealMultiplier(descent.from, descent.epochs, e, b, bpe);
    // A resumed run continues its early stopping (state and best weights from the checkpoint).
    const restored = resumed ? run.earlyStop : null;
    run.earlyStop = null;
    const { fitOpts, held, holdout } = validation ? withValidation(network, exec, data, validation, restored, opts, o.lr, o.batchSize, control) : { fitOpts: opts, held: 0, holdout: null };
    // The wide part's pairs come from the first training data (the rows trained on, not the held-out ones);
    // a trained or resumed network keeps its own.
    const last = network.spec.layers.at(-1)!;
    const wideCfg = network.config.layers.at(-1)!.wide;
    if (wideCfg && last.wide && last.wide.labels.length === 0 && !resumed) {
      const end = phases.start('wide');
      last.wide = buildWide(data, control.rows ?? null, network.config.inputDim, last.outDim, wideCfg.maxPerLabel, wideCfg.init, wideCfg.minShare);
      end();
    }
    const stats = await fitLoop(network, data, exec, fitOpts, start, checkpointer, control);
    if (stoppedInSelection) stats.stoppedIn = 'selection';
    phases.add('train', stats.trainSeconds);
    network.indexFresh = false; // an index built by the held-out scoring is of some epoch's weights, not the kept ones
    const early = run.earlyStop as EarlyStop | null; // set by withValidation
    if (validation && early) {
      const e = early.state;
      const last = e.history.at(-1);
      // Keep the best epoch's weights (the held-out score says later ones generalise worse).
      if (early.snapshot && last && e.bestEpoch !== last.epoch) early.snapshot.restore(network.spec);
      early.snapshot = null; // restored or not needed: its memory (a copy of the weights) is free from here
      stats.validation = e.history;
      stats.bestEpoch = e.bestEpoch;
      if (validation.schedule === 'anneal' && e.annealFrom !== undefined) stats.anneal = { from: e.annealFrom, epochs: e.annealFor ?? validation.annealEpochs };
      stats.validationPoints = held;
      stats.selection = {
        method: 'holdout', points: held, epochs: e.bestEpoch,
        reason: `${held} held-out points (${holdoutWhy}): the best epoch's weights are kept (not trained again on all points: ${refitWhy})`,
      };
      // The network's weight against the wide part at the kept epoch (ValidationOptions.blend): its
      // scores at BLEND_SCALES from its own held-out pass; the scales it lacks (an epoch before the descent,
      // or trained before a resume: checkpoints do not keep them) scored on the restored weights.
      const kept = e.history[e.bestEpoch - 1];
      if (kept?.scale !== undefined && holdout && !stats.aborted) {
        const known = run.blendTried.get(e.bestEpoch) ?? [];
        const rest = BLEND_SCALES.filter((x) => !known.some((t) => t.scale === x));
        const more = rest.length === 0 ? [] : (await phases.time('blend', () => scoreBlends(network, exec, holdout, validation, rest))).map(({ points: _, ...t }) => t);
        const tried = [...known, ...more].sort((a, b) => b.scale - a.scale);
        const best = tried.reduce((a, t) => (t.score > a.score ? t : a)); // ties: the larger scale
        scaleOutputLogits(network, best.scale);
        network.indexFresh = false;
        stats.blend = { scale: best.scale, points: held, epoch: e.bestEpoch, tried };
      }
      run.blendTried.clear();
    }
    // After a held-out selection on a copy (refit): the copy's blend, on the weights trained on all points.
    if (selection?.method === 'holdout' && selection.blend && !stats.aborted) {
      scaleOutputLogits(network, selection.blend.scale);
      network.indexFresh = false;
      stats.blend = selection.blend;
    }
    // The epochs are trained: the optimizer state is not needed for the re-ranker's peak (FitOptions.releaseTrainingState).
    if (opts.releaseTrainingState) releaseTrainingState(network.spec);
    // The re-ranker, on the kept weights' shortlists of the rows trained on (not with an external
    // executor: train --distributed's replicas would each train their own).
    const rr = network.config.layers.at(-1)!.rerank;
    // The held-out slice's shortlists and classifier scores that choose the re-ranker's weight: the
    // calibration below fits on the same predictions (not a second pass over the slice).
    const heldScores: { value: HeldRerankScores | null } = { value: null };
    if (rr && !stats.aborted && !opts.signal?.aborted) {
      stats.rerank = opts.executor
        ? { weight: 0, points: 0, tried: [], entries: 0, bytes: 0, seconds: 0, skipped: 'not trained by distributed training' }
        : selection?.rerank
          ? await trainReranker(network, exec, data, null, null, null, { ...rr, weight: selection.rerank.weight }, selection.rerank.tried,
            selection.method === 'kfold' ? data.points : selection.points)
          : await trainReranker(network, exec, data, control.rows ?? null, validation && early ? holdout : null, validation, rr, [], 0, heldScores);
    }
    // Calibrated probabilities (FitOptions.calibration), of the final scores (blend and re-ranker included),
    // on points that the kept weights never trained on.
    if (opts.calibration !== false && !stats.aborted && !opts.signal?.aborted) {
      const heldOut = validation && early ? holdout : null;
      const calibrate = () =>
        calibrateAtEnd(network, exec, opts.calibration || {}, heldOut, selection, defaultCandidates(network.config.layers.at(-1)!.size), heldOut ? heldScores.value : null);
      // A phase (and its progress line, 'calibrating the probabilities ...') only where there is something to
      // calibrate on; otherwise calibrateAtEnd just says why not (FitStats.calibration.skipped).
      stats.calibration = heldOut || selection?.calibration ? await phases.time('calibration', calibrate) : await calibrate();
    }
    if (selection) stats.selection = selection;
    if (inputScaling) stats.inputScaling = inputScaling;
    // The run is over: a later fit() starts its own early stopping (and the snapshot's memory is freed).
    run.earlyStop = null;
    // Index the final weights, so sampled inference (and a saved model) sees the trained network.
    // A resumed network's tables are those of its checkpoint, not of its final weights: rebuild too.
    if (network.schedule && (stats.batches > 0 || resumed)) {
      if (tablesUsed) indexSeconds += await network.rebuildTables(exec);
      else network.tablesFresh = false;
    }
    if (indexSeconds > 0) phases.add('index', indexSeconds);
    stats.indexSeconds = indexSeconds;
    stats.phases = phases.snapshot();
    stats.rebuilds = network.schedule?.rebuilds ?? 0;
    return stats;
  } finally {
    await checkpointer?.close();
    await exec.close();
  }
}

/**
 * k-fold selection of the epoch count (small training sets: ValidationOptions.minHoldout). Every fold
 * trains a copy of `network` (same weights and optimizer state: a fresh network's initialisation) on
 * the other folds at the run's constant learning rate, and scores its own points after every epoch
 * (metric `validation.metric`, exact inference). The folds train side by side, one worker each, and wait
 * for each other at every epoch end, so the stop is decided on the mean score over the folds (every
 * training point scored once): training stops when the mean has not improved for
 * max(2 x patience, half its best epoch) epochs, or at maxEpochs (on a few hundred points the mean
 * still pauses for several epochs while rising: on 300 Delicious points it stalled from epoch 13 to 19
 * and peaked at 30). The epoch of the best mean is selected. Deterministic for a seed. Returns null when
 * `opts.signal` stopped it. The caller's onEpochEnd is not called for fold epochs; onProgress is, with
 * `fold` set.
 */
export async function selectEpochs(network: Network, 
  data: SparseDataset, validation: ResolvedValidation, folds: number, inputs: Uint32Array | null, opts: FitOptions, o: ReturnType<typeof resolveFitOptions>,
): Promise<SelectionReport | null> {
  const parts = kfoldSplit(data.points, folds, network.seed);
  // The copies see only the features of `data` (inputs; compactInputs), renumbered: the same sums in the
  // same order, so the same scores as copies of the whole input, in a fraction of the memory.
  if (inputs) data = compactFeatures(data, inputs);
  const inputDim = inputs ? inputs.length : network.config.inputDim;
  const held = holdoutSize(data.points, validation.fraction, validation.maxPoints);
  const curves: number[][] = parts.map(() => []), p1s: number[][] = parts.map(() => []);
  const stops = parts.map(() => new AbortController());
  // Epoch barrier: the last fold to finish an epoch decides and releases the others. Once the folds are
  // stopped (the rule, a failed fold, the caller's signal) nobody waits: a fold stopped mid-epoch never
  // arrives.
  let waiting: (() => void)[] = [];
  let halted = false;
  const release = () => {
    const go = waiting;
    waiting = [];
    go.forEach((r) => r());
  };
  const stopAll = () => {
    halted = true;
    stops.forEach((c) => c.abort());
    release();
  };
  opts.signal?.addEventListener('abort', stopAll, { once: true });
  let best = -1, bestEpoch = 0, bad = 0;
  const means: number[] = []; // the folds' mean score after every epoch
  // Schedule 'anneal': the folds' rates fall together once their mean score stalls (epochs done then).
  let annealFrom: number | undefined;
  const anneal = validation.schedule === 'anneal';
  const annealFor = descentEpochs(validation.annealEpochs, Math.ceil(parts[0]!.train.length / o.batchSize));
  // A re-ranker whose weight is left to the data: every fold keeps its weights at the best mean so far (the
  // epoch bestMeanEpoch selects: snapEpoch).
  const rr = network.config.layers.at(-1)!.rerank;
  const wantRerank = rr !== undefined && rr.weight === undefined;
  const nets: Network[] = [];
  const snaps: WeightSnapshot[] = [];
  // Each fold's layer-0 rows that its training can change (its training part's features): lazy Adam updates
  // only the rows a batch holds, so its snapshots keep those rows alone (a few thousand of 26,000-36,000 on
  // 300 points of the Debian sets) and restore the others as they are, untouched since the copy.
  const trainedRows: Uint32Array[] = [];
  let bestMean = -Infinity;
  // The epoch of the best mean so far, whose weights every fold keeps: each fold copies its own as it leaves
  // the barrier (before its next batch), so that the folds released first train on while the others copy
  // (copied by the last fold to arrive while all waited, the copies cost 0.15-0.24 s of the selection on 300
  // points of Bibtex and debian-tags).
  let snapEpoch = 0;
  const arrive = async () => {
    if (halted) return;
    const e = Math.min(...curves.map((c) => c.length));
    if (e === curves[0]!.length && curves.every((c) => c.length === e)) {
      const mean = curves.reduce((t, c) => t + c[e - 1]!, 0) / folds;
      if (wantRerank && mean > bestMean) {
        bestMean = mean;
        snapEpoch = e;
      }
      const gain = mean > best + validation.minDelta;
      if (gain) {
        best = mean;
        bestEpoch = e;
      }
      means.push(mean);
      if (anneal) {
        // The descent's epochs end the selection; before it, the stall is the plateau rule's (the fold mean
        // still pauses on a few hundred points while rising). A flat curve whose remaining epochs cannot
        // change the choice ends it sooner (foldsFlat).
        if (foldsFlat(means, annealFrom, annealFor, validation.maxEpochs)) {
          stopAll();
          return;
        }
        if (annealFrom !== undefined) {
          if (e >= annealFrom + annealFor) stopAll();
        } else if (gain) {
          bad = 0;
        } else if (++bad >= Math.max(2 * validation.patience, Math.ceil(bestEpoch / 2))) {
          annealFrom = e;
        }
      } else if (gain) {
        bad = 0;
      } else if (++bad >= Math.max(2 * validation.patience, Math.ceil(bestEpoch / 2))) {
        stopAll();
      }
      release();
      return;
    }
    await new Promise<void>((r) => waiting.push(r));
  };
  const workers = (opts.workers ?? defaultWorkers()) > 0 ? 1 : 0;
  // FitOptions.calibration: every fold's held-out candidates after every epoch, for the selected epoch's calibration.
  const calShortlist = opts.calibration === false ? 0 : calibrationShortlist(network, opts.calibration);
  const kHeld = Math.max(5, calShortlist);
  const foldPairs: CalibrationPairs[][] = parts.map(() => []);
  try {
    const runs = parts.map(async (part, f) => {
      const net = copyOf(network, inputs);
      net.inputScale = null; // `data` is already scaled (and the fold runs below do not scale again)
      nets[f] = net;
      const trainPart = subset(data, part.train), heldPart = subset(data, part.holdout);
      trainedRows[f] = featuresOf(trainPart, inputDim);
      await fit(net, trainPart, {
        epochs: validation.maxEpochs, validation: false, calibration: false, batchSize: o.batchSize, lr: o.lr, beta1: o.beta1, beta2: o.beta2, eps: o.eps,
        shuffle: o.shuffle, progressEvery: o.progressEvery, workers, threads: 1, inputScaling: 'off',
        ...(anneal ? { lrSchedule: (e: number, b: number, bpe: number) => annealMultiplier(annealFrom, annealFor, e, b, bpe) } : {}),
        ...definedOnly({ rebuild: opts.rebuild, taskTimeout: opts.taskTimeout, onWarning: opts.onWarning }),
        signal: stops[f]!.signal,
        onProgress: f === 0 && opts.onProgress ? (p) => opts.onProgress!({ ...p, fold: { index: f, folds } }) : undefined,
        onEpochEnd: async () => {
          const pred = await net.predict(heldPart, { k: kHeld, workers: 0 });
          if (calShortlist > 0) foldPairs[f]!.push(calibrationPairs(pred.labels, pred.scores, kHeld, heldPart, calShortlist));
          const m = computeMetrics({ topIdx: pred.labels, kMax: kHeld, labelOffsets: heldPart.labelOffsets, labelIndices: heldPart.labelIndices });
          curves[f]!.push(validation.metric === 'p1' ? m.p1! : (m.p1! + m.p3! + m.p5!) / 3);
          p1s[f]!.push(m.p1!);
          await arrive();
          if (snapEpoch === curves[f]!.length) (snaps[f] ??= new WeightSnapshot(net.spec, trainedRows[f])).take(net.spec);
        },
      }).catch((e) => {
        stopAll(); // a fold that fails stops the others
        throw e;
      });
    });
    const settled = await Promise.allSettled(runs);
    const failed = settled.find((r) => r.status === 'rejected');
    if (failed) throw (failed as PromiseRejectedResult).reason;
  } finally {
    opts.signal?.removeEventListener('abort', stopAll);
  }
  if (opts.signal?.aborted) return null;
  const { epochs, mean } = bestMeanEpoch(curves);
  const meanP1 = p1s[0]!.map((_, e) => p1s.reduce((t, c) => t + c[e]!, 0) / folds);
  const rerank = wantRerank && snaps.length === folds ? await foldRerankWeight(network, data, parts, nets, snaps, rr!, validation) : undefined;
  const calibration = calShortlist > 0 ? foldCalibration(foldPairs, epochs, calShortlist, opts.calibration || {}) : undefined;
  return {
    method: 'kfold', folds, epochs, scores: mean, p1: meanP1, holdoutPoints: held,
    ...(annealFrom !== undefined ? { anneal: { from: annealFrom, epochs: annealFor } } : {}),
    lr: o.lr,
    reason: `a held-out slice would hold ${held} points (fewer than minHoldout ${validation.minHoldout}): ` +
      `${folds}-fold cross-validation chose ${epochs} epochs, then the network trained on all ${data.points} points`,
    ...(rerank ? { rerank } : {}),
    ...(calibration ? { calibration } : {}),
  };
}

/**
 * Held-out selection on a copy (ValidationOptions.refitMaxPoints): a copy of `network` (same weights and
 * optimizer state) trains as fit() would with the held-out slice (early stopping, blend, re-ranker), and
 * its best epoch, blend and re-ranker weight are returned for `network` to train on all of the points
 * with. The caller's onEpochEnd is not called for the copy's epochs; onProgress is, with `selection` set.
 * Returns null when `opts.signal` stopped it.
 */
export async function selectOnHoldout(network: Network, 
  data: SparseDataset, validation: ResolvedValidation, opts: FitOptions, o: ReturnType<typeof resolveFitOptions>,
): Promise<SelectionReport | null> {
  const net = copyOf(network);
  net.inputScale = null; // `data` is already scaled
  const st = await fit(net, data, {
    epochs: opts.epochs ?? validation.maxEpochs, validation: { ...validation, refitMaxPoints: 0 },
    batchSize: o.batchSize, lr: o.lr, beta1: o.beta1, beta2: o.beta2, eps: o.eps, shuffle: o.shuffle, progressEvery: o.progressEvery,
    inputScaling: 'off',
    ...definedOnly({
      workers: opts.workers, threads: opts.threads, rebuild: opts.rebuild, taskTimeout: opts.taskTimeout, onWarning: opts.onWarning, signal: opts.signal,
      phases: opts.phases, calibration: opts.calibration,
    }),
    onProgress: opts.onProgress ? (p) => opts.onProgress!({ ...p, selection: 'holdout' }) : undefined,
  });
  if (st.aborted || opts.signal?.aborted || st.selection?.method !== 'holdout' || !st.validation?.length) return null;
  const held = st.validationPoints ?? st.selection.points;
  const rr = network.config.layers.at(-1)!.rerank;
  const wantRerank = rr !== undefined && rr.weight === undefined && st.rerank !== undefined && st.rerank.skipped === undefined;
  return {
    method: 'holdout', points: held, epochs: st.selection.epochs,
    reason: `${held} held-out points chose ${st.selection.epochs} epochs on a copy of the network (${st.validation.length} trained), ` +
      `then the network trained on all ${data.points} points (at most refitMaxPoints ${validation.refitMaxPoints})`,
    refit: { scores: st.validation.map((v) => v.score), p1: st.validation.map((v) => v.p1) },
    ...(wantRerank ? { rerank: { weight: st.rerank!.weight, tried: st.rerank!.tried } } : {}),
    ...(st.blend ? { blend: st.blend } : {}),
    ...(st.anneal ? { anneal: st.anneal } : {}),
    // The copy's calibration, fitted on its held-out slice: the network trained on all points takes it.
    ...(net.calibration ? { calibration: net.calibration } : {}),
  };
}

/**
 * The re-ranker's weight by k-fold selection (small training sets): each fold's network at the selected
 * epoch (its snapshot) predicts the shortlists of its training folds, its classifiers are trained on them,
 * and its held-out fold is scored at every weight of RERANK_WEIGHTS; the weight with the best mean over
 * all points wins (ties: the smaller). Exact prediction (the sets are small).
 */
async function foldRerankWeight(network: Network, 
  data: SparseDataset, parts: { train: Uint32Array; holdout: Uint32Array }[], nets: Network[], snaps: WeightSnapshot[],
  cfg: ResolvedRerank, validation: ResolvedValidation,
): Promise<{ weight: number; tried: RerankTry[] }> {
  const outDim = network.config.layers.at(-1)!.size;
  const S = Math.min(cfg.shortlist, outDim);
  const threads = nativeThreads(defaultWorkers());
  const ks = validation.metric === 'p1' ? [1] : [1, 3, 5];
  const sums = RERANK_WEIGHTS.map(() => ({ p1: 0, p3: 0, p5: 0, score: 0 }));
  for (let f = 0; f < parts.length; f++) {
    const net = nets[f]!;
    snaps[f]!.restore(net.spec);
    net.indexFresh = false;
    const trainPart = subset(data, parts[f]!.train), heldPart = subset(data, parts[f]!.holdout);
    const top = await net.predict(trainPart, { k: S, workers: 0 });
    const state = trainRerank(trainPart, null, top.labels, S, { labels: outDim, features: net.config.inputDim }, cfg, threads, network.seed);
    const held = await net.predict(heldPart, { k: S, workers: 0 });
    const s = rerankScores(state, heldPart, null, held.labels, S, net.config.inputDim, threads);
    rerankWeightSums(heldPart, held.labels, held.scores, s, S, ks).forEach((t, w) => {
      const u = sums[w]!;
      u.p1 += t.p1, u.p3 += t.p3, u.p5 += t.p5, u.score += t.score;
    });
  }
  const tried = rerankTries(sums, data.points);
  return { weight: tried.reduce((a, t) => (t.score > a.score ? t : a)).weight, tried };
}

/**
 * A new network of `src`'s configuration holding a copy of its training state (copyStateFrom), allocated
 * without the Glorot draw that the copy overwrites (Network.blank). With `inputs` (increasing feature ids,
 * compactInputs) the copy's input is those features alone, renumbered 0..inputs.length-1: its layer 0 holds
 * their rows (weights, Adam moments, step counters) and it is given data through compactFeatures.
 */
export function copyOf(src: Network, inputs: Uint32Array | null = null): Network {
  const net = Network.blank(inputs ? { ...storedConfig(src.config), inputDim: inputs.length } : storedConfig(src.config));
  copyStateFrom(net, src, inputs);
  return net;
}

/**
 * The input features that k-fold selection's copies of `network` keep: the features that `data` (the
 * training data) holds, when fewer than the network's input dimension; null when every feature occurs or the
 * network cannot be cut so (a wide part with pairs over the whole input). A copy trains on folds of `data`
 * only, and lazy Adam updates only the layer-0 rows its batches hold, so the other rows would stay at their
 * initial values in every copy; on 300 points of the Debian sets that is 22,000-33,000 of 26,000-36,000 rows,
 * 85-90% of each copy's memory.
 */
export function compactInputs(network: Network, data: SparseDataset): Uint32Array | null {
  const wide = network.spec.layers.at(-1)!.wide;
  if (wide && wide.labels.length > 0) return null;
  const present = featuresOf(data, network.config.inputDim);
  return present.length < network.config.inputDim ? present : null;
}

/**
 * `data` with its feature ids renumbered to their positions in `inputs` (increasing, holding every feature of
 * `data`; compactInputs): the input of a copy made by copyOf(src, inputs). Values, offsets and labels shared.
 */
export function compactFeatures(data: SparseDataset, inputs: Uint32Array): SparseDataset {
  return mapFeatures(data, { features: data.features, ids: inputs }, true);
}

/**
 * Whether `data` holds under half of the `dim` input features (counted only when its nonzeros are few enough
 * for that to be possible, under 4 x dim: one pass over a small set).
 */
export function fewInputs(data: SparseDataset, dim: number): boolean {
  const nnz = data.offsets[data.points]! - data.offsets[0]!;
  return nnz < 4 * dim && 2 * featuresOf(data, dim).length < dim;
}

/**
 * Sets `layer`'s Adam moments to 4 KiB pages (`small`) or back to huge pages (LayerState.smallPages), advising
 * the kernel before the training touches them.
 */
export function smallMomentPages(layer: LayerState, small: boolean): void {
  if ((layer.smallPages ?? false) === small) return;
  if (small) layer.smallPages = true;
  else delete layer.smallPages;
  for (const a of [layer.mWeights, layer.vWeights]) native().netAdviseHugePages(a, !small);
}

/** Rows `rows` (of `width` elements each) of `from`, one after another, into `to`. */
function gatherRows<T extends Float32Array | Uint32Array>(to: T, from: T, rows: Uint32Array, width: number): void {
  for (let i = 0; i < rows.length; i++) {
    const at = rows[i]! * width;
    to.set(from.subarray(at, at + width), i * width);
  }
}

/**
 * Copies `src`'s training state (weights, biases, Adam moments and step counters, batch counter, rebuild
 * round) into `network`, a fresh one of the same configuration; hash tables are rebuilt at the next fit().
 */
function copyStateFrom(network: Network, src: Network, inputs: Uint32Array | null = null): void {
  // A network that has never trained has zero moments and step counters, as the fresh copy has.
  const moments = src.batchesDone > 0;
  src.spec.layers.forEach((l, k) => {
    const d = network.spec.layers[k]!;
    // Layer 0 is input-major (a row of outDim per feature): with `inputs`, the rows of those features.
    const rows = k === 0 && inputs ? (to: Float32Array | Uint32Array, from: Float32Array | Uint32Array, width: number) => gatherRows(to, from, inputs, width) : null;
    const copy = (to: Float32Array | Uint32Array, from: Float32Array | Uint32Array, width: number) => (rows ? rows(to, from, width) : to.set(from));
    copy(d.weights, l.weights, l.outDim); d.bias.set(l.bias);
    if (moments) {
      copy(d.mWeights, l.mWeights, l.outDim); copy(d.vWeights, l.vWeights, l.outDim); d.mBias.set(l.mBias); d.vBias.set(l.vBias);
      copy(d.rowSteps, l.rowSteps, 1); d.biasSteps.set(l.biasSteps);
    }
    // A wide part with pairs is copied; an empty one (a first fit) gets its pairs from this copy's own data.
    if (l.wide && d.wide && l.wide.labels.length > 0) {
      const w = allocateWide(l.wide.inputDim, l.wide.labels.length);
      w.offsets.set(l.wide.offsets); w.labels.set(l.wide.labels); w.weights.set(l.wide.weights); w.accum.set(l.wide.accum);
      d.wide = w;
    }
  });
  network.batchesDone = src.batchesDone;
  network.rebuildRound = src.rebuildRound;
  network.invalidateTables();
}

/**
 * Held-out validation for one fit(): holds out the validation rows (control.rows = the others), and
 * returns fit options whose onEpochEnd scores the held-out points, records the step in the run's earlyStop
 * (snapshotting a new best, cutting the rate, or stopping), then calls the caller's onEpochEnd.
 */
function withValidation(network: Network, 
  exec: Executor, data: SparseDataset, validation: ResolvedValidation, restored: EarlyStop | null, opts: FitOptions,
  lr: number, batchSize: number, control: FitControl,
): { fitOpts: FitOptions; held: number; holdout: SparseDataset } {
  const split = holdoutSplit(data.points, validation.fraction, validation.maxPoints, network.seed);
  const holdout = subset(data, split.holdout);
  control.rows = split.train;
  control.openEnded = true;
  const run = runOf(network);
  const early = (run.earlyStop = restored ?? { state: initialEarlyStop(), snapshot: null });
  const state = early.state;
  if (validation.schedule === 'anneal') control.lrAt = (e, b, bpe) => annealMultiplier(state.annealFrom, state.annealFor ?? validation.annealEpochs, e, b, bpe);
  const descent = descentEpochs(validation.annealEpochs, Math.ceil(split.train.length / batchSize));
  control.lrScale = state.lrScale;
  control.stop = validationEnded(state, validation);
  const userEnd = opts.onEpochEnd;
  const onEpochEnd = async (epoch: number, st: FitStats) => {
    // The epoch's mean rate: under 'anneal', a descending epoch's falls through it (its middle's rate is the mean).
    const epochLr = lr * control.lrScale * (control.lrAt ? control.lrAt(epoch, 0.5, 1) : 1);
    // Scored as scoreHoldout says; with a wide part, at each of EPOCH_BLEND_SCALES (ValidationOptions.blend),
    // the epoch's score. An epoch of the descent (schedule 'anneal': the epochs the run ends with, and the
    // kept one but where the held-out score fell in it) is scored at the rest of BLEND_SCALES in the same
    // pass (one candidate set serves every scale; its candidates re-weighted per point), so that, kept, its
    // blend needs no second index and pass over the slice for its weights, which are these.
    const out = network.spec.layers.at(-1)!;
    let point: ValidationPoint;
    let points: Float64Array;
    if (validation.blend && out.wide && out.wide.labels.length > 0) {
      const descending = validation.schedule === 'anneal' && state.annealFrom !== undefined;
      const all = await run.phases.time('heldout', () => scoreBlends(network, exec, holdout, validation, descending ? BLEND_SCALES : EPOCH_BLEND_SCALES));
      const tried = all.filter((t) => (EPOCH_BLEND_SCALES as readonly number[]).includes(t.scale));
      const best = tried.reduce((a, t) => (t.score > a.score ? t : a)); // ties: the larger scale (listed first)
      run.blendTried.set(epoch + 1, all.map(({ points: _, ...t }) => t));
      point = { epoch: epoch + 1, p1: best.p1, p3: best.p3, p5: best.p5, score: best.score, lr: epochLr, scale: best.scale };
      points = best.points;
    } else {
      const { points: pp, ...m } = (await run.phases.time('heldout', () => scoreHoldout(network, exec, holdout, validation)))[0]!;
      point = { epoch: epoch + 1, ...m, lr: epochLr };
      points = pp;
    }
    const step = earlyStopStep(state, validation, point, points, descent);
    if (step.best) (early.snapshot ??= new WeightSnapshot(network.spec)).take(network.spec);
    if (step.stop) control.stop = true;
    else control.lrScale = state.lrScale;
    await userEnd?.(epoch, { ...st, validation: state.history, bestEpoch: state.bestEpoch, validationPoints: holdout.points });
  };
  return { fitOpts: { ...opts, onEpochEnd }, held: holdout.points, holdout };
}

/**
 * The held-out score of the weights as they are now. A sampled output layer with a wide part is scored
 * in sampled mode (a fresh cluster index of the current weights, defaultCandidates, plus the wide part's
 * proposals): as accurate as exact there (equal test P@1 at 670k and 200k labels) at a fraction of the
 * cost, which an exact pass over every output each epoch dominated. Otherwise exact.
 */
async function scoreHoldout(network: Network, 
  exec: Executor, holdout: SparseDataset, validation: ResolvedValidation, scales: readonly number[] | null = null,
): Promise<{ p1: number; p3: number; p5: number; score: number; points: Float64Array }[]> {
  const out = network.spec.layers.at(-1)!;
  let preds: Predictions[];
  if (out.sampling && out.wide) {
    // The weights moved since the last index. A held-out index runs HOLDOUT_INDEX_ITERS k-means rounds,
    // not 8: a third of the cost, and the same test P@1 at 670k and 200k labels (-0.06 points on a real
    // 22,868-label set); fit() rebuilds the full index for the kept weights.
    network.buildClusterIndex({ iters: HOLDOUT_INDEX_ITERS });
    preds = await network.predictScaled(exec, holdout, 5, 'sampled', 256, defaultCandidates(out.outDim), scales);
  } else {
    preds = await network.predictScaled(exec, holdout, 5, 'exact', 256, 0, scales);
  }
  return preds.map((pred) => {
    const m = computeMetrics({ topIdx: pred.labels, kMax: 5, labelOffsets: holdout.labelOffsets, labelIndices: holdout.labelIndices });
    const p1 = m.p1!, p3 = m.p3!, p5 = m.p5!;
    // Each point's share of the score, for early stopping's paired comparison of epochs.
    const points = pointPrecisions(pred.labels, 5, holdout.labelOffsets, holdout.labelIndices, validation.metric === 'p1' ? [1] : [1, 3, 5]);
    return { p1, p3, p5, score: validation.metric === 'p1' ? p1 : (p1 + p3 + p5) / 3, points };
  });
}

/**
 * ValidationOptions.blend: the held-out scores with the network's logit (the output layer's weights and
 * biases) scaled by each of `scales` (powers of two, largest first) against the wide part, all from one
 * prediction pass: the native prediction multiplies the network's logit by every scale before adding the
 * wide part's score (the weights are not touched), and in sampled mode one candidate set serves every scale:
 * scaling every row [w_j, b_j] alike leaves its clusters and their order for a query as they are. (Scaling
 * the 343 MB output layer in place, three times per epoch at the 670k shape, cost 1 s an epoch.)
 */
async function scoreBlends(network: Network, 
  exec: Executor, holdout: SparseDataset, validation: ResolvedValidation, scales: readonly number[],
): Promise<(BlendTry & { points: Float64Array })[]> {
  const scored = await scoreHoldout(network, exec, holdout, validation, scales);
  return scales.map((scale, i) => ({ scale, ...scored[i]! }));
}

/**
 * Trains the re-ranker (RerankConfig) on the network as it now is: the top `shortlist` labels of every
 * training row (`rows` of `data`, null: all; sampled inference for a sampled output layer, as its held-out
 * scoring), then the classifiers, then (with `holdout`) the weight that scores best there. Sets
 * `network.rerank` (null when the chosen weight is 0 or nothing could be trained), and heldScores.value to the
 * slice's shortlists and scores the weight was chosen on.
 */
async function trainReranker(network: Network, 
  exec: Executor, data: SparseDataset, rows: Uint32Array | null, holdout: SparseDataset | null, validation: ResolvedValidation | null,
  cfg: ResolvedRerank, chosenBy: RerankTry[] = [], chosenOn = 0, heldScores: { value: HeldRerankScores | null } = { value: null },
): Promise<RerankReport> {
  const t0 = performance.now();
  if (!holdout && cfg.weight === undefined) {
    return { weight: 0, points: 0, tried: [], entries: 0, bytes: 0, seconds: 0, skipped: 'no held-out points to choose its weight (rerank.weight trains it without them)' };
  }
  // k-fold selection chose 0: nothing to train.
  if (cfg.weight === 0 && chosenBy.length) return { weight: 0, points: chosenOn, tried: chosenBy, entries: 0, bytes: 0, seconds: 0 };
  const outDim = network.config.layers.at(-1)!.size;
  const S = Math.min(cfg.shortlist, outDim);
  const mode = network.spec.layers.at(-1)!.sampling ? 'sampled' : 'exact';
  const candidates = defaultCandidates(outDim);
  const threads = nativeThreads(defaultWorkers());
  // Every training row is a positive of its labels; the hard negatives come from the shortlists of at most
  // shortlistRows of them (a seeded sample), which cost a prediction each.
  const trainRows = rows ?? Uint32Array.from({ length: data.points }, (_, i) => i);
  let predRows = trainRows;
  if (trainRows.length > cfg.shortlistRows) {
    predRows = shuffleInPlace(trainRows.slice(), new Xoshiro128(BigInt(network.seed) * 7919n + 0x5e1en)).slice(0, cfg.shortlistRows).sort();
  }
  const phases = runOf(network).phases;
  const top = (await phases.time('rerank.shortlists', () => network.predictScaled(exec, predRows.length === data.points ? data : subset(data, predRows), S, mode, 256, candidates, null)))[0]!;
  const shortlist = new Uint32Array(trainRows.length * S).fill(0xffffffff);
  for (let t = 0, q = 0; q < predRows.length; t++) {
    if (trainRows[t] !== predRows[q]) continue; // both ascending, predRows within trainRows
    shortlist.set(top.labels.subarray(q * S, q * S + S), t * S);
    q++;
  }
  const endClassifiers = phases.start('rerank.classifiers');
  const state = trainRerank(data, trainRows, shortlist, S, { labels: outDim, features: network.config.inputDim }, cfg, threads, network.seed);
  endClassifiers();
  const endWeight = phases.start('rerank.weight');
  const tried: RerankTry[] = [];
  if (holdout && cfg.weight === undefined) {
    const held = (await network.predictScaled(exec, holdout, S, mode, 256, candidates, null))[0]!;
    const s = rerankScores(state, holdout, null, held.labels, S, network.config.inputDim, threads);
    heldScores.value = { labels: held.labels, probs: held.scores, s, S, mode, candidates };
    const ks = validation?.metric === 'p1' ? [1] : [1, 3, 5];
    tried.push(...rerankTries(rerankWeightSums(holdout, held.labels, held.scores, s, S, ks), holdout.points));
    state.weight = tried.reduce((a, t) => (t.score > a.score ? t : a)).weight; // ties: the smaller weight
  }
  endWeight();
  network.rerank = state.weight > 0 ? state : null;
  const entries = network.rerank ? state.features.length : 0;
  if (chosenBy.length) tried.push(...chosenBy);
  return {
    weight: state.weight, points: chosenBy.length ? chosenOn : tried.length ? holdout!.points : 0, tried, entries,
    bytes: network.rerank ? rerankBytes(state) : 0, seconds: (performance.now() - t0) / 1000,
  };
}

/** Multiplies the output layer's weights and biases (the network's logit) by f. */
function scaleOutputLogits(network: Network, f: number): void {
  if (f === 1) return;
  const out = network.spec.layers.at(-1)!;
  for (const a of [out.weights, out.bias]) for (let e = 0; e < a.length; e++) a[e] = a[e]! * f;
}

/**
 * Restores a network from a checkpoint written by `fit({ checkpoint })`: `path` is a checkpoint
 * directory (its newest usable checkpoint is loaded; damaged newer ones are renamed to
 * `<file>.corrupt` and reported through `onWarning`) or one checkpoint file. The next `fit()`
 * continues the run (see fit); `resumeInfo(net)` says where it stands.
 *
 * @example
 * ```ts
 * const net = await resume('ckpt');
 * await fit(net, train, { checkpoint: { dir: 'ckpt', every: '10m' } }); // epochs etc. as saved
 * ```
 */
export async function resume(path: string, opts: ResumeOptions = {}): Promise<Network> {
  const warn = opts.onWarning ?? ((m: string) => void process.stderr.write(`sublinear: ${m}\n`));
  const make = (config: NetworkConfig) => new Network(config);
  const limits: LoadLimits = { maxMemory: opts.maxMemory, workers: opts.workers };
  let isFile: boolean;
  try {
    isFile = (await stat(path)).isFile();
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') throw new Error(`${path}: no such checkpoint directory`);
    throw e;
  }
  // A directory another live run writes to is refused before anything is read or renamed in it.
  if (!isFile) await assertUnlocked(path);
  const r = isFile
    ? { ...(await readCheckpoint(path, make, opts.beforeAllocate, limits)), file: path, skipped: [] }
    : await loadLatestCheckpoint(path, make, warn, opts.beforeAllocate, limits);
  const net = r.network;
  net.tablesFresh = true; // the checkpoint's tables, exactly as the run had them
  // Tables that are damaged behind a valid checksum (a crafted or buggy file) would stop the run at its
  // first query: rebuild them from the checkpoint's weights before training instead, and say that the
  // run then differs from the uninterrupted one.
  net.spec.layers.forEach((l, k) => {
    const problem = l.sampling ? tablesProblem(l.sampling.tables) : null;
    if (!problem) return;
    warn(`checkpoint ${r.file}: the hash tables of layer ${k} are damaged (${problem}); they will be rebuilt from the checkpoint's weights, so the resumed run will not be bit-identical to an uninterrupted one`);
    net.tablesFresh = false;
  });
  const run = runOf(net);
  run.earlyStop = r.earlyStop;
  run.pendingResume = { data: r.meta.data };
  run.resumeInfo = {
    file: r.file, position: r.meta.position, fitOptions: r.meta.options, extra: r.meta.extra,
    reason: r.meta.reason, savedAt: r.meta.savedAt, skipped: r.skipped,
  };
  // fit() may go on writing checkpoints next to this one (not if newer ones exist there: a fork).
  run.lastCheckpoint = { dir: dirname(r.file), batchesDone: r.meta.position.batchesDone };
  return net;
}

function definedOnly<T extends object>(o: T): Partial<T> {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as Partial<T>;
}

function savedAsFitOptions(s: SavedFitOptions): FitOptions {
  return {
    epochs: s.epochs, batchSize: s.batchSize, lr: s.lr, beta1: s.beta1, beta2: s.beta2, eps: s.eps, shuffle: s.shuffle,
    // Files written before k-fold selection existed resume as they ran: one held-out slice.
    validation: s.validation ? { ...s.validation, minHoldout: (s.validation as Partial<ResolvedValidation>).minHoldout ?? 1 } : false,
  };
}

function sameRebuild(r: NonNullable<FitOptions['rebuild']>, s: RebuildSchedule): boolean {
  const o = new RebuildSchedule(r).options(), c = s.options();
  return (Object.keys(o) as (keyof typeof o)[]).every((k) => o[k] === c[k]);
}

function checkResumeData(file: string, want: DataFingerprint, got: DataFingerprint): void {
  const describe = (d: DataFingerprint) => `${d.points} points, ${d.features} features, ${d.labels} labels, ${d.nnz} nonzeros, ${d.labelNnz} label entries, hash ${d.hash}`;
  if (want.points !== got.points || want.features !== got.features || want.labels !== got.labels || want.nnz !== got.nnz || want.labelNnz !== got.labelNnz || want.hash !== got.hash) {
    throw new Error(`The training data is not the data of checkpoint ${file}: it has ${describe(got)}; the checkpoint was trained on ${describe(want)}`);
  }
}
