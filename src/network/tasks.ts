// The messages exchanged between the orchestrator and the kernels: one task per mini-batch (train),
// per chunk of rows (predict) or per range of hash tables (rehash). Tasks carry the shared state
// (SharedArrayBuffer-backed typed arrays are shared, not copied, by postMessage) and small
// per-task typed arrays (point ids), never JS arrays of numbers.
import type { SparseDataset } from '../datasets/csr.js';
import type { NetSpec, RowGradients } from '../native/network-types.js';

export interface TrainTask {
  net: NetSpec;
  data: SparseDataset;
  /** Rows of `data` in this mini-batch (or slice of one). */
  pointIds: Uint32Array;
  lr: number;
  beta1: number;
  beta2: number;
  eps: number;
  /** 1 / batch size: the loss is the batch mean. */
  gradScale: number;
  /** Seed of this batch's random choices (random fill of the active sets). */
  seed: number;
  /** Adagrad rate of the output layer's wide part (TrainHyper.wideLr). Absent: no wide part. */
  wideLr?: number;
  /** Threads sharing the slice's dense work (FitOptions.threads, TrainHyper.threads). Default 1. */
  threads?: number;
  /**
   * Set by the kernel (Atomics.store, index 0) to 1 right before it starts updating the shared weights
   * and to 2 when the update returned. A task that fails with 0 here changed nothing and may be retried;
   * one that fails with 1 or 2 may have applied part or all of its update and is never retried (see
   * src/train/batch-runner.ts). On a SharedArrayBuffer, so that the orchestrator sees it even when the
   * worker thread dies. Default: none (no record).
   */
  progress?: Int32Array;
  /** Fault injection (tests only, see FitOptions.faultInjection). Default none. */
  fault?: InjectedFault;
  /** Seed of the random fill of batch-shared sets (see TrainHyper.fillSeed). Default: `seed`. */
  fillSeed?: number;
  /** 0 for the first try of a batch, 1 for its retry. */
  attempt?: number;
}

/** Cells per batch of TrainGroupTask.stats. */
export const GROUP_STATS = 5;

/** The fields of a TrainTask that differ from one mini-batch to the next (see TrainGroupTask). */
export type TrainBatch = Pick<TrainTask, 'pointIds' | 'lr' | 'gradScale' | 'seed' | 'wideLr' | 'fault' | 'attempt'>;

/**
 * Consecutive mini-batches run one after the other by one task: one message to a worker thread and one
 * result back for several batches (each batch is still one netTrainSlice call). With one worker and small
 * batches the hand-off between two tasks (postMessage, waking the worker, settling the promise) left the
 * worker idle for a third of the training time (see src/train/batch-runner.ts). The batches run in order,
 * exactly as the same batches sent one per task would, and each keeps its own record of how far it got,
 * so that a failure part-way through is handled batch by batch.
 */
export interface TrainGroupTask {
  /** The shared fields; the per-batch ones (TrainBatch) come from `batches`. */
  base: Omit<TrainTask, keyof TrainBatch | 'progress'>;
  batches: TrainBatch[];
  /**
   * One cell per batch (Atomics): 0 not started, or failed before touching the weights; 1 updating the
   * weights; 2 updated (TrainTask.progress's states); 3 its TrainResult is in `stats`. On a
   * SharedArrayBuffer, so that the orchestrator sees it even when the worker thread dies.
   */
  state: Int32Array;
  /**
   * GROUP_STATS cells per batch, written before its state becomes 3: lossSum, samples, activeSum,
   * missedLabels, and the milliseconds its train call took in the worker.
   */
  stats: Float64Array;
}

/**
 * A fault injected into a train task (tests only): on attempts numbered below `belowAttempt`, the task
 * throws (`throw`), ends its worker thread with process.exit (`exit`: a worker death), or blocks for ten
 * minutes (`hang`), either before it touches the weights (`at: 'before-update'`) or after its update was
 * applied (`at: 'after-update'`).
 */
export interface InjectedFault {
  belowAttempt: number;
  kind: 'throw' | 'exit' | 'hang';
  at: 'before-update' | 'after-update';
}

export interface TrainResult {
  /** Sum of per-sample losses. */
  lossSum: number;
  samples: number;
  /** Sum of active-set sizes of the last layer. */
  activeSum: number;
  /** True labels that LSH did not retrieve (added as required ids). */
  missedLabels: number;
}

/** Result of a sparse-gradient train task (mode 3): the slice's statistics and its gradient rows per layer. */
export interface SparseTrainResult extends TrainResult {
  grads: RowGradients[];
}

export interface PredictTask {
  net: NetSpec;
  data: SparseDataset;
  pointIds: Uint32Array;
  k: number;
  sampled: boolean;
  /**
   * Logit scales (netPredictSlice): the result holds each point's k best under each scale, (points, scales,
   * k). Default: one scale of 1.
   */
  scales?: Float32Array;
  /** Threads sharing an exact prediction's points (netPredictSlice; ignored by sampled prediction). Default 1. */
  threads?: number;
}

export interface PredictResult {
  idx: Uint32Array;
  val: Float32Array;
  /** Output neurons scored over the chunk. */
  scored: number;
}

/**
 * A rendezvous of `parties` tasks (diagnostics and tests: proves that the pool runs tasks at once). Each
 * task adds 1 to `arrived[0]` and waits up to `timeoutMs` for the count to reach `parties`.
 */
export interface RendezvousTask {
  arrived: Int32Array;
  parties: number;
  timeoutMs: number;
}

export interface RendezvousResult {
  /** True if all `parties` tasks were running at the same time. */
  met: boolean;
  /** worker_threads threadId of the thread that ran the task (0: the main thread). */
  threadId: number;
  /** The native addon file this thread loaded (src/native/addon.ts addonFile()). */
  addon: string;
}

export interface RehashTask {
  net: NetSpec;
  layer: number;
  t0: number;
  t1: number;
  seed: number;
}
