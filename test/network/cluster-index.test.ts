// The cluster index of a sampled output layer (native/net_cluster.cc, Network.buildClusterIndex): its
// structure against a TypeScript recomputation of the MIPS transform, and sampled inference through it
// against exact (brute-force) inference.
import { describe, expect, it } from 'vitest';
import { synthesize } from '../../src/datasets/synth.js';
import { subset } from '../../src/datasets/split-reader.js';
import { native } from '../../src/native/addon.js';
import { Network } from '../../src/network/network.js';
import { Xoshiro128 } from '../../src/util/rng.js';
import { fit } from '../../src/train/fit-network.js';

describe('netClusterBuild', () => {
  const N = 600, d = 6, C = 12;
  const rng = new Xoshiro128(9);
  const W = Float32Array.from({ length: N * d }, (_, i) => (rng.nextFloat() - 0.5) * (1 + (Math.floor(i / d) % 5)));
  const b = Float32Array.from({ length: N }, () => rng.nextFloat() - 0.5);
  const rows = Uint32Array.from({ length: N / 2 }, (_, i) => 2 * i + 1); // every odd neuron
  const build = (seed: number) => {
    const cent = new Float32Array(C * (d + 2)), off = new Uint32Array(C + 1), mem = new Uint32Array(rows.length);
    native().netClusterBuild(W, b, d, rows, C, 6, 1000, seed, cent, off, mem);
    return { cent, off, mem };
  };

  it('partitions the given rows; every row sits with the centre of largest cosine after the MIPS transform', () => {
    const { cent, off, mem } = build(4);
    expect(off[0]).toBe(0);
    expect(off[C]).toBe(rows.length);
    for (let c = 0; c < C; c++) expect(off[c + 1]).toBeGreaterThanOrEqual(off[c]!);
    expect([...mem].sort((x, y) => x - y)).toEqual([...rows]);
    // Reference transform: x = [w, b] / M, lifted by sqrt(1 - |x|^2); centres are unit vectors.
    let M2 = 0;
    for (const j of rows) {
      let q = b[j]! ** 2;
      for (let r = 0; r < d; r++) q += W[j * d + r]! ** 2;
      M2 = Math.max(M2, q);
    }
    const M = Math.sqrt(M2);
    const t = (j: number) => {
      const x = [...W.subarray(j * d, j * d + d)].map((v) => v / M);
      x.push(b[j]! / M);
      x.push(Math.sqrt(Math.max(0, 1 - x.reduce((s, v) => s + v * v, 0))));
      return x;
    };
    for (let c = 0; c < C; c++) {
      const norm = Math.hypot(...cent.subarray(c * (d + 2), (c + 1) * (d + 2)));
      expect(norm).toBeCloseTo(1, 4);
    }
    let checked = 0;
    for (let c = 0; c < C; c++) {
      for (let e = off[c]!; e < off[c + 1]!; e++) {
        const x = t(mem[e]!);
        const score = (k: number) => x.reduce((s, v, r) => s + v * cent[k * (d + 2) + r]!, 0);
        const mine = score(c);
        for (let k = 0; k < C; k++) expect(score(k), `row ${mem[e]} cluster ${c} vs ${k}`).toBeLessThanOrEqual(mine + 1e-5);
        checked++;
      }
    }
    expect(checked).toBe(rows.length);
  });

  it('is deterministic in its seed', () => {
    expect(build(4)).toEqual(build(4));
    expect(build(5).cent).not.toEqual(build(4).cent);
  });

  it('builds the same index on any number of threads (the assignment passes split by blocks of 256 rows)', () => {
    // 2,900 rows: 12 blocks, the last one short; 30 Lloyd rounds' sums added in row order whatever the split.
    const n = 3000, r2 = new Xoshiro128(10);
    const W2 = Float32Array.from({ length: n * d }, (_, i) => (r2.nextFloat() - 0.5) * (1 + (Math.floor(i / d) % 7)));
    const b2 = Float32Array.from({ length: n }, () => r2.nextFloat() - 0.5);
    const rows2 = Uint32Array.from({ length: 2900 }, (_, i) => i + (i >= 1000 ? 100 : 0));
    const C2 = 40;
    const build2 = (threads?: number) => {
      const cent = new Float32Array(C2 * (d + 2)), off = new Uint32Array(C2 + 1), mem = new Uint32Array(rows2.length);
      native().netClusterBuild(W2, b2, d, rows2, C2, 30, 1500, 3, cent, off, mem, threads);
      return { cent, off, mem };
    };
    const one = build2();
    for (const t of [1, 2, 3, 16]) expect(build2(t), `${t} threads`).toEqual(one);
    expect(() => build2(0)).toThrow('threads must be in [1, 256] but is 0');
    expect(() => build2(257)).toThrow('threads must be in [1, 256] but is 257');
  });

  it('rejects bad arguments with clear errors', () => {
    const cent = new Float32Array(C * (d + 2)), off = new Uint32Array(C + 1), mem = new Uint32Array(rows.length);
    expect(() => native().netClusterBuild(W, b, d, rows, 0, 6, 1000, 1, cent, off, mem)).toThrow('sublinear native: cluster index: C must be in [1, rows] but is 0');
    expect(() => native().netClusterBuild(W, b, d, Uint32Array.of(3, 2), 1, 6, 1000, 1, cent, off, mem)).toThrow('cluster index: rows must be increasing ids < N');
    expect(() => native().netClusterBuild(W, b, d, Uint32Array.of(N), 1, 6, 1000, 1, cent, off, mem)).toThrow('cluster index: rows must be increasing ids < N');
    expect(() => native().netClusterBuild(W, b.subarray(1), d, rows, C, 6, 1000, 1, cent, off, mem)).toThrow('weights has');
  });
});

describe('sampled inference through the cluster index', () => {
  // 2,000 labels, trained briefly: the head (most frequent labels) and the clusters of the other seen
  // labels must recover the exact top-1 for most points at 10% of the outputs, and exactly at 100%.
  const train = synthesize({ shape: 'small', points: 4000, seed: 21 });
  // The next 600 points of the same stream (synthesize's first 4,000 rows are the training set).
  const test = subset(synthesize({ shape: 'small', points: 4600, seed: 21 }), Array.from({ length: 600 }, (_, i) => 4000 + i));
  const testRows = test;
  it('agrees with exact inference, more as the budget grows, and scores about the budget', async () => {
    const net = new Network({
      inputDim: train.features, seed: 3,
      layers: [{ size: 48 }, { size: train.labels, sampling: { hash: 'dwta', K: 4, L: 8, logQ: true } }],
    });
    await fit(net, train, { epochs: 3, workers: 0 });
    const exact = await net.predict(testRows, { k: 1, workers: 0 });
    const seen = new Set(train.labelIndices);
    const agree = async (candidates: number) => {
      const p = await net.predict(testRows, { k: 1, workers: 0, mode: 'sampled', candidates });
      let same = 0, exactSeen = 0;
      for (let i = 0; i < test.points; i++) {
        if (!seen.has(exact.labels[i]!)) continue;
        exactSeen++;
        if (p.labels[i] === exact.labels[i]) same++;
      }
      return { rate: same / exactSeen, scored: p.outputsScoredPerPoint };
    };
    const a = await agree(200), all = await agree(train.labels);
    expect(a.rate).toBeGreaterThan(0.85);
    expect(a.scored).toBeGreaterThanOrEqual(200);
    expect(a.scored).toBeLessThan(400);
    // Every seen label is a candidate: the top-1 is exact wherever it is a seen label.
    expect(all.rate).toBe(1);
    expect(all.scored).toBeLessThanOrEqual(seen.size);
    expect(exact.outputsScoredPerPoint).toBe(train.labels);
  });
  it('probes the clusters by centre score past the 8 scanned probes too, a NaN centre score last', async () => {
    const net = new Network({
      inputDim: train.features, seed: 5,
      layers: [{ size: 32 }, { size: train.labels, sampling: { hash: 'dwta', K: 4, L: 8, logQ: true } }],
    });
    await fit(net, train, { epochs: 1, workers: 0, validation: false });
    net.buildClusterIndex();
    const ix = net.spec.layers.at(-1)!.sampling!.index!;
    expect(ix.C).toBeGreaterThan(9);
    const w = ix.centroids.length / ix.C;
    // A budget of half the labels: more than 8 clusters probed, not all. A centre of NaN scores must rank as
    // one that scores far below every other (-1e30 on the query's constant coordinate [h, 1, 0]): probed
    // last, so neither is probed, and the predictions are the same (not where the NaN one ranked first).
    const probe = async () => net.predict(testRows, { k: 5, workers: 0, mode: 'sampled', candidates: Math.floor(train.labels / 2) });
    const c = 1;
    ix.centroids.fill(Number.NaN, c * w, (c + 1) * w);
    const withNaN = await probe();
    ix.centroids.fill(0, c * w, (c + 1) * w);
    ix.centroids[c * w + w - 2] = -1e30;
    const withLow = await probe();
    expect(Array.from(withNaN.labels)).toEqual(Array.from(withLow.labels));
    expect(Array.from(withNaN.scores)).toEqual(Array.from(withLow.scores));
    ix.centroids[c * w + w - 2] = 1e30; // probed first: other candidates, other probabilities
    const withHigh = await probe();
    expect(Array.from(withHigh.scores)).not.toEqual(Array.from(withLow.scores));
  });
});

describe('netShardProbe (the clusters a label-sharded rank probes)', () => {
  // Centres and inputs on a grid of eighths: every score [h, 1, 0] . centre is exact in float and in double, so
  // the brute-force order below is the order, ties included.
  const d = 8, C = 40, q = 7, w = d + 2;
  const rng = new Xoshiro128(3);
  const grid = () => Math.round((rng.nextFloat() - 0.5) * 16) / 8;
  const net = new Network({ inputDim: 10, seed: 2, layers: [{ size: d }, { size: 300, sampling: { hash: 'dwta', K: 2, L: 4 } }] });
  const H = Float32Array.from({ length: q * d }, grid);
  const sizes = Uint32Array.from({ length: C }, () => 1 + Math.floor(rng.nextFloat() * 9));
  const probe = (centroids: Float32Array, budget: number, headTotal = 3) => {
    const out = { counts: new Uint32Array(q), clusters: new Uint32Array(q * C) };
    native().netShardProbe(net.spec, H, { centroids, sizes, headTotal, budget }, out);
    return Array.from({ length: q }, (_, i) => Array.from(out.clusters.subarray(i * C, i * C + out.counts[i]!)));
  };
  const bruteForce = (centroids: Float32Array, budget: number, headTotal = 3) =>
    Array.from({ length: q }, (_, i) => {
      const score = (c: number) => {
        let z = centroids[c * w + d]!;
        for (let r = 0; r < d; r++) z += H[i * d + r]! * centroids[c * w + r]!;
        return Number.isNaN(z) ? -Infinity : z;
      };
      const order = Array.from({ length: C }, (_, c) => c).sort((x, y) => score(y) - score(x) || x - y);
      const taken: number[] = [];
      for (let t = headTotal, p = 0; p < C && t < budget; p++) taken.push(order[p]!), (t += sizes[order[p]!]!);
      return taken;
    });

  it('probes by descending centre score (ties by the smaller cluster) until the budget, past the first 32 sorted', () => {
    const cent = Float32Array.from({ length: C * w }, grid);
    for (const budget of [1, 4, 60, 150, 10_000]) expect(probe(cent, budget)).toEqual(bruteForce(cent, budget));
    expect(probe(cent, 10_000)[0]!.length).toBe(C);
  });
  it('ranks a centre of NaN scores last, in every position of the order', () => {
    const cent = Float32Array.from({ length: C * w }, grid);
    for (const c of [0, 7, C - 1]) {
      const withNaN = cent.slice();
      withNaN.fill(Number.NaN, c * w, (c + 1) * w);
      const got = probe(withNaN, 10_000);
      for (const row of got) expect(row.at(-1)).toBe(c);
      expect(got).toEqual(bruteForce(withNaN, 10_000));
      expect(probe(withNaN, 150)).toEqual(bruteForce(withNaN, 150));
    }
  });
});
