// Checks of data against what a job does with it: test data P@k can be measured on, and ids that fit the network.
import type { SparseDataset } from '../datasets/csr.js';
import type { NetworkConfig } from '../network/config.js';
import { sampledModeNote } from '../network/network.js';

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

/** The warning for sampled inference on a model whose output layer is dense (every output is scored anyway), or null. */
export function denseSampledWarning(config: NetworkConfig, what: string): string | null {
  return config.layers.at(-1)!.sampling
    ? null
    : `--mode sampled: the output layer of ${what} is dense (not LSH-sampled), so every output is scored, as in --mode exact`;
}

/**
 * The onWarning of a job's predict and evaluate calls (PredictOptions.onWarning): their warnings through
 * `warn`, except the library's note on sampled mode with a dense output layer, which the job has said in its
 * own words before the work (denseSampledWarning).
 */
export function predictWarnings(config: NetworkConfig, warn: (message: string) => void): (message: string) => void {
  const said = sampledModeNote(config);
  return (m) => {
    if (m !== said) warn(m);
  };
}
