// What the label-sharded ranks' predictions share (sharded.ts predictTopK, sharded-index.ts predictSharded): the
// k-way merge of the ranks' sorted top-k lists, and the split of a chunk's points between the ranks, each merging
// its share (the merge is the same for every point, so that every rank doing all of them only repeated it).

/**
 * The points [lo, hi) of a chunk of q that rank r of R merges (predictTopK, predictSharded; the latter also probes
 * the clusters for them): contiguous, in rank order, covering the chunk once, their counts differing by at most one.
 */
export function shareOf(q: number, R: number, r: number): [number, number] {
  return [Math.floor((q * r) / R), Math.floor((q * (r + 1)) / R)];
}

/**
 * Of sorted lists (best first: descending score, ties by the smaller id), list r the entries off[r] ..
 * off[r] + len[r] of idx[r] / val[r] (UINT32_MAX ends it early) with cur[r] of them taken: the list whose next
 * entry is best (of equal ones the first list), or -1 when every list is spent. One step of a k-way merge.
 */
export function bestHead(l: { idx: Uint32Array[]; val: Float32Array[]; off: Int32Array; len: Int32Array }, cur: Int32Array): number {
  let best = -1, bv = 0, bid = 0;
  for (let r = 0; r < l.idx.length; r++) {
    if (cur[r]! >= l.len[r]!) continue;
    const at = l.off[r]! + cur[r]!;
    const id = l.idx[r]![at]!;
    if (id === 0xffffffff) continue;
    const v = l.val[r]![at]!;
    if (best < 0 || v > bv || (v === bv && id < bid)) best = r, bv = v, bid = id;
  }
  return best;
}
