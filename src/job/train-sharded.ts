// train({ distributed: true, shardLabels: true }) (`sublinear train --distributed --shard-labels`, under mpirun):
// label-sharded training (src/train/sharded.ts).
// Every rank reads the training data (or its %r shard, exchanged), owns a slice of the output labels and a
// slice of the input features' rows of layer 0, and trains with the others step by step; rank 0 prints, writes
// the shared part of checkpoints and the model.
import { dirname, resolve } from 'node:path';
import type { SparseDataset } from '../datasets/csr.js';
import { resolveConfig, defaultConfig, defaultTraining, type NetworkConfig } from '../network/config.js';
import { Network } from '../network/network.js';
import { native } from '../native/addon.js';
import { applyInputScale, detectInputScale } from '../network/input-scale.js';
import type { DistributedRun } from '../train/distributed.js';
import { batchSeed, epochOrder } from '../train/fit.js';
import { mpi } from '../train/mpi.js';
import {
  allocateRank, buildSliceWide, featureFrequencies, initFeatureRows, initSliceRows, rankBytes, shardFeatures, shardLabels, ShardedModel,
} from '../train/sharded.js';
import { allocateWide, mergeWide, wideProblem } from '../network/wide.js';
import type { WideState } from '../native/network-types.js';
import {
  loadShardedPart, newestShardCheckpoint, readShardManifest, writeShardCheckpoint, type ShardCheckpointMeta, type ShardPart,
} from '../train/shard-checkpoint.js';
import { labelFrequencies, metricLine } from '../network/metrics.js';
import { formatBytes } from '../network/memory-plan.js';
import { peakRssMB } from '../util/peak-rss.js';
import { UsageError } from '../util/usage-error.js';
import { networkOfFile, readConfigFile } from './config-file.js';
import { checkEvaluable, checkFits } from './data-checks.js';
import { inputFormatOf, loadData } from './data-loading.js';
import { Reporter, type JobEvents } from './events.js';
import { keptElsewhereText, rescuePaths, saveKept, type KeptModel } from './rescue-save.js';
import { checkInputFile, checkOutputDir, checkOutputFile } from './preflight.js';
import type { TrainReport, TrainResult } from './train-report.js';
import { gatherShards, RANK_PLACEHOLDER, shardPath } from '../train/shards.js';
import type { TrainJob } from './train-options.js';

/** Options `--shard-labels` does not take (yet), with what to do instead. */
const UNSUPPORTED: [keyof TrainJob, string][] = [
  ['init', 'warm starts train in one process or data-parallel (without --shard-labels)'],
  ['evalEvery', 'the test set is evaluated after the last epoch'],
  ['log', 'use --json for the summary'],
  ['mode', 'sharded evaluation scores every label of each slice exactly'],
  ['useRecordedOutputs', 'give --save again'],
];

/** The directory holding the checkpoint `ckpt` (`--resume` may name either). */
function picked(ckpt: string, resume: string): string {
  return resolve(ckpt) === resolve(resume) ? dirname(resolve(ckpt)) : resume;
}

/** The global batch counter's checkpoint period: a number of batches, or a duration (s, m, h). */
function checkpointPeriod(every: string | undefined): { batches?: number; ms?: number } {
  if (!every) return { ms: 10 * 60_000 };
  const m = /^(\d+(?:\.\d+)?)(s|m|h)$/.exec(every);
  if (m) return { ms: Number(m[1]) * { s: 1000, m: 60_000, h: 3_600_000 }[m[2] as 's' | 'm' | 'h'] };
  if (/^\d+$/.test(every) && Number(every) > 0) return { batches: Number(every) };
  throw new UsageError(`option --checkpoint-every expects a number of batches or a duration like 90s, 10m, 1h but received '${every}'`);
}

export async function trainSharded(given: TrainJob, events: JobEvents, dist: DistributedRun): Promise<TrainResult> {
  for (const [k, why] of UNSUPPORTED) {
    if (given[k] !== undefined && given[k] !== false) throw new UsageError(`--${String(k).replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)} cannot be combined with --shard-labels: ${why}`);
  }
  if ((given.inputFormat ?? given.format) === 'text') throw new UsageError('--shard-labels reads numeric data (XC or LIBSVM): vectorise text in one process first');
  if (given.workers !== undefined && given.workers !== 1) throw new UsageError('--shard-labels runs one thread per rank: give --workers 1 (or leave it out) and more ranks instead');
  if (given.threads !== undefined && given.threads !== 1) throw new UsageError('--shard-labels runs one thread per rank: give --threads 1 (or leave it out) and more ranks instead');
  const comm = dist.comm;
  const m = mpi();
  const gatherv = (b: Uint8Array, root: number) => m.gatherv(b, root);
  const quiet = !!given.quiet || !dist.isRoot;
  const r = new Reporter(events, quiet);
  const say = (s: string) => r.say(s.replace(/\n$/, ''));

  // Resume: the newest complete checkpoint (rank 0 picks it, every rank reads it).
  let manifest: ShardCheckpointMeta | null = null;
  let ckptPath: string | null = null;
  if (given.resume) {
    if (given.config) throw new UsageError('--config cannot be combined with --resume: the network configuration comes from the checkpoint');
    const picked = dist.agree(dist.isRoot ? (await newestShardCheckpoint(given.resume)) ?? '' : '');
    if (!picked) throw new Error(`${given.resume}: no complete sharded checkpoint (a directory sharded-<batches> with ${'manifest.json'})`);
    ckptPath = picked;
    manifest = await readShardManifest(picked);
    say(`resuming from ${picked}: epoch ${manifest.epoch + 1}, batch ${manifest.batch} (${manifest.batchesDone} batches done; written by ${manifest.ranks} rank(s), now ${dist.size})\n`);
  }
  const saved = (manifest?.settings ?? {}) as TrainJob;
  const o: TrainJob = { ...saved, ...Object.fromEntries(Object.entries(given).filter(([, v]) => v !== undefined)) };
  if (manifest && given.save === undefined) delete o.save;
  // A resumed run's checkpoints continue in the directory it resumed from (not the recorded path).
  if (manifest && given.checkpoint === undefined) o.checkpoint = picked(ckptPath!, given.resume!);
  if (!o.train) throw new UsageError('missing required option --train (or --resume <dir>)');
  if (typeof o.train !== 'string' || (o.test !== undefined && typeof o.test !== 'string')) {
    throw new UsageError('--shard-labels reads its data and configuration from files: give train and test as paths');
  }
  const trainPath = o.train, testPath = o.test as string | undefined, configPath = o.config;
  if (o.epochs === undefined) throw new UsageError('--shard-labels needs --epochs (held-out early stopping is not sharded)');
  const ownFile = (p: string) => shardPath(p, dist.rank);
  await checkInputFile(ownFile(trainPath), '--train');
  if (testPath) await checkInputFile(testPath, '--test');
  if (dist.isRoot) {
    if (o.save) await checkOutputFile(o.save, '--save');
    if (o.checkpoint && !given.resume) await checkOutputDir(o.checkpoint, '--checkpoint');
  }
  const file = configPath && !manifest ? await readConfigFile(configPath) : undefined;
  const format = inputFormatOf(o) as 'xc' | 'libsvm' | undefined;
  const own = await loadData(ownFile(trainPath), format, 'training data', r, undefined, o.zeroBased);
  let train = trainPath.includes(RANK_PLACEHOLDER) ? gatherShards(own, comm) : own;
  let test: SparseDataset | undefined = testPath ? await loadData(testPath, format, 'test data', r, undefined, o.zeroBased) : undefined;
  if (test) checkEvaluable(test, testPath!);

  // The whole network's configuration (its wide part, if any, is sharded with the labels).
  let config: NetworkConfig;
  if (manifest) config = manifest.config;
  else if (file) config = networkOfFile(file, train, o.seed);
  else config = defaultConfig({ features: train.features, labels: train.labels, points: train.points, nnz: train.offsets[train.points]! }, o.seed ?? 1);
  const resolved = resolveConfig(config);
  if (resolved.layers.at(-1)!.wide?.negatives) {
    throw new UsageError(`${configPath ?? 'the network configuration'}: layers[${resolved.layers.length - 1}].wide.negatives (hard negatives from the wide part) are not sharded: set it to 0 for --shard-labels`);
  }
  const L = resolved.layers.at(-1)!.size;
  if (resolved.layers.length < 2) throw new UsageError('--shard-labels needs a hidden layer below the output layer');
  if (train.features > resolved.inputDim) throw new Error(`${trainPath} has ${train.features} features but the configuration's inputDim is ${resolved.inputDim}`);
  if (train.labels > L) throw new Error(`${trainPath} has labels up to ${train.labels - 1} but the network's output layer has ${L}`);
  if (test) checkFits(test, testPath!, resolved.inputDim, L);
  // Raw-valued inputs are scaled as a single process's fit() scales them (decided from the training data
  // alone, so a resumed run decides alike); the saved model stores the divisors.
  const scaling = detectInputScale(train, resolved.inputDim, 'auto');
  if (scaling.scale || scaling.log) {
    train = applyInputScale(train, scaling.scale, scaling.log);
    if (test) test = applyInputScale(test, scaling.scale, scaling.log);
    say(`input scaling: ${scaling.report.reason}\n`);
  }
  if (L < dist.size) throw new UsageError(`cannot shard ${L} labels over ${dist.size} ranks`);

  // The shardings: labels by training counts, input features by nonzero counts (the checkpoint's when resuming,
  // so that a resume re-shards alike).
  let part: ShardPart;
  if (manifest) {
    if (manifest.layout === undefined) say(`${ckptPath}: written before the input layer was sharded; its layer 0 is re-sharded by this data's feature counts\n`);
    part = await loadShardedPart(ckptPath!, manifest, dist.rank, dist.size, { featureFreq: featureFrequencies(train, resolved.inputDim) });
  } else {
    const labelFreq = labelFrequencies(train.labelIndices, L), featureFreq = featureFrequencies(train, resolved.inputDim);
    if (resolved.inputDim < dist.size) throw new UsageError(`cannot shard ${resolved.inputDim} input features over ${dist.size} ranks`);
    const labels = shardLabels(labelFreq, dist.size).labelsOf[dist.rank]!, features = shardFeatures(featureFreq, dist.size).featuresOf[dist.rank]!;
    const spec = allocateRank(config, labels.length, features.length);
    // The rows of this rank's features and labels initialised as the whole network's rows of the same ids (the
    // middle layers are initialised whole, alike on every rank): the initial model does not depend on the
    // number of ranks. The wide pairs of this rank's labels are chosen as a single process chooses them.
    initFeatureRows(config, features, spec.layers[0]!);
    initSliceRows(config, labels, spec.layers.at(-1)!);
    buildSliceWide(config, { spec }, labels, train);
    part = { spec, labels, features, labelFreq, featureFreq };
  }
  const net = { spec: part.spec };
  // Every page of the rank's state mapped now: touched page by page in the first steps instead, each rank's
  // faults would stall the other ranks too (a step waits for the slowest rank).
  native().netPrefault(net.spec);
  const model = new ShardedModel(comm, config, net, part.labelFreq, part.featureFreq);
  const sharding = model.sharding;
  const mine = model.labels;
  const batchSize = o.batch ?? 128;
  const lr = o.lr ?? file?.training.lr ?? defaultTraining(resolved, 1).lr;
  model.prepareLogQ(train.points, batchSize);
  const epochs = o.epochs;
  const seed = resolved.seed;
  const sliceBytes = rankBytes(net.spec);
  const loads = sharding.load, featureLoads = model.featureSharding.load;
  const widePairs = net.spec.layers.at(-1)!.wide?.labels.length;
  say(`network: ${resolved.inputDim} -> ${resolved.layers.map((l) => l.size).join(' -> ')}; label-sharded over ${dist.size} rank(s): ` +
    `${mine.length} labels and ${model.features.length} input features here (${formatBytes(sliceBytes)} state per rank${widePairs !== undefined ? `, ${widePairs} wide pairs` : ''}), ` +
    `label-count load ${Math.min(...loads)}..${Math.max(...loads)}, feature nonzeros ${Math.min(...featureLoads)}..${Math.max(...featureLoads)}; minActive ${model.minActive} per slice\n`);

  const period = checkpointPeriod(o.checkpointEvery);
  let lastCkptAt = performance.now(), lastCkptBatch = manifest?.batchesDone ?? 0;
  let checkpoints = 0;
  const settings = { train: o.train, test: o.test, epochs, batch: batchSize, lr, format: o.format, inputFormat: o.inputFormat, zeroBased: o.zeroBased, checkpoint: o.checkpoint, checkpointEvery: o.checkpointEvery, seed };
  const checkpoint = async (epoch: number, batch: number, batchesDone: number) => {
    if (!o.checkpoint) return;
    const meta: ShardCheckpointMeta = { format: 'sublinear-sharded-checkpoint', config, ranks: dist.size, epoch, batch, batchesDone, trainPoints: train.points, settings };
    const at = await writeShardCheckpoint(o.checkpoint, dist.rank, { ...part, labels: mine, features: model.features }, meta, () => comm.barrier(), scaling.scale, scaling.log);
    checkpoints++;
    lastCkptAt = performance.now();
    lastCkptBatch = batchesDone;
    say(`checkpoint ${at}\n`);
  };

  let batchesDone = manifest?.batchesDone ?? 0;
  const startEpoch = manifest?.epoch ?? 0;
  let startBatch = manifest?.batch ?? 0;
  const t0 = performance.now();
  const cpu0 = process.cpuUsage();
  let samples = 0;
  const history: { epoch: number; loss: number; samplesPerSecond: number }[] = [];
  const adam = { beta1: 0.9, beta2: 0.999, eps: 1e-8 };
  for (let epoch = startEpoch; epoch < epochs; epoch++) {
    const order = epochOrder(train.points, seed, epoch, true);
    const nb = Math.ceil(train.points / batchSize);
    let lossSum = 0, n = 0;
    const te = performance.now();
    for (let b = startBatch; b < nb; b++) {
      const ids = order.subarray(b * batchSize, Math.min(train.points, (b + 1) * batchSize));
      const r = model.step(train, { pointIds: ids, seed: batchSeed(seed, batchesDone), lr, ...adam });
      batchesDone++;
      lossSum += r.lossSum;
      n += r.samples;
      // Every rank must decide alike: rank 0's clock decides time-based checkpoints, asked every 32 batches
      // (a collective per step would add a round trip to every step).
      if (o.checkpoint && b + 1 < nb) {
        const due = period.batches
          ? batchesDone - lastCkptBatch >= period.batches
          : batchesDone % 32 === 0 && dist.agree(performance.now() - lastCkptAt >= period.ms! ? '1' : '0') === '1';
        if (due) await checkpoint(epoch, b + 1, batchesDone);
      }
    }
    startBatch = 0;
    samples += n;
    // The replicated parts (layer 0's bias, the middle layers) compared across the ranks once an epoch.
    if (!model.verify()) say(`epoch ${epoch + 1}: the ranks' replicated parts differed; rank 0's were broadcast\n`);
    const secs = (performance.now() - te) / 1000;
    history.push({ epoch: epoch + 1, loss: lossSum / Math.max(1, n), samplesPerSecond: n / Math.max(secs, 1e-9) });
    say(`epoch ${epoch + 1}/${epochs}: loss ${(lossSum / Math.max(1, n)).toFixed(4)}, ${Math.round(n / Math.max(secs, 1e-9))} samples/s\n`);
    if (o.checkpoint && epoch + 1 < epochs) await checkpoint(epoch + 1, 0, batchesDone);
  }
  const trainSeconds = (performance.now() - t0) / 1000;
  const cpu = process.cpuUsage(cpu0);
  const trainCpu = new Float64Array(dist.size);
  trainCpu[dist.rank] = (cpu.user + cpu.system) / 1e6;
  comm.allreduceSum(trainCpu);
  if (o.checkpoint) await checkpoint(epochs, 0, batchesDone);

  let metrics = null;
  let predictSeconds = 0;
  if (test) {
    const tp = performance.now();
    metrics = model.evaluate(test, [1, 3, 5], train.points, { A: o.propensityA, B: o.propensityB });
    predictSeconds = (performance.now() - tp) / 1000;
    say(`test: ${metricLine(metrics)}\n`);
  }
  let gathered: Network | null = null;
  /** Where the model went when `save` could not be written (rescue-save.ts), and why. */
  let kept: KeptModel | undefined;
  if (o.save) {
    gathered = await gatherModel(model, dist.rank, dist.size, gatherv, train.points, batchesDone);
    if (gathered) {
      gathered.inputScale = scaling.scale;
      gathered.inputLog = scaling.log;
      const net = gathered;
      kept = await saveKept((file) => net.save(file), o.save, rescuePaths(o.save, o.checkpoint));
      o.onSaved?.(kept.file);
      if (kept.failed.length) r.notice(`sublinear: ${keptElsewhereText(o.save, kept)}`);
      else say(`saved ${o.save}\n`);
    }
  }
  const savedInstead = kept?.failed.length ? kept.file : undefined;
  const rss = new Float64Array(dist.size);
  rss[dist.rank] = peakRssMB();
  comm.allreduceSum(rss);
  const pairsAll = new Float64Array(dist.size);
  pairsAll[dist.rank] = widePairs ?? 0;
  comm.allreduceSum(pairsAll);
  const widePairsAll = widePairs !== undefined ? Array.from(pairsAll) : null;
  const x = model.report();
  const samplesPerSec = samples / Math.max(trainSeconds, 1e-9);
  const report: TrainReport = {
    shardLabels: true, mode: 'sharded', ranks: dist.size, mpi: dist.library, metrics, epochs, batchSize, lr,
    samples, samplesPerSec, trainSeconds, workers: 1, peakRssMB: rss[0]!, model: o.save ? resolve(savedInstead ?? o.save) : null, checkpoints,
    ...(savedInstead ? { saveError: `${o.save}: ${kept!.failed[0]!.error.message}` } : {}),
    labels: L, labelsPerRank: sharding.labelsOf.map((a) => a.length), loadPerRank: loads,
    featuresPerRank: model.featureSharding.featuresOf.map((a) => a.length), featureLoadPerRank: featureLoads,
    minActivePerSlice: model.minActive, trainCpuSecondsPerRank: Array.from(trainCpu),
    // Alias of samplesPerSec, as before the common schema (kept for one minor version).
    samplesPerSecond: samplesPerSec,
    predictSeconds, peakRssMBPerRank: Array.from(rss), sliceStateBytes: sliceBytes, widePairsPerRank: widePairsAll,
    exchange: {
      steps: x.steps, bytesPerStep: x.bytesSentPerStep, bytesSentPerStep: x.bytesSentPerStep, split: x.split, activeRowsPerStep: x.activePerStep,
      lowerSeconds: x.lowerSeconds, outputSeconds: x.outputSeconds, exchangeSeconds: x.exchangeSeconds,
    },
    checksum: { checks: x.checks, mismatches: x.mismatches },
    // Alias of model: the path as given (kept for one minor version).
    save: o.save ?? null,
    history: history.map((h) => ({ ...h, samplesPerSec: h.samplesPerSecond })),
  };
  return { network: gathered, report, rank: dist.rank, ...(savedInstead ? { savedInstead } : {}) };
}

type Gatherv = (b: Uint8Array, root: number) => { data: Uint8Array; counts: number[] };

/**
 * Rows of a sliced layer gathered on rank 0 (a collective): each rank's rows (`weights`, rows of `width`, and
 * `bias` (one per row) when given) sent in rounds of at most 64 MiB (MPI_Gatherv); rank 0 calls `place(r, e,
 * row, bias)` for the e-th row of rank r (`idsOf[r]` names them).
 */
function gatherRows(
  gatherv: Gatherv, size: number, idsOf: Uint32Array[], rank: number, width: number, weights: Float32Array, bias: Float32Array | null,
  place: ((r: number, e: number, row: Float32Array, b: number) => void) | null,
): void {
  const per = width + (bias ? 1 : 0);
  const rowsPerRound = Math.max(1, Math.floor((64 << 20) / (4 * per)));
  const mine = idsOf[rank]!.length;
  const maxRows = Math.max(...idsOf.map((a) => a.length));
  for (let r0 = 0; r0 < maxRows; r0 += rowsPerRound) {
    const n = Math.max(0, Math.min(rowsPerRound, mine - r0));
    const msg = new Float32Array(n * per);
    if (n > 0) {
      msg.set(weights.subarray(r0 * width, (r0 + n) * width), 0);
      if (bias) msg.set(bias.subarray(r0, r0 + n), n * width);
    }
    const g = gatherv(new Uint8Array(msg.buffer), 0);
    if (!place) continue;
    let base = g.data.byteOffset;
    for (let r = 0; r < size; r++) {
      const bytes = g.counts[r]!;
      const cnt = bytes / (4 * per);
      const f = new Float32Array(g.data.buffer.slice(base, base + bytes));
      for (let e = 0; e < cnt; e++) place(r, r0 + e, f.subarray(e * width, (e + 1) * width), bias ? f[cnt * width + e]! : 0);
      base += bytes;
    }
  }
}

/**
 * The whole model on rank 0 (null elsewhere): layer 0's rows gathered slice by slice (MPI_Gatherv) into their
 * global rows, its bias and the middle layers as they are (every rank holds them alike), the output rows
 * gathered into their global rows, and the wide part's pairs merged into one feature-major CSR over every
 * label (gatherWide). An ordinary model file: a single process loads it. Rank 0 allocates the network
 * inference-sized (a model file holds no optimizer state).
 */
async function gatherModel(model: ShardedModel, rank: number, size: number, gatherv: Gatherv, trainPoints: number, batchesDone: number): Promise<Network | null> {
  const layers = model.net.spec.layers;
  const out = layers.at(-1)!, l0 = layers[0]!;
  const d = out.inDim, H0 = l0.outDim;
  const full = rank === 0 ? new Network(model.global, { inference: true }) : null;
  if (out.wide) {
    const w = gatherWide(model, out.wide, size, gatherv);
    if (full) full.spec.layers.at(-1)!.wide = w!;
  }
  const fo = full?.spec.layers.at(-1), f0 = full?.spec.layers[0];
  gatherRows(gatherv, size, model.sharding.labelsOf, rank, d, out.weights, out.bias, fo ? (r, e, row, b) => {
    const j = model.sharding.labelsOf[r]![e]!;
    fo.weights.set(row, j * d);
    fo.bias[j] = b;
  } : null);
  gatherRows(gatherv, size, model.featureSharding.featuresOf, rank, H0, l0.weights, null, f0 ? (r, e, row) => {
    f0.weights.set(row, model.featureSharding.featuresOf[r]![e]! * H0);
  } : null);
  if (!full) return null;
  full.spec.layers[0]!.bias.set(l0.bias);
  layers.slice(1, -1).forEach((l, i) => {
    const t = full.spec.layers[i + 1]!;
    t.weights.set(l.weights);
    t.bias.set(l.bias);
  });
  full.labelFreq = model.labelFreq;
  full.trainPoints = trainPoints;
  full.batchesDone = batchesDone;
  return full;
}

/**
 * The wide part over every label on rank 0 (null elsewhere; a collective): the ranks' per-feature counts are
 * summed (every rank then knows the rounds), then in rounds of at most 64 MiB of pairs (whole features) each
 * rank sends its pairs of the round's features ([u32 count per feature][u32 global labels][f32 weights]) and
 * rank 0 merges each feature's lists in ascending label order (mergeWide). No Adagrad sums: a model file
 * holds none.
 */
function gatherWide(model: ShardedModel, mine: WideState, size: number, gatherv: Gatherv): WideState | null {
  const D = mine.inputDim, rank = model.comm.rank;
  const total = new Float64Array(D);
  for (let f = 0; f < D; f++) total[f] = mine.offsets[f + 1]! - mine.offsets[f]!;
  if (size > 1) model.comm.allreduceSum(total);
  const off = new Uint32Array(D + 1);
  for (let f = 0; f < D; f++) off[f + 1] = off[f]! + total[f]!;
  const full = rank === 0 ? allocateWide(D, off[D]!, true) : null;
  if (full) full.offsets.set(off);
  const perRound = (64 << 20) / 8;
  for (let f0 = 0; f0 < D;) {
    let f1 = f0 + 1;
    while (f1 < D && off[f1 + 1]! - off[f0]! <= perRound) f1++;
    const n = f1 - f0, e0 = mine.offsets[f0]!, e1 = mine.offsets[f1]!;
    const msg = new Uint32Array(n + 2 * (e1 - e0));
    for (let f = f0; f < f1; f++) msg[f - f0] = mine.offsets[f + 1]! - mine.offsets[f]!;
    for (let e = e0; e < e1; e++) msg[n + e - e0] = model.labels[mine.labels[e]!]!;
    new Float32Array(msg.buffer).set(mine.weights.subarray(e0, e1), n + (e1 - e0));
    const g = gatherv(new Uint8Array(msg.buffer), 0);
    if (full) {
      const parts: WideState[] = [];
      let base = 0;
      for (let r = 0; r < size; r++) {
        const words = new Uint32Array(g.data.buffer.slice(g.data.byteOffset + base, g.data.byteOffset + base + g.counts[r]!));
        base += g.counts[r]!;
        const cnt = (words.length - n) / 2;
        const offsets = new Uint32Array(n + 1);
        for (let f = 0; f < n; f++) offsets[f + 1] = offsets[f]! + words[f]!;
        if (!Number.isInteger(cnt) || offsets[n] !== cnt) throw new Error(`rank ${r}'s wide pairs of features ${f0}..${f1 - 1} are malformed (${g.counts[r]} bytes)`);
        parts.push({ inputDim: n, offsets, labels: words.subarray(n, n + cnt), weights: new Float32Array(words.buffer, 4 * (n + cnt), cnt), accum: new Float32Array(0) });
      }
      const m = mergeWide(parts, n);
      full.labels.set(m.labels, off[f0]!);
      full.weights.set(m.weights, off[f0]!);
    }
    f0 = f1;
  }
  if (!full) return null;
  const bad = wideProblem(full, model.numLabels);
  if (bad) throw new Error(`the gathered wide part is malformed: ${bad}`);
  return full;
}
