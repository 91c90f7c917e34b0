// Public LSH API: LshIndex indexes a set of vectors (a layer's neurons) in L hash tables and returns, for a
// query vector, a small candidate set likely to hold the largest inner products. Native kernels do the
// work (native/lsh_*.cc); this module validates arguments, owns the memory and derives seeds.
import { native } from '../native/addon.js';
import { SplitMix64 } from '../util/rng.js';
import {
  generateHashSpec,
  hashSpecBytes,
  MAX_TABLES,
  resolveHashOptions,
  type HashParamsOptions,
  type LshFamily,
  type ResolvedHashOptions,
} from './hash-params.js';
import { MODE_CODE, type HashSpec, type QuerySpec, type TablesSpec } from '../native/lsh-types.js';
import { allocateTables, resolveTablesOptions, tablesBytes, type BucketPolicy, type TablesOptions } from './tables.js';
import { float32Array, nonNegativeInt, oneOf, positiveInt, show, uint32Array } from './validate.js';

export { generateHashSpec, hashSpecBytes, invertBins, resolveHashOptions, LSH_FAMILIES } from './hash-params.js';
export type { HashParamsOptions, LshFamily, ResolvedHashOptions } from './hash-params.js';
export { allocateTables, tablesBytes, tableCapacity, resolveTablesOptions } from './tables.js';
export type { BucketPolicy, TablesOptions, TablesShape } from './tables.js';
export { FAMILY_CODE, POLICY_CODE, MODE_CODE } from '../native/lsh-types.js';
export type { HashSpec, TablesSpec, QuerySpec, NativeLsh } from '../native/lsh-types.js';

/** Options of an LshIndex: the hash family (see HashParamsOptions) and the bucket storage (TablesOptions). */
export interface LshIndexOptions extends HashParamsOptions, TablesOptions {}

export type LshQueryMode = 'union' | 'topk' | 'threshold';

/** How a query turns the L buckets it hits into a candidate set. */
export interface LshQueryOptions {
  /**
   * 'union': every id of the L buckets, in table order then bucket order, up to `budget`;
   * 'topk': the `budget` ids found in the most tables (ties: first seen);
   * 'threshold': ids found in at least `minFreq` tables, in first-seen order, up to `budget`.
   * Default 'union'.
   */
  mode?: LshQueryMode;
  /** Max candidates taken from the tables (required ids not counted). Default Infinity (no cap). */
  budget?: number;
  /** Threshold mode: minimum number of tables (1..L) an id must be found in. Default 1. */
  minFreq?: number;
  /** Random ids (uniform, no duplicates) are added until the set holds at least this many. Default 0. */
  minActive?: number;
  /** Ids that must be in query i's set, listed first (deduplicated): one list per query. Default none. */
  required?: ArrayLike<number>[];
  /** Seed of the random fill. Default: drawn from the index's seed stream (a new one per call). */
  seed?: number;
}

/** Candidate sets of q queries: query i's ids are ids[offsets[i] .. offsets[i + 1]), counts[i] of them. */
export interface LshQueryResult {
  counts: Uint32Array;
  offsets: Uint32Array;
  ids: Uint32Array;
}

/** A CSR batch of sparse vectors (the layout of src/datasets/csr.ts). */
export interface SparseRows {
  offsets: Uint32Array;
  indices: Uint32Array;
  values: Float32Array;
}

const UNLIMITED = 0xffffffff;
// Query outputs are produced in chunks of at most this many id slots, to bound temporary memory.
const CHUNK_SLOTS = 1 << 20;

/** Resolves query options into the native QuerySpec for tables of L tables. */
export function resolveQuerySpec(o: Omit<LshQueryOptions, 'required' | 'seed'>, L: number): QuerySpec {
  if (o === null || typeof o !== 'object') throw new Error(`Expected a query options object but received ${show(o)}`);
  const mode = o.mode === undefined ? 'union' : oneOf('query mode', o.mode, ['union', 'topk', 'threshold'] as const);
  let budget = UNLIMITED;
  if (o.budget !== undefined && o.budget !== Infinity) budget = nonNegativeInt('budget', o.budget);
  if (budget > UNLIMITED) budget = UNLIMITED;
  const minFreq = o.minFreq === undefined ? 1 : positiveInt('minFreq', o.minFreq);
  if (minFreq > L) throw new Error(`Expected minFreq <= L (${L}) but received ${minFreq}`);
  const minActive = o.minActive === undefined ? 0 : nonNegativeInt('minActive', o.minActive);
  return { mode: MODE_CODE[mode], budget, minFreq, minActive: Math.min(minActive, UNLIMITED) };
}

/**
 * Locality-sensitive hash index over n vectors of dimension `dim`, answering approximate
 * maximum-inner-product queries with small candidate sets.
 *
 * @example
 * ```ts
 * const index = new LshIndex({ family: 'dwta', K: 6, L: 50, dim: 128, seed: 42 });
 * index.build(weights);                              // weights: Float32Array (n, 128), one row per neuron
 * const { offsets, ids } = index.query(x, 1, { mode: 'topk', budget: 1000 });
 * // ids[offsets[0] .. offsets[1]) are the neurons to score exactly for x.
 * ```
 */
export class LshIndex {
  /** Validated options with every default filled in. */
  readonly options: Readonly<ResolvedHashOptions & { bucketSize: number; policy: BucketPolicy; slack: number }>;
  /** Hash parameters (shared memory; hand them to workers as they are). */
  readonly hashSpec: HashSpec;
  private tablesSpec: TablesSpec | undefined;
  private readonly stream: SplitMix64;
  private outScratch = new Uint32Array(0);

  constructor(options: LshIndexOptions) {
    const h = resolveHashOptions(options);
    const t = resolveTablesOptions(options);
    this.options = Object.freeze({ ...h, ...t });
    this.hashSpec = generateHashSpec(options);
    // Rebuild, update and fill seeds come from a stream distinct from the hash parameters' one.
    this.stream = new SplitMix64(BigInt(h.seed) ^ 0x5851f42d4c957f2dn);
  }

  get family(): LshFamily {
    return this.options.family;
  }
  get dim(): number {
    return this.options.dim;
  }
  /** Vectors indexed by the last build (0 before). */
  get size(): number {
    return this.tablesSpec?.N ?? 0;
  }
  /** The tables of the last build (shared memory), or undefined before build. */
  get tables(): TablesSpec | undefined {
    return this.tablesSpec;
  }

  /** Indexes vectors (n, dim) row-major, replacing any previous content. n defaults to vectors.length / dim. */
  build(vectors: Float32Array, n?: number): void {
    float32Array('vectors', vectors);
    const dim = this.options.dim;
    if (n === undefined) {
      if (vectors.length === 0 || vectors.length % dim !== 0)
        throw new Error(`Dimension mismatch: vectors length ${vectors.length} is not a positive multiple of dim = ${dim}`);
      n = vectors.length / dim;
    } else {
      positiveInt('n', n);
      checkLength(vectors, n, dim);
    }
    if (n > 0xffffffff) throw new Error(`Expected at most 2^32 - 1 vectors but received ${n}`);
    const { L, rangeBits } = this.options;
    if (!this.tablesSpec || this.tablesSpec.N !== n)
      this.tablesSpec = allocateTables({ L, N: n, rangeBits, ...resolveTablesOptions(this.options) });
    native().lshRehash(this.hashSpec, this.tablesSpec, vectors, 0, L, this.nextSeed());
  }

  /** Re-hashes the given vectors (ids.length, dim) and moves each neuron to its new buckets. */
  update(ids: Uint32Array | readonly number[], vectors: Float32Array): void {
    const tables = this.requireBuilt('update');
    const idArr = toIdArray('ids', ids, tables.N);
    float32Array('vectors', vectors);
    checkLength(vectors, idArr.length, this.options.dim);
    if (idArr.length === 0) return;
    const keys = this.hash(vectors, idArr.length);
    native().lshUpdate(tables, idArr, keys, this.nextSeed());
  }

  /** Keys (n, L) of dense vectors (n, dim). */
  hash(vectors: Float32Array, n: number): Uint32Array {
    float32Array('vectors', vectors);
    nonNegativeInt('n', n);
    checkLength(vectors, n, this.options.dim);
    const out = new Uint32Array(n * this.options.L);
    if (n > 0) native().lshHashDense(this.hashSpec, vectors, n, 0, this.options.L, out);
    return out;
  }

  /** Keys (rows.length, L) of CSR rows (default: every row). Feature ids must be < dim; zeros are ignored. */
  hashSparse(csr: SparseRows, rows?: Uint32Array): Uint32Array {
    const r = checkSparse(csr, rows, this.options.dim);
    const out = new Uint32Array(r.length * this.options.L);
    if (r.length > 0) native().lshHashSparse(this.hashSpec, csr.offsets, csr.indices, csr.values, r, 0, this.options.L, out);
    return out;
  }

  /** Candidate sets of q dense query vectors (q, dim). */
  query(vectors: Float32Array, q: number, options: LshQueryOptions = {}): LshQueryResult {
    this.requireBuilt('query');
    return this.queryKeys(this.hash(vectors, q), q, options);
  }

  /** Candidate sets of sparse queries (CSR rows, default every row). */
  querySparse(csr: SparseRows, rows: Uint32Array | undefined, options: LshQueryOptions = {}): LshQueryResult {
    this.requireBuilt('query');
    const keys = this.hashSparse(csr, rows);
    return this.queryKeys(keys, keys.length / this.options.L, options);
  }

  /** Candidate sets of q queries given their keys (q, L), e.g. from hash(). */
  queryKeys(keys: Uint32Array, q: number, options: LshQueryOptions = {}): LshQueryResult {
    const tables = this.requireBuilt('query');
    const { L, rangeBits } = this.options;
    uint32Array('keys', keys);
    nonNegativeInt('q', q);
    if (keys.length !== q * L) throw new Error(`Dimension mismatch: expected keys of length q * L = ${q * L} but received ${keys.length}`);
    const B = 2 ** rangeBits;
    for (let i = 0; i < keys.length; i++)
      if (keys[i]! >= B) throw new Error(`Expected keys < 2^rangeBits (${B}) but received ${keys[i]} at index ${i}`);
    const spec = resolveQuerySpec(options, L);
    const { reqOffsets, reqIds, maxReq } = packRequired(options.required, q, tables.N);
    let seed: number;
    if (options.seed === undefined) seed = this.nextSeed();
    else {
      seed = nonNegativeInt('seed', options.seed);
      if (seed > Number.MAX_SAFE_INTEGER) throw new Error(`Expected seed <= 2^53 - 1 but received ${seed}`);
    }

    // Slots per query: required + table candidates, or minActive when the fill goes further.
    const fromTables = Math.min(spec.budget, L * this.options.bucketSize);
    const cap = Math.max(1, Math.min(tables.N, Math.max(maxReq + fromTables, spec.minActive)));
    const chunk = Math.max(1, Math.min(q, Math.floor(CHUNK_SLOTS / cap)));
    const counts = new Uint32Array(q);
    const offsets = new Uint32Array(q + 1);
    const parts: Uint32Array[] = [];
    const chunkCounts = new Uint32Array(chunk);
    // The padded (chunk, cap) output block is reused across calls: allocating and zeroing it per call would
    // cost more than the queries themselves (cap is often 50 x 128 slots while a query returns ~100 ids).
    if (this.outScratch.length < chunk * cap) this.outScratch = new Uint32Array(chunk * cap);
    const outIds = this.outScratch;
    let total = 0;
    for (let i0 = 0; i0 < q; i0 += chunk) {
      const nq = Math.min(chunk, q - i0);
      const subReqOffsets = reqOffsets ? reqOffsets.subarray(i0, i0 + nq + 1) : null;
      // Required offsets stay absolute (into reqIds): the native side only needs them non-decreasing and in range.
      // Chunk c's fill streams derive from seed + its first query index (chunking depends only on the options,
      // so a call is reproducible from its seed).
      const chunkSeed = (seed + i0) % 2 ** 53;
      native().lshQuery(tables, keys.subarray(i0 * L, (i0 + nq) * L), nq, spec, subReqOffsets, reqIds, chunkSeed, chunkCounts, outIds, cap);
      let chunkTotal = 0;
      for (let i = 0; i < nq; i++) chunkTotal += chunkCounts[i]!;
      const part = new Uint32Array(chunkTotal);
      let at = 0;
      for (let i = 0; i < nq; i++) {
        const c = chunkCounts[i]!;
        part.set(outIds.subarray(i * cap, i * cap + c), at);
        at += c;
        counts[i0 + i] = c;
        total += c;
        offsets[i0 + i + 1] = total;
      }
      parts.push(part);
    }
    const ids = parts.length === 1 ? parts[0]! : new Uint32Array(total);
    if (parts.length > 1) {
      let at = 0;
      for (const p of parts) {
        ids.set(p, at);
        at += p.length;
      }
    }
    return { counts, offsets, ids };
  }

  /** Bytes held by the hash parameters and (after build) the tables. */
  memoryBytes(): number {
    const t = this.tablesSpec;
    return hashSpecBytes(this.hashSpec) + (t ? tablesBytes(t) : 0);
  }

  private requireBuilt(what: string): TablesSpec {
    if (!this.tablesSpec) throw new Error(`LshIndex.${what} called before build`);
    return this.tablesSpec;
  }

  private nextSeed(): number {
    return Number(this.stream.next() >> 11n);
  }
}

function checkLength(vectors: Float32Array, n: number, dim: number): void {
  if (vectors.length !== n * dim)
    throw new Error(`Dimension mismatch: expected vectors of length n * dim = ${n} * ${dim} = ${n * dim} but received ${vectors.length}`);
}

function toIdArray(name: string, ids: Uint32Array | readonly number[], N: number): Uint32Array {
  if (!(ids instanceof Uint32Array) && !Array.isArray(ids))
    throw new Error(`Expected Uint32Array or number[] for ${name} but received ${show(ids)}`);
  const arr = ids instanceof Uint32Array ? ids : new Uint32Array(ids.length);
  for (let i = 0; i < ids.length; i++) {
    const id = ids[i]!;
    if (!Number.isInteger(id) || id < 0 || id >= N)
      throw new Error(`Expected ${name} to hold integers in 0..${N - 1} but received ${show(id)} at index ${i}`);
    arr[i] = id;
  }
  return arr;
}

function checkSparse(csr: SparseRows, rows: Uint32Array | undefined, dim: number): Uint32Array {
  if (csr === null || typeof csr !== 'object') throw new Error(`Expected CSR rows { offsets, indices, values } but received ${show(csr)}`);
  const offsets = uint32Array('offsets', csr.offsets);
  const indices = uint32Array('indices', csr.indices);
  const values = float32Array('values', csr.values);
  if (offsets.length < 1) throw new Error('Expected offsets of length rows + 1 >= 1 but received 0');
  if (values.length !== indices.length)
    throw new Error(`Dimension mismatch: values has ${values.length} entries but indices has ${indices.length}`);
  const nRows = offsets.length - 1;
  let r: Uint32Array;
  if (rows === undefined) {
    r = new Uint32Array(nRows);
    for (let i = 0; i < nRows; i++) r[i] = i;
  } else r = uint32Array('rows', rows);
  for (let i = 0; i < r.length; i++) {
    const row = r[i]!;
    if (row >= nRows) throw new Error(`Expected rows < ${nRows} but received ${row} at index ${i}`);
    const b = offsets[row]!, e = offsets[row + 1]!;
    if (e < b || e > indices.length) throw new Error(`Invalid CSR offsets for row ${row}: [${b}, ${e}) with ${indices.length} indices`);
    for (let j = b; j < e; j++)
      if (indices[j]! >= dim) throw new Error(`Expected feature ids < dim (${dim}) but received ${indices[j]} in row ${row}`);
  }
  return r;
}

function packRequired(
  required: ArrayLike<number>[] | undefined,
  q: number,
  N: number,
): { reqOffsets: Uint32Array | null; reqIds: Uint32Array | null; maxReq: number } {
  if (required === undefined) return { reqOffsets: null, reqIds: null, maxReq: 0 };
  if (!Array.isArray(required) || required.length !== q)
    throw new Error(`Expected required to hold one id list per query (${q}) but received ${Array.isArray(required) ? required.length : show(required)}`);
  const reqOffsets = new Uint32Array(q + 1);
  let maxReq = 0;
  for (let i = 0; i < q; i++) {
    const len = required[i]?.length ?? 0;
    maxReq = Math.max(maxReq, len);
    reqOffsets[i + 1] = reqOffsets[i]! + len;
  }
  const reqIds = new Uint32Array(reqOffsets[q]!);
  for (let i = 0; i < q; i++) {
    const list = required[i]!;
    for (let j = 0; j < list.length; j++) {
      const id = list[j]!;
      if (!Number.isInteger(id) || id < 0 || id >= N)
        throw new Error(`Expected required ids in 0..${N - 1} but received ${show(id)} for query ${i}`);
      reqIds[reqOffsets[i]! + j] = id;
    }
  }
  return { reqOffsets, reqIds, maxReq };
}

export { MAX_TABLES };
