// `sublinear train | eval | predict | demo`: the engine's commands. Argument parsing lives in
// src/cli/main.ts's command table (their flags are declared in engine-commands.ts); the run functions, one
// file each (train.ts, eval.ts, predict.ts, demo.ts), receive typed options. This file holds what they
// share: the output streams, the input formats, the checks of data against a network and the metric line.
import type { SparseDataset } from '../datasets/index.js';
import type { NetworkConfig } from '../network/config.js';
import type { Metrics } from '../network/metrics.js';
import { Progress } from '../util/progress.js';

export type Out = { out: (s: string) => void; err: (s: string) => void; drain?: () => Promise<void> };

export type InputFormat = 'xc' | 'libsvm' | 'text';

/** P@k, nDCG@k, PSP@k for every k of `ks`, on one line. */
export function metricLine(m: Metrics, ks: readonly number[] = [1, 3, 5]): string {
  const f = (k: string) => (m[k as keyof Metrics] as number | undefined)?.toFixed(4) ?? '-';
  return ['p', 'ndcg', 'psp'].flatMap((name) => ks.map((k) => `${name === 'p' ? 'P' : name === 'ndcg' ? 'nDCG' : 'PSP'}@${k} ${f(`${name}${k}`)}`)).join('  ');
}

/** `--mode sampled` on a model whose output layer is dense: said, since every output is scored anyway. */
export function warnDenseSampled(config: NetworkConfig, what: string, io: Out): void {
  if (!config.layers.at(-1)!.sampling) {
    io.err(`sublinear: warning: --mode sampled: the output layer of ${what} is dense (not LSH-sampled), so every output is scored, as in --mode exact\n`);
  }
}

/** Refuses test data that P@k cannot be measured on (no points, or no labels at all), naming the file. */
export function checkEvaluable(d: SparseDataset, path: string): void {
  if (d.points === 0) throw new Error(`${path}: no points to evaluate`);
  if (d.labelOffsets[d.points] === 0) throw new Error(`${path}: no labels to evaluate against (${d.points} points, none with a label)`);
}

/** Refuses, before any training, a data file whose ids do not fit the network (naming the file). */
export function checkFits(d: SparseDataset, path: string, inputDim: number, outputs: number): void {
  if (d.features > inputDim) throw new Error(`${path} has ${d.features} features but the network's inputDim is ${inputDim}`);
  if (d.labels > outputs) throw new Error(`${path} has ${d.labels} labels but the network's last layer has ${outputs} neurons`);
}

/** A predict/eval progress display over the points (quiet: none). */
export function pointsProgress(quiet: boolean, label: string): { bar: Progress | null; onProgress?: (done: number, total: number) => void } {
  const bar = quiet ? null : new Progress({ label, unit: 'points' });
  return { bar, onProgress: bar ? (done, total) => bar.update(done, total) : undefined };
}
