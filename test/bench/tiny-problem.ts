import type { SparseDataset } from '../../src/datasets/csr.js';
import { Xoshiro128 } from '../../src/util/rng.js';

/** A learnable tiny problem: each label owns 3 features; a point shows its labels' features plus noise. */
export function tinyProblem(points: number, seed: number): SparseDataset {
  const F = 40, L = 8;
  const rng = new Xoshiro128(seed);
  const offsets = new Uint32Array(points + 1), labelOffsets = new Uint32Array(points + 1);
  const idx: number[] = [], lab: number[] = [];
  for (let i = 0; i < points; i++) {
    const labs = new Set<number>([rng.below(L)]);
    if (rng.nextFloat() < 0.3) labs.add(rng.below(L));
    const feats = new Set<number>();
    for (const l of labs) for (let j = 0; j < 3; j++) feats.add(l * 3 + j);
    feats.add(24 + rng.below(16));
    idx.push(...[...feats].sort((a, b) => a - b));
    lab.push(...[...labs].sort((a, b) => a - b));
    offsets[i + 1] = idx.length;
    labelOffsets[i + 1] = lab.length;
  }
  return {
    points, features: F, labels: L, offsets, indices: Uint32Array.from(idx),
    values: Float32Array.from(idx, () => 0.5 + rng.nextFloat()), labelOffsets, labelIndices: Uint32Array.from(lab),
  };
}
