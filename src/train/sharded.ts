// Label-sharded training across MPI ranks (`mpirun -np R sublinear train ... --distributed --shard-labels`).
//
// Rank r owns a slice of the output labels, balanced by training frequency (shardLabels): its rows, biases,
// Adam moments and step counters, and nothing of the other slices. The layers below the output are
// replicated and trained data-parallel. One global step of a batch P (the same batch on every rank):
//   1. rank r runs the lower layers' forward on its part P_r = P[r n / R, (r + 1) n / R) (netShardForward)
//      and the parts' last hidden activations are gathered: H (B, d), B = the batch's labelled points;
//   2. every rank scores the whole batch on its slice (netShardOutForward): its active set S_r is every row
//      of the slice (dense output) or the batch's labels it owns plus uniform rows of the slice up to
//      minActive / R, with the logQ correction of that sampling; per sample it returns the max and sum of
//      exp of its logits and the sum of its own labels' logits (3 doubles), gathered by every rank and
//      combined into the global log-sum-exp (the softmax of a single process over the union of the S_r);
//   3. each rank computes dz on its S_r, takes the Adam step of those rows (no exchange of output rows) and
//      its part of dL/dH (B, d) (netShardOutBackward); the parts are summed (MPI_Allreduce);
//      the output layer's wide part is sharded with the labels: rank r holds the wide pairs of its labels
//      (built from the training data as a single process builds them, buildSliceWide), adds their terms to
//      S_r's logits in phase 2 and takes their Adagrad steps in phase 3 (they have no share in dL/dH);
//   4. rank r backpropagates its points' rows of dL/dH through the lower layers (netShardBackward, sparse
//      gradient rows) and every rank's rows are gathered and applied in rank order by every rank
//      (netApplyRows), so the lower layers stay identical on every rank.
// Per step a rank sends O(batch x hidden) values whatever the number of labels: its part of H, 3 doubles per
// sample, the dH all-reduce and its lower layers' gradient rows.
import type { SparseDataset } from '../../datasets/csr.js';
import { native } from '../native.js';
import { Network } from '../network/network.js';
import type { NetworkConfig } from '../network/config.js';
import type { RowGradients, RowUpdate } from '../network/native-types.js';
import { computeMetrics, inversePropensity, type Metrics } from './metrics.js';
import { sharedSetLogQ } from './logq.js';
import { initSeed } from '../network/state.js';
import { resolveConfig } from '../network/config.js';
import { buildWide, wideProblem } from '../network/wide.js';
import { Xoshiro128 } from '../util/rng.js';
import type { LayerState } from '../network/native-types.js';
import type { Comm } from './distributed.js';

/** The labels of each rank: balanced by training frequency. */
export interface LabelSharding {
  ranks: number;
  /** (labels) rank owning each label. */
  owner: Uint32Array;
  /** (labels) the label's row in its owner's slice. */
  local: Uint32Array;
  /** Per rank, its labels by row (ascending global ids). */
  labelsOf: Uint32Array[];
  /** Per rank, the sum of its labels' training counts. */
  load: number[];
}

/**
 * Greedy balance by training frequency: labels by descending count (ties by id), each to the rank with the
 * least load so far (load = sum of counts; ties by fewer labels, then lower rank). Deterministic in `freq`.
 * Every rank owns at least one label (throws when there are fewer labels than ranks).
 */
export function shardLabels(freq: Uint32Array, ranks: number): LabelSharding {
  const L = freq.length;
  if (!Number.isInteger(ranks) || ranks < 1) throw new Error(`Expected positive integer for ranks but received ${ranks}`);
  if (L < ranks) throw new Error(`cannot shard ${L} labels over ${ranks} ranks: every rank needs at least one label`);
  const order = Uint32Array.from({ length: L }, (_, j) => j).sort((a, b) => freq[b]! - freq[a]! || a - b);
  const load = new Array<number>(ranks).fill(0);
  const count = new Array<number>(ranks).fill(0);
  const owner = new Uint32Array(L);
  for (let e = 0; e < L; e++) {
    const j = order[e]!;
    let best = 0;
    for (let r = 1; r < ranks; r++) if (load[r]! < load[best]! || (load[r] === load[best] && count[r]! < count[best]!)) best = r;
    owner[j] = best;
    load[best]! += freq[j]!;
    count[best]!++;
  }
  const labelsOf = count.map((c) => new Uint32Array(c));
  const fill = new Array<number>(ranks).fill(0);
  const local = new Uint32Array(L);
  for (let j = 0; j < L; j++) {
    const r = owner[j]!;
    local[j] = fill[r]!;
    labelsOf[r]![fill[r]!++] = j;
  }
  return { ranks, owner, local, labelsOf, load };
}

/**
 * The network a rank allocates: the global configuration with the output layer cut to `rows` (its slice),
 * dense (the slice samples its negatives itself: no hash tables), with the global layer's wide part (its
 * pairs those of the slice's labels, under their rows: buildSliceWide). The wide part's hard negatives
 * (`wide.negatives`) are not sharded: train --shard-labels refuses them.
 */
export function sliceConfig(global: NetworkConfig, rows: number): NetworkConfig {
  const layers = global.layers.map((l) => ({ ...l }));
  const last = layers.at(-1)!;
  layers[layers.length - 1] = { size: rows, activation: last.activation, ...(last.wide ? { wide: { ...last.wide } } : {}) };
  return { ...global, layers };
}

/**
 * Builds the wide part of a rank's slice `net` (a sliceConfig network whose layer has one) from the training
 * data: the pairs a single process's fit() chooses for the slice's labels (`labels`, ascending global ids),
 * under their rows. Memory and time about 1 / R of the whole wide part's.
 */
export function buildSliceWide(global: NetworkConfig, net: { spec: { layers: LayerState[] } }, labels: Uint32Array, data: SparseDataset): void {
  const g = resolveConfig(global);
  const w = g.layers.at(-1)!.wide;
  const out = net.spec.layers.at(-1)!;
  if (!w || !out.wide) return;
  out.wide = buildWide(data, null, g.inputDim, g.layers.at(-1)!.size, w.maxPerLabel, w.init, w.minShare, labels);
  const bad = wideProblem(out.wide, out.outDim);
  if (bad) throw new Error(`the slice's wide part is malformed: ${bad}`);
}

/**
 * Initialises a slice's output rows exactly as the whole network's rows of the same labels (Glorot uniform of
 * the global layer, from its seeded stream: the stream is run through, rows not in the slice skipped), so
 * that the initial model does not depend on the number of ranks.
 */
export function initSliceRows(global: NetworkConfig, labels: Uint32Array, out: LayerState): void {
  const k = global.layers.length - 1;
  const L = global.layers[k]!.size, d = out.inDim;
  const limit = Math.sqrt(6 / (d + L));
  const rng = new Xoshiro128(initSeed(global.seed ?? 1, k));
  let e = 0;
  for (let j = 0; j < L && e < labels.length; j++) {
    if (labels[e] !== j) {
      for (let i = 0; i < d; i++) rng.nextFloat();
      continue;
    }
    for (let i = 0; i < d; i++) out.weights[e * d + i] = (2 * rng.nextFloat() - 1) * limit;
    e++;
  }
}

/** minActive of a slice: the global layer's (its default when not given) divided among the ranks. 0: dense. */
export function sliceMinActive(global: NetworkConfig, ranks: number): number {
  const last = global.layers.at(-1)!;
  if (!last.sampling) return 0;
  const m = last.sampling.minActive ?? Math.max(32, Math.ceil(0.005 * last.size));
  return Math.max(1, Math.ceil(m / ranks));
}

/** Exchange statistics of the sharded steps (per rank). */
export interface ShardStats {
  steps: number;
  /** Mean bytes this rank sent per step (its part of H, its softmax statistics, the dH all-reduce's share, its lower layers' rows). */
  bytesSentPerStep: number;
  /** The same, split: hidden activations, softmax statistics, dH all-reduce, lower layers' gradient rows. */
  split: { hidden: number; stats: number; dH: number; lowerRows: number };
  /** Mean active rows of this rank's slice per step. */
  activePerStep: number;
  /** Seconds in the lower layers' forward + backward, the output slice's forward + backward, the exchanges, the lower layers' update. */
  lowerSeconds: number;
  outputSeconds: number;
  exchangeSeconds: number;
  applySeconds: number;
}

/** Hyper-parameters of one sharded step. */
export interface ShardStep {
  pointIds: Uint32Array;
  seed: number;
  lr: number;
  beta1: number;
  beta2: number;
  eps: number;
}

const PART_SEED_STEP = 0x9e3779b9;

/** One rank's part of a label-sharded network: the replicated lower layers and its slice of the output layer. */
export class ShardedModel {
  /** (labels) global label -> row of this rank's slice, -1 for the other ranks' labels. */
  readonly localOf: Int32Array;
  /** This rank's labels by row (global ids). */
  readonly labels: Uint32Array;
  readonly minActive: number;
  /** -log q_j of this slice's rows (sampled slices), or null. */
  logQ: Float32Array | null = null;
  readonly numLabels: number;
  /** Adagrad rate of the wide part (the global layer's wide.lr), or undefined without one. */
  readonly wideLr: number | undefined;
  private readonly sent = { hidden: 0, stats: 0, dH: 0, lowerRows: 0 };
  private activeSum = 0;
  readonly stats: ShardStats = { steps: 0, bytesSentPerStep: 0, split: { hidden: 0, stats: 0, dH: 0, lowerRows: 0 }, activePerStep: 0, lowerSeconds: 0, outputSeconds: 0, exchangeSeconds: 0, applySeconds: 0 };

  /**
   * @param global the whole network's configuration (what a single process would train).
   * @param net this rank's network (sliceConfig of `global`), weights as they are.
   * @param labelFreq (labels) training counts (the sharding's and logQ's input).
   */
  constructor(
    readonly comm: Comm,
    readonly global: NetworkConfig,
    readonly net: Network,
    readonly sharding: LabelSharding,
    readonly labelFreq: Uint32Array,
  ) {
    this.numLabels = global.layers.at(-1)!.size;
    if (sharding.owner.length !== this.numLabels) throw new Error(`the sharding covers ${sharding.owner.length} labels, the network has ${this.numLabels}`);
    if (sharding.ranks !== comm.size) throw new Error(`the sharding is for ${sharding.ranks} ranks, the job has ${comm.size}`);
    this.labels = sharding.labelsOf[comm.rank]!;
    if (net.config.layers.at(-1)!.size !== this.labels.length) throw new Error(`rank ${comm.rank}'s slice has ${net.config.layers.at(-1)!.size} rows, its labels are ${this.labels.length}`);
    this.localOf = new Int32Array(this.numLabels).fill(-1);
    for (let e = 0; e < this.labels.length; e++) this.localOf[this.labels[e]!] = e;
    this.minActive = sliceMinActive(global, comm.size);
    this.wideLr = net.spec.layers.at(-1)!.wide ? resolveConfig(global).layers.at(-1)!.wide?.lr : undefined;
  }

  /** Sets the slice's logQ for training on `points` points with batches of `batchSize` (sampled slices only). */
  prepareLogQ(points: number, batchSize: number): void {
    const last = this.global.layers.at(-1)!;
    if (!last.sampling || last.sampling.logQ === false || this.minActive === 0) {
      this.logQ = null;
      return;
    }
    const f = new Uint32Array(this.labels.length);
    for (let e = 0; e < f.length; e++) f[e] = this.labelFreq[this.labels[e]!]!;
    this.logQ = sharedSetLogQ(f, points, batchSize, this.minActive);
  }

  private get hiddenDim(): number {
    return this.net.spec.layers.at(-1)!.inDim;
  }

  /** One global step (a collective: every rank calls it with the same batch). Returns the batch's loss sum and trained samples. */
  step(data: SparseDataset, t: ShardStep): { lossSum: number; samples: number } {
    const { rank, size } = this.comm;
    const nat = native();
    const spec = this.net.spec;
    const d = this.hiddenDim;
    const P = t.pointIds, n = P.length;
    const t0 = performance.now();
    // The labelled points of each rank's part, in batch order (every rank computes all of them alike).
    const lo = (r: number) => Math.floor((r * n) / size);
    const counts = new Array<number>(size).fill(0);
    const rowsGlobal = new Uint32Array(n);
    let B = 0;
    for (let r = 0; r < size; r++) {
      for (let i = lo(r); i < lo(r + 1); i++) {
        const p = P[i]!;
        if (data.labelOffsets[p + 1]! > data.labelOffsets[p]!) rowsGlobal[B++] = p, counts[r]!++;
      }
    }
    const rows = rowsGlobal.subarray(0, B);
    const first = counts.slice(0, rank).reduce((a, b) => a + b, 0);
    const mine = P.subarray(lo(rank), lo(rank + 1));
    const Hmine = new Float32Array(mine.length * d);
    const nMine = nat.netShardForward(spec, data, mine, 1, (t.seed + rank * PART_SEED_STEP) >>> 0, this.numLabels, Hmine);
    if (nMine !== counts[rank]) throw new Error(`rank ${rank}: ${nMine} labelled points in its part, expected ${counts[rank]}`);
    const t1 = performance.now();
    // 1. H of the whole batch.
    const hBytes = new Uint8Array(Hmine.buffer, 0, nMine * d * 4);
    const H = size > 1 ? f32(this.comm.allgatherv(hBytes).data) : Hmine.subarray(0, B * d);
    if (H.length !== B * d) throw new Error(`the gathered hidden activations hold ${H.length} floats, expected ${B * d}`);
    const t2 = performance.now();
    // 2. Softmax statistics of this slice; combined over the ranks.
    const st = new Float64Array(3 * B);
    const active = nat.netShardOutForward(spec, data, rows, H, this.localOf, t.seed >>> 0, this.minActive, this.logQ, st);
    const t3 = performance.now();
    const all = size > 1 ? f64(this.comm.allgatherv(new Uint8Array(st.buffer)).data) : st;
    const t4 = performance.now();
    const lse = new Float64Array(B);
    let lossSum = 0;
    for (let i = 0; i < B; i++) {
      let M = -Infinity;
      for (let r = 0; r < size; r++) M = Math.max(M, all[r * 3 * B + 3 * i]!);
      let s = 0, zl = 0;
      for (let r = 0; r < size; r++) {
        const m = all[r * 3 * B + 3 * i]!;
        if (m > -Infinity) s += all[r * 3 * B + 3 * i + 1]! * Math.exp(m - M);
        zl += all[r * 3 * B + 3 * i + 2]!;
      }
      lse[i] = M + Math.log(s);
      const p = rows[i]!;
      lossSum += lse[i]! - zl / (data.labelOffsets[p + 1]! - data.labelOffsets[p]!);
    }
    // 3. This slice's update and its part of dL/dH, summed over the ranks.
    const dH = new Float32Array(B * d);
    nat.netShardOutBackward(spec, lse, { mode: 0, lr: t.lr, beta1: t.beta1, beta2: t.beta2, eps: t.eps, gradScale: 1 / Math.max(1, n), ...(this.wideLr !== undefined ? { wideLr: this.wideLr } : {}) }, dH);
    const t5 = performance.now();
    if (size > 1) this.comm.allreduceSum(dH);
    const t6 = performance.now();
    // 4. The lower layers: backward of this rank's points, rows gathered and applied in rank order.
    const grads = nat.netShardBackward(spec, data, nMine, dH.subarray(first * d, (first + nMine) * d), { mode: 3, lr: t.lr, beta1: t.beta1, beta2: t.beta2, eps: t.eps })!;
    const t7 = performance.now();
    const lower = spec.layers.length - 1;
    const msg = packRows(grads.slice(0, lower), spec.layers.map((l) => l.inputMajor === 1));
    const g = size > 1 ? this.comm.allgatherv(msg) : { data: msg, counts: [msg.byteLength] };
    const t8 = performance.now();
    const updates: RowUpdate[] = [];
    let base = 0;
    for (let r = 0; r < size; r++) {
      const c = g.counts[r]!;
      updates.push(...unpackRows(g.data.subarray(base, base + c), lower, spec.layers.map((l) => (l.inputMajor ? l.outDim : l.inDim)), spec.layers.map((l) => l.inputMajor === 1), r));
      base += c;
    }
    nat.netApplyRows(spec, { lr: t.lr, beta1: t.beta1, beta2: t.beta2, eps: t.eps }, updates);
    const t9 = performance.now();

    const s = this.stats;
    s.steps++;
    this.activeSum += active;
    s.lowerSeconds += (t1 - t0 + t7 - t6) / 1000;
    s.outputSeconds += (t3 - t2 + t5 - t4) / 1000;
    s.exchangeSeconds += (t2 - t1 + t4 - t3 + t6 - t5 + t8 - t7) / 1000;
    s.applySeconds += (t9 - t8) / 1000;
    if (size > 1) {
      this.sent.hidden += hBytes.byteLength;
      this.sent.stats += st.byteLength;
      this.sent.dH += (2 * (size - 1) / size) * dH.byteLength;
      this.sent.lowerRows += msg.byteLength;
    }
    return { lossSum, samples: n };
  }

  /** Mean exchange volume and time so far. */
  report(): ShardStats {
    const n = Math.max(1, this.stats.steps);
    const split = { hidden: this.sent.hidden / n, stats: this.sent.stats / n, dH: this.sent.dH / n, lowerRows: this.sent.lowerRows / n };
    return { ...this.stats, split, bytesSentPerStep: split.hidden + split.stats + split.dH + split.lowerRows, activePerStep: this.activeSum / n };
  }

  /**
   * Top-k of every point of `data` over all labels (a collective): rank r runs the lower layers on its part
   * of each chunk, the hidden rows are gathered, every rank scores them exactly on its slice (the network's
   * logits plus the wide terms of its labels), and the ranks'
   * top-k are gathered and merged (descending score, ties by the smaller label id). Every rank returns the
   * whole result: labels (points, k) and their softmax probabilities over all labels.
   */
  predictTopK(data: SparseDataset, k: number, chunk = 1024): { labels: Uint32Array; scores: Float32Array } {
    const { rank, size } = this.comm;
    const nat = native();
    const spec = this.net.spec;
    const d = this.hiddenDim;
    const N = data.points;
    const outLabels = new Uint32Array(N * k).fill(0xffffffff);
    const outScores = new Float32Array(N * k);
    for (let c0 = 0; c0 < N; c0 += chunk) {
      const q = Math.min(chunk, N - c0);
      const lo = c0 + Math.floor((rank * q) / size), hi = c0 + Math.floor(((rank + 1) * q) / size);
      const ids = Uint32Array.from({ length: hi - lo }, (_, i) => lo + i);
      const Hm = new Float32Array(ids.length * d);
      if (ids.length) nat.netShardForward(spec, data, ids, 0, 0, this.numLabels, Hm);
      const H = size > 1 ? f32(this.comm.allgatherv(new Uint8Array(Hm.buffer)).data) : Hm;
      const idx = new Uint32Array(q * k), val = new Float32Array(q * k), st = new Float64Array(q * 2);
      nat.netShardScore(spec, data, Uint32Array.from({ length: q }, (_, i) => c0 + i), H, k, idx, val, st);
      for (let e = 0; e < idx.length; e++) if (idx[e] !== 0xffffffff) idx[e] = this.labels[idx[e]!]!;
      // [idx u32 (q k)][val f32 (q k)][stats f64 (2 q)], 8-aligned.
      const bytes = 8 * q * k + 16 * q;
      const msg = new Uint8Array(bytes);
      msg.set(new Uint8Array(idx.buffer), 0);
      msg.set(new Uint8Array(val.buffer), 4 * q * k);
      msg.set(new Uint8Array(st.buffer), 8 * q * k);
      const g = size > 1 ? this.comm.allgatherv(msg) : { data: msg, counts: [bytes] };
      const buf = g.data.buffer, off = g.data.byteOffset;
      const I = (r: number) => new Uint32Array(buf, off + r * bytes, q * k);
      const V = (r: number) => new Float32Array(buf, off + r * bytes + 4 * q * k, q * k);
      const S = (r: number) => new Float64Array(buf, off + r * bytes + 8 * q * k, 2 * q);
      const Is = Array.from({ length: size }, (_, r) => I(r)), Vs = Array.from({ length: size }, (_, r) => V(r)), Ss = Array.from({ length: size }, (_, r) => S(r));
      const cand: { id: number; v: number }[] = [];
      for (let i = 0; i < q; i++) {
        let M = -Infinity;
        for (let r = 0; r < size; r++) M = Math.max(M, Ss[r]![2 * i]!);
        let sum = 0;
        for (let r = 0; r < size; r++) if (Ss[r]![2 * i]! > -Infinity) sum += Ss[r]![2 * i + 1]! * Math.exp(Ss[r]![2 * i]! - M);
        const lse = M + Math.log(sum);
        cand.length = 0;
        for (let r = 0; r < size; r++) for (let e = 0; e < k; e++) {
          const id = Is[r]![i * k + e]!;
          if (id !== 0xffffffff) cand.push({ id, v: Vs[r]![i * k + e]! });
        }
        cand.sort((a, b) => b.v - a.v || a.id - b.id);
        for (let e = 0; e < Math.min(k, cand.length); e++) {
          outLabels[(c0 + i) * k + e] = cand[e]!.id;
          outScores[(c0 + i) * k + e] = Math.exp(cand[e]!.v - lse);
        }
      }
    }
    return { labels: outLabels, scores: outScores };
  }

  /** P@k, nDCG@k, PSP@k of `test` (a collective; every rank returns the same metrics). */
  evaluate(test: SparseDataset, ks: number[] = [1, 3, 5], trainPoints = 0, propensity: { A?: number; B?: number } = {}): Metrics {
    const kMax = Math.max(...ks);
    const { labels } = this.predictTopK(test, kMax);
    const invP = inversePropensity(this.labelFreq, Math.max(trainPoints, 1), propensity.A ?? 0.55, propensity.B ?? 1.5);
    return computeMetrics({ topIdx: labels, kMax, labelOffsets: test.labelOffsets, labelIndices: test.labelIndices, invPropensity: invP, ks });
  }
}

function f32(b: Uint8Array): Float32Array {
  return b.byteOffset % 4 === 0 ? new Float32Array(b.buffer, b.byteOffset, b.byteLength / 4) : new Float32Array(b.slice().buffer);
}

function f64(b: Uint8Array): Float64Array {
  return b.byteOffset % 8 === 0 ? new Float64Array(b.buffer, b.byteOffset, b.byteLength / 8) : new Float64Array(b.slice().buffer);
}

/**
 * Gradient rows of the lower layers as one message: per layer [u32 n][u32 hasBiasVector][n ids][n x width
 * rows][n rowBias (neuron-major)][biasVector (input-major, when present)]; all 4-byte words.
 */
export function packRows(grads: RowGradients[], inputMajor: boolean[]): Uint8Array {
  let words = 0;
  grads.forEach((g, k) => {
    words += 2 + g.ids.length + g.rows.length + (inputMajor[k] ? (g.biasVector?.length ?? 0) : g.ids.length);
  });
  const out = new Uint8Array(4 * words);
  const u = new Uint32Array(out.buffer), f = new Float32Array(out.buffer);
  let p = 0;
  grads.forEach((g, k) => {
    u[p++] = g.ids.length;
    u[p++] = inputMajor[k] && g.biasVector ? 1 : 0;
    u.set(g.ids, p); p += g.ids.length;
    f.set(g.rows, p); p += g.rows.length;
    if (!inputMajor[k]) { f.set(g.rowBias!, p); p += g.ids.length; }
    else if (g.biasVector) { f.set(g.biasVector, p); p += g.biasVector.length; }
  });
  return out;
}

/** The RowUpdates of one rank's packRows message (`layers` lower layers of the given widths); names the rank when it is malformed. */
export function unpackRows(msg: Uint8Array, layers: number, width: number[], inputMajor: boolean[], rank: number): RowUpdate[] {
  const fail = () => new Error(`rank ${rank}'s gradient-row message is malformed (${msg.byteLength} bytes)`);
  if (msg.byteLength % 4) throw fail();
  const copy = msg.byteOffset % 4 ? msg.slice() : msg;
  const u = new Uint32Array(copy.buffer, copy.byteOffset, copy.byteLength / 4), f = new Float32Array(copy.buffer, copy.byteOffset, copy.byteLength / 4);
  const out: RowUpdate[] = [];
  let p = 0;
  for (let k = 0; k < layers; k++) {
    if (p + 2 > u.length) throw fail();
    const n = u[p++]!, hasBv = u[p++]!;
    const w = width[k]!;
    const need = n + n * w + (inputMajor[k] ? 0 : n);
    if (p + need > u.length) throw fail();
    const ids = u.subarray(p, p + n); p += n;
    const rows = f.subarray(p, p + n * w); p += n * w;
    let rowBias: Float32Array | null = null, biasVector: Float32Array | null = null;
    if (!inputMajor[k]) { rowBias = f.subarray(p, p + n); p += n; }
    else if (hasBv) {
      if (p + w > u.length) throw fail(); // an input-major layer's bias vector has its row width (outDim)
      biasVector = f.subarray(p, p + w); p += w;
    }
    if (n > 0 || biasVector) out.push({ layer: k, ids, rows, rowBias, biasVector });
  }
  if (p !== u.length) throw fail();
  return out;
}
