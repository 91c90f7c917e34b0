// The input feature map: a network's first layer holds rows only for the input features its training data
// held. Features that no training point holds never receive a gradient (lazy Adam updates only the rows a
// batch holds), so their rows would keep their initial random draw while being allocated, advised, written
// to the model file and loaded: 32,000 of the 35,733 rows on 243 points of debian-deps. A mapped network's
// layer 0 (and everything else indexed by input feature: the wide part, the re-ranker, the input scaling)
// is indexed by row, row i standing for original feature `ids[i]`; data is renumbered once where it enters
// (fit, predict, explain, online learning), and a feature without a row is ignored: it adds nothing, as
// a zero row would. The native kernels never see an original id.
import { sharedFloat32, sharedUint32, type SparseDataset } from '../datasets/csr.js';
import { checkDataset } from './check-data.js';
import type { ResolvedNetworkConfig } from './config.js';

/** Original feature id -> layer-0 row of a network trained on data that held only some of its declared features. */
export interface InputMap {
  /** The declared input dimension (the data's `features`; what a caller's feature ids are checked against). */
  readonly features: number;
  /** Increasing original feature ids, one per layer-0 row: row i is feature ids[i]. */
  readonly ids: Uint32Array;
}

/** Row of every original feature id, -1 for one without a row (built once per map, kept with it). */
const rowsOf = new WeakMap<InputMap, Int32Array>();

export function inputRows(map: InputMap): Int32Array {
  let at = rowsOf.get(map);
  if (!at) {
    at = new Int32Array(map.features).fill(-1);
    for (let i = 0; i < map.ids.length; i++) at[map.ids[i]!] = i;
    rowsOf.set(map, at);
  }
  return at;
}

/** The features (increasing ids < dim) that occur in `data`. */
export function featuresOf(data: SparseDataset, dim: number): Uint32Array {
  const seen = new Uint8Array(dim);
  let n = 0;
  for (let e = data.offsets[0]!, end = data.offsets[data.points]!; e < end; e++) {
    const j = data.indices[e]!;
    if (!seen[j]) (seen[j] = 1), n++;
  }
  const out = new Uint32Array(n);
  for (let j = 0, i = 0; j < dim; j++) if (seen[j]) out[i++] = j;
  return out;
}

/** The map of a new network over `dim` input features trained on `data`: null when `data` holds every feature. */
export function inputMapOf(data: SparseDataset, dim: number): InputMap | null {
  const ids = featuresOf(data, dim);
  return ids.length < dim ? { features: dim, ids } : null;
}

/**
 * `data` (feature ids < map.features) renumbered to layer-0 rows: features = map.ids.length. A feature
 * without a row is dropped (ignored) or, with `strict`, an error (data that must hold only mapped features:
 * the k-fold copies' folds). Offsets, values and labels are shared when nothing is dropped; the new arrays are
 * on shared memory, as the workers need.
 */
export function mapFeatures(data: SparseDataset, map: InputMap, strict = false): SparseDataset {
  const at = inputRows(map);
  const lo = data.offsets[0]!, hi = data.offsets[data.points]!;
  let kept = 0;
  for (let e = lo; e < hi; e++) {
    if (at[data.indices[e]!]! >= 0) kept++;
    else if (strict) throw new Error(`compactFeatures: feature ${data.indices[e]} is not among the kept inputs`);
  }
  if (kept === hi - lo && lo === 0) {
    const indices = sharedUint32(hi);
    for (let e = 0; e < hi; e++) indices[e] = at[data.indices[e]!]!;
    return { ...data, features: map.ids.length, indices };
  }
  const offsets = sharedUint32(data.points + 1), indices = sharedUint32(kept), values = sharedFloat32(kept);
  let n = 0;
  for (let i = 0; i < data.points; i++) {
    for (let e = data.offsets[i]!, end = data.offsets[i + 1]!; e < end; e++) {
      const r = at[data.indices[e]!]!;
      if (r < 0) continue;
      indices[n] = r;
      values[n++] = data.values[e]!;
    }
    offsets[i + 1] = n;
  }
  return { ...data, features: map.ids.length, offsets, indices, values };
}

/** Checks a stored map against the network it belongs to: `rows` ids, increasing, each < `features`. */
export function inputMapProblem(ids: Uint32Array, features: unknown, rows: number): string | null {
  if (typeof features !== 'number' || !Number.isSafeInteger(features) || features < rows) {
    return `invalid inputFeatures ${JSON.stringify(features)} (expected an integer >= the network's inputDim ${rows})`;
  }
  if (ids.length !== rows) return `section "inputMap" has ${ids.length} entries but the network's inputDim is ${rows}`;
  for (let i = 0; i < ids.length; i++) {
    if (ids[i]! >= features || (i > 0 && ids[i]! <= ids[i - 1]!)) return `section "inputMap" is not increasing feature ids below ${features} (entry ${i}: ${ids[i]})`;
  }
  return null;
}

/**
 * `data` checked against `net` (feature ids below its declared dimension, labels within its outputs:
 * checkDataset) and given as its layer 0 takes it: renumbered to rows when the network is mapped (features
 * without a row ignored), as it is otherwise.
 */
export function networkInput(
  net: { readonly config: ResolvedNetworkConfig; readonly inputMap: InputMap | null }, data: SparseDataset, what: string, needLabels = true,
): SparseDataset {
  const map = net.inputMap;
  checkDataset(data, map ? { ...net.config, inputDim: map.features } : net.config, what, needLabels);
  return map ? mapFeatures(data, map) : data;
}

/** The original feature id of layer-0 row `row` (the row itself for an unmapped network). */
export function originalFeature(map: InputMap | null, row: number): number {
  return map ? map.ids[row]! : row;
}
