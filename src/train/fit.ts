// The training loop: epochs of shuffled mini-batches dispatched to an executor (inline or a pool of
// HOGWILD workers), with hash-table rebuilds scheduled between batches, progress and cancellation.
//
// Exactly-once: every row of an epoch belongs to exactly one batch, and no batch is applied twice. A
// task that fails before touching the weights is retried once (on whichever worker is free); a second
// failure stops training with an error that says how many batches completed, so a checkpoint taken then
// is consistent. A task that fails after it started updating the weights is not retried: its batch is
// reported as lost (FitStats.lostBatches, a warning). Hung tasks time out. See src/train/batch-runner.ts.
import type { SparseDataset } from '../datasets/csr.js';
import { Xoshiro128, shuffleInPlace } from '../util/rng.js';
import type { NetSpec } from '../native/network-types.js';
import type { CheckpointFailure, CheckpointInfo, CheckpointOptions, CheckpointReason, TrainingPhase, TrainingPosition } from './checkpoint.js';
import { InlineExecutor, type Executor } from '../network/executor.js';
import { RebuildSchedule, type RebuildScheduleOptions } from '../network/schedule.js';
import type { InjectedFault, TrainResult, TrainTask } from '../network/tasks.js';
import { BatchRunner, maxLostBatches, type TaskOutcome } from './batch-runner.js';
import type { BlendReport, SelectionReport, ValidationOptions, ValidationPoint } from './early-stop.js';
import type { InputScaleReport, InputScaling } from '../network/input-scale.js';
import type { RerankReport } from '../network/rerank.js';
import type { PhaseSeconds, PhaseTimer } from '../util/phases.js';
import type { CalibrationOptions, CalibrationReport } from '../network/calibration.js';

/**
 * What Network.fit steers while the loop runs: the rows trained on (all when absent: a held-out slice
 * is left out otherwise), a learning-rate multiplier read at every batch, and a stop flag read between
 * epochs.
 */
export interface FitControl {
  rows?: Uint32Array;
  lrScale: number;
  stop: boolean;
  /** Held-out validation may stop training before `epochs` (FitProgress.epochsIsLimit). Default false. */
  openEnded?: boolean;
  /** A further learning-rate multiplier for batch `batch` of 0-based epoch `epoch` (held-out schedule 'anneal'). Default 1. */
  lrAt?: (epoch: number, batch: number, batchesPerEpoch: number) => number;
}

/** Options of `Network.fit`. */
export interface FitOptions {
  /**
   * Passes over the training set. Default: decided by the data: a slice of the training set is held out
   * and training stops when P@k on it stops improving (see `validation`). Giving `epochs` trains exactly
   * that many passes over all of the data (no held-out slice unless `validation` is also given).
   */
  epochs?: number;
  /**
   * Held-out validation that decides the number of epochs, cuts the learning rate on plateaus and keeps
   * the best epoch's weights (src/train/early-stop.ts); on small training sets (a held-out slice under
   * `minHoldout` points) k-fold selection of the epoch count followed by training on all of the data.
   * Default: on (its defaults) when `epochs` is not given, off when it is; `false` turns it off (then
   * `epochs` defaults to 5).
   */
  validation?: ValidationOptions | false;
  /**
   * Calibrated per-label probabilities (src/network/calibration.ts), fitted on the points that validation
   * holds out (the held-out slice, the refit's copy's slice, or the k-fold folds) at the end of the run,
   * with the default threshold of prediction by threshold. Without validation nothing is held out and no
   * calibration is fitted. `false`: none. Default: on, with CalibrationOptions' defaults.
   */
  calibration?: CalibrationOptions | false;
  /**
   * Scaling of raw-valued inputs, decided by the first fit() of a network (src/network/input-scale.ts):
   * 'auto' compresses term counts (every value a non-negative integer, some above 1: each count n > 1
   * becomes 1 + ln n) and otherwise divides every feature by its largest |value| in the training data when
   * some value lies outside [-1, 1] or the features' largest magnitudes span more than 10^4; 'maxabs'
   * always divides, 'log' always compresses (values beyond +-1 to +-(1 + ln |value|)), 'off' does neither.
   * The transform is kept with the network (model files, checkpoints) and applied by predict() and
   * evaluate(). A network that has been trained keeps what its first fit() decided. Default 'auto'.
   */
  inputScaling?: InputScaling;
  /** Points per mini-batch. Default 128 (SLIDE). */
  batchSize?: number;
  /**
   * A multiplier of `lr` (and of the wide part's rate) for batch `batch` of 0-based epoch `epoch` of the run
   * (`batchesPerEpoch` batches an epoch), on top of held-out validation's own schedule: how k-fold
   * selection's folds follow the 'anneal' descent together. Not kept in checkpoints. Default: none.
   */
  lrSchedule?: (epoch: number, batch: number, batchesPerEpoch: number) => number;
  /** Adam learning rate. Default 2e-3 with a dense output layer (4e-3 where the data updates the first layer's rows in few batches), 1e-2 with a sampled one (see defaultTraining in src/network/config.ts); under k-fold selection with folds of fewer than 4 batches, up to twice the base rate (kfoldRate); the two raises do not compound. */
  lr?: number;
  /** Adam beta1. Default 0.9. */
  beta1?: number;
  /** Adam beta2. Default 0.999. */
  beta2?: number;
  /** Adam epsilon. Default 1e-8. */
  eps?: number;
  /**
   * Worker threads updating the shared weights (HOGWILD); 0 runs in the calling thread. Default: the
   * machine's cores when the output layer is sampled, else 1 (see defaultTraining in src/network/config.ts).
   */
  workers?: number;
  /**
   * Threads that share each mini-batch's dense work inside the kernels: layer 0's forward (by samples), a
   * dense output layer (by rows) and layer 0's update (by feature rows). Unlike HOGWILD workers they never
   * race: every row still takes one update per batch, and a given count gives the same result in every run.
   * Default: the machine's cores when the output layer is dense and one worker trains, else 1 (see
   * defaultTraining in src/network/config.ts).
   */
  threads?: number;
  /**
   * How workers share the work: false gives each worker whole mini-batches (several batches in flight);
   * true splits every batch into one slice per worker, each slice applying its part of the batch gradient
   * (one batch in flight). Measured with bench/scaling --split; whole batches were faster. Default false.
   */
  split?: boolean;
  /** Hash-table rebuild schedule (sampled layers only). */
  rebuild?: RebuildScheduleOptions;
  /**
   * Runs the batches, rebuilds and predictions on this executor instead of a pool of `workers` threads made
   * for the call; fit() closes it when done. `train --distributed` passes its data-parallel executor
   * (src/train/distributed.ts). Default: none.
   */
  executor?: Executor;
  /** Shuffle rows every epoch. Default true. */
  shuffle?: boolean;
  /** Called about every `progressEvery` seconds and at the end of each epoch. */
  onProgress?: (p: FitProgress) => void;
  /** Seconds between progress callbacks. Default 0.5. */
  progressEvery?: number;
  /** Called after each epoch (for evaluation, checkpoints). Awaited before the next epoch. */
  onEpochEnd?: (epoch: number, stats: FitStats) => void | Promise<void>;
  /** Stops cleanly after the batches in flight when aborted (Ctrl-C); with `checkpoint`, a checkpoint is then written. */
  signal?: AbortSignal;
  /**
   * Periodic checkpoints (src/train/checkpoint.ts), taken between batches with none in flight, plus one
   * when fit() ends or is aborted. Continue from them with `resume(dir)`. Default: none.
   */
  checkpoint?: CheckpointOptions;
  /**
   * Seconds a train task may run before its worker is considered hung: the thread is terminated and the
   * task treated as failed (retried if it had not started updating the weights, else its batch is
   * reported as lost; see src/train/batch-runner.ts). Worker pools only (workers >= 1); for a group of
   * batches, counted from its start or its last completed batch. Default: 600 s until a first task has
   * finished, then max(60 s, 100 x the median batch time so far).
   */
  taskTimeout?: number;
  /**
   * Receives warnings: a checkpoint that could not be written (training goes on), a batch lost to a
   * worker failure. Default: written to stderr as `sublinear: <message>`.
   */
  onWarning?: (message: string) => void;
  /**
   * Testing only: a fault in the task of batch `batch` (0-based, in the first epoch trained) on its first
   * `failures` attempts: `kind` 'throw' (default) throws inside the worker, 'exit' ends the worker thread
   * (process.exit), 'hang' blocks it for ten minutes; `at` 'before-update' (default) before the task
   * touches the weights, 'after-update' after its update was applied; `count` consecutive batches from
   * `batch` (default 1). 'exit' and 'hang' need workers >= 1. Default none.
   */
  faultInjection?: { batch: number; failures: 1 | 2; kind?: InjectedFault['kind']; at?: InjectedFault['at']; count?: number };
  /**
   * Where fit() adds the wall-clock seconds of its phases (training, held-out scoring, selection, the blend,
   * the re-ranker, ...; src/util/phases.ts), e.g. a job's timer that also holds its reading and saving.
   * FitStats.phases holds this fit's totals either way. Default: a timer of its own.
   */
  phases?: PhaseTimer;
  /**
   * true: once the epochs are trained (the final checkpoint written, the best epoch's weights restored), the
   * Adam moments and step counters are released before the re-ranker and the calibration run, so that the
   * run's peak memory is not training state plus the re-ranker's (debian-tags: 53 MB of its 81 MB network state;
   * Network.releaseTrainingState). The network is then as a loaded model: a later fit() starts them at zero
   * instead of continuing them. For a caller that saves or predicts and does not train the network again
   * (`sublinear train`). Default false.
   */
  releaseTrainingState?: boolean;
}

/**
 * Whole batches are sent to a worker in groups that take about this many milliseconds (at most MAX_GROUP
 * batches): with one worker and batches of a few milliseconds, a message per batch left the worker idle
 * for the hand-off (about 1 ms a batch; debian-tags on a 2-vCPU EPYC: a quarter of the training time).
 */
const GROUP_MS = 50;
const MAX_GROUP = 64;

/** A checkpoint that could not be written (FitStats.checkpointFailures). */
export type { CheckpointFailure } from './checkpoint.js';

export interface FitProgress {
  /** 0-based epoch in progress. */
  epoch: number;
  /** Epochs planned; with held-out validation (`epochsIsLimit`) only the most there can be. */
  epochs: number;
  /**
   * True when held-out validation decides when training stops: `epochs` is then an upper bound
   * (validation.maxEpochs, or the `epochs` given), usually far from where training stops, and so is
   * `etaSeconds`; `epochEtaSeconds` is the time known to be left.
   */
  epochsIsLimit: boolean;
  batch: number;
  batchesPerEpoch: number;
  samples: number;
  /** Mean loss over the batches since the last progress report. */
  loss: number;
  samplesPerSec: number;
  /** Seconds to the end of `epochs` at the mean speed so far. */
  etaSeconds: number;
  /** Seconds to the end of the epoch in progress at the mean speed so far. */
  epochEtaSeconds: number;
  /** Mean active-set size of the last layer (all neurons when dense). */
  avgActive: number;
  /** Fraction of true labels not retrieved by LSH (0 for dense output layers). */
  labelMissRate: number;
  /**
   * Present while k-fold selection of the epoch count trains its fold networks (small training sets, see
   * ValidationOptions.minHoldout): the folds train side by side and fold `index` 0 (of `folds`) reports;
   * `epoch`/`epochs` then count the folds' epochs. Absent while the network itself trains.
   */
  fold?: { index: number; folds: number };
  /**
   * 'holdout' while the copy that chooses the epoch count on the held-out slice trains, before the network
   * trains on all of the points (ValidationOptions.refitMaxPoints). Absent while the network itself trains.
   */
  selection?: 'holdout';
}

export interface FitStats {
  /** Epochs completed (counted to the end of the run: a resumed run counts the epochs before the checkpoint). */
  epochs: number;
  /**
   * Per completed epoch of this call: cumulative training seconds, the epoch's mean loss, the mean size of
   * the output layer's active set, and (sampled output layers) `labelRecall`, the fraction of true labels
   * found in at least one of their sample's query buckets (the tables' recall of the right neurons).
   */
  history: { epoch: number; trainSeconds: number; loss: number; activePerSample: number; labelRecall?: number }[];
  batches: number;
  samples: number;
  /** Wall-clock training seconds, rebuilds included, epoch callbacks and checkpoint writes excluded. */
  trainSeconds: number;
  /** Seconds of scheduled hash-table rebuilds during training (part of trainSeconds). */
  rebuildSeconds: number;
  /**
   * Seconds indexing the tables outside the training loop: the first build before training and the
   * rebuild from the final weights after it (not part of trainSeconds).
   */
  indexSeconds: number;
  rebuilds: number;
  samplesPerSec: number;
  /** Mean loss of the last epoch. */
  lastLoss: number;
  /** With validation: the held-out score after every epoch (this fit() call's epochs and earlier ones of a resumed run). */
  validation?: ValidationPoint[];
  /** With validation: the 1-based epoch whose weights the network now holds (the best held-out score). */
  bestEpoch?: number;
  /** With validation under schedule 'anneal': the rate began to fall after `from` epochs, over `epochs` epochs. */
  anneal?: { from: number; epochs: number };
  /** With validation: points held out of training. */
  validationPoints?: number;
  /**
   * With validation: how the number of epochs was chosen, one held-out slice ('holdout') or, on small
   * training sets, k-fold cross-validation followed by training on all of the data ('kfold').
   */
  selection?: SelectionReport;
  /** With validation and a wide output part (ValidationOptions.blend): the weight chosen for the network's logit. */
  blend?: BlendReport;
  /** With a re-ranker on the output layer (RerankConfig): what was trained and the weight chosen for it. */
  rerank?: RerankReport;
  /**
   * With validation (FitOptions.calibration): the calibration fitted on the held-out points, its threshold
   * and what it scored there; or why none was fitted.
   */
  calibration?: (CalibrationReport & { threshold: number; shortlist: number }) | { skipped: string };
  /**
   * What the first fit() found in the training data and decided about input scaling (see
   * FitOptions.inputScaling), or that the network's stored scaling was applied. Absent for a network
   * trained or resumed without scaling.
   */
  inputScaling?: InputScaleReport;
  /** True if training stopped early because of `signal`. */
  aborted: boolean;
  /**
   * 'selection' when `signal` stopped the run during its selection phase (TrainingPosition.phase): nothing
   * was trained, the network is as the run began, and there is no model to keep (the checkpoint of that
   * position, if any, resumes the run). Absent otherwise.
   */
  stoppedIn?: TrainingPhase;
  /**
   * Batches whose task failed after it had started updating the weights (or was cancelled when training
   * stopped): not retried, so never applied twice, but part or all of their update may be missing. Not
   * counted in `batches` and `samples`. 0 in a run without worker failures.
   */
  lostBatches: number;
  /**
   * Train tasks sent to the executor by this call: one per batch (per slice with `split`), or one per group
   * of consecutive batches where the executor runs groups (Executor.trainGroup); retries count again.
   * Absent for label-sharded training.
   */
  trainTasks?: number;
  /** With `checkpoint`: the checkpoints that could not be written (training went on). */
  checkpointFailures?: CheckpointFailure[];
  /**
   * Wall-clock seconds per phase (src/util/phases.ts): `train` (the epochs), `heldout` (scoring the held-out
   * slice after each epoch), `wide` (choosing the wide part's pairs), `blend`, `rerank.shortlists`,
   * `rerank.classifiers`, `rerank.weight`, `allocate` (mapping the training state), `selection.*` (the
   * selection copy's or folds' own phases), `refit` markers; with FitOptions.phases, that timer's totals.
   */
  phases?: PhaseSeconds;
}

/** Internal: everything the loop needs from a network. */
export interface FitTarget {
  spec: NetSpec;
  seed: number;
  /** Rebuilds every sampled layer's tables, split into table ranges across the executor. Returns seconds. */
  /**
   * A scheduled rebuild point: rebuilds every sampled layer's tables (split into table ranges across the
   * executor), or, under the 'change' policy, only when the code drift sketch says so.
   */
  scheduledRebuild(exec: Executor): Promise<{ seconds: number; rebuilt: boolean }>;
  /** Schedule state persisted across fit() calls (and checkpoints). */
  schedule: RebuildSchedule | null;
  /**
   * Training queries hash tables (a sampled hidden layer, or an output layer with table candidates or a
   * per-sample fill). False: no scheduled rebuild runs and no label recall is measured (Network.fit then
   * builds the tables neither before the first batch nor after the last). Absent: true.
   */
  tablesInTraining?: boolean;
  /** Batches trained so far over the network's life (seeds and schedule continue across fit calls). */
  batchesDone: number;
  /** Adagrad rate of the output layer's wide part (WideConfig.lr), scaled like lr by early stopping. Absent: no wide part. */
  wideLr?: number;
}

/**
 * A batch whose mean cross-entropy loss is above this (or not finite) stops training with DivergedError.
 * A network that starts with small random weights has a loss near log(labels) (< 21 even at 10^9 labels);
 * only logits thousands apart reach 10^4.
 */
export const DIVERGED_LOSS = 1e4;

/**
 * Training stopped because a batch's mean loss was NaN, infinite or above DIVERGED_LOSS (almost always a learning rate too high for
 * the data). No checkpoint is written after that batch, so the last one holds weights from before it.
 *
 * @example
 * ```ts
 * try { await train({ train: 'train.txt', lr: 1e9 }); }
 * catch (e) { if (e instanceof DivergedError) console.error(e.message); else throw e; } // ... try a lower one
 * ```
 */
export class DivergedError extends Error {
  override name = 'DivergedError';
  constructor(
    /** 0-based batch within its epoch. */
    readonly batch: number,
    /** 0-based epoch. */
    readonly epoch: number,
    readonly loss: number,
    readonly lr: number,
  ) {
    super(`training diverged: the mean loss of batch ${batch + 1} of epoch ${epoch + 1} is ${loss.toPrecision(4)}; ` +
      `the learning rate ${lr} is too high for this data: try a lower one (e.g. ${Number((lr / 10).toPrecision(2))})`);
  }
}

function unitInterval(v: number, what: string): number {
  if (!(typeof v === 'number' && v >= 0 && v < 1)) throw new Error(`Expected number in [0, 1) for ${what} but received ${JSON.stringify(v)}`);
  return v;
}
function positiveNumber(v: number, what: string): number {
  if (!(typeof v === 'number' && v > 0 && Number.isFinite(v))) throw new Error(`Expected positive number for ${what} but received ${JSON.stringify(v)}`);
  return v;
}

function positiveIntOption(v: unknown, what: string, max: number): number {
  if (typeof v !== 'number' || !Number.isInteger(v) || v < 1 || v > max) throw new Error(`Expected integer in [1, ${max}] for ${what} but received ${JSON.stringify(v)}`);
  return v;
}

export function resolveFitOptions(o: FitOptions) {
  const epochs = o.epochs ?? 5;
  const batchSize = o.batchSize ?? 128;
  const lr = o.lr ?? 1e-3;
  if (!Number.isInteger(epochs) || epochs < 0) throw new Error(`Expected non-negative integer for epochs but received ${JSON.stringify(o.epochs)}`);
  if (!Number.isInteger(batchSize) || batchSize <= 0) throw new Error(`Expected positive integer for batchSize but received ${JSON.stringify(o.batchSize)}`);
  if (!(lr > 0 && Number.isFinite(lr))) throw new Error(`Expected positive number for lr but received ${JSON.stringify(o.lr)}`);
  return {
    epochs,
    batchSize,
    lr,
    beta1: unitInterval(o.beta1 ?? 0.9, 'beta1'),
    beta2: unitInterval(o.beta2 ?? 0.999, 'beta2'),
    eps: positiveNumber(o.eps ?? 1e-8, 'eps'),
    shuffle: o.shuffle ?? true,
    progressEvery: o.progressEvery ?? 0.5,
    split: o.split ?? false,
    threads: positiveIntOption(o.threads ?? 1, 'threads', 256),
  };
}

/** Seed of batch `b` (global batch counter) under network seed `seed`. */
export function batchSeed(seed: number, b: number): number {
  let x = (Math.imul(seed ^ 0x5bd1e995, 0x9e3779b1) ^ Math.imul(b + 1, 0x85ebca6b)) >>> 0;
  x ^= x >>> 16;
  x = Math.imul(x, 0x7feb352d) >>> 0;
  x ^= x >>> 15;
  return x >>> 0;
}

/** Row order of epoch `epoch`: a seeded shuffle, identical for every worker count. */
export function epochOrder(points: number, seed: number, epoch: number, shuffle: boolean): Uint32Array {
  const order = new Uint32Array(points);
  for (let i = 0; i < points; i++) order[i] = i;
  return shuffle ? shuffleInPlace(order, new Xoshiro128(BigInt(seed) * 1000003n + BigInt(epoch) + 17n)) : order;
}

/** Where fitLoop starts: batch `batch` (0-based) of epoch `epoch` (0-based). */
export interface FitStart {
  epoch: number;
  batch: number;
}

/** The loop's view of a Checkpointer (src/train/checkpoint.ts). */
export interface FitCheckpointHook {
  /** True when a checkpoint is due after `batchesDone` global batches. */
  due(batchesDone: number): boolean;
  /**
   * Writes one; called only with no batch or rebuild in flight: `tasksInFlight` (the executor's count of
   * unsettled tasks plus the loop's batches in flight) must be 0, and save() throws otherwise.
   */
  save(position: TrainingPosition, reason: CheckpointReason, tasksInFlight: number): Promise<CheckpointInfo | null>;
  /** Checkpoints that could not be written so far (the run goes on without them). */
  readonly failures?: CheckpointFailure[];
}

/**
 * Trains epochs `start.epoch .. epochs-1`, the first of them from batch `start.batch` (a resumed run:
 * the rows of that epoch's earlier batches were trained before the checkpoint). `target.batchesDone`
 * must already count those earlier batches; it is advanced as batches complete (at checkpoints and
 * epoch ends).
 */
export async function fitLoop(
  target: FitTarget,
  data: SparseDataset,
  exec: Executor,
  opts: FitOptions,
  start: FitStart = { epoch: 0, batch: 0 },
  checkpoint?: FitCheckpointHook,
  control: FitControl = { lrScale: 1, stop: false },
): Promise<FitStats> {
  const o = resolveFitOptions(opts);
  const rows = control.rows;
  const nTrain = rows ? rows.length : data.points;
  const batchesPerEpoch = Math.ceil(nTrain / o.batchSize);
  const startEpoch = start.epoch;
  const totalBatches = Math.max(0, (o.epochs - startEpoch) * batchesPerEpoch - start.batch);
  let samples = 0, batches = 0, rebuildSeconds = 0, callbackSeconds = 0;
  let aborted = false;
  const t0 = performance.now();
  let lastYield = t0;
  let lastReport = t0, repLoss = 0, repSamples = 0, repActive = 0, repMissed = 0, repLabels = 0;
  let epochLoss = 0, epochSamples = 0, lastLoss = NaN, epochActive = 0, epochMissed = 0, epochLabels = 0;
  let epochsDone = startEpoch;
  const history: FitStats['history'] = [];
  const failures: Error[] = [];
  let diverged: DivergedError | null = null;
  const warn = opts.onWarning ?? ((m: string) => void process.stderr.write(`sublinear: ${m}\n`));
  const fault = opts.faultInjection;
  if (fault && (fault.kind === 'exit' || fault.kind === 'hang') && exec instanceof InlineExecutor) {
    throw new Error(`faultInjection kind '${fault.kind}' needs a worker pool (workers >= 1)`);
  }
  const runner = new BatchRunner(exec, { taskTimeout: opts.taskTimeout });
  // Whole batches go to the workers in groups of consecutive batches (one message per group) where the
  // executor runs groups; split batches and the distributed executor's global steps go one at a time.
  const grouped = !o.split && typeof exec.trainGroup === 'function';
  // The rate's multiplier at batch b of epoch e: the caller's schedule (FitOptions.lrSchedule) and validation's.
  const decayAt = (e: number, b: number) =>
    (opts.lrSchedule ? opts.lrSchedule(e, b, batchesPerEpoch) : 1) * (control.lrAt ? control.lrAt(e, b, batchesPerEpoch) : 1);
  const maxLost = maxLostBatches(totalBatches);
  let lostBatches = 0;
  // A stop request reaches the tasks in flight at once, even while the loop awaits them: the runner gives
  // them a grace and then terminates them (a hung worker included), which settles them and wakes the loop.
  // (Removed again however fitLoop ends: the finally below.)
  const onAbort = () => runner.stop();
  opts.signal?.addEventListener('abort', onAbort, { once: true });
  try {
    const report = (epoch: number, batch: number) => {
      const now = performance.now();
      const elapsed = (now - t0) / 1000 - callbackSeconds;
      const sps = samples / Math.max(elapsed, 1e-9);
      opts.onProgress?.({
        epoch, epochs: o.epochs, epochsIsLimit: control.openEnded ?? false, batch, batchesPerEpoch, samples,
        loss: repSamples ? repLoss / repSamples : NaN,
        samplesPerSec: sps,
        etaSeconds: ((totalBatches - batches) * o.batchSize) / Math.max(sps, 1e-9),
        epochEtaSeconds: (Math.max(0, batchesPerEpoch - batch) * o.batchSize) / Math.max(sps, 1e-9),
        avgActive: repSamples ? repActive / repSamples : 0,
        labelMissRate: repLabels ? repMissed / repLabels : 0,
      });
      lastReport = now;
      repLoss = repSamples = repActive = repMissed = repLabels = 0;
    };

    // Position of the last completed (quiescent) point, for the final checkpoint.
    let posEpoch = startEpoch, posBatch = start.batch;
    for (let epoch = startEpoch; epoch < o.epochs && !aborted && !control.stop; epoch++) {
      const order = epochOrder(nTrain, target.seed, epoch, o.shuffle);
      if (rows) for (let i = 0; i < nTrain; i++) order[i] = rows[order[i]!]!;
      epochLoss = epochSamples = epochActive = epochMissed = epochLabels = 0;
      const inflight = new Set<Promise<void>>();
      let nextBatch = epoch === startEpoch ? start.batch : 0;
      // Global number of batch 0 of this epoch: batch seeds and the schedules count from it.
      const epochBase = target.batchesDone - nextBatch;

      const taskOf = (b: number): TrainTask => {
        const start = b * o.batchSize;
        const pointIds = order.slice(start, Math.min(start + o.batchSize, nTrain));
        const global = epochBase + b;
        const task: TrainTask = {
          net: target.spec, data, pointIds,
          lr: o.lr * control.lrScale * decayAt(epoch, b), beta1: o.beta1, beta2: o.beta2, eps: o.eps,
          gradScale: 1 / pointIds.length,
          seed: batchSeed(target.seed, global),
          ...(o.threads > 1 ? { threads: o.threads } : {}),
          ...(target.wideLr !== undefined ? { wideLr: target.wideLr * control.lrScale * decayAt(epoch, b) } : {}),
        };
        if (fault && epoch === startEpoch && b >= fault.batch && b < fault.batch + (fault.count ?? 1)) {
          task.fault = { belowAttempt: fault.failures, kind: fault.kind ?? 'throw', at: fault.at ?? 'before-update' };
        }
        return task;
      };

      // Consecutive whole batches b0 .. b0 + count - 1 as one task (BatchRunner.runGroup), each batch's
      // outcome accounted in order; accounting stops at the first failure.
      const runGroup = async (b0: number, count: number) => {
        const tasks = Array.from({ length: count }, (_, i) => taskOf(b0 + i));
        const outcomes = await runner.runGroup(tasks);
        for (let i = 0; i < outcomes.length && !failures.length; i++) account(b0 + i, tasks[i]!, [outcomes[i]!]);
      };

      const runBatch = async (b: number) => {
        const task = taskOf(b);
        const pointIds = task.pointIds;
        // Whole batches go to one worker each; with `split`, a batch is cut into one slice per worker and
        // each slice updates the shared weights with its part of the batch gradient (HOGWILD within a batch).
        const parts = o.split ? Math.min(exec.parallelism, pointIds.length) : 1;
        const slices: TrainTask[] = [];
        for (let j = 0; j < parts; j++) {
          const ids = parts === 1 ? pointIds : pointIds.subarray(Math.floor((j * pointIds.length) / parts), Math.floor(((j + 1) * pointIds.length) / parts));
          slices.push(parts === 1 ? task : { ...task, pointIds: ids, seed: (task.seed + j * 0x9e3779b9) >>> 0 });
        }
        account(b, task, await Promise.all(slices.map((t) => runner.run(t))));
      };

      // What the task(s) of batch b came to: the stats, a lost batch (a warning) or a failure.
      const account = (b: number, task: TrainTask, outcomes: TaskOutcome[]) => {
        const pointIds = task.pointIds;
        const what = `batch ${b} of epoch ${epoch + 1}`;
        const failed = outcomes.find((x) => 'failed' in x);
        if (failed && 'failed' in failed) {
          failures.push(new Error(`${what} failed twice: ${failed.failed}`));
          return;
        }
        const lost = outcomes.find((x) => 'lost' in x);
        if (lost && 'lost' in lost) {
          lostBatches++;
          // Training is stopping (Ctrl-C): a batch that did not finish within the grace is reported, but it
          // is no sign of failing workers and must not turn the clean stop into an error.
          if (aborted || opts.signal?.aborted) {
            warn(`${what} did not finish before training stopped and is lost: ${lost.lost}.`);
            return;
          }
          warn(`${what} was lost: ${lost.lost}. Training goes on without it (${lostBatches} batch(es) lost so far); ` +
            'the result will differ from an uninterrupted run.');
          if (lostBatches > maxLost) failures.push(new Error(`${lostBatches} batches lost to worker failures (more than ${maxLost}); the last: ${what}`));
          return;
        }
        const results = outcomes.map((x) => (x as { ok: TrainResult }).ok);
        const r: TrainResult = { lossSum: 0, samples: 0, activeSum: 0, missedLabels: 0 };
        for (const x of results) {
          r.lossSum += x.lossSum; r.samples += x.samples; r.activeSum += x.activeSum; r.missedLabels += x.missedLabels;
        }
        // A non-finite loss means the weights have blown up: every later batch would only spread NaN, and a
        // model saved from them predicts nothing. So does a finite but absurd one (the true labels' mean
        // probability below e^-DIVERGED_LOSS: the logits are in the thousands). Stop before the next checkpoint.
        const meanLoss = r.lossSum / Math.max(1, r.samples);
        if (!(meanLoss <= DIVERGED_LOSS) && !diverged) diverged = new DivergedError(b, epoch, meanLoss, task.lr);
        samples += r.samples; batches++;
        repLoss += r.lossSum; repSamples += r.samples; repActive += r.activeSum; repMissed += r.missedLabels;
        let labels = 0;
        for (const p of pointIds) labels += data.labelOffsets[p + 1]! - data.labelOffsets[p]!;
        repLabels += labels;
        epochLoss += r.lossSum; epochSamples += r.samples;
        epochActive += r.activeSum; epochMissed += r.missedLabels; epochLabels += labels;
      };

      while (nextBatch < batchesPerEpoch || inflight.size > 0) {
        if (failures.length || diverged) break;
        if (opts.signal?.aborted && !aborted) {
          aborted = true;
          runner.stop();
        }
        // Rebuilds need quiescent tables and checkpoints a consistent state: drain the batches in flight
        // first. A rebuild due at the same point goes first, so the checkpoint holds the fresh tables.
        // Checked before every dispatch, so that both happen exactly at their batch count.
        let rebuildDue = false, ckptDue = false;
        const checkDue = () => {
          rebuildDue = !aborted && target.schedule !== null && target.tablesInTraining !== false && target.schedule.due(epochBase + nextBatch);
          ckptDue = !aborted && !rebuildDue && checkpoint !== undefined && checkpoint.due(epochBase + nextBatch);
        };
        checkDue();
        while (!aborted && !rebuildDue && !ckptDue && nextBatch < batchesPerEpoch && inflight.size < (o.split ? 1 : exec.parallelism)) {
          let p: Promise<void>;
          if (grouped) {
            // As many batches as take about GROUP_MS (by the batch time in the worker; one until a group has
            // finished), never past a rebuild or checkpoint, and with several workers no more than an even
            // share of the epoch's rest (a long last group would leave the others idle at the epoch's end).
            const ms = runner.batchMs;
            let want = Number.isFinite(ms) ? Math.max(1, Math.min(MAX_GROUP, Math.floor(GROUP_MS / Math.max(ms, 1e-3)))) : 1;
            if (exec.parallelism > 1) want = Math.min(want, Math.ceil((batchesPerEpoch - nextBatch) / exec.parallelism));
            const b0 = nextBatch++;
            checkDue();
            while (nextBatch - b0 < want && !rebuildDue && !ckptDue && nextBatch < batchesPerEpoch) {
              nextBatch++;
              checkDue();
            }
            p = runGroup(b0, nextBatch - b0).finally(() => inflight.delete(p));
          } else {
            p = runBatch(nextBatch++).finally(() => inflight.delete(p));
            checkDue();
          }
          inflight.add(p);
        }
        if (inflight.size > 0) {
          await Promise.race(inflight);
          // The inline executor (workers: 0) settles tasks as microtasks, which never let the event loop
          // run: give it a turn now and then, so that signals (Ctrl-C -> opts.signal) and timers get through.
          if (performance.now() - lastYield > 50) {
            await new Promise<void>((r) => setImmediate(r));
            lastYield = performance.now();
          }
        } else if (rebuildDue && target.schedule) {
          const r = await target.scheduledRebuild(exec);
          rebuildSeconds += r.seconds;
          target.schedule.done(epochBase + nextBatch, r.rebuilt);
        } else if (ckptDue && !failures.length) {
          target.batchesDone = epochBase + nextBatch;
          const cb0 = performance.now();
          await checkpoint!.save(position(epoch, nextBatch), 'periodic', exec.inFlight + inflight.size);
          callbackSeconds += (performance.now() - cb0) / 1000;
        } else if (aborted) {
          break;
        }
        if ((performance.now() - lastReport) / 1000 >= o.progressEvery) report(epoch, nextBatch);
      }
      if (failures.length || diverged) {
        runner.stop(); // a hung task in flight must not keep the error waiting for its full timeout
        await Promise.allSettled(inflight);
        if (diverged) throw diverged;
        throw new Error(`training stopped: ${failures[0]!.message}. ${batches} batches completed.`);
      }
      target.batchesDone = epochBase + nextBatch;
      posEpoch = epoch;
      posBatch = nextBatch;
      if (epochSamples > 0) lastLoss = epochLoss / epochSamples;
      if (!aborted && nextBatch >= batchesPerEpoch) {
        epochsDone = epoch + 1;
        history.push({
          epoch: epoch + 1, trainSeconds: (performance.now() - t0) / 1000 - callbackSeconds, loss: lastLoss,
          activePerSample: epochActive / Math.max(1, epochSamples),
          ...(target.schedule && target.tablesInTraining !== false && epochLabels ? { labelRecall: 1 - epochMissed / epochLabels } : {}),
        });
      }
      report(epoch, nextBatch);
      if (opts.onEpochEnd && !aborted) {
        const cb0 = performance.now();
        await opts.onEpochEnd(epoch, stats());
        callbackSeconds += (performance.now() - cb0) / 1000;
      }
    }

    // Final checkpoint (completed or aborted; a failed run keeps its last periodic one). Taken before
    // Network.fit's closing rebuild, so resuming it with more epochs continues exactly like a longer run.
    if (checkpoint) {
      const cb0 = performance.now();
      await checkpoint.save(position(posEpoch, posBatch), aborted ? 'abort' : 'end', exec.inFlight);
      callbackSeconds += (performance.now() - cb0) / 1000;
    }

    /** A position normalised so that the end of an epoch reads as the start of the next one. */
    function position(epoch: number, batch: number): TrainingPosition {
      const batchesDone = target.batchesDone;
      return batch >= batchesPerEpoch ? { epoch: epoch + 1, batch: 0, batchesDone } : { epoch, batch, batchesDone };
    }

    function stats(): FitStats {
      const trainSeconds = (performance.now() - t0) / 1000 - callbackSeconds;
      return {
        epochs: epochsDone, history, batches, samples, trainSeconds, rebuildSeconds, indexSeconds: 0,
        rebuilds: target.schedule?.rebuilds ?? 0,
        samplesPerSec: samples / Math.max(trainSeconds, 1e-9),
        lastLoss, aborted, lostBatches, trainTasks: runner.tasksSent,
        ...(checkpoint?.failures ? { checkpointFailures: checkpoint.failures.slice() } : {}),
      };
    }
    return stats();
  } finally {
    // Every way out of the loop (return or throw) stops forwarding the caller's stop request.
    opts.signal?.removeEventListener('abort', onAbort);
  }
}
