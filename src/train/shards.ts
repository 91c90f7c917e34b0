// Per-rank shard files for `train --distributed`: `--train shard-%r.txt` makes rank r read shard-r.txt
// (for clusters without a shared file system, or data already split), and the ranks then exchange their
// shards so that every rank holds the same concatenation, in rank order. Everything after that is as with
// one file read by every rank: the same epoch order, batch seeds and held-out split on every rank, so the
// replicas stay identical; a run on shards equals a run on their concatenation, bit for bit.
// The network dominates a rank's memory (the Amazon-670K network is ~2 GB, its data ~50 MB), so holding
// all of the data on every rank costs little.
import { sharedFloat32, sharedUint32, type SparseDataset } from '../datasets/csr.js';
import type { Comm } from './distributed.js';

/** The placeholder of a rank's number in a --train path. */
export const RANK_PLACEHOLDER = '%r';

/** `pattern` with every %r replaced by `rank` (unchanged without a placeholder). */
export function shardPath(pattern: string, rank: number): string {
  return pattern.replaceAll(RANK_PLACEHOLDER, String(rank));
}

/**
 * The concatenation of every rank's `local` dataset in rank order (a collective: every rank calls it).
 * Features and labels are the largest of the shards' (a shard's header may be narrower than another's).
 */
export function gatherShards(local: SparseDataset, comm: Pick<Comm, 'allgatherv'>): SparseDataset {
  const gather = (a: Uint32Array | Float32Array) => {
    const g = comm.allgatherv(new Uint8Array(a.buffer, a.byteOffset, a.byteLength));
    return { bytes: g.data, counts: g.counts.map((c) => c / 4) };
  };
  const dims = gather(Uint32Array.from([local.points, local.features, local.labels]));
  const d = new Uint32Array(dims.bytes.buffer, dims.bytes.byteOffset, dims.bytes.byteLength / 4);
  let points = 0, features = 0, labels = 0;
  for (let r = 0; r < d.length / 3; r++) {
    points += d[3 * r]!;
    features = Math.max(features, d[3 * r + 1]!);
    labels = Math.max(labels, d[3 * r + 2]!);
  }
  // Row lengths (not offsets, which restart at 0 in every shard), then the entries.
  const rowLengths = (off: Uint32Array) => Uint32Array.from({ length: local.points }, (_, i) => off[i + 1]! - off[i]!);
  const offsets = (lengths: ReturnType<typeof gather>) => {
    const len = new Uint32Array(lengths.bytes.buffer, lengths.bytes.byteOffset, lengths.bytes.byteLength / 4);
    const out = sharedUint32(points + 1);
    for (let i = 0; i < points; i++) {
      const next = out[i]! + len[i]!;
      if (next > 0xffffffff) throw new Error('the shards together hold more than 2^32 - 1 entries: CSR offsets are Uint32');
      out[i + 1] = next;
    }
    return out;
  };
  const u32 = (a: Uint32Array) => {
    const g = gather(a);
    const out = sharedUint32(g.bytes.byteLength / 4);
    out.set(new Uint32Array(g.bytes.buffer, g.bytes.byteOffset, g.bytes.byteLength / 4));
    return out;
  };
  const nnz = local.offsets[local.points]!, nl = local.labelOffsets[local.points]!;
  const featureOffsets = offsets(gather(rowLengths(local.offsets)));
  const labelOffsets = offsets(gather(rowLengths(local.labelOffsets)));
  const indices = u32(local.indices.subarray(0, nnz));
  const g = gather(local.values.subarray(0, nnz));
  const values = sharedFloat32(g.bytes.byteLength / 4);
  values.set(new Float32Array(g.bytes.buffer, g.bytes.byteOffset, g.bytes.byteLength / 4));
  const labelIndices = u32(local.labelIndices.subarray(0, nl));
  return { points, features, labels, offsets: featureOffsets, indices, values, labelOffsets, labelIndices };
}
