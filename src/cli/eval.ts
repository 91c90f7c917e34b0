// `sublinear eval`: a model's P@k, nDCG@k and PSP@k on a labelled test file.
import { Network } from '../network/network.js';
import { peakRssMB } from '../util/peak-rss.js';
import { UsageError } from './args.js';
import { checkInputFile } from './preflight.js';
import { checkEvaluable, checkFits, metricLine, pointsProgress, warnDenseSampled, type InputFormat, type Out } from './engine.js';
import { loadData, loadTextInput, memoryLimitBytes } from './data-loading.js';
import { parseKs, type EvalCliOptions } from './eval-predict-options.js';
import { createExecutor, defaultWorkers, type Executor } from '../network/executor.js';

export type { EvalCliOptions } from './eval-predict-options.js';

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
  // The worker threads start now and load the addon while the model and the data are read, so that the
  // timed prediction is the scoring alone (starting them took about 40 ms of a 0.3 s sampled evaluation).
  const workers = o.workers ?? defaultWorkers();
  const exec = workers > 0 ? createExecutor(workers) : undefined;
  try {
    return await evalOn(o, io, quiet, exec);
  } finally {
    await exec?.close();
  }
}

async function evalOn(o: EvalCliOptions, io: Out, quiet: boolean, exec: Executor | undefined): Promise<number> {
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
    m = await net.evaluate(test, { mode, workers: o.workers, candidates: o.candidates, propensityA: o.propensityA, propensityB: o.propensityB, k: ks, onProgress, ...(exec ? { executor: exec } : {}) });
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
