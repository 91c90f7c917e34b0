// `sublinear predict`: a model's top labels for each point of a data file or of standard input.
import { createWriteStream } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { pipeline } from 'node:stream/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import type { SparseDataset } from '../datasets/index.js';
import { Network } from '../network/network.js';
import { inputTransformNote } from '../network/input-scale.js';
import { UsageError } from './args.js';
import { checkInputFile } from '../job/preflight.js';
import { writePredictions } from './predict-output.js';
import { jobEvents, pointsProgress, type InputFormat, type Out } from './engine.js';
import { denseSampledWarning, predictWarnings } from '../job/data-checks.js';
import { Reporter } from '../job/events.js';
import { loadData, loadTextInput, memoryLimitBytes } from '../job/data-loading.js';
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
  const k = predictK(o, outputs);
  const dense = o.mode === 'sampled' ? denseSampledWarning(net.config, o.model) : null;
  if (dense) io.err(`sublinear: warning: ${dense}\n`);
  let spool: string | undefined;
  let data: SparseDataset;
  try {
    // Standard input is spooled to a temporary file: the readers stream files (and say which line is wrong).
    if (fromStdin) spool = await spoolStdin();
    const inputFormat = o.inputFormat ?? (net.textVectorizer ? 'text' : 'xc');
    data = await (inputFormat === 'text'
      ? loadTextInput(net, spool ?? o.input, fromStdin ? '<stdin>' : o.input, false, reports, o.maxMemory)
      : loadData(spool ?? o.input, inputFormat, fromStdin ? 'standard input' : 'input', reports, Math.max(0, memoryLimitBytes(o.maxMemory) - net.memoryBytes()), o.zeroBased))
      .catch((e: unknown) => {
        throw spool && e instanceof Error ? new Error(e.message.replaceAll(spool, '<stdin>')) : e;
      });
  } finally {
    if (spool) await rm(dirname(spool), { recursive: true, force: true });
  }
  const inputName = fromStdin ? '<stdin>' : o.input;
  if (data.features > net.config.inputDim) throw new Error(`${inputName} has ${data.features} features but the network's inputDim is ${net.config.inputDim}`);
  const transform = inputTransformNote(net.inputScale, net.inputLog);
  if (transform && !quiet) io.err(`${transform}\n`);
  const { bar, onProgress } = pointsProgress(quiet, 'predicting');
  let p;
  try {
    p = await net.predict(data, {
      k, mode: o.mode ?? 'auto', workers: o.workers, candidates: o.candidates, onProgress, onWarning: predictWarnings(net.config, (w) => io.err(`sublinear: warning: ${w}\n`)),
    });
  } finally {
    bar?.done();
  }
  await writePredictions(p, o.format ?? (net.labelNames ? 'jsonl' : 'xc'), outputs, io, net.labelNames, o.threshold);
  return 0;
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
