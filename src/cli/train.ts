// `sublinear train`: reads the data, builds (or resumes, or warm-starts) the network, trains it with
// checkpoints, --log and progress, then saves and evaluates it.
import { open, type FileHandle } from 'node:fs/promises';
import { dirname, resolve } from 'node:path';
import { DataFormatError, type SparseDataset } from '../datasets/index.js';
import { defaultConfig, defaultThreads, defaultTraining, resolveConfig, type NetworkConfig, type ResolvedNetworkConfig } from '../network/config.js';
import { Network } from '../network/network.js';
import { fit, KFOLD_MEMORY, kfoldSnapshotBytes, resume, resumeInfo, runOf, type ResumeInfo } from '../train/fit-network.js';
import { resolveValidation, selectionMethod } from '../train/early-stop.js';
import type { Metrics } from '../network/metrics.js';
import { defaultWorkers } from '../network/executor.js';
import { addPart, checkMemory, formatBytes, planNetworkMemory } from '../network/memory-plan.js';
import { runPlanLine } from '../train/plan.js';
import { readCachedCalibration } from '../train/calibrate.js';
import { parseCheckpointEvery } from '../train/checkpoint.js';
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
import { coresPerRank, runAsRank, type DistributedRun } from '../train/distributed.js';
import { trainShardedOn } from './train-sharded.js';
import { holdsShardCheckpoints } from '../train/shard-checkpoint.js';
import type { TextDatasets } from '../text/load.js';
import { gatherShards, RANK_PLACEHOLDER, shardPath } from '../train/shards.js';
import { checkEvaluable, checkFits, metricLine, warnDenseSampled, type Out } from './engine.js';
import { dataBytes, inputFormatOf, loadData, loadTextData, memoryLimitBytes } from './data-loading.js';
import type { TrainCliOptions } from './train-options.js';
import { checkCheckpointDirFree, checkResumable, OUTPUT_KEYS, readSavedCli, readSavedRecords, savedCli, type EpochRecord } from './train-checkpoint.js';

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

export async function trainCommand(given: TrainCliOptions, io: Out): Promise<number> {
  if (given.shardLabels && !given.distributed) throw new UsageError('--shard-labels needs --distributed (under mpirun)');
  if (given.distributed) return runAsRank(io, (dist, rankIo) => (given.shardLabels ? trainShardedOn(given, rankIo, dist) : trainOn(given, rankIo, dist)));
  return trainOn(given, io, null);
}

async function trainOn(given: TrainCliOptions, io: Out, dist: DistributedRun | null): Promise<number> {
  // Under MPI only rank 0 reports (the others still fail loudly: errors are not progress).
  // --json changes only what stdout prints: a long run (an MPI job above all) still shows its progress.
  const quiet = !!given.quiet || (dist !== null && !dist.isRoot);
  if (given.resume) {
    if (await holdsShardCheckpoints(given.resume)) {
      throw new UsageError(`${given.resume} holds label-sharded checkpoints: resume them with --distributed --shard-labels ` +
        '(in one process too, without mpirun; under mpirun -np R with any number of ranks)');
    }
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
  /** Where the resumed network came from (resumeInfo). */
  let rinfo: ResumeInfo | undefined;
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
    resumed = await (dist ? dist.resume(given.resume, resumeOpts) : resume(given.resume, resumeOpts));
    const info = (rinfo = resumeInfo(resumed)!);
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
  // The most the readers' buffers held: garbage once read, but freed only at a collection, so planned.
  const readStats = { bufferBytes: 0 };
  // A data file named by a checkpoint, not the command line, may be anyone's file: a format error in it
  // names the file and line but does not quote its content (naming the file with --train/--test shows it).
  const recordedPaths = new Set(recordedInputs.length ? [given.train === undefined ? ownFile(trainPath) : null, given.test === undefined ? o.test : null] : []);
  const unquoted = <T>(p: Promise<T>): Promise<T> => p.catch((e: unknown) => {
    if (!(e instanceof DataFormatError) || !recordedPaths.has(e.file)) throw e;
    const flag = e.file === o.test ? '--test' : '--train';
    throw new DataFormatError(escapeControl(e.file), e.line, `not readable as data; its content is not shown because the path comes from the checkpoint, not the command line (give ${flag} ${escapeControl(e.file)} to see the problem)`);
  });
  if (format === 'text') {
    if (dist && trainPath.includes(RANK_PLACEHOLDER)) throw new UsageError('--input-format text cannot read per-rank shards (%r): give every rank the whole file');
    text = await unquoted(loadTextData(trainPath, o.test, o, initNet, quiet, io, limit, readStats));
    train = text.train;
    test = text.test;
  } else {
    const own = await unquoted(loadData(ownFile(trainPath), format, 'training data', quiet, limit, o.zeroBased, readStats));
    // Shards are exchanged so that every rank trains on the same concatenation (the same decisions everywhere).
    train = dist && trainPath.includes(RANK_PLACEHOLDER) ? gatherShards(own, dist.comm) : own;
    test = o.test ? await unquoted(loadData(o.test, format, 'test data', quiet, Math.max(0, limit - dataBytes(train)), o.zeroBased, readStats)) : undefined;
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
  // Intra-batch threads go to a lone worker (defaultThreads); replicated ranks train in mode 3 (one thread).
  const threads = o.threads ?? t.threads ?? (dist ? 1 : defaultThreads(resolved, defaultWorkers(), workers));
  // Selection on copies of the network: k-fold on small training sets (copies side by side, at most
  // KFOLD_MEMORY), or up to refitMaxPoints points one copy that chooses on the held-out slice. Each copy
  // keeps its best-epoch weights; the network itself then trains on all points and keeps none.
  const savedValidation = rinfo ? rinfo.fitOptions.validation ?? null : undefined;
  const v = savedValidation !== undefined ? savedValidation : t.validation === false || epochs !== undefined ? null : resolveValidation(t.validation ?? {});
  let copies = 0, copyBytes = 0, copyName = '';
  if (v && !dist && (!resumed || resumed.batchesDone === 0)) {
    copyBytes = planNetworkMemory(resolved, 1).totalBytes + kfoldSnapshotBytes(resolved);
    const kfold = selectionMethod(train.points, v) === 'kfold';
    const folds = kfold ? Math.min(v.folds, Math.floor(train.points / 2), Math.floor(KFOLD_MEMORY / Math.max(1, copyBytes))) : 0;
    copies = folds >= 2 ? folds : !kfold && train.points <= v.refitMaxPoints && copyBytes <= KFOLD_MEMORY ? 1 : 0;
    copyName = folds >= 2 ? `${folds} network copies for k-fold selection` : 'a network copy for the held-out selection';
  }
  // Without epochs, training holds out a validation slice and keeps a copy of the best epoch's weights (a
  // selection copy keeps them instead, counted above).
  const validating = rinfo ? !!rinfo.fitOptions.validation : t.validation === false ? false : t.validation !== undefined || epochs === undefined;
  const bestWeights = copies > 0 ? false : validating;
  const plan = planNetworkMemory(resolved, workers, train, bestWeights);
  addPart(plan, 'read buffers', readStats.bufferBytes);
  addPart(plan, copyName, copies * copyBytes);
  checkMemory(plan, o.maxMemory !== undefined ? { maxBytes: o.maxMemory } : {});
  const net = resumed ?? grown ?? new Network(config);
  if (text) {
    net.textVectorizer = text.vectorizer;
    net.labelNames = text.labelNames;
  }
  // Room for the model file before training (the Checkpointer checks the room its files need itself).
  if (o.save && writer) await checkOutputFile(o.save, '--save', modelFileBytes(net));
  const shape = [resolved.inputDim, ...resolved.layers.map((l) => `${l.size}${l.sampling ? ` (${l.sampling.hash} K=${l.sampling.K} L=${l.sampling.L})` : ''}`)].join(' -> ');
  if (!quiet) io.err(`network: ${shape}; ${formatBytes(net.memoryBytes())} shared state; ${workers} worker(s)${threads > 1 ? ` x ${threads} threads per batch` : ''}\n`);
  if (!quiet) io.err(`${runPlanLine(resolved, train, { workers, threads, batch: batchSize ?? 128, bestWeights, ranks: dist ? dist.size : 1, mode: dist ? 'replicated' : 'single', ...(dist ? { cores: coresPerRank(defaultWorkers()) } : {}) }, await readCachedCalibration(resolved))}\n`);
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
    // Test evaluation splits the points into chunks: every core helps, whatever trained (unless --workers says).
    const evalWorkers = dist ? workers : o.workers ?? t.workers ?? Math.max(workers, defaultWorkers());
    const evalOpts = { mode: o.mode ?? 'exact', workers: evalWorkers, candidates: o.candidates, propensityA: o.propensityA, propensityB: o.propensityB } as const;
    let stats;
    const testByEpoch = new Map<number, Metrics>();
    // The progress display of a run whose length held-out validation decides (a resumed run continues its state).
    let firstAt: number | undefined;
    const restoredEarly = resumed ? runOf(resumed).earlyStop?.state : undefined;
    const early = { best: restoredEarly?.bestEpoch ?? 0 };
    const patience = rinfo?.fitOptions.validation?.patience ?? resolveValidation(t.validation || {}).patience;
    const batchSamples = batchSize ?? rinfo?.fitOptions.batchSize ?? 128;
    let prevSamples = 0, prevSeconds = 0, checkpointWarnings = 0;
    // A resumed run's epochs continue the training time recorded up to its checkpoint.
    const secondsBefore = priorRecords.at(-1)?.trainSeconds ?? 0;
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
        ...(dist ? dist.fitOptions(net, workers, train, batchSize ?? rinfo?.fitOptions.batchSize ?? 128) : {}),
        onProgress: (p) => {
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
          if (!quiet && v && v.epoch === epoch + 1) bar?.log(`epoch ${epoch + 1}: held-out P@1 ${v.p1.toFixed(4)} P@3 ${v.p3.toFixed(4)} P@5 ${v.p5.toFixed(4)} (lr ${v.lr.toPrecision(3)})${v.gain ? `; score ${v.gain.gain >= 0 ? '+' : ''}${v.gain.gain.toFixed(4)} ± ${v.gain.se.toFixed(4)} over epoch ${v.gain.ref}` : ''}`);
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
      if (o.log && writer && logFailures > 0) io.err(`--log ${o.log}: ${logFailures} record(s) not written\n`);
      if (stats.inputScaling?.scaled) io.err(`inputs scaled: ${stats.inputScaling.reason} (stored in the model; predict and eval apply it)\n`);
      const sel = stats.selection;
      if (sel?.method === 'kfold') {
        io.err(`epochs chosen by ${sel.folds}-fold cross-validation: ${sel.epochs} (mean held-out P@1 ${sel.p1[sel.epochs - 1]?.toFixed(4) ?? '-'}; ` +
          `a held-out slice would hold only ${sel.holdoutPoints} points), then trained on all ${train.points} points\n`);
      }
      if (sel?.method === 'holdout' && sel.refit) {
        io.err(`epochs chosen on ${sel.points} held-out points by a copy of the network: ${sel.epochs} (held-out P@1 ${sel.refit.p1[sel.epochs - 1]?.toFixed(4) ?? '-'}; ` +
          `${sel.refit.p1.length} epochs trained), then trained on all ${train.points} points\n`);
      }
      if (stats.bestEpoch) io.err(`kept the weights of epoch ${stats.bestEpoch} (best held-out score of ${stats.validation!.length} epochs; ${stats.validationPoints} points held out)\n`);
      const b = stats.blend;
      if (b) {
        const at = (x: number) => b.tried.find((t) => t.scale === x)?.p1.toFixed(4) ?? '-';
        io.err(`network logits weighted x${b.scale} against the wide part (held-out P@1 at epoch ${b.epoch}: ${at(b.scale)}; ${at(1)} at x1)\n`);
      }
      const r = stats.rerank;
      if (r?.skipped) io.err(`re-ranker not trained: ${r.skipped}\n`);
      else if (r) {
        const at = (x: number) => r.tried.find((t) => t.weight === x)?.p1.toFixed(4) ?? '-';
        const size = `${r.entries} classifier weights, ${(r.bytes / 2 ** 20).toFixed(1)} MB`;
        const on = stats.selection?.method === 'kfold' ? 'cross-validated' : 'held-out';
        io.err(r.weight > 0
          ? `re-ranker: per-label classifiers weighted x${r.weight} on the network's top candidates (${size}; ${r.seconds.toFixed(1)} s${r.points ? `; ${on} P@1 ${at(r.weight)}, ${at(0)} without` : ''})\n`
          : `re-ranker: dropped, it did not help on the ${on} points (P@1 ${at(0)} without)\n`);
      }
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
            batchSize: batchSize ?? rinfo?.fitOptions.batchSize ?? 128,
            lr: lr ?? (rinfo ? rinfo.fitOptions.lr : defaultTraining(resolved, workers, validating).lr),
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
    // (Not with a re-ranker: the epochs were scored without it.)
    const reuse = evalOpts.mode === 'exact' && finalEpoch !== undefined && !net.rerank ? testByEpoch.get(finalEpoch) : undefined;
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
      ...(stats.blend ? { blend: stats.blend } : {}),
      ...(stats.rerank ? { rerank: stats.rerank } : {}),
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
      ...(rinfo ? { resumedFrom: rinfo.file, resumedAt: rinfo.position.batchesDone } : {}),
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
