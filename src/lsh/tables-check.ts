// A full consistency check of a layer's hash tables (TablesSpec), for tables read from a file: the
// native queries check each bucket they touch and throw "tables are corrupt", which in the middle of a
// resumed run would stop it; checking them all once up front lets the loader rebuild them instead.
import type { TablesSpec } from '../native/lsh-types.js';

/**
 * The first inconsistency of `t` (bucket offsets not increasing or past the table's capacity, a bucket
 * fill larger than its slot, a stored id >= N, a key >= 2^rangeBits), or null if the tables are usable.
 * O(L * (B + N + capacity)) reads.
 */
export function tablesProblem(t: TablesSpec): string | null {
  const { L, N, tableCapacity: cap } = t;
  const B = 2 ** t.rangeBits;
  if (t.offsets.length !== L * (B + 1) || t.fill.length !== L * B || t.ids.length !== L * cap || t.keys.length !== L * N) {
    return 'array lengths do not match L, N and rangeBits';
  }
  for (let tb = 0; tb < L; tb++) {
    const o = tb * (B + 1), f = tb * B, idBase = tb * cap;
    for (let b = 0; b < B; b++) {
      const start = t.offsets[o + b]!, end = t.offsets[o + b + 1]!, len = t.fill[f + b]!;
      if (end < start || end > cap) return `table ${tb}: bucket ${b} offsets [${start}, ${end}) outside 0..${cap}`;
      if (len > end - start) return `table ${tb}: bucket ${b} holds ${len} ids in a slot of ${end - start}`;
      for (let i = start; i < start + len; i++) if (t.ids[idBase + i]! >= N) return `table ${tb}: bucket ${b} holds id ${t.ids[idBase + i]} >= ${N}`;
    }
    const k = tb * N;
    for (let n = 0; n < N; n++) if (t.keys[k + n]! >= B) return `table ${tb}: neuron ${n} has key ${t.keys[k + n]} >= ${B}`;
  }
  return null;
}
