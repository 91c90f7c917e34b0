// The one sparse layout of sublinear: CSR rows of (feature id, value) plus CSR label lists.
// See docs/design.md. Arrays are allocated on SharedArrayBuffers so worker threads share them.

/** A multi-label sparse dataset in CSR form. */
export interface SparseDataset {
  /** Number of rows (points). */
  points: number;
  /** Feature dimension D: every feature id is < D. */
  features: number;
  /** Label count L: every label id is < L. */
  labels: number;
  /** (points + 1) row starts into indices/values. */
  offsets: Uint32Array;
  /** (nnz) feature ids, strictly increasing within a row. */
  indices: Uint32Array;
  /** (nnz) finite feature values. */
  values: Float32Array;
  /** (points + 1) row starts into labelIndices. */
  labelOffsets: Uint32Array;
  /** label ids, strictly increasing within a row. */
  labelIndices: Uint32Array;
}

/** Allocates a typed array of `length` elements on a SharedArrayBuffer. */
export function sharedUint32(length: number): Uint32Array {
  return new Uint32Array(new SharedArrayBuffer(Math.max(1, length) * 4), 0, length);
}
export function sharedFloat32(length: number): Float32Array {
  return new Float32Array(new SharedArrayBuffer(Math.max(1, length) * 4), 0, length);
}

/** Number of stored (feature, value) pairs. */
export function nnz(d: SparseDataset): number {
  return d.offsets[d.points]!;
}

/** True when every array of `d` lives on a SharedArrayBuffer (worker threads then share it without copies). */
export function isShared(d: SparseDataset): boolean {
  return [d.offsets, d.indices, d.values, d.labelOffsets, d.labelIndices].every((a) => a.buffer instanceof SharedArrayBuffer);
}

/**
 * `d` itself if its arrays are already shared, else a copy on SharedArrayBuffers. Without it a dataset
 * built on plain ArrayBuffers would be copied into a worker with every task.
 */
export function toShared(d: SparseDataset): SparseDataset {
  if (isShared(d)) return d;
  const u32 = (a: Uint32Array) => {
    const c = sharedUint32(a.length);
    c.set(a);
    return c;
  };
  const values = sharedFloat32(d.values.length);
  values.set(d.values);
  return { ...d, offsets: u32(d.offsets), indices: u32(d.indices), values, labelOffsets: u32(d.labelOffsets), labelIndices: u32(d.labelIndices) };
}
