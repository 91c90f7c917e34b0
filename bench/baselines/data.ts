// Data for the baseline measurements: synthetic train/test splits from src/datasets/synth.ts at a chosen
// label count.

import type { SparseDataset } from '../../src/datasets/csr.js';
import { SHAPES, syntheticSplit as splitSynthetic, type ShapeName, type SynthShape } from '../../src/datasets/synth.js';

/**
 * A synthetic train/test split from one generator stream at a named shape with optional overrides (e.g. a
 * smaller label count at the Amazon-670K feature dimension); on SharedArrayBuffers (src/datasets/synth.ts).
 */
export function syntheticSplit(
  shape: ShapeName, train: number, test: number, seed: number, overrides: Partial<SynthShape> = {},
): { train: SparseDataset; test: SparseDataset } {
  return splitSynthetic({ ...SHAPES[shape], ...overrides }, train, test, seed);
}
