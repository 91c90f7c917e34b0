// Plain TypeScript reference of native/lsh.h's hash semantics: straightforward loops, no shortcuts
// (every bin is computed, densification probes follow the text of lsh.h). Float32 arithmetic is emulated
// with Math.fround where the native code sums in float.
import type { HashSpec } from '../../src/native/lsh-types.js';

export function mix32(x: number): number {
  x >>>= 0;
  x ^= x >>> 16;
  x = Math.imul(x, 0x85ebca6b) >>> 0;
  x ^= x >>> 13;
  x = Math.imul(x, 0xc2b2ae35) >>> 0;
  x ^= x >>> 16;
  return x >>> 0;
}

/** Raw sub-hashes (M) of a dense vector, null for an empty bin (DWTA, MinHash). */
function rawSubHashes(spec: HashSpec, x: Float32Array): (number | null)[] {
  const M = spec.K * spec.L;
  const h: (number | null)[] = new Array(M).fill(null);
  switch (spec.family) {
    case 0: {
      for (let m = 0; m < M; m++) {
        // The term of dim d goes to float lane d % 8 (dims ascending); lanes combine by a fixed tree (lsh.h).
        const l = [0, 0, 0, 0, 0, 0, 0, 0];
        for (let i = spec.projOffsets![m]!; i < spec.projOffsets![m + 1]!; i++) {
          const d = spec.projDims![i]!;
          l[d % 8] = Math.fround(l[d % 8]! + Math.fround(spec.projSigns![i]! * x[d]!));
        }
        const f = Math.fround;
        const acc = f(f(f(l[0]! + l[4]!) + f(l[2]! + l[6]!)) + f(f(l[1]! + l[5]!) + f(l[3]! + l[7]!)));
        h[m] = acc >= 0 ? 1 : 0;
      }
      break;
    }
    case 1: {
      for (let m = 0; m < M; m++) {
        let best = -Infinity;
        for (let p = 0; p < spec.binSize; p++) {
          const v = x[spec.binDims![m * spec.binSize + p]!]!;
          if (v !== 0 && v > best) {
            best = v;
            h[m] = p;
          }
        }
      }
      break;
    }
    case 2: {
      for (let m = 0; m < M; m++) {
        let best = x[spec.binDims![m * spec.binSize]!]!;
        h[m] = 0;
        for (let p = 1; p < spec.binSize; p++) {
          const v = x[spec.binDims![m * spec.binSize + p]!]!;
          if (v > best) {
            best = v;
            h[m] = p;
          }
        }
      }
      break;
    }
    case 3: {
      const w = Math.ceil(spec.dim / M);
      const mins: (number | null)[] = new Array(M).fill(null);
      for (let d = 0; d < spec.dim; d++) {
        if (x[d] === 0) continue;
        const r = spec.perm![d]!;
        const b = Math.floor(r / w), o = r % w;
        if (mins[b] === null || o < mins[b]!) mins[b] = o;
      }
      const mask = spec.bitsPerHash >= 32 ? 0xffffffff : 2 ** spec.bitsPerHash - 1;
      for (let m = 0; m < M; m++) h[m] = mins[m] === null ? null : (mins[m]! & mask) >>> 0;
      break;
    }
    default:
      throw new Error('unknown family');
  }
  return h;
}

/** Densification of lsh.h: probes, then a linear scan, then 0. */
export function densify(h: (number | null)[], seed: number): number[] {
  const M = h.length;
  const out: number[] = new Array(M);
  for (let m = 0; m < M; m++) {
    if (h[m] !== null) {
      out[m] = h[m]!;
      continue;
    }
    let v: number | null = null;
    for (let a = 1; a <= 64 && v === null; a++) {
      const m2 = mix32((m ^ Math.imul(a, 0x9e3779b9) ^ seed) >>> 0) % M;
      if (h[m2] !== null) v = h[m2]!;
    }
    for (let step = 1; step < M && v === null; step++) {
      const m2 = (m + step) % M;
      if (h[m2] !== null) v = h[m2]!;
    }
    out[m] = v ?? 0;
  }
  return out;
}

/** Key packing of lsh.h (with the multiplicative fold when K * bitsPerHash > rangeBits). */
export function packKey(sub: number[], K: number, bits: number, rangeBits: number): number {
  let raw = 0n;
  for (let j = 0; j < K; j++) raw |= BigInt(sub[j]!) << BigInt(j * bits);
  if (K * bits <= rangeBits) return Number(raw);
  const prod = (raw * 0x9e3779b97f4a7c15n) & ((1n << 64n) - 1n);
  return Number(prod >> BigInt(64 - rangeBits));
}

/** Sub-hashes (M) after densification. */
export function refSubHashes(spec: HashSpec, x: Float32Array): number[] {
  return densify(rawSubHashes(spec, x), spec.seed);
}

/** Keys (L) of a dense vector. */
export function refKeys(spec: HashSpec, x: Float32Array): number[] {
  const h = refSubHashes(spec, x);
  const keys: number[] = [];
  for (let t = 0; t < spec.L; t++) keys.push(packKey(h.slice(t * spec.K, (t + 1) * spec.K), spec.K, spec.bitsPerHash, spec.rangeBits));
  return keys;
}

/** Keys of a sparse vector: the semantics are defined on the implied dense vector. */
export function refKeysSparse(spec: HashSpec, idx: ArrayLike<number>, val: ArrayLike<number>): number[] {
  const x = new Float32Array(spec.dim);
  for (let i = 0; i < idx.length; i++) x[idx[i]!] = val[i]!;
  return refKeys(spec, x);
}

/**
 * Reference SLIDE's table index for WTA/DWTA (LSH::hashesToIndex in keroro824/HashingDeepLearning, SLIDE/LSH.cpp):
 *   index += h << ((K - 1 - j) * (int)floor(log(binsize)))
 * `log` is the natural logarithm, so binsize 8 shifts by floor(2.079) = 2 bits while a sub-hash needs 3: the
 * codes overlap and add, distinct sub-hash tuples collide, and the largest index is (binSize - 1) * sum 4^j.
 */
export function slideReferenceIndex(sub: number[], K: number, binSize: number): number {
  const shift = Math.floor(Math.log(binSize));
  let index = 0;
  for (let j = 0; j < K; j++) index += sub[j]! * 2 ** ((K - 1 - j) * shift);
  return index;
}
