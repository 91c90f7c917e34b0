// Derived datasets of bench:accuracy, made deterministically from the real files:
// - the tail of a set: its n most frequent labels (counted over train and test together, as the tail of
//   debian-deps was first defined) removed from train and test, the remaining labels renumbered in id
//   order, and the points left without labels dropped;
// - the frequent labels of a set: only the labels on at least m training points kept (renumbered in id order,
//   label-less points dropped), which cuts debian-deps to about 10^4 labels (m = 3);
// - a seeded subsample of a training set (the test set stays whole), for the small-data rows;
// - the term counts behind the Debian sets' tf-idf weights, for the small bag-of-words rows.
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

/**
 * The term counts behind tf-idf rows weighted as the Debian sets were built (w = ln(1 + tf) x ln(N / df),
 * N and df counted over `train`, each row then L2-normalised): `sets` with every value replaced by its
 * count tf. Per row, w / idf = ln(1 + tf) / norm; the norm is the one that makes the row's smallest
 * entry a count of 1, 2 or 3 and every count closest to an integer (on the training files of debian-tags and
 * debian-deps all but 97 of 1,149,303 and 54 of 2,117,546 entries come back within 0.02 of an integer), then
 * rounded. An entry without idf (its feature on every training row, or on none) counts 1, and so does the
 * only informative entry of a row. Deterministic; the arrays other than values are shared.
 */
export function termCountsFromTfidf(train: SparseDataset, sets: readonly SparseDataset[]): SparseDataset[] {
  const df = new Uint32Array(train.features);
  for (let e = 0; e < train.offsets[train.points]!; e++) df[train.indices[e]!]!++;
  const idf = new Float64Array(train.features);
  for (let j = 0; j < train.features; j++) idf[j] = df[j]! > 0 ? Math.log(train.points / df[j]!) : 0;
  return sets.map((d) => {
    const values = new Float32Array(d.values.length);
    const r: number[] = [];
    for (let i = 0; i < d.points; i++) {
      const a = d.offsets[i]!, b = d.offsets[i + 1]!;
      r.length = 0;
      let min = Infinity;
      for (let e = a; e < b; e++) {
        const f = idf[d.indices[e]!]!;
        const x = f > 0 && d.values[e]! > 0 ? d.values[e]! / f : NaN;
        r.push(x);
        if (x < min) min = x;
      }
      let best = 1, bestErr = Infinity;
      for (const smallest of [1, 2, 3]) {
        const norm = Math.log(1 + smallest) / min;
        let err = 0;
        for (const x of r) if (x === x) err += Math.abs(Math.expm1(x * norm) - Math.round(Math.expm1(x * norm)));
        if (err < bestErr - 1e-9) [best, bestErr] = [smallest, err];
      }
      const norm = Math.log(1 + best) / min;
      for (let e = a; e < b; e++) {
        const x = r[e - a]!;
        values[e] = x === x && Number.isFinite(norm) ? Math.max(1, Math.round(Math.expm1(x * norm))) : 1;
      }
    }
    return { ...d, values };
  });
}
