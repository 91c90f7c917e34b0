// The options of `sublinear train` (engine-commands.ts declares its flags; train.ts runs it).
import type { NetworkConfig } from '../network/config.js';
import type { InputFormat } from './engine.js';
import type { PredictMode } from '../network/network.js';

export interface TrainCliOptions {
  /** Required unless `resume` is given. */
  train?: string;
  test?: string;
  config?: string;
  /** A configuration object instead of a --config file (the demo's). */
  networkConfig?: NetworkConfig;
  format?: InputFormat;
  /** Same as `format` (the name predict uses); giving both with different values is an error. */
  inputFormat?: InputFormat;
  /** Text input: the vectorizer's settings (TextVectorizerOptions; defaults there). */
  minDf?: number;
  bigrams?: boolean;
  maxVocabulary?: number;
  hashBits?: number;
  /**
   * Warm start: a model file to continue from on the new data (`Network.grow`: labels it has never seen
   * get new outputs; a text model keeps its vectorizer and label names). Not with --resume or --config.
   */
  init?: string;
  /** LIBSVM feature ids start at 0 (files are 1-based by default). Default false. */
  zeroBased?: boolean;
  epochs?: number;
  batch?: number;
  lr?: number;
  workers?: number;
  /** Threads sharing each batch's dense work (FitOptions.threads). */
  threads?: number;
  save?: string;
  evalEvery?: number;
  json?: boolean;
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
  /** No progress or messages on stderr (errors still). */
  quiet?: boolean;
  /**
   * Train data-parallel as one rank of an MPI job (`mpirun -np R sublinear train ... --distributed`; see
   * src/train/distributed.ts): `batch` is the global batch, split across the ranks; rank 0 alone prints,
   * writes checkpoints and saves. Needs the MPI addon (scripts/build-mpi.cjs). Default false.
   */
  distributed?: boolean;
  /**
   * With `distributed`: label-sharded training (src/train/sharded.ts): each rank owns a slice of the output
   * labels (balanced by training frequency) and only its rows, and a slice of the input features (balanced by
   * nonzero count) and only their rows of layer 0; every rank runs each step on the whole batch. Needs
   * `epochs`. Default false.
   */
  shardLabels?: boolean;
}
