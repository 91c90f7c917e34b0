// Summary statistics of a dataset (what `sublinear data inspect` prints).
import type { SparseDataset } from './csr.js';

/** Frequencies (points per label) over the labels that occur at least once; nearest-rank quantiles. */
export interface LabelFrequencySummary {
  min: number;
  median: number;
  p90: number;
  max: number;
}

export interface DatasetStats {
  points: number;
  features: number;
  labels: number;
  /** Stored (feature, value) pairs. */
  nnz: number;
  /** nnz / points (0 for an empty dataset). */
  avgFeatures: number;
  /** Label entries / points (0 for an empty dataset). */
  avgLabels: number;
  /** Total label entries over all points. */
  labelOccurrences: number;
  /** Labels that occur in at least one point. */
  labelsSeen: number;
  /** Labels in [0, labels) that occur in no point. */
  labelsNeverSeen: number;
  /** Features in [0, features) that occur in no point. */
  featuresNeverSeen: number;
  pointsWithoutLabels: number;
  pointsWithoutFeatures: number;
  /** Largest number of labels on one point. */
  maxLabelsPerPoint: number;
  /** Largest number of features on one point. */
  maxFeaturesPerPoint: number;
  /** Points per label among seen labels (all 0 when no label occurs). */
  labelFrequency: LabelFrequencySummary;
  /** Share of all label occurrences taken by the 10 most frequent labels (0 when none occur). */
  top10LabelShare: number;
}

export function describe(d: SparseDataset): DatasetStats {
  const n = d.points;
  const nnz = d.offsets[n]!;
  const occ = d.labelOffsets[n]!;
  const seen = labelFrequencies(d.labelIndices.subarray(0, occ), d.labels); // ascending
  const featuresSeen = countDistinct(d.indices.subarray(0, nnz), d.features);

  let noLabels = 0, noFeatures = 0, maxL = 0, maxF = 0;
  for (let i = 0; i < n; i++) {
    const nl = d.labelOffsets[i + 1]! - d.labelOffsets[i]!;
    const nf = d.offsets[i + 1]! - d.offsets[i]!;
    if (nl === 0) noLabels++;
    if (nf === 0) noFeatures++;
    if (nl > maxL) maxL = nl;
    if (nf > maxF) maxF = nf;
  }

  const q = (p: number): number => (seen.length === 0 ? 0 : seen[Math.max(0, Math.ceil(p * seen.length) - 1)]!);
  let top10 = 0;
  for (let i = Math.max(0, seen.length - 10); i < seen.length; i++) top10 += seen[i]!;

  return {
    points: n,
    features: d.features,
    labels: d.labels,
    nnz,
    avgFeatures: n === 0 ? 0 : nnz / n,
    avgLabels: n === 0 ? 0 : occ / n,
    labelOccurrences: occ,
    labelsSeen: seen.length,
    labelsNeverSeen: d.labels - seen.length,
    featuresNeverSeen: d.features - featuresSeen,
    pointsWithoutLabels: noLabels,
    pointsWithoutFeatures: noFeatures,
    maxLabelsPerPoint: maxL,
    maxFeaturesPerPoint: maxF,
    labelFrequency: {
      min: seen.length === 0 ? 0 : seen[0]!,
      median: q(0.5),
      p90: q(0.9),
      max: seen.length === 0 ? 0 : seen[seen.length - 1]!,
    },
    top10LabelShare: occ === 0 ? 0 : top10 / occ,
  };
}

// A header may declare a dimension far larger than the data uses; then counting by sorting the entries
// (O(n log n) in what exists) beats an array over the whole dimension (which might not even fit).
const sparseDim = (dim: number, entries: number): boolean => dim > 4 * entries + 65536;

/** Occurrence counts of the ids that occur, ascending. */
function labelFrequencies(ids: Uint32Array, dim: number): Uint32Array {
  if (!sparseDim(dim, ids.length)) {
    const freq = new Uint32Array(dim);
    for (let i = 0; i < ids.length; i++) freq[ids[i]!]!++;
    return freq.filter((c) => c > 0).sort();
  }
  const sorted = ids.slice().sort();
  const out: number[] = [];
  for (let i = 0; i < sorted.length; ) {
    let j = i + 1;
    while (j < sorted.length && sorted[j] === sorted[i]) j++;
    out.push(j - i);
    i = j;
  }
  return Uint32Array.from(out).sort();
}

/** Number of distinct ids. */
function countDistinct(ids: Uint32Array, dim: number): number {
  if (!sparseDim(dim, ids.length)) {
    const mark = new Uint8Array(dim);
    let k = 0;
    for (let i = 0; i < ids.length; i++) {
      const f = ids[i]!;
      k += 1 - mark[f]!;
      mark[f] = 1;
    }
    return k;
  }
  const sorted = ids.slice().sort();
  let k = 0;
  for (let i = 0; i < sorted.length; i++) if (i === 0 || sorted[i] !== sorted[i - 1]) k++;
  return k;
}
