import { describe, expect, it } from 'vitest';
import { frequentSplit, mostFrequentLabels, subsamplePoints, tailSplit, termCountsFromTfidf } from '../../bench/accuracy-data.js';
import { CsrBuilder } from '../../src/datasets/csr-builder.js';
import { synthesize } from '../../src/datasets/synth.js';
import type { SparseDataset } from '../../src/datasets/csr.js';

/** A dataset from rows of [labels, features] (feature value = 1 + feature id / 10). */
function rows(labels: number, list: [number[], number[]][]): SparseDataset {
  const b = new CsrBuilder(list.length, 16, 16);
  for (const [ls, fs] of list) b.addRow(ls, 0, ls.length, fs, fs.map((f) => 1 + f / 10), 0, fs.length);
  return b.toDataset(10, labels);
}

const labelsOf = (d: SparseDataset) => Array.from({ length: d.points }, (_, i) => Array.from(d.labelIndices.subarray(d.labelOffsets[i]!, d.labelOffsets[i + 1]!)));
const featuresOf = (d: SparseDataset) => Array.from({ length: d.points }, (_, i) => Array.from(d.indices.subarray(d.offsets[i]!, d.offsets[i + 1]!)));

describe('tailSplit', () => {
  // Frequencies in train: label 3 x4, 1 x3, 0 and 4 x2, 2 x1, 5 x0; in train and test together: 3 x6, 1 x4,
  // 0 and 4 x3 (tie: 0 first), 2 x2, 5 x1.
  const train = rows(6, [
    [[1, 3], [0]], [[3], [1, 2]], [[0, 1, 3], [3]], [[3, 4], [4]], [[1, 2], [5]], [[0, 4], [6, 7]],
  ]);
  const test = rows(6, [[[3], [1]], [[2, 3, 5], [2]], [[0, 1], [3]], [[4], [9]]]);

  it('orders labels by frequency over the given sets, ties by id', () => {
    expect(mostFrequentLabels([train], 6)).toEqual([3, 1, 0, 4, 2]); // label 5 never occurs in train
    expect(mostFrequentLabels([train, test], 6)).toEqual([3, 1, 0, 4, 2, 5]);
    expect(mostFrequentLabels([test], 2)).toEqual([3, 0]);
  });

  it('removes the n most frequent labels from both sets, renumbers the rest, drops label-less points', () => {
    const t = tailSplit(train, test, 2); // removes 3 and 1; 0->0, 2->1, 4->2, 5->3
    expect(t.removed).toEqual([3, 1]);
    expect(t.train.labels).toBe(4);
    expect(t.test.labels).toBe(4);
    expect(labelsOf(t.train)).toEqual([[0], [2], [1], [0, 2]]);
    expect(featuresOf(t.train)).toEqual([[3], [4], [5], [6, 7]]); // points 0 and 1 had only removed labels
    expect(Array.from(t.train.values)).toEqual([1.3, 1.4, 1.5, 1.6, 1.7].map(Math.fround));
    expect(labelsOf(t.test)).toEqual([[1, 3], [0], [2]]);
    expect(featuresOf(t.test)).toEqual([[2], [3], [9]]);
  });

  it('is the identity for n = 0 and checks its arguments', () => {
    const t = tailSplit(train, test, 0);
    expect(labelsOf(t.train)).toEqual(labelsOf(train));
    expect(() => tailSplit(train, test, -1)).toThrow('Expected non-negative integer for n but received -1');
    expect(() => tailSplit(train, rows(7, []), 1)).toThrow('Expected train and test with the same label count but received 6 and 7');
  });
});

describe('frequentSplit', () => {
  // Training counts: label 3 x4, 1 x3, 0 and 4 x2, 2 x1, 5 x0.
  const train = rows(6, [
    [[1, 3], [0]], [[3], [1, 2]], [[0, 1, 3], [3]], [[3, 4], [4]], [[1, 2], [5]], [[0, 4], [6, 7]],
  ]);
  const test = rows(6, [[[3], [1]], [[2, 5], [2]], [[0, 1], [3]], [[4], [9]]]);

  it('keeps the labels on at least m training points, renumbered in id order; drops label-less points', () => {
    const t = frequentSplit(train, test, 3); // keeps 1 and 3: 1->0, 3->1
    expect(t.kept).toBe(2);
    expect(t.train.labels).toBe(2);
    expect(labelsOf(t.train)).toEqual([[0, 1], [1], [0, 1], [1], [0]]);
    expect(featuresOf(t.train)).toEqual([[0], [1, 2], [3], [4], [5]]); // the last point had only 0 and 4
    expect(labelsOf(t.test)).toEqual([[1], [0]]);
    expect(featuresOf(t.test)).toEqual([[1], [3]]);
  });

  it('keeps every label seen in training for m = 1, and checks its arguments', () => {
    const t = frequentSplit(train, test, 1); // drops 5 only
    expect(t.kept).toBe(5);
    expect(labelsOf(t.train)).toEqual(labelsOf(train));
    expect(labelsOf(t.test)).toEqual([[3], [2], [0, 1], [4]]);
    expect(() => frequentSplit(train, test, 0)).toThrow('Expected positive integer for minCount but received 0');
    expect(() => frequentSplit(train, rows(7, []), 1)).toThrow('Expected train and test with the same label count but received 6 and 7');
  });
});

describe('subsamplePoints', () => {
  const d = synthesize({ shape: 'tiny', points: 200, seed: 4 });

  it('takes n distinct points in file order, the same for the same seed, others for another seed', () => {
    const a = subsamplePoints(d, 50, 7), b = subsamplePoints(d, 50, 7), c = subsamplePoints(d, 50, 8);
    expect(a.points).toBe(50);
    expect(a).toEqual(b);
    expect(labelsOf(a)).not.toEqual(labelsOf(c));
    // Each chosen row is a row of d, in increasing row order.
    const key = (x: SparseDataset, i: number) => `${x.labelIndices.subarray(x.labelOffsets[i]!, x.labelOffsets[i + 1]!)}|${x.indices.subarray(x.offsets[i]!, x.offsets[i + 1]!)}`;
    const where = new Map(Array.from({ length: d.points }, (_, i) => [key(d, i), i] as const));
    const picked = Array.from({ length: a.points }, (_, i) => where.get(key(a, i)));
    expect(picked.every((r) => r !== undefined)).toBe(true);
    expect(picked).toEqual([...picked].sort((x, y) => x! - y!));
    expect(new Set(picked).size).toBe(50);
  });

  it('returns the whole set when n covers it, and checks n', () => {
    expect(subsamplePoints(d, 500, 7)).toBe(d);
    expect(() => subsamplePoints(d, 0, 7)).toThrow('Expected positive integer for n but received 0');
  });
});

describe('termCountsFromTfidf', () => {
  // Counts per training row; the tf-idf rows are built from them as the Debian sets were (ln(1 + tf) x
  // ln(N / df), L2-normalised): feature 3 is on every training row (idf 0, weight 0).
  const counts: [number[], number[]][] = [[[0, 1, 3], [1, 4, 1]], [[1, 2, 3], [2, 3, 1]], [[0, 2, 3], [1, 1, 7]], [[1, 2, 3], [1, 5, 2]]];
  const testCounts: [number[], number[]][] = [[[0, 1, 4], [3, 1, 2]]];
  const df = [2, 3, 3, 4];
  const tfidf = (list: [number[], number[]][]): SparseDataset => {
    const b = new CsrBuilder(list.length, 16, 4);
    for (const [fs, tf] of list) {
      const w = fs.map((f, i) => Math.log(1 + tf[i]!) * (f < 4 ? Math.log(4 / df[f]!) : 1));
      const n = Math.hypot(...w);
      b.addRow([0], 0, 1, fs, w.map((x) => x / n), 0, fs.length);
    }
    return b.toDataset(5, 1);
  };

  it('recovers the counts, also of rows without a count of 1 (row 1: 2 and 3) and of test rows', () => {
    const train = tfidf(counts);
    const [tr, te] = termCountsFromTfidf(train, [train, tfidf(testCounts)]);
    // Feature 3 has no idf (on every training row) and feature 4 none at all (not in training): counted 1.
    expect(Array.from(tr!.values)).toEqual([1, 4, 1, 2, 3, 1, 1, 1, 1, 1, 5, 1]);
    expect(Array.from(te!.values)).toEqual([3, 1, 1]);
    expect(tr!.indices).toBe(train.indices);
    expect(tr!.values).not.toBe(train.values);
  });
});
