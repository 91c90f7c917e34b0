import { describe, expect, it } from 'vitest';
import { describe as stats } from '../../src/datasets/stats.js';
import type { SparseDataset } from '../../src/datasets/csr.js';

function dataset(rows: { labels: number[]; features: number[] }[], features: number, labels: number): SparseDataset {
  const offsets = [0], labelOffsets = [0], indices: number[] = [], labelIndices: number[] = [];
  for (const r of rows) {
    indices.push(...r.features);
    labelIndices.push(...r.labels);
    offsets.push(indices.length);
    labelOffsets.push(labelIndices.length);
  }
  return {
    points: rows.length, features, labels,
    offsets: Uint32Array.from(offsets), indices: Uint32Array.from(indices), values: new Float32Array(indices.length).fill(1),
    labelOffsets: Uint32Array.from(labelOffsets), labelIndices: Uint32Array.from(labelIndices),
  };
}

describe('describe (dataset statistics)', () => {
  it('counts sizes, averages, unused ids and label frequency quantiles', () => {
    // Label 0 on 5 points, label 1 on 3, label 2 on 1, labels 3 and 4 never; one point without labels.
    const d = dataset(
      [
        { labels: [0, 1], features: [0, 1, 2] },
        { labels: [0, 1], features: [1] },
        { labels: [0, 1, 2], features: [] },
        { labels: [0], features: [2, 3] },
        { labels: [0], features: [3] },
        { labels: [], features: [0] },
      ],
      6, 5,
    );
    expect(stats(d)).toEqual({
      points: 6, features: 6, labels: 5, nnz: 8, avgFeatures: 8 / 6, avgLabels: 9 / 6,
      labelOccurrences: 9, labelsSeen: 3, labelsNeverSeen: 2, featuresNeverSeen: 2,
      pointsWithoutLabels: 1, pointsWithoutFeatures: 1, maxLabelsPerPoint: 3, maxFeaturesPerPoint: 3,
      labelFrequency: { min: 1, median: 3, p90: 5, max: 5 },
      top10LabelShare: 1,
    });
  });

  it('handles an empty dataset', () => {
    const s = stats(dataset([], 3, 2));
    expect([s.avgFeatures, s.avgLabels, s.labelsNeverSeen, s.top10LabelShare]).toEqual([0, 0, 2, 0]);
    expect(s.labelFrequency).toEqual({ min: 0, median: 0, p90: 0, max: 0 });
  });

  it('does not allocate over huge declared dimensions (counts by sorting instead)', () => {
    const d = dataset([{ labels: [7, 4_000_000_000], features: [5, 4_000_000_000] }, { labels: [7], features: [5] }], 4_000_000_001, 4_000_000_001);
    const s = stats(d);
    expect(s.featuresNeverSeen).toBe(4_000_000_001 - 2);
    expect(s.labelsSeen).toBe(2);
    expect(s.labelFrequency).toEqual({ min: 1, median: 1, p90: 2, max: 2 });
    expect(s.top10LabelShare).toBe(1);
  });
});
