// `sublinear eval`: a model's P@k, nDCG@k and PSP@k on a labelled test file.
import { Network } from '../network/network.js';
import { peakRssMB } from '../util/peak-rss.js';
import { UsageError } from './args.js';
import { checkInputFile } from './preflight.js';
import { checkEvaluable, checkFits, metricLine, pointsProgress, warnDenseSampled, type InputFormat, type Out } from './engine.js';
import { loadData, loadTextInput, memoryLimitBytes } from './data-loading.js';

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
  /**
   * Evaluate label-sharded as one rank of an MPI job: `model` is the --checkpoint directory of
   * `train --shard-labels` (src/cli/eval-sharded.ts). Default false.
   */
  distributed?: boolean;
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

export async function evalCommand(o: EvalCliOptions, io: Out): Promise<number> {
  if (o.distributed) {
    await checkInputFile(o.test, '--test');
    const { runAsRank } = await import('../train/distributed.js');
    const { evalShardedOn } = await import('./eval-sharded.js');
    return runAsRank(io, (dist, rankIo) => evalShardedOn(o, rankIo, dist));
  }
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
    : await loadData(o.test, format, 'test data', quiet, Math.max(0, memoryLimitBytes(o.maxMemory) - net.memoryBytes()), o.zeroBased);
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
