// Every family's native keys equal the plain TypeScript reference (test/lsh/reference.ts) exactly, on dense
// and sparse input, for full and partial table ranges, including ties, zeros and densification.
import { describe, expect, it } from 'vitest';
import { native } from '../../src/native/addon.js';
import { generateHashSpec, type HashParamsOptions, type LshFamily } from '../../src/lsh/index.js';
import { Xoshiro128 } from '../../src/util/rng.js';
import { refKeys, refKeysSparse } from './reference.js';

/** Test vectors: Gaussian, sparse (most entries zero), tied small integers, negative-only, all-zero. */
function vectors(dim: number, seed: number): Float32Array[] {
  const rng = new Xoshiro128(seed);
  const out: Float32Array[] = [];
  for (let i = 0; i < 12; i++) {
    const x = new Float32Array(dim);
    for (let d = 0; d < dim; d++) x[d] = rng.normal();
    out.push(x);
  }
  for (const keep of [0.02, 0.1, 0.3]) {
    for (let i = 0; i < 4; i++) {
      const x = new Float32Array(dim);
      for (let d = 0; d < dim; d++) if (rng.nextFloat() < keep) x[d] = rng.normal();
      out.push(x);
    }
  }
  for (let i = 0; i < 4; i++) {
    const x = new Float32Array(dim);
    for (let d = 0; d < dim; d++) x[d] = rng.below(3) - 1; // many ties and zeros
    out.push(x);
  }
  const neg = new Float32Array(dim);
  for (let d = 0; d < dim; d++) neg[d] = -1 - rng.nextFloat();
  out.push(neg);
  const one = new Float32Array(dim);
  one[rng.below(dim)] = 2.5; // a single nonzero: almost every DWTA/MinHash bin is densified
  out.push(one);
  out.push(new Float32Array(dim)); // all zero
  return out;
}

/**
 * Dense keys, computed at every SIMD level this CPU has (scalar, AVX2, AVX-512F); all levels must agree
 * (the returned keys are the scalar ones, checked against the reference by the callers).
 */
function nativeDense(spec: ReturnType<typeof generateHashSpec>, xs: Float32Array[], t0: number, t1: number): Uint32Array {
  const flat = new Float32Array(xs.length * spec.dim);
  xs.forEach((x, i) => flat.set(x, i * spec.dim));
  const outs: Uint32Array[] = [];
  try {
    for (const cap of [0, 1, 2]) {
      if (native().lshSimdLevel(cap) !== cap) continue; // the CPU lacks this level
      const out = new Uint32Array(xs.length * (t1 - t0));
      native().lshHashDense(spec, flat, xs.length, t0, t1, out);
      outs.push(out);
    }
  } finally {
    native().lshSimdLevel(2);
  }
  for (const o of outs.slice(1)) expect(o).toEqual(outs[0]);
  return outs[0]!;
}

/** CSR of the nonzeros of xs, each row's entries shuffled (the kernels accept any order). */
function toCsr(xs: Float32Array[], seed: number) {
  const rng = new Xoshiro128(seed);
  const offsets = new Uint32Array(xs.length + 1);
  const idx: number[] = [];
  const val: number[] = [];
  xs.forEach((x, i) => {
    const row: number[] = [];
    for (let d = 0; d < x.length; d++) if (x[d] !== 0) row.push(d);
    for (let j = row.length - 1; j > 0; j--) {
      const k = rng.below(j + 1);
      [row[j], row[k]] = [row[k]!, row[j]!];
    }
    for (const d of row) {
      idx.push(d);
      val.push(x[d]!);
    }
    offsets[i + 1] = idx.length;
  });
  return { offsets, indices: Uint32Array.from(idx), values: Float32Array.from(val) };
}

const configs: HashParamsOptions[] = [
  { family: 'dwta', K: 3, L: 16, dim: 128, seed: 12, binSize: 8 }, // odd bin count: the AVX-512 2-bin loop's tail
  { family: 'simhash', K: 6, L: 7, dim: 21, seed: 13, density: 0.5 }, // dim % 8 != 0, M % 8 != 0: SIMD tails
  { family: 'simhash', K: 12, L: 6, dim: 64, seed: 14 }, // dim % 8 == 0: the vector lane reduction
  { family: 'dwta', K: 6, L: 20, dim: 64, seed: 1 },
  { family: 'dwta', K: 4, L: 9, dim: 37, seed: 2, binSize: 4, rangeBits: 5 }, // fold path, dim % binSize != 0
  { family: 'wta', K: 5, L: 12, dim: 50, seed: 3, binSize: 8 },
  { family: 'wta', K: 8, L: 6, dim: 16, seed: 4, binSize: 2, rangeBits: 3 },
  { family: 'simhash', K: 16, L: 10, dim: 70, seed: 5 },
  { family: 'simhash', K: 24, L: 4, dim: 33, seed: 6, density: 1, rangeBits: 12 },
  { family: 'minhash', K: 4, L: 10, dim: 300, seed: 7 },
  { family: 'minhash', K: 3, L: 5, dim: 1000, seed: 8, bitsPerHash: 6, rangeBits: 10 },
];

describe.each(configs)('$family K=$K L=$L dim=$dim', (cfg) => {
  const spec = generateHashSpec(cfg);
  const xs = vectors(cfg.dim, 100 + cfg.seed);
  const expected = xs.map((x) => refKeys(spec, x));

  it('dense keys equal the reference', () => {
    const got = nativeDense(spec, xs, 0, cfg.L);
    xs.forEach((_, i) => expect(Array.from(got.subarray(i * cfg.L, (i + 1) * cfg.L)), `vector ${i}`).toEqual(expected[i]));
  });

  it('a table range [t0, t1) gives the same keys as the full hash', () => {
    const t0 = Math.floor(cfg.L / 3), t1 = cfg.L - 1;
    const got = nativeDense(spec, xs, t0, t1);
    xs.forEach((_, i) => expect(Array.from(got.subarray(i * (t1 - t0), (i + 1) * (t1 - t0)))).toEqual(expected[i]!.slice(t0, t1)));
  });

  it('sparse keys equal the reference and the dense keys of the same vector', () => {
    const csr = toCsr(xs, 9);
    const rows = Uint32Array.from(xs.keys()).reverse(); // any row order
    const out = new Uint32Array(rows.length * cfg.L);
    native().lshHashSparse(spec, csr.offsets, csr.indices, csr.values, rows, 0, cfg.L, out);
    rows.forEach((r, i) => {
      const got = Array.from(out.subarray(i * cfg.L, (i + 1) * cfg.L));
      const b = csr.offsets[r]!, e = csr.offsets[r + 1]!;
      expect(got, `row ${r}`).toEqual(refKeysSparse(spec, csr.indices.subarray(b, e), csr.values.subarray(b, e)));
      expect(got, `row ${r} dense`).toEqual(expected[r]);
    });
    // Partial range on the sparse path.
    const part = new Uint32Array(rows.length * 2);
    native().lshHashSparse(spec, csr.offsets, csr.indices, csr.values, rows, cfg.L - 2, cfg.L, part);
    rows.forEach((r, i) => expect(Array.from(part.subarray(i * 2, i * 2 + 2))).toEqual(expected[r]!.slice(cfg.L - 2)));
  });

  it('padded rows (rowStride > dim) give the same keys', () => {
    const stride = cfg.dim + 5;
    const padded = new Float32Array(xs.length * stride).fill(7); // padding must be ignored
    xs.forEach((x, i) => padded.set(x, i * stride));
    for (const cap of [0, 2]) {
      native().lshSimdLevel(cap);
      const out = new Uint32Array(xs.length * cfg.L);
      native().lshHashDense(spec, padded.subarray(0, (xs.length - 1) * stride + cfg.dim), xs.length, 0, cfg.L, out, stride);
      xs.forEach((_, i) => expect(Array.from(out.subarray(i * cfg.L, (i + 1) * cfg.L))).toEqual(expected[i]));
    }
    native().lshSimdLevel(2);
  });

  it('keys are < 2^rangeBits and hashing is deterministic in the seed', () => {
    const got = nativeDense(spec, xs, 0, cfg.L);
    for (const k of got) expect(k).toBeLessThan(2 ** spec.rangeBits);
    expect(nativeDense(generateHashSpec(cfg), xs, 0, cfg.L)).toEqual(got);
    const other = nativeDense(generateHashSpec({ ...cfg, seed: cfg.seed + 1000 }), xs, 0, cfg.L);
    expect(other).not.toEqual(got);
  });
});

describe('sparse input with explicit zeros and unsorted indices', () => {
  it.each(['dwta', 'minhash', 'simhash', 'wta'] as LshFamily[])('%s ignores stored zeros', (family) => {
    const spec = generateHashSpec({ family, K: 4, L: 8, dim: 40, seed: 11, ...(family === 'simhash' || family === 'minhash' ? {} : { binSize: 4 }) });
    const offsets = Uint32Array.of(0, 5, 8);
    const indices = Uint32Array.of(7, 3, 30, 12, 0, 39, 1, 2);
    const values = Float32Array.of(0.5, 0, -1.25, 3, 0, 0, 2, 0);
    const out = new Uint32Array(2 * 8);
    native().lshHashSparse(spec, offsets, indices, values, Uint32Array.of(0, 1), 0, 8, out);
    expect(Array.from(out.subarray(0, 8))).toEqual(refKeysSparse(spec, [7, 30, 12], [0.5, -1.25, 3]));
    expect(Array.from(out.subarray(8))).toEqual(refKeysSparse(spec, [1], [2]));
  });
});

describe('simhash without the dense sign matrix', () => {
  it('the gather path gives the same keys as the matrix path and the reference', () => {
    const cfg: HashParamsOptions = { family: 'simhash', K: 9, L: 11, dim: 45, seed: 21 };
    const spec = generateHashSpec(cfg);
    expect(spec.projMatrix).toBeDefined();
    const { projMatrix: _unused, ...gatherOnly } = spec;
    const xs = vectors(cfg.dim, 77);
    const a = nativeDense(spec, xs, 0, cfg.L);
    const b = nativeDense(gatherOnly, xs, 0, cfg.L);
    expect(b).toEqual(a);
    xs.forEach((x, i) => expect(Array.from(b.subarray(i * cfg.L, (i + 1) * cfg.L))).toEqual(refKeys(spec, x)));
  });
});
