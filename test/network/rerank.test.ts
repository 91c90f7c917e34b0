// The output layer's re-ranker (native/net_rerank.cc, src/network/rerank.ts): the per-label SVMs against the
// optimality conditions of their primal problem on the examples a TypeScript reference picks, the scorer
// against brute force, the re-scoring of the network's candidates, fit()'s choice of the weight, and model
// file round trips.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { native } from '../../src/native/addon.js';
import { Network } from '../../src/network/network.js';
import { defaultConfig, resolveConfig, resolveRerank } from '../../src/network/config.js';
import { holdoutSplit, resolveValidation, selectionProblem } from '../../src/train/early-stop.js';
import { calibrationPairs, fitCalibration } from '../../src/network/calibration.js';
import { RERANK_WEIGHTS, rerankCombine, rerankProblem, rerankScores, trainRerank, type RerankState } from '../../src/network/rerank.js';
import { fileInfo } from '../../src/cli/info.js';
import { synthesize } from '../../src/datasets/synth.js';
import { subset } from '../../src/datasets/split-reader.js';
import { Xoshiro128 } from '../../src/util/rng.js';
import { randomData } from './helpers.js';
import type { RefData } from './reference.js';
import { kfoldSnapshotBytes, fit } from '../../src/train/fit-network.js';

const dirs: string[] = [];
afterAll(async () => {
  await Promise.all(dirs.map((d) => rm(d, { recursive: true, force: true })));
});
async function tmp(): Promise<string> {
  const d = await mkdtemp(join(tmpdir(), 'sublinear-rerank-'));
  dirs.push(d);
  return d;
}

/** Each point's labels plus `extra` random other labels, as a (points x S) shortlist padded with 0xFFFFFFFF. */
function randomShortlist(d: RefData, labels: number, S: number, seed: number): Uint32Array {
  const rng = new Xoshiro128(seed);
  const out = new Uint32Array(d.points * S).fill(0xffffffff);
  for (let i = 0; i < d.points; i++) {
    const set = new Set<number>();
    const want = 1 + rng.below(S);
    while (set.size < want) set.add(rng.below(labels));
    [...set].forEach((j, q) => (out[i * S + q] = j));
  }
  return out;
}

/** Row i of d as a dense unit-length vector over dim features. */
function unitRow(d: RefData, i: number, dim: number): Float64Array {
  const x = new Float64Array(dim);
  let s = 0;
  for (let q = d.offsets[i]!; q < d.offsets[i + 1]!; q++) {
    x[d.indices[q]!] += d.values[q]!;
    s += d.values[q]! * d.values[q]!;
  }
  if (s > 0) for (let f = 0; f < dim; f++) x[f] /= Math.sqrt(s);
  return x;
}

/** The reference's examples of label j: its points (+1) and the other points whose shortlist holds it (-1). */
function examples(d: RefData, short: Uint32Array, S: number, j: number): { i: number; y: number }[] {
  const out: { i: number; y: number }[] = [];
  for (let i = 0; i < d.points; i++) {
    const own = Array.from(d.labelIndices.subarray(d.labelOffsets[i]!, d.labelOffsets[i + 1]!));
    if (own.includes(j)) out.push({ i, y: 1 });
    else if (Array.from(short.subarray(i * S, i * S + S)).includes(j)) out.push({ i, y: -1 });
  }
  return out;
}

describe('rerankTrain: per-label squared-hinge SVMs', () => {
  const dim = 12, labels = 9, S = 4, C = 1.5;
  const data = randomData(40, dim, labels, 501, { maxNnz: 5 });
  const short = randomShortlist(data, labels, S, 502);
  const train = (threads: number, prune: number) =>
    native().rerankTrain({ data, rows: null, shortlist: short, S, labels, features: dim, C, eps: 1e-9, maxIter: 5000, prune, threads, seed: 3 });

  it('solves each label to the optimum of its primal problem on the reference examples', () => {
    const m = train(1, 0);
    let labelsChecked = 0;
    for (let j = 0; j < labels; j++) {
      const ex = examples(data, short, S, j);
      if (ex.length === 0) {
        expect(m.offsets[j + 1]! - m.offsets[j]!).toBe(0);
        expect(m.bias[j]).toBe(-1);
        continue;
      }
      // w~ = (w, b) over x~ = (x / |x|, 1): gradient of 1/2 |w~|^2 + C sum max(0, 1 - y w~.x~)^2 must vanish.
      const w = new Float64Array(dim + 1);
      for (let e = m.offsets[j]!; e < m.offsets[j + 1]!; e++) w[m.features[e]!] = m.weights[e]!;
      w[dim] = m.bias[j]!;
      const grad = Float64Array.from(w);
      for (const { i, y } of ex) {
        const x = unitRow(data, i, dim);
        let z = w[dim]!;
        for (let f = 0; f < dim; f++) z += w[f]! * x[f]!;
        const slack = 1 - y * z;
        if (slack <= 0) continue;
        for (let f = 0; f < dim; f++) grad[f] -= 2 * C * slack * y * x[f]!;
        grad[dim] -= 2 * C * slack * y;
      }
      const norm = Math.hypot(...grad);
      expect(norm, `label ${j}`).toBeLessThan(2e-4);
      // Non-trivial: the classifier separates something.
      expect(Math.hypot(...w.subarray(0, dim)), `label ${j}`).toBeGreaterThan(0.05);
      labelsChecked++;
    }
    expect(labelsChecked).toBeGreaterThan(6);
  });

  // 12 features: a label's examples touch most of them (its kept features are read off in feature order);
  // 3,000: a few dozen of them (sorted).
  it.each([12, 3000])('keeps only the features its examples touch, ascending, and drops |w| <= prune (%i features)', (width) => {
    const d = width === dim ? data : randomData(40, width, labels, 503, { maxNnz: 5 });
    const sl = width === dim ? short : randomShortlist(d, labels, S, 504);
    const fitted = (prune: number) =>
      native().rerankTrain({ data: d, rows: null, shortlist: sl, S, labels, features: width, C, eps: 1e-9, maxIter: 5000, prune, threads: 1, seed: 3 });
    const all = fitted(0), pruned = fitted(0.3);
    for (let j = 0; j < labels; j++) {
      const feats = Array.from(all.features.subarray(all.offsets[j]!, all.offsets[j + 1]!));
      const touched = new Set<number>();
      for (const { i } of examples(d, sl, S, j)) for (let q = d.offsets[i]!; q < d.offsets[i + 1]!; q++) touched.add(d.indices[q]!);
      // Unpruned, every touched feature is kept (none ends at exactly 0 here), in ascending order.
      expect(feats).toEqual([...touched].sort((a, b) => a - b));
      const kept = feats.filter((_, e) => Math.abs(all.weights[all.offsets[j]! + e]!) > 0.3);
      expect(Array.from(pruned.features.subarray(pruned.offsets[j]!, pruned.offsets[j + 1]!))).toEqual(kept);
    }
    expect(pruned.features.length).toBeLessThan(all.features.length);
  });

  it('gives the same classifiers on 1 and 3 threads, and on a subset of rows the same as on that subset alone', () => {
    const a = train(1, 0.01), b = train(3, 0.01);
    expect(Array.from(b.offsets)).toEqual(Array.from(a.offsets));
    expect(Array.from(b.weights)).toEqual(Array.from(a.weights));
    expect(Array.from(b.bias)).toEqual(Array.from(a.bias));
    // rows: only the first 20 points (their shortlist rows).
    const rows = Uint32Array.from({ length: 20 }, (_, i) => i);
    const sub = native().rerankTrain({ data, rows, shortlist: short.subarray(0, 20 * S), S, labels, features: dim, C, eps: 1e-9, maxIter: 5000, prune: 0, threads: 2, seed: 3 });
    const firstHalf: RefData = {
      ...data, points: 20, offsets: data.offsets.subarray(0, 21), labelOffsets: data.labelOffsets.subarray(0, 21),
    };
    const alone = native().rerankTrain({ data: firstHalf, rows: null, shortlist: short.subarray(0, 20 * S), S, labels, features: dim, C, eps: 1e-9, maxIter: 5000, prune: 0, threads: 1, seed: 3 });
    expect(Array.from(sub.weights)).toEqual(Array.from(alone.weights));
  });

  it('refuses bad arguments with a clear message', () => {
    const base = { data, rows: null, shortlist: short, S, labels, features: dim, C, eps: 0.1, maxIter: 10, prune: 0, threads: 1, seed: 1 };
    const t = (o: object) => () => native().rerankTrain({ ...base, ...o } as typeof base);
    expect(t({ shortlist: short.subarray(1) })).toThrow('sublinear native: shortlist must hold rows.length x S ids');
    expect(t({ labels: 3 })).toThrow('sublinear native: data holds a label id >= labels');
    expect(t({ features: 4 })).toThrow('sublinear native: data holds a feature id >= features');
    expect(t({ rows: Uint32Array.of(0, 40) , shortlist: short.subarray(0, 2 * S) })).toThrow('sublinear native: rows holds a point id >= data.points');
    expect(t({ C: 0 })).toThrow('sublinear native: C must be finite and > 0');
    expect(t({ maxIter: 0 })).toThrow('sublinear native: maxIter must be positive');
    expect(t({ threads: 0 })).toThrow('sublinear native: threads must be in [1, 256]');
  });
});

describe('rerankScore', () => {
  const dim = 10, labels = 6;
  const data = randomData(15, dim, labels, 601);
  const rng = new Xoshiro128(602);
  // A random model: each label a random subset of features.
  const off = [0], feats: number[] = [], wts: number[] = [];
  for (let j = 0; j < labels; j++) {
    for (let f = 0; f < dim; f++) if (rng.nextFloat() < 0.5) feats.push(f), wts.push(Math.fround(rng.nextFloat() * 2 - 1));
    off.push(feats.length);
  }
  const model = { offsets: Uint32Array.from(off), features: Uint32Array.from(feats), weights: Float32Array.from(wts), bias: Float32Array.from({ length: labels }, () => Math.fround(rng.nextFloat() - 0.5)) };
  const S = 3;
  const cand = Uint32Array.from({ length: data.points * S }, (_, e) => (e % 7 === 6 ? 0xffffffff : (e * 5) % labels));

  it('matches brute force on unit-length rows; a missing candidate scores -inf', () => {
    const s = rerankScores(model, data as never, null, cand, S, dim, 2);
    for (let i = 0; i < data.points; i++) {
      const x = unitRow(data, i, dim);
      for (let q = 0; q < S; q++) {
        const j = cand[i * S + q]!;
        if (j === 0xffffffff) {
          expect(s[i * S + q]).toBe(-Infinity);
          continue;
        }
        let want = model.bias[j]!;
        for (let e = model.offsets[j]!; e < model.offsets[j + 1]!; e++) want += model.weights[e]! * x[model.features[e]!]!;
        expect(s[i * S + q]).toBeCloseTo(want, 5);
      }
    }
  });

  it('matches brute force on rows of 1, about 100 and about 300 distinct features (its three ways to read a row)', () => {
    // A label that is the candidate of one point only is scored point by point (each label here: its own
    // copy per row). Rows of at most 255 distinct features are read through a byte map, longer ones through
    // a dense row; a label with more than 8 weights per row feature is looked up by binary search. One row of
    // each.
    const D = 400, L = 5, r = new Xoshiro128(611);
    const rowsF = [[7], Array.from({ length: 100 }, (_, i) => (i * 3) % D), Array.from({ length: 300 }, (_, i) => (i * 7) % D)];
    const offsets = [0], indices: number[] = [], values: number[] = [];
    for (const fs of rowsF) {
      for (const f of fs) indices.push(f), values.push(Math.fround(r.nextFloat() + 0.1));
      indices.push(fs[0]!), values.push(0.5); // a repeated feature: its values add up
      offsets.push(indices.length);
    }
    const d = { points: 3, offsets: Uint32Array.from(offsets), indices: Uint32Array.from(indices), values: Float32Array.from(values), labelOffsets: new Uint32Array(4), labelIndices: new Uint32Array(0) };
    const mo = [0], mf: number[] = [], mw: number[] = [];
    for (let j = 0; j < L; j++) {
      const p = j === 0 ? 0.9 : 0.2; // label 0: 360 weights, more than 8 per feature of row 0
      for (let f = 0; f < D; f++) if (f === 7 || r.nextFloat() < p) mf.push(f), mw.push(Math.fround(r.nextFloat() * 2 - 1));
      mo.push(mf.length);
    }
    // Three copies of the L labels, row i's candidates the i-th copy: every label a candidate once.
    const nnz = mf.length;
    const m = {
      offsets: Uint32Array.from({ length: 3 * L + 1 }, (_, j) => Math.floor(j / L) * nnz + mo[j % L]!),
      features: Uint32Array.from([...mf, ...mf, ...mf]), weights: Float32Array.from([...mw, ...mw, ...mw]), bias: new Float32Array(3 * L),
    };
    const c = Uint32Array.from({ length: 3 * L }, (_, e) => e);
    const s = rerankScores(m, d as never, null, c, L, D, 1);
    for (let i = 0; i < 3; i++) {
      const x = unitRow(d, i, D);
      for (let j = 0; j < L; j++) {
        let want = 0;
        for (let e = mo[j]!; e < mo[j + 1]!; e++) want += mw[e]! * x[mf[e]!]!;
        expect(s[i * L + j], `row ${i}, label ${j}`).toBeCloseTo(want, 4);
      }
    }
  });

  it('scores the labels of several points label by label, as brute force, next to single ones, on 1 and 3 threads', () => {
    // 300 points of 40 candidates over 60 labels: most labels the candidate of many points (some of them
    // twice in a row), a few of one point only, some places none.
    const D = 500, L = 60, n = 300, S = 40, r = new Xoshiro128(621);
    const rowsData = randomData(n, D, 4, 622);
    const mo = [0], mf: number[] = [], mw: number[] = [];
    for (let j = 0; j < L; j++) {
      const p = j % 10 === 0 ? 0.9 : 0.1; // a few long labels
      for (let f = 0; f < D; f++) if (r.nextFloat() < p) mf.push(f), mw.push(Math.fround(r.nextFloat() * 2 - 1));
      mo.push(mf.length);
    }
    const m = { offsets: Uint32Array.from(mo), features: Uint32Array.from(mf), weights: Float32Array.from(mw), bias: Float32Array.from({ length: L }, () => Math.fround(r.nextFloat() - 0.5)) };
    const c = Uint32Array.from({ length: n * S }, (_, e) => (e % 13 === 5 ? 0xffffffff : e === 7 ? 58 : e === 9 ? 59 : r.below(L - 2)));
    const want = new Float32Array(n * S);
    for (let i = 0; i < n; i++) {
      const x = unitRow(rowsData, i, D);
      for (let q = 0; q < S; q++) {
        const j = c[i * S + q]!;
        if (j === 0xffffffff) { want[i * S + q] = -Infinity; continue; }
        let v = m.bias[j]!;
        for (let e = mo[j]!; e < mo[j + 1]!; e++) v += mw[e]! * x[mf[e]!]!;
        want[i * S + q] = v;
      }
    }
    for (const threads of [1, 3]) {
      const s = rerankScores(m, rowsData as never, null, c, S, D, threads);
      for (let e = 0; e < n * S; e++) {
        if (want[e] === -Infinity) expect(s[e]).toBe(-Infinity);
        else expect(s[e], `pair ${e}`).toBeCloseTo(want[e]!, 4);
      }
    }
    // A feature id out of range in a label scored label by label is refused as in one scored point by point.
    const bad = { ...m, features: Uint32Array.from(mf, (f, e) => (e === mo[1]! ? D : f)) };
    expect(() => rerankScores(bad, rowsData as never, null, c, S, D, 2)).toThrow('sublinear native: model.features holds a feature id >= features');
  });

  it('refuses a candidate or a feature out of range, and a damaged model', () => {
    const out = new Float32Array(cand.length);
    const base = { data: data as never, rows: null, candidates: cand, S, features: dim, model, threads: 1, out };
    const t = (o: object) => () => native().rerankScore({ ...base, ...o } as typeof base);
    expect(t({ candidates: Uint32Array.from(cand, () => labels) })).toThrow('sublinear native: candidates holds a label id >= the model\'s labels');
    expect(t({ model: { ...model, features: Uint32Array.from(feats, () => dim) } })).toThrow('sublinear native: model.features holds a feature id >= features');
    expect(t({ model: { ...model, offsets: Uint32Array.from(off, (v, j) => (j === labels ? v + 1 : v)) } })).toThrow('sublinear native: model.offsets must run from 0 to features.length');
    expect(t({ out: new Float32Array(2) })).toThrow('sublinear native: candidates and out must hold rows.length x S entries');
  });
});

describe('rerankCombine', () => {
  it('orders by log p + weight x s, keeps the network order on ties, and shares out the shortlist mass', () => {
    const S = 4, k = 3;
    const labels = Uint32Array.of(7, 3, 5, 0xffffffff, 1, 2, 3, 4);
    const probs = Float32Array.of(0.5, 0.2, 0.1, 0, 0.25, 0.25, 0.25, 0.25);
    const s = Float32Array.of(-1, 1, 0, -Infinity, 0, 0, 0, 0);
    const outL = new Uint32Array(2 * k), outS = new Float32Array(2 * k);
    rerankCombine(labels, probs, s, S, 1, k, outL, outS);
    // point 0: log .5 - 1 = -1.69, log .2 + 1 = -0.61, log .1 = -2.30
    expect(Array.from(outL.subarray(0, k))).toEqual([3, 7, 5]);
    const e = [Math.exp(Math.log(0.2) + 1), Math.exp(Math.log(0.5) - 1), 0.1];
    const tot = e.reduce((a, b) => a + b);
    e.forEach((v, q) => expect(outS[q]).toBeCloseTo((0.8 * v) / tot, 6));
    // point 1: all equal, network order kept
    expect(Array.from(outL.subarray(k))).toEqual([1, 2, 3]);
    // weight 0: the network's order and probabilities
    rerankCombine(labels, probs, s, S, 0, k, outL, outS);
    expect(Array.from(outL.subarray(0, k))).toEqual([7, 3, 5]);
    expect(outS[0]).toBeCloseTo(0.5, 6);
    // k > 16 sorts instead of scanning: the same order
    const rng = new Xoshiro128(77);
    const S2 = 40, L2 = Uint32Array.from({ length: 3 * S2 }, (_, e) => e), P2 = Float32Array.from({ length: 3 * S2 }, () => rng.nextFloat() / S2);
    const s2 = Float32Array.from({ length: 3 * S2 }, () => Math.fround(rng.nextFloat() * 2 - 1));
    const a5 = new Uint32Array(15), a5s = new Float32Array(15), a20 = new Uint32Array(60), a20s = new Float32Array(60);
    rerankCombine(L2, P2, s2, S2, 2, 5, a5, a5s);
    rerankCombine(L2, P2, s2, S2, 2, 20, a20, a20s);
    for (let i = 0; i < 3; i++) {
      expect(Array.from(a20.subarray(i * 20, i * 20 + 5))).toEqual(Array.from(a5.subarray(i * 5, i * 5 + 5)));
      expect(Array.from(a20s.subarray(i * 20, i * 20 + 5))).toEqual(Array.from(a5s.subarray(i * 5, i * 5 + 5)));
    }
    // fewer candidates than k
    const l1 = new Uint32Array(5), s1 = new Float32Array(5);
    rerankCombine(labels.subarray(0, 4), probs.subarray(0, 4), s.subarray(0, 4), S, 1, 5, l1, s1);
    expect(Array.from(l1.subarray(3))).toEqual([0xffffffff, 0xffffffff]);
  });

  it('equals the TypeScript reference on random shortlists (missing candidates, ties, k from 1 to S)', () => {
    const rng = new Xoshiro128(91);
    const rows = 200, S = 32;
    const labels = Uint32Array.from({ length: rows * S }, (_, e) => (rng.nextFloat() < 0.05 ? 0xffffffff : e % 5000));
    const probs = Float32Array.from({ length: rows * S }, () => Math.fround(rng.nextFloat() / S));
    // a few exact ties between candidates of a row, and scores of the classifiers' range
    const s = Float32Array.from({ length: rows * S }, (_, e) => (e % 7 === 3 ? 0.5 : Math.fround(rng.nextFloat() * 4 - 2)));
    for (let e = 0; e < rows * S; e += 11) probs[e] = probs[e + 1] ?? 0;
    for (const [k, weight] of [[1, 1], [5, 0], [5, 2], [17, 0.25], [32, 4]] as const) {
      const gotL = new Uint32Array(rows * k), gotS = new Float32Array(rows * k);
      const wantL = new Uint32Array(rows * k), wantS = new Float32Array(rows * k);
      rerankCombine(labels, probs, s, S, weight, k, gotL, gotS);
      combineReference(labels, probs, s, S, weight, k, wantL, wantS);
      expect(Array.from(gotL)).toEqual(Array.from(wantL));
      for (let e = 0; e < rows * k; e++) expect(gotS[e]).toBeCloseTo(wantS[e]!, 6);
    }
  });

  it('refuses shapes that do not match', () => {
    const t = (o: Record<string, unknown>) => () =>
      native().rerankCombine({
        labels: new Uint32Array(8), probs: new Float32Array(8), scores: new Float32Array(8), S: 4, weight: 1, k: 2,
        outLabels: new Uint32Array(4), outScores: new Float32Array(4), ...o,
      });
    expect(t({})).not.toThrow();
    expect(t({ probs: new Float32Array(7) })).toThrow('sublinear native: labels, probs and scores must hold rows x S entries each');
    expect(t({ S: 3 })).toThrow('sublinear native: labels, probs and scores must hold rows x S entries each');
    expect(t({ outScores: new Float32Array(6) })).toThrow('sublinear native: outLabels and outScores must hold rows x k entries');
    expect(t({ k: 0 })).toThrow('sublinear native: S and k must be positive');
    expect(t({ weight: NaN })).toThrow('sublinear native: weight must be finite');
  });
});


describe('re-ranker in fit(), predict() and model files', () => {
  // Rows 0..2400 train, 2400..2700 test (synthesize gives both files' rows in order).
  const all = synthesize({ shape: 'tiny', points: 2700, seed: 11 });
  const train = subset(all, Array.from({ length: 2400 }, (_, i) => i));
  const test = subset(all, Array.from({ length: 300 }, (_, i) => 2400 + i));
  const shape = { features: all.features, labels: all.labels };
  const small = (rerank: object) => {
    const c = defaultConfig(train, 3);
    c.layers[0]!.size = 32;
    c.layers[1]!.rerank = rerank;
    return c;
  };

  it('is on in the defaults for dense and sampled outputs', () => {
    expect(defaultConfig({ features: 10, labels: 100 }).layers.at(-1)!.rerank).toEqual({});
    expect(defaultConfig({ features: 10, labels: 100000 }).layers.at(-1)!.rerank).toEqual({});
  });

  let trained: Network;
  it('trains after the network, chooses the weight on the held-out points and applies it in predict()', async () => {
    const net = new Network(small({}));
    const st = await fit(net, train, { workers: 0, validation: { refitMaxPoints: 0 } });
    const r = st.rerank!;
    expect(r.skipped).toBeUndefined();
    expect(r.tried.map((t) => t.weight)).toEqual([...RERANK_WEIGHTS]);
    expect(r.points).toBe(st.validationPoints);
    const best = r.tried.reduce((a, t) => (t.score > a.score ? t : a));
    expect(r.weight).toBe(best.weight);
    // Force it on (whatever the held-out choice) to check how predict() applies it.
    if (!net.rerank) throw new Error('this data should let the classifiers help');
    const weight = net.rerank.weight;
    const got = await net.predict(test, { k: 5, workers: 0 });
    const rr = net.rerank;
    net.rerank = null;
    const plain = await net.predict(test, { k: rr.shortlist, workers: 0 });
    net.rerank = rr;
    const s = rerankScores(rr, test, null, plain.labels, rr.shortlist, shape.features, 1);
    const wantL = new Uint32Array(test.points * 5), wantS = new Float32Array(test.points * 5);
    rerankCombine(plain.labels, plain.scores, s, rr.shortlist, weight, 5, wantL, wantS);
    expect(Array.from(got.labels)).toEqual(Array.from(wantL));
    expect(Array.from(got.scores)).toEqual(Array.from(wantS));
    // The same on two worker threads.
    const threads = await net.predict(test, { k: 5, workers: 2, chunk: 64 });
    expect(Array.from(threads.labels)).toEqual(Array.from(wantL));
    expect(Array.from(threads.scores)).toEqual(Array.from(wantS));
    // The calibration is fitted on the held-out predictions the weight was chosen on (no second pass over the
    // slice): the same as one fitted on the slice predicted now, with the re-ranker applied.
    const v = resolveValidation({ refitMaxPoints: 0 });
    const held = subset(train, holdoutSplit(train.points, v.fraction, v.maxPoints, net.seed).holdout);
    const cal = net.calibration!;
    net.calibration = null;
    const pred = await net.predict(held, { k: cal.shortlist, workers: 0 });
    net.calibration = cal;
    const again = fitCalibration(calibrationPairs(pred.labels, pred.scores, cal.shortlist, held), cal.shortlist);
    expect([...again.weights, again.bias, again.threshold]).toEqual([...cal.weights, cal.bias, cal.threshold]);
    trained = net;
  });

  it('after a held-out selection on a copy (refitMaxPoints), takes the copy\'s weight and trains on all points', async () => {
    const net = new Network(small({}));
    const st = await fit(net, train, { workers: 0, validation: { refitMaxPoints: 20_000 } });
    const sel = st.selection!;
    if (sel.method !== 'holdout' || !sel.refit || !sel.rerank) throw new Error(`expected a refit with a re-ranker weight, got ${JSON.stringify(sel)}`);
    expect(st.samples).toBe(sel.epochs * train.points);
    const r = st.rerank!;
    expect(r.weight).toBe(sel.rerank.weight);
    expect(r.tried).toEqual(sel.rerank.tried);
    expect(r.points).toBe(sel.points);
    expect(net.rerank?.weight ?? 0).toBe(sel.rerank.weight);
    if (r.weight > 0) expect(r.entries).toBeGreaterThan(0);
  });

  it('survives a save and load bit for bit, and info shows it', async () => {
    const path = join(await tmp(), 'm.sl');
    await trained.save(path);
    const back = await Network.load(path);
    expect(back.rerank).not.toBeNull();
    expect(Array.from(back.rerank!.weights)).toEqual(Array.from(trained.rerank!.weights));
    expect(back.rerank!.weight).toBe(trained.rerank!.weight);
    const a = await trained.predict(test, { k: 5, workers: 0 }), b = await back.predict(test, { k: 5, workers: 0 });
    expect(Array.from(b.labels)).toEqual(Array.from(a.labels));
    expect((await fileInfo(path)).rerank).toEqual({ weight: trained.rerank!.weight, shortlist: 32, entries: trained.rerank!.features.length });
  });

  it('refuses a model file whose re-ranker is damaged, naming the file and the problem', async () => {
    const dir = await tmp();
    const bad: RerankState = { ...trained.rerank!, features: Uint32Array.from(trained.rerank!.features, (f, e) => (e === 0 ? shape.features : f)) };
    expect(rerankProblem(bad, shape.labels, shape.features)).toBe(`the re-ranker names feature ${shape.features} (the network has ${shape.features})`);
    const net = await Network.load(await (async () => { const p = join(dir, 'ok.sl'); await trained.save(p); return p; })());
    net.rerank = bad;
    const path = join(dir, 'bad.sl');
    await net.save(path);
    await expect(Network.load(path)).rejects.toThrow(`${path}: the re-ranker names feature ${shape.features} (the network has ${shape.features})`);
    expect(rerankProblem({ ...trained.rerank!, bias: new Float32Array(3) }, shape.labels, shape.features)).toBe(`the re-ranker has 3 labels but the network has ${shape.labels}`);
    // Sections whose lengths disagree with the meta's count of entries.
    const n = trained.rerank!.features.length;
    net.rerank = { ...trained.rerank!, weights: trained.rerank!.weights.subarray(1) };
    const short = join(dir, 'short.sl');
    await net.save(short);
    await expect(Network.load(short)).rejects.toThrow(`${short}: section "rerank.weights" holds ${n - 1} values but must hold ${n}`);
    // Features out of order within a label (the scorer's lookup relies on the order).
    const j = Array.from({ length: shape.labels }, (_, l) => l).find((l) => trained.rerank!.offsets[l + 1]! - trained.rerank!.offsets[l]! >= 2)!;
    const swapped = Uint32Array.from(trained.rerank!.features);
    const e0 = trained.rerank!.offsets[j]!;
    [swapped[e0], swapped[e0 + 1]] = [swapped[e0 + 1]!, swapped[e0]!];
    expect(rerankProblem({ ...trained.rerank!, features: swapped }, shape.labels, shape.features)).toBe(`the re-ranker's features of label ${j} are not strictly ascending`);
  });

  it('is not trained without held-out points unless a weight is given; with one it is applied as given', async () => {
    const a = new Network(small({}));
    const sa = await fit(a, train, { workers: 0, epochs: 2 });
    expect(sa.rerank?.skipped).toBe('no held-out points to choose its weight (rerank.weight trains it without them)');
    expect(a.rerank).toBeNull();
    const b = new Network(small({ weight: 1.5, shortlist: 8 }));
    const sb = await fit(b, train, { workers: 0, epochs: 2 });
    expect(sb.rerank).toMatchObject({ weight: 1.5, points: 0, tried: [] });
    expect(b.rerank).toMatchObject({ weight: 1.5, shortlist: 8 });
    // A second fit drops the classifiers of the old weights and trains new ones.
    const before = b.rerank!.weights;
    await fit(b, train, { workers: 0, epochs: 1 });
    expect(b.rerank!.weights).not.toBe(before);
  });

  it('on a small training set, takes its weight from the k-fold selection (every point scored once)', async () => {
    const few = subset(train, Array.from({ length: 400 }, (_, i) => i));
    const net = new Network(small({}));
    const st = await fit(net, few, { workers: 0 });
    const sel = st.selection!;
    expect(sel.method).toBe('kfold');
    if (sel.method !== 'kfold') return;
    const k = sel.rerank!;
    expect(k.tried.map((t) => t.weight)).toEqual([...RERANK_WEIGHTS]);
    expect(k.weight).toBe(k.tried.reduce((a, t) => (t.score > a.score ? t : a)).weight);
    // Scores are means over the 400 points: multiples of 1/400 for P@1.
    for (const t of k.tried) expect(Math.abs(t.p1 * 400 - Math.round(t.p1 * 400))).toBeLessThan(1e-6);
    expect(st.rerank).toMatchObject({ weight: k.weight, points: 400, tried: k.tried });
    expect(net.rerank?.weight ?? 0).toBe(k.weight);
    expect(selectionProblem(sel)).toBeNull();
    expect(selectionProblem({ ...sel, rerank: { weight: -1, tried: [] } })).toBe('invalid rerank');
    // A given weight skips the choice (no snapshots, no rerank in the selection report).
    const fixed = new Network(small({ weight: 0.5 }));
    const sf = await fit(fixed, few, { workers: 0 });
    expect(sf.selection?.method === 'kfold' && sf.selection.rerank).toBeFalsy();
    expect(fixed.rerank?.weight).toBe(0.5);
    expect(kfoldSnapshotBytes(resolveConfig(small({})))).toBe(4 * (shape.features * 32 + 32 + 32 * shape.labels + shape.labels));
    expect(kfoldSnapshotBytes(resolveConfig(small({ weight: 1 })))).toBe(0);
  });

  it('validates its configuration', () => {
    expect(resolveRerank({}, 'r')).toEqual({ shortlist: 32, shortlistRows: 50000, C: 1, prune: 0.1, maxIter: 10 });
    expect(() => resolveRerank({ shortlist: 0 }, 'r')).toThrow('r.shortlist');
    expect(() => resolveRerank({ C: -1 }, 'r')).toThrow('Expected finite number > 0 for r.C but received -1');
    expect(() => resolveRerank({ weight: Number.NaN }, 'r')).toThrow('Expected finite number >= 0 for r.weight');
    expect(() => resolveRerank({ shortlst: 3 } as never, 'r')).toThrow(/shortlst/);
    expect(() => new Network({ inputDim: 5, layers: [{ size: 4, rerank: {} }, { size: 3 }] })).toThrow('layers[0].rerank: only the output layer has a re-ranker');
  });
});

describe('trainRerank (TypeScript wrapper)', () => {
  it('only: each listed label\'s classifier exactly as without it, the others empty (their examples are not collected)', () => {
    const data = randomData(60, 12, 8, 711);
    const short = randomShortlist(data, 8, 4, 712);
    const cfg = resolveRerank({ shortlist: 4 }, 'r');
    const all = trainRerank(data as never, null, short, 4, { labels: 8, features: 12 }, cfg, 2, 5);
    const only = Uint32Array.of(1, 4, 6);
    const part = trainRerank(data as never, null, short, 4, { labels: 8, features: 12 }, cfg, 1, 5, only);
    for (let j = 0; j < 8; j++) {
      const a = [...all.features.subarray(all.offsets[j]!, all.offsets[j + 1]!)], b = [...part.features.subarray(part.offsets[j]!, part.offsets[j + 1]!)];
      if (only.includes(j)) {
        expect(b.length).toBeGreaterThan(0);
        expect(b).toEqual(a);
        expect([...part.weights.subarray(part.offsets[j]!, part.offsets[j + 1]!)]).toEqual([...all.weights.subarray(all.offsets[j]!, all.offsets[j + 1]!)]);
        expect(part.bias[j]).toBe(all.bias[j]);
      } else {
        expect(b).toEqual([]);
        expect(part.bias[j]).toBe(-1);
      }
    }
  });

  it('passes the network shape and config through, weight 0 until chosen', () => {
    const data = randomData(20, 8, 5, 701);
    const short = randomShortlist(data, 5, 3, 702);
    const r = trainRerank(data as never, null, short, 3, { labels: 6, features: 9 }, resolveRerank({ shortlist: 3 }, 'r'), 1, 1);
    expect(r.bias.length).toBe(6);
    expect(r.bias[5]).toBe(-1); // label 5 has no example
    expect(r.weight).toBe(0);
    expect(r.shortlist).toBe(3);
  });
});

// The reference the native rerankCombine is tested against (it was the implementation before).
function combineReference(
  labels: Uint32Array, probs: Float32Array, s: Float32Array, S: number, weight: number, k: number,
  outLabels: Uint32Array, outScores: Float32Array,
): void {
  const points = labels.length / S;
  const comb = new Float64Array(S);
  const order = new Uint32Array(S);
  const taken = new Uint8Array(S);
  for (let i = 0; i < points; i++) {
    const base = i * S;
    let n = 0, mass = 0, mx = -Infinity;
    for (let q = 0; q < S; q++) {
      if (labels[base + q] === 0xffffffff) continue;
      const p = probs[base + q]!;
      mass += p;
      const c = Math.log(Math.max(p, 1e-30)) + weight * s[base + q]!;
      comb[n] = c;
      order[n] = q;
      if (c > mx) mx = c;
      n++;
    }
    let sum = 0;
    for (let t = 0; t < n; t++) sum += Math.exp(comb[t]! - mx);
    taken.fill(0, 0, n);
    // The k best: repeated scans for a handful, a sort beyond (the first of equal scores wins: the network's order).
    const sorted = k > 16 ? Array.from({ length: n }, (_, t) => t).sort((a, b) => comb[b]! - comb[a]! || a - b) : null;
    for (let q = 0; q < k; q++) {
      let best = -1;
      if (sorted) best = q < n ? sorted[q]! : -1;
      else for (let t = 0; t < n; t++) if (!taken[t] && (best < 0 || comb[t]! > comb[best]!)) best = t;
      if (best < 0) {
        outLabels[i * k + q] = 0xffffffff;
        outScores[i * k + q] = 0;
        continue;
      }
      taken[best] = 1;
      outLabels[i * k + q] = labels[base + order[best]!]!;
      outScores[i * k + q] = (mass * Math.exp(comb[best]! - mx)) / sum;
    }
  }
}
