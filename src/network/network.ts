// The public Network: a stack of fully connected layers over a sparse input, some of them LSH-sampled,
// whose weights, Adam state and hash tables live in SharedArrayBuffers so that worker threads train
// it in place (HOGWILD).
import { sharedFloat32, sharedUint32, toShared, type SparseDataset } from '../../datasets/csr.js';
import { checkDataset } from './check-data.js';
import { native } from '../native.js';
import { defaultThreads, defaultTraining, resolveConfig, storedConfig, tablesQueriedInTraining, type NetworkConfig, type ResolvedNetworkConfig, type ResolvedRerank } from './config.js';
import type { TextVectorizer } from '../text/vectorizer.js';
import type { NetSpec } from './native-types.js';
import { allocateNetwork, allocateTablesOf, allocateTrainingState, hasTables, networkBytes } from './allocate.js';
import { hasTrainingArrays } from './state.js';
import { createExecutor, defaultWorkers, type Executor } from '../train/executor.js';
import { fitLoop, resolveFitOptions, type FitControl, type FitOptions, type FitStart, type FitStats } from '../train/fit.js';
import { RebuildSchedule } from '../train/schedule.js';
import {
  Checkpointer, dataFingerprint, loadLatestCheckpoint, readCheckpoint,
  type DataFingerprint, type SavedFitOptions, type SkippedCheckpoint, type TrainingPosition,
} from '../train/checkpoint.js';
import { assertUnlocked } from '../train/lock.js';
import { tablesProblem } from '../lsh/tables-check.js';
import { stat } from 'node:fs/promises';
import { dirname } from 'node:path';
import { computeMetrics, inversePropensity, labelFrequencies, pointPrecisions, type Metrics } from '../train/metrics.js';
import { loadModel, saveModel, type TrainingSummary } from './model-file.js';
import type { LoadLimits } from './file-layout.js';
import { subset } from '../../datasets/split-reader.js';
import { applyInputScale, detectInputScale, INPUT_SCALINGS, type InputScaleReport } from './input-scale.js';
import { sharedSetLogQ } from '../train/logq.js';
import { allocateWide, buildWide } from './wide.js';
import { shuffleInPlace, Xoshiro128 } from '../util/rng.js';
import { PhaseTimer } from '../util/phases.js';
import { RERANK_WEIGHTS, rerankBytes, rerankCombine, rerankScores, trainRerank, type RerankReport, type RerankState, type RerankTry } from './rerank.js';
import {
  annealMultiplier, descentEpochs, earlyStopStep, holdoutSize, validationEnded, holdoutSplit, initialEarlyStop, kfoldSplit, bestMeanEpoch, resolveValidation, selectionMethod, WeightSnapshot,
  BLEND_SCALES, EPOCH_BLEND_SCALES, type BlendTry, type EarlyStopState, type ResolvedValidation, type SelectionReport, type ValidationPoint,
} from '../train/early-stop.js';

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
 * Sums over the points of `part` of P@1, P@3, P@5 and the per-point score (pointPrecisions over `ks`) at
 * every weight of RERANK_WEIGHTS: the network's top S of each point (labels, probs) re-scored with the
 * classifiers' scores s.
 */
function rerankWeightSums(
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
function rerankTries(sums: { p1: number; p3: number; p5: number; score: number }[], points: number): RerankTry[] {
  return RERANK_WEIGHTS.map((weight, w) => ({
    weight, p1: sums[w]!.p1 / points, p3: sums[w]!.p3 / points, p5: sums[w]!.p5 / points, score: sums[w]!.score / points,
  }));
}

/** How predict() scores the output layer (PredictOptions.mode). */
export type PredictMode = 'exact' | 'sampled' | 'auto';

/** Options of `Network.predict`. */
export interface PredictOptions {
  /** Labels returned per point. Default 5. */
  k?: number;
  /**
   * 'exact' scores every output neuron (slower, exact top-k); 'sampled' scores only the candidates of a
   * sampled output layer's cluster index and wide part (faster, approximate); 'auto' is 'sampled' for a
   * sampled output layer with a wide part (the defaults from 8,192 labels, whose held-out selection already
   * scores that way: test P@1, P@3, P@5 within 0.1 points of exact on a real 11,604-label text set in a
   * third of the time) and 'exact' otherwise (see Network.inferenceMode). Default 'auto'.
   */
  mode?: PredictMode;
  /** Worker threads. Default: the machine's cores. */
  workers?: number;
  /** Rows per task. Default 256. */
  chunk?: number;
  /**
   * 'sampled' mode: output neurons scored per point. The output layer's cluster index is probed from the
   * best centre down until this many neurons are collected (a cluster is taken whole, so a few more may
   * be scored; `outputsScoredPerPoint` says how many were). Default: 0.5% of the outputs, at least 256 (defaultCandidates).
   */
  candidates?: number;
  /** Called as chunks finish with (points predicted so far, points). Default: none. */
  onProgress?: (done: number, total: number) => void;
  /**
   * Runs the chunks on this executor, which the call leaves open, instead of a pool of `workers` threads
   * started and closed by the call (`workers` is then ignored). For callers that predict often, e.g. the
   * prediction server (src/serve/). Default: none.
   */
  executor?: Executor;
}

/**
 * Options of `Network.load`: limits checked before the file's network is allocated (every file is first
 * checked against its own configuration: see src/network/file-layout.ts).
 */
export type LoadOptions = LoadLimits;

/**
 * Default output neurons scored per point in sampled mode (PredictOptions.candidates): 0.5% of the outputs,
 * at least 256. With a wide part (the defaults at these sizes) that matched exact P@1 and P@5 at 670k and
 * 200k labels (11-14x faster than exact); on a 22,868-label set 256 lost 0.06 points of P@1 and 115 (0.5%)
 * lost 0.5, hence the floor.
 */
export function defaultCandidates(outputs: number): number {
  return Math.min(outputs, Math.max(256, Math.ceil(0.005 * outputs)));
}

/** k-means rounds of the cluster index that scores the held-out slice in sampled mode (Network.scoreHoldout). */
const HOLDOUT_INDEX_ITERS = 2;

/** Options of `new Network`. */
export interface NetworkOptions {
  /**
   * Allocate an inference-sized state: weights, biases and hash functions, without Adam moments, step
   * counters, hash tables or the wide part's Adagrad sums (what prediction does not read). The first fit()
   * (or grow()) allocates them, zero as a new network's; a sampled prediction allocates the tables it
   * queries (those of sampled hidden layers). `Network.load` builds its networks this way. Default false.
   */
  inference?: boolean;
}

/** Options of `Network.resume` (with the limits of `Network.load`). */
/** Options of `Network.save`. */
export interface SaveOptions {
  /** How the model was trained, stored in the file and shown by `sublinear info`. Default none. */
  training?: TrainingSummary;
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

/** Where a network restored by `Network.resume` came from. */
export interface ResumeInfo {
  /** The checkpoint file loaded. */
  file: string;
  /** Where its run stood: the next fit() starts at this epoch and batch. */
  position: TrainingPosition;
  /** The run's fit options; the next fit() defaults to them. */
  fitOptions: SavedFitOptions;
  /** `CheckpointOptions.extra` of the run (the CLI: data paths and flags). */
  extra: unknown;
  /** 'periodic', 'end' (its fit completed) or 'abort'. */
  reason: string;
  /** ISO time of the write. */
  savedAt: string;
  /** Newer checkpoint files that were damaged and skipped (renamed to `<file>.corrupt`). */
  skipped: SkippedCheckpoint[];
}

/** Options of `Network.evaluate`. */
export interface EvaluateOptions extends Omit<PredictOptions, 'k'> {
  /** Cut-offs for P@k, nDCG@k and PSP@k. Default [1, 3, 5]. */
  k?: number[];
  /** Propensity model parameter A. Default 0.55 (use 0.6 for Amazon datasets). */
  propensityA?: number;
  /** Propensity model parameter B. Default 1.5 (use 2.6 for Amazon datasets). */
  propensityB?: number;
}

export interface Predictions {
  /** Points predicted. */
  points: number;
  k: number;
  /** (points, k) label ids in descending score order; 0xFFFFFFFF where fewer than k labels were scored. */
  labels: Uint32Array;
  /** (points, k) softmax probabilities over the scored neurons. */
  scores: Float32Array;
  /** Mean number of output neurons scored per point (every output when exact). */
  outputsScoredPerPoint: number;
}

/**
 * A SLIDE network.
 *
 * @example
 * ```ts
 * import { Network, readXC } from 'sublinear';
 * const train = await readXC('train.txt');
 * const net = new Network({
 *   inputDim: train.features,
 *   layers: [
 *     { size: 128, activation: 'relu' },
 *     { size: train.labels, activation: 'softmax', sampling: { hash: 'dwta', K: 6, L: 50 } },
 *   ],
 * });
 * await net.fit(train, { epochs: 5, batchSize: 128, onProgress: console.log });
 * const metrics = await net.evaluate(await readXC('test.txt'), { k: [1, 3, 5] });
 * await net.save('model.sl');
 * ```
 */
export class Network {
  readonly config: ResolvedNetworkConfig;
  /** Shared state handed to the kernels (weights, Adam moments, hash tables). */
  readonly spec: NetSpec;
  /** Rebuild schedule of the sampled layers (null when no layer is sampled). */
  schedule: RebuildSchedule | null;
  /** Mini-batches trained over this network's life. */
  batchesDone = 0;
  /** Rebuild rounds done; seeds each round's bucket insertion order. */
  rebuildRound = 0;
  /** Training label frequencies (for propensity-scored metrics), recorded by fit(). */
  labelFreq: Uint32Array | null = null;
  trainPoints = 0;
  /** Set by `Network.resume`: the checkpoint this network was restored from (null otherwise). */
  resumeInfo: ResumeInfo | null = null;
  /**
   * The vectorizer of a network trained on raw text (it turns new text into this network's input); saved
   * and loaded with the model. Default undefined (numeric input).
   */
  textVectorizer: TextVectorizer | undefined = undefined;
  /** Label names, index = label id (a network trained on text); saved and loaded with the model. Default undefined. */
  labelNames: readonly string[] | undefined = undefined;
  /**
   * The output layer's trained re-ranker (RerankConfig), applied by predict() when its weight is positive;
   * saved and loaded with the model. null: none (not configured, not trained yet, or not helping on the
   * held-out points). fit() drops it when training starts and trains a new one at the end.
   */
  rerank: RerankState | null = null;
  private tablesFresh = false;
  /** The output layer's cluster index (sampled inference) matches the current weights. */
  private indexFresh = false;
  /**
   * Early stopping of the fit() in progress or restored from a checkpoint (held-out scores so far and
   * the best epoch's weights); null without validation.
   */
  earlyStop: { state: EarlyStopState; snapshot: WeightSnapshot | null } | null = null;
  /** ValidationOptions.blend: every scale's held-out score, by 1-based epoch, of the fit() in progress. */
  private readonly blendTried = new Map<number, BlendTry[]>();
  /** The phase timer of the fit() in progress (FitOptions.phases). */
  private phases = new PhaseTimer();
  /**
   * Per-feature divisors applied to every input (fit, predict, evaluate) when the training data was
   * raw-valued (src/network/input-scale.ts); decided by the first fit() and kept in model files and
   * checkpoints. null: inputs are used as they are.
   */
  inputScale: Float32Array | null = null;
  /** Seconds spent building cluster indexes (sampled inference), over this network's life. */
  clusterIndexSeconds = 0;
  /** Last code-drift sketch taken by the 'change' rebuild policy (fraction of codes changed). */
  lastCodeChange = 0;
  /** A resume not yet consumed by fit(): its data fingerprint and position. */
  private pendingResume: { data: DataFingerprint } | null = null;
  /** The checkpoint this network last wrote or was restored from: fit() may keep writing to that directory. */
  private lastCheckpoint: { dir: string; batchesDone: number } | null = null;

  constructor(config: NetworkConfig, opts: NetworkOptions = {}) {
    this.config = resolveConfig(config);
    this.spec = allocateNetwork(this.config, opts.inference ?? false);
    this.schedule = this.config.layers.some((l) => l.sampling) ? new RebuildSchedule() : null;
  }

  get seed(): number {
    return this.config.seed;
  }

  /** Adagrad rate of the output layer's wide part (undefined without one): see FitTarget.wideLr. */
  get wideLr(): number | undefined {
    return this.config.layers.at(-1)!.wide?.lr;
  }

  /** Bytes of shared state (weights, Adam moments, step counters, hash tables: those allocated so far). */
  memoryBytes(): number {
    return networkBytes(this.spec);
  }

  /** Whether the network holds its training state (false for an inference-sized one until it trains: NetworkOptions.inference). */
  get hasTrainingState(): boolean {
    return hasTrainingArrays(this.spec.layers[0]!);
  }

  /**
   * Trains on `data` (CSR rows with labels). Resolves with throughput and timing statistics.
   *
   * On a network restored by `Network.resume`, the first fit() continues the checkpointed run: it starts
   * at the saved epoch and batch, and options not given default to the run's (epochs, batchSize, lr,
   * betas, eps, shuffle); `data` must be the same training set (checked by a fingerprint), and batchSize
   * and shuffle cannot change in the middle of an epoch. With one worker (or workers: 0) the result is
   * bit-identical to the uninterrupted run.
   */
  async fit(data: SparseDataset, opts: FitOptions = {}): Promise<FitStats> {
    // An executor passed in (FitOptions.executor) is closed by fit() however it ends, also when it throws
    // before training starts (bad data, a locked checkpoint directory, a resume mismatch).
    const handedOver = { done: false };
    try {
      return await this.fitWith(data, opts, handedOver);
    } catch (e) {
      if (!handedOver.done) await opts.executor?.close().catch(() => {});
      throw e;
    }
  }

  private async fitWith(data: SparseDataset, opts: FitOptions, handedOver: { done: boolean }): Promise<FitStats> {
    checkDataset(data, this.config, 'training data');
    const phases = (this.phases = opts.phases ?? new PhaseTimer());
    const allocate0 = performance.now();
    // An inference-sized network (Network.load) gets its optimizer state and tables now, zero as a loaded
    // model's always were; its tables are then empty and are built before the first batch.
    if (allocateTrainingState(this.config, this.spec)) this.tablesFresh = false;
    // Every page of the training state mapped now (with the kernels' huge-page advice): a new network's Adam
    // moments would otherwise be first touched page by page in the first epoch (measured at the 670k shape:
    // the first epoch ran at 3/4 of the later ones' speed).
    native().netPrefault(this.spec);
    phases.add('allocate', (performance.now() - allocate0) / 1000);
    this.indexFresh = false; // training moves the weights the cluster index was built from
    this.rerank = null; // its classifiers learnt from the shortlists of weights that training now moves
    data = toShared(data);
    const resumed = this.pendingResume !== null && this.resumeInfo !== null;
    let fingerprint: DataFingerprint | null = null;
    let start: FitStart = { epoch: 0, batch: 0 };
    if (resumed) {
      const info = this.resumeInfo!;
      opts = { ...savedAsFitOptions(info.fitOptions), ...definedOnly(opts) };
      fingerprint = await dataFingerprint(data);
      checkResumeData(info.file, this.pendingResume!.data, fingerprint);
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
    if (opts.checkpoint) fingerprint ??= await dataFingerprint(data);
    const scaling = opts.inputScaling ?? 'auto';
    if (!INPUT_SCALINGS.includes(scaling)) throw new Error(`Expected 'auto', 'maxabs' or 'off' for inputScaling but received ${JSON.stringify(opts.inputScaling)}`);
    let inputScaling: InputScaleReport | undefined;
    if (this.inputScale === null && this.batchesDone === 0 && !resumed) {
      const d = detectInputScale(data, this.config.inputDim, scaling);
      this.inputScale = d.scale;
      inputScaling = d.report;
    }
    if (this.inputScale) {
      data = applyInputScale(data, this.inputScale);
      if (!inputScaling) {
        let lo = Infinity, hi = 0;
        for (const v of this.inputScale) {
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
    const dflt = defaultTraining(this.config, defaultWorkers());
    if (!resumed && opts.lr === undefined) opts = { ...opts, lr: dflt.lr };
    if (opts.threads === undefined && !opts.executor) opts = { ...opts, threads: defaultThreads(this.config, defaultWorkers(), opts.workers ?? dflt.workers) };
    const o = resolveFitOptions(opts);
    // A resumed schedule keeps its restored state unless different rebuild options are given.
    if (opts.rebuild && this.schedule && !(resumed && sameRebuild(opts.rebuild, this.schedule))) {
      // The loop counts batches over the network's life: the new schedule starts from here.
      this.schedule = new RebuildSchedule(opts.rebuild);
      this.schedule.next = this.batchesDone + this.schedule.interval;
    }
    let checkpointer: Checkpointer | undefined;
    if (opts.checkpoint) {
      const c = opts.checkpoint;
      fingerprint ??= await dataFingerprint(data);
      const saved: SavedFitOptions = {
        epochs: o.epochs, batchSize: o.batchSize, lr: o.lr, beta1: o.beta1, beta2: o.beta2, eps: o.eps, shuffle: o.shuffle,
        rebuild: this.schedule ? this.schedule.options() : null,
        validation,
      };
      checkpointer = new Checkpointer(
        {
          ...c,
          onSaved: async (info) => {
            this.lastCheckpoint = { dir: c.dir, batchesDone: info.batchesDone };
            await c.onSaved?.(info);
          },
        },
        this, saved, fingerprint, opts.onWarning,
      );
      try {
        await checkpointer.prepare(this.batchesDone, this.lastCheckpoint);
      } catch (e) {
        await checkpointer.close();
        throw e;
      }
    }
    // Small training sets: the epoch count is chosen by k-fold cross-validation, then the network trains on
    // all of the data for that many epochs (constant rate, no held-out slice). A resumed run that had
    // finished its selection carries the result in its saved options; one stopped during the selection
    // resumes at its start and selects again (deterministic: the same folds and fold runs).
    let selection: SelectionReport | undefined = resumed ? this.resumeInfo!.fitOptions.selection ?? undefined : undefined;
    // Folds that fit in KFOLD_MEMORY of network state (they train side by side); fewer than 2: one slice.
    const wantKfold = validation !== null && selectionMethod(data.points, validation) === 'kfold';
    const folds = wantKfold && !opts.executor
      ? Math.min(validation!.folds, Math.floor(data.points / 2), Math.floor(KFOLD_MEMORY / Math.max(1, this.memoryBytes() + kfoldSnapshotBytes(this.config))))
      : 0;
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
      : this.memoryBytes() + kfoldSnapshotBytes(this.config) > KFOLD_MEMORY ? 'a copy of the network would exceed 2 GiB'
      : null;
    if (validation && (folds >= 2 || refitWhy === null)) {
      // Stopped during either selection: a resume selects again (deterministic: the same folds or slice).
      let picked: SelectionReport | null;
      try {
        picked = folds >= 2
          ? await phases.time('selection.kfold', () => this.selectEpochs(data, validation!, folds, opts, o))
          : await this.selectOnHoldout(data, validation, { ...opts, phases: phases.nested('selection.') }, o);
      } catch (e) {
        await checkpointer?.close();
        throw e;
      }
      // Stopped during the selection (signal): nothing is trained; a checkpoint of the run's start keeps
      // its options (validation on), so a resume selects again (and gets the same result).
      if (!picked && checkpointer) {
        try {
          await checkpointer.save({ epoch: start.epoch, batch: start.batch, batchesDone: this.batchesDone }, 'abort', 0, true);
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
      exec = opts.executor ?? createExecutor(opts.workers ?? dflt.workers);
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
      const tablesUsed = this.tablesInTraining;
      if (!this.tablesFresh && tablesUsed) indexSeconds += await this.rebuildTables(exec);
      this.labelFreq = labelFrequencies(data.labelIndices, this.config.layers.at(-1)!.size);
      this.config.layers.forEach((l, k) => {
        const s = this.spec.layers[k]!.sampling;
        if (!s) return;
        if (l.sampling?.logQ && k === this.config.layers.length - 1) s.logQ = sharedSetLogQ(this.labelFreq!, data.points, o.batchSize, l.sampling.minActive);
        else delete s.logQ;
      });
      this.trainPoints = data.points;
      // From here on the network moves past the checkpoint: a later fit() is an ordinary one.
      this.pendingResume = null;
      const control: FitControl = { lrScale: 1, stop: false };
      // A refit after a copy's held-out selection under schedule 'anneal' descends where the copy did.
      const descent = selection?.anneal;
      if (descent) control.lrAt = (e, b, bpe) => annealMultiplier(descent.from, descent.epochs, e, b, bpe);
      // A resumed run continues its early stopping (state and best weights from the checkpoint).
      const restored = resumed ? this.earlyStop : null;
      this.earlyStop = null;
      const { fitOpts, held, holdout } = validation ? this.withValidation(exec, data, validation, restored, opts, o.lr, o.batchSize, control) : { fitOpts: opts, held: 0, holdout: null };
      // The wide part's pairs come from the first training data (the rows trained on, not the held-out ones);
      // a trained or resumed network keeps its own.
      const last = this.spec.layers.at(-1)!;
      const wideCfg = this.config.layers.at(-1)!.wide;
      if (wideCfg && last.wide && last.wide.labels.length === 0 && !resumed) {
        const end = phases.start('wide');
        last.wide = buildWide(data, control.rows ?? null, this.config.inputDim, last.outDim, wideCfg.maxPerLabel, wideCfg.init, wideCfg.minShare);
        end();
      }
      const stats = await fitLoop(this, data, exec, fitOpts, start, checkpointer, control);
      phases.add('train', stats.trainSeconds);
      this.indexFresh = false; // an index built by the held-out scoring is of some epoch's weights, not the kept ones
      const early = this.earlyStop as Network['earlyStop']; // set by withValidation
      if (validation && early) {
        const e = early.state;
        const last = e.history.at(-1);
        // Keep the best epoch's weights (the held-out score says later ones generalise worse).
        if (early.snapshot && last && e.bestEpoch !== last.epoch) early.snapshot.restore(this.spec);
        stats.validation = e.history;
        stats.bestEpoch = e.bestEpoch;
        if (validation.schedule === 'anneal' && e.annealFrom !== undefined) stats.anneal = { from: e.annealFrom, epochs: e.annealFor ?? validation.annealEpochs };
        stats.validationPoints = held;
        stats.selection = {
          method: 'holdout', points: held, epochs: e.bestEpoch,
          reason: `${held} held-out points (${holdoutWhy}): the best epoch's weights are kept (not trained again on all points: ${refitWhy})`,
        };
        // The network's weight against the wide part at the kept epoch (ValidationOptions.blend): its
        // scores at EPOCH_BLEND_SCALES, completed with the other scales on the restored weights.
        const kept = e.history[e.bestEpoch - 1];
        if (kept?.scale !== undefined && holdout && !stats.aborted) {
          const known = this.blendTried.get(e.bestEpoch) ?? [];
          const rest = BLEND_SCALES.filter((x) => !known.some((t) => t.scale === x));
          const more = (await phases.time('blend', () => this.scoreBlends(exec, holdout, validation, rest))).map(({ points: _, ...t }) => t);
          const tried = [...known, ...more].sort((a, b) => b.scale - a.scale);
          const best = tried.reduce((a, t) => (t.score > a.score ? t : a)); // ties: the larger scale
          this.scaleOutputLogits(best.scale);
          this.indexFresh = false;
          stats.blend = { scale: best.scale, points: held, epoch: e.bestEpoch, tried };
        }
        this.blendTried.clear();
      }
      // After a held-out selection on a copy (refit): the copy's blend, on the weights trained on all points.
      if (selection?.method === 'holdout' && selection.blend && !stats.aborted) {
        this.scaleOutputLogits(selection.blend.scale);
        this.indexFresh = false;
        stats.blend = selection.blend;
      }
      // The re-ranker, on the kept weights' shortlists of the rows trained on (not with an external
      // executor: train --distributed's replicas would each train their own).
      const rr = this.config.layers.at(-1)!.rerank;
      if (rr && !stats.aborted && !opts.signal?.aborted) {
        stats.rerank = opts.executor
          ? { weight: 0, points: 0, tried: [], entries: 0, bytes: 0, seconds: 0, skipped: 'not trained by distributed training' }
          : selection?.rerank
            ? await this.trainReranker(exec, data, null, null, null, { ...rr, weight: selection.rerank.weight }, selection.rerank.tried,
              selection.method === 'kfold' ? data.points : selection.points)
            : await this.trainReranker(exec, data, control.rows ?? null, validation && early ? holdout : null, validation, rr);
      }
      if (selection) stats.selection = selection;
      if (inputScaling) stats.inputScaling = inputScaling;
      // The run is over: a later fit() starts its own early stopping (and the snapshot's memory is freed).
      this.earlyStop = null;
      // Index the final weights, so sampled inference (and a saved model) sees the trained network.
      // A resumed network's tables are those of its checkpoint, not of its final weights: rebuild too.
      if (this.schedule && (stats.batches > 0 || resumed)) {
        if (tablesUsed) indexSeconds += await this.rebuildTables(exec);
        else this.tablesFresh = false;
      }
      if (indexSeconds > 0) phases.add('index', indexSeconds);
      stats.indexSeconds = indexSeconds;
      stats.phases = phases.snapshot();
      stats.rebuilds = this.schedule?.rebuilds ?? 0;
      return stats;
    } finally {
      await checkpointer?.close();
      await exec.close();
    }
  }

  /**
   * k-fold selection of the epoch count (small training sets: ValidationOptions.minHoldout). Every fold
   * trains a copy of this network (same weights and optimizer state: a fresh network's initialisation) on
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
  private async selectEpochs(
    data: SparseDataset, validation: ResolvedValidation, folds: number, opts: FitOptions, o: ReturnType<typeof resolveFitOptions>,
  ): Promise<SelectionReport | null> {
    const parts = kfoldSplit(data.points, folds, this.seed);
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
    // Schedule 'anneal': the folds' rates fall together once their mean score stalls (epochs done then).
    let annealFrom: number | undefined;
    const anneal = validation.schedule === 'anneal';
    const annealFor = descentEpochs(validation.annealEpochs, Math.ceil(parts[0]!.train.length / o.batchSize));
    // A re-ranker whose weight is left to the data: every fold keeps its weights at the best mean so far (the
    // epoch bestMeanEpoch selects), taken while all folds wait at the barrier.
    const rr = this.config.layers.at(-1)!.rerank;
    const wantRerank = rr !== undefined && rr.weight === undefined;
    const nets: Network[] = [];
    const snaps: WeightSnapshot[] = [];
    let bestMean = -Infinity;
    const arrive = async () => {
      if (halted) return;
      const e = Math.min(...curves.map((c) => c.length));
      if (e === curves[0]!.length && curves.every((c) => c.length === e)) {
        const mean = curves.reduce((t, c) => t + c[e - 1]!, 0) / folds;
        if (wantRerank && mean > bestMean) {
          bestMean = mean;
          nets.forEach((n, f) => (snaps[f] ??= new WeightSnapshot(n.spec)).take(n.spec));
        }
        const gain = mean > best + validation.minDelta;
        if (gain) {
          best = mean;
          bestEpoch = e;
        }
        if (anneal) {
          // The descent's epochs end the selection; before it, `patience` epochs without a gain start it.
          // The stall is the plateau rule's (the fold mean still pauses on a few hundred points while rising).
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
    try {
      const runs = parts.map(async (part, f) => {
        const net = new Network(storedConfig(this.config));
        net.copyStateFrom(this);
        net.inputScale = null; // `data` is already scaled (and the fold runs below do not scale again)
        nets[f] = net;
        const trainPart = subset(data, part.train), heldPart = subset(data, part.holdout);
        await net.fit(trainPart, {
          epochs: validation.maxEpochs, validation: false, batchSize: o.batchSize, lr: o.lr, beta1: o.beta1, beta2: o.beta2, eps: o.eps,
          shuffle: o.shuffle, progressEvery: o.progressEvery, workers, threads: 1, inputScaling: 'off',
          ...(anneal ? { lrSchedule: (e: number, b: number, bpe: number) => annealMultiplier(annealFrom, annealFor, e, b, bpe) } : {}),
          ...definedOnly({ rebuild: opts.rebuild, taskTimeout: opts.taskTimeout, onWarning: opts.onWarning }),
          signal: stops[f]!.signal,
          onProgress: f === 0 && opts.onProgress ? (p) => opts.onProgress!({ ...p, fold: { index: f, folds } }) : undefined,
          onEpochEnd: async () => {
            const pred = await net.predict(heldPart, { k: 5, workers: 0 });
            const m = computeMetrics({ topIdx: pred.labels, kMax: 5, labelOffsets: heldPart.labelOffsets, labelIndices: heldPart.labelIndices });
            curves[f]!.push(validation.metric === 'p1' ? m.p1! : (m.p1! + m.p3! + m.p5!) / 3);
            p1s[f]!.push(m.p1!);
            await arrive();
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
    const rerank = wantRerank && snaps.length === folds ? await this.foldRerankWeight(data, parts, nets, snaps, rr!, validation) : undefined;
    return {
      method: 'kfold', folds, epochs, scores: mean, p1: meanP1, holdoutPoints: held,
      ...(annealFrom !== undefined ? { anneal: { from: annealFrom, epochs: annealFor } } : {}),
      reason: `a held-out slice would hold ${held} points (fewer than minHoldout ${validation.minHoldout}): ` +
        `${folds}-fold cross-validation chose ${epochs} epochs, then the network trained on all ${data.points} points`,
      ...(rerank ? { rerank } : {}),
    };
  }

  /**
   * Held-out selection on a copy (ValidationOptions.refitMaxPoints): a copy of this network (same weights and
   * optimizer state) trains as fit() would with the held-out slice (early stopping, blend, re-ranker), and
   * its best epoch, blend and re-ranker weight are returned for this network to train on all of the points
   * with. The caller's onEpochEnd is not called for the copy's epochs; onProgress is, with `selection` set.
   * Returns null when `opts.signal` stopped it.
   */
  private async selectOnHoldout(
    data: SparseDataset, validation: ResolvedValidation, opts: FitOptions, o: ReturnType<typeof resolveFitOptions>,
  ): Promise<SelectionReport | null> {
    const net = new Network(storedConfig(this.config));
    net.copyStateFrom(this);
    net.inputScale = null; // `data` is already scaled
    const st = await net.fit(data, {
      epochs: opts.epochs ?? validation.maxEpochs, validation: { ...validation, refitMaxPoints: 0 },
      batchSize: o.batchSize, lr: o.lr, beta1: o.beta1, beta2: o.beta2, eps: o.eps, shuffle: o.shuffle, progressEvery: o.progressEvery,
      inputScaling: 'off',
      ...definedOnly({ workers: opts.workers, threads: opts.threads, rebuild: opts.rebuild, taskTimeout: opts.taskTimeout, onWarning: opts.onWarning, signal: opts.signal, phases: opts.phases }),
      onProgress: opts.onProgress ? (p) => opts.onProgress!({ ...p, selection: 'holdout' }) : undefined,
    });
    if (st.aborted || opts.signal?.aborted || st.selection?.method !== 'holdout' || !st.validation?.length) return null;
    const held = st.validationPoints ?? st.selection.points;
    const rr = this.config.layers.at(-1)!.rerank;
    const wantRerank = rr !== undefined && rr.weight === undefined && st.rerank !== undefined && st.rerank.skipped === undefined;
    return {
      method: 'holdout', points: held, epochs: st.selection.epochs,
      reason: `${held} held-out points chose ${st.selection.epochs} epochs on a copy of the network (${st.validation.length} trained), ` +
        `then the network trained on all ${data.points} points (at most refitMaxPoints ${validation.refitMaxPoints})`,
      refit: { scores: st.validation.map((v) => v.score), p1: st.validation.map((v) => v.p1) },
      ...(wantRerank ? { rerank: { weight: st.rerank!.weight, tried: st.rerank!.tried } } : {}),
      ...(st.blend ? { blend: st.blend } : {}),
      ...(st.anneal ? { anneal: st.anneal } : {}),
    };
  }

  /**
   * The re-ranker's weight by k-fold selection (small training sets): each fold's network at the selected
   * epoch (its snapshot) predicts the shortlists of its training folds, its classifiers are trained on them,
   * and its held-out fold is scored at every weight of RERANK_WEIGHTS; the weight with the best mean over
   * all points wins (ties: the smaller). Exact prediction (the sets are small).
   */
  private async foldRerankWeight(
    data: SparseDataset, parts: { train: Uint32Array; holdout: Uint32Array }[], nets: Network[], snaps: WeightSnapshot[],
    cfg: ResolvedRerank, validation: ResolvedValidation,
  ): Promise<{ weight: number; tried: RerankTry[] }> {
    const outDim = this.config.layers.at(-1)!.size;
    const S = Math.min(cfg.shortlist, outDim);
    const threads = Math.max(1, defaultWorkers());
    const ks = validation.metric === 'p1' ? [1] : [1, 3, 5];
    const sums = RERANK_WEIGHTS.map(() => ({ p1: 0, p3: 0, p5: 0, score: 0 }));
    for (let f = 0; f < parts.length; f++) {
      const net = nets[f]!;
      snaps[f]!.restore(net.spec);
      net.indexFresh = false;
      const trainPart = subset(data, parts[f]!.train), heldPart = subset(data, parts[f]!.holdout);
      const top = await net.predict(trainPart, { k: S, workers: 0 });
      const state = trainRerank(trainPart, null, top.labels, S, { labels: outDim, features: this.config.inputDim }, cfg, threads, this.seed);
      const held = await net.predict(heldPart, { k: S, workers: 0 });
      const s = rerankScores(state, heldPart, null, held.labels, S, this.config.inputDim, threads);
      rerankWeightSums(heldPart, held.labels, held.scores, s, S, ks).forEach((t, w) => {
        const u = sums[w]!;
        u.p1 += t.p1, u.p3 += t.p3, u.p5 += t.p5, u.score += t.score;
      });
    }
    const tried = rerankTries(sums, data.points);
    return { weight: tried.reduce((a, t) => (t.score > a.score ? t : a)).weight, tried };
  }

  /**
   * Copies `src`'s training state (weights, biases, Adam moments and step counters, batch counter, rebuild
   * round) into this network of the same configuration; hash tables are rebuilt at the next fit().
   */
  private copyStateFrom(src: Network): void {
    src.spec.layers.forEach((l, k) => {
      const d = this.spec.layers[k]!;
      d.weights.set(l.weights); d.bias.set(l.bias);
      d.mWeights.set(l.mWeights); d.vWeights.set(l.vWeights); d.mBias.set(l.mBias); d.vBias.set(l.vBias);
      d.rowSteps.set(l.rowSteps); d.biasSteps.set(l.biasSteps);
      // A wide part with pairs is copied; an empty one (a first fit) gets its pairs from this copy's own data.
      if (l.wide && d.wide && l.wide.labels.length > 0) {
        const w = allocateWide(l.wide.inputDim, l.wide.labels.length);
        w.offsets.set(l.wide.offsets); w.labels.set(l.wide.labels); w.weights.set(l.wide.weights); w.accum.set(l.wide.accum);
        d.wide = w;
      }
    });
    this.batchesDone = src.batchesDone;
    this.rebuildRound = src.rebuildRound;
    this.invalidateTables();
  }

  /**
   * Held-out validation for one fit(): holds out the validation rows (control.rows = the others), and
   * returns fit options whose onEpochEnd scores the held-out points, records the step in this.earlyStop
   * (snapshotting a new best, cutting the rate, or stopping), then calls the caller's onEpochEnd.
   */
  private withValidation(
    exec: Executor, data: SparseDataset, validation: ResolvedValidation, restored: Network['earlyStop'], opts: FitOptions,
    lr: number, batchSize: number, control: FitControl,
  ): { fitOpts: FitOptions; held: number; holdout: SparseDataset } {
    const split = holdoutSplit(data.points, validation.fraction, validation.maxPoints, this.seed);
    const holdout = subset(data, split.holdout);
    control.rows = split.train;
    control.openEnded = true;
    const early = (this.earlyStop = restored ?? { state: initialEarlyStop(), snapshot: null });
    const state = early.state;
    if (validation.schedule === 'anneal') control.lrAt = (e, b, bpe) => annealMultiplier(state.annealFrom, state.annealFor ?? validation.annealEpochs, e, b, bpe);
    const descent = descentEpochs(validation.annealEpochs, Math.ceil(split.train.length / batchSize));
    control.lrScale = state.lrScale;
    control.stop = validationEnded(state, validation);
    const userEnd = opts.onEpochEnd;
    const onEpochEnd = async (epoch: number, st: FitStats) => {
      // The epoch's mean rate: under 'anneal', a descending epoch's falls through it (its middle's rate is the mean).
      const epochLr = lr * control.lrScale * (control.lrAt ? control.lrAt(epoch, 0.5, 1) : 1);
      // Scored as scoreHoldout says; with a wide part, at each of EPOCH_BLEND_SCALES (ValidationOptions.blend).
      const out = this.spec.layers.at(-1)!;
      let point: ValidationPoint;
      let points: Float64Array;
      if (validation.blend && out.wide && out.wide.labels.length > 0) {
        const tried = await this.phases.time('heldout', () => this.scoreBlends(exec, holdout, validation, EPOCH_BLEND_SCALES));
        const best = tried.reduce((a, t) => (t.score > a.score ? t : a)); // ties: the larger scale (listed first)
        this.blendTried.set(epoch + 1, tried.map(({ points: _, ...t }) => t));
        point = { epoch: epoch + 1, p1: best.p1, p3: best.p3, p5: best.p5, score: best.score, lr: epochLr, scale: best.scale };
        points = best.points;
      } else {
        const { points: pp, ...m } = (await this.phases.time('heldout', () => this.scoreHoldout(exec, holdout, validation)))[0]!;
        point = { epoch: epoch + 1, ...m, lr: epochLr };
        points = pp;
      }
      const step = earlyStopStep(state, validation, point, points, descent);
      if (step.best) (early.snapshot ??= new WeightSnapshot(this.spec)).take(this.spec);
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
  private async scoreHoldout(
    exec: Executor, holdout: SparseDataset, validation: ResolvedValidation, scales: readonly number[] | null = null,
  ): Promise<{ p1: number; p3: number; p5: number; score: number; points: Float64Array }[]> {
    const out = this.spec.layers.at(-1)!;
    let preds: Predictions[];
    if (out.sampling && out.wide) {
      // The weights moved since the last index. A held-out index runs HOLDOUT_INDEX_ITERS k-means rounds,
      // not 8: a third of the cost, and the same test P@1 at 670k and 200k labels (-0.06 points on a real
      // 22,868-label set); fit() rebuilds the full index for the kept weights.
      this.buildClusterIndex({ iters: HOLDOUT_INDEX_ITERS });
      preds = await this.predictScaled(exec, holdout, 5, 'sampled', 256, defaultCandidates(out.outDim), scales);
    } else {
      preds = await this.predictScaled(exec, holdout, 5, 'exact', 256, 0, scales);
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
  private async scoreBlends(
    exec: Executor, holdout: SparseDataset, validation: ResolvedValidation, scales: readonly number[],
  ): Promise<(BlendTry & { points: Float64Array })[]> {
    const scored = await this.scoreHoldout(exec, holdout, validation, scales);
    return scales.map((scale, i) => ({ scale, ...scored[i]! }));
  }

  /**
   * Trains the re-ranker (RerankConfig) on the network as it now is: the top `shortlist` labels of every
   * training row (`rows` of `data`, null: all; sampled inference for a sampled output layer, as its held-out
   * scoring), then the classifiers, then (with `holdout`) the weight that scores best there. Sets
   * this.rerank (null when the chosen weight is 0 or nothing could be trained).
   */
  private async trainReranker(
    exec: Executor, data: SparseDataset, rows: Uint32Array | null, holdout: SparseDataset | null, validation: ResolvedValidation | null,
    cfg: ResolvedRerank, chosenBy: RerankTry[] = [], chosenOn = 0,
  ): Promise<RerankReport> {
    const t0 = performance.now();
    if (!holdout && cfg.weight === undefined) {
      return { weight: 0, points: 0, tried: [], entries: 0, bytes: 0, seconds: 0, skipped: 'no held-out points to choose its weight (rerank.weight trains it without them)' };
    }
    // k-fold selection chose 0: nothing to train.
    if (cfg.weight === 0 && chosenBy.length) return { weight: 0, points: chosenOn, tried: chosenBy, entries: 0, bytes: 0, seconds: 0 };
    const outDim = this.config.layers.at(-1)!.size;
    const S = Math.min(cfg.shortlist, outDim);
    const mode = this.spec.layers.at(-1)!.sampling ? 'sampled' : 'exact';
    const candidates = defaultCandidates(outDim);
    const threads = Math.max(1, defaultWorkers());
    // Every training row is a positive of its labels; the hard negatives come from the shortlists of at most
    // shortlistRows of them (a seeded sample), which cost a prediction each.
    const trainRows = rows ?? Uint32Array.from({ length: data.points }, (_, i) => i);
    let predRows = trainRows;
    if (trainRows.length > cfg.shortlistRows) {
      predRows = shuffleInPlace(trainRows.slice(), new Xoshiro128(BigInt(this.seed) * 7919n + 0x5e1en)).slice(0, cfg.shortlistRows).sort();
    }
    const top = (await this.phases.time('rerank.shortlists', () => this.predictScaled(exec, predRows.length === data.points ? data : subset(data, predRows), S, mode, 256, candidates, null)))[0]!;
    const shortlist = new Uint32Array(trainRows.length * S).fill(0xffffffff);
    for (let t = 0, q = 0; q < predRows.length; t++) {
      if (trainRows[t] !== predRows[q]) continue; // both ascending, predRows within trainRows
      shortlist.set(top.labels.subarray(q * S, q * S + S), t * S);
      q++;
    }
    const endClassifiers = this.phases.start('rerank.classifiers');
    const state = trainRerank(data, trainRows, shortlist, S, { labels: outDim, features: this.config.inputDim }, cfg, threads, this.seed);
    endClassifiers();
    const endWeight = this.phases.start('rerank.weight');
    const tried: RerankTry[] = [];
    if (holdout && cfg.weight === undefined) {
      const held = (await this.predictScaled(exec, holdout, S, mode, 256, candidates, null))[0]!;
      const s = rerankScores(state, holdout, null, held.labels, S, this.config.inputDim, threads);
      const ks = validation?.metric === 'p1' ? [1] : [1, 3, 5];
      tried.push(...rerankTries(rerankWeightSums(holdout, held.labels, held.scores, s, S, ks), holdout.points));
      state.weight = tried.reduce((a, t) => (t.score > a.score ? t : a)).weight; // ties: the smaller weight
    }
    endWeight();
    this.rerank = state.weight > 0 ? state : null;
    const entries = this.rerank ? state.features.length : 0;
    if (chosenBy.length) tried.push(...chosenBy);
    return {
      weight: state.weight, points: chosenBy.length ? chosenOn : tried.length ? holdout!.points : 0, tried, entries,
      bytes: this.rerank ? rerankBytes(state) : 0, seconds: (performance.now() - t0) / 1000,
    };
  }

  /** Multiplies the output layer's weights and biases (the network's logit) by f. */
  private scaleOutputLogits(f: number): void {
    if (f === 1) return;
    const out = this.spec.layers.at(-1)!;
    for (const a of [out.weights, out.bias]) for (let e = 0; e < a.length; e++) a[e] = a[e]! * f;
  }

  /** See FitTarget.tablesInTraining and tablesQueriedInTraining. */
  get tablesInTraining(): boolean {
    return tablesQueriedInTraining(this.config);
  }

  /** See FitTarget.scheduledRebuild. */
  async scheduledRebuild(exec: Executor): Promise<{ seconds: number; rebuilt: boolean }> {
    const start = performance.now();
    if (this.schedule?.policy === 'change') {
      this.lastCodeChange = this.codeChangeFraction(this.schedule.sample);
      if (this.lastCodeChange < this.schedule.threshold) return { seconds: (performance.now() - start) / 1000, rebuilt: false };
    }
    await this.rebuildTables(exec);
    return { seconds: (performance.now() - start) / 1000, rebuilt: true };
  }

  /**
   * A cheap sketch of how stale the tables are: rehashes `sample` evenly spaced neurons of each sampled
   * layer from their current weights and returns the fraction of (neuron, table) codes that differ from
   * the codes the tables hold. 0 right after a rebuild.
   */
  codeChangeFraction(sample = 1024): number {
    let changed = 0, total = 0;
    this.spec.layers.forEach((layer) => {
      const s = layer.sampling;
      if (!s) return;
      const N = layer.outDim, D = layer.inDim, L = s.tables.L;
      const n = Math.min(sample, N);
      const vectors = new Float32Array(n * D);
      const ids = new Uint32Array(n);
      for (let i = 0; i < n; i++) {
        ids[i] = Math.floor((i * N) / n);
        vectors.set(layer.weights.subarray(ids[i]! * D, ids[i]! * D + D), i * D);
      }
      const keys = new Uint32Array(n * L);
      native().lshHashDense(s.hash, vectors, n, 0, L, keys);
      for (let i = 0; i < n; i++) {
        for (let t = 0; t < L; t++) if (keys[i * L + t] !== s.tables.keys[t * N + ids[i]!]) changed++;
      }
      total += n * L;
    });
    return total ? changed / total : 0;
  }

  /**
   * Rebuilds every sampled layer's hash tables from its current weights (tables split across workers),
   * allocating those of an inference-sized network first. `forPrediction`: an output layer whose tables are
   * not allocated keeps none (sampled prediction probes its cluster index); the tables then count as
   * stale for training.
   */
  async rebuildTables(exec: Executor, forPrediction = false): Promise<number> {
    const start = performance.now();
    this.rebuildRound++;
    const jobs: Promise<number>[] = [];
    const last = this.spec.layers.length - 1;
    let skipped = false;
    this.spec.layers.forEach((layer, li) => {
      if (!layer.sampling) return;
      if (!hasTables(layer.sampling.tables)) {
        if (forPrediction && li === last) {
          skipped = true;
          return;
        }
        layer.sampling.tables = allocateTablesOf(this.config, li);
      }
      const L = layer.sampling.tables.L;
      const parts = Math.min(exec.parallelism, L);
      for (let p = 0; p < parts; p++) {
        const t0 = Math.floor((p * L) / parts), t1 = Math.floor(((p + 1) * L) / parts);
        jobs.push(exec.rehash({ net: this.spec, layer: li, t0, t1, seed: (this.seed * 7919 + li * 104729 + this.rebuildRound) >>> 0 }));
      }
    });
    await Promise.all(jobs);
    this.tablesFresh = !skipped;
    return (performance.now() - start) / 1000;
  }

  /**
   * The mode a predict() with `mode` runs in ('auto' and undefined resolved: 'sampled' for a sampled output
   * layer with a wide part, else 'exact'). Throws on anything else than 'exact', 'sampled', 'auto'.
   */
  inferenceMode(mode: PredictMode | undefined): 'exact' | 'sampled' {
    if (mode === undefined || mode === 'auto') {
      const out = this.config.layers.at(-1)!;
      return out.sampling && out.wide ? 'sampled' : 'exact';
    }
    if (mode !== 'exact' && mode !== 'sampled') throw new Error(`Expected 'exact', 'sampled' or 'auto' for mode but received ${JSON.stringify(mode)}`);
    return mode;
  }

  /** Top-k labels for every row of `data`. */
  async predict(data: SparseDataset, opts: PredictOptions = {}): Promise<Predictions> {
    checkDataset(data, this.config, 'prediction input', false);
    data = toShared(data);
    if (this.inputScale) data = applyInputScale(data, this.inputScale);
    const k = opts.k ?? 5;
    if (!Number.isInteger(k) || k <= 0) throw new Error(`Expected positive integer for k but received ${JSON.stringify(opts.k)}`);
    const mode = this.inferenceMode(opts.mode);
    const chunk = opts.chunk ?? 256;
    if (!Number.isInteger(chunk) || chunk <= 0) throw new Error(`Expected positive integer for chunk but received ${JSON.stringify(opts.chunk)}`);
    const outputs = this.config.layers.at(-1)!.size;
    const candidates = opts.candidates ?? defaultCandidates(outputs);
    if (!Number.isInteger(candidates) || candidates <= 0) throw new Error(`Expected positive integer for candidates but received ${JSON.stringify(opts.candidates)}`);
    if (opts.executor) return this.predictWith(opts.executor, data, k, mode, chunk, candidates, opts.onProgress);
    const exec = createExecutor(opts.workers ?? defaultWorkers());
    try {
      return await this.predictWith(exec, data, k, mode, chunk, candidates, opts.onProgress);
    } finally {
      await exec.close();
    }
  }

  /**
   * predict() on a given executor (arguments already validated; data on shared memory). With a re-ranker
   * (this.rerank), the network's top max(k, shortlist) of every point are re-scored and the k best kept.
   */
  private async predictWith(
    exec: Executor, data: SparseDataset, k: number, mode: 'exact' | 'sampled', chunk = 256, candidates = 0,
    onProgress?: (done: number, total: number) => void,
  ): Promise<Predictions> {
    const rr = this.rerank;
    if (!rr || rr.weight === 0) return (await this.predictScaled(exec, data, k, mode, chunk, candidates, null, onProgress))[0]!;
    const S = Math.min(Math.max(k, rr.shortlist), this.config.layers.at(-1)!.size);
    const top = (await this.predictScaled(exec, data, S, mode, chunk, candidates, null, onProgress))[0]!;
    const s = rerankScores(rr, data, null, top.labels, S, this.config.inputDim, Math.max(1, defaultWorkers()));
    const labels = new Uint32Array(data.points * k), scores = new Float32Array(data.points * k);
    rerankCombine(top.labels, top.scores, s, S, rr.weight, k, labels, scores);
    return { points: data.points, k, labels, scores, outputsScoredPerPoint: top.outputsScoredPerPoint };
  }

  /**
   * predictWith under each of `scales` (the output layer's logits multiplied by the scale before its wide
   * part's scores are added: ValidationOptions.blend), one prediction per scale from one pass over the data
   * (sampled mode scores one candidate set for every scale). null: the weights as they are.
   */
  private async predictScaled(
    exec: Executor, data: SparseDataset, k: number, mode: 'exact' | 'sampled', chunk: number, candidates: number,
    scales: readonly number[] | null, onProgress?: (done: number, total: number) => void,
  ): Promise<Predictions[]> {
    let net = this.spec;
    if (mode === 'sampled' && this.schedule) {
      const last = this.spec.layers.length - 1;
      // Sampled hidden layers query their hash tables; the output layer probes its cluster index.
      if (!this.tablesFresh && this.spec.layers.some((l, k) => l.sampling && k < last)) await this.rebuildTables(exec, true);
      const s = this.spec.layers[last]!.sampling;
      if (s) {
        if (!this.indexFresh) this.buildClusterIndex();
        // The budget travels with this call's copy of the spec (concurrent calls may differ).
        const layers = this.spec.layers.slice();
        layers[last] = { ...layers[last]!, sampling: { ...s, index: { ...s.index!, budget: candidates } } };
        net = { layers };
      }
    }
    let scored = 0;
    const S = scales?.length ?? 1;
    const labels = Array.from({ length: S }, () => new Uint32Array(data.points * k));
    const scores = Array.from({ length: S }, () => new Float32Array(data.points * k));
    const scaleArray = scales ? Float32Array.from(scales) : undefined;
    const jobs: Promise<void>[] = [];
    let done = 0;
    for (let start = 0; start < data.points; start += chunk) {
      const end = Math.min(start + chunk, data.points);
      const pointIds = new Uint32Array(end - start);
      for (let i = 0; i < pointIds.length; i++) pointIds[i] = start + i;
      jobs.push(
        exec.predict({ net, data, pointIds, k, sampled: mode === 'sampled', ...(scaleArray ? { scales: scaleArray } : {}) }).then((r) => {
          // r holds (points, S, k): point i's k best under scale si at (i S + si) k.
          if (S === 1) {
            labels[0]!.set(r.idx, start * k);
            scores[0]!.set(r.val, start * k);
          } else {
            for (let i = 0; i < end - start; i++) {
              for (let si = 0; si < S; si++) {
                const from = (i * S + si) * k;
                labels[si]!.set(r.idx.subarray(from, from + k), (start + i) * k);
                scores[si]!.set(r.val.subarray(from, from + k), (start + i) * k);
              }
            }
          }
          scored += r.scored;
          done += end - start;
          onProgress?.(done, data.points);
        }),
      );
    }
    await Promise.all(jobs);
    return labels.map((l, si) => ({ points: data.points, k, labels: l, scores: scores[si]!, outputsScoredPerPoint: scored / Math.max(1, data.points) }));
  }

  /**
   * P@k, nDCG@k and PSP@k over the whole of `data`, how many outputs were scored per point, and the
   * seconds the predictions took (`predictSeconds`, metrics excluded; the start of the worker threads included unless `executor` is given).
   */
  async evaluate(data: SparseDataset, opts: EvaluateOptions = {}): Promise<Metrics & { outputsScoredPerPoint: number; predictSeconds: number }> {
    if (data?.points === 0) throw new Error('Cannot evaluate on 0 points: the evaluation data is empty');
    const ks = opts.k ?? [1, 3, 5];
    const kMax = Math.max(...ks);
    const t0 = performance.now();
    const pred = await this.predict(data, { ...opts, k: kMax });
    const predictSeconds = (performance.now() - t0) / 1000;
    const numLabels = this.config.layers.at(-1)!.size;
    const freq = this.labelFreq ?? labelFrequencies(new Uint32Array(0), numLabels);
    const invP = inversePropensity(freq, Math.max(this.trainPoints, 1), opts.propensityA ?? 0.55, opts.propensityB ?? 1.5);
    const m = computeMetrics({ topIdx: pred.labels, kMax, labelOffsets: data.labelOffsets, labelIndices: data.labelIndices, invPropensity: invP, ks });
    return Object.assign(m, { outputsScoredPerPoint: pred.outputsScoredPerPoint, predictSeconds });
  }

  /**
   * A copy of this network with `labels` output neurons (at least the current number), for training on
   * data with labels it has never seen (warm start). Every layer's weights, biases, Adam moments and step
   * counters are copied, so old labels keep their rows bit for bit; the new rows are initialised as a new
   * network's are (seeded, zero bias, zero moments, zero steps). Hash tables, the logQ correction and the
   * cluster index are rebuilt for the new label count by the next fit() or sampled predict(). The text
   * vectorizer is kept; `labelNames` (default: the current names) must name every label when given.
   * This network is left unchanged.
   *
   * @example
   * ```ts
   * const net = await Network.load('m.sl');
   * const grown = net.grow(net.config.layers.at(-1)!.size + 50);
   * await grown.fit(moreData, { epochs: 3 });
   * ```
   */
  grow(labels: number, labelNames?: readonly string[]): Network {
    const last = this.config.layers.length - 1;
    const outputs = this.config.layers[last]!.size;
    if (!Number.isInteger(labels) || labels < outputs || labels > 0xffffffff) {
      throw new Error(`Expected integer >= ${outputs} (the current labels) for labels but received ${JSON.stringify(labels)}`);
    }
    if (labelNames !== undefined && labelNames.length > labels) {
      throw new Error(`Expected at most ${labels} label names but received ${labelNames.length}`);
    }
    const stored = storedConfig(this.config);
    const net = new Network({ ...stored, layers: stored.layers.map((l, k) => (k === last ? { ...l, size: labels } : l)) });
    // An inference-sized network (Network.load) has no optimizer state to copy: the new one's stays zero,
    // as the loaded model's would have been.
    const trained = this.hasTrainingState;
    this.spec.layers.forEach((from, k) => {
      const to = net.spec.layers[k]!;
      if (k < last || labels === outputs) {
        for (const key of ['weights', 'bias', 'mWeights', 'vWeights', 'mBias', 'vBias', 'rowSteps', 'biasSteps'] as const) {
          if (trained || key === 'weights' || key === 'bias') to[key].set(from[key]);
        }
        return;
      }
      if (from.inputMajor) {
        // (inDim, outDim): each input row keeps its first `outputs` entries.
        for (const key of ['weights', 'mWeights', 'vWeights'] as const) {
          if (!trained && key !== 'weights') continue;
          for (let i = 0; i < from.inDim; i++) to[key].set(from[key].subarray(i * outputs, (i + 1) * outputs), i * labels);
        }
        if (trained) to.rowSteps.set(from.rowSteps);
      } else {
        // (outDim, inDim): the old rows are a prefix.
        for (const key of ['weights', 'mWeights', 'vWeights', 'rowSteps'] as const) if (trained || key === 'weights') to[key].set(from[key]);
      }
      for (const key of ['bias', 'mBias', 'vBias', 'biasSteps'] as const) if (trained || key === 'bias') to[key].set(from[key]);
    });
    // The wide part's pairs name old labels only (ids stay valid): copied as they are. New labels learn
    // through the network; they get no pairs of their own (pairs are chosen by a network's first fit).
    const fromWide = this.spec.layers[last]!.wide;
    if (fromWide && net.spec.layers[last]!.wide) {
      const w = allocateWide(fromWide.inputDim, fromWide.labels.length);
      w.offsets.set(fromWide.offsets);
      w.labels.set(fromWide.labels);
      w.weights.set(fromWide.weights);
      if (fromWide.accum.length === fromWide.labels.length) w.accum.set(fromWide.accum);
      net.spec.layers[last]!.wide = w;
    }
    net.batchesDone = this.batchesDone;
    net.rebuildRound = this.rebuildRound;
    net.trainPoints = this.trainPoints;
    if (this.labelFreq) {
      net.labelFreq = new Uint32Array(labels);
      net.labelFreq.set(this.labelFreq.subarray(0, Math.min(outputs, this.labelFreq.length)));
    }
    net.textVectorizer = this.textVectorizer;
    net.labelNames = labelNames ?? this.labelNames;
    return net;
  }

  /**
   * Writes the model (config, weights, training label frequencies) atomically with a checksum. `path` must
   * be a regular file or a new name (a symbolic link is followed to its regular file; see writeFileAtomic).
   */
  async save(path: string, opts: SaveOptions = {}): Promise<void> {
    await saveModel(path, this, opts.training);
  }

  /**
   * Reads a model written by `save` (or the weights of a checkpoint file, for evaluation). Hash tables
   * are rebuilt from the weights on first sampled use. The file is checked before anything is allocated:
   * its configuration by the rules of `new Network`, its sections against that configuration, and the
   * network's memory against `opts.maxMemory` (default: 90% of the machine's memory); weights must be
   * finite. Errors name the file and what is wrong with it.
   *
   * A model file loads inference-sized (NetworkOptions.inference): weights, biases and hash functions, and
   * the memory plan checked is that of prediction; fit() and grow() allocate the optimizer state (zero: a
   * model file holds none) and tables when the network trains. A checkpoint file loads with its optimizer
   * state and tables (the training plan).
   */
  static async load(path: string, opts: LoadOptions = {}): Promise<Network> {
    const limits: LoadLimits = { maxMemory: opts.maxMemory, workers: opts.workers };
    return loadModel(path, (config) => new Network(config, { inference: true }), async (file) => {
      const { network } = await readCheckpoint(file, (config) => new Network(config), undefined, limits);
      // The checkpoint's tables index the weights of its last scheduled rebuild; inference wants the
      // current ones. Replay the seed of that rebuild, as a loaded model does.
      network.rebuildRound = Math.max(0, network.rebuildRound - 1);
      network.invalidateTables();
      return network;
    }, limits);
  }

  /**
   * Restores a network from a checkpoint written by `fit({ checkpoint })`: `path` is a checkpoint
   * directory (its newest usable checkpoint is loaded; damaged newer ones are renamed to
   * `<file>.corrupt` and reported through `onWarning`) or one checkpoint file. The next `fit()`
   * continues the run (see fit); `resumeInfo` says where it stands.
   *
   * @example
   * ```ts
   * const net = await Network.resume('ckpt');
   * await net.fit(train, { checkpoint: { dir: 'ckpt', every: '10m' } }); // epochs etc. as saved
   * ```
   */
  static async resume(path: string, opts: ResumeOptions = {}): Promise<Network> {
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
    net.pendingResume = { data: r.meta.data };
    net.resumeInfo = {
      file: r.file, position: r.meta.position, fitOptions: r.meta.options, extra: r.meta.extra,
      reason: r.meta.reason, savedAt: r.meta.savedAt, skipped: r.skipped,
    };
    // fit() may go on writing checkpoints next to this one (not if newer ones exist there: a fork).
    net.lastCheckpoint = { dir: dirname(r.file), batchesDone: r.meta.position.batchesDone };
    return net;
  }

  /** Marks tables and the cluster index stale (after weights were replaced from a file). */
  invalidateTables(): void {
    this.tablesFresh = false;
    this.indexFresh = false;
  }

  /**
   * Builds the index that sampled inference probes for a sampled output layer, from its current weights
   * (native/net_cluster.cc): a head of the `head` most frequent training labels (default 0.5% of the
   * outputs), scored for every query, and spherical k-means clusters (after the MIPS transform) of the
   * other labels seen in training, probed by centre score (labels never seen in training are not
   * indexed: no training point gave them evidence, and the exact top-1 is one of them for under 1% of
   * points at the 670k shape). Default `clusters`: round(sqrt(indexed labels)). Returns seconds.
   */
  buildClusterIndex(o: { head?: number; clusters?: number; iters?: number } = {}): number {
    const t0 = performance.now();
    const last = this.spec.layers.at(-1)!;
    const s = last.sampling;
    if (s) {
      const N = last.outDim, d = last.inDim;
      const freq = this.labelFreq && this.labelFreq.length === N ? this.labelFreq : new Uint32Array(N);
      let seen = 0;
      for (let j = 0; j < N; j++) if (freq[j]! > 0) seen++;
      const universe = seen > 0 ? seen : N;
      const byFreq = new Uint32Array(N);
      for (let j = 0; j < N; j++) byFreq[j] = j;
      byFreq.sort((x, y) => freq[y]! - freq[x]! || x - y);
      const H = Math.min(universe, o.head ?? Math.ceil(0.005 * N));
      const head = sharedUint32(H);
      head.set(byFreq.subarray(0, H));
      head.sort();
      const tail = byFreq.slice(H, universe).sort();
      const C = tail.length ? Math.max(1, Math.min(tail.length, o.clusters ?? Math.round(Math.sqrt(tail.length)))) : 0;
      const centroids = sharedFloat32(C * (d + 2)), offsets = sharedUint32(C + 1), members = sharedUint32(tail.length);
      if (C > 0) native().netClusterBuild(last.weights, last.bias, d, tail, C, o.iters ?? 8, 65536, (this.seed * 48271 + 11) >>> 0, centroids, offsets, members);
      s.index = { C, budget: 0, centroids, offsets, members, head };
    }
    this.indexFresh = true;
    const seconds = (performance.now() - t0) / 1000;
    this.clusterIndexSeconds += seconds;
    return seconds;
  }
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
