// Shared fixtures of the network tests: tiny datasets, networks, and hand-made LSH sampling whose
// candidate set is known in advance.
import { expect } from 'vitest';
import { native } from '../../src/native/addon.js';
import { allocateTables } from '../../src/lsh/index.js';
import type { HashSpec, QuerySpec } from '../../src/native/lsh-types.js';
import type { LayerSampling, LayerState, NetSpec } from '../../src/native/network-types.js';
import { allocateLayers, type StateLayerConfig } from '../../src/network/state.js';
import { Xoshiro128 } from '../../src/util/rng.js';
import type { RefData } from './reference.js';

/** A random CSR dataset: `points` rows of up to `maxNnz` features < dim, labels < numLabels with the given counts. */
export function randomData(
  points: number,
  dim: number,
  numLabels: number,
  seed: number,
  opts: { maxNnz?: number; labelCounts?: number[]; shared?: boolean } = {},
): RefData {
  const rng = new Xoshiro128(seed);
  const maxNnz = opts.maxNnz ?? Math.min(dim, 6);
  const rows: { f: number[]; v: number[]; l: number[] }[] = [];
  for (let p = 0; p < points; p++) {
    const fs = new Set<number>();
    const nnz = 1 + rng.below(maxNnz);
    while (fs.size < nnz) fs.add(rng.below(dim));
    const f = [...fs].sort((a, b) => a - b);
    const v = f.map(() => Math.fround(0.2 + rng.nextFloat()));
    const nl = opts.labelCounts ? opts.labelCounts[p % opts.labelCounts.length]! : 1 + rng.below(3);
    const ls = new Set<number>();
    while (ls.size < Math.min(nl, numLabels)) ls.add(rng.below(numLabels));
    rows.push({ f, v, l: [...ls].sort((a, b) => a - b) });
  }
  return toCsr(rows, opts.shared ?? false);
}

export function toCsr(rows: { f: number[]; v: number[]; l: number[] }[], shared = false): RefData {
  const nnz = rows.reduce((a, r) => a + r.f.length, 0);
  const nlab = rows.reduce((a, r) => a + r.l.length, 0);
  const u32 = (n: number) => (shared ? new Uint32Array(new SharedArrayBuffer(Math.max(1, n) * 4), 0, n) : new Uint32Array(n));
  const f32 = (n: number) => (shared ? new Float32Array(new SharedArrayBuffer(Math.max(1, n) * 4), 0, n) : new Float32Array(n));
  const d: RefData = {
    points: rows.length,
    offsets: u32(rows.length + 1),
    indices: u32(nnz),
    values: f32(nnz),
    labelOffsets: u32(rows.length + 1),
    labelIndices: u32(nlab),
  };
  let q = 0, e = 0;
  rows.forEach((r, i) => {
    r.f.forEach((f, j) => {
      d.indices[q] = f;
      d.values[q++] = r.v[j]!;
    });
    r.l.forEach((l) => (d.labelIndices[e++] = l));
    d.offsets[i + 1] = q;
    d.labelOffsets[i + 1] = e;
  });
  return d;
}

/** A network inputDim -> sizes..., hidden relu (or `hidden`), last softmax, Glorot init from `seed`. */
export function makeNet(inputDim: number, sizes: number[], seed: number, hidden: StateLayerConfig['activation'] = 'relu'): NetSpec {
  const layers = allocateLayers({
    inputDim,
    seed,
    layers: sizes.map((size, k) => ({ size, activation: k === sizes.length - 1 ? 'softmax' : hidden })),
  });
  return { layers };
}

/** Random non-zero biases (the allocator starts them at 0), so that bias paths are exercised. */
export function randomizeBiases(net: NetSpec, seed: number): void {
  const rng = new Xoshiro128(seed);
  for (const l of net.layers) for (let j = 0; j < l.outDim; j++) l.bias[j] = Math.fround(0.2 * (rng.nextFloat() - 0.5));
}

/**
 * Sampling whose candidate set is fixed: SimHash with K = 1 and every projection summing all dims with sign
 * +1, so a non-negative (ReLU) input always hashes to key 1 in every table; bucket 1 of every table holds
 * `cands`, bucket 0 holds every other neuron. tables.keys agree with the buckets (as after a real rebuild).
 */
export function fixedSampling(inDim: number, N: number, cands: number[], opts: { L?: number; minActive?: number; budget?: number } = {}): LayerSampling {
  const L = opts.L ?? 3;
  const offs = new Uint32Array(L + 1), dims = new Uint32Array(L * inDim), signs = new Float32Array(L * inDim).fill(1);
  for (let m = 0; m < L; m++) {
    offs[m + 1] = (m + 1) * inDim;
    for (let i = 0; i < inDim; i++) dims[m * inDim + i] = i;
  }
  const hash: HashSpec = { family: 0, K: 1, L, dim: inDim, bitsPerHash: 1, rangeBits: 1, binSize: 0, seed: 0, projOffsets: offs, projDims: dims, projSigns: signs };
  const tables = allocateTables({ L, N, rangeBits: 1, bucketSize: N, slack: 0, policy: 'fifo' });
  const inC = new Set(cands);
  const rest = [...Array(N).keys()].filter((j) => !inC.has(j));
  for (let t = 0; t < L; t++) {
    const base = t * tables.tableCapacity;
    // bucket 0: rest, bucket 1: cands
    tables.offsets[t * 3] = 0;
    tables.offsets[t * 3 + 1] = rest.length;
    tables.offsets[t * 3 + 2] = N;
    tables.fill[t * 2] = rest.length;
    tables.fill[t * 2 + 1] = cands.length;
    rest.forEach((j, i) => (tables.ids[base + i] = j));
    cands.forEach((j, i) => (tables.ids[base + rest.length + i] = j));
    for (let j = 0; j < N; j++) tables.keys[t * N + j] = inC.has(j) ? 1 : 0;
  }
  const query: QuerySpec = { mode: 0, budget: opts.budget ?? 0xffffffff, minFreq: 1, minActive: opts.minActive ?? 0 };
  return { hash, tables, query };
}

/** Deep copy of the mutable state of a network (weights, moments, steps), sharing nothing. */
export function snapshot(net: NetSpec): LayerState[] {
  return net.layers.map((l) => ({
    ...l,
    weights: l.weights.slice(),
    bias: l.bias.slice(),
    mWeights: l.mWeights.slice(),
    vWeights: l.vWeights.slice(),
    mBias: l.mBias.slice(),
    vBias: l.vBias.slice(),
    rowSteps: l.rowSteps.slice(),
    biasSteps: l.biasSteps.slice(),
  }));
}

/** Largest |a - b| / max(1, |b|) (relative for large values, absolute for small ones). */
export function maxRelDiff(a: ArrayLike<number>, b: ArrayLike<number>): number {
  if (a.length !== b.length) throw new Error(`length ${a.length} vs ${b.length}`);
  let worst = 0;
  for (let i = 0; i < a.length; i++) worst = Math.max(worst, Math.abs(a[i]! - b[i]!) / Math.max(1, Math.abs(b[i]!)));
  return worst;
}

export function ids(n: number, start = 0): Uint32Array {
  return Uint32Array.from({ length: n }, (_, i) => start + i);
}

/**
 * Compares `analytic` with central differences (step 1e-3) of `loss` over every element of `params`
 * (vitest expect: |fd - g| <= 1e-2 |g| + 2e-4). Returns how many gradients are clearly non-zero
 * (|g| > 1e-3), so that the caller can require a meaningful check.
 */
export function checkFiniteDifferences(params: Float32Array, analytic: Float32Array, loss: () => number, what: string): number {
  const eps = 1e-3;
  let nonzero = 0;
  for (let i = 0; i < params.length; i++) {
    const w = params[i]!;
    params[i] = w + eps;
    const hi = params[i]!;
    const lp = loss();
    params[i] = w - eps;
    const lo = params[i]!;
    const lm = loss();
    params[i] = w;
    const fd = (lp - lm) / (hi - lo);
    const g = analytic[i]!;
    expect(Math.abs(fd - g), `${what}[${i}]: fd ${fd} vs analytic ${g}`).toBeLessThanOrEqual(1e-2 * Math.abs(g) + 2e-4);
    if (Math.abs(g) > 1e-3) nonzero++;
  }
  return nonzero;
}

/** Hyper-parameters of the finite-difference tests' loss and gradient calls (seed fixes dropout masks and fills). */
export const FD_HYPER = { lr: 0, beta1: 0.9, beta2: 0.999, eps: 1e-8, seed: 3 };

/** gradScale x the summed loss of rows `pts` (netTrainSlice mode 2): what mode 1's gradients differentiate. */
export function sliceLoss(net: NetSpec, data: RefData, pts: Uint32Array, gradScale: number): number {
  const s = new Float64Array(4);
  native().netTrainSlice(net, data, pts, { ...FD_HYPER, mode: 2, gradScale }, s);
  return s[0]! * gradScale;
}
