// The output layer's sparse per-label wide part (WideConfig, native/net_wide.h): which (feature, label)
// pairs get a weight, chosen from the training data, and the checks of a stored one.
import type { SparseDataset } from '../../datasets/csr.js';
import { sharedFloat32, sharedUint32 } from '../../datasets/csr.js';
import type { WideState } from './native-types.js';

/** A wide part with no pairs yet (a network not trained): every feature's list is empty. */
export function emptyWide(inputDim: number): WideState {
  return { inputDim, offsets: sharedUint32(inputDim + 1), labels: sharedUint32(0), weights: sharedFloat32(0), accum: sharedFloat32(0) };
}

/**
 * A wide part of `nnz` pairs (offsets and labels to be filled: a file being read); `inference`: without
 * Adagrad sums (an empty accum, allocated when the network trains).
 */
export function allocateWide(inputDim: number, nnz: number, inference = false): WideState {
  return { inputDim, offsets: sharedUint32(inputDim + 1), labels: sharedUint32(nnz), weights: sharedFloat32(nnz), accum: sharedFloat32(inference ? 0 : nnz) };
}

/**
 * The pairs of a wide part from training data: for every label, the `maxPerLabel` features with the largest
 * sums of the values of the label's training points (rows `rows` of `data`, all rows when null; ties by the
 * smaller feature id) among those holding at least `minShare` of the label's centroid norm, as a feature-major CSR whose labels ascend within each feature. Weights
 * start at `init` x the label's unit centroid over its kept features, Adagrad sums at 0. Labels without
 * training points get no pairs. Cost: one pass over each label's points' features (nnz x mean labels per
 * point) plus a sort of each label's distinct features.
 * `slice` (label-sharded training): only these labels (ascending ids < `labels`), each stored under its
 * position in `slice`: exactly the whole label space's pairs of those labels (pickWide), relabelled, at
 * about slice.length / labels of the cost.
 */
export function buildWide(
  data: SparseDataset, rows: Uint32Array | null, inputDim: number, labels: number, maxPerLabel: number, init = 0, minShare = 0,
  slice: Uint32Array | null = null,
): WideState {
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
  for (let e = 0, out = slice ? slice.length : labels; e < out; e++) {
    const j = slice ? slice[e]! : e;
    if (j >= labels || (slice && e > 0 && j <= slice[e - 1]!)) throw new Error(`buildWide: slice[${e}] = ${j} is not an ascending label id < ${labels}`);
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
    for (const f of keep) push(f, e, acc[f]! * scale);
    for (let e = 0; e < t; e++) acc[touched[e]!] = 0;
  }
  // Feature-major CSR (stable counting sort: labels stay ascending within a feature).
  const w = allocateWide(inputDim, nPairs);
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

/**
 * The pairs of `part` (labels in its own id space) whose label `localOf` maps to a row (>= 0), relabelled to
 * that row: a rank's share of a wide part over all labels, or of another rank's slice. `localOf` must be
 * increasing over the labels it maps (a slice's rows are its labels in ascending order), so labels stay
 * ascending within each feature. Adagrad sums are kept when `part` has them.
 */
export function pickWide(part: WideState, localOf: Int32Array): WideState {
  const D = part.inputDim, withAccum = part.accum.length > 0;
  let n = 0;
  for (let e = 0; e < part.labels.length; e++) if (localOf[part.labels[e]!]! >= 0) n++;
  const out = allocateWide(D, n, !withAccum);
  let p = 0;
  for (let f = 0; f < D; f++) {
    for (let e = part.offsets[f]!; e < part.offsets[f + 1]!; e++) {
      const r = localOf[part.labels[e]!]!;
      if (r < 0) continue;
      out.labels[p] = r;
      out.weights[p] = part.weights[e]!;
      if (withAccum) out.accum[p] = part.accum[e]!;
      p++;
    }
    out.offsets[f + 1] = p;
  }
  return out;
}

/**
 * One wide part from parts over the same features whose labels are disjoint (the slices of label-sharded
 * training, in one id space): each feature's lists merged in ascending label order. Adagrad sums are kept
 * when every part has them.
 */
export function mergeWide(parts: WideState[], inputDim: number): WideState {
  for (const w of parts) if (w.inputDim !== inputDim) throw new Error(`mergeWide: a part over ${w.inputDim} features, expected ${inputDim}`);
  const withAccum = parts.every((w) => w.accum.length === w.labels.length);
  const out = allocateWide(inputDim, parts.reduce((a, w) => a + w.labels.length, 0), !withAccum);
  const cur = new Array<number>(parts.length).fill(0);
  let p = 0;
  for (let f = 0; f < inputDim; f++) {
    for (let r = 0; r < parts.length; r++) cur[r] = parts[r]!.offsets[f]!;
    for (;;) {
      let best = -1, bestLabel = 0;
      for (let r = 0; r < parts.length; r++) {
        const w = parts[r]!;
        if (cur[r]! < w.offsets[f + 1]! && (best < 0 || w.labels[cur[r]!]! < bestLabel)) best = r, bestLabel = w.labels[cur[r]!]!;
      }
      if (best < 0) break;
      const w = parts[best]!, e = cur[best]!++;
      out.labels[p] = bestLabel;
      out.weights[p] = w.weights[e]!;
      if (withAccum) out.accum[p] = w.accum[e]!;
      p++;
    }
    out.offsets[f + 1] = p;
  }
  return out;
}

/**
 * Bytes of a wide part of `nnz` pairs over `inputDim` features (offsets, labels, weights, Adagrad sums;
 * `inference`: no Adagrad sums).
 */
export function wideBytes(inputDim: number, nnz: number, inference = false): number {
  return 4 * (inputDim + 1) + (inference ? 8 : 12) * nnz;
}

/** The structural problem of a stored wide part (offsets from 0 to nnz, never decreasing; labels < outDim, ascending per feature), or null. */
export function wideProblem(w: WideState, outDim: number): string | null {
  const off = w.offsets, n = w.labels.length;
  if (off.length !== w.inputDim + 1) return `wide.offsets has ${off.length} elements, expected ${w.inputDim + 1}`;
  if (off[0] !== 0 || off[w.inputDim] !== n) return `wide.offsets must run from 0 to ${n}`;
  for (let f = 0; f < w.inputDim; f++) {
    const a = off[f]!, b = off[f + 1]!;
    if (b < a) return `wide.offsets decreases at feature ${f}`;
    for (let e = a; e < b; e++) {
      const j = w.labels[e]!;
      if (j >= outDim) return `wide.labels[${e}] = ${j} is not a label id (< ${outDim})`;
      if (e > a && j <= w.labels[e - 1]!) return `wide.labels are not strictly ascending within feature ${f} (at ${e})`;
    }
  }
  for (let e = 0; e < w.accum.length; e++) if (!(w.accum[e]! >= 0)) return `wide.accum[${e}] = ${w.accum[e]} is negative or not a number`;
  return null;
}
