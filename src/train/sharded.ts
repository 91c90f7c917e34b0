// Label-sharded training across MPI ranks (`mpirun -np R sublinear train ... --distributed --shard-labels`).
//
// Rank r owns a slice of the output labels, balanced by training frequency (shardLabels): their rows, biases,
// Adam moments and step counters; and a slice of the input features, balanced by their nonzero counts
// (shardFeatures): their rows of layer 0 (input-major) with moments and step counters. Layer 0's bias and the
// layers between layer 0 and the output are replicated: every rank computes them on the whole batch and
// updates them alike. Every rank reads the whole training data, so it has every point's sparse input. One
// global step of a batch P (the same batch on every rank), every phase on the whole batch:
//   1. layer 0's partial pre-activation over the rank's features, Z_r (B, H0) (netShardInput); the Z_r are
//      summed over the ranks (MPI_Allreduce), so every rank holds the pre-activation Z of every point;
//   2. every rank adds the bias, applies ReLU and dropout (each point's mask drawn from the batch seed and its
//      position in the batch: the same on every rank, and what one process with one worker draws) and the
//      middle layers, if any: H (B, d), the same on every rank (netShardHidden);
//   3. every rank scores the whole batch on its label slice (netShardOutForward): its active set S_r is every
//      row of the slice (dense output) or the batch's labels it owns plus uniform rows of the slice up to
//      minActive / R, with the logQ correction of that sampling; per sample it returns the max and sum of
//      exp of its logits and the sum of its own labels' logits (3 doubles), gathered by every rank and
//      combined into the global log-sum-exp (the softmax of a single process over the union of the S_r);
//      the output layer's wide part is sharded with the labels: rank r holds the wide pairs of its labels
//      (built from the training data as a single process builds them, buildSliceWide) and adds their terms to
//      S_r's logits;
//   4. each rank computes dz on its S_r, takes the Adam step of those rows and the Adagrad step of its wide
//      terms (no exchange of output rows), and its part of dL/dH (B, d) (netShardOutBackward); the parts are
//      summed (MPI_Allreduce);
//   5. every rank backpropagates dL/dH through the middle layers and layer 0's bias (alike on every rank) and
//      takes the Adam step of layer 0's rows of its own features, one per row per global batch with the
//      batch's summed gradient (netShardLowerBackward).
// Per step a rank exchanges the Z all-reduce (4 B H0 bytes), 3 doubles per sample and the dH all-reduce
// (4 B d bytes): nothing grows with the number of labels or features.
import type { SparseDataset } from '../datasets/csr.js';
import { native } from '../native/addon.js';
import type { NetworkConfig } from '../network/config.js';
import type { LayerState, NetSpec, WideState } from '../native/network-types.js';
import { computeMetrics, inversePropensity, type Metrics } from '../network/metrics.js';
import { sharedSetLogQ } from './logq.js';
import { glorotRows } from '../network/state.js';
import { resolveConfig } from '../network/config.js';
import { allocateNetwork, networkBytes } from '../network/allocate.js';
import { buildWide, emptyWide, wideProblem } from '../network/wide.js';
import type { Comm } from './distributed.js';
import { bestHead, shareOf } from './shard-merge.js';

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

/** The input features of each rank (their rows of layer 0): balanced by nonzero count. */
export interface FeatureSharding {
  ranks: number;
  /** (features) rank owning each feature. */
  owner: Uint32Array;
  /** (features) the feature's row in its owner's layer 0. */
  local: Uint32Array;
  /** Per rank, its features by row (ascending global ids). */
  featuresOf: Uint32Array[];
  /** Per rank, the sum of its features' nonzero counts. */
  load: number[];
}

/**
 * Greedy balance of ids by frequency: ids by descending count (ties by id), each to the rank with the least
 * load so far (load = sum of counts; ties by fewer ids, then lower rank); ids of count 0, which add no load,
 * each to the rank with the fewest ids (ties: lower rank), so that they spread instead of piling on the least
 * loaded rank. An id's row = its position among its rank's ids in id order. Deterministic in `freq`. Throws
 * when there are fewer ids than ranks.
 */
function balance(freq: Uint32Array, ranks: number, what: string): { owner: Uint32Array; local: Uint32Array; of: Uint32Array[]; load: number[] } {
  const L = freq.length;
  if (!Number.isInteger(ranks) || ranks < 1) throw new Error(`Expected positive integer for ranks but received ${ranks}`);
  if (L < ranks) throw new Error(`cannot shard ${L} ${what} over ${ranks} ranks: every rank needs at least one ${what.replace(/s$/, '')}`);
  const order = Uint32Array.from({ length: L }, (_, j) => j).sort((a, b) => freq[b]! - freq[a]! || a - b);
  const load = new Array<number>(ranks).fill(0);
  const count = new Array<number>(ranks).fill(0);
  const owner = new Uint32Array(L);
  for (let e = 0; e < L; e++) {
    const j = order[e]!;
    let best = 0;
    if (freq[j] === 0) {
      for (let r = 1; r < ranks; r++) if (count[r]! < count[best]!) best = r;
    } else {
      for (let r = 1; r < ranks; r++) if (load[r]! < load[best]! || (load[r] === load[best] && count[r]! < count[best]!)) best = r;
    }
    owner[j] = best;
    load[best]! += freq[j]!;
    count[best]!++;
  }
  const of = count.map((c) => new Uint32Array(c));
  const fill = new Array<number>(ranks).fill(0);
  const local = new Uint32Array(L);
  for (let j = 0; j < L; j++) {
    const r = owner[j]!;
    local[j] = fill[r]!;
    of[r]![fill[r]!++] = j;
  }
  return { owner, local, of, load };
}

/**
 * Greedy balance by training frequency: labels by descending count (ties by id), each to the rank with the
 * least load so far (load = sum of counts; ties by fewer labels, then lower rank); labels never seen in
 * training to the rank with the fewest labels. Deterministic in `freq`. Every rank owns at least one label
 * (throws when there are fewer labels than ranks).
 */
export function shardLabels(freq: Uint32Array, ranks: number): LabelSharding {
  const b = balance(freq, ranks, 'labels');
  return { ranks, owner: b.owner, local: b.local, labelsOf: b.of, load: b.load };
}

/**
 * The input features of each rank, balanced as shardLabels balances labels, by nonzero count (`freq`: the
 * training points holding each feature), so that every rank does about the same share of layer 0's forward
 * and backward. Deterministic in `freq`; throws when there are fewer features than ranks.
 */
export function shardFeatures(freq: Uint32Array, ranks: number): FeatureSharding {
  const b = balance(freq, ranks, 'features');
  return { ranks, owner: b.owner, local: b.local, featuresOf: b.of, load: b.load };
}

/** (features) the training points holding each feature of `data` (features >= its feature ids). */
export function featureFrequencies(data: SparseDataset, features: number): Uint32Array {
  const f = new Uint32Array(features);
  const nnz = data.offsets[data.points]!;
  for (let q = 0; q < nnz; q++) {
    const x = data.indices[q]!;
    if (x >= features) throw new Error(`Expected feature ids < ${features} but received ${x} at position ${q}`);
    f[x]!++;
  }
  return f;
}

/**
 * The configuration of a rank's network: the global configuration with the output layer cut to `rows` (its
 * label slice), dense (the slice samples its negatives itself: no hash tables), with the global layer's wide
 * part (its pairs those of the slice's labels, under their rows: buildSliceWide), and, given `features`, the
 * input cut to that many features (layer 0's rows of the rank's features). The wide part's hard negatives
 * (`wide.negatives`) are not sharded: train --shard-labels refuses them.
 */
export function sliceConfig(global: NetworkConfig, rows: number, features?: number): NetworkConfig {
  const layers = global.layers.map((l) => ({ ...l }));
  const last = layers.at(-1)!;
  layers[layers.length - 1] = { size: rows, activation: last.activation, ...(last.wide ? { wide: { ...last.wide } } : {}) };
  return { ...global, ...(features !== undefined ? { inputDim: features } : {}), layers };
}

/**
 * Allocates a rank's network: layer 0 with the rows of `features` input features (`features` field = the
 * global input dimension), the middle layers whole (initialised as the whole network's), the output layer
 * with `rows` rows, and an empty wide part over the global input features when the layer has one. Layer 0's
 * and the output's rows are initialised as initFeatureRows / initSliceRows set them, by the caller.
 */
export function allocateRank(global: NetworkConfig, rows: number, features: number): NetSpec {
  const g = resolveConfig(global);
  const spec = allocateNetwork(resolveConfig(sliceConfig(global, rows, features)));
  spec.layers[0]!.features = g.inputDim;
  const out = spec.layers.at(-1)!;
  if (out.wide) out.wide = emptyWide(g.inputDim);
  return spec;
}

/**
 * Builds the wide part of a rank's network `net` (allocateRank's, whose output layer has one) from the
 * training data: the pairs a single process's fit() chooses for the slice's labels (`labels`, ascending global
 * ids), under their rows. Memory and time about 1 / R of the whole wide part's.
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
 * the global layer, from its seeded stream), so that the initial model does not depend on the number of ranks.
 */
export function initSliceRows(global: NetworkConfig, labels: Uint32Array, out: LayerState): void {
  const k = global.layers.length - 1;
  const L = global.layers[k]!.size, d = out.inDim;
  glorotRows(out.weights, global.seed ?? 1, k, labels, L, d);
}

/**
 * Initialises a rank's layer-0 rows (its `features`, ascending) exactly as the whole network's rows of the same
 * features, so that the initial model does not depend on the number of ranks.
 */
export function initFeatureRows(global: NetworkConfig, features: Uint32Array, l0: LayerState): void {
  const D = resolveConfig(global).inputDim, H0 = l0.outDim;
  glorotRows(l0.weights, global.seed ?? 1, 0, features, D, H0);
}

/**
 * The label-major index of a wide part of `labels` labels (WideState.byLabel): per label its pairs, features
 * ascending (the feature-major order read label by label).
 */
export function wideByLabel(w: WideState, labels: number): NonNullable<WideState['byLabel']> {
  const nnz = w.labels.length;
  const offsets = new Uint32Array(labels + 1), features = new Uint32Array(nnz), entries = new Uint32Array(nnz);
  for (let e = 0; e < nnz; e++) offsets[w.labels[e]! + 1]!++;
  for (let j = 0; j < labels; j++) offsets[j + 1]! += offsets[j]!;
  const cur = offsets.slice(0, labels);
  for (let f = 0; f < w.inputDim; f++) {
    for (let e = w.offsets[f]!; e < w.offsets[f + 1]!; e++) {
      const k = cur[w.labels[e]!]!++;
      features[k] = f;
      entries[k] = e;
    }
  }
  return { offsets, features, entries };
}

/**
 * The size of one process's batch-shared set that the ranks draw together (netShardOutForward): the global
 * layer's resolved sampling.minActive; 0 for a dense output layer (every row of every slice is active).
 */
export function sharedSetSize(global: NetworkConfig): number {
  const last = resolveConfig(global).layers.at(-1)!;
  return last.sampling ? last.sampling.minActive : 0;
}

/**
 * Why a network configuration cannot be trained label-sharded as one process trains it, or null. The ranks
 * draw one process's batch-shared set together, and no rank has hash tables: a sampled output layer must
 * train on the shared set with the batch's labels in it (sharedFill, batchNegatives) and without table
 * candidates (budget 0: the defaults), and sampled hidden layers (which query tables) are not sharded.
 * The wide part's hard negatives (`wide.negatives`) come from every label's wide scores: not sharded.
 */
export function shardingProblem(global: NetworkConfig): string | null {
  const g = resolveConfig(global);
  const k = g.layers.length - 1;
  if (g.layers.length < 2) return 'label-sharded training needs a hidden layer below the output layer';
  const hidden = g.layers.findIndex((l, i) => i < k && l.sampling);
  if (hidden >= 0) return `layers[${hidden}] is sampled: label-sharded training samples the output layer only`;
  const s = g.layers[k]!.sampling;
  if (s && (!s.sharedFill || !s.batchNegatives)) return `layers[${k}].sampling: label-sharded training needs sharedFill and batchNegatives (the defaults)`;
  if (s && s.budget > 0) return `layers[${k}].sampling.budget is ${s.budget}: label-sharded training has no hash tables; set it to 0 (the defaults')`;
  if (g.layers[k]!.wide?.negatives) return `layers[${k}].wide.negatives (hard negatives from the wide part) are not sharded: set it to 0`;
  return null;
}

/**
 * The arrays every rank holds alike (layer 0's bias with its moments and step count, the middle layers), by
 * name: what the checksum compares and a checkpoint's shared part stores.
 */
export function replicatedArrays(spec: NetSpec): Record<string, Float32Array | Uint32Array> {
  const out: Record<string, Float32Array | Uint32Array> = {};
  const l0 = spec.layers[0]!;
  for (const a of ['bias', 'mBias', 'vBias', 'biasSteps'] as const) out[`layer0.${a}`] = l0[a];
  spec.layers.slice(1, -1).forEach((l, i) => {
    for (const a of ['weights', 'bias', 'mWeights', 'vWeights', 'mBias', 'vBias', 'rowSteps', 'biasSteps'] as const) out[`layer${i + 1}.${a}`] = l[a];
  });
  return out;
}

/** 64-bit checksum (hex) of the bit patterns of `arrays`, in key order. */
export function arraysChecksum(arrays: Record<string, Float32Array | Uint32Array>): string {
  let h1 = 0x811c9dc5 | 0, h2 = 0x01000193 | 0;
  for (const name of Object.keys(arrays).sort()) {
    const a = arrays[name]!;
    const u = new Uint32Array(a.buffer, a.byteOffset, a.length);
    let x1 = Math.imul(h1 ^ name.length, 0x9e3779b1), x2 = Math.imul(h2 ^ u.length, 0x85ebca77);
    for (let i = 0; i < u.length; i++) {
      x1 = Math.imul(x1 ^ u[i]!, 0x9e3779b1) ^ (x1 >>> 15);
      x2 = Math.imul(x2 ^ u[i]!, 0x85ebca77) ^ (x2 >>> 13);
    }
    h1 = x1 ^ Math.imul(x2, 0xc2b2ae3d);
    h2 = x2 ^ Math.imul(x1, 0x27d4eb2f);
  }
  return (h1 >>> 0).toString(16).padStart(8, '0') + (h2 >>> 0).toString(16).padStart(8, '0');
}

/** Exchange statistics of the sharded steps (per rank). */
export interface ShardStats {
  steps: number;
  /** Mean bytes this rank sent per step (its share of the Z all-reduce, its softmax statistics, its share of the dH all-reduce). */
  bytesSentPerStep: number;
  /** The same, split: layer 0's pre-activation sums, softmax statistics, dH all-reduce. */
  split: { preActivation: number; stats: number; dH: number };
  /** Mean active rows of this rank's slice per step. */
  activePerStep: number;
  /** Seconds in the layers below the output (phases 1, 2, 5: forward, backward and update), the output slice (3, 4), the exchanges. */
  lowerSeconds: number;
  outputSeconds: number;
  exchangeSeconds: number;
  /** Cross-rank comparisons of the replicated parts (replicatedArrays) and how many differed (each repaired from rank 0). */
  checks: number;
  mismatches: number;
}

/** Hyper-parameters of one sharded step. */
export interface ShardStep {
  pointIds: Uint32Array;
  seed: number;
  lr: number;
  beta1: number;
  beta2: number;
  eps: number;
  /** The wide part's Adagrad rate for this step (fit scales it with lr). Default: the layer's wide.lr. */
  wideLr?: number;
  /** The batch gradient's scale. Default 1 / pointIds.length (a mean over the batch, as one process). */
  gradScale?: number;
}

/** Flags of ShardedModel.localFlags / agreedFlags. */
export const ShardFlags = {
  /** A stop was asked for (a signal): every rank stops after the same step. */
  stop: 1,
  /** Rank 0's clock says a periodic checkpoint is due. */
  checkpoint: 2,
  /** With stop: the signal was SIGINT (Ctrl-C); without, SIGTERM or another. */
  interrupt: 4,
} as const;

/**
 * One rank's part of a label-sharded network: its label slice of the output layer, its feature slice of layer
 * 0's rows, and the replicated rest.
 */
export class ShardedModel {
  readonly sharding: LabelSharding;
  readonly featureSharding: FeatureSharding;
  /** (labels) global label -> row of this rank's slice, -1 for the other ranks' labels. */
  readonly localOf: Int32Array;
  /** (features) global feature -> row of this rank's layer 0, -1 for the other ranks' features. */
  readonly featureOf: Int32Array;
  /** This rank's labels by row (global ids). */
  readonly labels: Uint32Array;
  /** This rank's input features by row of layer 0 (global ids). */
  readonly features: Uint32Array;
  /** One process's batch-shared set size, drawn by the ranks together (sharedSetSize); 0: dense. */
  readonly minActive: number;
  private readonly batchNegatives: boolean;
  /**
   * Flags this rank raises for the next step to share (ShardFlags): every rank learns them, OR-ed over the
   * ranks, in agreedFlags after that step, so that all ranks act on them at the same step. The flags ride in
   * the step's statistics exchange: no collective of their own.
   */
  localFlags = 0;
  /** The flags of the last step, OR-ed over the ranks (ShardFlags). */
  agreedFlags = 0;
  /** -log q_j of this slice's rows (sampled slices), or null. */
  logQ: Float32Array | null = null;
  readonly numLabels: number;
  readonly numFeatures: number;
  /** Adagrad rate of the wide part (the global layer's wide.lr), or undefined without one. */
  readonly wideLr: number | undefined;
  private readonly sent = { preActivation: 0, stats: 0, dH: 0 };
  private activeSum = 0;
  readonly stats: ShardStats = { steps: 0, bytesSentPerStep: 0, split: { preActivation: 0, stats: 0, dH: 0 }, activePerStep: 0, lowerSeconds: 0, outputSeconds: 0, exchangeSeconds: 0, checks: 0, mismatches: 0 };
  /**
   * The last step's work between its collectives, seconds: phase 1 (before the pre-activations' all-reduce),
   * phases 2 and 3 (before the statistics' all-gather), their combination and phase 4 (before the dH
   * all-reduce), phase 5 (before the next step's first all-reduce). A collective waits for the slowest rank:
   * the plan prices those waits from how much these vary (calibrate.ts).
   */
  readonly segments = new Float64Array(4);

  /**
   * @param global the whole network's configuration (what a single process would train).
   * @param net this rank's network (allocateRank of `global` for its slices), weights as they are.
   * @param labelFreq (labels) training counts (the label sharding's and logQ's input).
   * @param featureFreq (features) nonzero counts (the feature sharding's input).
   */
  constructor(
    readonly comm: Comm,
    readonly global: NetworkConfig,
    readonly net: { spec: NetSpec },
    readonly labelFreq: Uint32Array,
    readonly featureFreq: Uint32Array,
  ) {
    const g = resolveConfig(global);
    this.numLabels = g.layers.at(-1)!.size;
    this.numFeatures = g.inputDim;
    if (labelFreq.length !== this.numLabels) throw new Error(`${labelFreq.length} label counts for a network of ${this.numLabels} labels`);
    if (featureFreq.length !== this.numFeatures) throw new Error(`${featureFreq.length} feature counts for a network of ${this.numFeatures} input features`);
    this.sharding = shardLabels(labelFreq, comm.size);
    this.featureSharding = shardFeatures(featureFreq, comm.size);
    this.labels = this.sharding.labelsOf[comm.rank]!;
    this.features = this.featureSharding.featuresOf[comm.rank]!;
    const layers = net.spec.layers;
    if (layers.at(-1)!.outDim !== this.labels.length) throw new Error(`rank ${comm.rank}'s slice has ${layers.at(-1)!.outDim} rows, its labels are ${this.labels.length}`);
    if (layers[0]!.inDim !== this.features.length || layers[0]!.features !== this.numFeatures) {
      throw new Error(`rank ${comm.rank}'s layer 0 holds ${layers[0]!.inDim} rows of ${layers[0]!.features ?? layers[0]!.inDim} features, its features are ${this.features.length} of ${this.numFeatures}`);
    }
    this.localOf = new Int32Array(this.numLabels).fill(-1);
    for (let e = 0; e < this.labels.length; e++) this.localOf[this.labels[e]!] = e;
    this.featureOf = new Int32Array(this.numFeatures).fill(-1);
    for (let e = 0; e < this.features.length; e++) this.featureOf[this.features[e]!] = e;
    this.minActive = sharedSetSize(global);
    this.batchNegatives = g.layers.at(-1)!.sampling?.batchNegatives ?? true;
    const wide = layers.at(-1)!.wide;
    this.wideLr = wide ? g.layers.at(-1)!.wide?.lr : undefined;
    // A step needs the wide terms of its active labels only: read label by label.
    if (wide) wide.byLabel = wideByLabel(wide, this.labels.length);
  }

  /**
   * Sets the slice's logQ for training on `points` points with batches of `batchSize` (sampled slices with
   * sampling.logQ only): this slice's rows of one process's correction over every label.
   */
  prepareLogQ(points: number, batchSize: number): void {
    const last = resolveConfig(this.global).layers.at(-1)!;
    if (!last.sampling || !last.sampling.logQ || this.minActive === 0) {
      this.logQ = null;
      return;
    }
    const all = sharedSetLogQ(this.labelFreq, points, batchSize, this.minActive);
    const mine = new Float32Array(this.labels.length);
    for (let e = 0; e < mine.length; e++) mine[e] = all[this.labels[e]!]!;
    this.logQ = mine;
  }

  private get hiddenDim(): number {
    return this.net.spec.layers.at(-1)!.inDim;
  }

  /**
   * H (n, d) of the points of the last netShardInput on this thread, given their partial pre-activations Z
   * (n, H0): Z summed over the ranks, then phase 2. Every rank returns the same H.
   */
  hidden(Z: Float32Array, training: 0 | 1, seed: number): { H: Float32Array; seconds: number } {
    const n = Z.length / this.net.spec.layers[0]!.outDim;
    const t = performance.now();
    if (this.comm.size > 1) this.comm.allreduceSum(Z);
    const seconds = (performance.now() - t) / 1000;
    const H = new Float32Array(n * this.hiddenDim);
    native().netShardHidden(this.net.spec, Z, training, seed >>> 0, H);
    return { H, seconds };
  }

  /** One global step (a collective: every rank calls it with the same batch). Returns the batch's loss sum and trained samples. */
  step(data: SparseDataset, t: ShardStep): { lossSum: number; samples: number } {
    const { size } = this.comm;
    const nat = native();
    const spec = this.net.spec;
    const H0 = spec.layers[0]!.outDim, d = this.hiddenDim;
    const P = t.pointIds, n = P.length;
    // The batch's labelled points, in batch order (the native phases skip the others alike).
    const all = new Uint32Array(n);
    let B = 0;
    for (let i = 0; i < n; i++) {
      const p = P[i]!;
      if (data.labelOffsets[p + 1]! > data.labelOffsets[p]!) all[B++] = p;
    }
    const rows = all.subarray(0, B);
    const t0 = performance.now();
    // 1. Layer 0's partial pre-activation of every labelled point over this rank's features.
    const Z = new Float32Array(n * H0);
    const nIn = nat.netShardInput(spec, data, P, 1, this.featureOf, Z);
    if (nIn !== B) throw new Error(`rank ${this.comm.rank}: ${nIn} labelled points in the batch, expected ${B}`);
    const t1 = performance.now();
    // 2. Z summed over the ranks; bias, ReLU, dropout and the middle layers: H (B, d), alike on every rank.
    const { H, seconds: zSeconds } = this.hidden(Z.subarray(0, B * H0), 1, t.seed);
    const t2 = performance.now();
    // 3. Softmax statistics of this slice (and this rank's flags); combined over the ranks.
    const per = 3 * B + 1;
    const st = new Float64Array(per);
    const active = nat.netShardOutForward(spec, data, rows, H, this.localOf, t.seed >>> 0, this.minActive, this.logQ, st, this.batchNegatives ? 1 : 0);
    st[3 * B] = this.localFlags;
    const t3 = performance.now();
    const allSt = size > 1 ? f64(this.comm.allgatherv(new Uint8Array(st.buffer)).data) : st;
    const t4 = performance.now();
    let flags = 0;
    for (let r = 0; r < size; r++) flags |= allSt[r * per + 3 * B]!;
    this.agreedFlags = flags;
    const lse = new Float64Array(B);
    let lossSum = 0;
    for (let i = 0; i < B; i++) {
      let M = -Infinity;
      for (let r = 0; r < size; r++) M = Math.max(M, allSt[r * per + 3 * i]!);
      let s = 0, zl = 0;
      for (let r = 0; r < size; r++) {
        const m = allSt[r * per + 3 * i]!;
        if (m > -Infinity) s += allSt[r * per + 3 * i + 1]! * Math.exp(m - M);
        zl += allSt[r * per + 3 * i + 2]!;
      }
      lse[i] = M + Math.log(s);
      const p = rows[i]!;
      lossSum += lse[i]! - zl / (data.labelOffsets[p + 1]! - data.labelOffsets[p]!);
    }
    // 4. This slice's update and its part of dL/dH, summed over the ranks.
    const dH = new Float32Array(B * d);
    const adam = { lr: t.lr, beta1: t.beta1, beta2: t.beta2, eps: t.eps };
    const wideLr = t.wideLr ?? this.wideLr;
    nat.netShardOutBackward(spec, lse, { mode: 0, ...adam, gradScale: t.gradScale ?? 1 / Math.max(1, n), ...(wideLr !== undefined ? { wideLr } : {}) }, dH);
    const t5 = performance.now();
    if (size > 1) this.comm.allreduceSum(dH);
    const t6 = performance.now();
    // 5. The layers below the output: the middle layers and layer 0's bias alike on every rank, layer 0's rows
    //    of this rank's features.
    nat.netShardLowerBackward(spec, data, dH, adam, this.featureOf);
    const t7 = performance.now();

    const s = this.stats;
    s.steps++;
    this.activeSum += active;
    this.segments.set([(t1 - t0) / 1000, (t3 - t1) / 1000 - zSeconds, (t5 - t4) / 1000, (t7 - t6) / 1000]);
    s.lowerSeconds += (t1 - t0 + t2 - t1 - zSeconds * 1000 + t7 - t6) / 1000;
    s.outputSeconds += (t3 - t2 + t5 - t4) / 1000;
    s.exchangeSeconds += zSeconds + (t4 - t3 + t6 - t5) / 1000;
    if (size > 1) {
      const ring = (2 * (size - 1)) / size;
      this.sent.preActivation += ring * 4 * B * H0;
      this.sent.stats += st.byteLength;
      this.sent.dH += ring * dH.byteLength;
    }
    return { lossSum, samples: n };
  }

  /** Mean exchange volume and time so far. */
  report(): ShardStats {
    const n = Math.max(1, this.stats.steps);
    const split = { preActivation: this.sent.preActivation / n, stats: this.sent.stats / n, dH: this.sent.dH / n };
    return { ...this.stats, split, bytesSentPerStep: split.preActivation + split.stats + split.dH, activePerStep: this.activeSum / n };
  }

  /**
   * Compares the checksum of the replicated parts (replicatedArrays) across the ranks (a collective); on a
   * mismatch, broadcasts rank 0's. They stay identical when every rank's MPI_Allreduce returns the same sums;
   * this checks it. Returns whether they were identical.
   */
  verify(): boolean {
    this.stats.checks++;
    if (this.comm.size === 1) return true;
    const arrays = replicatedArrays(this.net.spec);
    const mine = arraysChecksum(arrays);
    const g = this.comm.allgatherv(new TextEncoder().encode(mine));
    const text = new TextDecoder().decode(g.data);
    // Every rank sees the same checksums, so every rank decides alike.
    const identical = Array.from({ length: this.comm.size }, (_, r) => text.slice(16 * r, 16 * r + 16)).every((c) => c === mine);
    if (!identical) {
      this.stats.mismatches++;
      for (const a of Object.values(arrays)) this.comm.bcast(a, 0);
      return false;
    }
    return true;
  }

  /**
   * Top-k of every point of `data` over all labels (a collective): for each chunk, every rank forms the
   * partial pre-activations of its features, the ranks sum them, every rank runs the rest of the lower layers
   * and scores every point exactly on its slice (the network's logits plus the wide terms of its labels), and
   * the ranks' top-k are gathered; each rank merges them (descending score, ties by the smaller label id) for its
   * share of the chunk's points (shareOf), and the merged rows are gathered. Every rank
   * returns the whole result: labels (points, k) and their softmax probabilities over all labels. `scale`
   * multiplies the network's logits before the wide part's scores are added (ValidationOptions.blend).
   */
  predictTopK(data: SparseDataset, k: number, chunk = 1024, scale = 1): { labels: Uint32Array; scores: Float32Array } {
    const { size } = this.comm;
    const nat = native();
    const spec = this.net.spec;
    const H0 = spec.layers[0]!.outDim;
    const N = data.points;
    const outLabels = new Uint32Array(N * k).fill(0xffffffff);
    const outScores = new Float32Array(N * k);
    for (let c0 = 0; c0 < N; c0 += chunk) {
      const q = Math.min(chunk, N - c0);
      const ids = Uint32Array.from({ length: q }, (_, i) => c0 + i);
      const Z = new Float32Array(q * H0);
      nat.netShardInput(spec, data, ids, 0, this.featureOf, Z);
      const { H } = this.hidden(Z, 0, 0);
      const idx = new Uint32Array(q * k), val = new Float32Array(q * k), st = new Float64Array(q * 2);
      nat.netShardScore(spec, data, ids, H, k, idx, val, st, scale);
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
      // This rank merges its share of the chunk's points (each rank's list is sorted: a k-way merge), then the
      // ranks' merged rows are gathered.
      const [lo, hi] = shareOf(q, size, this.comm.rank);
      const lists = { idx: Is, val: Vs, off: new Int32Array(size), len: new Int32Array(size).fill(k) };
      const cur = new Int32Array(size);
      for (let i = lo; i < hi; i++) {
        let M = -Infinity;
        for (let r = 0; r < size; r++) M = Math.max(M, Ss[r]![2 * i]!);
        let sum = 0;
        for (let r = 0; r < size; r++) if (Ss[r]![2 * i]! > -Infinity) sum += Ss[r]![2 * i + 1]! * Math.exp(Ss[r]![2 * i]! - M);
        const lse = M + Math.log(sum);
        lists.off.fill(i * k);
        cur.fill(0);
        for (let e = 0; e < k; e++) {
          const b = bestHead(lists, cur);
          if (b < 0) break;
          const o = lists.off[b]! + cur[b]!++;
          outLabels[(c0 + i) * k + e] = Is[b]![o]!;
          outScores[(c0 + i) * k + e] = Math.exp(Vs[b]![o]! - lse);
        }
      }
      if (size > 1) {
        // [labels u32 (n k)][probabilities f32 (n k)] of each rank's share, in rank order.
        const a = (c0 + lo) * k, b = (c0 + hi) * k;
        const part = new Uint32Array(2 * (b - a));
        part.set(outLabels.subarray(a, b), 0);
        part.set(new Uint32Array(outScores.buffer, outScores.byteOffset + 4 * a, b - a), b - a);
        const m = this.comm.allgatherv(new Uint8Array(part.buffer));
        const all = m.data.byteOffset % 4 === 0 ? new Uint32Array(m.data.buffer, m.data.byteOffset, m.data.byteLength / 4) : new Uint32Array(m.data.slice().buffer);
        for (let r = 0, w = 0; r < size; r++) {
          const [l, h] = shareOf(q, size, r);
          const n = (h - l) * k, at = (c0 + l) * k;
          if (m.counts[r] !== 8 * n) throw new Error(`predictTopK: rank ${r} sent ${m.counts[r]} bytes, expected ${8 * n}`);
          if (r !== this.comm.rank) {
            outLabels.set(all.subarray(w, w + n), at);
            new Uint32Array(outScores.buffer, outScores.byteOffset + 4 * at, n).set(all.subarray(w + n, w + 2 * n));
          }
          w += 2 * n;
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

/** Bytes of a rank's network (weights, moments, step counters, wide part). */
export function rankBytes(spec: NetSpec): number {
  return networkBytes(spec);
}

function f64(b: Uint8Array): Float64Array {
  return b.byteOffset % 8 === 0 ? new Float64Array(b.buffer, b.byteOffset, b.byteLength / 8) : new Float64Array(b.slice().buffer);
}
