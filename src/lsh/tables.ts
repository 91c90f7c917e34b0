// Allocation of the compact hash tables (TablesSpec) on SharedArrayBuffers, so that workers rebuilding
// table ranges and workers querying them share one copy. Layout and semantics: native/lsh.h.
//
// Bytes, with B = 2^rangeBits and capacity = N + B * slack (all arrays Uint32):
//   offsets L * (B + 1) + fill L * B + seen L * B + ids L * capacity + keys L * N
//   = 4 * L * (4B + 1 + 2N + B * slack)   (approximately 4 * L * (2N + 4B) with slack 1).
// Amazon-670K (N = 670,091, L = 50, rangeBits 18, slack 1): 134 MB keys + 186 MB ids + 157 MB
// offsets/fill/seen = 477 MB, instead of 6.7 GB for SLIDE's B * bucketSize slabs.
import { POLICY_CODE, type TablesSpec } from '../native/lsh-types.js';
import { MAX_RANGE_BITS, MAX_TABLES } from './hash-params.js';
import { intInRange, nonNegativeInt, oneOf, positiveInt, show } from './validate.js';

export type BucketPolicy = 'fifo' | 'reservoir';

/** Options of the bucket storage. */
export interface TablesOptions {
  /** Max neurons kept per bucket. Default 128 (SLIDE). */
  bucketSize?: number;
  /**
   * What a full bucket does with a newcomer (incremental updates; rebuilds keep a uniform random subset
   * either way). 'fifo' drops the oldest entry; 'reservoir' replaces a random slot with probability
   * bucketSize / insertions-since-rebuild. Default 'fifo'.
   */
  policy?: BucketPolicy;
  /**
   * Spare slots per bucket beyond its count at the last rebuild (capacity = min(bucketSize, count + slack)),
   * room for neurons that move in by incremental updates before the next rebuild. Default 1.
   */
  slack?: number;
}

export interface TablesShape {
  L: number;
  N: number;
  rangeBits: number;
  bucketSize: number;
  slack: number;
  policy: BucketPolicy;
}

export function resolveTablesOptions(o: TablesOptions): { bucketSize: number; policy: BucketPolicy; slack: number } {
  const bucketSize = o.bucketSize === undefined ? 128 : positiveInt('bucketSize', o.bucketSize);
  const policy = o.policy === undefined ? 'fifo' : oneOf('bucket policy', o.policy, ['fifo', 'reservoir'] as const);
  const slack = o.slack === undefined ? 1 : nonNegativeInt('slack', o.slack);
  return { bucketSize, policy, slack };
}

/** Ids per table: N + 2^rangeBits * slack. */
export function tableCapacity(N: number, rangeBits: number, slack: number): number {
  return N + 2 ** rangeBits * slack;
}

/** Bytes of the tables of `shape` (see the layout above). */
export function tablesBytes(shape: Pick<TablesShape, 'L' | 'N' | 'rangeBits' | 'slack'>): number {
  const B = 2 ** shape.rangeBits;
  const cap = tableCapacity(shape.N, shape.rangeBits, shape.slack);
  return 4 * shape.L * (B + 1 + 2 * B + cap + shape.N);
}

/** Allocates empty tables (every bucket empty, every key 0) for N neurons. */
export function allocateTables(shape: TablesShape): TablesSpec {
  const L = positiveInt('L', shape.L);
  if (L > MAX_TABLES) throw new Error(`Expected L <= ${MAX_TABLES} but received ${L}`);
  const N = positiveInt('N', shape.N);
  const rangeBits = intInRange('rangeBits', shape.rangeBits, 1, MAX_RANGE_BITS);
  const { bucketSize, policy, slack } = resolveTablesOptions(shape);
  const B = 2 ** rangeBits;
  const cap = tableCapacity(N, rangeBits, slack);
  if (cap > 0xffffffff) throw new Error(`Table capacity N + 2^rangeBits * slack = ${cap} exceeds 2^32 - 1`);
  const u32 = (n: number, what: string): Uint32Array => {
    try {
      return new Uint32Array(new SharedArrayBuffer(n * 4));
    } catch (e) {
      throw new Error(`Cannot allocate ${what} (${n * 4} bytes) for hash tables: ${show((e as Error).message)}`);
    }
  };
  const offsets = u32(L * (B + 1), 'offsets');
  return {
    L,
    N,
    rangeBits,
    bucketSize,
    slack,
    policy: POLICY_CODE[policy],
    tableCapacity: cap,
    offsets,
    fill: u32(L * B, 'fill'),
    seen: u32(L * B, 'seen'),
    ids: u32(L * cap, 'ids'),
    keys: u32(L * N, 'keys'),
  };
}
