// Seeded generation of each hash family's parameters (the HashSpec passed to native). C++ never draws
// hash randomness, so the same seed gives the same keys on every machine, worker and reference.
//
// Families (semantics: native/lsh.h):
// - SimHash: K*L sparse signed random projections as in SLIDE; each picks round(dim * density) distinct
//   dims (at least 1, stored ascending) with random +1/-1 signs. 1 bit per sub-hash. When K*L*dim is small
//   the same projections are also stored as a dense sign matrix (projMatrix) for fast dense hashing.
// - DWTA (densified winner-take-all, SLIDE's choice for Amazon-670K): bins are consecutive chunks of
//   binSize dims cut from concatenated random permutations of [0, dim); each permutation yields
//   floor(dim / binSize) bins and drops its tail, so a bin's dims are always distinct. log2(binSize) bits.
// - WTA: each bin is the first binSize entries of an independent random permutation. log2(binSize) bits.
// - MinHash (densified one-permutation): one random permutation of [0, dim) split into K*L bins of width
//   ceil(dim / (K*L)); a sub-hash is the min offset within its bin, masked to bitsPerHash bits. Meant for
//   sparse, high-dimensional inputs: with dim < K*L most bins are empty and the hash degenerates.
import { SplitMix64, Xoshiro128 } from '../util/rng.js';
import { FAMILY_CODE, type HashSpec } from '../native/lsh-types.js';
import { intInRange, nonNegativeInt, oneOf, positiveInt, show } from './validate.js';

export type LshFamily = 'simhash' | 'dwta' | 'wta' | 'minhash';
export const LSH_FAMILIES: readonly LshFamily[] = ['simhash', 'dwta', 'wta', 'minhash'];

/** Options of one hash family instance. */
export interface HashParamsOptions {
  /** Hash family. */
  family: LshFamily;
  /** Sub-hashes per key (per table). K * bitsPerHash must be <= 32. */
  K: number;
  /** Number of tables, 1..65535. */
  L: number;
  /** Dimension of the hashed vectors. */
  dim: number;
  /** Seed of every random choice (non-negative integer <= 2^53 - 1). */
  seed: number;
  /** DWTA/WTA: entries per bin, a power of two in 2..dim. Default 8 (3 bits per sub-hash, as SLIDE). */
  binSize?: number;
  /** SimHash: fraction of dims each projection reads, in (0, 1]. Default 1/3 (SLIDE). */
  density?: number;
  /**
   * Bits per sub-hash. SimHash: always 1; DWTA/WTA: always log2(binSize) (may be given, must agree);
   * MinHash: 1..32, default 2 (the min offset keeps its 2 low bits, as in b-bit minwise hashing).
   */
  bitsPerHash?: number;
  /**
   * log2 of the buckets per table, 1..24. Default min(K * bitsPerHash, 20). Keys with more raw bits are
   * folded by a multiplicative hash; with fewer, only 2^(K * bitsPerHash) buckets are used.
   */
  rangeBits?: number;
}

/** Validated, defaulted hash options. */
export interface ResolvedHashOptions {
  family: LshFamily;
  K: number;
  L: number;
  dim: number;
  seed: number;
  binSize: number;
  density: number;
  bitsPerHash: number;
  rangeBits: number;
}

export const MAX_TABLES = 65535;
/** SimHash keeps a dense (K*L, dim) int8 sign matrix for dense input up to this many entries (4 MB). */
export const PROJ_MATRIX_MAX_ENTRIES = 1 << 22;
export const MAX_RANGE_BITS = 24;

/** Checks and defaults hash options; throws messages of the form `Expected positive integer for K but received 0`. */
export function resolveHashOptions(o: HashParamsOptions): ResolvedHashOptions {
  if (o === null || typeof o !== 'object') throw new Error(`Expected an options object but received ${show(o)}`);
  const family = oneOf('LSH family', o.family, LSH_FAMILIES);
  const K = positiveInt('K', o.K);
  const L = positiveInt('L', o.L);
  if (L > MAX_TABLES) throw new Error(`Expected L <= ${MAX_TABLES} but received ${L}`);
  const dim = positiveInt('dim', o.dim);
  const seed = nonNegativeInt('seed', o.seed);
  if (seed > Number.MAX_SAFE_INTEGER) throw new Error(`Expected seed <= 2^53 - 1 but received ${seed}`);

  let binSize = 0;
  let bitsPerHash: number;
  let density = 1 / 3;
  if (family === 'dwta' || family === 'wta') {
    binSize = o.binSize ?? 8;
    if (typeof binSize !== 'number' || !Number.isInteger(binSize) || binSize < 2 || (binSize & (binSize - 1)) !== 0)
      throw new Error(`Expected a power of two >= 2 for binSize but received ${show(binSize)}`);
    if (binSize > dim) throw new Error(`Expected binSize <= dim (${dim}) but received ${binSize}`);
    bitsPerHash = Math.log2(binSize);
    if (o.bitsPerHash !== undefined && o.bitsPerHash !== bitsPerHash)
      throw new Error(`bitsPerHash must equal log2(binSize) = ${bitsPerHash} for ${family} but received ${show(o.bitsPerHash)}`);
  } else {
    if (o.binSize !== undefined) throw new Error(`binSize applies only to dwta and wta, not ${family}`);
    if (family === 'simhash') {
      if (o.bitsPerHash !== undefined && o.bitsPerHash !== 1)
        throw new Error(`bitsPerHash must be 1 for simhash but received ${show(o.bitsPerHash)}`);
      bitsPerHash = 1;
      if (o.density !== undefined) {
        if (typeof o.density !== 'number' || !(o.density > 0 && o.density <= 1))
          throw new Error(`Expected density in (0, 1] but received ${show(o.density)}`);
        density = o.density;
      }
    } else {
      bitsPerHash = o.bitsPerHash === undefined ? 2 : intInRange('bitsPerHash', o.bitsPerHash, 1, 32);
    }
  }
  if (family !== 'simhash' && o.density !== undefined) throw new Error(`density applies only to simhash, not ${family}`);
  if (K * bitsPerHash > 32)
    throw new Error(
      `K too large for the code type: K * bitsPerHash = ${K * bitsPerHash} exceeds 32 bits (K = ${K}, bitsPerHash = ${bitsPerHash})`,
    );
  if (K * L * Math.max(binSize, 64) > 0xffffffff)
    throw new Error(`K * L = ${K * L} is too large: K * L * ${Math.max(binSize, 64)} must stay below 2^32`);
  const rangeBits =
    o.rangeBits === undefined ? Math.min(K * bitsPerHash, 20) : intInRange('rangeBits', o.rangeBits, 1, MAX_RANGE_BITS);
  return { family, K, L, dim, seed, binSize, density, bitsPerHash, rangeBits };
}

/**
 * Bytes `generateHashSpec(options)` allocates (its arrays plus the temporary permutations), computed from
 * the options alone: loaders count it before building a stored network's hash functions (the memory
 * plan's tables do not include them, and SimHash's projections grow with K * L * dim). Throws as
 * resolveHashOptions for invalid options.
 */
export function hashSpecBytesFor(options: HashParamsOptions): number {
  const o = resolveHashOptions(options);
  const M = o.K * o.L;
  switch (o.family) {
    case 'dwta': // binDims and its inverse (offsets, bins), plus the permutation and a copy of the offsets
      return 8 * M * o.binSize + 4 * (o.dim + 1) + 8 * o.dim;
    case 'wta':
      return 4 * M * o.binSize + 4 * o.dim;
    case 'simhash': {
      const per = Math.max(1, Math.round(o.dim * o.density));
      return 4 * (M + 1) + 8 * M * per + (M * o.dim <= PROJ_MATRIX_MAX_ENTRIES ? M * o.dim : 0) + 4 * o.dim;
    }
    case 'minhash':
      return 8 * o.dim;
  }
}

/** Generates the HashSpec of `options` (validated) on SharedArrayBuffers, so workers can share it. */
export function generateHashSpec(options: HashParamsOptions): HashSpec {
  const o = resolveHashOptions(options);
  // splitmix64 gives the 32-bit densification seed and seeds the bulk generator (xoshiro128**).
  const sm = new SplitMix64(o.seed);
  const densifySeed = sm.nextU32();
  const rng = new Xoshiro128(sm.next());
  const M = o.K * o.L;
  const spec: HashSpec = {
    family: FAMILY_CODE[o.family],
    K: o.K,
    L: o.L,
    dim: o.dim,
    bitsPerHash: o.bitsPerHash,
    rangeBits: o.rangeBits,
    binSize: o.binSize,
    seed: densifySeed,
  };
  switch (o.family) {
    case 'dwta': {
      const binDims = sharedU32(M * o.binSize);
      const perBinsPerm = Math.floor(o.dim / o.binSize);
      const perm = identity(o.dim);
      for (let m = 0; m < M; m += perBinsPerm) {
        // Only the first `take` entries of each permutation are used: a partial shuffle draws exactly them.
        const take = Math.min(perBinsPerm, M - m) * o.binSize;
        shuffle(perm, take, rng);
        binDims.set(perm.subarray(0, take), m * o.binSize);
      }
      spec.binDims = binDims;
      const inv = invertBins(binDims, o.dim);
      spec.dimBinOffsets = inv.offsets;
      spec.dimBins = inv.bins;
      break;
    }
    case 'wta': {
      const binDims = sharedU32(M * o.binSize);
      const perm = identity(o.dim);
      for (let m = 0; m < M; m++) {
        // The first binSize entries after binSize partial Fisher-Yates steps are a uniform ordered sample,
        // whatever the array held before: one O(binSize) draw per bin instead of a full permutation.
        shuffle(perm, o.binSize, rng);
        binDims.set(perm.subarray(0, o.binSize), m * o.binSize);
      }
      spec.binDims = binDims;
      break;
    }
    case 'simhash': {
      const per = Math.max(1, Math.round(o.dim * o.density));
      const projOffsets = sharedU32(M + 1);
      const projDims = sharedU32(M * per);
      const projSigns = new Float32Array(new SharedArrayBuffer(M * per * 4));
      const perm = identity(o.dim);
      for (let m = 0; m < M; m++) {
        shuffle(perm, per, rng);
        // Sorted dims: the dense gather walks x forward (summation order is part of the semantics, and
        // the reference reads the same order).
        const dims = perm.slice(0, per).sort();
        projDims.set(dims, m * per);
        for (let i = 0; i < per; i++) projSigns[m * per + i] = rng.nextU32() & 1 ? 1 : -1;
        projOffsets[m + 1] = (m + 1) * per;
      }
      spec.projOffsets = projOffsets;
      spec.projDims = projDims;
      spec.projSigns = projSigns;
      // Dense form for a vectorised mat-vec on dense input (about 10x faster than gathering), when small.
      if (M * o.dim <= PROJ_MATRIX_MAX_ENTRIES) {
        const mat = new Int8Array(new SharedArrayBuffer(M * o.dim));
        for (let m = 0; m < M; m++)
          for (let i = m * per; i < (m + 1) * per; i++) mat[m * o.dim + projDims[i]!] = projSigns[i]!;
        spec.projMatrix = mat;
      }
      break;
    }
    case 'minhash': {
      const perm = sharedU32(o.dim);
      perm.set(identity(o.dim));
      shuffle(perm, o.dim, rng);
      spec.perm = perm;
      break;
    }
  }
  return spec;
}

/** Bytes held by a HashSpec's arrays. */
export function hashSpecBytes(spec: HashSpec): number {
  let b = 0;
  for (const a of [spec.binDims, spec.dimBinOffsets, spec.dimBins, spec.projOffsets, spec.projDims, spec.projSigns, spec.projMatrix, spec.perm])
    if (a) b += a.byteLength;
  return b;
}

/** Inverse of binDims for sparse DWTA: for each dim, the codes m * binSize + p of the bin positions reading it. */
export function invertBins(binDims: Uint32Array, dim: number): { offsets: Uint32Array; bins: Uint32Array } {
  const offsets = sharedU32(dim + 1);
  for (let i = 0; i < binDims.length; i++) offsets[binDims[i]! + 1]!++;
  for (let d = 0; d < dim; d++) offsets[d + 1]! += offsets[d]!;
  const bins = sharedU32(binDims.length);
  const next = offsets.slice(0, dim);
  for (let i = 0; i < binDims.length; i++) bins[next[binDims[i]!]!++] = i;
  return { offsets, bins };
}

function sharedU32(n: number): Uint32Array {
  return new Uint32Array(new SharedArrayBuffer(Math.max(n, 0) * 4));
}

function identity(n: number): Uint32Array {
  const a = new Uint32Array(n);
  for (let i = 0; i < n; i++) a[i] = i;
  return a;
}

/** `steps` steps of Fisher-Yates from the front: a[0..steps) becomes a uniform ordered sample of a. */
function shuffle(a: Uint32Array, steps: number, rng: Xoshiro128): void {
  const n = a.length;
  for (let i = 0; i < steps && i < n - 1; i++) {
    const j = i + rng.below(n - i);
    const t = a[i]!;
    a[i] = a[j]!;
    a[j] = t;
  }
}
