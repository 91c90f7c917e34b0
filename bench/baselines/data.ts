// Data for the baseline measurements: synthetic train/test splits from datasets/synth.ts at a chosen
// label count.

import type { SparseDataset } from '../../datasets/csr.js';
import { SHAPES, syntheticSplit as splitSynthetic, type ShapeName, type SynthShape } from '../../datasets/synth.js';

/**
 * A synthetic train/test split from one generator stream at a named shape with optional overrides (e.g. a
 * smaller label count at the Amazon-670K feature dimension); on SharedArrayBuffers (datasets/synth.ts).
 */
export function syntheticSplit(
  shape: ShapeName, train: number, test: number, seed: number, overrides: Partial<SynthShape> = {},
): { train: SparseDataset; test: SparseDataset } {
  return splitSynthetic({ ...SHAPES[shape], ...overrides }, train, test, seed);
}
