// Derived datasets of bench:accuracy, made deterministically from the real files:
// - the tail of a set: its n most frequent labels (counted over train and test together, as the tail of
//   debian-deps was first defined) removed from train and test, the remaining labels renumbered in id
//   order, and the points left without labels dropped;
// - the frequent labels of a set: only the labels on at least m training points kept (renumbered in id order,
//   label-less points dropped), which cuts debian-deps to about 10^4 labels (m = 3);
// - a seeded subsample of a training set (the test set stays whole), for the small-data rows.
import { Xoshiro128, shuffleInPlace } from '../src/util/rng.js';
import { CsrBuilder } from '../src/datasets/csr-builder.js';
import { subset, type SparseDataset } from '../src/datasets/index.js';

/** The `n` most frequent labels over the sets (ties: the lower id first), most frequent first. */
export function mostFrequentLabels(sets: readonly SparseDataset[], n: number): number[] {
  const labels = Math.max(...sets.map((d) => d.labels));
  const freq = new Uint32Array(labels);
  for (const d of sets) for (let k = 0; k < d.labelOffsets[d.points]!; k++) freq[d.labelIndices[k]!]!++;
  const ids = Array.from({ length: labels }, (_, i) => i).filter((l) => freq[l]! > 0);
  ids.sort((a, b) => freq[b]! - freq[a]! || a - b);
  return ids.slice(0, n);
}

/** `d` without the labels `drop` marks, labels renumbered through `newId`, label-less points dropped. */
function withoutLabels(d: SparseDataset, drop: Uint8Array, newId: Uint32Array, labels: number): SparseDataset {
  const b = new CsrBuilder(d.points, d.offsets[d.points]!, d.labelOffsets[d.points]!);
  const kept: number[] = [];
  for (let i = 0; i < d.points; i++) {
    kept.length = 0;
    for (let k = d.labelOffsets[i]!; k < d.labelOffsets[i + 1]!; k++) {
      const l = d.labelIndices[k]!;
      if (!drop[l]) kept.push(newId[l]!);
    }
    if (!kept.length) continue;
    b.addRow(kept, 0, kept.length, d.indices, d.values, d.offsets[i]!, d.offsets[i + 1]!);
  }
  return b.toDataset(d.features, labels);
}

/**
 * The tail of a train/test pair: the `n` most frequent labels of train and test together removed from both sets, the
 * other labels renumbered (keeping their order: label l becomes l minus the removed ids below it), and
 * the points left without labels dropped. Deterministic.
 */
export function tailSplit(train: SparseDataset, test: SparseDataset, n: number): { train: SparseDataset; test: SparseDataset; removed: number[] } {
  if (!(Number.isInteger(n) && n >= 0)) throw new Error(`Expected non-negative integer for n but received ${n}`);
  if (train.labels !== test.labels) throw new Error(`Expected train and test with the same label count but received ${train.labels} and ${test.labels}`);
  const removed = mostFrequentLabels([train, test], n);
  const drop = new Uint8Array(train.labels);
  for (const l of removed) drop[l] = 1;
  const newId = new Uint32Array(train.labels);
  let next = 0;
  for (let l = 0; l < train.labels; l++) if (!drop[l]) newId[l] = next++;
  return { train: withoutLabels(train, drop, newId, next), test: withoutLabels(test, drop, newId, next), removed };
}

/**
 * The labels on at least `minCount` training points of a train/test pair: the others removed from both sets,
 * the kept ones renumbered in id order, the points left without labels dropped. Deterministic.
 */
export function frequentSplit(train: SparseDataset, test: SparseDataset, minCount: number): { train: SparseDataset; test: SparseDataset; kept: number } {
  if (!(Number.isInteger(minCount) && minCount >= 1)) throw new Error(`Expected positive integer for minCount but received ${minCount}`);
  if (train.labels !== test.labels) throw new Error(`Expected train and test with the same label count but received ${train.labels} and ${test.labels}`);
  const freq = new Uint32Array(train.labels);
  for (let k = 0; k < train.labelOffsets[train.points]!; k++) freq[train.labelIndices[k]!]!++;
  const drop = new Uint8Array(train.labels);
  const newId = new Uint32Array(train.labels);
  let next = 0;
  for (let l = 0; l < train.labels; l++) {
    if (freq[l]! >= minCount) newId[l] = next++;
    else drop[l] = 1;
  }
  return { train: withoutLabels(train, drop, newId, next), test: withoutLabels(test, drop, newId, next), kept: next };
}

/**
 * `n` points of `d` chosen by a seeded shuffle (xoshiro128** from `seed`), kept in their original order.
 * The whole set when n >= d.points.
 */
export function subsamplePoints(d: SparseDataset, n: number, seed: number): SparseDataset {
  if (!(Number.isInteger(n) && n > 0)) throw new Error(`Expected positive integer for n but received ${n}`);
  if (n >= d.points) return d;
  const order = Uint32Array.from({ length: d.points }, (_, i) => i);
  shuffleInPlace(order, new Xoshiro128(seed));
  return subset(d, order.subarray(0, n).sort());
}
