// The output layer's sparse per-label wide part (WideConfig, native/net_wide.h): which (feature, label)
// pairs get a weight, chosen from the training data, and the checks of a stored one.
import type { SparseDataset } from '../datasets/csr.js';
import { sharedFloat32, sharedUint32 } from '../datasets/csr.js';
import { availableParallelism } from 'node:os';
import { native } from '../native/addon.js';
import type { WideState } from '../native/network-types.js';

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
 * sums of the absolute values of the label's training points (rows `rows` of `data`, all rows when null; ties
 * by the smaller feature id) among those holding at least `minShare` of the label's centroid norm, as a
 * feature-major CSR whose labels ascend within each feature, weighted `init` x the label's unit centroid over
 * the kept features. Adagrad sums start at 0. Labels without training points get no pairs. Native
 * (net_wide.h wide_build; 14 s in TypeScript at 200,000 points and 670,091 labels): one pass over each
 * label's points' features plus a partial sort of each label's distinct features.
 * `slice` (label-sharded training): only these labels (ascending ids < `labels`), each stored under its
 * position in `slice`: exactly the whole label space's pairs of those labels (pickWide), relabelled, at
 * about slice.length / labels of the cost. `threads` (default: one per core): the labels split
 * over that many native threads; the pairs are the same on any number.
 */
export function buildWide(
  data: SparseDataset, rows: Uint32Array | null, inputDim: number, labels: number, maxPerLabel: number, init = 0, minShare = 0,
  slice: Uint32Array | null = null, threads = availableParallelism(),
): WideState {
  if (slice) {
    for (let e = 0; e < slice.length; e++) {
      if (slice[e]! >= labels || (e > 0 && slice[e]! <= slice[e - 1]!)) throw new Error(`buildWide: slice[${e}] = ${slice[e]} is not an ascending label id < ${labels}`);
    }
  }
  const b = native().netWideBuild(data, rows, inputDim, labels, maxPerLabel, init, minShare, slice, threads);
  const w = allocateWide(inputDim, b.labels.length);
  w.offsets.set(b.offsets);
  w.labels.set(b.labels);
  w.weights.set(b.weights);
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
