// Checks that a dataset fits a network before any kernel sees it (sizes that do not match the data
// are the most common configuration mistake).
import type { SparseDataset } from '../datasets/csr.js';
import type { ResolvedNetworkConfig } from './config.js';

export function checkDataset(d: SparseDataset, c: ResolvedNetworkConfig, what: string, needLabels = true): void {
  if (!d || !(d.offsets instanceof Uint32Array) || !(d.indices instanceof Uint32Array) || !(d.values instanceof Float32Array)) {
    throw new Error(`Expected a SparseDataset (offsets, indices, values, labelOffsets, labelIndices) for ${what}`);
  }
  if (d.features > c.inputDim) {
    throw new Error(`The ${what} has ${d.features} features but the network's inputDim is ${c.inputDim}`);
  }
  const outputs = c.layers.at(-1)!.size;
  if (needLabels && d.labels > outputs) {
    throw new Error(`The ${what} has ${d.labels} labels but the network's last layer has ${outputs} neurons`);
  }
  if (d.offsets.length !== d.points + 1 || d.labelOffsets.length !== d.points + 1) {
    throw new Error(`The ${what} is malformed: offsets must have points + 1 = ${d.points + 1} entries`);
  }
  // Training skips points without labels: data with none at all would "train" nothing and succeed.
  if (needLabels && d.labelOffsets[d.points] === 0) {
    throw new Error(`The ${what} has no labels (${d.points} points, none with a label): there is nothing to train on`);
  }
}
