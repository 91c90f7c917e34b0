// Explanations of a label's score (docs/serving.md "Explanations"): how much each input feature of a point
// (a token, for a model trained on text) adds to the score that ranks label j, split exactly.
//
// The explained score is the label's logit z_j = w_j . h(x) + b_j + sum_f x_f u[f, j] (the network's output
// row over the last hidden layer, and the wide part), plus, for a network with a re-ranker, its weighted
// classifier score rw (c_j + sum_f r[j, f] x_f / |x|): the quantity whose softmax predict() returns (two
// labels' scores differ by the log of their probabilities' ratio). x is the input as the kernels see it
// (after the model's input scaling).
//
// The decomposition is gradient x input, which is exact here: every hidden layer is ReLU or linear, so z_j
// is linear in x within the region where no hidden unit changes sign, z_j(x) = sum_f x_f dz_j/dx_f + beta_j,
// with beta_j the biases' share (each layer's bias times the gradient of z_j at that layer's output,
// restricted to the active units). A feature's contribution is x_f (dz_j/dx_f + u[f, j] + rw r[j, f] / |x|):
// its network part, its wide part and its re-ranker part; the contributions of all of a point's features
// plus `bias` equal `score` (up to float rounding), and the test checks that against the kernels' own scores
// (test/network/explain.test.ts). The forward and backward passes run here in double precision, one point
// at a time: a few hidden widths times the point's nonzeros per label.
import type { NetSpec, LayerState } from '../native/network-types.js';
import type { RerankState } from './rerank.js';
import { transformInput } from './input-scale.js';
import { inputRows, type InputMap } from './input-map.js';

/** One input feature's share of a label's score. */
export interface FeatureContribution {
  feature: number;
  /** x_f (dz/dx_f + u[f, j] + rerank share): the sum of the three parts below. */
  contribution: number;
  /** Through the network's hidden layers (gradient x input). */
  network: number;
  /** The wide part's weight for (feature, label) times x_f. */
  wide: number;
  /** The re-ranker's weighted classifier weight times the feature's share of the unit-length row. */
  rerank: number;
}

/** Why a point got a label: its score, split over the point's input features. */
export interface LabelExplanation {
  label: number;
  /** The label's logit, plus the re-ranker's weighted score when the network has one (see the file comment). */
  score: number;
  /** The share of the biases (every layer's, the re-ranker's intercept): score = bias + the sum of every feature's contribution. */
  bias: number;
  /** The features with the largest contributions, largest first (at most `top` of them). */
  features: FeatureContribution[];
  /** The sum of the contributions of the point's other features. */
  rest: number;
}

/** What an explanation reads of a network (Network satisfies it). */
export interface ExplainTarget {
  readonly spec: NetSpec;
  readonly inputScale: Float32Array | null;
  /** The model's count compression (Network.inputLog). Default false. */
  readonly inputLog?: boolean;
  readonly rerank: RerankState | null;
  /** The input feature map (Network.inputMap): a point's feature without a row is ignored, contributing nothing. Default null. */
  readonly inputMap?: InputMap | null;
}

/** One point: its feature ids (ascending) and values, as given (before the model's input scaling). */
export interface ExplainPoint {
  indices: ArrayLike<number>;
  values: ArrayLike<number>;
}

/**
 * Explains labels `labels` of one point: each label's score split over the point's features (the `top`
 * largest contributions returned, the rest summed). Exact for the ReLU and linear layers sublinear builds.
 */
export function explainLabels(net: ExplainTarget, point: ExplainPoint, labels: readonly number[], top = 10): LabelExplanation[] {
  const layers = net.spec.layers;
  const last = layers.length - 1;
  const out = layers[last]!;
  // f: the features' layer-0 rows (a mapped network's features without a row left out), ids: their ids as given.
  const rowOf = net.inputMap ? inputRows(net.inputMap) : null;
  const given: number[] = [], rows: number[] = [], values: number[] = [];
  for (let q = 0; q < point.indices.length; q++) {
    const id = point.indices[q]!, r = rowOf ? rowOf[id] ?? -1 : id;
    if (r < 0) continue;
    given.push(id), rows.push(r), values.push(point.values[q]!);
  }
  const nnz = rows.length;
  const f = Float64Array.from(rows);
  const x = new Float64Array(nnz);
  for (let q = 0; q < nnz; q++) x[q] = transformInput(values[q]!, f[q]!, net.inputScale, net.inputLog ?? false);
  for (const j of labels) {
    if (!Number.isInteger(j) || j < 0 || j >= out.outDim) throw new Error(`Expected label ids from 0 to ${out.outDim - 1} but received ${JSON.stringify(j)}`);
  }
  const { z, h } = hiddenForward(net.spec, f, x);
  let norm = 0;
  for (let q = 0; q < nnz; q++) norm += x[q]! * x[q]!;
  const invNorm = norm > 0 ? 1 / Math.sqrt(norm) : 0;
  const rr = net.rerank && net.rerank.weight > 0 ? net.rerank : null;
  return labels.map((j) => {
    const network = new Float64Array(nnz), wide = new Float64Array(nnz), rerank = new Float64Array(nnz);
    // Backward from z_j: g is dz_j / d(output of layer k).
    let bias = out.bias[j]!;
    if (last === 0) {
      // No hidden layer: z_j = sum_f x_f W0[f, j] + b_j.
      for (let q = 0; q < nnz; q++) network[q] = x[q]! * out.weights[f[q]! * out.outDim + j]!;
    } else {
      let g = Float64Array.from(out.weights.subarray(j * out.inDim, (j + 1) * out.inDim));
      for (let k = last - 1; k >= 0; k--) {
        const L = layers[k]!;
        const delta = g.map((v, u) => (activeUnit(L, z[k]![u]!) ? v : 0));
        for (let u = 0; u < L.outDim; u++) bias += delta[u]! * L.bias[u]!;
        if (k === 0) {
          for (let q = 0; q < nnz; q++) {
            const row = f[q]! * L.outDim;
            let s = 0;
            for (let u = 0; u < L.outDim; u++) s += L.weights[row + u]! * delta[u]!;
            network[q] = x[q]! * s;
          }
        } else {
          const prev = new Float64Array(L.inDim);
          for (let u = 0; u < L.outDim; u++) {
            const d = delta[u]!;
            if (d === 0) continue;
            const row = u * L.inDim;
            for (let i = 0; i < L.inDim; i++) prev[i] += d * L.weights[row + i]!;
          }
          g = prev;
        }
      }
    }
    const w = out.wide;
    if (w && w.labels.length > 0) {
      for (let q = 0; q < nnz; q++) {
        const e = findIn(w.labels, w.offsets[f[q]!]!, w.offsets[f[q]! + 1]!, j);
        if (e >= 0) wide[q] = x[q]! * w.weights[e]!;
      }
    }
    if (rr) {
      bias += rr.weight * rr.bias[j]!;
      for (let q = 0; q < nnz; q++) {
        const e = findIn(rr.features, rr.offsets[j]!, rr.offsets[j + 1]!, f[q]!);
        if (e >= 0) rerank[q] = rr.weight * rr.weights[e]! * x[q]! * invNorm;
      }
    }
    const all: FeatureContribution[] = [];
    let score = bias;
    for (let q = 0; q < nnz; q++) {
      const c = network[q]! + wide[q]! + rerank[q]!;
      score += c;
      all.push({ feature: given[q]!, contribution: c, network: network[q]!, wide: wide[q]!, rerank: rerank[q]! });
    }
    all.sort((a, b) => b.contribution - a.contribution || a.feature - b.feature);
    const kept = all.slice(0, Math.max(0, top));
    let rest = 0;
    for (let t = kept.length; t < all.length; t++) rest += all[t]!.contribution;
    return { label: j, score, bias, features: kept, rest };
  });
}

/**
 * The hidden layers of one point in double precision (x: its input as the kernels see it, after the input
 * scaling): every hidden layer's pre-activation z[k] and output h[k] (the last hidden layer's output feeds
 * the output rows; none without a hidden layer). Exact prediction's forward pass (dropout is off there).
 */
export function hiddenForward(spec: NetSpec, features: ArrayLike<number>, x: ArrayLike<number>): { z: Float64Array[]; h: Float64Array[] } {
  const layers = spec.layers;
  const z: Float64Array[] = [], h: Float64Array[] = [];
  for (let k = 0; k < layers.length - 1; k++) {
    const L = layers[k]!;
    const zk = Float64Array.from(L.bias);
    if (k === 0) {
      for (let q = 0; q < features.length; q++) {
        const row = features[q]! * L.outDim, v = x[q]!;
        for (let u = 0; u < L.outDim; u++) zk[u] += v * L.weights[row + u]!;
      }
    } else {
      const prev = h[k - 1]!;
      for (let u = 0; u < L.outDim; u++) {
        let s = zk[u]!;
        const row = u * L.inDim;
        for (let i = 0; i < L.inDim; i++) s += L.weights[row + i]! * prev[i]!;
        zk[u] = s;
      }
    }
    z.push(zk);
    h.push(L.activation === 0 ? zk.map((v) => (v > 0 ? v : 0)) : zk);
  }
  return { z, h };
}

/** Whether hidden unit u of layer L passes its gradient at pre-activation v (ReLU: v > 0; linear: always). */
function activeUnit(L: LayerState, v: number): boolean {
  return L.activation !== 0 || v > 0;
}

/** Position of `x` in the ascending slice a[lo, hi), or -1. */
function findIn(a: Uint32Array, lo: number, hi: number, x: number): number {
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    const v = a[mid]!;
    if (v === x) return mid;
    if (v < x) lo = mid + 1;
    else hi = mid;
  }
  return -1;
}
