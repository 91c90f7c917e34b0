// train(job): what `sublinear train` does, as one library call. It reads the data (files or datasets in
// memory, numeric or raw text), builds the network (the defaults rule, a configuration, a warm start from a
// model, or a resumed checkpoint), checks the memory plan, trains it (held-out selection, checkpoints, --log,
// progress, data-parallel or label-sharded under MPI), saves it, evaluates it on the test data and returns the
// network with the report that `train --json` prints. src/cli/train.ts only parses the flags, calls it and
// prints what it returns.
import { dirname, resolve } from 'node:path';
import { DataFormatError, type SparseDataset } from '../datasets/index.js';
import { defaultConfig, defaultThreads, defaultTraining, resolveConfig, type NetworkConfig, type ResolvedNetworkConfig } from '../network/config.js';
import { defaultWorkers } from '../network/executor.js';
import { featuresOf, inputMapOf } from '../network/input-map.js';
import { addPart, checkMemory, formatBytes, planNetworkMemory, type MemoryPlan } from '../network/memory-plan.js';
import { PhaseTimer } from '../util/phases.js';
import { metricLine, type Metrics } from '../network/metrics.js';
import type { CalibrationMetrics } from '../network/calibration.js';
import { modelFileBytes, type TrainingSummary } from '../network/model-file.js';
import { Network } from '../network/network.js';
import type { TextDatasets } from '../text/load.js';
import { readCachedCalibration } from '../train/calibrate.js';
import { listCheckpointsSync, parseCheckpointEvery } from '../train/checkpoint.js';
import { coresPerRank, runAsRank, type DistributedRun } from '../train/distributed.js';
import { resolveValidation, selectionMethod } from '../train/early-stop.js';
import type { FitStats } from '../train/fit.js';
import { fit, KFOLD_MEMORY, kfoldCopyBytes, kfoldSnapshotBytes, resume, resumeInfo, runOf, type ResumeInfo } from '../train/fit-network.js';
import { runPlanLine } from '../train/plan.js';
import { holdsShardCheckpoints } from '../train/shard-checkpoint.js';
import { gatherShards, RANK_PLACEHOLDER, shardPath } from '../train/shards.js';
import { escapeControl } from '../util/bounded-text.js';
import { packageVersion } from '../util/package-root.js';
import { UsageError } from '../util/usage-error.js';
import { networkOfFile, readConfigFile, type ConfigFile, type ConfigFileTraining } from './config-file.js';
import { checkEvaluable, checkFits, denseSampledWarning, predictWarnings } from './data-checks.js';
import { dataBytes, inputFormatOf, loadData, loadTextData, memoryLimitBytes } from './data-loading.js';
import { Reporter, SILENT, type JobEvents } from './events.js';
import { checkInputFile, checkOutputDir, checkOutputFile } from './preflight.js';
import { checkCheckpointDirFree, checkResumable, OUTPUT_KEYS, readSavedCli, readSavedRecords, savedCli, type EpochRecord } from './train-checkpoint.js';
import { TrainLog } from './train-log.js';
import { keptElsewhereText, rescuePaths, saveKept, type KeptModel } from './rescue-save.js';
import type { TrainJob } from './train-options.js';
import { earlyStopProgressText } from './train-progress.js';
import { trainReport, type TrainResult } from './train-report.js';
import { trainSharded } from './train-sharded.js';
import { phaseSummary, phaseText, sayTrained } from './train-lines.js';

export type { TrainJob } from './train-options.js';
export type { TrainReport, TrainResult } from './train-report.js';

/** Periodic checkpoint write failures shown one by one before they are only counted. */
const SHOWN_CHECKPOINT_WARNINGS = 3;

/**
 * Trains a network as `sublinear train` does, with the same options (TrainJob: the flags, in camelCase)
 * and the same result (`report`, the object `train --json` prints).
 *
 * @example
 * ```ts
 * import { train } from 'sublinear';
 * const { network, report } = await train({ train: 'train.txt', test: 'test.txt', save: 'model.sl' });
 * console.log(report.metrics?.p1, network?.config.layers.length);
 * ```
 */
export async function train(job: TrainJob): Promise<TrainResult> {
  if (job.shardLabels && !job.distributed) throw new UsageError('--shard-labels needs --distributed (under mpirun)');
  if (job.dataParallel && !job.distributed) throw new UsageError('--data-parallel needs --distributed (under mpirun)');
  if (job.dataParallel && job.shardLabels) throw new UsageError('--data-parallel and --shard-labels are two different modes: give one');
  if (job.distributed) {
    // Under MPI only rank 0 reports (the others still fail loudly: errors are not progress).
    return runAsRank(null, (dist) => {
      const events = dist.isRoot ? job : SILENT;
      return job.dataParallel ? trainOn(job, events, dist) : trainSharded(job, events, dist);
    });
  }
  return trainOn(job, job, null);
}

/** The options of a run once a resumed checkpoint's are merged in, and what the run resumes. */
interface Resolved {
  /** The job's options, with a resumed checkpoint's settings under the ones given again. */
  o: TrainJob;
  file: ConfigFile | undefined;
  /** Training options: the config file's, with the job's `training` on top (the job's other options override both). */
  training: ConfigFileTraining;
  resumed: Network | undefined;
  rinfo: ResumeInfo | undefined;
  /** The epoch records of the run up to the resumed checkpoint (the log and the JSON history continue them). */
  priorRecords: EpochRecord[];
  /** Whether the resumed checkpoint holds its epochs' records (older ones do not: their log is appended to). */
  priorKnown: boolean;
  /** Input paths taken from the checkpoint, not the job: shown before they are read. */
  recordedInputs: string[];
}

/** A run's context: the job, where it reports, and its rank of an MPI job (null: one process). */
interface Ctx {
  given: TrainJob;
  r: Reporter;
  dist: DistributedRun | null;
  /** This process writes the outputs (one process, or rank 0). */
  writer: boolean;
  /** A data path as this rank reads it (`%r` in the name is the rank). */
  ownFile: (path: string) => string;
  /** Where the job's time goes (the report's `phases`): reading, fit()'s own phases, saving, testing. */
  phases: PhaseTimer;
  /**
   * fit() is in its selection phase (copies of the network choose the epoch count: the network itself is
   * untrained, and a stop now saves no model). Known from the phase's start checkpoint, the copies' phases
   * and their progress; the network's own progress ends it.
   */
  inSelection: boolean;
}

async function trainOn(given: TrainJob, events: JobEvents, dist: DistributedRun | null): Promise<TrainResult> {
  // --json changes only what stdout prints: a long run (an MPI job above all) still shows its progress.
  const r = new Reporter(events, !!given.quiet || (dist !== null && !dist.isRoot));
  const ctx: Ctx = {
    given, dist, r,
    writer: !dist || dist.isRoot, ownFile: (path) => (dist ? shardPath(path, dist.rank) : path),
    // The phases after the epochs are said as they start (the epochs have their progress bar).
    phases: new PhaseTimer('', undefined, (name) => {
      if (name.startsWith('selection.')) ctx.inSelection = true;
      const text = phaseText(name);
      if (text) r.say(text);
    }),
    inSelection: false,
  };
  checkGiven(given);
  await checkTrainPaths({ ...given, train: typeof given.train === 'string' ? ctx.ownFile(given.train) : undefined }, ctx.writer);
  // Everything that can be checked without reading data is checked first: paths, then the config file.
  const file = typeof given.config === 'string' ? await readConfigFile(given.config) : undefined;
  const run = given.resume ? await resumeRun(ctx, file) : await startRun(ctx, file);
  const data = await readData(ctx, run);
  const built = await buildNetwork(ctx, run, data);
  const stop = watchStop(ctx, run);
  try {
    const trained = await fitNetwork(ctx, run, data, built, stop);
    return await finish(ctx, run, data, built, trained);
  } finally {
    stop.dispose();
  }
}

/** How a stop asked for through the job's signal is seen: its name once it came ('SIGINT', 'SIGTERM', 'abort'). */
interface Stop {
  stopped: string | null;
  dispose(): void;
}

/**
 * A stop asked for (Ctrl-C, SIGTERM: the CLI's) ends training after the batches in flight, then the run
 * checkpoints and saves as at its end; said at once, quiet or not.
 */
function watchStop(ctx: Ctx, run: Resolved): Stop {
  const { o } = run;
  const signal = o.signal;
  const stop: Stop = { stopped: null, dispose: () => signal?.removeEventListener('abort', onStop) };
  const onStop = () => {
    stop.stopped = typeof signal!.reason === 'string' ? signal!.reason : 'abort';
    const name = stop.stopped === 'SIGINT' ? 'Ctrl-C' : stop.stopped;
    const saving = ctx.inSelection ? ' (nothing is trained yet: no model is saved)' : o.save ? ` and saving ${o.save}` : '';
    ctx.r.notice(`\n${name}: stopping after the batches in flight${o.checkpoint && ctx.writer ? ', writing a checkpoint' : ''}` +
      `${saving} (${name} again to stop at once)`);
  };
  if (signal?.aborted) onStop();
  else signal?.addEventListener('abort', onStop, { once: true });
  return stop;
}

/** Refusals of option combinations, before anything is read. */
function checkGiven(given: TrainJob): void {
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
}

/**
 * Pre-flight of every path a train job will read or write, before any data is read. `outputs` false:
 * inputs only (the ranks of an MPI job other than 0 write nothing, and their machines may lack rank 0's
 * output directories).
 */
async function checkTrainPaths(o: Pick<TrainJob, 'train' | 'test' | 'save' | 'log' | 'checkpoint'>, outputs = true): Promise<void> {
  if (typeof o.train === 'string') await checkInputFile(o.train, '--train');
  if (typeof o.test === 'string') await checkInputFile(o.test, '--test');
  if (!outputs) return;
  if (o.save) await checkOutputFile(o.save, '--save');
  if (o.log) await checkOutputFile(o.log, '--log');
  if (o.checkpoint) await checkOutputDir(o.checkpoint, '--checkpoint');
}

async function startRun(ctx: Ctx, file: ConfigFile | undefined): Promise<Resolved> {
  const given = ctx.given;
  if (given.useRecordedOutputs) throw new UsageError('--use-recorded-outputs needs --resume <dir>');
  // A locked directory or one holding another run's checkpoints is refused before the data is read.
  if (given.checkpoint && ctx.writer) await checkCheckpointDirFree(given.checkpoint, null);
  return { o: given, file, training: { ...file?.training, ...given.training }, resumed: undefined, rinfo: undefined, priorRecords: [], priorKnown: false, recordedInputs: [] };
}

async function resumeRun(ctx: Ctx, file: ConfigFile | undefined): Promise<Resolved> {
  const { given, r, dist, writer } = ctx;
  if (await holdsShardCheckpoints(given.resume!)) {
    throw new UsageError(`${given.resume} holds label-sharded checkpoints: resume them with --distributed ` +
      '(in one process too, without mpirun; under mpirun -np R with any number of ranks)');
  }
  // The network alone is checked against the memory limit before the checkpoint allocates it; the
  // full plan (training data included, with the saved settings) is checked again below. The saved
  // worker count is not known yet: without --workers, count the least scratch (a lower bound).
  const resumeOpts = { onWarning: (m: string) => r.notice(`sublinear: ${m}`), maxMemory: given.maxMemory, workers: given.workers };
  const resumed = await (dist ? dist.resume(given.resume!, resumeOpts) : resume(given.resume!, resumeOpts));
  const info = resumeInfo(resumed)!;
  checkResumable(resumed, given.epochs);
  // Saved settings first, options given again on top; checkpoints continue in the resumed directory.
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
    r.say(`writing the outputs ${info.file} records (--use-recorded-outputs): ${list}`);
  }
  if (!given.useRecordedOutputs) for (const k of OUTPUT_KEYS) delete saved[k];
  const defined = Object.fromEntries(Object.entries(given).filter(([, v]) => v !== undefined)) as TrainJob;
  const o: TrainJob = { ...saved, checkpoint: dirname(info.file), ...defined };
  if (!o.train) throw new UsageError(`${info.file} does not record its training data (it was not written by sublinear train); give --train`);
  const recordedInputs: string[] = [];
  for (const k of ['train', 'test'] as const) if (given[k] === undefined && typeof o[k] === 'string') recordedInputs.push(`--${k} ${escapeControl(o[k] as string)}`);
  // The recorded paths are shown before they are read, and checked first (they may have moved since).
  if (recordedInputs.length) r.say(`reading the data ${info.file} records: ${recordedInputs.join(', ')}`);
  const from = (k: 'train' | 'test') => (given[k] === undefined ? `--${k} (recorded in ${info.file})` : `--${k}`);
  if (typeof o.train === 'string') await checkInputFile(ctx.ownFile(o.train), from('train'));
  if (typeof o.test === 'string') await checkInputFile(o.test, from('test'));
  if (writer) await checkTrainPaths({ save: o.save, log: o.log });
  if (o.checkpoint && writer) await checkCheckpointDirFree(o.checkpoint, dirname(info.file));
  const priorRecords = readSavedRecords(info.extra, info.position.epoch);
  const p = info.position;
  r.say(`resuming from ${info.file}: epoch ${p.epoch + 1}, batch ${p.batch} (${p.batchesDone} batches done)`);
  return { o, file, training: { ...file?.training, ...o.training }, resumed, rinfo: info, priorRecords, priorKnown: priorRecords.length > 0 || info.position.epoch === 0, recordedInputs };
}

/** The data a run trains and is tested on, a warm start's model, and the most the readers' buffers held. */
interface Data {
  train: SparseDataset;
  test: SparseDataset | undefined;
  text: TextDatasets | undefined;
  initNet: Network | undefined;
  /** The most the readers' buffers held: garbage once read, but freed only at a collection, so planned. */
  readStats: { bufferBytes: number };
  /** The training data's name in messages (its path, or 'the training data' in memory). */
  trainName: string;
}

async function readData(ctx: Ctx, run: Resolved): Promise<Data> {
  const { given, r, dist } = ctx;
  const o = run.o;
  const limit = memoryLimitBytes(o.maxMemory);
  const format = inputFormatOf(o);
  if (typeof given.init === 'string') await checkInputFile(given.init, '--init');
  const textFlag = (['minDf', 'bigrams', 'maxVocabulary', 'hashBits'] as const).find((k) => given[k] !== undefined && given[k] !== false);
  const flagName = (k: string) => `--${k.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)}`;
  if (textFlag && format !== 'text') throw new UsageError(`${flagName(textFlag)} applies to --input-format text only`);
  if (textFlag && o.init) throw new UsageError(`${flagName(textFlag)} cannot be combined with --init: the vocabulary comes from the --init model`);
  // The warm start's model (a resumed warm start reloads it for its vectorizer and label names only).
  const initNet = typeof o.init === 'string' ? await Network.load(o.init, { maxMemory: o.maxMemory, workers: o.workers }) : o.init;
  if (initNet && (format === 'text') !== !!initNet.textVectorizer) {
    throw new Error(format === 'text'
      ? `${o.init} was trained on numeric features: --input-format text needs a model trained on text`
      : `${o.init} was trained on text: give the new data as text (--input-format text)`);
  }
  const readStats = { bufferBytes: 0 };
  const trainPath = typeof o.train === 'string' ? o.train : undefined;
  const testPath = typeof o.test === 'string' ? o.test : undefined;
  // A data file named by a checkpoint, not the job, may be anyone's file: a format error in it names the
  // file and line but does not quote its content (naming the file with --train/--test shows it).
  const recordedPaths = new Set(run.recordedInputs.length ? [given.train === undefined && trainPath ? ctx.ownFile(trainPath) : null, given.test === undefined ? testPath : null] : []);
  const unquoted = <T>(p: Promise<T>): Promise<T> => p.catch((e: unknown) => {
    if (!(e instanceof DataFormatError) || !recordedPaths.has(e.file)) throw e;
    const flag = e.file === testPath ? '--test' : '--train';
    throw new DataFormatError(escapeControl(e.file), e.line, `not readable as data; its content is not shown because the path comes from the checkpoint, not the command line (give ${flag} ${escapeControl(e.file)} to see the problem)`);
  });
  let train: SparseDataset, test: SparseDataset | undefined, text: TextDatasets | undefined;
  if (format === 'text') {
    if (!trainPath || (o.test !== undefined && !testPath)) throw new UsageError('--input-format text reads files: give the text data as paths');
    if (dist && trainPath.includes(RANK_PLACEHOLDER)) throw new UsageError('--input-format text cannot read per-rank shards (%r): give every rank the whole file');
    const read = await ctx.phases.time('read', () => unquoted(loadTextData(trainPath, testPath, o, initNet, r, limit, readStats)));
    text = read;
    train = read.train;
    test = read.test;
  } else {
    const own = trainPath ? await ctx.phases.time('read', () => unquoted(loadData(ctx.ownFile(trainPath), format, 'training data', r, limit, o.zeroBased, readStats))) : o.train as SparseDataset;
    // Shards are exchanged so that every rank trains on the same concatenation (the same decisions everywhere).
    train = dist && trainPath?.includes(RANK_PLACEHOLDER) ? gatherShards(own, dist.comm) : own;
    test = testPath ? await ctx.phases.time('read', () => unquoted(loadData(testPath, format, 'test data', r, Math.max(0, limit - dataBytes(train)), o.zeroBased, readStats))) : o.test as SparseDataset | undefined;
  }
  const trainName = trainPath ?? 'the training data';
  if (train.labelOffsets[train.points] === 0) throw new Error(`${trainName}: no labels (${train.points} points, none with a label): there is nothing to train on`);
  if (test) checkEvaluable(test, testPath ?? 'the test data');
  return { train, test, text, initNet, readStats, trainName };
}

/** The network to train, and the settings its memory plan was checked with. */
interface Built {
  net: Network;
  resolved: ResolvedNetworkConfig;
  workers: number;
  threads: number;
  /** The run keeps held-out validation's best epoch's weights (the network itself, not a selection copy). */
  validating: boolean;
  epochs: number | undefined;
  batchSize: number | undefined;
  lr: number | undefined;
  /** The memory plan checked (the report's `memory`). */
  plan: MemoryPlan;
}

async function buildNetwork(ctx: Ctx, run: Resolved, data: Data): Promise<Built> {
  const { r, dist, writer } = ctx;
  const { o, file, resumed, rinfo } = run;
  const { train, test, text, initNet, trainName } = data;
  const t = run.training;
  // A warm start grows the model's output layer to the labels of the new data (old labels keep their rows).
  const grown = initNet && !resumed ? initNet.grow(Math.max(initNet.config.layers.at(-1)!.size, train.labels), text?.labelNames) : undefined;
  if (grown) {
    const before = initNet!.config.layers.at(-1)!.size, after = grown.config.layers.at(-1)!.size;
    r.say(`warm start from ${typeof o.init === 'string' ? o.init : 'the given network'}: ${before} labels${after > before ? `, grown to ${after} (${after - before} new)` : ''}`);
  }
  const config = networkConfig(o, file, resumed, grown, train);
  let resolved: ResolvedNetworkConfig;
  try {
    resolved = resolveConfig(config);
  } catch (e) {
    // The file was checked before the data was read, all but the inputDim the data gives: name it.
    throw file ? new Error(`${o.config}: ${(e as Error).message}`) : e;
  }
  // The input dimension the data is checked against: a resumed or warm-started network with an input map
  // (src/network/input-map.ts) declares more features than its layer 0 has rows.
  const declared = (resumed ?? grown)?.inputMap?.features ?? resolved.inputDim;
  if (train.features > declared) throw new Error(`${trainName} has ${train.features} features but the configuration's inputDim is ${declared}`);
  const outputs = resolved.layers.at(-1)!.size;
  if (test) checkFits(test, typeof o.test === 'string' ? o.test : 'the test data', declared, outputs);
  const dense = o.mode === 'sampled' && test && writer ? denseSampledWarning(resolved, 'the network') : null;
  if (dense) r.warn(dense);
  if (!resumed && outputs > train.labels && writer) {
    r.warn(`the network's last layer has ${outputs} neurons but ${trainName} has ${train.labels} labels: ` +
      `outputs ${train.labels}..${outputs - 1} are never a true label and only learn to score low (make the last layer ${train.labels})`);
  }
  const epochs = o.epochs ?? t.epochs;
  const batchSize = o.batch ?? t.batchSize;
  const lr = o.lr ?? t.lr;
  const workers = o.workers ?? t.workers ?? defaultTraining(resolved, dist ? coresPerRank(defaultWorkers()) : defaultWorkers()).workers;
  // Intra-batch threads go to a lone worker (defaultThreads); replicated ranks train in mode 3 (one thread).
  const threads = o.threads ?? t.threads ?? (dist ? 1 : defaultThreads(resolved, defaultWorkers(), workers));
  // Without epochs, training holds out a validation slice and keeps a copy of the best epoch's weights (a
  // selection copy keeps them instead, counted in the plan).
  const validating = rinfo ? !!rinfo.fitOptions.validation : t.validation === false ? false : t.validation !== undefined || epochs === undefined;
  const copies = selectionCopies(ctx, run, resolved, train, epochs, declared);
  const bestWeights = copies.count > 0 ? false : validating;
  // A new network's layer 0 holds rows only for the features the training data holds (its input map).
  const inputMap = resumed || grown ? null : inputMapOf(train, declared);
  const rows = inputMap ? { ...resolved, inputDim: inputMap.ids.length } : resolved;
  const plan = planNetworkMemory(rows, workers, train, bestWeights);
  addPart(plan, 'read buffers', data.readStats.bufferBytes);
  addPart(plan, copies.name, copies.count * copies.bytes);
  checkMemory(plan, o.maxMemory !== undefined ? { maxBytes: o.maxMemory } : {});
  const net = resumed ?? grown ?? new Network(config, inputMap ? { inputMap } : {});
  if (text) {
    net.textVectorizer = text.vectorizer;
    net.labelNames = text.labelNames;
  }
  // Room for the model file before training (the Checkpointer checks the room its files need itself).
  if (o.save && writer) await checkOutputFile(o.save, '--save', modelFileBytes(net));
  const held = net.inputMap ? `; layer 0 holds rows for the ${net.config.inputDim} input features the training data holds` : '';
  const shape = [declared, ...resolved.layers.map((l) => `${l.size}${l.sampling ? ` (${l.sampling.hash} K=${l.sampling.K} L=${l.sampling.L})` : ''}`)].join(' -> ');
  r.say(`network: ${shape}; ${formatBytes(net.memoryBytes())} shared state; ${workers} worker(s)${threads > 1 ? ` x ${threads} threads per batch` : ''}${held}`);
  if (!r.quiet) {
    r.say(runPlanLine(resolved, train, {
      workers, threads, batch: batchSize ?? 128, bestWeights, ranks: dist ? dist.size : 1, mode: dist ? 'replicated' : 'single',
      ...(dist ? { cores: coresPerRank(defaultWorkers()) } : {}),
    }, await readCachedCalibration(resolved)));
  }
  // Without --save (or a checkpoint) the trained weights are kept nowhere: say so before training.
  if (!o.save && !o.checkpoint && !o.unsavedOk && writer) r.warn('no --save: the trained model will not be kept (give --save <model> to keep it)');
  return { net, resolved, workers, threads, validating, epochs, batchSize, lr, plan };
}

/** The network's configuration: the checkpoint's, the warm start's, the job's, the file's or the defaults rule's. */
function networkConfig(o: TrainJob, file: ConfigFile | undefined, resumed: Network | undefined, grown: Network | undefined, train: SparseDataset): NetworkConfig {
  if (resumed) return resumed.config;
  if (grown) return grown.config;
  if (o.networkConfig) return o.networkConfig;
  if (file) return networkOfFile(file, train, o.seed);
  return defaultConfig(train, o.seed ?? 1);
}

/**
 * Selection on copies of the network, for the memory plan: k-fold on small training sets (copies side by
 * side, at most KFOLD_MEMORY), or up to refitMaxPoints points one copy that chooses on the held-out slice.
 * Each copy keeps its best-epoch weights; the network itself then trains on all points and keeps none.
 */
function selectionCopies(ctx: Ctx, run: Resolved, resolved: ResolvedNetworkConfig, train: SparseDataset, epochs: number | undefined, declared: number): { count: number; bytes: number; name: string } {
  const t = run.training;
  const savedValidation = run.rinfo ? run.rinfo.fitOptions.validation ?? null : undefined;
  const v = savedValidation !== undefined ? savedValidation : t.validation === false || epochs !== undefined ? null : resolveValidation(t.validation ?? {});
  if (!v || ctx.dist || (run.resumed && run.resumed.batchesDone !== 0)) return { count: 0, bytes: 0, name: '' };
  const kfold = selectionMethod(train.points, v) === 'kfold';
  // k-fold copies take only the features of the training data as input (compactInputs in fit-network.ts).
  const bytes = kfold ? kfoldCopyBytes(resolved, featuresOf(train, declared).length) : planNetworkMemory(resolved, 1).totalBytes + kfoldSnapshotBytes(resolved);
  const folds = kfold ? Math.min(v.folds, Math.floor(train.points / 2), Math.floor(KFOLD_MEMORY / Math.max(1, bytes))) : 0;
  const count = folds >= 2 ? folds : !kfold && train.points <= v.refitMaxPoints && bytes <= KFOLD_MEMORY ? 1 : 0;
  return { count, bytes, name: folds >= 2 ? `${folds} network copies for k-fold selection` : 'a network copy for the held-out selection' };
}

/** What fitting left: the statistics, the epochs' records and test scores, the log, the checkpoints written. */
interface Trained {
  stats: FitStats;
  records: EpochRecord[];
  testByEpoch: Map<number, Metrics>;
  log: TrainLog | null;
  checkpoint: { dir: string } | undefined;
  checkpoints: number;
  lastCheckpointFile: string | null;
  stop: Stop;
  evalOpts: EvalOpts;
}

type EvalOpts = { mode: 'exact' | 'sampled'; workers: number; candidates?: number; propensityA?: number; propensityB?: number; onWarning: (message: string) => void };

async function fitNetwork(ctx: Ctx, run: Resolved, data: Data, built: Built, stop: Stop): Promise<Trained> {
  const { r, dist, writer } = ctx;
  const { o, rinfo, resumed, priorRecords } = run;
  const { train, test } = data;
  const { net, workers, threads, batchSize, epochs, lr } = built;
  const t = run.training;
  const records: EpochRecord[] = [];
  let checkpoints = 0;
  let lastCheckpointFile: string | null = null;
  // Under MPI, rank 0 alone writes checkpoints (every replica holds the same state).
  const trainPath = typeof o.train === 'string' ? o.train : undefined;
  const checkpoint = o.checkpoint && writer
    ? {
        dir: o.checkpoint,
        every: o.checkpointEvery ?? '10m',
        // The epochs' records so far go into every checkpoint: a resumed run's log and history continue them.
        extra: () => ({ ...(trainPath ? { cli: savedCli({ ...o, train: trainPath }) } : {}), epochs: [...priorRecords, ...records] }),
        onSaved: (i: { file: string; reason: string }) => {
          checkpoints++;
          lastCheckpointFile = i.file;
          // The selection phase's start is written before the copies train (their progress follows).
          if (i.reason === 'start') ctx.inSelection = true;
        },
      }
    : undefined;
  const bar = r.progress('training', 'batches');
  const log = o.log && writer ? new TrainLog(o.log, priorRecords, !!resumed && !run.priorKnown, (m) => r.warn(m)) : null;
  // Test evaluation splits the points into chunks: every core helps, whatever trained (unless --workers says).
  const evalWorkers = dist ? workers : o.workers ?? t.workers ?? Math.max(workers, defaultWorkers());
  const evalOpts: EvalOpts = {
    mode: net.inferenceMode(o.mode), workers: evalWorkers, candidates: o.candidates, propensityA: o.propensityA, propensityB: o.propensityB,
    onWarning: predictWarnings(net.config, (w) => r.warn(w)),
  };
  const testByEpoch = new Map<number, Metrics>();
  // The progress display of a run whose length held-out validation decides (a resumed run continues its state).
  let firstAt: number | undefined;
  const early = { best: (resumed ? runOf(resumed).earlyStop?.state.bestEpoch : undefined) ?? 0 };
  const patience = rinfo?.fitOptions.validation?.patience ?? resolveValidation(t.validation || {}).patience;
  const batchSamples = batchSize ?? rinfo?.fitOptions.batchSize ?? 128;
  let prevSamples = 0, prevSeconds = 0, checkpointWarnings = 0;
  // A resumed run's epochs continue the training time recorded up to its checkpoint.
  const secondsBefore = priorRecords.at(-1)?.trainSeconds ?? 0;
  let stats: FitStats;
  try {
    stats = await fit(net, train, {
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
      threads,
      phases: ctx.phases,
      // The job saves and tests the network and never trains it again: its optimizer state goes before the
      // re-ranker's peak (not under --distributed, whose executor keeps the replicas' state).
      releaseTrainingState: !dist,
      ...(o.signal ? { signal: o.signal } : {}),
      checkpoint,
      progressEvery: 1,
      // Checkpoint write failures and lost batches: reported, training goes on.
      // A full disk fails every periodic checkpoint alike: the first few are shown, then only the final one;
      // the count is in the summary (checkpointFailures).
      onWarning: (m) => {
        const periodicFailure = m.startsWith('cannot write checkpoint') && m.includes('Training goes on');
        if (periodicFailure && ++checkpointWarnings > SHOWN_CHECKPOINT_WARNINGS) {
          if (checkpointWarnings === SHOWN_CHECKPOINT_WARNINGS + 1) r.warn('further checkpoint write failures are counted, not shown');
          return;
        }
        r.warn(m);
      },
      ...(dist ? dist.fitOptions(net, workers, train, batchSize ?? rinfo?.fitOptions.batchSize ?? 128) : {}),
      onProgress: (p) => {
        ctx.inSelection = p.fold !== undefined || p.selection !== undefined;
        // No batch finished since the last report (e.g. right after Ctrl-C): keep the last loss shown.
        const loss = Number.isFinite(p.loss) ? ` loss ${p.loss.toFixed(4)}` : '';
        const at = p.epoch * p.batchesPerEpoch + p.batch;
        // A resumed run starts part-way: its rate and ETA count from its checkpoint.
        const from = rinfo?.position;
        firstAt ??= from ? from.epoch * p.batchesPerEpoch + from.batch : 0;
        const speed = `${loss} ${Math.round(p.samplesPerSec)} samples/s`;
        if (!p.epochsIsLimit) {
          bar?.update(at - firstAt, p.epochs * p.batchesPerEpoch - firstAt, `${p.fold ? `choosing epochs (${p.fold.folds} folds side by side): ` : ''}epoch ${p.epoch + 1}/${p.epochs}${speed}`);
          return;
        }
        // Held-out validation decides the length: the cap is no estimate; the line says what is known.
        const phase = p.selection ? 'choosing epochs on the held-out slice (a copy of the network): ' : '';
        bar?.update(at - firstAt, undefined, phase + earlyStopProgressText(p, { best: p.selection ? 0 : early.best, patience }, p.batchesPerEpoch * batchSamples) + speed);
      },
      onEpochEnd: async (epoch, st) => {
        const v = st.validation?.at(-1);
        if (v && v.epoch === epoch + 1 && st.bestEpoch !== undefined) early.best = st.bestEpoch;
        if (v && v.epoch === epoch + 1) r.say(`epoch ${epoch + 1}: held-out P@1 ${v.p1.toFixed(4)} P@3 ${v.p3.toFixed(4)} P@5 ${v.p5.toFixed(4)} (lr ${v.lr.toPrecision(3)})${v.gain ? `; score ${v.gain.gain >= 0 ? '+' : ''}${v.gain.gain.toFixed(4)} ± ${v.gain.se.toFixed(4)} over epoch ${v.gain.ref}` : ''}`);
        let tm: Metrics | undefined;
        if (test && o.evalEvery && (epoch + 1) % o.evalEvery === 0) {
          tm = await (dist ? dist.evaluate(net, test, evalOpts) : net.evaluate(test, evalOpts));
          testByEpoch.set(epoch + 1, tm);
          r.say(`epoch ${epoch + 1}: test ${metricLine(tm)}`);
        }
        const h = st.history.at(-1);
        if (h && h.epoch === epoch + 1) {
          const rec: EpochRecord = {
            ...h,
            trainSeconds: secondsBefore + h.trainSeconds,
            samplesPerSec: (st.samples - prevSamples) / Math.max(1e-9, h.trainSeconds - prevSeconds),
            ...(v && v.epoch === h.epoch ? { validation: { p1: v.p1, p3: v.p3, p5: v.p5, lr: v.lr } } : {}),
            ...(tm ? { test: tm } : {}),
          };
          prevSamples = st.samples;
          prevSeconds = h.trainSeconds;
          records.push(rec);
          await log?.write({ type: 'epoch', ...rec });
        }
      },
    });
  } catch (e) {
    await log?.close();
    throw e;
  } finally {
    bar?.done();
  }
  return { stats, records, testByEpoch, log, checkpoint, checkpoints, lastCheckpointFile, stop, evalOpts };
}

/** After training: what was chosen, the saved model, the test scores and the report. */
async function finish(ctx: Ctx, run: Resolved, data: Data, built: Built, trained: Trained): Promise<TrainResult> {
  const { r, dist, writer } = ctx;
  const { o } = run;
  const { net } = built;
  const { stats, checkpoint } = trained;
  try {
    if (!r.quiet) sayTrained(r, trained, data.train.points);
    // The model is saved whatever happened to the checkpoints (a full or read-only checkpoint disk must
    // not cost the trained weights); when `save` cannot be written, somewhere else (rescue-save.ts).
    const finalFailure = stats.checkpointFailures?.find((f) => f.reason !== 'periodic');
    // Stopped during the selection phase: the network is as the run began, no model: nothing is saved (a
    // `save` file from an earlier run is left as it was), and the exit status says interrupted.
    const untrained = stats.stoppedIn === 'selection';
    if (untrained && writer) sayStoppedInSelection(r, o.save, checkpoint?.dir);
    const saved = o.save && writer && !untrained ? await save(ctx, run, data, built, trained, !finalFailure) : undefined;
    // The test set is evaluated on the weights the network ends with, unless evalEvery already did
    // (exact inference of the same weights gives the same numbers); a run stopped by a signal skips it.
    const finalEpoch = stats.bestEpoch ?? (stats.aborted ? undefined : stats.epochs);
    // (Not with a re-ranker: the epochs were scored without it; nor with calibrated probabilities: their
    // metrics need the candidates' scores.)
    const reuse = trained.evalOpts.mode === 'exact' && finalEpoch !== undefined && !net.rerank && !net.calibration ? trained.testByEpoch.get(finalEpoch) : undefined;
    const test = data.test;
    const tested = test && !trained.stop.stopped
      ? reuse ?? (await ctx.phases.time('test', () => (dist ? dist.evaluate(net, test, trained.evalOpts) : net.evaluate(test, trained.evalOpts))))
      : undefined;
    const { calibration: testCalibration, ...metrics } = (tested ?? {}) as Metrics & { calibration?: CalibrationMetrics };
    // (dist.evaluate compares the replicas' checksums first; without it, compare them here.)
    if (dist && (!test || reuse)) await dist.verify(net);
    const report = trainReport({
      mode: dist ? 'replicated' : 'single', ranks: dist ? dist.size : 1, metrics: tested ? metrics : null, stats, testCalibration,
      batchSize: built.batchSize ?? run.rinfo?.fitOptions.batchSize ?? 128, lr: savedLr(run, built, stats), workers: built.workers,
      model: o.save && !untrained ? resolve(saved?.file ?? o.save) : null, signal: trained.stop.stopped, batchesDone: net.batchesDone,
      ...(saved?.error ? { saveError: `${o.save}: ${saved.error}` } : {}),
      checkpoints: checkpoint ? { written: trained.checkpoints, failed: stats.checkpointFailures?.length ?? 0 } : null,
      logFailures: trained.log ? trained.log.failures : undefined,
      resumed: run.rinfo ? { file: run.rinfo.file, batchesDone: run.rinfo.position.batchesDone } : null,
      history: [...run.priorRecords, ...trained.records],
      distributed: dist ? dist.summary(net) : null,
      phases: phaseSummary(ctx.phases),
      memory: built.plan,
    });
    const { history: _, ...summary } = report;
    await trained.log?.write({ type: 'summary', ...summary });
    if (trained.log) report.logFailures = trained.log.failures; // the summary line itself may have failed
    // Counted once every record, the summary's included, was tried: the same number as the report's.
    if (trained.log && trained.log.failures > 0) r.say(`--log ${o.log}: ${trained.log.failures} record(s) not written`);
    const notSaved = finalFailure && !o.save
      ? `the trained state was not saved: the final checkpoint ${finalFailure.file} could not be written (${finalFailure.error}) and no --save was given`
      : undefined;
    return {
      network: writer ? net : null, report, rank: dist ? dist.rank : 0, ...(notSaved ? { notSaved } : {}),
      ...(saved?.error ? { savedInstead: saved.file } : {}),
    };
  } finally {
    await trained.log?.close();
  }
}

/**
 * The learning rate the model file records: the run's (validation's, not the best-weights plan's; the k-fold
 * selection's where it raised the default: kfoldRate).
 */
function savedLr(run: Resolved, built: Built, stats: FitStats): number {
  if (built.lr !== undefined) return built.lr;
  if (stats.selection?.method === 'kfold' && stats.selection.lr !== undefined) return stats.selection.lr;
  if (run.rinfo) return run.rinfo.fitOptions.lr;
  return runOf(built.net).lr ?? defaultTraining(built.resolved, built.workers).lr;
}

/** What a run stopped during its selection phase says (always): no trained model, and how to go on. */
function sayStoppedInSelection(r: Reporter, save: string | undefined, checkpointDir: string | undefined): void {
  const newest = checkpointDir !== undefined ? listCheckpointsSync(checkpointDir)[0]?.file : undefined;
  r.notice('sublinear: stopped while choosing the epoch count on copies of the network, before the network itself trained: ' +
    `there is no trained model${save ? `, so ${save} is not written` : ''}` +
    `${newest ? `; train --resume ${checkpointDir} runs it from its start (${newest})` : ''}`);
}

/**
 * Writes the model file (the job's `save`), or when it cannot be written keeps the model elsewhere and says
 * where (rescue-save.ts: `error` is then why `save` failed); throws, saying where the weights are, only
 * when no file could be written.
 */
async function save(ctx: Ctx, run: Resolved, data: Data, built: Built, trained: Trained, finalCheckpointed: boolean): Promise<{ file: string; error?: string }> {
  const { o } = run;
  const { stats, checkpoint, lastCheckpointFile } = trained;
  const train = data.train;
  const training: TrainingSummary = {
    data: {
      file: typeof o.train === 'string' ? resolve(o.train) : '', points: train.points, features: train.features, labels: train.labels,
      nonzeros: train.offsets[train.points]!,
    },
    epochs: stats.epochs,
    ...(stats.bestEpoch !== undefined ? { bestEpoch: stats.bestEpoch } : {}),
    batchSize: built.batchSize ?? run.rinfo?.fitOptions.batchSize ?? 128,
    lr: savedLr(run, built, stats),
    version: packageVersion(),
  };
  let kept: KeptModel;
  try {
    kept = await ctx.phases.time('save', () => saveKept((file) => built.net.save(file, { training }), o.save!, rescuePaths(o.save!, checkpoint?.dir)));
  } catch (e) {
    // The final checkpoint is written before the best epoch's weights are restored: it holds the last epoch's.
    const which = stats.bestEpoch !== undefined && stats.bestEpoch !== stats.epochs ? `the weights of the last epoch (${stats.epochs}; the kept best epoch was ${stats.bestEpoch})` : 'the trained weights';
    const where = checkpoint && finalCheckpointed && lastCheckpointFile
      ? `; ${which} are in the final checkpoint ${lastCheckpointFile} (eval and predict accept it as a model)`
      : '';
    throw new Error(`${(e as Error).message}${where}`, { cause: e });
  }
  o.onSaved?.(kept.file);
  if (kept.failed.length) {
    ctx.r.notice(`sublinear: ${keptElsewhereText(o.save!, kept)}`);
    return { file: kept.file, error: kept.failed[0]!.error.message };
  }
  ctx.r.say(`saved ${o.save}`);
  return { file: kept.file };
}
