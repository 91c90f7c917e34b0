// Key packing reaches every bucket: the K sub-hashes are packed without overlap (lsh.h), so all
// 2^(K * bitsPerHash) codes occur; when folded to fewer bits, every bucket is still hit. Reference SLIDE's
// DWTA index shifts 3-bit sub-hashes by floor(ln 8) = 2 bits, so its codes overlap and most buckets are dead.
import { describe, expect, it } from 'vitest';
import { native } from '../../src/native/addon.js';
import { generateHashSpec, type HashSpec } from '../../src/lsh/index.js';
import { Xoshiro128 } from '../../src/util/rng.js';
import { slideReferenceIndex } from './reference.js';

/** Keys of n Gaussian vectors; with `density` < 1 each entry is nonzero with that probability (MinHash needs sets). */
function hashRandom(spec: HashSpec, n: number, seed: number, density = 1): Uint32Array {
  const rng = new Xoshiro128(seed);
  const x = new Float32Array(n * spec.dim);
  for (let i = 0; i < x.length; i++) if (density >= 1 || rng.nextFloat() < density) x[i] = rng.normal();
  const keys = new Uint32Array(n * spec.L);
  native().lshHashDense(spec, x, n, 0, spec.L, keys);
  return keys;
}

describe('bucket range', () => {
  it('DWTA K=3, binSize 8: all 512 buckets are hit', () => {
    const spec = generateHashSpec({ family: 'dwta', K: 3, L: 8, dim: 64, seed: 1 });
    expect(spec.rangeBits).toBe(9);
    const keys = hashRandom(spec, 5000, 2);
    expect(new Set(keys).size).toBe(512);
  });

  it('WTA K=2, binSize 16 and MinHash K=4, 2 bits: all 256 buckets are hit', () => {
    const wta = generateHashSpec({ family: 'wta', K: 2, L: 8, dim: 64, seed: 3, binSize: 16 });
    expect(new Set(hashRandom(wta, 3000, 4)).size).toBe(256);
    const mh = generateHashSpec({ family: 'minhash', K: 4, L: 4, dim: 4096, seed: 5 });
    expect(new Set(hashRandom(mh, 3000, 6, 0.02)).size).toBe(256);
  });

  it('folded keys (K * bitsPerHash > rangeBits) still reach every bucket', () => {
    const spec = generateHashSpec({ family: 'dwta', K: 6, L: 8, dim: 128, seed: 7, rangeBits: 10 });
    const keys = hashRandom(spec, 4000, 8);
    for (const k of keys) expect(k).toBeLessThan(1024);
    expect(new Set(keys).size).toBe(1024);
  });

  it("SLIDE's reference index (shift floor(ln binSize) = 2 bits for 3-bit codes) reaches at most 148 of 512", () => {
    const spec = generateHashSpec({ family: 'dwta', K: 3, L: 8, dim: 64, seed: 1 });
    const keys = hashRandom(spec, 5000, 2);
    const slide = new Set<number>();
    for (const key of keys) {
      // Without folding the key is the raw packing, so the sub-hashes decode exactly.
      const sub = [key & 7, (key >> 3) & 7, (key >> 6) & 7];
      slide.add(slideReferenceIndex(sub, 3, 8));
    }
    // index = 16 h0 + 4 h1 + h2 <= 7 * 21 = 147: distinct codes collide, e.g. (0, 1, 0) and (0, 0, 4).
    expect(Math.max(...slide)).toBeLessThanOrEqual(147);
    expect(slide.size).toBeLessThanOrEqual(148);
    expect(slideReferenceIndex([0, 1, 0], 3, 8)).toBe(slideReferenceIndex([0, 0, 4], 3, 8));
    expect(new Set(keys).size).toBe(512);
  });
});
