// `sublinear train | eval | predict | demo`: the engine's commands. Argument parsing lives in
// src/cli/main.ts's command table; these functions receive typed options.
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { readXC, readLibsvm, generateSynthetic, type SparseDataset } from '../../datasets/index.js';
import { defaultConfig, defaultTraining, resolveConfig, type NetworkConfig, type ResolvedNetworkConfig } from '../network/config.js';
import { Network } from '../network/network.js';
import type { Metrics } from '../train/metrics.js';
import { defaultWorkers } from '../train/executor.js';
import { checkMemory, formatBytes, planNetworkMemory } from '../train/memory-plan.js';
import { parseCheckpointEvery } from '../train/checkpoint.js';
import { Progress } from '../util/progress.js';
import { peakRssMB } from '../util/peak-rss.js';
import { UsageError } from './args.js';
import { coresPerRank, runAsRank, type DistributedRun } from '../train/distributed.js';

export interface TrainCliOptions {
  /** Required unless `resume` is given. */
  train?: string;
  test?: string;
  config?: string;
  /** A configuration object instead of a --config file (the demo's). */
  networkConfig?: NetworkConfig;
  format?: 'xc' | 'libsvm';
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
  format?: 'xc' | 'libsvm';
  save?: string;
  evalEvery?: number;
  workers?: number;
  maxMemory?: number;
  mode?: 'exact' | 'sampled';
  propensityA?: number;
  propensityB?: number;
  checkpointEvery?: string;
}

const SAVED_CLI_KEYS = ['train', 'test', 'format', 'save', 'evalEvery', 'workers', 'maxMemory', 'mode', 'propensityA', 'propensityB', 'checkpointEvery'] as const;

function savedCli(o: TrainCliOptions & { train: string }): SavedCli {
  const s: Record<string, unknown> = {};
  for (const k of SAVED_CLI_KEYS) if (o[k] !== undefined) s[k] = o[k];
  for (const k of ['train', 'test', 'save'] as const) if (o[k] !== undefined) s[k] = resolve(o[k]);
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

type Out = { out: (s: string) => void; err: (s: string) => void };

export async function loadData(path: string, format: 'xc' | 'libsvm' | undefined, label: string, quiet: boolean): Promise<SparseDataset> {
  const bar = quiet ? null : new Progress({ label: `reading ${label}`, unit: 'MB' });
  const onProgress = bar ? (done: number, total: number) => bar.update(done / 1e6, total / 1e6) : undefined;
  try {
    return format === 'libsvm' ? await readLibsvm(path, { onProgress }) : await readXC(path, { onProgress });
  } finally {
    bar?.done();
  }
}

async function loadConfig(path: string | undefined, data: SparseDataset, seed: number | undefined): Promise<NetworkConfig> {
  if (!path) return defaultConfig({ features: data.features, labels: data.labels, points: data.points }, seed ?? 1);
  let parsed: Partial<NetworkConfig>;
  try {
    parsed = JSON.parse(await readFile(path, 'utf8')) as Partial<NetworkConfig>;
  } catch (e) {
    throw new Error(`${path}: cannot read the network configuration: ${(e as Error).message}`);
  }
  const c = { ...parsed, inputDim: parsed.inputDim ?? data.features, seed: seed ?? parsed.seed } as NetworkConfig;
  try {
    resolveConfig(c);
  } catch (e) {
    throw new Error(`${path}: ${(e as Error).message}`);
  }
  return c;
}

function metricLine(m: Metrics): string {
  const f = (k: string) => (m[k as keyof Metrics] as number | undefined)?.toFixed(4) ?? '-';
  return `P@1 ${f('p1')}  P@3 ${f('p3')}  P@5 ${f('p5')}  nDCG@1 ${f('ndcg1')}  nDCG@3 ${f('ndcg3')}  nDCG@5 ${f('ndcg5')}  PSP@1 ${f('psp1')}  PSP@3 ${f('psp3')}  PSP@5 ${f('psp5')}`;
}

/** Refuses, before any training, a data file whose ids do not fit the network (naming the file). */
export function checkFits(d: SparseDataset, path: string, inputDim: number, outputs: number): void {
  if (d.features > inputDim) throw new Error(`${path} has ${d.features} features but the network's inputDim is ${inputDim}`);
  if (d.labels > outputs) throw new Error(`${path} has ${d.labels} labels but the network's last layer has ${outputs} neurons`);
}

export async function trainCommand(given: TrainCliOptions, io: Out): Promise<number> {
  if (given.distributed) return runAsRank(io, (dist, rankIo) => trainOn(given, rankIo, dist));
  return trainOn(given, io, null);
}

async function trainOn(given: TrainCliOptions, io: Out, dist: DistributedRun | null): Promise<number> {
  const quiet = !!given.json || (dist !== null && !dist.isRoot);
  let o: TrainCliOptions = given;
  let resumed: Network | undefined;
  if (given.resume) {
    if (given.config) throw new UsageError('--config cannot be combined with --resume: the network configuration comes from the checkpoint');
    if (given.seed !== undefined) throw new UsageError('--seed cannot be combined with --resume: the seed comes from the checkpoint');
    // The network alone is checked against the memory limit before the checkpoint allocates it; the
    // full plan (training data included, with the saved settings) is checked again below. The saved
    // worker count is not known yet: without --workers, count the least scratch (a lower bound).
    const beforeAllocate = (c: NetworkConfig) => {
      let r: ResolvedNetworkConfig;
      try {
        r = resolveConfig(c);
      } catch {
        return; // an invalid configuration is reported by the checkpoint reader, naming the file
      }
      checkMemory(planNetworkMemory(r, given.workers ?? 0), given.maxMemory !== undefined ? { maxBytes: given.maxMemory } : {});
    };
    const resumeOpts = { onWarning: (m: string) => io.err(`sublinear: ${m}\n`), beforeAllocate };
    resumed = await (dist ? dist.resume(given.resume, resumeOpts) : Network.resume(given.resume, resumeOpts));
    const info = resumed.resumeInfo!;
    // Saved settings first, flags given again on top; checkpoints continue in the resumed directory.
    const defined = Object.fromEntries(Object.entries(given).filter(([, v]) => v !== undefined)) as TrainCliOptions;
    o = { ...readSavedCli(info.extra), checkpoint: dirname(info.file), ...defined };
    if (!o.train) throw new UsageError(`${info.file} does not record its training data (it was not written by sublinear train); give --train`);
    if (!quiet) {
      const p = info.position;
      io.err(`resuming from ${info.file}: epoch ${p.epoch + 1}, batch ${p.batch} (${p.batchesDone} batches done)\n`);
    }
  } else if (!given.train) {
    throw new UsageError('missing required option --train (or --resume <dir>)');
  }
  if (given.checkpointEvery !== undefined && !o.checkpoint) throw new UsageError('--checkpoint-every needs --checkpoint <dir>');
  if (o.checkpointEvery !== undefined) {
    try {
      parseCheckpointEvery(o.checkpointEvery);
    } catch {
      throw new UsageError(`option --checkpoint-every expects a number of batches or a duration like 90s, 10m, 1h but received '${o.checkpointEvery}'`);
    }
  }
  const trainPath = o.train!;
  const train = await loadData(trainPath, o.format, 'training data', quiet);
  const test = o.test ? await loadData(o.test, o.format, 'test data', quiet) : undefined;
  const config = resumed ? resumed.config : o.networkConfig ?? (await loadConfig(o.config, train, o.seed));
  const resolved = resolveConfig(config);
  if (train.features > resolved.inputDim) throw new Error(`${trainPath} has ${train.features} features but the configuration's inputDim is ${resolved.inputDim}`);
  const outputs = resolved.layers.at(-1)!.size;
  if (test && o.test) checkFits(test, o.test, resolved.inputDim, outputs);
  const workers = o.workers ?? defaultTraining(resolved, dist ? coresPerRank(defaultWorkers()) : defaultWorkers()).workers;
  // Without --epochs, training holds out a validation slice and keeps a copy of the best epoch's weights.
  const bestWeights = resumed ? !!resumed.resumeInfo!.fitOptions.validation : o.epochs === undefined;
  checkMemory(planNetworkMemory(resolved, workers, train, bestWeights), o.maxMemory !== undefined ? { maxBytes: o.maxMemory } : {});
  const net = resumed ?? new Network(config);
  const shape = [resolved.inputDim, ...resolved.layers.map((l) => `${l.size}${l.sampling ? ` (${l.sampling.hash} K=${l.sampling.K} L=${l.sampling.L})` : ''}`)].join(' -> ');
  if (!quiet) io.err(`network: ${shape}; ${formatBytes(net.memoryBytes())} shared state; ${workers} worker(s)\n`);
  let checkpoints = 0;
  const checkpoint = o.checkpoint && (!dist || dist.isRoot)
    ? {
        dir: o.checkpoint,
        every: o.checkpointEvery ?? '10m',
        extra: { cli: savedCli({ ...o, train: trainPath }) },
        onSaved: () => void checkpoints++,
      }
    : undefined;

  const ac = new AbortController();
  const onSigint = () => {
    if (!ac.signal.aborted) io.err(`\nstopping after the batches in flight${checkpoint ? ' and writing a checkpoint' : ''} (Ctrl-C again to force)\n`);
    else process.exit(130);
    ac.abort();
  };
  if (!dist) process.on('SIGINT', onSigint); // under MPI, Ctrl-C ends the job (mpirun signals every rank)
  const bar = quiet ? null : new Progress({ label: 'training', unit: 'batches' });
  const evalOpts = { mode: o.mode ?? 'exact', workers, candidates: o.candidates, propensityA: o.propensityA, propensityB: o.propensityB } as const;
  let stats;
  const testByEpoch = new Map<number, Metrics>();
  try {
    stats = await net.fit(train, {
      epochs: o.epochs,
      batchSize: o.batch,
      lr: o.lr,
      workers,
      signal: ac.signal,
      checkpoint,
      ...(dist ? dist.fitOptions(net, workers, train, o.batch ?? resumed?.resumeInfo?.fitOptions.batchSize ?? 128) : {}),
      onProgress: (p) => {
        bar?.update(p.epoch * p.batchesPerEpoch + p.batch, p.epochs * p.batchesPerEpoch,
          `epoch ${p.epoch + 1}/${p.epochs} loss ${p.loss.toFixed(4)} ${Math.round(p.samplesPerSec)} samples/s`);
      },
      onEpochEnd: async (epoch, st) => {
        const v = st.validation?.at(-1);
        if (!quiet && v && v.epoch === epoch + 1) {
          bar?.clear();
          io.err(`epoch ${epoch + 1}: held-out P@1 ${v.p1.toFixed(4)} P@3 ${v.p3.toFixed(4)} P@5 ${v.p5.toFixed(4)} (lr ${v.lr.toPrecision(3)})\n`);
        }
        if (test && o.evalEvery && (epoch + 1) % o.evalEvery === 0) {
          const m = await (dist ? dist.evaluate(net, test, evalOpts) : net.evaluate(test, evalOpts));
          testByEpoch.set(epoch + 1, m);
          bar?.clear();
          if (!quiet) io.err(`epoch ${epoch + 1}: test ${metricLine(m)}\n`);
        }
      },
    });
  } finally {
    bar?.done();
    process.off('SIGINT', onSigint);
  }
  if (!quiet) {
    io.err(`trained ${stats.samples} samples in ${stats.trainSeconds.toFixed(1)} s (${Math.round(stats.samplesPerSec)} samples/s; ` +
      `hash-table rebuilds ${stats.rebuildSeconds.toFixed(1)} s = ${(100 * stats.rebuildSeconds / Math.max(stats.trainSeconds, 1e-9)).toFixed(1)}%)` +
      `${stats.aborted ? ' (stopped early)' : ''}\n`);
    if (checkpoint) io.err(`${checkpoints} checkpoint(s) written to ${checkpoint.dir}\n`);
    if (stats.bestEpoch) io.err(`kept the weights of epoch ${stats.bestEpoch} (best held-out score of ${stats.validation!.length} epochs; ${stats.validationPoints} points held out)\n`);
  }
  if (o.save && (!dist || dist.isRoot)) {
    await net.save(o.save);
    if (!quiet) io.err(`saved ${o.save}\n`);
  }
  const metrics = test ? await (dist ? dist.evaluate(net, test, evalOpts) : net.evaluate(test, evalOpts)) : undefined;
  if (dist && !test) await dist.verify(net);
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
    history: stats.history.map((h) => {
      const v = stats.validation?.find((x) => x.epoch === h.epoch);
      const t = testByEpoch.get(h.epoch);
      return { ...h, ...(v ? { validation: { p1: v.p1, p3: v.p3, p5: v.p5, lr: v.lr } } : {}), ...(t ? { test: t } : {}) };
    }),
    samples: stats.samples,
    loss: stats.lastLoss,
    workers,
    peakRssMB: peakRssMB(),
    aborted: stats.aborted,
    batchesDone: net.batchesDone,
    ...(checkpoint ? { checkpoints } : {}),
    ...(resumed ? { resumedFrom: resumed.resumeInfo!.file, resumedAt: resumed.resumeInfo!.position.batchesDone } : {}),
    ...(dist ? dist.summary(net) : {}),
  };
  if (o.json) io.out(JSON.stringify(summary) + '\n');
  return 0;
}

export interface EvalCliOptions {
  model: string;
  test: string;
  format?: 'xc' | 'libsvm';
  json?: boolean;
  workers?: number;
  mode?: 'exact' | 'sampled';
  candidates?: number;
  propensityA?: number;
  propensityB?: number;
}

export async function evalCommand(o: EvalCliOptions, io: Out): Promise<number> {
  const net = await Network.load(o.model);
  const test = await loadData(o.test, o.format, 'test data', !!o.json);
  checkFits(test, o.test, net.config.inputDim, net.config.layers.at(-1)!.size);
  const mode = o.mode ?? 'exact';
  // Sampled inference builds the output layer's cluster index on first use: timed apart from scoring.
  const indexSeconds = mode === 'sampled' ? net.buildClusterIndex() : 0;
  const t0 = performance.now();
  const m = await net.evaluate(test, { mode, workers: o.workers, candidates: o.candidates, propensityA: o.propensityA, propensityB: o.propensityB });
  const evalSeconds = (performance.now() - t0) / 1000;
  const seconds = m.predictSeconds; // inference alone: the metrics cost the same in both modes
  const outputs = net.config.layers.at(-1)!.size;
  const scored = m.outputsScoredPerPoint;
  if (!o.json) {
    io.out(`${metricLine(m)}\n(${m.points} points predicted in ${seconds.toFixed(2)} s, ${mode}: ${Math.round(scored)} of ${outputs} outputs scored per point` +
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
  input: string;
  format?: 'xc' | 'libsvm';
  k?: number;
  workers?: number;
  mode?: 'exact' | 'sampled';
  candidates?: number;
}

export async function predictCommand(o: PredictCliOptions, io: Out): Promise<number> {
  const net = await Network.load(o.model);
  const data = await loadData(o.input, o.format, 'input', true);
  if (data.features > net.config.inputDim) throw new Error(`${o.input} has ${data.features} features but the network's inputDim is ${net.config.inputDim}`);
  const k = o.k ?? 5;
  const p = await net.predict(data, { k, mode: o.mode ?? 'exact', workers: o.workers, candidates: o.candidates });
  const lines: string[] = [];
  for (let i = 0; i < p.points; i++) {
    const parts: string[] = [];
    for (let j = 0; j < k; j++) {
      const l = p.labels[i * k + j]!;
      if (l !== 0xffffffff) parts.push(`${l}:${p.scores[i * k + j]!.toPrecision(6)}`);
    }
    lines.push(parts.join(' '));
    if (lines.length >= 4096) {
      io.out(lines.join('\n') + '\n');
      lines.length = 0;
    }
  }
  if (lines.length) io.out(lines.join('\n') + '\n');
  return 0;
}

export interface DemoOptions {
  json?: boolean;
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
    if (!o.json) io.err(`generating the synthetic 'small' dataset (20,000 features, 2,000 labels) in ${dir}\n`);
    await generateSynthetic({ shape: 'small', train: 20000, test: 2000, seed: 1, outDir: dir });
    const config: NetworkConfig = {
      inputDim: 20000,
      seed: 1,
      layers: [
        { size: 128, activation: 'relu' },
        { size: 2000, activation: 'softmax', sampling: { hash: 'dwta', K: 4, L: 32, budget: 100, minActive: 100, logQ: true } },
      ],
    };
    return await trainCommand({ train: join(dir, 'train.txt'), test: join(dir, 'test.txt'), networkConfig: config, epochs: 3, json: o.json, workers: o.workers }, io);
  } finally {
    if (!o.keep) await rm(dir, { recursive: true, force: true });
  }
}
