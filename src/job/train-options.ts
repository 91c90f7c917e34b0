// The options of a training job: train(job) and `sublinear train` (src/cli/train.ts declares one flag per
// option, in kebab-case: `checkpointEvery` is `--checkpoint-every`). Messages name the flags.
import type { SparseDataset } from '../datasets/csr.js';
import type { NetworkConfig } from '../network/config.js';
import type { Network, PredictMode } from '../network/network.js';
import type { ConfigFileTraining } from './config-file.js';
import type { JobEvents } from './events.js';

/** The format of data files: XC (the default), LIBSVM, or raw text (one point per line). */
export type InputFormat = 'xc' | 'libsvm' | 'text';

export interface TrainJob extends JobEvents {
  /** The training data: a file (required unless `resume` is given), or a dataset in memory. */
  train?: string | SparseDataset;
  /** Test data, evaluated after training (and every `evalEvery` epochs): a file or a dataset in memory. */
  test?: string | SparseDataset;
  /** JSON file: the network (NetworkConfig; inputDim defaults to the data) and training options (epochs, batchSize, lr, ...). */
  config?: string;
  /** A network configuration object instead of a `config` file. Default: the defaults rule (docs/defaults.md). */
  networkConfig?: NetworkConfig;
  /**
   * Training options as a `config` file holds them (epochs, batchSize, lr, betas, eps, workers, threads,
   * validation, rebuild, inputScaling; documented in FitOptions), over the file's. The job's own `epochs`,
   * `batch`, `lr`, `workers` and `threads` override both. Default: none.
   */
  training?: ConfigFileTraining;
  format?: InputFormat;
  /** Same as `format` (the name predict uses); giving both with different values is an error. */
  inputFormat?: InputFormat;
  /** Text input: the vectorizer's settings (TextVectorizerOptions; defaults there). */
  minDf?: number;
  bigrams?: boolean;
  maxVocabulary?: number;
  hashBits?: number;
  /**
   * Warm start: a model file (or a network) to continue from on the new data (`Network.grow`: labels it has
   * never seen get new outputs; a text model keeps its vectorizer and label names). Not with resume or config.
   */
  init?: string | Network;
  /** LIBSVM feature ids start at 0 (files are 1-based by default). Default false. */
  zeroBased?: boolean;
  epochs?: number;
  batch?: number;
  lr?: number;
  workers?: number;
  /** Threads sharing each batch's dense work (FitOptions.threads). */
  threads?: number;
  /**
   * The model file written at the end. When it cannot be written then (a full disk, the path replaced by a
   * directory), the model is kept next to it, in the checkpoint directory or in the system's temporary
   * directory, said as a notice; the report's `model` names that file, `saveError` says why, and the result's
   * `savedInstead` is set. Default: none.
   */
  save?: string;
  /** Called once the model file is written: `save`, or the file the model went to instead. Default: none. */
  onSaved?: (file: string) => void;
  evalEvery?: number;
  seed?: number;
  maxMemory?: number;
  mode?: PredictMode;
  /** Sampled inference: outputs scored per point. */
  candidates?: number;
  propensityA?: number;
  propensityB?: number;
  /** Directory for periodic checkpoints. */
  checkpoint?: string;
  /** `--checkpoint-every`: batches, or a duration like '10m' (default '10m'). */
  checkpointEvery?: string;
  /** Checkpoint directory of a run to continue. */
  resume?: string;
  /**
   * With `resume`: write the `save` and `log` files the checkpoint records when they are not given again
   * (they are shown first). Default false: a resumed run writes only the outputs its command line names,
   * and refuses to start while the checkpoint records one that is not given (a checkpoint may come from
   * another machine or user, and must not choose which files are overwritten).
   */
  useRecordedOutputs?: boolean;
  /** No warning that the trained model is kept nowhere (no `save`, no `checkpoint`): the demo's. Default false. */
  unsavedOk?: boolean;
  /** JSON-lines file: one line per epoch, then a summary line. */
  log?: string;
  /** No progress and no information lines (warnings, and notices that the result is lost, still come). */
  quiet?: boolean;
  /** Stops training after the batches in flight (then checkpoints, saves and reports as at the end); its reason names the stop in messages ('SIGINT', 'SIGTERM'). */
  signal?: AbortSignal;
  /**
   * Train as one rank of an MPI job (`mpirun -np R sublinear train ... --distributed`): label-sharded (src/train/
   * sharded.ts, sharded-fit.ts): each rank owns a slice of the output labels (balanced by training frequency) and
   * a slice of the input features (balanced by nonzero count) and holds only their rows; the ranks train what one
   * process trains (the same network, held-out selection, blend, re-ranker) step by step; rank 0 alone prints,
   * and writes the model file while the ranks stream it their rows. Needs the MPI addon (scripts/build-mpi.cjs).
   * Default false.
   */
  distributed?: boolean;
  /**
   * With `distributed`: data-parallel training instead (src/train/distributed.ts): every rank holds the whole
   * network and takes 1/R of each batch (`batch` is the global batch). Default false.
   */
  dataParallel?: boolean;
  /** With `distributed`: label-sharded training, the default (kept for older scripts). Default false. */
  shardLabels?: boolean;
}
