// `sublinear train | eval | predict | demo`: the engine's commands. Argument parsing lives in
// src/cli/main.ts's command table; these functions receive typed options.
import { createWriteStream } from 'node:fs';
import { mkdtemp, open, rm, type FileHandle } from 'node:fs/promises';
import { pipeline } from 'node:stream/promises';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { readXC, readLibsvm, generateSynthetic, type SparseDataset } from '../../datasets/index.js';
import { defaultConfig, defaultTraining, resolveConfig, type NetworkConfig, type ResolvedNetworkConfig } from '../network/config.js';
import { Network } from '../network/network.js';
import type { Metrics } from '../train/metrics.js';
import { defaultWorkers } from '../train/executor.js';
import { checkMemory, formatBytes, memoryLimit, planNetworkMemory } from '../train/memory-plan.js';
import { parseCheckpointEvery } from '../train/checkpoint.js';
import { Progress } from '../util/progress.js';
import { peakRssMB } from '../util/peak-rss.js';
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

const SAVED_CLI_KEYS = ['train', 'test', 'format', 'inputFormat', 'minDf', 'bigrams', 'maxVocabulary', 'hashBits', 'init', 'save', 'evalEvery', 'workers', 'maxMemory', 'mode', 'propensityA', 'propensityB', 'checkpointEvery', 'log'] as const;

function savedCli(o: TrainCliOptions & { train: string }): SavedCli {
  const s: Record<string, unknown> = {};
  for (const k of SAVED_CLI_KEYS) if (o[k] !== undefined) s[k] = o[k];
  for (const k of ['train', 'test', 'save', 'log', 'init'] as const) if (o[k] !== undefined) s[k] = resolve(o[k]);
  return s as unknown as SavedCli;
}

/** The CLI settings recorded in a checkpoint's extra, or null when it holds none (an API-written checkpoint). */
function readSavedCli(extra: unknown): Partial<SavedCli> | null {
  const cli = (extra as { cli?: unknown } | null)?.cli;
  if (!cli || typeof cli !== 'object') return null;
  const out: Record<string, unknown> = {};
  for (const k of SAVED_CLI_KEYS) {
    const v = (cli as Record<string, unknown>)[k];
    if (v !== undefined) out[k] = v;
  }
  return out as Partial<SavedCli>;
}

type InputFormat = 'xc' | 'libsvm' | 'text';

type Out = { out: (s: string) => void; err: (s: string) => void; drain?: () => Promise<void> };

/** The memory limit in bytes: --max-memory when given, else the default of checkMemory (90% of RAM). */
function memoryLimitBytes(maxMemory: number | undefined): number {
  return memoryLimit(maxMemory !== undefined ? { maxBytes: maxMemory } : {}).limit;
}

/**
 * Reads a data file with a progress display (a bar on a terminal, plain lines every few seconds
 * elsewhere, nothing when quiet), refusing it if reading would pass `maxMemoryBytes`.
 */
export async function loadData(path: string, format: 'xc' | 'libsvm' | undefined, label: string, quiet: boolean, maxMemoryBytes?: number): Promise<SparseDataset> {
  const bar = quiet ? null : new Progress({ label: `reading ${label}`, unit: 'MB' });
  const onProgress = bar ? (done: number, total: number) => bar.update(done / 1e6, total / 1e6) : undefined;
  try {
    return format === 'libsvm' ? await readLibsvm(path, { onProgress, maxMemoryBytes }) : await readXC(path, { onProgress, maxMemoryBytes });
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
  const quiet = !!given.json || !!given.quiet || (dist !== null && !dist.isRoot);
  if (given.resume) {
    if (given.config) throw new UsageError('--config cannot be combined with --resume: the network configuration comes from the checkpoint');
    if (given.seed !== undefined) throw new UsageError('--seed cannot be combined with --resume: the seed comes from the checkpoint');
  } else if (!given.train) {
    throw new UsageError('missing required option --train (or --resume <dir>)');
  }
  if (given.init && (given.resume || given.config || given.networkConfig)) throw new UsageError(`--init cannot be combined with --${given.resume ? 'resume' : 'config'}: the network comes from the --init model`);
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
  if (given.resume) {
    // The network alone is checked against the memory limit before the checkpoint allocates it; the
    // full plan (training data included, with the saved settings) is checked again below. The saved
    // worker count is not known yet: without --workers, count the least scratch (a lower bound).
    const resumeOpts = { onWarning: (m: string) => io.err(`sublinear: ${m}\n`), maxMemory: given.maxMemory, workers: given.workers };
    resumed = await (dist ? dist.resume(given.resume, resumeOpts) : Network.resume(given.resume, resumeOpts));
    const info = resumed.resumeInfo!;
    // Saved settings first, flags given again on top; checkpoints continue in the resumed directory.
    const defined = Object.fromEntries(Object.entries(given).filter(([, v]) => v !== undefined)) as TrainCliOptions;
    o = { ...readSavedCli(info.extra), checkpoint: dirname(info.file), ...defined };
    if (!o.train) throw new UsageError(`${info.file} does not record its training data (it was not written by sublinear train); give --train`);
    // The recorded paths may have moved since: check them before reading anything.
    await checkTrainPaths({ train: ownFile(o.train), test: o.test, save: o.save, log: o.log }, writer);
    if (!quiet) {
      const p = info.position;
      io.err(`resuming from ${info.file}: epoch ${p.epoch + 1}, batch ${p.batch} (${p.batchesDone} batches done)\n`);
    }
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
    const own = await loadData(ownFile(trainPath), format, 'training data', quiet, limit);
    // Shards are exchanged so that every rank trains on the same concatenation (the same decisions everywhere).
    train = dist && trainPath.includes(RANK_PLACEHOLDER) ? gatherShards(own, dist.comm) : own;
    test = o.test ? await loadData(o.test, format, 'test data', quiet, Math.max(0, limit - dataBytes(train))) : undefined;
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
  const workers = o.workers ?? t.workers ?? defaultTraining(resolved, dist ? coresPerRank(defaultWorkers()) : defaultWorkers()).workers;
  // Without epochs, training holds out a validation slice and keeps a copy of the best epoch's weights.
  const bestWeights = resumed ? !!resumed.resumeInfo!.fitOptions.validation : t.validation === false ? false : t.validation !== undefined || epochs === undefined;
  checkMemory(planNetworkMemory(resolved, workers, train, bestWeights), o.maxMemory !== undefined ? { maxBytes: o.maxMemory } : {});
  const net = resumed ?? grown ?? new Network(config);
  if (text) {
    net.textVectorizer = text.vectorizer;
    net.labelNames = text.labelNames;
  }
  // Room for the model file before training (the Checkpointer checks the room its files need itself).
  if (o.save && writer) await checkOutputFile(o.save, '--save', modelFileBytes(net));
  const shape = [resolved.inputDim, ...resolved.layers.map((l) => `${l.size}${l.sampling ? ` (${l.sampling.hash} K=${l.sampling.K} L=${l.sampling.L})` : ''}`)].join(' -> ');
  if (!quiet) io.err(`network: ${shape}; ${formatBytes(net.memoryBytes())} shared state; ${workers} worker(s)\n`);
  let checkpoints = 0;
  let lastCheckpointFile: string | null = null;
  // Under MPI, rank 0 alone writes checkpoints (every replica holds the same state).
  const checkpoint = o.checkpoint && (!dist || dist.isRoot)
    ? {
        dir: o.checkpoint,
        every: o.checkpointEvery ?? '10m',
        extra: { cli: savedCli({ ...o, train: trainPath }) },
        onSaved: (i: { file: string }) => {
          checkpoints++;
          lastCheckpointFile = i.file;
        },
      }
    : undefined;

  // The --log file is opened at its first record, after fit() has taken the checkpoint directory's lock:
  // a second run started by mistake must not truncate the log of the run it collides with.
  let log: FileHandle | undefined;
  const logRecord = async (record: object) => {
    if (!o.log || (dist && !dist.isRoot)) return;
    log ??= await open(o.log, resumed ? 'a' : 'w');
    await log.write(JSON.stringify(record) + '\n');
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
    const records: EpochRecord[] = [];
    let prevSamples = 0, prevSeconds = 0, checkpointWarnings = 0;
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
          bar?.update(p.epoch * p.batchesPerEpoch + p.batch, p.epochs * p.batchesPerEpoch,
            `epoch ${p.epoch + 1}/${p.epochs}${loss} ${Math.round(p.samplesPerSec)} samples/s`);
        },
        onEpochEnd: async (epoch, st) => {
          const v = st.validation?.at(-1);
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
      if (stats.bestEpoch) io.err(`kept the weights of epoch ${stats.bestEpoch} (best held-out score of ${stats.validation!.length} epochs; ${stats.validationPoints} points held out)\n`);
    }
    // The model is saved whatever happened to the checkpoints (a full or read-only checkpoint disk must
    // not cost the trained weights). Exit status: 0 when the trained state is saved somewhere (--save, or
    // without --save the final checkpoint), even if some checkpoints failed (warned above, counted in the
    // JSON summary); 1 when neither holds it.
    const finalFailure = stats.checkpointFailures?.find((f) => f.reason !== 'periodic');
    if (o.save && (!dist || dist.isRoot)) {
      try {
        await net.save(o.save);
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
    if (metrics && !quiet) io.out(`test: ${metricLine(metrics)}\n`);
    const summary = {
      ...(metrics ?? {}),
      samplesPerSec: stats.samplesPerSec,
      trainSeconds: stats.trainSeconds,
      rebuildSeconds: stats.rebuildSeconds,
      indexSeconds: stats.indexSeconds,
      rebuilds: stats.rebuilds,
      epochs: stats.epochs,
      ...(stats.bestEpoch !== undefined ? { bestEpoch: stats.bestEpoch, validationPoints: stats.validationPoints } : {}),
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
      ...(resumed ? { resumedFrom: resumed.resumeInfo!.file, resumedAt: resumed.resumeInfo!.position.batchesDone } : {}),
      ...(dist ? dist.summary(net) : {}),
    };
    await logRecord({ type: 'summary', ...summary });
    if (o.json) io.out(JSON.stringify({ ...summary, history: records }) + '\n');
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
  const quiet = !!o.json || !!o.quiet;
  await checkInputFile(o.model, '--model');
  await checkInputFile(o.test, '--test');
  const net = await Network.load(o.model, { maxMemory: o.maxMemory, workers: o.workers });
  const outputs = net.config.layers.at(-1)!.size;
  const ks = parseKs(o.k ?? '1,3,5', outputs);
  const format = o.format ?? (net.textVectorizer ? 'text' : 'xc');
  const test = format === 'text'
    ? await loadTextInput(net, o.test, o.test, true, io, quiet, o.maxMemory)
    : await loadData(o.test, format, 'test data', quiet, memoryLimitBytes(o.maxMemory));
  checkEvaluable(test, o.test);
  checkFits(test, o.test, net.config.inputDim, outputs);
  const mode = o.mode ?? 'exact';
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
      outputsScoredFraction: scored / outputs, indexSeconds, peakRssMB: peakRssMB(),
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
  /**
   * What is printed: 'xc' (a sparse score matrix of label ids, with a header) or 'jsonl'. Default: jsonl
   * (with label names) for a model with label names, else xc.
   */
  format?: 'xc' | 'jsonl';
  k?: number;
  workers?: number;
  mode?: 'exact' | 'sampled';
  candidates?: number;
  quiet?: boolean;
  /** Refuse a model or data needing more bytes (default: 90% of the machine's memory). */
  maxMemory?: number;
}

export async function predictCommand(o: PredictCliOptions, io: Out): Promise<number> {
  const quiet = !!o.quiet;
  const fromStdin = o.input === '-';
  if (!fromStdin) await checkInputFile(o.input, '--input');
  await checkInputFile(o.model, '--model');
  const net = await Network.load(o.model, { maxMemory: o.maxMemory, workers: o.workers });
  const outputs = net.config.layers.at(-1)!.size;
  const k = o.k ?? 5;
  if (k > outputs) throw new UsageError(`option --k ${k} exceeds the model's ${outputs} labels`);
  let spool: string | undefined;
  let data: SparseDataset;
  try {
    // Standard input is spooled to a temporary file: the readers stream files (and say which line is wrong).
    if (fromStdin) spool = await spoolStdin();
    const inputFormat = o.inputFormat ?? (net.textVectorizer ? 'text' : 'xc');
    data = await (inputFormat === 'text'
      ? loadTextInput(net, spool ?? o.input, fromStdin ? '<stdin>' : o.input, false, io, quiet, o.maxMemory)
      : loadData(spool ?? o.input, inputFormat, fromStdin ? 'standard input' : 'input', quiet, memoryLimitBytes(o.maxMemory)))
      .catch((e: unknown) => {
        throw spool && e instanceof Error ? new Error(e.message.replaceAll(spool, '<stdin>')) : e;
      });
  } finally {
    if (spool) await rm(dirname(spool), { recursive: true, force: true });
  }
  const inputName = fromStdin ? '<stdin>' : o.input;
  if (data.features > net.config.inputDim) throw new Error(`${inputName} has ${data.features} features but the network's inputDim is ${net.config.inputDim}`);
  const { bar, onProgress } = pointsProgress(quiet, 'predicting');
  let p;
  try {
    p = await net.predict(data, { k, mode: o.mode ?? 'exact', workers: o.workers, candidates: o.candidates, onProgress });
  } finally {
    bar?.done();
  }
  await writePredictions(p, o.format ?? (net.labelNames ? 'jsonl' : 'xc'), outputs, io, net.labelNames);
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
    return await trainCommand({ train: join(dir, 'train.txt'), test: join(dir, 'test.txt'), networkConfig: config, epochs: 3, json: o.json, quiet: o.quiet, workers: o.workers }, io);
  } finally {
    if (!o.keep) await rm(dir, { recursive: true, force: true });
  }
}
