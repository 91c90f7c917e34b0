// Query modes over hand-built tables (exact expectations) and through LshIndex end to end.
import { describe, expect, it } from 'vitest';
import { native } from '../../src/native/addon.js';
import { allocateTables, LshIndex, MODE_CODE, type QuerySpec, type TablesSpec } from '../../src/lsh/index.js';
import { Xoshiro128 } from '../../src/util/rng.js';

/**
 * 3 tables over 12 neurons, 4 buckets each, bucketSize large enough to keep everyone. Query keys [0, 0, 0]:
 *   table 0 bucket 0: {0, 1, 2, 3}   table 1 bucket 0: {2, 3, 4}   table 2 bucket 0: {3, 4, 5, 6}
 * so frequencies: 3 -> 3, 2 -> 2, 4 -> 2, 0/1/5/6 -> 1.
 */
function handTables(): TablesSpec {
  const T = allocateTables({ L: 3, N: 12, rangeBits: 2, bucketSize: 64, slack: 0, policy: 'fifo' });
  const members = [
    [0, 1, 2, 3],
    [2, 3, 4],
    [3, 4, 5, 6],
  ];
  for (let t = 0; t < 3; t++) for (let n = 0; n < 12; n++) T.keys[t * 12 + n] = members[t]!.includes(n) ? 0 : 1 + (n % 3);
  native().lshBuild(T, 0, 3, 1);
  return T;
}

function run(T: TablesSpec, spec: Partial<QuerySpec>, required?: number[], cap = 32, seed = 1): number[] {
  const q: QuerySpec = { mode: 0, budget: 0xffffffff, minFreq: 1, minActive: 0, ...spec };
  const counts = new Uint32Array(1), out = new Uint32Array(cap);
  const ro = required ? Uint32Array.of(0, required.length) : null;
  native().lshQuery(T, new Uint32Array(3), 1, q, ro, required ? Uint32Array.from(required) : null, seed, counts, out, cap);
  return Array.from(out.subarray(0, counts[0]));
}

const sorted = (a: number[]): number[] => [...a].sort((x, y) => x - y);
function bucketOrder(T: TablesSpec, t: number): number[] {
  const B = 4;
  const s = T.offsets[t * (B + 1)]!, n = T.fill[t * B]!;
  return Array.from(T.ids.subarray(t * T.tableCapacity + s, t * T.tableCapacity + s + n));
}

describe('query modes', () => {
  const T = handTables();

  it('union: table order then bucket order, deduplicated', () => {
    const expected: number[] = [];
    for (let t = 0; t < 3; t++) for (const id of bucketOrder(T, t)) if (!expected.includes(id)) expected.push(id);
    expect(run(T, { mode: MODE_CODE.union })).toEqual(expected);
    expect(sorted(expected)).toEqual([0, 1, 2, 3, 4, 5, 6]);
  });

  it('union: budget caps the table candidates (required ids not counted)', () => {
    const all = run(T, { mode: MODE_CODE.union });
    expect(run(T, { mode: MODE_CODE.union, budget: 3 })).toEqual(all.slice(0, 3));
    const withReq = run(T, { mode: MODE_CODE.union, budget: 3 }, [11, 10]);
    expect(withReq.slice(0, 2)).toEqual([11, 10]);
    expect(withReq.slice(2)).toEqual(all.slice(0, 3));
    expect(run(T, { mode: MODE_CODE.union, budget: 0 })).toEqual([]);
  });

  it('topk: by frequency, ties in first-seen order', () => {
    const firstSeen = run(T, { mode: MODE_CODE.union });
    const byFreq = (f: number[]): number[] => firstSeen.filter((id) => f.includes(id));
    const got = run(T, { mode: MODE_CODE.topk });
    expect(got).toEqual([3, ...byFreq([2, 4]), ...byFreq([0, 1, 5, 6])]);
    expect(run(T, { mode: MODE_CODE.topk, budget: 2 })).toEqual([3, byFreq([2, 4])[0]]);
    expect(run(T, { mode: MODE_CODE.topk, budget: 4 })).toEqual([3, ...byFreq([2, 4]), byFreq([0, 1, 5, 6])[0]]);
  });

  it('threshold: ids found in at least minFreq tables, first-seen order, up to budget', () => {
    const firstSeen = run(T, { mode: MODE_CODE.union });
    expect(run(T, { mode: MODE_CODE.threshold, minFreq: 2 })).toEqual(firstSeen.filter((id) => [2, 3, 4].includes(id)));
    expect(run(T, { mode: MODE_CODE.threshold, minFreq: 3 })).toEqual([3]);
    expect(run(T, { mode: MODE_CODE.threshold, minFreq: 2, budget: 1 })).toEqual(firstSeen.filter((id) => [2, 3, 4].includes(id)).slice(0, 1));
  });

  it('required ids come first, deduplicated, and are not repeated by the tables', () => {
    for (const mode of [0, 1, 2]) {
      const got = run(T, { mode }, [4, 9, 4, 3]);
      expect(got.slice(0, 3)).toEqual([4, 9, 3]);
      expect(new Set(got).size).toBe(got.length);
    }
  });

  it('random fill tops up to minActive with distinct ids, deterministically in the seed', () => {
    const got = run(T, { mode: MODE_CODE.threshold, minFreq: 3, minActive: 8 }, [10]);
    expect(got.slice(0, 2)).toEqual([10, 3]);
    expect(got.length).toBe(8);
    expect(new Set(got).size).toBe(8);
    expect(run(T, { mode: MODE_CODE.threshold, minFreq: 3, minActive: 8 }, [10])).toEqual(got);
    const fills = new Set<string>();
    for (let s = 0; s < 20; s++) fills.add(run(T, { mode: MODE_CODE.threshold, minFreq: 3, minActive: 8 }, [10], 32, s).join());
    expect(fills.size).toBeGreaterThan(10);
    // minActive >= N: every neuron exactly once.
    expect(sorted(run(T, { mode: MODE_CODE.union, minActive: 100 }))).toEqual(Array.from({ length: 12 }, (_, i) => i));
  });

  it('output is truncated at cap', () => {
    expect(run(T, { mode: MODE_CODE.union, minActive: 12 }, [7, 8], 5)).toHaveLength(5);
    expect(run(T, { mode: MODE_CODE.union, minActive: 12 }, [7, 8], 5).slice(0, 2)).toEqual([7, 8]);
  });
});

describe('LshIndex end to end', () => {
  const dim = 32, n = 3000;
  const rng = new Xoshiro128(5);
  const vectors = Float32Array.from({ length: n * dim }, () => rng.normal());

  it('a stored vector finds itself in every table; results are CSR without duplicates', () => {
    const index = new LshIndex({ family: 'dwta', K: 3, L: 10, dim, seed: 1, bucketSize: 1000 });
    index.build(vectors);
    expect(index.size).toBe(n);
    const q = 20;
    const res = index.query(vectors.subarray(0, q * dim), q, { mode: 'topk', budget: 50 });
    expect(res.offsets.length).toBe(q + 1);
    for (let i = 0; i < q; i++) {
      const ids = Array.from(res.ids.subarray(res.offsets[i]!, res.offsets[i + 1]!));
      expect(ids.length).toBe(res.counts[i]);
      expect(ids.length).toBeLessThanOrEqual(50);
      expect(ids[0]).toBe(i); // found in all 10 tables: the top frequency (ties broken by first seen)
      expect(new Set(ids).size).toBe(ids.length);
    }
  });

  it('update moves a neuron to the buckets of its new vector', () => {
    const index = new LshIndex({ family: 'simhash', K: 8, L: 6, dim, seed: 2 });
    index.build(vectors);
    const target = vectors.slice(7 * dim, 8 * dim);
    index.update([42], target); // neuron 42 now has neuron 7's vector
    const res = index.query(target, 1, { mode: 'threshold', minFreq: 6 });
    const ids = Array.from(res.ids);
    expect(ids).toContain(7);
    expect(ids).toContain(42);
    const keys = index.hash(target, 1);
    const T = index.tables!;
    for (let t = 0; t < 6; t++) expect(T.keys[t * n + 42]).toBe(keys[t]);
  });

  it('required and minActive through the public API; queries are chunked transparently', () => {
    const index = new LshIndex({ family: 'wta', K: 2, L: 4, dim, seed: 3 });
    index.build(vectors);
    const q = 5;
    const res = index.query(vectors.subarray(0, q * dim), q, { budget: 10, minActive: 30, required: [[2999], [], [5, 5], [1], [0]], seed: 9 });
    for (let i = 0; i < q; i++) {
      const ids = Array.from(res.ids.subarray(res.offsets[i]!, res.offsets[i + 1]!));
      expect(ids.length).toBe(30);
      expect(new Set(ids).size).toBe(30);
    }
    expect(res.ids[0]).toBe(2999);
    expect(res.ids[res.offsets[2]!]).toBe(5);
    const again = index.query(vectors.subarray(0, q * dim), q, { budget: 10, minActive: 30, required: [[2999], [], [5, 5], [1], [0]], seed: 9 });
    expect(again.ids).toEqual(res.ids);
  });

  it('hashSparse / querySparse agree with the dense path', () => {
    const index = new LshIndex({ family: 'minhash', K: 2, L: 8, dim: 200, seed: 4 });
    const r = new Xoshiro128(6);
    const dense = new Float32Array(100 * 200);
    for (let i = 0; i < dense.length; i++) if (r.nextFloat() < 0.1) dense[i] = 1;
    index.build(dense);
    const offsets = new Uint32Array(101), idx: number[] = [], val: number[] = [];
    for (let i = 0; i < 100; i++) {
      for (let d = 0; d < 200; d++) if (dense[i * 200 + d]) (idx.push(d), val.push(1));
      offsets[i + 1] = idx.length;
    }
    const csr = { offsets, indices: Uint32Array.from(idx), values: Float32Array.from(val) };
    expect(index.hashSparse(csr)).toEqual(index.hash(dense, 100));
    const a = index.querySparse(csr, Uint32Array.of(3, 4), { seed: 1 });
    const b = index.query(dense.subarray(3 * 200, 5 * 200), 2, { seed: 1 });
    expect(a.ids).toEqual(b.ids);
  });

  it('memoryBytes counts parameters and tables', () => {
    const index = new LshIndex({ family: 'dwta', K: 4, L: 5, dim, seed: 1 });
    const before = index.memoryBytes();
    expect(before).toBeGreaterThan(4 * 4 * 5 * 8);
    index.build(vectors);
    expect(index.memoryBytes() - before).toBe(4 * 5 * (3 * 2 ** 12 + 1 + 2 * n + 2 ** 12));
  });
});
