import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { generateSynthetic, SHAPES, synthesize, type ShapeName } from '../../src/datasets/synth.js';
import { readXC } from '../../src/datasets/xc-reader.js';
import { subset } from '../../src/datasets/split-reader.js';
import { describe as stats } from '../../src/datasets/stats.js';
import type { SparseDataset } from '../../src/datasets/csr.js';

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'sublinear-synth-'));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

/** Checks the CSR invariants of docs/design.md row by row. */
function expectWellFormed(d: SparseDataset): void {
  for (let i = 0; i < d.points; i++) {
    for (let k = d.offsets[i]! + 1; k < d.offsets[i + 1]!; k++) expect(d.indices[k]! > d.indices[k - 1]!).toBe(true);
    for (let k = d.labelOffsets[i]! + 1; k < d.labelOffsets[i + 1]!; k++) {
      expect(d.labelIndices[k]! > d.labelIndices[k - 1]!).toBe(true);
    }
    let norm = 0;
    for (let k = d.offsets[i]!; k < d.offsets[i + 1]!; k++) {
      const v = d.values[k]!;
      expect(v > 0 && Number.isFinite(v)).toBe(true);
      norm += v * v;
    }
    expect(Math.abs(Math.sqrt(norm) - 1)).toBeLessThan(2e-3); // L2-normalised before 4-digit rounding
  }
  expect(Math.max(...d.indices)).toBeLessThan(d.features);
  expect(Math.max(...d.labelIndices)).toBeLessThan(d.labels);
}

describe('generateSynthetic', () => {
  it('is deterministic: same seed, same bytes; another seed, other bytes', async () => {
    const a = await generateSynthetic({ shape: 'tiny', train: 300, test: 100, seed: 42, outDir: join(dir, 'a'), fsync: false });
    const b = await generateSynthetic({ shape: 'tiny', train: 300, test: 100, seed: 42, outDir: join(dir, 'b'), fsync: false });
    const c = await generateSynthetic({ shape: 'tiny', train: 300, test: 100, seed: 43, outDir: join(dir, 'c'), fsync: false });
    expect(await readFile(a.train)).toEqual(await readFile(b.train));
    expect(await readFile(a.test)).toEqual(await readFile(b.test));
    expect(await readFile(a.train)).not.toEqual(await readFile(c.train));
    expect(a.bytes).toBe((await readFile(a.train)).length + (await readFile(a.test)).length);
    expect((await readFile(a.train, 'latin1')).split('\n')[0]).toBe('300 2000 100');
  });

  it('writes train and test as consecutive points of one stream, equal to synthesize()', async () => {
    const r = await generateSynthetic({ shape: 'small', train: 200, test: 50, seed: 9, outDir: join(dir, 'stream'), fsync: false });
    const train = await readXC(r.train);
    const test = await readXC(r.test);
    const all = synthesize({ shape: 'small', points: 250, seed: 9 });
    expect(train).toEqual(subset(all, Array.from({ length: 200 }, (_, i) => i)));
    expect(test).toEqual(subset(all, Array.from({ length: 50 }, (_, i) => 200 + i)));
  });

  it('reports progress and validates its arguments', async () => {
    const calls: number[][] = [];
    await generateSynthetic({ shape: 'tiny', train: 10, test: 5, outDir: join(dir, 'p'), fsync: false, onProgress: (d, t) => calls.push([d, t]) });
    expect(calls.at(-1)).toEqual([15, 15]);
    await expect(generateSynthetic({ shape: 'huge' as ShapeName, train: 1, outDir: dir })).rejects.toThrow(
      "Unknown synthetic shape 'huge' (known: tiny, small, amazon-670k, delicious-200k, wiki-325k)",
    );
    await expect(generateSynthetic({ shape: 'tiny', train: -1, outDir: dir })).rejects.toThrow('Expected non-negative integer for train but received -1');
    expect(() => synthesize({ shape: 'tiny', points: 5, seed: 1.5 })).toThrow('Expected non-negative integer for seed but received 1.5');
  });
});

describe('synthesize', () => {
  it('produces well-formed rows (sorted unique features, sorted labels, L2-normalised positive values)', () => {
    expectWellFormed(synthesize({ shape: 'tiny', points: 500, seed: 1 }));
    expectWellFormed(synthesize({ shape: 'small', points: 200, seed: 2 }));
  });

  it('matches the real shapes: dimensions, ~nonzeros and ~labels per point, power-law label frequencies', () => {
    const want: [ShapeName, number][] = [['tiny', 3000], ['small', 2000], ['amazon-670k', 2000], ['delicious-200k', 300], ['wiki-325k', 2000]];
    for (const [name, points] of want) {
      const shape = SHAPES[name];
      const d = synthesize({ shape: name, points, seed: 5 });
      const s = stats(d);
      expect([s.features, s.labels]).toEqual([shape.features, shape.labels]);
      // Colliding draws make the realised nonzeros a little lower than the target.
      expect(s.avgFeatures, name).toBeGreaterThan(0.85 * shape.avgFeatures);
      expect(s.avgFeatures, name).toBeLessThan(1.1 * shape.avgFeatures);
      expect(s.avgLabels, name).toBeGreaterThan(0.85 * shape.avgLabels);
      expect(s.avgLabels, name).toBeLessThan(1.15 * shape.avgLabels);
      expect(s.pointsWithoutLabels).toBe(0);
      // Label counts vary from point to point.
      expect(s.maxLabelsPerPoint, name).toBeGreaterThan(1.5 * shape.avgLabels);
      // Power law: the most frequent label is far above the median one.
      expect(s.labelFrequency.max, name).toBeGreaterThan(8 * s.labelFrequency.median);
    }
  });

  it('is learnable: a nearest-centroid classifier trained on the first points beats the popularity baseline on later ones', () => {
    const d = synthesize({ shape: 'tiny', points: 3500, seed: 3 });
    const nTrain = 3000, D = d.features, L = d.labels;
    const centroid = new Float64Array(L * D);
    const freq = new Float64Array(L);
    for (let i = 0; i < nTrain; i++) {
      for (let j = d.labelOffsets[i]!; j < d.labelOffsets[i + 1]!; j++) {
        const l = d.labelIndices[j]!;
        freq[l]!++;
        for (let k = d.offsets[i]!; k < d.offsets[i + 1]!; k++) centroid[l * D + d.indices[k]!]! += d.values[k]!;
      }
    }
    for (let l = 0; l < L; l++) {
      let norm = 0;
      for (let f = 0; f < D; f++) norm += centroid[l * D + f]! ** 2;
      const inv = norm > 0 ? 1 / Math.sqrt(norm) : 0;
      for (let f = 0; f < D; f++) centroid[l * D + f]! *= inv;
    }
    const popular = freq.indexOf(Math.max(...freq));
    let hits = 0, baseline = 0;
    for (let i = nTrain; i < d.points; i++) {
      let best = -1, bestScore = -Infinity;
      for (let l = 0; l < L; l++) {
        let s = 0;
        for (let k = d.offsets[i]!; k < d.offsets[i + 1]!; k++) s += centroid[l * D + d.indices[k]!]! * d.values[k]!;
        if (s > bestScore) [best, bestScore] = [l, s];
      }
      const labels = Array.from(d.labelIndices.subarray(d.labelOffsets[i]!, d.labelOffsets[i + 1]!));
      if (labels.includes(best)) hits++;
      if (labels.includes(popular)) baseline++;
    }
    const p1 = hits / (d.points - nTrain), p1Baseline = baseline / (d.points - nTrain);
    expect(p1).toBeGreaterThan(0.8);
    expect(p1).toBeGreaterThan(2 * p1Baseline);
  });
});
