// Properties of the seeded parameter generation (src/lsh/hash-params.ts): shapes, defaults, distinct dims
// per bin/projection, the DWTA inverse map, determinism in the seed.
import { describe, expect, it } from 'vitest';
import { generateHashSpec, invertBins, resolveHashOptions } from '../../src/lsh/index.js';

describe('defaults', () => {
  it('dwta/wta: binSize 8, 3 bits, rangeBits min(K * 3, 20)', () => {
    expect(resolveHashOptions({ family: 'dwta', K: 6, L: 50, dim: 128, seed: 0 })).toMatchObject({ binSize: 8, bitsPerHash: 3, rangeBits: 18 });
    expect(resolveHashOptions({ family: 'wta', K: 8, L: 5, dim: 128, seed: 0 })).toMatchObject({ binSize: 8, bitsPerHash: 3, rangeBits: 20 });
    expect(resolveHashOptions({ family: 'dwta', K: 4, L: 5, dim: 128, seed: 0, binSize: 16 })).toMatchObject({ bitsPerHash: 4, rangeBits: 16 });
  });
  it('simhash: 1 bit, density 1/3; minhash: 2 bits', () => {
    expect(resolveHashOptions({ family: 'simhash', K: 9, L: 5, dim: 128, seed: 0 })).toMatchObject({ bitsPerHash: 1, density: 1 / 3, rangeBits: 9 });
    expect(resolveHashOptions({ family: 'minhash', K: 4, L: 5, dim: 1000, seed: 0 })).toMatchObject({ bitsPerHash: 2, rangeBits: 8 });
    expect(resolveHashOptions({ family: 'simhash', K: 32, L: 5, dim: 128, seed: 0, rangeBits: 24 }).rangeBits).toBe(24);
  });
});

describe('dwta bins', () => {
  it('are chunks of permutations: distinct dims within a bin, every dim once per permutation', () => {
    const spec = generateHashSpec({ family: 'dwta', K: 6, L: 50, dim: 100, seed: 3 });
    const M = 300, bs = 8, perPerm = Math.floor(100 / bs);
    expect(spec.binDims!.length).toBe(M * bs);
    for (let m = 0; m < M; m++) expect(new Set(spec.binDims!.subarray(m * bs, (m + 1) * bs)).size).toBe(bs);
    // A full permutation's bins never repeat a dim.
    for (let p = 0; p + 1 <= Math.floor(M / perPerm); p++) {
      const chunk = spec.binDims!.subarray(p * perPerm * bs, (p + 1) * perPerm * bs);
      expect(new Set(chunk).size).toBe(perPerm * bs);
    }
  });
  it('carry the exact inverse map for sparse input', () => {
    const spec = generateHashSpec({ family: 'dwta', K: 4, L: 10, dim: 37, seed: 4, binSize: 4 });
    const { dimBinOffsets: off, dimBins: bins, binDims } = spec;
    expect(off![37]).toBe(binDims!.length);
    const seen = new Set<number>();
    for (let d = 0; d < 37; d++)
      for (let e = off![d]!; e < off![d + 1]!; e++) {
        expect(binDims![bins![e]!]).toBe(d);
        seen.add(bins![e]!);
      }
    expect(seen.size).toBe(binDims!.length);
    expect(invertBins(binDims!, 37).bins).toEqual(bins);
  });
});

describe('wta, simhash, minhash parameters', () => {
  it('wta bins hold binSize distinct dims', () => {
    const spec = generateHashSpec({ family: 'wta', K: 3, L: 20, dim: 16, seed: 5, binSize: 16 });
    for (let m = 0; m < 60; m++) expect(new Set(spec.binDims!.subarray(m * 16, (m + 1) * 16)).size).toBe(16);
  });
  it('simhash projections pick round(dim * density) distinct sorted dims with +-1 signs', () => {
    const spec = generateHashSpec({ family: 'simhash', K: 8, L: 4, dim: 100, seed: 6 });
    const per = 33;
    expect(spec.projOffsets![32]).toBe(32 * per);
    for (let m = 0; m < 32; m++) {
      const dims = Array.from(spec.projDims!.subarray(m * per, (m + 1) * per));
      for (let i = 1; i < per; i++) expect(dims[i]!).toBeGreaterThan(dims[i - 1]!);
      expect(dims[per - 1]!).toBeLessThan(100);
    }
    const signs = Array.from(spec.projSigns!);
    expect(signs.every((s) => s === 1 || s === -1)).toBe(true);
    const plus = signs.filter((s) => s === 1).length / signs.length;
    expect(plus).toBeGreaterThan(0.4);
    expect(plus).toBeLessThan(0.6);
    // The dense sign matrix holds exactly the same projections.
    let nonzero = 0;
    for (let m = 0; m < 32; m++)
      for (let i = m * per; i < (m + 1) * per; i++) expect(spec.projMatrix![m * 100 + spec.projDims![i]!]).toBe(spec.projSigns![i]);
    for (const v of spec.projMatrix!) if (v !== 0) nonzero++;
    expect(nonzero).toBe(32 * per);
    expect(generateHashSpec({ family: 'simhash', K: 1, L: 1, dim: 10, seed: 1, density: 0.01 }).projOffsets![1]).toBe(1);
  });
  it('minhash holds a permutation of [0, dim)', () => {
    const spec = generateHashSpec({ family: 'minhash', K: 2, L: 3, dim: 500, seed: 7 });
    expect(Array.from(spec.perm!).sort((a, b) => a - b)).toEqual(Array.from({ length: 500 }, (_, i) => i));
  });
});

describe('determinism', () => {
  it('the same seed gives the same parameters, another seed others; arrays are shared memory', () => {
    for (const family of ['simhash', 'dwta', 'wta', 'minhash'] as const) {
      const o = { family, K: 2, L: 3, dim: 64, seed: 99 };
      const a = generateHashSpec(o), b = generateHashSpec(o), c = generateHashSpec({ ...o, seed: 100 });
      expect(a).toEqual(b);
      expect(a).not.toEqual(c);
      const arr = a.binDims ?? a.projDims ?? a.perm!;
      expect(arr.buffer).toBeInstanceOf(SharedArrayBuffer);
    }
  });
});
