// `sublinear train | eval | predict | demo`: the engine's commands. Argument parsing lives in
// src/cli/main.ts's command table; these functions receive typed options.
import { createWriteStream } from 'node:fs';
import { mkdtemp, open, rm, stat, type FileHandle } from 'node:fs/promises';
import { pipeline } from 'node:stream/promises';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { readXC, readLibsvm, generateSynthetic, type SparseDataset } from '../../datasets/index.js';
import { defaultConfig, defaultTraining, resolveConfig, type NetworkConfig, type ResolvedNetworkConfig } from '../network/config.js';
import { KFOLD_MEMORY, Network } from '../network/network.js';
import { resolveValidation, selectionMethod } from '../train/early-stop.js';
import type { Metrics } from '../train/metrics.js';
import { defaultWorkers } from '../train/executor.js';
import { checkMemory, formatBytes, memoryLimit, planNetworkMemory } from '../train/memory-plan.js';
import { listCheckpoints, parseCheckpointEvery } from '../train/checkpoint.js';
import { assertUnlocked } from '../train/lock.js';
import { fsErrorReason } from '../util/fs-errors.js';
import { outputTarget } from '../util/atomic-write.js';
import { Progress } from '../util/progress.js';
import { earlyStopProgressText } from './train-progress.js';
import { peakRssMB } from '../util/peak-rss.js';
import { escapeControl } from '../util/bounded-text.js';
import { packageVersion } from '../util/package-root.js';
import { UsageError } from './args.js';
import { readConfigFile } from './config-file.js';
import { checkInputFile, checkOutputDir, checkOutputFile } from './preflight.js';
import { modelFileBytes } from '../network/model-file.js';
import { GracefulStop } from './signals.js';
import { writePredictions } from './predict-output.js';
import { coresPerRank, runAsRank, type DistributedRun } from '../train/distributed.js';
import { readTextDatasets, type TextDatasets } from '../text/load.js';
import { LabelNames, labelledDataset } from '../text/labels.js';
import { readText } from '../../datasets/text-reader.js';
import { gatherShards, RANK_PLACEHOLDER, shardPath } from '../train/shards.js';

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
  save?: string;
  evalEvery?: number;
  json?: boolean;
  seed?: number;
  maxMemory?: number;
  mode?: 'exact' | 'sampled';
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
}

/**
 * What `train --checkpoint` stores in each checkpoint (CheckpointOptions.extra), so that `--resume`
 * can continue with the same data and settings: paths are absolute (resume may run elsewhere).
 */
interface SavedCli {
  train: string;
  test?: string;
  format?: InputFormat;
  inputFormat?: InputFormat;
  minDf?: number;
  bigrams?: boolean;
  maxVocabulary?: number;
  hashBits?: number;
  init?: string;
  zeroBased?: boolean;
  save?: string;
  evalEvery?: number;
  workers?: number;
  maxMemory?: number;
  mode?: 'exact' | 'sampled';
  propensityA?: number;
  propensityB?: number;
  checkpointEvery?: string;
  log?: string;
}

const SAVED_CLI_KEYS = ['train', 'test', 'format', 'inputFormat', 'minDf', 'bigrams', 'maxVocabulary', 'hashBits', 'init', 'zeroBased', 'save', 'evalEvery', 'workers', 'maxMemory', 'mode', 'propensityA', 'propensityB', 'checkpointEvery', 'log'] as const;

function savedCli(o: TrainCliOptions & { train: string }): SavedCli {
  const s: Record<string, unknown> = {};
  for (const k of SAVED_CLI_KEYS) if (o[k] !== undefined) s[k] = o[k];
  for (const k of ['train', 'test', 'save', 'log', 'init'] as const) if (o[k] !== undefined) s[k] = resolve(o[k]);
  return s as unknown as SavedCli;
}

/** The paths a checkpoint records that a resumed run writes: never used unless confirmed (--use-recorded-outputs). */
const OUTPUT_KEYS = ['save', 'log'] as const;

/** The CLI settings recorded in a checkpoint's extra, or null when it holds none (an API-written checkpoint). */
function readSavedCli(extra: unknown): Partial<SavedCli> | null {
  const cli = (extra as { cli?: unknown } | null)?.cli;
  if (!cli || typeof cli !== 'object') return null;
  const out: Record<string, unknown> = {};
  for (const k of SAVED_CLI_KEYS) {
    const v = (cli as Record<string, unknown>)[k];
    // A value of the wrong type (a damaged or hand-made file) is not used.
    const numeric = ['evalEvery', 'workers', 'maxMemory', 'propensityA', 'propensityB', 'minDf', 'maxVocabulary', 'hashBits'].includes(k);
    const flag = k === 'zeroBased' || k === 'bigrams';
    if (flag ? typeof v === 'boolean' : numeric ? typeof v === 'number' && Number.isFinite(v) : typeof v === 'string' && v !== '') out[k] = v;
  }
  return out as Partial<SavedCli>;
}

type InputFormat = 'xc' | 'libsvm' | 'text';

/**
 * The epoch records a checkpoint holds (extra.epochs): those of epochs 1..`completed`, or [] when it
 * holds none or they are malformed (written before they were recorded, or not by sublinear train).
 */
function readSavedRecords(extra: unknown, completed: number): EpochRecord[] {
  const list = (extra as { epochs?: unknown } | null)?.epochs;
  if (!Array.isArray(list)) return [];
  const ok = list.every((r, i) => r !== null && typeof r === 'object' && (r as EpochRecord).epoch === i + 1 &&
    typeof (r as EpochRecord).trainSeconds === 'number' && typeof (r as EpochRecord).loss === 'number');
  return ok ? (list as EpochRecord[]).slice(0, completed) : [];
}

/**
 * Refuses, before any data is read, a checkpoint directory that a live run holds or that already holds
 * checkpoints (`resumedDir`: the directory the network was resumed from, whose checkpoints are its own).
 * The Checkpointer checks both again when it takes the lock; this only makes the common mistakes cheap.
 */
async function checkCheckpointDirFree(dir: string, resumedDir: string | null): Promise<void> {
  if (resumedDir !== null && resolve(resumedDir) === resolve(dir)) return;
  await assertUnlocked(dir);
  const existing = await listCheckpoints(dir).catch(() => []);
  if (existing.length > 0) {
    throw new Error(`checkpoint directory ${dir} already holds checkpoints of another run (newest: ${existing[0]!.file}); ` +
      `resume them (sublinear train --resume ${dir}) or use an empty directory`);
  }
}

type Out = { out: (s: string) => void; err: (s: string) => void; drain?: () => Promise<void> };

/** The memory limit in bytes: --max-memory when given, else the default of checkMemory (90% of RAM). */
function memoryLimitBytes(maxMemory: number | undefined): number {
  return memoryLimit(maxMemory !== undefined ? { maxBytes: maxMemory } : {}).limit;
}

/**
 * Reads a data file with a progress display (a bar on a terminal, plain lines every few seconds
 * elsewhere, nothing when quiet), refusing it if reading would pass `maxMemoryBytes`.
 */
export async function loadData(path: string, format: 'xc' | 'libsvm' | undefined, label: string, quiet: boolean, maxMemoryBytes?: number, zeroBased = false): Promise<SparseDataset> {
  const bar = quiet ? null : new Progress({ label: `reading ${label}`, unit: 'MB' });
  // Opening a FIFO blocks until something writes to it: say so rather than hang silently.
  if (bar && (await stat(path).catch(() => null))?.isFIFO()) bar.log(`reading ${label} from the pipe ${path} (waiting for its writer)`);
  const onProgress = bar ? (done: number, total: number) => bar.update(done / 1e6, total / 1e6) : undefined;
  try {
    return format === 'libsvm' ? await readLibsvm(path, { onProgress, maxMemoryBytes, oneBased: !zeroBased }) : await readXC(path, { onProgress, maxMemoryBytes });
  } finally {
    bar?.done();
  }
}

/** --format / --input-format (the same flag under two names): default xc. */
function inputFormatOf(o: { format?: InputFormat; inputFormat?: InputFormat }): InputFormat {
  if (o.format && o.inputFormat && o.format !== o.inputFormat) throw new UsageError(`--format ${o.format} and --input-format ${o.inputFormat} disagree (they are the same option)`);
  return o.inputFormat ?? o.format ?? 'xc';
}

/**
 * Raw-text training (and test) files as tf-idf datasets: a vectorizer fitted on the training file with the
 * --min-df, --bigrams, --max-vocabulary and --hash-bits settings, or the warm start model's vectorizer and
 * label names.
 */
async function loadTextData(trainPath: string, testPath: string | undefined, o: TrainCliOptions, init: Network | undefined, quiet: boolean, io: Out, limit: number): Promise<TextDatasets> {
  const bar = quiet ? null : new Progress({ label: 'reading text', unit: 'MB' });
  let r: TextDatasets;
  try {
    r = await readTextDatasets(trainPath, testPath, {
      vectorizer: init?.textVectorizer,
      labelNames: init?.labelNames,
      read: { maxMemoryBytes: limit },
      vectorizerOptions: { minDf: o.minDf, bigrams: o.bigrams || undefined, maxVocabulary: o.maxVocabulary, hashBits: o.hashBits },
      onProgress: bar ? (_f, done, total) => bar.update(done / 1e6, total / 1e6) : undefined,
    });
  } finally {
    bar?.done();
  }
  if (!quiet) {
    const v = r.vectorizer;
    io.err(`text: ${r.train.points} training points, ${v.features} features (${v.mode === 'vocabulary' ? 'vocabulary' : `hashed into 2^${v.options.hashBits}`}), ` +
      `${r.labelNames.length} labels; featurised ${(r.bytes / 1e6).toFixed(1)} MB in ${r.seconds.toFixed(1)} s\n`);
    if (r.unknownTestLabels) io.err(`sublinear: warning: ${testPath}: ${r.unknownTestLabels} label occurrence(s) name labels not in the training data (dropped: no output can predict them)\n`);
  }
  return r;
}

/** Bytes of a dataset's arrays. */
function dataBytes(d: SparseDataset): number {
  return d.offsets.byteLength + d.indices.byteLength + d.values.byteLength + d.labelOffsets.byteLength + d.labelIndices.byteLength;
}

/** P@k, nDCG@k, PSP@k for every k of `ks`, on one line. */
function metricLine(m: Metrics, ks: readonly number[] = [1, 3, 5]): string {
  const f = (k: string) => (m[k as keyof Metrics] as number | undefined)?.toFixed(4) ?? '-';
  return ['p', 'ndcg', 'psp'].flatMap((name) => ks.map((k) => `${name === 'p' ? 'P' : name === 'ndcg' ? 'nDCG' : 'PSP'}@${k} ${f(`${name}${k}`)}`)).join('  ');
}

/**
 * Refuses to resume a run that has nothing left to train, saying why: one that held-out validation
 * stopped (--epochs does not extend it: its early stopping would end it again at once), or one that
 * finished its epochs (unless --epochs asks for more).
 */
function checkResumable(net: Network, epochs: number | undefined): void {
  const info = net.resumeInfo!;
  const p = info.position, f = info.fitOptions;
  const e = net.earlyStop?.state;
  if (f.validation && e && e.bad >= f.validation.patience) {
    throw new Error(`${info.file} is the end of a run that held-out validation stopped: its score did not improve for ${e.bad} epoch(s) ` +
      `after epoch ${e.bestEpoch}, whose weights it kept; there is nothing to resume${epochs !== undefined ? ' (--epochs does not extend such a run)' : ''}. ` +
      'To train longer, start a new run (--epochs n trains exactly n epochs)');
  }
  const planned = epochs ?? f.epochs;
  if (p.batch === 0 && p.epoch >= planned) {
    throw new Error(`${info.file} is the end of a run that finished ${p.epoch === f.epochs ? 'its' : 'after'} ${p.epoch} epoch(s): there is nothing to resume; ` +
      `--epochs n with n > ${p.epoch} trains it further`);
  }
}

/** `--mode sampled` on a model whose output layer is dense: said, since every output is scored anyway. */
function warnDenseSampled(config: NetworkConfig, what: string, io: Out): void {
  if (!config.layers.at(-1)!.sampling) {
    io.err(`sublinear: warning: --mode sampled: the output layer of ${what} is dense (not LSH-sampled), so every output is scored, as in --mode exact\n`);
  }
}

/** Refuses test data that P@k cannot be measured on (no points, or no labels at all), naming the file. */
function checkEvaluable(d: SparseDataset, path: string): void {
  if (d.points === 0) throw new Error(`${path}: no points to evaluate`);
  if (d.labelOffsets[d.points] === 0) throw new Error(`${path}: no labels to evaluate against (${d.points} points, none with a label)`);
}

/** Refuses, before any training, a data file whose ids do not fit the network (naming the file). */
export function checkFits(d: SparseDataset, path: string, inputDim: number, outputs: number): void {
  if (d.features > inputDim) throw new Error(`${path} has ${d.features} features but the network's inputDim is ${inputDim}`);
  if (d.labels > outputs) throw new Error(`${path} has ${d.labels} labels but the network's last layer has ${outputs} neurons`);
}

/**
 * Pre-flight of every path a train command will read or write, before any data is read. `outputs` false:
 * inputs only (the ranks of an MPI job other than 0 write nothing, and their machines may lack rank 0's
 * output directories).
 */
async function checkTrainPaths(o: TrainCliOptions, outputs = true): Promise<void> {
  if (o.train) await checkInputFile(o.train, '--train');
  if (o.test) await checkInputFile(o.test, '--test');
  if (!outputs) return;
  if (o.save) await checkOutputFile(o.save, '--save');
  if (o.log) await checkOutputFile(o.log, '--log');
  if (o.checkpoint) await checkOutputDir(o.checkpoint, '--checkpoint');
}

/** Periodic checkpoint write failures shown one by one before they are only counted. */
const SHOWN_CHECKPOINT_WARNINGS = 3;

/** One line of `--log` and one entry of the JSON `history`: an epoch as it ended. */
interface EpochRecord {
  epoch: number;
  /** Cumulative training seconds at the end of the epoch. */
  trainSeconds: number;
  loss: number;
  /** Training throughput of this epoch. */
  samplesPerSec: number;
  activePerSample: number;
  labelRecall?: number;
  /** Held-out P@k and the learning rate the epoch used (without --epochs). */
  validation?: { p1: number; p3: number; p5: number; lr: number };
  /** Test metrics, for epochs evaluated with --eval-every. */
  test?: Metrics;
}

export async function trainCommand(given: TrainCliOptions, io: Out): Promise<number> {
  if (given.distributed) return runAsRank(io, (dist, rankIo) => trainOn(given, rankIo, dist));
  return trainOn(given, io, null);
}

async function trainOn(given: TrainCliOptions, io: Out, dist: DistributedRun | null): Promise<number> {
  // Under MPI only rank 0 reports (the others still fail loudly: errors are not progress).
  // --json changes only what stdout prints: a long run (an MPI job above all) still shows its progress.
  const quiet = !!given.quiet || (dist !== null && !dist.isRoot);
  if (given.resume) {
    if (given.config) throw new UsageError('--config cannot be combined with --resume: the network configuration comes from the checkpoint');
    if (given.seed !== undefined) throw new UsageError('--seed cannot be combined with --resume: the seed comes from the checkpoint');
  } else if (!given.train) {
    throw new UsageError('missing required option --train (or --resume <dir>)');
  }
  if (given.init && (given.resume || given.config || given.networkConfig)) throw new UsageError(`--init cannot be combined with --${given.resume ? 'resume' : 'config'}: the network comes from the --init model`);
  if (given.zeroBased && (given.format ?? given.inputFormat) !== 'libsvm' && !given.resume) throw new UsageError('--zero-based applies to --format libsvm only');
  if (given.lr !== undefined && !(given.lr > 0)) throw new UsageError(`option --lr must be > 0 but received ${given.lr}`);
  if (given.checkpointEvery !== undefined && !given.checkpoint && !given.resume) throw new UsageError('--checkpoint-every needs --checkpoint <dir>');
  if (given.checkpointEvery !== undefined) {
    try {
      parseCheckpointEvery(given.checkpointEvery);
    } catch {
      throw new UsageError(`option --checkpoint-every expects a number of batches or a duration like 90s, 10m, 1h but received '${given.checkpointEvery}'`);
    }
  }
  // Everything that can be checked without reading data is checked first: paths, then the config file.
  // Under MPI, `--train shard-%r.txt` names each rank's own shard (src/train/shards.ts).
  const ownFile = (path: string) => (dist ? shardPath(path, dist.rank) : path);
  const writer = !dist || dist.isRoot;
  await checkTrainPaths({ ...given, train: given.train && ownFile(given.train) }, writer);
  const file = given.config ? await readConfigFile(given.config) : undefined;

  let o: TrainCliOptions = given;
  let resumed: Network | undefined;
  /** The epoch records of the run up to the resumed checkpoint (the log and the JSON history continue them). */
  let priorRecords: EpochRecord[] = [];
  /** Whether the resumed checkpoint holds its epochs' records (older ones do not: their log is appended to). */
  let priorKnown = false;
  /** Input paths taken from the checkpoint, not the command line: shown before they are read. */
  const recordedInputs: string[] = [];
  if (given.resume) {
    // The network alone is checked against the memory limit before the checkpoint allocates it; the
    // full plan (training data included, with the saved settings) is checked again below. The saved
    // worker count is not known yet: without --workers, count the least scratch (a lower bound).
    const resumeOpts = { onWarning: (m: string) => io.err(`sublinear: ${m}\n`), maxMemory: given.maxMemory, workers: given.workers };
    resumed = await (dist ? dist.resume(given.resume, resumeOpts) : Network.resume(given.resume, resumeOpts));
    const info = resumed.resumeInfo!;
    checkResumable(resumed, given.epochs);
    // Saved settings first, flags given again on top; checkpoints continue in the resumed directory.
    // The outputs a checkpoint records are not trusted: it may come from another machine or user (its
    // paths are absolute), and must not choose which files this run overwrites.
    const saved = readSavedCli(info.extra) ?? {};
    const recordedOutputs = OUTPUT_KEYS.filter((k) => saved[k] !== undefined && given[k] === undefined);
    if (recordedOutputs.length && writer) {
      // Paths from the file are shown with their control characters escaped.
      const list = recordedOutputs.map((k) => `--${k} ${escapeControl(saved[k]!)}`).join(' and ');
      if (!given.useRecordedOutputs) {
        throw new UsageError(`${info.file} records ${list}; a resumed run writes only the files its command line names: ` +
          `give ${recordedOutputs.map((k) => `--${k} <file>`).join(' and ')} again, or --use-recorded-outputs to write the recorded ${recordedOutputs.length > 1 ? 'ones' : 'one'}`);
      }
      if (!quiet) io.err(`writing the outputs ${info.file} records (--use-recorded-outputs): ${list}\n`);
    }
    if (!given.useRecordedOutputs) for (const k of OUTPUT_KEYS) delete saved[k];
    const defined = Object.fromEntries(Object.entries(given).filter(([, v]) => v !== undefined)) as TrainCliOptions;
    o = { ...saved, checkpoint: dirname(info.file), ...defined };
    if (!o.train) throw new UsageError(`${info.file} does not record its training data (it was not written by sublinear train); give --train`);
    for (const k of ['train', 'test'] as const) if (given[k] === undefined && o[k] !== undefined) recordedInputs.push(`--${k} ${escapeControl(o[k]!)}`);
    // The recorded paths are shown before they are read, and checked first (they may have moved since).
    if (recordedInputs.length && !quiet) io.err(`reading the data ${info.file} records: ${recordedInputs.join(', ')}\n`);
    const from = (k: 'train' | 'test') => (given[k] === undefined ? `--${k} (recorded in ${info.file})` : `--${k}`);
    if (o.train) await checkInputFile(ownFile(o.train), from('train'));
    if (o.test) await checkInputFile(o.test, from('test'));
    if (writer) await checkTrainPaths({ save: o.save, log: o.log });
    if (o.checkpoint && writer) await checkCheckpointDirFree(o.checkpoint, dirname(info.file));
    priorRecords = readSavedRecords(info.extra, info.position.epoch);
    priorKnown = priorRecords.length > 0 || info.position.epoch === 0;
    if (!quiet) {
      const p = info.position;
      io.err(`resuming from ${info.file}: epoch ${p.epoch + 1}, batch ${p.batch} (${p.batchesDone} batches done)\n`);
    }
  } else {
    if (given.useRecordedOutputs) throw new UsageError('--use-recorded-outputs needs --resume <dir>');
    // A locked directory or one holding another run's checkpoints is refused before the data is read.
    if (given.checkpoint && writer) await checkCheckpointDirFree(given.checkpoint, null);
  }
  const t = file?.training ?? {};
  const epochs = o.epochs ?? t.epochs;
  const batchSize = o.batch ?? t.batchSize;
  const lr = o.lr ?? t.lr;

  const trainPath = o.train!;
  const limit = memoryLimitBytes(o.maxMemory);
  const format = inputFormatOf(o);
  if (given.init) await checkInputFile(given.init, '--init');
  const textFlag = (['minDf', 'bigrams', 'maxVocabulary', 'hashBits'] as const).find((k) => given[k] !== undefined && given[k] !== false);
  const flagName = (k: string) => `--${k.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)}`;
  if (textFlag && format !== 'text') throw new UsageError(`${flagName(textFlag)} applies to --input-format text only`);
  if (textFlag && o.init) throw new UsageError(`${flagName(textFlag)} cannot be combined with --init: the vocabulary comes from the --init model`);
  // The warm start's model (a resumed warm start reloads it for its vectorizer and label names only).
  const initNet = o.init ? await Network.load(o.init, { maxMemory: o.maxMemory, workers: o.workers }) : undefined;
  if (initNet && (format === 'text') !== !!initNet.textVectorizer) {
    throw new Error(format === 'text'
      ? `${o.init} was trained on numeric features: --input-format text needs a model trained on text`
      : `${o.init} was trained on text: give the new data as text (--input-format text)`);
  }
  let train: SparseDataset, test: SparseDataset | undefined, text: TextDatasets | undefined;
  if (format === 'text') {
    if (dist && trainPath.includes(RANK_PLACEHOLDER)) throw new UsageError('--input-format text cannot read per-rank shards (%r): give every rank the whole file');
    text = await loadTextData(trainPath, o.test, o, initNet, quiet, io, limit);
    train = text.train;
    test = text.test;
  } else {
    const own = await loadData(ownFile(trainPath), format, 'training data', quiet, limit, o.zeroBased);
    // Shards are exchanged so that every rank trains on the same concatenation (the same decisions everywhere).
    train = dist && trainPath.includes(RANK_PLACEHOLDER) ? gatherShards(own, dist.comm) : own;
    test = o.test ? await loadData(o.test, format, 'test data', quiet, Math.max(0, limit - dataBytes(train)), o.zeroBased) : undefined;
  }
  if (train.labelOffsets[train.points] === 0) throw new Error(`${trainPath}: no labels (${train.points} points, none with a label): there is nothing to train on`);
  if (test) checkEvaluable(test, o.test!);
  // A warm start grows the model's output layer to the labels of the new data (old labels keep their rows).
  const grown = initNet && !resumed ? initNet.grow(Math.max(initNet.config.layers.at(-1)!.size, train.labels), text?.labelNames) : undefined;
  if (grown && !quiet) {
    const before = initNet!.config.layers.at(-1)!.size, after = grown.config.layers.at(-1)!.size;
    io.err(`warm start from ${o.init}: ${before} labels${after > before ? `, grown to ${after} (${after - before} new)` : ''}\n`);
  }
  let config: NetworkConfig;
  if (resumed) config = resumed.config;
  else if (grown) config = grown.config;
  else if (o.networkConfig) config = o.networkConfig;
  else if (file) config = { ...file.network, inputDim: file.network.inputDim ?? train.features, seed: o.seed ?? file.network.seed } as NetworkConfig;
  else config = defaultConfig({ features: train.features, labels: train.labels, points: train.points }, o.seed ?? 1);
  let resolved: ResolvedNetworkConfig;
  try {
    resolved = resolveConfig(config);
  } catch (e) {
    // The file was checked before the data was read, all but the inputDim the data gives: name it.
    throw file ? new Error(`${o.config}: ${(e as Error).message}`) : e;
  }
  if (train.features > resolved.inputDim) throw new Error(`${trainPath} has ${train.features} features but the configuration's inputDim is ${resolved.inputDim}`);
  const outputs = resolved.layers.at(-1)!.size;
  if (test && o.test) checkFits(test, o.test, resolved.inputDim, outputs);
  if (o.mode === 'sampled' && test && writer) warnDenseSampled(resolved, 'the network', io);
  if (!resumed && outputs > train.labels && writer) {
    io.err(`sublinear: warning: the network's last layer has ${outputs} neurons but ${trainPath} has ${train.labels} labels: ` +
      `outputs ${train.labels}..${outputs - 1} are never a true label and only learn to score low (make the last layer ${train.labels})\n`);
  }
  const workers = o.workers ?? t.workers ?? defaultTraining(resolved, dist ? coresPerRank(defaultWorkers()) : defaultWorkers()).workers;
  // Without epochs, training holds out a validation slice and keeps a copy of the best epoch's weights.
  const bestWeights = resumed ? !!resumed.resumeInfo!.fitOptions.validation : t.validation === false ? false : t.validation !== undefined || epochs === undefined;
  const plan = planNetworkMemory(resolved, workers, train, bestWeights);
  // Small training sets: k-fold selection trains copies of the network side by side (at most KFOLD_MEMORY).
  const savedValidation = resumed ? resumed.resumeInfo!.fitOptions.validation ?? null : undefined;
  const v = savedValidation !== undefined ? savedValidation : t.validation === false || epochs !== undefined ? null : resolveValidation(t.validation ?? {});
  if (v && !dist && (!resumed || resumed.batchesDone === 0) && selectionMethod(train.points, v) === 'kfold') {
    const one = planNetworkMemory(resolved, 1).totalBytes;
    const folds = Math.min(v.folds, Math.floor(train.points / 2), Math.floor(KFOLD_MEMORY / Math.max(1, one)));
    if (folds >= 2) {
      plan.parts.push({ name: `${folds} network copies for k-fold selection`, bytes: folds * one });
      plan.totalBytes += folds * one;
      plan.parts.sort((a, b) => b.bytes - a.bytes);
    }
  }
  checkMemory(plan, o.maxMemory !== undefined ? { maxBytes: o.maxMemory } : {});
  const net = resumed ?? grown ?? new Network(config);
  if (text) {
    net.textVectorizer = text.vectorizer;
    net.labelNames = text.labelNames;
  }
  // Room for the model file before training (the Checkpointer checks the room its files need itself).
  if (o.save && writer) await checkOutputFile(o.save, '--save', modelFileBytes(net));
  const shape = [resolved.inputDim, ...resolved.layers.map((l) => `${l.size}${l.sampling ? ` (${l.sampling.hash} K=${l.sampling.K} L=${l.sampling.L})` : ''}`)].join(' -> ');
  if (!quiet) io.err(`network: ${shape}; ${formatBytes(net.memoryBytes())} shared state; ${workers} worker(s)\n`);
  // Without --save (or a checkpoint) the trained weights are kept nowhere: say so before training.
  if (!o.save && !o.checkpoint && !o.unsavedOk && writer) {
    io.err('sublinear: warning: no --save: the trained model will not be kept (give --save <model> to keep it)\n');
  }
  let checkpoints = 0;
  let lastCheckpointFile: string | null = null;
  // Under MPI, rank 0 alone writes checkpoints (every replica holds the same state).
  const checkpoint = o.checkpoint && (!dist || dist.isRoot)
    ? {
        dir: o.checkpoint,
        every: o.checkpointEvery ?? '10m',
        // The epochs' records so far go into every checkpoint: a resumed run's log and history continue them.
        extra: () => ({ cli: savedCli({ ...o, train: trainPath }), epochs: [...priorRecords, ...records] }),
        onSaved: (i: { file: string }) => {
          checkpoints++;
          lastCheckpointFile = i.file;
        },
      }
    : undefined;

  // The --log file is opened at its first record, after fit() has taken the checkpoint directory's lock:
  // a second run started by mistake must not truncate the log of the run it collides with. A resumed run
  // rewrites it from the records its checkpoint holds (the epochs up to the checkpoint; a killed run may
  // have logged later ones, which are trained again), so the log describes the whole run once.
  // A write that fails (a full disk) is warned about, naming the file, and training goes on: the rest of
  // the records are not written (a torn line is cut off) and counted in the summary (logFailures).
  let log: FileHandle | undefined;
  let logBytes = 0, logFailures = 0, logBroken = false;
  const records: EpochRecord[] = [];
  const logRecord = async (record: object) => {
    if (!o.log || (dist && !dist.isRoot)) return;
    if (logBroken) {
      logFailures++;
      return;
    }
    try {
      if (!log) {
        log = await open(await outputTarget(o.log), resumed && !priorKnown ? 'a' : 'w');
        for (const r of priorRecords) await writeLogLine({ type: 'epoch', ...r });
      }
      await writeLogLine(record);
    } catch (e) {
      logBroken = true;
      logFailures++;
      if (log) await log.truncate(logBytes).catch(() => {});
      bar?.clear();
      io.err(`sublinear: warning: cannot write --log ${o.log}: ${fsErrorReason(e)}. Training goes on; the log stops here ` +
        `(${logBytes > 0 ? 'it holds the records before this one' : 'it is empty'}; logFailures in the summary counts the records not written)\n`);
    }
  };
  const writeLogLine = async (record: object) => {
    const line = Buffer.from(JSON.stringify(record) + '\n');
    let off = 0;
    while (off < line.length) off += (await log!.write(line, off, line.length - off)).bytesWritten;
    logBytes += line.length;
  };
  const bar = quiet ? null : new Progress({ label: 'training', unit: 'batches' });
  const stop = new GracefulStop((sig) => {
    bar?.clear();
    io.err(`\n${sig === 'SIGINT' ? 'Ctrl-C' : sig}: stopping after the batches in flight${checkpoint ? ', writing a checkpoint' : ''}` +
      `${o.save ? ` and saving ${o.save}` : ''} (${sig === 'SIGINT' ? 'Ctrl-C' : sig} again to stop at once)\n`);
  });
  // Under MPI a signal ends the job (mpirun forwards it to every rank, and one rank stopping alone would
  // leave the others waiting in a collective): the periodic checkpoints are what a job resumes from.
  if (!dist) stop.install();
  // Signal handlers stay installed until the end: a signal during the save or the final evaluation still
  // ends the run with 130/143 once they are done (a second one exits at once).
  try {
    const evalOpts = { mode: o.mode ?? 'exact', workers, candidates: o.candidates, propensityA: o.propensityA, propensityB: o.propensityB } as const;
    let stats;
    const testByEpoch = new Map<number, Metrics>();
    // The progress display of a run whose length held-out validation decides (a resumed run continues its state).
    let firstAt: number | undefined;
    const restoredEarly = resumed?.earlyStop?.state;
    const early = { best: restoredEarly?.bestEpoch ?? 0 };
    const patience = resumed?.resumeInfo!.fitOptions.validation?.patience ?? resolveValidation(t.validation || {}).patience;
    const batchSamples = batchSize ?? resumed?.resumeInfo!.fitOptions.batchSize ?? 128;
    let prevSamples = 0, prevSeconds = 0, checkpointWarnings = 0;
    // A resumed run's epochs continue the training time recorded up to its checkpoint.
    const secondsBefore = priorRecords.at(-1)?.trainSeconds ?? 0;
    try {
      stats = await net.fit(train, {
        epochs,
        batchSize,
        lr,
        ...(t.beta1 !== undefined ? { beta1: t.beta1 } : {}),
        ...(t.beta2 !== undefined ? { beta2: t.beta2 } : {}),
        ...(t.eps !== undefined ? { eps: t.eps } : {}),
        ...(t.validation !== undefined ? { validation: t.validation } : {}),
        ...(t.rebuild !== undefined ? { rebuild: t.rebuild } : {}),
        ...(t.inputScaling !== undefined ? { inputScaling: t.inputScaling } : {}),
        workers,
        signal: stop.signal,
        checkpoint,
        progressEvery: 1,
        // Checkpoint write failures and lost batches: reported, training goes on.
        // A full disk fails every periodic checkpoint alike: the first few are shown, then only the final one;
        // the count is in the summary (checkpointFailures).
        onWarning: (m) => {
          const periodicFailure = m.startsWith('cannot write checkpoint') && m.includes('Training goes on');
          if (periodicFailure && ++checkpointWarnings > SHOWN_CHECKPOINT_WARNINGS) {
            if (checkpointWarnings === SHOWN_CHECKPOINT_WARNINGS + 1) io.err('sublinear: warning: further checkpoint write failures are counted, not shown\n');
            return;
          }
          bar?.clear();
          io.err(`sublinear: warning: ${m}\n`);
        },
        ...(dist ? dist.fitOptions(net, workers, train, batchSize ?? resumed?.resumeInfo?.fitOptions.batchSize ?? 128) : {}),
        onProgress: (p) => {
          // No batch finished since the last report (e.g. right after Ctrl-C): keep the last loss shown.
          const loss = Number.isFinite(p.loss) ? ` loss ${p.loss.toFixed(4)}` : '';
          const at = p.epoch * p.batchesPerEpoch + p.batch;
          // A resumed run starts part-way: its rate and ETA count from its checkpoint.
          const from = resumed?.resumeInfo!.position;
          firstAt ??= from ? from.epoch * p.batchesPerEpoch + from.batch : 0;
          const speed = `${loss} ${Math.round(p.samplesPerSec)} samples/s`;
          if (!p.epochsIsLimit) {
            bar?.update(at - firstAt, p.epochs * p.batchesPerEpoch - firstAt, `${p.fold ? `choosing epochs (${p.fold.folds} folds side by side): ` : ''}epoch ${p.epoch + 1}/${p.epochs}${speed}`);
            return;
          }
          // Held-out validation decides the length: the cap is no estimate; the line says what is known.
          bar?.update(at - firstAt, undefined, earlyStopProgressText(p, { best: early.best, patience }, p.batchesPerEpoch * batchSamples) + speed);
        },
        onEpochEnd: async (epoch, st) => {
          const v = st.validation?.at(-1);
          if (v && v.epoch === epoch + 1 && st.bestEpoch !== undefined) early.best = st.bestEpoch;
          if (!quiet && v && v.epoch === epoch + 1) bar?.log(`epoch ${epoch + 1}: held-out P@1 ${v.p1.toFixed(4)} P@3 ${v.p3.toFixed(4)} P@5 ${v.p5.toFixed(4)} (lr ${v.lr.toPrecision(3)})`);
          let tm: Metrics | undefined;
          if (test && o.evalEvery && (epoch + 1) % o.evalEvery === 0) {
            tm = await (dist ? dist.evaluate(net, test, evalOpts) : net.evaluate(test, evalOpts));
            testByEpoch.set(epoch + 1, tm);
            if (!quiet) bar?.log(`epoch ${epoch + 1}: test ${metricLine(tm)}`);
          }
          const h = st.history.at(-1);
          if (h && h.epoch === epoch + 1) {
            const r: EpochRecord = {
              ...h,
              trainSeconds: secondsBefore + h.trainSeconds,
              samplesPerSec: (st.samples - prevSamples) / Math.max(1e-9, h.trainSeconds - prevSeconds),
              ...(v && v.epoch === h.epoch ? { validation: { p1: v.p1, p3: v.p3, p5: v.p5, lr: v.lr } } : {}),
              ...(tm ? { test: tm } : {}),
            };
            prevSamples = st.samples;
            prevSeconds = h.trainSeconds;
            records.push(r);
            await logRecord({ type: 'epoch', ...r });
          }
        },
      });
    } finally {
      bar?.done();
    }
    if (!quiet) {
      io.err(`trained ${stats.samples} samples in ${stats.trainSeconds.toFixed(1)} s (${Math.round(stats.samplesPerSec)} samples/s; ` +
        `hash-table rebuilds ${stats.rebuildSeconds.toFixed(1)} s = ${(100 * stats.rebuildSeconds / Math.max(stats.trainSeconds, 1e-9)).toFixed(1)}%)` +
        `${stats.aborted ? ' (stopped early)' : ''}\n`);
      const failed = stats.checkpointFailures?.length ?? 0;
      if (checkpoint) io.err(`${checkpoints} checkpoint(s) written to ${checkpoint.dir}${failed ? `, ${failed} failed` : ''}\n`);
      if (stats.inputScaling?.scaled) io.err(`inputs scaled: ${stats.inputScaling.reason} (stored in the model; predict and eval apply it)\n`);
      const sel = stats.selection;
      if (sel?.method === 'kfold') {
        io.err(`epochs chosen by ${sel.folds}-fold cross-validation: ${sel.epochs} (mean held-out P@1 ${sel.p1[sel.epochs - 1]?.toFixed(4) ?? '-'}; ` +
          `a held-out slice would hold only ${sel.holdoutPoints} points), then trained on all ${train.points} points\n`);
      }
      if (stats.bestEpoch) io.err(`kept the weights of epoch ${stats.bestEpoch} (best held-out score of ${stats.validation!.length} epochs; ${stats.validationPoints} points held out)\n`);
    }
    // The model is saved whatever happened to the checkpoints (a full or read-only checkpoint disk must
    // not cost the trained weights). Exit status: 0 when the trained state is saved somewhere (--save, or
    // without --save the final checkpoint), even if some checkpoints failed (warned above, counted in the
    // JSON summary); 1 when neither holds it.
    const finalFailure = stats.checkpointFailures?.find((f) => f.reason !== 'periodic');
    if (o.save && (!dist || dist.isRoot)) {
      try {
        await net.save(o.save, {
          training: {
            data: { file: resolve(trainPath), points: train.points, features: train.features, labels: train.labels, nonzeros: train.offsets[train.points]! },
            epochs: stats.epochs,
            ...(stats.bestEpoch !== undefined ? { bestEpoch: stats.bestEpoch } : {}),
            batchSize: batchSize ?? resumed?.resumeInfo!.fitOptions.batchSize ?? 128,
            lr: lr ?? (resumed ? resumed.resumeInfo!.fitOptions.lr : defaultTraining(resolved, workers).lr),
            version: packageVersion(),
          },
        });
      } catch (e) {
        // The final checkpoint is written before the best epoch's weights are restored: it holds the last epoch's.
        const which = stats.bestEpoch !== undefined && stats.bestEpoch !== stats.epochs ? `the weights of the last epoch (${stats.epochs}; the kept best epoch was ${stats.bestEpoch})` : 'the trained weights';
        const where = checkpoint && !finalFailure && lastCheckpointFile
          ? `; ${which} are in the final checkpoint ${lastCheckpointFile} (eval and predict accept it as a model)`
          : '';
        throw new Error(`cannot save the model to ${o.save}: ${(e as Error).message}${where}`, { cause: e });
      }
      if (!quiet) io.err(`saved ${o.save}\n`);
    }
    // The test set is evaluated on the weights the network ends with, unless --eval-every already did
    // (exact inference of the same weights gives the same numbers); a run stopped by a signal skips it.
    const finalEpoch = stats.bestEpoch ?? (stats.aborted ? undefined : stats.epochs);
    const reuse = evalOpts.mode === 'exact' && finalEpoch !== undefined ? testByEpoch.get(finalEpoch) : undefined;
    const metrics = test && !stop.received ? reuse ?? (await (dist ? dist.evaluate(net, test, evalOpts) : net.evaluate(test, evalOpts))) : undefined;
    // (dist.evaluate compares the replicas' checksums first; without it, compare them here.)
    if (dist && (!test || reuse)) await dist.verify(net);
    // The result goes to stdout whatever --quiet says (it silences stderr); --json prints it in its object.
    if (metrics && !o.json) io.out(`test: ${metricLine(metrics)}\n`);
    const summary = {
      ...(metrics ?? {}),
      samplesPerSec: stats.samplesPerSec,
      trainSeconds: stats.trainSeconds,
      rebuildSeconds: stats.rebuildSeconds,
      indexSeconds: stats.indexSeconds,
      rebuilds: stats.rebuilds,
      epochs: stats.epochs,
      ...(stats.bestEpoch !== undefined ? { bestEpoch: stats.bestEpoch, validationPoints: stats.validationPoints } : {}),
      ...(stats.selection ? { selection: stats.selection } : {}),
      ...(stats.inputScaling ? { inputScaling: stats.inputScaling } : {}),
      samples: stats.samples,
      loss: stats.lastLoss,
      workers,
      peakRssMB: peakRssMB(),
      aborted: stats.aborted,
      ...(stop.received ? { signal: stop.received } : {}),
      batchesDone: net.batchesDone,
      ...(o.save ? { model: resolve(o.save) } : {}),
      lostBatches: stats.lostBatches,
      ...(checkpoint ? { checkpoints, checkpointFailures: stats.checkpointFailures?.length ?? 0 } : {}),
      ...(o.log && writer ? { logFailures: logFailures as number } : {}),
      ...(resumed ? { resumedFrom: resumed.resumeInfo!.file, resumedAt: resumed.resumeInfo!.position.batchesDone } : {}),
      ...(dist ? dist.summary(net) : {}),
    };
    await logRecord({ type: 'summary', ...summary });
    if (o.log && writer) summary.logFailures = logFailures; // the summary line itself may have failed
    if (o.json) io.out(JSON.stringify({ ...summary, history: [...priorRecords, ...records] }) + '\n');
    if (finalFailure && !o.save) {
      io.err(`sublinear: the trained state was not saved: the final checkpoint ${finalFailure.file} could not be written (${finalFailure.error}) and no --save was given\n`);
      return 1;
    }
    return stop.exitCode(0);
  } finally {
    stop.uninstall();
    await log?.close();
  }
}

export interface EvalCliOptions {
  model: string;
  test: string;
  /** Default: text for a model trained on text, else xc. */
  format?: InputFormat;
  /** LIBSVM feature ids start at 0 (files are 1-based by default). Default false. */
  zeroBased?: boolean;
  json?: boolean;
  quiet?: boolean;
  workers?: number;
  mode?: 'exact' | 'sampled';
  candidates?: number;
  propensityA?: number;
  propensityB?: number;
  /** Cut-offs of P@k, nDCG@k, PSP@k, e.g. '1,3,5,10'. Default '1,3,5'. */
  k?: string;
  /** Refuse a model or data needing more bytes (default: 90% of the machine's memory). */
  maxMemory?: number;
}

/** Parses `--k 1,3,5`: distinct positive integers, at most `max`, in increasing order. */
export function parseKs(text: string, max: number): number[] {
  const parts = text.split(',').map((x) => x.trim());
  const ks = parts.map(Number);
  if (!parts.length || parts.some((p, i) => !/^\d+$/.test(p) || !(ks[i]! >= 1))) {
    throw new UsageError(`option --k expects positive integers separated by commas, e.g. 1,3,5, but received '${text.length > 60 ? `${text.slice(0, 57)}...` : text}'`);
  }
  const over = ks.find((k) => k > max);
  if (over !== undefined) throw new UsageError(`option --k ${over} exceeds the model's ${max} labels`);
  return [...new Set(ks)].sort((a, b) => a - b);
}

/** A predict/eval progress display over the points (quiet: none). */
function pointsProgress(quiet: boolean, label: string): { bar: Progress | null; onProgress?: (done: number, total: number) => void } {
  const bar = quiet ? null : new Progress({ label, unit: 'points' });
  return { bar, onProgress: bar ? (done, total) => bar.update(done, total) : undefined };
}

export async function evalCommand(o: EvalCliOptions, io: Out): Promise<number> {
  const quiet = !!o.quiet;
  await checkInputFile(o.model, '--model');
  await checkInputFile(o.test, '--test');
  const net = await Network.load(o.model, { maxMemory: o.maxMemory, workers: o.workers });
  const outputs = net.config.layers.at(-1)!.size;
  // The default cut-offs stop at the model's labels (a 3-label model: 1,3); given ones must fit.
  const ks = o.k !== undefined ? parseKs(o.k, outputs) : [1, 3, 5].filter((k) => k <= outputs);
  const format = o.format ?? (net.textVectorizer ? 'text' : 'xc');
  if (o.zeroBased && format !== 'libsvm') throw new UsageError('--zero-based applies to --format libsvm only');
  const test = format === 'text'
    ? await loadTextInput(net, o.test, o.test, true, io, quiet, o.maxMemory)
    : await loadData(o.test, format, 'test data', quiet, memoryLimitBytes(o.maxMemory), o.zeroBased);
  checkEvaluable(test, o.test);
  checkFits(test, o.test, net.config.inputDim, outputs);
  if (net.inputScale && !quiet) io.err(`applying the model's input scaling (each feature divided by its largest |value| in the training data)\n`);
  const mode = o.mode ?? 'exact';
  if (mode === 'sampled') warnDenseSampled(net.config, o.model, io);
  // Sampled inference builds the output layer's cluster index on first use: timed apart from scoring.
  const indexSeconds = mode === 'sampled' ? net.buildClusterIndex() : 0;
  const t0 = performance.now();
  const { bar, onProgress } = pointsProgress(quiet, `evaluating (${mode})`);
  let m;
  try {
    m = await net.evaluate(test, { mode, workers: o.workers, candidates: o.candidates, propensityA: o.propensityA, propensityB: o.propensityB, k: ks, onProgress });
  } finally {
    bar?.done();
  }
  const evalSeconds = (performance.now() - t0) / 1000;
  const seconds = m.predictSeconds; // inference alone: the metrics cost the same in both modes
  const scored = m.outputsScoredPerPoint;
  if (!o.json) {
    io.out(`${metricLine(m, ks)}\n(${m.points} points predicted in ${seconds.toFixed(2)} s, ${mode}: ${Math.round(scored)} of ${outputs} outputs scored per point` +
      `${mode === 'sampled' ? `, index built in ${indexSeconds.toFixed(2)} s` : ''})\n`);
  } else {
    io.out(JSON.stringify({
      ...m, mode, seconds, evalSeconds, pointsPerSec: m.points / seconds, outputsScoredPerPoint: scored,
      outputsScoredFraction: scored / outputs, indexSeconds, inputScaled: net.inputScale !== null, peakRssMB: peakRssMB(),
    }) + '\n');
  }
  return 0;
}

export interface PredictCliOptions {
  model: string;
  /** A data file, or '-' for standard input. */
  input: string;
  /** Format of the input. Default: text for a model trained on text, else xc. */
  inputFormat?: InputFormat;
  /** LIBSVM feature ids start at 0 (files are 1-based by default). Default false. */
  zeroBased?: boolean;
  /**
   * What is printed: 'xc' (a sparse score matrix of label ids, with a header) or 'jsonl'. Default: jsonl
   * (with label names) for a model with label names, else xc.
   */
  format?: 'xc' | 'jsonl';
  /** Labels per point (at most). Default 5; with `threshold`, every label above it. */
  k?: number;
  /**
   * Print only the labels whose score is at least this, in (0, 1] (napkinXC's threshold prediction). Scores
   * are softmax probabilities, which sum to 1, so at most 1/t labels pass. Default none (top-k).
   */
  threshold?: number;
  workers?: number;
  mode?: 'exact' | 'sampled';
  candidates?: number;
  quiet?: boolean;
  /** Refuse a model or data needing more bytes (default: 90% of the machine's memory). */
  maxMemory?: number;
}

export async function predictCommand(o: PredictCliOptions, io: Out): Promise<number> {
  const quiet = !!o.quiet;
  if (o.zeroBased && o.inputFormat !== 'libsvm') throw new UsageError('--zero-based applies to --input-format libsvm only');
  const fromStdin = o.input === '-';
  if (!fromStdin) await checkInputFile(o.input, '--input');
  await checkInputFile(o.model, '--model');
  const net = await Network.load(o.model, { maxMemory: o.maxMemory, workers: o.workers });
  const outputs = net.config.layers.at(-1)!.size;
  if (o.threshold !== undefined && !(o.threshold > 0 && o.threshold <= 1)) throw new UsageError(`option --threshold expects a score in (0, 1] but received ${o.threshold}`);
  // Softmax scores sum to 1: no more than floor(1/t) labels reach t (one more for rounding).
  const k = o.k ?? (o.threshold !== undefined ? Math.min(outputs, Math.floor(1 / o.threshold) + 1) : 5);
  if (o.mode === 'sampled') warnDenseSampled(net.config, o.model, io);
  if (k > outputs) throw new UsageError(`option --k ${k} exceeds the model's ${outputs} labels`);
  let spool: string | undefined;
  let data: SparseDataset;
  try {
    // Standard input is spooled to a temporary file: the readers stream files (and say which line is wrong).
    if (fromStdin) spool = await spoolStdin();
    const inputFormat = o.inputFormat ?? (net.textVectorizer ? 'text' : 'xc');
    data = await (inputFormat === 'text'
      ? loadTextInput(net, spool ?? o.input, fromStdin ? '<stdin>' : o.input, false, io, quiet, o.maxMemory)
      : loadData(spool ?? o.input, inputFormat, fromStdin ? 'standard input' : 'input', quiet, memoryLimitBytes(o.maxMemory), o.zeroBased))
      .catch((e: unknown) => {
        throw spool && e instanceof Error ? new Error(e.message.replaceAll(spool, '<stdin>')) : e;
      });
  } finally {
    if (spool) await rm(dirname(spool), { recursive: true, force: true });
  }
  const inputName = fromStdin ? '<stdin>' : o.input;
  if (data.features > net.config.inputDim) throw new Error(`${inputName} has ${data.features} features but the network's inputDim is ${net.config.inputDim}`);
  if (net.inputScale && !quiet) io.err(`applying the model's input scaling (each feature divided by its largest |value| in the training data)\n`);
  const { bar, onProgress } = pointsProgress(quiet, 'predicting');
  let p;
  try {
    p = await net.predict(data, { k, mode: o.mode ?? 'exact', workers: o.workers, candidates: o.candidates, onProgress });
  } finally {
    bar?.done();
  }
  await writePredictions(p, o.format ?? (net.labelNames ? 'jsonl' : 'xc'), outputs, io, net.labelNames, o.threshold);
  return 0;
}

/**
 * A raw-text file as the input of a text model: its vectorizer's rows, and (`withLabels`, for eval) the label
 * names mapped to the model's ids (names the model does not know are dropped, with a warning).
 */
async function loadTextInput(net: Network, path: string, name: string, withLabels: boolean, io: Out, quiet: boolean, maxMemory: number | undefined): Promise<SparseDataset> {
  if (!net.textVectorizer) throw new Error(`the model was trained on numeric features: it cannot read raw text (give --${withLabels ? 'format' : 'input-format'} xc or libsvm)`);
  const data = await readText(path, { displayName: name, maxMemoryBytes: memoryLimitBytes(maxMemory) });
  if (!withLabels) return net.textVectorizer.transform(data.texts);
  if (!net.labelNames) throw new Error('the model has no label names: it cannot evaluate text whose labels are names');
  const r = labelledDataset(data, net.textVectorizer, new LabelNames(net.labelNames), false);
  if (r.unknownLabels && !quiet) io.err(`sublinear: warning: ${name}: ${r.unknownLabels} label occurrence(s) name labels the model does not know (dropped: no output can predict them)\n`);
  return { ...r.dataset, labels: Math.min(r.dataset.labels, net.config.layers.at(-1)!.size) };
}

/** Copies standard input into a fresh temporary directory; returns the file's path. */
async function spoolStdin(): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'sublinear-stdin-'));
  const path = join(dir, 'input.txt');
  try {
    await pipeline(process.stdin, createWriteStream(path));
  } catch (e) {
    await rm(dir, { recursive: true, force: true });
    throw e;
  }
  return path;
}

export interface DemoOptions {
  json?: boolean;
  quiet?: boolean;
  workers?: number;
  keep?: boolean;
}

/**
 * The built-in default job: generate a seeded synthetic extreme-classification dataset (the `small`
 * shape: 20,000 features, 2,000 labels) and train an LSH-sampled network on it, then evaluate.
 */
export async function demoCommand(o: DemoOptions, io: Out): Promise<number> {
  const dir = await mkdtemp(join(tmpdir(), 'sublinear-demo-'));
  try {
    if (!o.json && !o.quiet) io.err(`generating the synthetic 'small' dataset (20,000 features, 2,000 labels) in ${dir}\n`);
    await generateSynthetic({ shape: 'small', train: 20000, test: 2000, seed: 1, outDir: dir });
    const config: NetworkConfig = {
      inputDim: 20000,
      seed: 1,
      layers: [
        { size: 128, activation: 'relu' },
        { size: 2000, activation: 'softmax', sampling: { hash: 'dwta', K: 4, L: 32, budget: 100, minActive: 100, logQ: true } },
      ],
    };
    return await trainCommand({ train: join(dir, 'train.txt'), test: join(dir, 'test.txt'), networkConfig: config, epochs: 3, json: o.json, quiet: o.quiet, workers: o.workers, unsavedOk: true }, io);
  } finally {
    if (!o.keep) await rm(dir, { recursive: true, force: true });
  }
}
