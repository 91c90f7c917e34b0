// Plain TypeScript reference of the network kernels (native/net.h) for tiny networks, in float64 with
// straightforward per-sample loops and dense gradient accumulators: forward, softmax cross-entropy with
// labels split evenly, backward, and lazy Adam on touched rows with per-row step counts. Sampled layers
// take their active sets from a callback (the tests build LSH tables whose candidates are known).
import type { SparseDataset } from '../../src/datasets/csr.js';
import type { LayerState } from '../../src/native/network-types.js';

export interface RefLayer {
  inDim: number;
  outDim: number;
  act: number; // 0 relu, 1 softmax, 2 linear
  inputMajor: boolean;
  W: Float64Array;
  b: Float64Array;
  mW: Float64Array;
  vW: Float64Array;
  mb: Float64Array;
  vb: Float64Array;
  rowSteps: Uint32Array;
  biasSteps: Uint32Array;
  /** Output layer: the wide part (feature-major CSR: offsets, labels, weights), as in LayerState.wide. */
  wide?: { offsets: Uint32Array; labels: Uint32Array; weights: Float64Array };
}

export interface RefData {
  points: number;
  offsets: Uint32Array;
  indices: Uint32Array;
  values: Float32Array;
  labelOffsets: Uint32Array;
  labelIndices: Uint32Array;
}

export interface RefHyper {
  mode: 0 | 1 | 2;
  lr: number;
  beta1: number;
  beta2: number;
  eps: number;
  gradScale: number;
}

/**
 * Active set of layer k >= 1 for the sample at position `pos` of pointIds (dataset row `row`); null for all
 * neurons. For the last layer while training it must include the labels (the native kernel puts them first).
 */
export type ActiveSets = (k: number, pos: number, row: number) => number[] | null;

export function refFromState(layers: LayerState[]): RefLayer[] {
  return layers.map((l) => ({
    inDim: l.inDim,
    outDim: l.outDim,
    act: l.activation,
    inputMajor: l.inputMajor === 1,
    W: Float64Array.from(l.weights),
    b: Float64Array.from(l.bias),
    mW: Float64Array.from(l.mWeights),
    vW: Float64Array.from(l.vWeights),
    mb: Float64Array.from(l.mBias),
    vb: Float64Array.from(l.vBias),
    rowSteps: Uint32Array.from(l.rowSteps),
    biasSteps: Uint32Array.from(l.biasSteps),
    ...(l.wide ? { wide: { offsets: l.wide.offsets.slice(), labels: l.wide.labels.slice(), weights: Float64Array.from(l.wide.weights) } } : {}),
  }));
}

function weight(L: RefLayer, j: number, i: number): number {
  // Weight from input i to neuron j.
  return L.inputMajor ? L.W[i * L.outDim + j]! : L.W[j * L.inDim + i]!;
}

export interface RefForward {
  /** Per layer: activation (hidden) or logits (last), dense (outDim), zeros outside the active set. */
  acts: Float64Array[];
  /** Per layer: active set (all neurons when dense). */
  active: number[][];
  /** Softmax probabilities of the last layer on its active set (dense, zeros outside). */
  probs: Float64Array;
  loss: number;
}

/** Forward of one sample; labels (may be empty) give the loss. */
export function refForward(layers: RefLayer[], data: RefData, row: number, pos: number, sets?: ActiveSets): RefForward {
  const acts: Float64Array[] = [];
  const active: number[][] = [];
  const nL = layers.length;
  let input: Float64Array | null = null;
  for (let k = 0; k < nL; k++) {
    const L = layers[k]!;
    const z = new Float64Array(L.outDim);
    let S: number[];
    if (k === 0) {
      S = [...Array(L.outDim).keys()];
      for (let j = 0; j < L.outDim; j++) z[j] = L.b[j]!;
      for (let q = data.offsets[row]!; q < data.offsets[row + 1]!; q++) {
        const f = data.indices[q]!, x = data.values[q]!;
        for (let j = 0; j < L.outDim; j++) z[j] += x * weight(L, j, f);
      }
    } else {
      S = sets?.(k, pos, row) ?? [...Array(L.outDim).keys()];
      for (const j of S) {
        let s = L.b[j]!;
        for (let i = 0; i < L.inDim; i++) s += weight(L, j, i) * input![i]!;
        z[j] = s;
      }
    }
    if (L.wide) {
      // z_j += sum over the sample's features f of x_f * u[f, j] (the pairs stored for f), for active j only.
      const inS = new Set(S);
      for (let q = data.offsets[row]!; q < data.offsets[row + 1]!; q++) {
        const f = data.indices[q]!, x = data.values[q]!;
        for (let e = L.wide.offsets[f]!; e < L.wide.offsets[f + 1]!; e++) {
          if (inS.has(L.wide.labels[e]!)) z[L.wide.labels[e]!] += x * L.wide.weights[e]!;
        }
      }
    }
    if (L.act === 0) for (const j of S) z[j] = Math.max(0, z[j]!);
    acts.push(z);
    active.push(S);
    input = z;
  }
  const last = acts[nL - 1]!;
  const S = active[nL - 1]!;
  let mx = -Infinity;
  for (const j of S) mx = Math.max(mx, last[j]!);
  let sum = 0;
  for (const j of S) sum += Math.exp(last[j]! - mx);
  const lse = mx + Math.log(sum);
  const probs = new Float64Array(last.length);
  for (const j of S) probs[j] = Math.exp(last[j]! - lse);
  const l0 = data.labelOffsets[row]!, l1 = data.labelOffsets[row + 1]!;
  let loss = 0;
  for (let q = l0; q < l1; q++) loss += (lse - last[data.labelIndices[q]!]!) / (l1 - l0);
  return { acts, active, probs, loss };
}

export interface RefResult {
  loss: number;
  samples: number;
  active: number;
}

/** Dense gradients (float64) shaped like each layer's weights and bias. */
export interface RefGrads {
  W: Float64Array[];
  b: Float64Array[];
}

export function zeroGrads(layers: RefLayer[]): RefGrads {
  return { W: layers.map((l) => new Float64Array(l.W.length)), b: layers.map((l) => new Float64Array(l.outDim)) };
}

/**
 * One netTrainSlice call: mode 0 updates `layers` in place (Adam on touched rows), mode 1 adds gradients
 * into `grads`, mode 2 only sums the loss.
 */
export function refTrainSlice(
  layers: RefLayer[],
  data: RefData,
  pointIds: Uint32Array,
  h: RefHyper,
  sets?: ActiveSets,
  grads?: RefGrads,
): RefResult {
  const nL = layers.length;
  const g = zeroGrads(layers);
  const touched: Set<number>[] = layers.map(() => new Set<number>());
  let loss = 0, active = 0, trained = 0;
  pointIds.forEach((row, pos) => {
    const l0 = data.labelOffsets[row]!, l1 = data.labelOffsets[row + 1]!;
    if (l1 === l0) return;
    trained++;
    const f = refForward(layers, data, row, pos, sets);
    loss += f.loss;
    active += f.active[nL - 1]!.length;
    // dz of the last layer on its active set.
    let dz = new Float64Array(layers[nL - 1]!.outDim);
    for (const j of f.active[nL - 1]!) dz[j] = f.probs[j]! * h.gradScale;
    for (let q = l0; q < l1; q++) dz[data.labelIndices[q]!]! -= h.gradScale / (l1 - l0);
    for (let k = nL - 1; k >= 0; k--) {
      const L = layers[k]!;
      if (k === 0) {
        for (let q = data.offsets[row]!; q < data.offsets[row + 1]!; q++) {
          const feat = data.indices[q]!, x = data.values[q]!;
          touched[0]!.add(feat);
          for (let j = 0; j < L.outDim; j++) g.W[0]![feat * L.outDim + j]! += x * dz[j]!;
        }
        for (let j = 0; j < L.outDim; j++) g.b[0]![j]! += dz[j]!;
        break;
      }
      const aPrev = f.acts[k - 1]!;
      const da = new Float64Array(L.inDim);
      for (const j of f.active[k]!) {
        touched[k]!.add(j);
        g.b[k]![j]! += dz[j]!;
        for (let i = 0; i < L.inDim; i++) {
          g.W[k]![j * L.inDim + i]! += dz[j]! * aPrev[i]!;
          da[i]! += dz[j]! * weight(L, j, i);
        }
      }
      const P = layers[k - 1]!;
      const dzPrev = new Float64Array(P.outDim);
      for (const i of f.active[k - 1]!) dzPrev[i] = P.act === 0 && !(aPrev[i]! > 0) ? 0 : da[i]!;
      dz = dzPrev;
    }
  });
  if (h.mode === 1 && grads) {
    for (let k = 0; k < nL; k++) {
      for (let i = 0; i < g.W[k]!.length; i++) grads.W[k]![i]! += g.W[k]![i]!;
      for (let i = 0; i < g.b[k]!.length; i++) grads.b[k]![i]! += g.b[k]![i]!;
    }
  }
  if (h.mode === 0) {
    const adam = (w: Float64Array, m: Float64Array, v: Float64Array, gr: Float64Array, o: number, n: number, t: number) => {
      const c1 = 1 - h.beta1 ** t, c2 = 1 - h.beta2 ** t;
      for (let i = o; i < o + n; i++) {
        m[i] = h.beta1 * m[i]! + (1 - h.beta1) * gr[i]!;
        v[i] = h.beta2 * v[i]! + (1 - h.beta2) * gr[i]! * gr[i]!;
        w[i]! -= (h.lr * (m[i]! / c1)) / (Math.sqrt(v[i]! / c2) + h.eps);
      }
    };
    for (let k = 0; k < nL; k++) {
      const L = layers[k]!;
      const width = L.inputMajor ? L.outDim : L.inDim;
      for (const r of touched[k]!) {
        const t = bump(L.rowSteps, r);
        adam(L.W, L.mW, L.vW, g.W[k]!, r * width, width, t);
        if (!L.inputMajor) adam(L.b, L.mb, L.vb, g.b[k]!, r, 1, t);
      }
      if (L.inputMajor && trained > 0) adam(L.b, L.mb, L.vb, g.b[k]!, 0, L.outDim, bump(L.biasSteps, 0));
    }
  }
  return { loss, samples: pointIds.length, active };
}

/** A step counter's increment: saturating at 2^32 - 1, as native/net_kernels.h's bump_step. */
function bump(steps: Uint32Array, i: number): number {
  if (steps[i]! !== 0xffffffff) steps[i] = steps[i]! + 1;
  return steps[i]!;
}

/** Top-k (descending probability, ties by smaller id) of the last layer, as netPredictSlice reports it. */
export function refPredict(
  layers: RefLayer[],
  data: RefData,
  row: number,
  k: number,
  sets?: ActiveSets,
): { idx: number[]; val: number[] } {
  const f = refForward(layers, data, row, 0, sets);
  const S = [...f.active[layers.length - 1]!];
  S.sort((a, b) => f.probs[b]! - f.probs[a]! || a - b);
  const idx: number[] = [], val: number[] = [];
  for (let e = 0; e < k; e++) {
    idx.push(e < S.length ? S[e]! : 0xffffffff);
    val.push(e < S.length ? f.probs[S[e]!]! : 0);
  }
  return { idx, val };
}

/**
 * The TypeScript reference of buildWide (native wide_build): the pairs of a wide part from training data: for every label, the `maxPerLabel` features with the largest
 * sums of the values of the label's training points (rows `rows` of `data`, all rows when null; ties by the
 * smaller feature id) among those holding at least `minShare` of the label's centroid norm, as a feature-major CSR whose labels ascend within each feature. Weights and Adagrad
 * sums start at 0. Labels without training points get no pairs. Cost: one pass over each label's points'
 * features (nnz x mean labels per point) plus a sort of each label's distinct features.
 */
export function refBuildWide(
  data: SparseDataset, rows: Uint32Array | null, inputDim: number, labels: number, maxPerLabel: number, init = 0, minShare = 0,
): { offsets: Uint32Array; labels: Uint32Array; weights: Float32Array } {
  const n = rows ? rows.length : data.points;
  const rowAt = (i: number) => (rows ? rows[i]! : i);
  // Points of each label (counting sort).
  const lOff = new Uint32Array(labels + 1);
  for (let i = 0; i < n; i++) {
    const r = rowAt(i);
    for (let q = data.labelOffsets[r]!; q < data.labelOffsets[r + 1]!; q++) lOff[data.labelIndices[q]! + 1]!++;
  }
  for (let j = 0; j < labels; j++) lOff[j + 1]! += lOff[j]!;
  const lPts = new Uint32Array(lOff[labels]!);
  const cur = lOff.slice(0, labels);
  for (let i = 0; i < n; i++) {
    const r = rowAt(i);
    for (let q = data.labelOffsets[r]!; q < data.labelOffsets[r + 1]!; q++) lPts[cur[data.labelIndices[q]!]!++] = r;
  }
  // Per label: summed feature values, the top maxPerLabel features kept (label-major pairs).
  const acc = new Float64Array(inputDim);
  const touched = new Uint32Array(inputDim);
  let pairF = new Uint32Array(1 << 16), pairL = new Uint32Array(1 << 16), pairW = new Float32Array(1 << 16), nPairs = 0;
  const push = (f: number, j: number, w: number) => {
    if (nPairs === pairF.length) {
      const f2 = new Uint32Array(pairF.length * 2), l2 = new Uint32Array(pairL.length * 2), w2 = new Float32Array(pairW.length * 2);
      f2.set(pairF);
      l2.set(pairL);
      w2.set(pairW);
      pairF = f2;
      pairL = l2;
      pairW = w2;
    }
    pairF[nPairs] = f;
    pairL[nPairs] = j;
    pairW[nPairs++] = w;
  };
  for (let j = 0; j < labels; j++) {
    let t = 0;
    for (let p = lOff[j]!; p < lOff[j + 1]!; p++) {
      const r = lPts[p]!;
      for (let q = data.offsets[r]!; q < data.offsets[r + 1]!; q++) {
        const f = data.indices[q]!;
        if (acc[f] === 0) touched[t++] = f;
        acc[f] += Math.abs(data.values[q]!) || Number.MIN_VALUE; // a zero value still marks the feature as seen
      }
    }
    if (t === 0) continue;
    let keep = touched.subarray(0, t);
    if (t > maxPerLabel) {
      keep = Uint32Array.from(keep).sort((a, b) => acc[b]! - acc[a]! || a - b).subarray(0, maxPerLabel);
    }
    if (minShare > 0) {
      // Features below minShare of the label's whole centroid norm are dropped (the label's strongest
      // feature always stays): a frequent label's centroid spreads over common words, which would otherwise
      // put those words in the lists of thousands of labels.
      let all = 0;
      for (let e = 0; e < t; e++) all += acc[touched[e]!]! * acc[touched[e]!]!;
      const cut = minShare * Math.sqrt(all);
      let best = keep[0]!;
      for (const f of keep) if (acc[f]! > acc[best]! || (acc[f] === acc[best] && f < best)) best = f;
      keep = keep.filter((f) => acc[f]! >= cut || f === best);
    }
    let norm = 0;
    for (const f of keep) norm += acc[f]! * acc[f]!;
    const scale = norm > 0 ? init / Math.sqrt(norm) : 0; // a label whose features are all 0-valued starts at 0
    for (const f of keep) push(f, j, acc[f]! * scale);
    for (let e = 0; e < t; e++) acc[touched[e]!] = 0;
  }
  // Feature-major CSR (stable counting sort: labels stay ascending within a feature).
  const w = { offsets: new Uint32Array(inputDim + 1), labels: new Uint32Array(nPairs), weights: new Float32Array(nPairs) };
  const off = w.offsets;
  for (let e = 0; e < nPairs; e++) off[pairF[e]! + 1]!++;
  for (let f = 0; f < inputDim; f++) off[f + 1]! += off[f]!;
  const pos = off.slice(0, inputDim);
  for (let e = 0; e < nPairs; e++) {
    const at = pos[pairF[e]!]!++;
    w.labels[at] = pairL[e]!;
    w.weights[at] = pairW[e]!;
  }
  return w;
}
