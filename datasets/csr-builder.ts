// Appends CSR rows into growable typed arrays, then hands out an exactly-sized SparseDataset on
// SharedArrayBuffers. Shared by the text readers, the synthetic generator and `subset`.
//
// Memory: while growing, arrays live on plain ArrayBuffers and grow by 1.5x (not 2x) so that the slack
// stays small; `reserve` lets a reader pre-size from an estimate so that a large file usually needs no
// growth at all. `toDataset` copies once into exactly-sized SharedArrayBuffers, so the peak is about
// (builder capacity + final size), i.e. 2-2.5x the final CSR, and the builder is garbage afterwards.
import { sharedFloat32, sharedUint32, type SparseDataset } from './csr.js';

/** Offsets are Uint32: a dataset holds at most 2^32 - 1 nonzeros and 2^32 - 1 label entries. */
export const MAX_ENTRIES = 0xffffffff;

const GROWTH = 1.5;
const MIN_CAPACITY = 1024;

export class CsrBuilder {
  /** Rows completed so far. offsets[0..points] and labelOffsets[0..points] are valid. */
  points = 0;
  /** Feature entries written (may include a row in progress). */
  nnz = 0;
  /** Label entries written (may include a row in progress). */
  nLabels = 0;
  offsets: Uint32Array;
  labelOffsets: Uint32Array;
  indices: Uint32Array;
  values: Float32Array;
  labelIndices: Uint32Array;

  constructor(initialPoints = MIN_CAPACITY, initialNnz = MIN_CAPACITY * 16, initialLabels = MIN_CAPACITY * 4) {
    const p = Math.max(2, Math.ceil(initialPoints) + 1);
    this.offsets = new Uint32Array(p);
    this.labelOffsets = new Uint32Array(p);
    this.indices = new Uint32Array(Math.max(1, Math.ceil(initialNnz)));
    this.values = new Float32Array(this.indices.length);
    this.labelIndices = new Uint32Array(Math.max(1, Math.ceil(initialLabels)));
  }

  /** Makes room for at least `points` rows (offsets of length points + 1). */
  growPoints(points: number): void {
    if (points + 1 <= this.offsets.length) return;
    const cap = grownCapacity(this.offsets.length, points + 1);
    this.offsets = copyInto(new Uint32Array(cap), this.offsets, this.points + 1);
    this.labelOffsets = copyInto(new Uint32Array(cap), this.labelOffsets, this.points + 1);
  }

  /** Makes room for at least `n` feature entries in total. */
  growFeatures(n: number): void {
    if (n <= this.indices.length) return;
    if (n > MAX_ENTRIES) throw new RangeError(`more than ${MAX_ENTRIES} nonzeros: CSR offsets are Uint32`);
    const cap = Math.min(MAX_ENTRIES, grownCapacity(this.indices.length, n));
    this.indices = copyInto(new Uint32Array(cap), this.indices, this.nnz);
    this.values = copyInto(new Float32Array(cap), this.values, this.nnz);
  }

  /** Makes room for at least `n` label entries in total. */
  growLabels(n: number): void {
    if (n <= this.labelIndices.length) return;
    if (n > MAX_ENTRIES) throw new RangeError(`more than ${MAX_ENTRIES} label entries: CSR offsets are Uint32`);
    const cap = Math.min(MAX_ENTRIES, grownCapacity(this.labelIndices.length, n));
    this.labelIndices = copyInto(new Uint32Array(cap), this.labelIndices, this.nLabels);
  }

  /**
   * Pre-sizes to an estimate of the final totals (never shrinks). Callers clamp estimates to what the data
   * can actually hold, so a header that declares billions of points cannot trigger a huge allocation.
   */
  reserve(points: number, nnz: number, labels: number): void {
    if (points + 1 > this.offsets.length) {
      const cap = Math.ceil(points) + 1;
      this.offsets = copyInto(new Uint32Array(cap), this.offsets, this.points + 1);
      this.labelOffsets = copyInto(new Uint32Array(cap), this.labelOffsets, this.points + 1);
    }
    if (nnz > this.indices.length) {
      const cap = Math.min(MAX_ENTRIES, Math.ceil(nnz));
      this.indices = copyInto(new Uint32Array(cap), this.indices, this.nnz);
      this.values = copyInto(new Float32Array(cap), this.values, this.nnz);
    }
    if (labels > this.labelIndices.length) {
      const cap = Math.min(MAX_ENTRIES, Math.ceil(labels));
      this.labelIndices = copyInto(new Uint32Array(cap), this.labelIndices, this.nLabels);
    }
  }

  /**
   * Appends one row. Features must already be strictly increasing and labels strictly increasing
   * (callers that cannot guarantee it validate first). `values` may be any numeric array-like.
   */
  addRow(
    labelIds: ArrayLike<number>, labelStart: number, labelEnd: number,
    featureIds: ArrayLike<number>, featureValues: ArrayLike<number>, start: number, end: number,
  ): void {
    const nf = end - start, nl = labelEnd - labelStart;
    this.growPoints(this.points + 1);
    if (this.nnz + nf > this.indices.length) this.growFeatures(this.nnz + nf);
    if (this.nLabels + nl > this.labelIndices.length) this.growLabels(this.nLabels + nl);
    const idx = this.indices, val = this.values, lab = this.labelIndices;
    let k = this.nnz;
    for (let i = start; i < end; i++, k++) {
      idx[k] = featureIds[i]!;
      val[k] = featureValues[i]!;
    }
    this.nnz = k;
    k = this.nLabels;
    for (let i = labelStart; i < labelEnd; i++, k++) lab[k] = labelIds[i]!;
    this.nLabels = k;
    this.endRow();
  }

  /** Closes the current row: everything written since the previous row end belongs to it. */
  endRow(): void {
    const p = ++this.points;
    if (p + 1 > this.offsets.length) this.growPoints(p);
    this.offsets[p] = this.nnz;
    this.labelOffsets[p] = this.nLabels;
  }

  /** Copies into exactly-sized SharedArrayBuffers (see csr.ts) and returns the dataset. */
  toDataset(features: number, labels: number): SparseDataset {
    const n = this.points;
    const offsets = sharedUint32(n + 1);
    offsets.set(this.offsets.subarray(0, n + 1));
    const labelOffsets = sharedUint32(n + 1);
    labelOffsets.set(this.labelOffsets.subarray(0, n + 1));
    const nnz = this.offsets[n]!;
    const nl = this.labelOffsets[n]!;
    const indices = sharedUint32(nnz);
    indices.set(this.indices.subarray(0, nnz));
    const values = sharedFloat32(nnz);
    values.set(this.values.subarray(0, nnz));
    const labelIndices = sharedUint32(nl);
    labelIndices.set(this.labelIndices.subarray(0, nl));
    return { points: n, features, labels, offsets, indices, values, labelOffsets, labelIndices };
  }
}

function grownCapacity(current: number, needed: number): number {
  return Math.max(needed, Math.ceil(current * GROWTH), MIN_CAPACITY);
}

function copyInto<T extends Uint32Array | Float32Array>(dst: T, src: T, count: number): T {
  dst.set(src.subarray(0, Math.min(count, src.length, dst.length)) as never);
  return dst;
}
