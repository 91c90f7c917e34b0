// train({ distributed: true }) (`mpirun -np R sublinear train ... --distributed`): the default procedure of one
// process, label-sharded across the ranks (src/train/sharded.ts, src/train/sharded-fit.ts).
// Every rank reads the training data (or its %r shard, exchanged; raw text is vectorised alike on every rank),
// builds the same network configuration (the defaults rule, a --config, or the checkpoint's), owns a slice of the
// output labels and a slice of the input features' rows of layer 0, and trains with the others step by step:
// held-out validation and its schedule, the best epoch's weights, the blend, the re-ranker, the calibrated
// probabilities, as one process; on small sets the selection phase (k-fold selection, or a refit's copy) runs on
// rank 0 as one process runs it (src/train/sharded-select.ts), and the ranks then train on all of the points.
// Rank 0 prints, writes the shared part of checkpoints, and writes the model file while the ranks stream it
// their rows (src/train/sharded-save.ts); when that file cannot be written, the model is kept elsewhere
// (rescue-save.ts), as one process keeps it.
import { dirname, resolve } from 'node:path';
import type { SparseDataset } from '../datasets/csr.js';
import { resolveConfig, defaultConfig, type NetworkConfig } from '../network/config.js';
import { native } from '../native/addon.js';
import { applyInputScale, detectInputScale, type InputScaleReport } from '../network/input-scale.js';
import { inputMapOf, mapFeatures, type InputMap } from '../network/input-map.js';
import type { DistributedRun } from '../train/distributed.js';
import { allocateRank, featureFrequencies, initFeatureRows, initSliceRows, rankBytes, shardFeatures, shardingProblem, shardLabels, ShardedModel } from '../train/sharded.js';
import { fitSharded, shardPredictFinal, type ShardPosition, type ShardRunState } from '../train/sharded-fit.js';
import type { ShardIndex } from '../train/sharded-index.js';
import { saveShardedModel } from '../train/sharded-save.js';
import { emptyWide } from '../network/wide.js';
import {
  loadShardedPart, newestShardCheckpoint, readShardManifest, writeShardCheckpoint, type ShardCheckpointMeta, type ShardPart,
} from '../train/shard-checkpoint.js';
import { calibrationMetrics, type CalibrationMetrics } from '../network/calibration.js';
import { computeMetrics, inversePropensity, labelFrequencies, metricLine, type Metrics } from '../network/metrics.js';
import { formatBytes } from '../network/memory-plan.js';
import { peakRssMB } from '../util/peak-rss.js';
import { PhaseTimer } from '../util/phases.js';
import { UsageError } from '../util/usage-error.js';
import { packageVersion } from '../util/package-root.js';
import { networkOfFile, readConfigFile } from './config-file.js';
import { checkEvaluable, checkFits } from './data-checks.js';
import { inputFormatOf, loadData, loadTextData } from './data-loading.js';
import { Reporter, type JobEvents } from './events.js';
import { checkInputFile, checkOutputDir, checkOutputFile } from './preflight.js';
import { trainReport, type TrainResult } from './train-report.js';
import { gatherShards, RANK_PLACEHOLDER, shardPath } from '../train/shards.js';
import type { TrainJob } from './train-options.js';
import { earlyStopProgressText } from './train-progress.js';
import { phaseSummary, phaseText, sayTrained } from './train-lines.js';
import type { EpochRecord } from './train-checkpoint.js';
import type { TextDatasets } from '../text/load.js';
import { defaultRunLr, resolveValidation, type SelectionReport } from '../train/early-stop.js';
import { selectSharded, wantsSelection } from '../train/sharded-select.js';
import type { FitStats } from '../train/fit.js';
import { keptElsewhereText, rescuePaths, saveKept } from './rescue-save.js';

/** Options a label-sharded run does not take (yet), with what to do instead. */
const UNSUPPORTED: [keyof TrainJob, string][] = [
  ['init', 'warm starts train in one process'],
  ['evalEvery', 'the test set is evaluated after training'],
  ['log', 'use --json for the summary'],
  ['useRecordedOutputs', 'give --save again'],
];

/** The directory holding the checkpoint `ckpt` (`--resume` may name either). */
function picked(ckpt: string, resume: string): string {
  return resolve(ckpt) === resolve(resume) ? dirname(resolve(ckpt)) : resume;
}

/** The checkpoint period: a number of batches, or a duration (s, m, h); default 10 minutes. */
function checkpointPeriod(every: string | undefined): { batches?: number; ms?: number } {
  if (!every) return { ms: 10 * 60_000 };
  const m = /^(\d+(?:\.\d+)?)(s|m|h)$/.exec(every);
  if (m) return { ms: Number(m[1]) * { s: 1000, m: 60_000, h: 3_600_000 }[m[2] as 's' | 'm' | 'h'] };
  if (/^\d+$/.test(every) && Number(every) > 0) return { batches: Number(every) };
  throw new UsageError(`option --checkpoint-every expects a number of batches or a duration like 90s, 10m, 1h but received '${every}'`);
}

const flagName = (k: string) => `--${k.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)}`;

export async function trainSharded(given: TrainJob, events: JobEvents, dist: DistributedRun): Promise<TrainResult> {
  for (const [k, why] of UNSUPPORTED) {
    if (given[k] !== undefined && given[k] !== false) throw new UsageError(`${flagName(String(k))} cannot be combined with --distributed: ${why}`);
  }
  if (given.workers !== undefined && given.workers !== 1) throw new UsageError('--distributed runs one training thread per rank: give --workers 1 (or leave it out) and more ranks instead');
  const comm = dist.comm;
  const r = new Reporter(events, !!given.quiet || !dist.isRoot);
  const phases = new PhaseTimer('', undefined, (name) => {
    const text = phaseText(name);
    if (text) r.say(text);
  });

  // Resume: the newest complete checkpoint (rank 0 picks it, every rank reads it).
  let manifest: ShardCheckpointMeta | null = null;
  let ckptPath: string | null = null;
  if (given.resume) {
    if (given.config) throw new UsageError('--config cannot be combined with --resume: the network configuration comes from the checkpoint');
    if (given.seed !== undefined) throw new UsageError('--seed cannot be combined with --resume: the seed comes from the checkpoint');
    const found = dist.agree(dist.isRoot ? (await newestShardCheckpoint(given.resume)) ?? '' : '');
    if (!found) throw new Error(`${given.resume}: no complete sharded checkpoint (a directory sharded-<batches> with manifest.json)`);
    ckptPath = found;
    manifest = await readShardManifest(found);
    r.say(`resuming from ${found}: epoch ${manifest.epoch + 1}, batch ${manifest.batch} (${manifest.batchesDone} batches done; written by ${manifest.ranks} rank(s), now ${dist.size})`);
  }
  const saved = (manifest?.settings ?? {}) as TrainJob;
  const o: TrainJob = { ...saved, ...Object.fromEntries(Object.entries(given).filter(([, v]) => v !== undefined)) };
  if (manifest && given.save === undefined) delete o.save;
  // A resumed run's checkpoints continue in the directory it resumed from (not the recorded path).
  if (manifest && given.checkpoint === undefined) o.checkpoint = picked(ckptPath!, given.resume!);
  if (!o.train) throw new UsageError('missing required option --train (or --resume <dir>)');
  if (typeof o.train !== 'string' || (o.test !== undefined && typeof o.test !== 'string')) {
    throw new UsageError('--distributed reads its data from files: give train and test as paths');
  }
  const trainPath = o.train, testPath = o.test as string | undefined;
  const ownFile = (p: string) => shardPath(p, dist.rank);
  await checkInputFile(ownFile(trainPath), '--train');
  if (testPath) await checkInputFile(testPath, '--test');
  if (dist.isRoot) {
    if (o.save) await checkOutputFile(o.save, '--save');
    if (o.checkpoint && !given.resume) await checkOutputDir(o.checkpoint, '--checkpoint');
  }
  const file = typeof o.config === 'string' && !manifest ? await readConfigFile(o.config) : undefined;
  const t = { ...file?.training, ...o.training };
  const format = inputFormatOf(o);

  // The data: every rank reads it (its %r shard, exchanged so that every rank holds the concatenation); raw
  // text is vectorised on every rank alike (the same vocabulary and label ids everywhere).
  const readEnd = phases.start('read');
  let train: SparseDataset, test: SparseDataset | undefined, text: TextDatasets | undefined;
  if (format === 'text') {
    if (trainPath.includes(RANK_PLACEHOLDER)) throw new UsageError('--input-format text cannot read per-rank shards (%r): give every rank the whole file');
    text = await loadTextData(trainPath, testPath, o, undefined, r, Number.POSITIVE_INFINITY);
    train = text.train;
    test = text.test;
  } else {
    const own = await loadData(ownFile(trainPath), format, 'training data', r, undefined, o.zeroBased);
    train = trainPath.includes(RANK_PLACEHOLDER) ? gatherShards(own, comm) : own;
    test = testPath ? await loadData(testPath, format, 'test data', r, undefined, o.zeroBased) : undefined;
  }
  readEnd();
  if (train.labelOffsets[train.points] === 0) throw new Error(`${trainPath}: no labels (${train.points} points, none with a label): there is nothing to train on`);
  if (test) checkEvaluable(test, testPath!);

  // The whole network's configuration: the checkpoint's, the file's or the job's, or the defaults rule's.
  let config: NetworkConfig;
  if (manifest) config = manifest.config;
  else if (o.networkConfig) config = o.networkConfig;
  else if (file) config = networkOfFile(file, { features: train.features, labels: train.labels, points: train.points, nnz: train.offsets[train.points]! }, o.seed);
  else config = defaultConfig({ features: train.features, labels: train.labels, points: train.points, nnz: train.offsets[train.points]! }, o.seed ?? 1);
  let resolved = resolveConfig(config);
  const problem = shardingProblem(config);
  if (problem) throw new UsageError(`${o.config ?? 'the network configuration'}: ${problem}`);
  const L = resolved.layers.at(-1)!.size;
  // The declared input dimension: a checkpoint's network with an input map (src/network/input-map.ts) has rows
  // for fewer features.
  const declared = manifest?.inputFeatures ?? resolved.inputDim;
  const trainFeatures = train.features;
  if (train.features > declared) throw new Error(`${trainPath} has ${train.features} features but the configuration's inputDim is ${declared}`);
  if (train.labels > L) throw new Error(`${trainPath} has labels up to ${train.labels - 1} but the network's output layer has ${L}`);
  if (test) checkFits(test, testPath!, declared, L);
  if (L < dist.size) throw new UsageError(`cannot shard ${L} labels over ${dist.size} ranks`);
  if (resolved.inputDim < dist.size) throw new UsageError(`cannot shard ${resolved.inputDim} input features over ${dist.size} ranks`);

  // The shardings and this rank's part: the checkpoint's (re-sharded for this number of ranks), or a new network's.
  let part: ShardPart;
  let snapshot = null;
  let inputScale: Float32Array | null;
  let inputLog: boolean;
  let scaling: InputScaleReport | undefined;
  // Layer 0 holds rows only for the features the training data holds (as one process's network: input map).
  let inputMap: InputMap | null = null;
  const declaredConfig = config;
  if (manifest) {
    const loaded = await loadShardedPart(ckptPath!, manifest, dist.rank, dist.size,
      // (The feature counts of a checkpoint written before layer 0 was sharded, which has no input map.)
      manifest.layout === undefined ? { featureFreq: featureFrequencies(train, resolved.inputDim) } : {});
    part = loaded;
    snapshot = loaded.snapshot;
    inputScale = loaded.inputScale;
    inputLog = loaded.inputLog;
    inputMap = loaded.inputMap;
    if (inputMap) train = mapFeatures(train, inputMap);
  } else {
    inputMap = inputMapOf(train, resolved.inputDim);
    if (inputMap) {
      config = { ...config, inputDim: inputMap.ids.length };
      resolved = resolveConfig(config);
      train = mapFeatures(train, inputMap);
    }
    // Raw-valued inputs: decided from the training data alone, as one process's first fit() decides.
    const d = detectInputScale(train, resolved.inputDim, t.inputScaling ?? 'auto');
    inputScale = d.scale;
    inputLog = d.log;
    scaling = d.report;
    const labelFreq = labelFrequencies(train.labelIndices, L), featureFreq = featureFrequencies(train, resolved.inputDim);
    const labels = shardLabels(labelFreq, dist.size).labelsOf[dist.rank]!, features = shardFeatures(featureFreq, dist.size).featuresOf[dist.rank]!;
    const spec = allocateRank(config, labels.length, features.length);
    // The rows of this rank's features and labels initialised as the whole network's rows of the same ids (the
    // middle layers whole, alike on every rank): the initial model does not depend on the number of ranks. The
    // wide part's pairs are chosen by fitSharded, from the rows trained on.
    initFeatureRows(declaredConfig, inputMap ? features.map((r) => inputMap!.ids[r]!) : features, spec.layers[0]!);
    initSliceRows(config, labels, spec.layers.at(-1)!);
    if (spec.layers.at(-1)!.wide) spec.layers.at(-1)!.wide = emptyWide(resolved.inputDim);
    part = { spec, labels, features, labelFreq, featureFreq };
  }
  if (inputMap && test) test = mapFeatures(test, inputMap);
  if (inputScale || inputLog) {
    train = applyInputScale(train, inputScale, inputLog);
    if (test) test = applyInputScale(test, inputScale, inputLog);
    if (scaling) r.say(`inputs ${scaling.method === 'log' ? 'transformed' : 'scaled'}: ${scaling.reason} (stored in the model; predict and eval apply it)`);
  }
  const net = { spec: part.spec };
  // Every page of the rank's state mapped now: touched page by page in the first steps instead, each rank's
  // faults would stall the other ranks too (a step waits for the slowest rank).
  native().netPrefault(net.spec);
  const model = new ShardedModel(comm, config, net, part.labelFreq, part.featureFreq);
  const batchSize = manifest ? (manifest.settings['batch'] as number) : o.batch ?? t.batchSize ?? 128;
  const sliceBytes = rankBytes(net.spec);
  const shape = [declared, ...resolved.layers.map((l) => `${l.size}${l.sampling ? ` (sampled, ${model.minActive} a batch)` : ''}`)].join(' -> ');
  r.say(`network: ${shape}; label-sharded over ${dist.size} rank(s): ${model.labels.length} labels and ${model.features.length} input features here ` +
    `(${formatBytes(sliceBytes)} state on this rank), label-count load ${Math.min(...model.sharding.load)}..${Math.max(...model.sharding.load)}, ` +
    `feature nonzeros ${Math.min(...model.featureSharding.load)}..${Math.max(...model.featureSharding.load)}`);
  if (!o.save && !o.checkpoint && dist.isRoot) r.warn('no --save: the trained model will not be kept (give --save <model> to keep it)');

  // Checkpoints: every rank its slices, rank 0 the shared part and the manifest.
  const period = checkpointPeriod(o.checkpointEvery);
  let lastCkptBatch = manifest?.batchesDone ?? 0;
  let checkpoints = 0;
  const epochsOpt = o.epochs ?? t.epochs;
  const runValidation = manifest || epochsOpt !== undefined || t.validation === false ? null : resolveValidation(t.validation ?? {});
  const want = manifest ? null : wantsSelection(train.points, runValidation);
  // The default rate as one process chooses it (defaultRunLr: every rank holds the whole training set), fixed
  // before the settings that checkpoints keep, so that a resumed run goes on at the rate it started with.
  const lr = (manifest ? (manifest.settings['lr'] as number | undefined) : o.lr ?? t.lr) ??
    defaultRunLr(resolved, train, train.points, batchSize, want === 'kfold' ? runValidation!.folds : 0);
  const settings = {
    train: o.train, test: o.test, epochs: epochsOpt, batch: batchSize, lr, format: o.format, inputFormat: o.inputFormat, zeroBased: o.zeroBased,
    checkpoint: o.checkpoint, checkpointEvery: o.checkpointEvery, seed: resolved.seed, ...(o.save ? { save: o.save } : {}),
    ...(t.validation !== undefined ? { validation: t.validation } : {}),
    ...(format === 'text' ? { minDf: o.minDf, bigrams: o.bigrams, maxVocabulary: o.maxVocabulary, hashBits: o.hashBits } : {}),
  };
  const save = async (pos: ShardPosition, reason: string, st: ShardRunState) => {
    if (!o.checkpoint) return;
    const meta: ShardCheckpointMeta = {
      format: 'sublinear-sharded-checkpoint', config, ranks: dist.size, ...pos, trainPoints: train.points, settings, ...(inputMap ? { inputFeatures: inputMap.features } : {}),
    };
    const at = await writeShardCheckpoint(o.checkpoint, dist.rank, { ...part, labels: model.labels, features: model.features }, meta, () => comm.idleBarrier(), inputScale, inputLog,
      { validation: st.validation, epochs: st.epochs, earlyStop: st.earlyStop, snapshot: st.snapshot, selection: st.selection }, inputMap);
    checkpoints++;
    lastCkptBatch = pos.batchesDone;
    r.say(`checkpoint ${at}${reason === 'abort' ? ' (stopped)' : ''}`);
  };

  // Training: the default procedure, on every rank together.
  const records: EpochRecord[] = [];
  let prevSamples = 0, prevSeconds = 0, firstAt: number | undefined;
  const early = { best: manifest?.run?.earlyStop?.bestEpoch ?? 0 };
  const patience = (manifest?.run?.validation ?? (t.validation === false ? null : resolveValidation(t.validation ?? {})))?.patience ?? 1;
  const threads = Math.max(1, o.threads ?? 1);
  const cpu0 = process.cpuUsage();
  // The selection phase on small sets (k-fold, or a refit's copy): rank 0 runs one process's, on a whole network.
  let selection: SelectionReport | undefined;
  let holdoutWhy: string | undefined;
  let stoppedInSelection = false;
  if (want) {
    const selBar = r.progress('selection', 'batches');
    let selFirst: number | undefined;
    r.say(want === 'kfold'
      ? 'choosing the number of epochs by k-fold cross-validation (on rank 0, as one process: the copies of a small set\'s network fit there)'
      : 'choosing the number of epochs on a copy of the network with a held-out slice (on rank 0, as one process)');
    try {
      const got = await phases.time(want === 'kfold' ? 'selection.kfold' : 'selection', () => selectSharded(dist.isRoot, (v) => dist.agree(v), declaredConfig, train, runValidation!, {
        batchSize, lr, ...(inputMap ? { inputMap } : {}),
        ...(t.beta1 !== undefined ? { beta1: t.beta1 } : {}), ...(t.beta2 !== undefined ? { beta2: t.beta2 } : {}), ...(t.eps !== undefined ? { eps: t.eps } : {}),
        ...(o.signal ? { signal: o.signal } : {}),
        onWarning: (m) => r.warn(m),
        onProgress: (p) => {
          const at = p.epoch * p.batchesPerEpoch + p.batch;
          selFirst ??= at;
          selBar?.update(at - selFirst, p.epochs * p.batchesPerEpoch - selFirst,
            `${p.fold ? `choosing epochs (${p.fold.folds} folds side by side): ` : 'choosing epochs on a copy: '}epoch ${p.epoch + 1}/${p.epochs} ${Math.round(p.samplesPerSec)} samples/s`);
        },
      }));
      if ('report' in got) selection = got.report;
      else if ('stopped' in got) stoppedInSelection = true;
      else holdoutWhy = got.why;
    } finally {
      selBar?.done();
    }
  }
  const bar = stoppedInSelection ? undefined : r.progress('training', 'batches');
  let stats: FitStats;
  let rr;
  let calibration = null;
  // The cluster index of the final weights, built for the re-ranker's shortlists: the test set takes it.
  let fittedIndex: ShardIndex | null = null;
  if (stoppedInSelection) {
    // Stopped while choosing: nothing trained, nothing saved (no checkpoint of a run that has not started: run it again).
    r.notice('sublinear: stopped while choosing the epoch count on copies of the network, before the network itself trained: ' +
      `there is no trained model${o.save ? `, so ${o.save} is not written` : ''}`);
    stats = {
      epochs: 0, history: [], batches: 0, samples: 0, trainSeconds: 0, rebuildSeconds: 0, indexSeconds: 0, rebuilds: 0, samplesPerSec: 0, lastLoss: NaN,
      aborted: true, lostBatches: 0, stoppedIn: 'selection',
    };
  } else try {
    const fitted = await fitSharded(model, train, {
      ...(selection ? { selection } : {}), ...(holdoutWhy !== undefined ? { holdoutWhy } : {}),
      ...(manifest?.run ? {} : { epochs: epochsOpt }),
      ...(t.validation !== undefined && !manifest ? { validation: t.validation } : {}),
      batchSize, lr,
      ...(t.beta1 !== undefined ? { beta1: t.beta1 } : {}), ...(t.beta2 !== undefined ? { beta2: t.beta2 } : {}), ...(t.eps !== undefined ? { eps: t.eps } : {}),
      threads, phases,
      ...(o.signal ? { signal: o.signal } : {}),
      ...(o.checkpoint ? {
        checkpoint: {
          ...(period.ms !== undefined ? { everyMs: period.ms } : {}),
          due: (batchesDone: number, clockDue: boolean) => (period.batches ? batchesDone - lastCkptBatch >= period.batches : clockDue),
          save,
        },
      } : {}),
      ...(manifest ? {
        resume: {
          position: { epoch: manifest.epoch, batch: manifest.batch, batchesDone: manifest.batchesDone },
          earlyStop: manifest.run?.earlyStop ?? null, snapshot, validation: manifest.run?.validation ?? null,
          // A given --epochs extends (or shortens) the resumed run, as in one process.
          epochs: given.epochs ?? manifest.run?.epochs ?? (epochsOpt as number),
          selection: manifest.run?.selection ?? null,
        },
      } : {}),
      onProgress: (p) => {
        const loss = Number.isFinite(p.loss) ? ` loss ${p.loss.toFixed(4)}` : '';
        const at = p.epoch * p.batchesPerEpoch + p.batch;
        firstAt ??= manifest ? manifest.epoch * p.batchesPerEpoch + manifest.batch : 0;
        const speed = `${loss} ${Math.round(p.samplesPerSec)} samples/s`;
        if (!p.epochsIsLimit) {
          bar?.update(at - firstAt, p.epochs * p.batchesPerEpoch - firstAt, `epoch ${p.epoch + 1}/${p.epochs}${speed}`);
          return;
        }
        bar?.update(at - firstAt, undefined, earlyStopProgressText(p, { best: early.best, patience }, p.batchesPerEpoch * batchSize) + speed);
      },
      onEpochEnd: (epoch, st) => {
        const v = st.validation?.at(-1);
        if (v && v.epoch === epoch + 1 && st.bestEpoch !== undefined) early.best = st.bestEpoch;
        if (v && v.epoch === epoch + 1) {
          r.say(`epoch ${epoch + 1}: held-out P@1 ${v.p1.toFixed(4)} P@3 ${v.p3.toFixed(4)} P@5 ${v.p5.toFixed(4)} (lr ${v.lr.toPrecision(3)})` +
            `${v.gain ? `; score ${v.gain.gain >= 0 ? '+' : ''}${v.gain.gain.toFixed(4)} ± ${v.gain.se.toFixed(4)} over epoch ${v.gain.ref}` : ''}`);
        }
        const h = st.history.at(-1);
        if (h && h.epoch === epoch + 1) {
          records.push({
            ...h, samplesPerSec: (st.samples - prevSamples) / Math.max(1e-9, h.trainSeconds - prevSeconds),
            ...(v && v.epoch === h.epoch ? { validation: { p1: v.p1, p3: v.p3, p5: v.p5, lr: v.lr } } : {}),
          });
          prevSamples = st.samples;
          prevSeconds = h.trainSeconds;
        }
      },
    });
    stats = fitted.stats;
    rr = fitted.rerank;
    calibration = fitted.calibration;
    fittedIndex = fitted.index;
  } finally {
    bar?.done();
  }
  if (scaling) stats.inputScaling = scaling;
  const cpu = process.cpuUsage(cpu0);
  if (!r.quiet) sayTrained(r, { stats, checkpoint: o.checkpoint ? { dir: o.checkpoint } : undefined, checkpoints }, train.points);
  const rerankUse = stats.rerank && stats.rerank.weight > 0 ? { state: rr ?? null, weight: stats.rerank.weight, shortlist: resolved.layers.at(-1)!.rerank!.shortlist } : null;

  // The model file, streamed from the ranks (an ordinary model file: predict, eval and serve read it in one process).
  // When --save cannot be written, the model is kept next to it, in the checkpoint directory or the temporary
  // directory (rescue-save.ts): every rank runs each try's rounds, and all learn rank 0's outcome.
  let savedTo: { file: string; error?: string } | undefined;
  if (o.save && !stoppedInSelection) {
    const extras = {
      trainPoints: train.points, batchesDone: model.report().steps + (manifest?.batchesDone ?? 0), inputScale, inputLog, inputMap, rerank: rerankUse, calibration,
      ...(text ? { textVectorizer: text.vectorizer, labelNames: text.labelNames } : {}),
      training: {
        data: { file: resolve(trainPath), points: train.points, features: trainFeatures, labels: train.labels, nonzeros: train.offsets[train.points]! },
        epochs: stats.epochs, ...(stats.bestEpoch !== undefined ? { bestEpoch: stats.bestEpoch } : {}), batchSize, lr, version: packageVersion(),
      },
    };
    const kept = await phases.time('save', () => saveKept((file) => saveShardedModel(file, model, extras), o.save!, rescuePaths(o.save!, o.checkpoint)));
    o.onSaved?.(kept.file);
    if (kept.failed.length) {
      r.notice(`sublinear: ${keptElsewhereText(o.save, kept)}`);
      savedTo = { file: kept.file, error: kept.failed[0]!.error.message };
    } else {
      r.say(`saved ${o.save}`);
      savedTo = { file: kept.file };
    }
  }
  // The test set: one process's inference ('auto' unless --mode), merged from the ranks.
  let metrics: Metrics | null = null;
  let testCalibration: CalibrationMetrics | undefined;
  if (test && !stats.aborted) {
    const tt = test;
    const mode = o.mode && o.mode !== 'auto' ? o.mode : undefined;
    metrics = await phases.time('test', async () => {
      const t0 = performance.now();
      // A calibrated model's shortlist is predicted too, for its probability metrics (as Network.evaluate).
      const kk = calibration ? Math.max(5, Math.min(calibration.shortlist, L)) : 5;
      const pred = shardPredictFinal(model, tt, kk, resolved.seed, rerankUse, threads, mode === 'exact' || mode === 'sampled' ? mode : undefined, fittedIndex ?? undefined);
      const predictSeconds = (performance.now() - t0) / 1000;
      let top = pred.labels[0]!;
      if (kk > 5) {
        top = new Uint32Array(tt.points * 5);
        for (let i = 0; i < tt.points; i++) top.set(pred.labels[0]!.subarray(i * kk, i * kk + 5), i * 5);
      }
      const invP = inversePropensity(model.labelFreq, Math.max(train.points, 1), o.propensityA ?? 0.55, o.propensityB ?? 1.5);
      const m = computeMetrics({ topIdx: top, kMax: 5, labelOffsets: tt.labelOffsets, labelIndices: tt.labelIndices, invPropensity: invP, ks: [1, 3, 5] });
      if (calibration && kk >= calibration.shortlist) testCalibration = calibrationMetrics(calibration, pred.labels[0]!, pred.scores[0]!, kk, tt, calibration.threshold);
      return Object.assign(m, { outputsScoredPerPoint: pred.outputsScoredPerPoint, predictSeconds });
    });
    r.say(`test: ${metricLine(metrics)}`);
  }
  // Per-rank facts, gathered: peak memory, CPU seconds, labels, features, wide pairs.
  const facts = new Float64Array(5 * dist.size);
  const widePairs = net.spec.layers.at(-1)!.wide?.labels.length ?? 0;
  facts.set([peakRssMB(), (cpu.user + cpu.system) / 1e6, model.labels.length, model.features.length, widePairs], 5 * dist.rank);
  comm.allreduceSum(facts);
  const perRank = (i: number) => Array.from({ length: dist.size }, (_, q) => facts[5 * q + i]!);
  const x = model.report();
  const report = trainReport({
    mode: 'sharded', ranks: dist.size, metrics, stats, testCalibration, batchSize, lr, workers: 1,
    model: savedTo ? resolve(savedTo.file) : null,
    ...(savedTo?.error ? { saveError: `${o.save}: ${savedTo.error}` } : {}), signal: stats.aborted ? (o.signal?.aborted && typeof o.signal.reason === 'string' ? o.signal.reason : 'SIGTERM') : null,
    batchesDone: x.steps + (manifest?.batchesDone ?? 0),
    checkpoints: o.checkpoint ? { written: checkpoints, failed: 0 } : null, logFailures: undefined,
    resumed: manifest ? { file: ckptPath!, batchesDone: manifest.batchesDone } : null,
    history: records,
    distributed: {
      mpi: dist.library,
      perRank: {
        peakRssMB: perRank(0), trainCpuSeconds: perRank(1), labels: perRank(2), inputFeatures: perRank(3),
        ...(net.spec.layers.at(-1)!.wide ? { widePairs: perRank(4) } : {}), stateBytes: sliceBytes,
      },
      exchange: {
        steps: x.steps, bytesPerStep: x.bytesSentPerStep, split: x.split, exchangeSeconds: x.exchangeSeconds,
        lowerSeconds: x.lowerSeconds, outputSeconds: x.outputSeconds,
      },
      checksum: { checks: x.checks, mismatches: x.mismatches },
    },
    phases: phaseSummary(phases),
  });
  return { network: null, report, rank: dist.rank, ...(savedTo?.error ? { savedInstead: savedTo.file } : {}) };
}
