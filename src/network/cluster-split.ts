/**
 * How the cluster index of a sampled output layer splits its labels, shared by one process's
 * Network.buildClusterIndex and the label-sharded ranks' buildShardIndex (src/train/sharded-index.ts), which
 * must build the same index: the head (the most frequent labels in training, always scored), the clustered
 * tail (the other labels seen in training; none seen: every label), the number of clusters, the Lloyd
 * iterations' defaults and their seed.
 */

/** Rows sampled for the Lloyd iterations (netClusterBuild's `sample`). */
export const CLUSTER_INDEX_SAMPLE = 65536;

/** Lloyd iterations unless told. */
export const CLUSTER_INDEX_ITERS = 8;

/** The seed of the index's sampling, from the network's seed. */
export function clusterIndexSeed(seed: number): number {
  return (seed * 48271 + 11) >>> 0;
}

/**
 * The head and the clustered tail (label ids, each ascending) of label counts `freq`: the `head` most frequent
 * labels (default: 0.5% of the labels, rounded up; never more than the labels seen; ties: the smaller id), then
 * every other label seen in training (every label when none was seen).
 */
export function clusterHeadAndTail(freq: Uint32Array, head: number | undefined): { head: Uint32Array; tail: Uint32Array } {
  const N = freq.length;
  let seen = 0;
  for (let j = 0; j < N; j++) if (freq[j]! > 0) seen++;
  const universe = seen > 0 ? seen : N;
  const byFreq = new Uint32Array(N);
  for (let j = 0; j < N; j++) byFreq[j] = j;
  byFreq.sort((x, y) => freq[y]! - freq[x]! || x - y);
  const H = Math.min(universe, head ?? Math.ceil(0.005 * N));
  return { head: byFreq.slice(0, H).sort(), tail: byFreq.slice(H, universe).sort() };
}

/** Clusters for `tail` labels: `clusters`, default round(sqrt(tail)), within [1, tail]; 0 for no tail. */
export function clusterCount(tail: number, clusters: number | undefined): number {
  return tail ? Math.max(1, Math.min(tail, clusters ?? Math.round(Math.sqrt(tail)))) : 0;
}
