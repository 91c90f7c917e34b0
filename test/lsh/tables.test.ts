// Compact tables: rebuild layout (capacities, bucket contents), bucket policies (FIFO vs reservoir),
// incremental updates, table-range rebuilds, memory accounting.
import { describe, expect, it } from 'vitest';
import { native } from '../../src/native/addon.js';
import { allocateTables, generateHashSpec, tablesBytes, type TablesSpec } from '../../src/lsh/index.js';
import { Xoshiro128 } from '../../src/util/rng.js';

/** Ids of bucket b of table t, in stored order. */
function bucket(T: TablesSpec, t: number, b: number): number[] {
  const B = 2 ** T.rangeBits;
  const start = T.offsets[t * (B + 1) + b]!;
  const n = T.fill[t * B + b]!;
  return Array.from(T.ids.subarray(t * T.tableCapacity + start, t * T.tableCapacity + start + n));
}
function capacity(T: TablesSpec, t: number, b: number): number {
  const B = 2 ** T.rangeBits;
  return T.offsets[t * (B + 1) + b + 1]! - T.offsets[t * (B + 1) + b]!;
}

function randomTables(opts: { L: number; N: number; rangeBits: number; bucketSize: number; slack?: number; policy?: 'fifo' | 'reservoir' }, seed: number): TablesSpec {
  const T = allocateTables({ slack: 1, policy: 'fifo', ...opts });
  const rng = new Xoshiro128(seed);
  // Skewed keys: half the neurons share bucket 0 (overflow), the rest spread uniformly.
  for (let i = 0; i < T.keys.length; i++) T.keys[i] = rng.nextFloat() < 0.5 ? 0 : rng.below(2 ** opts.rangeBits);
  native().lshBuild(T, 0, opts.L, 123);
  return T;
}

describe('rebuild', () => {
  it('capacity = min(bucketSize, count + slack); buckets hold min(count, capacity) ids of their key', () => {
    const T = randomTables({ L: 3, N: 2000, rangeBits: 6, bucketSize: 32, slack: 2 }, 1);
    const B = 64;
    for (let t = 0; t < 3; t++) {
      expect(T.offsets[t * (B + 1) + B]).toBeLessThanOrEqual(T.tableCapacity);
      const seenIds = new Set<number>();
      for (let b = 0; b < B; b++) {
        let count = 0;
        for (let n = 0; n < 2000; n++) if (T.keys[t * 2000 + n] === b) count++;
        expect(capacity(T, t, b)).toBe(Math.min(32, count + 2));
        const ids = bucket(T, t, b);
        expect(ids.length).toBe(Math.min(count, 32));
        expect(T.seen[t * B + b]).toBe(count);
        for (const id of ids) {
          expect(T.keys[t * 2000 + id]).toBe(b);
          expect(seenIds.has(id)).toBe(false);
          seenIds.add(id);
        }
      }
    }
  });

  it('an overflowing bucket keeps a uniformly random subset', () => {
    // 400 neurons in one bucket of capacity 40, rebuilt with 300 seeds: each neuron kept ~10% of the time.
    const T = allocateTables({ L: 1, N: 400, rangeBits: 2, bucketSize: 40, slack: 0, policy: 'fifo' });
    const kept = new Array(400).fill(0);
    for (let s = 0; s < 300; s++) {
      native().lshBuild(T, 0, 1, s);
      for (const id of bucket(T, 0, 0)) kept[id]++;
    }
    const mean = kept.reduce((a, b) => a + b, 0) / 400;
    expect(mean).toBe(30);
    // Binomial(300, 0.1): std 5.2. Low ids and high ids are kept alike (no "highest ids win").
    const low = kept.slice(0, 200).reduce((a, b) => a + b, 0) / 200, high = kept.slice(200).reduce((a, b) => a + b, 0) / 200;
    expect(Math.abs(low - high)).toBeLessThan(2);
    expect(Math.max(...kept)).toBeLessThan(55);
    expect(Math.min(...kept)).toBeGreaterThan(8);
  });

  it('rebuilding table ranges separately equals one full rebuild (parallel rebuilds are exact)', () => {
    const a = randomTables({ L: 5, N: 3000, rangeBits: 7, bucketSize: 16 }, 2);
    const b = allocateTables({ L: 5, N: 3000, rangeBits: 7, bucketSize: 16, slack: 1, policy: 'fifo' });
    b.keys.set(a.keys);
    native().lshBuild(b, 3, 5, 123);
    native().lshBuild(b, 0, 1, 123);
    native().lshBuild(b, 1, 3, 123);
    expect(b.ids).toEqual(a.ids);
    expect(b.offsets).toEqual(a.offsets);
    expect(b.fill).toEqual(a.fill);
  });

  it('lshRehash hashes into tables.keys and builds', () => {
    const dim = 16, N = 500;
    const spec = generateHashSpec({ family: 'dwta', K: 2, L: 4, dim, seed: 9 });
    const T = allocateTables({ L: 4, N, rangeBits: spec.rangeBits, bucketSize: 8, slack: 1, policy: 'fifo' });
    const rng = new Xoshiro128(10);
    const v = Float32Array.from({ length: N * dim }, () => rng.normal());
    native().lshRehash(spec, T, v, 0, 4, 5);
    const keys = new Uint32Array(N * 4);
    native().lshHashDense(spec, v, N, 0, 4, keys);
    for (let n = 0; n < N; n++) for (let t = 0; t < 4; t++) expect(T.keys[t * N + n]).toBe(keys[n * 4 + t]);
    expect(Array.from(T.fill).reduce((a, b) => a + b, 0)).toBeGreaterThan(0);
  });
});

describe('incremental update', () => {
  it('moves a neuron: it leaves its old bucket and enters the new one; keys follow', () => {
    const T = allocateTables({ L: 2, N: 10, rangeBits: 3, bucketSize: 8, slack: 2, policy: 'fifo' });
    for (let n = 0; n < 10; n++) {
      T.keys[n] = n % 4;
      T.keys[10 + n] = (n + 1) % 4;
    }
    native().lshBuild(T, 0, 2, 1);
    expect(bucket(T, 0, 1).sort()).toEqual([1, 5, 9]);
    // Neuron 5 moves to key 6 in table 0 (empty bucket: capacity slack = 2) and stays put in table 1.
    native().lshUpdate(T, Uint32Array.of(5), Uint32Array.of(6, T.keys[10 + 5]!), 7);
    expect(bucket(T, 0, 1).sort()).toEqual([1, 9]);
    expect(bucket(T, 0, 6)).toEqual([5]);
    expect(T.keys[5]).toBe(6);
    expect(bucket(T, 1, 2).sort()).toEqual([1, 5, 9]);
  });

  it('FIFO: a full bucket drops its oldest entry for the newcomer', () => {
    const T = allocateTables({ L: 1, N: 10, rangeBits: 2, bucketSize: 3, slack: 0, policy: 'fifo' });
    T.keys.set([0, 0, 0, 1, 1, 1, 1, 2, 2, 3]);
    native().lshBuild(T, 0, 1, 1);
    const before = bucket(T, 0, 0);
    expect(before.sort()).toEqual([0, 1, 2]);
    const order = bucket(T, 0, 0);
    native().lshUpdate(T, Uint32Array.of(7), Uint32Array.of(0), 1);
    expect(bucket(T, 0, 0)).toEqual([...order.slice(1), 7]);
    native().lshUpdate(T, Uint32Array.of(8), Uint32Array.of(0), 1);
    expect(bucket(T, 0, 0)).toEqual([...order.slice(2), 7, 8]);
    // Removal keeps the order (the oldest stays first); the freed slot takes the next newcomer.
    native().lshUpdate(T, Uint32Array.of(7), Uint32Array.of(3), 1);
    expect(bucket(T, 0, 0)).toEqual([order[2], 8]);
    native().lshUpdate(T, Uint32Array.of(9), Uint32Array.of(0), 1);
    expect(bucket(T, 0, 0)).toEqual([order[2], 8, 9]);
    // Never more than capacity, whatever arrives.
    for (const c of capacityList(T)) expect(c.fill).toBeLessThanOrEqual(c.cap);
  });

  it('reservoir: newcomers replace a random slot with probability capacity / seen', () => {
    // Capacity 10 bucket with 10 members; 90 more arrive one by one: after 100 insertions each neuron
    // is in the bucket with probability 10 / 100.
    const N = 100, cap = 10, runs = 400;
    const kept = new Array(N).fill(0);
    for (let r = 0; r < runs; r++) {
      const T = allocateTables({ L: 1, N, rangeBits: 1, bucketSize: cap, slack: 0, policy: 'reservoir' });
      for (let n = 0; n < N; n++) T.keys[n] = n < cap ? 0 : 1;
      native().lshBuild(T, 0, 1, r);
      const movers = Uint32Array.from({ length: N - cap }, (_, i) => cap + i);
      native().lshUpdate(T, movers, new Uint32Array(N - cap), 1000 + r);
      const ids = bucket(T, 0, 0);
      expect(ids.length).toBe(cap);
      expect(T.seen[0]).toBe(N);
      for (const id of ids) kept[id]++;
    }
    // Expected 40 per neuron (Binomial(400, 0.1), std 6): early and late arrivals alike, unlike FIFO which
    // would keep only the last 10.
    const first = kept.slice(0, 10).reduce((a, b) => a + b, 0) / 10;
    const last = kept.slice(90).reduce((a, b) => a + b, 0) / 10;
    expect(first).toBeGreaterThan(30);
    expect(first).toBeLessThan(50);
    expect(last).toBeGreaterThan(30);
    expect(last).toBeLessThan(50);
  });

  it('with FIFO the same arrivals leave exactly the last capacity newcomers', () => {
    const N = 100, cap = 10;
    const T = allocateTables({ L: 1, N, rangeBits: 1, bucketSize: cap, slack: 0, policy: 'fifo' });
    for (let n = 0; n < N; n++) T.keys[n] = n < cap ? 0 : 1;
    native().lshBuild(T, 0, 1, 3);
    native().lshUpdate(T, Uint32Array.from({ length: N - cap }, (_, i) => cap + i), new Uint32Array(N - cap), 4);
    expect(bucket(T, 0, 0)).toEqual(Array.from({ length: cap }, (_, i) => 90 + i));
  });
});

function capacityList(T: TablesSpec): { fill: number; cap: number }[] {
  const B = 2 ** T.rangeBits;
  const out = [];
  for (let t = 0; t < T.L; t++) for (let b = 0; b < B; b++) out.push({ fill: T.fill[t * B + b]!, cap: capacity(T, t, b) });
  return out;
}

describe('memory', () => {
  it('tablesBytes matches the allocated arrays and stays a few hundred MB at Amazon-670K scale', () => {
    const T = allocateTables({ L: 3, N: 1000, rangeBits: 8, bucketSize: 16, slack: 1, policy: 'fifo' });
    const bytes = [T.offsets, T.fill, T.seen, T.ids, T.keys].reduce((s, a) => s + a.byteLength, 0);
    expect(tablesBytes(T)).toBe(bytes);
    const amazon = tablesBytes({ L: 50, N: 670_091, rangeBits: 18, slack: 1 });
    expect(amazon).toBeLessThan(500e6); // 477 MB, vs 6.7 GB for 2^18 x 128-slot buckets x 50 tables
    expect(amazon).toBeGreaterThan(400e6);
  });
});
