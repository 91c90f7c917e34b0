// Data for the baseline measurements: synthetic train/test splits from datasets/synth.ts at a chosen
// label count, and a row-range slice of a CSR dataset.

import type { SparseDataset } from '../../datasets/csr.js';
import { SHAPES, synthesize, type ShapeName, type SynthShape } from '../../datasets/synth.js';

/** Rows [from, to) of `ds` as a new dataset (copied, plain ArrayBuffers). */
export function sliceRows(ds: SparseDataset, from: number, to: number): SparseDataset {
  const f0 = ds.offsets[from]!, f1 = ds.offsets[to]!, l0 = ds.labelOffsets[from]!, l1 = ds.labelOffsets[to]!;
  return {
    points: to - from, features: ds.features, labels: ds.labels,
    offsets: ds.offsets.slice(from, to + 1).map((v) => v - f0),
    indices: ds.indices.slice(f0, f1),
    values: ds.values.slice(f0, f1),
    labelOffsets: ds.labelOffsets.slice(from, to + 1).map((v) => v - l0),
    labelIndices: ds.labelIndices.slice(l0, l1),
  };
}

/**
 * A synthetic train/test split from one generator stream (test = the points after train), at a named
 * shape with optional overrides (e.g. a smaller label count at the Amazon-670K feature dimension).
 */
export function syntheticSplit(
  shape: ShapeName, train: number, test: number, seed: number, overrides: Partial<SynthShape> = {},
): { train: SparseDataset; test: SparseDataset } {
  const all = synthesize({ shape: { ...SHAPES[shape], ...overrides }, points: train + test, seed });
  return { train: sliceRows(all, 0, train), test: sliceRows(all, train, train + test) };
}
