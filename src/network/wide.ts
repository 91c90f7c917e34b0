// The output layer's sparse per-label wide part (WideConfig, native/net_wide.h): which (feature, label)
// pairs get a weight, chosen from the training data, and the checks of a stored one.
import type { SparseDataset } from '../../datasets/csr.js';
import { sharedFloat32, sharedUint32 } from '../../datasets/csr.js';
import { native } from '../native.js';
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
 * sums of the absolute values of the label's training points (rows `rows` of `data`, all rows when null; ties
 * by the smaller feature id) among those holding at least `minShare` of the label's centroid norm, as a
 * feature-major CSR whose labels ascend within each feature, weighted `init` x the label's unit centroid over
 * the kept features. Adagrad sums start at 0. Labels without training points get no pairs. Native
 * (net_wide.h wide_build; 14 s in TypeScript at 200,000 points and 670,091 labels): one pass over each
 * label's points' features plus a partial sort of each label's distinct features.
 */
export function buildWide(
  data: SparseDataset, rows: Uint32Array | null, inputDim: number, labels: number, maxPerLabel: number, init = 0, minShare = 0,
): WideState {
  const b = native().netWideBuild(data, rows, inputDim, labels, maxPerLabel, init, minShare);
  const w = allocateWide(inputDim, b.labels.length);
  w.offsets.set(b.offsets);
  w.labels.set(b.labels);
  w.weights.set(b.weights);
  return w;
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
