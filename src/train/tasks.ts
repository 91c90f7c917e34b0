// The messages exchanged between the orchestrator and the kernels: one task per mini-batch (train),
// per chunk of rows (predict) or per range of hash tables (rehash). Tasks carry the shared state
// (SharedArrayBuffer-backed typed arrays are shared, not copied, by postMessage) and small
// per-task typed arrays (point ids), never JS arrays of numbers.
import type { SparseDataset } from '../../datasets/csr.js';
import type { NetSpec, RowGradients } from '../network/native-types.js';

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
  /** Seed of the random fill of batch-shared sets (see TrainHyper.fillSeed). Default: `seed`. */
  fillSeed?: number;
  /** Fault injection (tests): attempts numbered below this throw inside the worker before any update. */
  failBelowAttempt?: number;
  /** 0 for the first try of a batch, 1 for its retry. */
  attempt?: number;
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
}

export interface PredictResult {
  idx: Uint32Array;
  val: Float32Array;
  /** Output neurons scored over the chunk. */
  scored: number;
}

export interface RehashTask {
  net: NetSpec;
  layer: number;
  t0: number;
  t1: number;
  seed: number;
}
