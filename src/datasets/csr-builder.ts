// Appends CSR rows into growable typed arrays on SharedArrayBuffers, then hands out a SparseDataset.
// Shared by the text readers and the synthetic generator.
//
// Memory: arrays grow by 1.5x (not 2x) so that the slack stays small, and `reserve` lets a reader pre-size
// from an estimate (the readers estimate from the first chunk, +3%), so a large file usually needs no growth
// at all. `toDataset` then returns views of the builder's own buffers when at most 1/8 of an array is
// unused (no copy: the peak stays near the final size), and copies into an exactly-sized
// SharedArrayBuffer otherwise (peak about builder capacity + final size).
import { sharedFloat32, sharedUint32, type SparseDataset } from './csr.js';

/** Offsets are Uint32: a dataset holds at most 2^32 - 1 nonzeros and 2^32 - 1 label entries. */
export const MAX_ENTRIES = 0xffffffff;

const GROWTH = 1.5;
const MIN_CAPACITY = 1024;

/** Growing the arrays would pass CsrBuilder.byteLimit. */
export class MemoryLimitError extends Error {
  override name = 'MemoryLimitError';
}

export class CsrBuilder {
  /**
   * Bytes the arrays may hold at once, counting an array and its grown copy while it is copied. Readers
   * set it from a memory limit (e.g. --max-memory), so that a huge file is refused as it is read rather
   * than after it has filled memory. Default: no limit.
   */
  byteLimit = Infinity;
  /** How byteLimit is described in the error. Default: its size. */
  byteLimitLabel?: string;
  /** Bytes held beside the arrays that count against byteLimit (a reader's read buffers), and their name. Default: none. */
  otherBytes?: { bytes: () => number; name: string };
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
    this.offsets = sharedUint32(p);
    this.labelOffsets = sharedUint32(p);
    this.indices = sharedUint32(Math.max(1, Math.ceil(initialNnz)));
    this.values = sharedFloat32(this.indices.length);
    this.labelIndices = sharedUint32(Math.max(1, Math.ceil(initialLabels)));
  }

  /** Makes room for at least `points` rows (offsets of length points + 1). */
  growPoints(points: number): void {
    if (points + 1 <= this.offsets.length) return;
    const cap = grownCapacity(this.offsets.length, points + 1);
    this.checkBudget(8 * cap);
    this.offsets = copyInto(sharedUint32(cap), this.offsets, this.points + 1);
    this.labelOffsets = copyInto(sharedUint32(cap), this.labelOffsets, this.points + 1);
  }

  /** Makes room for at least `n` feature entries in total. */
  growFeatures(n: number): void {
    if (n <= this.indices.length) return;
    if (n > MAX_ENTRIES) throw new RangeError(`more than ${MAX_ENTRIES} nonzeros: CSR offsets are Uint32`);
    const cap = Math.min(MAX_ENTRIES, grownCapacity(this.indices.length, n));
    this.checkBudget(8 * cap);
    this.indices = copyInto(sharedUint32(cap), this.indices, this.nnz);
    this.values = copyInto(sharedFloat32(cap), this.values, this.nnz);
  }

  /** Makes room for at least `n` label entries in total. */
  growLabels(n: number): void {
    if (n <= this.labelIndices.length) return;
    if (n > MAX_ENTRIES) throw new RangeError(`more than ${MAX_ENTRIES} label entries: CSR offsets are Uint32`);
    const cap = Math.min(MAX_ENTRIES, grownCapacity(this.labelIndices.length, n));
    this.checkBudget(4 * cap);
    this.labelIndices = copyInto(sharedUint32(cap), this.labelIndices, this.nLabels);
  }

  /**
   * Pre-sizes to an estimate of the final totals (never shrinks). Callers clamp estimates to what the data
   * can actually hold, so a header that declares billions of points cannot trigger a huge allocation.
   */
  reserve(points: number, nnz: number, labels: number): void {
    if (points + 1 > this.offsets.length) {
      const cap = Math.ceil(points) + 1;
      this.checkBudget(8 * cap);
      this.offsets = copyInto(sharedUint32(cap), this.offsets, this.points + 1);
      this.labelOffsets = copyInto(sharedUint32(cap), this.labelOffsets, this.points + 1);
    }
    if (nnz > this.indices.length) {
      const cap = Math.min(MAX_ENTRIES, Math.ceil(nnz));
      this.checkBudget(8 * cap);
      this.indices = copyInto(sharedUint32(cap), this.indices, this.nnz);
      this.values = copyInto(sharedFloat32(cap), this.values, this.nnz);
    }
    if (labels > this.labelIndices.length) {
      const cap = Math.min(MAX_ENTRIES, Math.ceil(labels));
      this.checkBudget(4 * cap);
      this.labelIndices = copyInto(sharedUint32(cap), this.labelIndices, this.nLabels);
    }
  }

  /** Bytes held by the arrays now. */
  bytes(): number {
    return this.offsets.byteLength + this.labelOffsets.byteLength + this.indices.byteLength + this.values.byteLength + this.labelIndices.byteLength;
  }

  /** Throws MemoryLimitError if allocating `extra` more bytes would pass byteLimit. */
  private checkBudget(extra: number): void {
    const other = this.otherBytes?.bytes() ?? 0;
    if (this.bytes() + other + extra > this.byteLimit) {
      const mb = (b: number) => `${(b / 1e6).toPrecision(3)} MB`;
      const beside = this.otherBytes ? ` besides ${mb(other)} of ${this.otherBytes.name}` : '';
      throw new MemoryLimitError(`the data needs more than ${this.byteLimitLabel ?? mb(this.byteLimit)} ` +
        `(${this.points} points read so far hold ${mb(this.bytes())}${beside} and need ${mb(this.bytes() + extra)} to grow)`);
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

  /**
   * The dataset: views of the builder's arrays where little is unused, exact copies elsewhere (see the
   * top of this file). The builder must not be used afterwards.
   */
  toDataset(features: number, labels: number): SparseDataset {
    const n = this.points;
    const nnz = this.offsets[n]!;
    const nl = this.labelOffsets[n]!;
    return {
      points: n,
      features,
      labels,
      offsets: fit(this.offsets, n + 1, sharedUint32),
      indices: fit(this.indices, nnz, sharedUint32),
      values: fit(this.values, nnz, sharedFloat32),
      labelOffsets: fit(this.labelOffsets, n + 1, sharedUint32),
      labelIndices: fit(this.labelIndices, nl, sharedUint32),
    };
  }
}

/** The first `length` elements: a view if at most 1/8 of the array would be wasted, else a copy. */
function fit<T extends Uint32Array | Float32Array>(a: T, length: number, alloc: (n: number) => T): T {
  if (a.length - length <= a.length / 8) return a.subarray(0, length) as T;
  const out = alloc(length);
  out.set(a.subarray(0, length) as never);
  return out;
}

function grownCapacity(current: number, needed: number): number {
  return Math.max(needed, Math.ceil(current * GROWTH), MIN_CAPACITY);
}

function copyInto<T extends Uint32Array | Float32Array>(dst: T, src: T, count: number): T {
  dst.set(src.subarray(0, Math.min(count, src.length, dst.length)) as never);
  return dst;
}
