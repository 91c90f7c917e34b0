// `sublinear predict`: a model's top labels for each point of a data file or of standard input.
import { createWriteStream } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { pipeline } from 'node:stream/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import type { SparseDataset } from '../datasets/index.js';
import { Network, type PredictOptions, type Predictions } from '../network/network.js';
import type { LabelExplanation } from '../network/explain.js';
import { featureTokens } from '../text/feature-names.js';
import { inputTransformNote } from '../network/input-scale.js';
import { UsageError } from './args.js';
import { checkInputFile } from '../job/preflight.js';
import { writePredictions } from './predict-output.js';
import { jobEvents, pointsProgress, type Out } from './engine.js';
import { denseSampledWarning, predictWarnings } from '../job/data-checks.js';
import { Reporter } from '../job/events.js';
import { loadData, loadTextPoints, memoryLimitBytes } from '../job/data-loading.js';
import { predictK, type PredictJob } from '../job/eval-predict-options.js';

/** The options of `sublinear predict`. */
export type PredictCliOptions = PredictJob;

export async function predictCommand(o: PredictCliOptions, io: Out): Promise<number> {
  if (o.distributed) {
    if (o.input !== '-') await checkInputFile(o.input, '--input');
    const { runAsRank } = await import('../train/distributed.js');
    const { predictShardedOn } = await import('./predict-sharded.js');
    return runAsRank(io, (dist, rankIo) => predictShardedOn(o, rankIo, dist));
  }
  const quiet = !!o.quiet;
  const reports = new Reporter(jobEvents(io), quiet);
  if (o.zeroBased && o.inputFormat !== 'libsvm') throw new UsageError('--zero-based applies to --input-format libsvm only');
  const fromStdin = o.input === '-';
  if (!fromStdin) await checkInputFile(o.input, '--input');
  await checkInputFile(o.model, '--model');
  const net = await Network.load(o.model, { maxMemory: o.maxMemory, workers: o.workers });
  const outputs = net.config.layers.at(-1)!.size;
  const sel = selection(o, net);
  const dense = o.mode === 'sampled' ? denseSampledWarning(net.config, o.model) : null;
  if (dense) io.err(`sublinear: warning: ${dense}\n`);
  const format = o.format ?? (net.labelNames ? 'jsonl' : 'xc');
  if (o.explain !== undefined && format !== 'jsonl') throw new UsageError('option --explain prints explanations in --format jsonl');
  const { data, texts } = await readInput(o, net, reports);
  const inputName = fromStdin ? '<stdin>' : o.input;
  if (data.features > net.inputFeatures) throw new Error(`${inputName} has ${data.features} features but the network's inputDim is ${net.inputFeatures}`);
  const transform = inputTransformNote(net.inputScale, net.inputLog);
  if (transform && !quiet) io.err(`${transform}\n`);
  const { bar, onProgress } = pointsProgress(quiet, 'predicting');
  let p: Predictions;
  let explanations: LabelExplanation[][] | undefined;
  const opts: PredictOptions = { k: sel.k, mode: o.mode ?? 'auto', workers: o.workers, candidates: o.candidates, onProgress,
    onWarning: predictWarnings(net.config, (w) => io.err(`sublinear: warning: ${w}\n`)), ...(sel.threshold !== undefined ? { threshold: sel.threshold } : {}) };
  try {
    if (o.explain !== undefined) ({ predictions: p, explanations } = await net.explain(data, { ...opts, top: o.explain }));
    else p = await net.predict(data, opts);
  } finally {
    bar?.done();
  }
  const v = net.textVectorizer;
  await writePredictions(p, format, outputs, io, {
    names: net.labelNames, threshold: sel.softThreshold, probabilities: sel.threshold !== undefined, explanations,
    ...(v && texts ? { tokens: (i: number, features: number[]) => featureTokens(v, features, texts[i]) } : {}),
  });
  return 0;
}

/**
 * What --k and --threshold select: a calibrated model's threshold is of its probabilities (predict()
 * selects among each point's shortlist, `threshold`); a model without calibration compares its softmax
 * scores (`softThreshold`), which sum to 1: no more than floor(1/t) labels reach t (one more for rounding).
 */
function selection(o: PredictCliOptions, net: Network): { k: number; threshold?: number | 'model'; softThreshold?: number } {
  const cal = net.calibration, outputs = net.config.layers.at(-1)!.size;
  if (o.threshold === 'model' && !cal) throw new UsageError(`option --threshold model needs a calibrated model, and ${o.model} has none (train with held-out validation, the default, to fit one)`);
  if (o.threshold === undefined) return { k: predictK({ k: o.k }, outputs) };
  if (cal) return { k: o.k !== undefined ? predictK({ k: o.k }, outputs) : Math.min(cal.shortlist, outputs), threshold: o.threshold };
  const t = o.threshold as number;
  return { k: predictK({ k: o.k, threshold: t }, outputs), softThreshold: t };
}

/** The input points (from a file, or standard input spooled to one), with their texts for a text model. */
async function readInput(o: PredictCliOptions, net: Network, reports: Reporter): Promise<{ data: SparseDataset; texts?: readonly string[] }> {
  const fromStdin = o.input === '-';
  let spool: string | undefined;
  try {
    // Standard input is spooled to a temporary file: the readers stream files (and say which line is wrong).
    if (fromStdin) spool = await spoolStdin();
    const inputFormat = o.inputFormat ?? (net.textVectorizer ? 'text' : 'xc');
    return await (inputFormat === 'text'
      ? loadTextPoints(net, spool ?? o.input, fromStdin ? '<stdin>' : o.input, false, reports, o.maxMemory)
      : loadData(spool ?? o.input, inputFormat, fromStdin ? 'standard input' : 'input', reports, Math.max(0, memoryLimitBytes(o.maxMemory) - net.memoryBytes()), o.zeroBased)
        .then((data) => ({ data })))
      .catch((e: unknown) => {
        throw spool && e instanceof Error ? new Error(e.message.replaceAll(spool, '<stdin>')) : e;
      });
  } finally {
    if (spool) await rm(dirname(spool), { recursive: true, force: true });
  }
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
