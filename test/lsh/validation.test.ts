// Invalid parameters throw clear errors: the TypeScript layer word for word, and the C++ re-checks throw
// (never crash) when handed bad arrays directly.
import { describe, expect, it } from 'vitest';
import { native } from '../../src/native/addon.js';
import { allocateTables, generateHashSpec, LshIndex, type LshIndexOptions } from '../../src/lsh/index.js';

const base: LshIndexOptions = { family: 'dwta', K: 4, L: 10, dim: 128, seed: 1 };
const make = (o: Partial<LshIndexOptions> | Record<string, unknown>) => () => new LshIndex({ ...base, ...o } as LshIndexOptions);

describe('LshIndex options', () => {
  it.each<[Record<string, unknown>, string]>([
    [{ family: 'lsh' }, "Unknown LSH family 'lsh': expected one of simhash, dwta, wta, minhash"],
    [{ K: 0 }, 'Expected positive integer for K but received 0'],
    [{ L: 0 }, 'Expected positive integer for L but received 0'],
    [{ L: 70000 }, 'Expected L <= 65535 but received 70000'],
    [{ dim: 1.5 }, 'Expected positive integer for dim but received 1.5'],
    [{ seed: -1 }, 'Expected non-negative integer for seed but received -1'],
    [{ binSize: 6 }, 'Expected a power of two >= 2 for binSize but received 6'],
    [{ binSize: 256 }, 'Expected binSize <= dim (128) but received 256'],
    [{ K: 11 }, 'K too large for the code type: K * bitsPerHash = 33 exceeds 32 bits (K = 11, bitsPerHash = 3)'],
    [{ family: 'simhash', K: 33 }, 'K too large for the code type: K * bitsPerHash = 33 exceeds 32 bits (K = 33, bitsPerHash = 1)'],
    [{ family: 'minhash', K: 9, bitsPerHash: 4 }, 'K too large for the code type: K * bitsPerHash = 36 exceeds 32 bits (K = 9, bitsPerHash = 4)'],
    [{ rangeBits: 25 }, 'Expected integer in 1..24 for rangeBits but received 25'],
    [{ rangeBits: 0 }, 'Expected integer in 1..24 for rangeBits but received 0'],
    [{ family: 'simhash', density: 0 }, 'Expected density in (0, 1] but received 0'],
    [{ family: 'simhash', bitsPerHash: 2 }, 'bitsPerHash must be 1 for simhash but received 2'],
    [{ bitsPerHash: 2 }, 'bitsPerHash must equal log2(binSize) = 3 for dwta but received 2'],
    [{ family: 'minhash', bitsPerHash: 33 }, 'Expected integer in 1..32 for bitsPerHash but received 33'],
    [{ family: 'simhash', binSize: 8 }, 'binSize applies only to dwta and wta, not simhash'],
    [{ density: 0.5 }, 'density applies only to simhash, not dwta'],
    [{ bucketSize: 0 }, 'Expected positive integer for bucketSize but received 0'],
    [{ policy: 'lru' }, "Unknown bucket policy 'lru': expected one of fifo, reservoir"],
    [{ slack: -1 }, 'Expected non-negative integer for slack but received -1'],
  ])('%o', (o, message) => {
    expect(make(o)).toThrow(new Error(message));
  });
});

describe('LshIndex calls', () => {
  const dim = 32;
  const index = new LshIndex({ family: 'dwta', K: 3, L: 10, dim, seed: 1 });
  const vectors = new Float32Array(100 * dim).map((_, i) => Math.sin(i));

  it('before build', () => {
    expect(() => index.query(vectors.subarray(0, dim), 1)).toThrow(new Error('LshIndex.query called before build'));
    expect(() => index.update([0], vectors.subarray(0, dim))).toThrow(new Error('LshIndex.update called before build'));
  });

  it('build arguments', () => {
    expect(() => index.build(new Float32Array(130))).toThrow(new Error('Dimension mismatch: vectors length 130 is not a positive multiple of dim = 32'));
    expect(() => index.build(new Float32Array(95), 3)).toThrow(new Error('Dimension mismatch: expected vectors of length n * dim = 3 * 32 = 96 but received 95'));
    expect(() => index.build([1, 2] as unknown as Float32Array)).toThrow(new Error('Expected Float32Array for vectors but received Array'));
    expect(() => index.build(vectors, 0)).toThrow(new Error('Expected positive integer for n but received 0'));
  });

  it('query, update and hashSparse arguments', () => {
    index.build(vectors);
    const q = vectors.subarray(0, 2 * dim);
    expect(() => index.query(q, 2, { mode: 'all' as 'union' })).toThrow(new Error("Unknown query mode 'all': expected one of union, topk, threshold"));
    expect(() => index.query(q, 2, { budget: -1 })).toThrow(new Error('Expected non-negative integer for budget but received -1'));
    expect(() => index.query(q, 2, { mode: 'threshold', minFreq: 11 })).toThrow(new Error('Expected minFreq <= L (10) but received 11'));
    expect(() => index.query(q, 2, { minActive: 1.5 })).toThrow(new Error('Expected non-negative integer for minActive but received 1.5'));
    expect(() => index.query(q, 2, { required: [[1]] })).toThrow(new Error('Expected required to hold one id list per query (2) but received 1'));
    expect(() => index.query(q, 2, { required: [[100], []] })).toThrow(new Error('Expected required ids in 0..99 but received 100 for query 0'));
    expect(() => index.query(q, 3)).toThrow(new Error('Dimension mismatch: expected vectors of length n * dim = 3 * 32 = 96 but received 64'));
    expect(() => index.queryKeys(new Uint32Array(10).fill(512), 1)).toThrow(new Error('Expected keys < 2^rangeBits (512) but received 512 at index 0'));
    expect(() => index.update([100], vectors.subarray(0, dim))).toThrow(new Error('Expected ids to hold integers in 0..99 but received 100 at index 0'));
    expect(() => index.update([1, 2], vectors.subarray(0, dim))).toThrow(new Error('Dimension mismatch: expected vectors of length n * dim = 2 * 32 = 64 but received 32'));
    const csr = { offsets: Uint32Array.of(0, 1), indices: Uint32Array.of(32), values: Float32Array.of(1) };
    expect(() => index.hashSparse(csr)).toThrow(new Error('Expected feature ids < dim (32) but received 32 in row 0'));
    expect(() => index.hashSparse({ ...csr, indices: Uint32Array.of(3), values: new Float32Array(2) })).toThrow(
      new Error('Dimension mismatch: values has 2 entries but indices has 1'),
    );
  });
});

describe('native re-checks throw instead of crashing', () => {
  const spec = generateHashSpec({ family: 'dwta', K: 3, L: 4, dim: 16, seed: 1 });

  it('too-short arrays', () => {
    const out = new Uint32Array(8);
    expect(() => native().lshHashDense(spec, new Float32Array(31), 2, 0, 4, out)).toThrow(
      'sublinear native: vectors is too short: expected at least 32 elements but received 31',
    );
    expect(() => native().lshHashDense(spec, new Float32Array(32), 2, 0, 4, new Uint32Array(7))).toThrow(/sublinear native: outKeys is too short/);
    expect(() => native().lshHashDense({ ...spec, binDims: spec.binDims!.subarray(1) }, new Float32Array(32), 2, 0, 4, out)).toThrow(
      /sublinear native: binDims is too short/,
    );
    const T = allocateTables({ L: 4, N: 10, rangeBits: spec.rangeBits, bucketSize: 4, slack: 1, policy: 'fifo' });
    expect(() => native().lshBuild({ ...T, ids: T.ids.subarray(5) }, 0, 4, 1)).toThrow(/sublinear native: ids is too short/);
    expect(() => native().lshQuery(T, new Uint32Array(4), 1, { mode: 0, budget: 5, minFreq: 1, minActive: 0 }, null, null, 1, new Uint32Array(1), new Uint32Array(3), 4)).toThrow(
      /sublinear native: outIds is too short/,
    );
  });

  it('out-of-range values and inconsistent specs', () => {
    const T = allocateTables({ L: 4, N: 10, rangeBits: spec.rangeBits, bucketSize: 4, slack: 1, policy: 'fifo' });
    const bad = Uint32Array.from(spec.binDims!);
    bad[5] = 16;
    expect(() => native().lshHashDense({ ...spec, binDims: bad }, new Float32Array(16), 1, 0, 4, new Uint32Array(4))).toThrow(
      'sublinear native: hash.binDims holds 16 at 5, expected < 16',
    );
    expect(() => native().lshHashDense(spec, new Float32Array(16), 1, 2, 5, new Uint32Array(4))).toThrow(/table range \[2, 5\)/);
    T.keys[3] = 1 << 20;
    expect(() => native().lshBuild(T, 0, 4, 1)).toThrow('sublinear native: tables: key out of range (>= 2^rangeBits) in tables.keys');
    T.keys[3] = 0;
    native().lshBuild(T, 0, 4, 1);
    expect(() => native().lshQuery(T, Uint32Array.of(0, 0, 512, 0), 1, { mode: 1, budget: 5, minFreq: 1, minActive: 0 }, null, null, 1, new Uint32Array(1), new Uint32Array(8), 8)).toThrow(
      'sublinear native: query: key out of range (>= 2^rangeBits)',
    );
    const corrupt = { ...T, ids: Uint32Array.from(T.ids).fill(99) };
    expect(() => native().lshQuery(corrupt, new Uint32Array(4), 1, { mode: 0, budget: 5, minFreq: 1, minActive: 0 }, null, null, 1, new Uint32Array(1), new Uint32Array(8), 8)).toThrow(
      /tables are corrupt/,
    );
    expect(() => native().lshUpdate(T, Uint32Array.of(10), new Uint32Array(4), 1)).toThrow('sublinear native: tables: neuron id out of range (>= N)');
    const L3 = generateHashSpec({ family: 'dwta', K: 3, L: 3, dim: 16, seed: 1 });
    expect(() => native().lshRehash(L3, T, new Float32Array(160), 0, 3, 1)).toThrow('sublinear native: hash.L (3) differs from tables.L (4)');
    expect(() => native().lshBuild({ ...T, tableCapacity: 5 }, 0, 4, 1)).toThrow('sublinear native: tables.tableCapacity must equal N + 2^rangeBits * slack');
    expect(() => native().lshHashDense({ ...spec, family: 7 }, new Float32Array(16), 1, 0, 4, new Uint32Array(4))).toThrow(/hash.family must be/);
    expect(() => native().lshHashSparse(spec, Uint32Array.of(0, 1), Uint32Array.of(16), Float32Array.of(1), Uint32Array.of(0), 0, 4, new Uint32Array(4))).toThrow(
      'sublinear native: hash: sparse index out of range (>= dim)',
    );
    expect(() => native().lshHashSparse(spec, Uint32Array.of(0, 1), Uint32Array.of(1), Float32Array.of(1), Uint32Array.of(1), 0, 4, new Uint32Array(4))).toThrow(
      /rows\[0\] = 1 is not a row of offsets/,
    );
  });
});
