// `sublinear predict`: a model's top labels for each point of a data file or of standard input.
import { createWriteStream } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { pipeline } from 'node:stream/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import type { SparseDataset } from '../../datasets/index.js';
import { Network } from '../network/network.js';
import { UsageError } from './args.js';
import { checkInputFile } from './preflight.js';
import { writePredictions } from './predict-output.js';
import { pointsProgress, warnDenseSampled, type InputFormat, type Out } from './engine.js';
import { loadData, loadTextInput, memoryLimitBytes } from './data-loading.js';

export interface PredictCliOptions {
  model: string;
  /** A data file, or '-' for standard input. */
  input: string;
  /** Format of the input. Default: text for a model trained on text, else xc. */
  inputFormat?: InputFormat;
  /** LIBSVM feature ids start at 0 (files are 1-based by default). Default false. */
  zeroBased?: boolean;
  /**
   * What is printed: 'xc' (a sparse score matrix of label ids, with a header) or 'jsonl'. Default: jsonl
   * (with label names) for a model with label names, else xc.
   */
  format?: 'xc' | 'jsonl';
  /** Labels per point (at most). Default 5; with `threshold`, every label above it. */
  k?: number;
  /**
   * Print only the labels whose score is at least this, in (0, 1] (napkinXC's threshold prediction). Scores
   * are softmax probabilities, which sum to 1, so at most 1/t labels pass. Default none (top-k).
   */
  threshold?: number;
  workers?: number;
  mode?: 'exact' | 'sampled';
  candidates?: number;
  quiet?: boolean;
  /** Refuse a model or data needing more bytes (default: 90% of the machine's memory). */
  maxMemory?: number;
  /**
   * Predict label-sharded as one rank of an MPI job: `model` is the --checkpoint directory of
   * `train --shard-labels`; rank 0 writes (src/cli/predict-sharded.ts). Default false.
   */
  distributed?: boolean;
}

export async function predictCommand(o: PredictCliOptions, io: Out): Promise<number> {
  if (o.distributed) {
    if (o.input !== '-') await checkInputFile(o.input, '--input');
    const { runAsRank } = await import('../train/distributed.js');
    const { predictShardedOn } = await import('./predict-sharded.js');
    return runAsRank(io, (dist, rankIo) => predictShardedOn(o, rankIo, dist));
  }
  const quiet = !!o.quiet;
  if (o.zeroBased && o.inputFormat !== 'libsvm') throw new UsageError('--zero-based applies to --input-format libsvm only');
  const fromStdin = o.input === '-';
  if (!fromStdin) await checkInputFile(o.input, '--input');
  await checkInputFile(o.model, '--model');
  const net = await Network.load(o.model, { maxMemory: o.maxMemory, workers: o.workers });
  const outputs = net.config.layers.at(-1)!.size;
  if (o.threshold !== undefined && !(o.threshold > 0 && o.threshold <= 1)) throw new UsageError(`option --threshold expects a score in (0, 1] but received ${o.threshold}`);
  // Softmax scores sum to 1: no more than floor(1/t) labels reach t (one more for rounding).
  const k = o.k ?? (o.threshold !== undefined ? Math.min(outputs, Math.floor(1 / o.threshold) + 1) : 5);
  if (o.mode === 'sampled') warnDenseSampled(net.config, o.model, io);
  if (k > outputs) throw new UsageError(`option --k ${k} exceeds the model's ${outputs} labels`);
  let spool: string | undefined;
  let data: SparseDataset;
  try {
    // Standard input is spooled to a temporary file: the readers stream files (and say which line is wrong).
    if (fromStdin) spool = await spoolStdin();
    const inputFormat = o.inputFormat ?? (net.textVectorizer ? 'text' : 'xc');
    data = await (inputFormat === 'text'
      ? loadTextInput(net, spool ?? o.input, fromStdin ? '<stdin>' : o.input, false, io, quiet, o.maxMemory)
      : loadData(spool ?? o.input, inputFormat, fromStdin ? 'standard input' : 'input', quiet, Math.max(0, memoryLimitBytes(o.maxMemory) - net.memoryBytes()), o.zeroBased))
      .catch((e: unknown) => {
        throw spool && e instanceof Error ? new Error(e.message.replaceAll(spool, '<stdin>')) : e;
      });
  } finally {
    if (spool) await rm(dirname(spool), { recursive: true, force: true });
  }
  const inputName = fromStdin ? '<stdin>' : o.input;
  if (data.features > net.config.inputDim) throw new Error(`${inputName} has ${data.features} features but the network's inputDim is ${net.config.inputDim}`);
  if (net.inputScale && !quiet) io.err(`applying the model's input scaling (each feature divided by its largest |value| in the training data)\n`);
  const { bar, onProgress } = pointsProgress(quiet, 'predicting');
  let p;
  try {
    p = await net.predict(data, { k, mode: o.mode ?? 'exact', workers: o.workers, candidates: o.candidates, onProgress });
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
