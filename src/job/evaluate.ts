// evaluate(job): what `sublinear eval` does, as one library call: a model's P@k, nDCG@k and PSP@k on a
// labelled test file, in one process or label-sharded under MPI (`distributed`: the model is the checkpoint
// directory of a label-sharded training job). It returns the report `eval --json` prints (docs/cli.md).
import type { Metrics } from '../network/metrics.js';
import type { CalibrationMetrics } from '../network/calibration.js';
import { createExecutor, defaultWorkers, type Executor } from '../network/executor.js';
import { applyInputScale, inputTransformNote } from '../network/input-scale.js';
import { mapFeatures } from '../network/input-map.js';
import { runAsRank, type DistributedRun } from '../train/distributed.js';
import { Network } from '../network/network.js';
import { loadShardedPart, newestShardCheckpoint, readShardManifest } from '../train/shard-checkpoint.js';
import { ShardedModel } from '../train/sharded.js';
import { peakRssMB } from '../util/peak-rss.js';
import { UsageError } from '../util/usage-error.js';
import { checkEvaluable, checkFits, denseSampledWarning, predictWarnings } from './data-checks.js';
import { loadData, loadTextInput, memoryLimitBytes } from './data-loading.js';
import { parseKs, type EvalJob } from './eval-predict-options.js';
import { Reporter, SILENT, type JobEvents } from './events.js';
import { checkInputFile } from './preflight.js';

export type { EvalJob } from './eval-predict-options.js';

/** The result of an evaluation (`eval --json`): the same fields in one process and label-sharded. */
export type EvalReport = Metrics & {
  /** The test metrics (also at the top level, as before this field: kept for one minor version). */
  metrics: Metrics;
  /** 'exact' or 'sampled' inference. */
  mode: 'exact' | 'sampled';
  /** MPI ranks (1 in one process). */
  ranks: number;
  /** The model file, or the label-sharded checkpoint read. */
  model: string;
  /** Seconds of prediction (the metrics excluded). */
  seconds: number;
  pointsPerSec: number;
  /** Peak resident memory of this process (rank 0's under MPI), MB. */
  peakRssMB: number;
  /** The cut-offs the metrics were computed at. */
  ks: number[];
  /**
   * A calibrated model (one process): ECE, micro/macro-F1 at the threshold (EvalJob.threshold, default the
   * model's) and at every fixed top-k cut, the reliability diagram (CalibrationMetrics).
   */
  calibration?: CalibrationMetrics;
} & Record<string, unknown>;

/** The fields every evaluation's report holds, in one process and label-sharded (docs/cli.md documents each). */
export const EVAL_REPORT_FIELDS = ['metrics', 'mode', 'ranks', 'model', 'points', 'seconds', 'pointsPerSec', 'peakRssMB', 'ks'] as const satisfies readonly (keyof EvalReport)[];

/** What evaluate() returns: the report, and this process's rank of an MPI job (0 in one process: rank 0 reports). */
export interface EvalResult {
  report: EvalReport;
  rank: number;
}

/**
 * Evaluates a saved model (or a training checkpoint's network) on labelled test data, as `sublinear eval`.
 *
 * @example
 * ```ts
 * import { evaluate } from 'sublinear';
 * const { report } = await evaluate({ model: 'model.sl', test: 'test.txt', k: '1,3,5' });
 * console.log(report.metrics.p1);
 * ```
 */
export async function evaluate(job: EvalJob): Promise<EvalResult> {
  if (job.distributed) {
    await checkInputFile(job.test, '--test');
    return runAsRank(null, async (dist) => ({ report: await evaluateSharded(job, dist.isRoot ? job : SILENT, dist), rank: dist.rank }));
  }
  const r = new Reporter(job, !!job.quiet);
  await checkInputFile(job.model, '--model');
  await checkInputFile(job.test, '--test');
  // The worker threads start now and load the addon while the model and the data are read, so that the
  // timed prediction is the scoring alone (starting them took about 40 ms of a 0.3 s sampled evaluation).
  const workers = job.workers ?? defaultWorkers();
  const exec = workers > 0 ? createExecutor(workers) : undefined;
  try {
    return { report: await evaluateOn(job, r, exec), rank: 0 };
  } finally {
    await exec?.close();
  }
}

async function evaluateOn(o: EvalJob, r: Reporter, exec: Executor | undefined): Promise<EvalReport> {
  const net = await Network.load(o.model, { maxMemory: o.maxMemory, workers: o.workers });
  const outputs = net.config.layers.at(-1)!.size;
  // The default cut-offs stop at the model's labels (a 3-label model: 1,3); given ones must fit.
  const ks = o.k !== undefined ? parseKs(o.k, outputs) : [1, 3, 5].filter((k) => k <= outputs);
  const format = o.format ?? (net.textVectorizer ? 'text' : 'xc');
  if (o.zeroBased && format !== 'libsvm') throw new UsageError('--zero-based applies to --format libsvm only');
  const test = format === 'text'
    ? await loadTextInput(net, o.test, o.test, true, r, o.maxMemory)
    : await loadData(o.test, format, 'test data', r, Math.max(0, memoryLimitBytes(o.maxMemory) - net.memoryBytes()), o.zeroBased);
  checkEvaluable(test, o.test);
  checkFits(test, o.test, net.inputFeatures, outputs);
  const transform = inputTransformNote(net.inputScale, net.inputLog);
  if (transform) r.say(transform);
  const mode = net.inferenceMode(o.mode);
  const dense = mode === 'sampled' ? denseSampledWarning(net.config, o.model) : null;
  if (dense) r.warn(dense);
  // Sampled inference builds the output layer's cluster index on first use: timed apart from scoring.
  const indexSeconds = mode === 'sampled' ? net.buildClusterIndex() : 0;
  const t0 = performance.now();
  const bar = r.progress(`evaluating (${mode})`, 'points');
  if (o.threshold !== undefined && !net.calibration) throw new UsageError(`option --threshold: ${o.model} has no calibrated probabilities (train with held-out validation, the default, to fit them)`);
  let m;
  try {
    m = await net.evaluate(test, {
      ...(o.threshold !== undefined ? { threshold: o.threshold } : {}),
      mode, workers: o.workers, candidates: o.candidates, propensityA: o.propensityA, propensityB: o.propensityB, k: ks, onWarning: predictWarnings(net.config, (w) => r.warn(w)),
      ...(bar ? { onProgress: (done: number, total: number) => bar.update(done, total) } : {}), ...(exec ? { executor: exec } : {}),
    });
  } finally {
    bar?.done();
  }
  const evalSeconds = (performance.now() - t0) / 1000;
  const seconds = m.predictSeconds; // inference alone: the metrics cost the same in both modes
  const scored = m.outputsScoredPerPoint;
  const { outputsScoredPerPoint: _, predictSeconds: __, calibration, ...metrics } = m;
  return {
    ...m, metrics: metrics as Metrics, mode, ranks: 1, model: o.model, seconds, evalSeconds, pointsPerSec: m.points / seconds, outputsScoredPerPoint: scored,
    outputsScoredFraction: scored / outputs, outputs, indexSeconds, inputScaled: net.inputScale !== null || net.inputLog, peakRssMB: peakRssMB(), ks,
    ...(calibration ? { calibration } : {}),
  };
}

/**
 * Label-sharded evaluation (under mpirun): each rank loads only its slices of a label-sharded checkpoint
 * (labels and input features, re-sharded to this job's ranks), scores every label of its slice for each test
 * point, and the ranks' top-k are merged (src/train/sharded.ts, ShardedModel.evaluate); rank 0 reports.
 */
async function evaluateSharded(o: EvalJob, events: JobEvents, dist: DistributedRun): Promise<EvalReport> {
  if (o.mode === 'sampled') throw new UsageError('--distributed scores every label of each slice exactly: leave out --mode sampled');
  if (o.format === 'text') throw new UsageError('--distributed reads numeric test data (XC or LIBSVM)');
  if (o.threshold !== undefined) throw new UsageError('option --threshold needs a calibrated model file; a label-sharded checkpoint has no calibrated probabilities');
  const r = new Reporter(events, !!o.quiet || !dist.isRoot);
  const picked = dist.agree(dist.isRoot ? (await newestShardCheckpoint(o.model)) ?? '' : '');
  if (!picked) {
    throw new Error(`${o.model}: no complete sharded checkpoint (eval --distributed reads the --checkpoint directory of train --distributed; ` +
      'a model file is read by eval without --distributed)');
  }
  const manifest = await readShardManifest(picked);
  const L = manifest.config.layers.at(-1)!.size;
  const part = await loadShardedPart(picked, manifest, dist.rank, dist.size);
  const ks = o.k !== undefined ? parseKs(o.k, L) : [1, 3, 5].filter((k) => k <= L);
  let test = await loadData(o.test, o.format as 'xc' | 'libsvm' | undefined, 'test data', r, undefined, o.zeroBased);
  checkEvaluable(test, o.test);
  checkFits(test, o.test, manifest.inputFeatures ?? manifest.config.inputDim, L);
  if (part.inputMap) test = mapFeatures(test, part.inputMap);
  test = applyInputScale(test, part.inputScale, part.inputLog);
  const model = new ShardedModel(dist.comm, manifest.config, { spec: part.spec }, part.labelFreq, part.featureFreq);
  const t0 = performance.now();
  const m = model.evaluate(test, ks, manifest.trainPoints, { A: o.propensityA, B: o.propensityB });
  const seconds = (performance.now() - t0) / 1000;
  const rss = new Float64Array(dist.size);
  rss[dist.rank] = peakRssMB();
  dist.comm.allreduceSum(rss);
  return {
    ...m, metrics: m, mode: 'exact', ranks: dist.size, model: o.model, seconds, pointsPerSec: m.points / seconds, outputs: L, checkpoint: picked,
    peakRssMB: rss[0]!, peakRssMBPerRank: Array.from(rss), ks,
  };
}
