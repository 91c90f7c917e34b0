// Sampled prediction of a label-sharded network (src/train/sharded.ts): the cluster index of one process
// (Network.buildClusterIndex, native/net_cluster.cc) built by the ranks together, and predictions that are one
// process's, merged from the ranks' parts.
//
// The index. One process takes a head of the most frequent labels and clusters the other labels seen in
// training by spherical k-means of their rows after the maximum-inner-product transform: squared norms of the
// rows, a sample of rows drawn in proportion to them, C first centres picked from the sample, Lloyd's
// iterations on the sample, then every row to its nearest centre. Here every rank computes its rows' norms and
// the ranks sum them (every rank then holds every norm, 8 bytes a label), so that every rank draws the same
// sample and the same first centres with the same random stream (the generator of native/rng.h, in
// src/util/rng.ts). A centre's vector comes from the rank owning its row (an all-reduce of C x (d + 2) floats).
// Each Lloyd iteration assigns every rank's own sample rows and the ranks sum the centres' sums and counts (an
// all-reduce of C x (d + 2) doubles): the centres are one process's up to the order of those sums. Finally
// every rank assigns its own rows: it holds its members of every cluster, and every cluster's size over all
// ranks. Per build a rank sends 8 N + about 16 C (d + 2) x (iterations + 1) bytes.
//
// Prediction. For a chunk of points every rank forms the hidden activations (the pre-activations summed over
// the ranks, as in training), scores the C centres and probes the clusters one process probes (the budget counts
// every rank's members), then scores its own head rows and its members of the probed clusters. The wide part
// proposes more candidates: one process keeps the wideExtra best proposals (score, then the smaller label) over
// every label. With several ranks one pass per chunk (netShardSampledScore with `prop`) returns, per point and
// logit scale, each rank's k best candidates and the log-sum-exp parts of its candidates, and apart its own
// wideExtra best proposals with their scores; gathered, every rank keeps the wideExtra best proposals of them all
// (mergeProposals) and merges them with the candidates (descending score, ties by the smaller label), normalised
// by the combined log-sum-exp: one process's top-k and probabilities. (A first pass that only gathered the
// proposals, then a second that scored, walked the wide part and the centres twice: 2.4 of the 7 seconds a rank
// spent in sampled prediction on debian-deps.)
// What is not a rank's own labels' work, the centres' scores with the clusters' order and the merge, each rank does
// for a share of each chunk's points only (predictSharded).
import type { SparseDataset } from '../datasets/csr.js';
import { native } from '../native/addon.js';
import { CLUSTER_INDEX_ITERS, CLUSTER_INDEX_SAMPLE, clusterCount, clusterHeadAndTail, clusterIndexSeed } from '../network/cluster-split.js';
import { SplitMix64 } from '../util/rng.js';
import { bestHead, shareOf } from './shard-merge.js';
import type { ShardedModel } from './sharded.js';

/** One rank's part of the cluster index (see the file's comment). */
export interface ShardIndex {
  /** (C, d + 2) the centres, alike on every rank. */
  centroids: Float32Array;
  /** (C + 1) this rank's members of cluster c are members[offsets[c] .. offsets[c + 1]) (its rows, ascending). */
  offsets: Uint32Array;
  members: Uint32Array;
  /** (C) every rank's members of each cluster. */
  sizes: Uint32Array;
  /** This rank's rows of the head (scored for every point). */
  head: Uint32Array;
  /** Labels in the whole head. */
  headTotal: number;
}

/** Options of buildShardIndex: Network.buildClusterIndex's. */
export interface ShardIndexOptions {
  /** Lloyd iterations. Default 8 (2 for the held-out scoring). */
  iters?: number;
  /** Labels in the head. Default 0.5% of the outputs. */
  head?: number;
  /** Clusters. Default round(sqrt(labels clustered)). */
  clusters?: number;
}

const splits = new WeakMap<ShardedModel, { head: Uint32Array; tail: Uint32Array; headOption: number | undefined }>();

/**
 * Builds the cluster index of `model`'s output layer as one process builds it from the whole layer (a collective:
 * every rank calls it). `seed` is the network's seed.
 */
export function buildShardIndex(model: ShardedModel, seed: number, o: ShardIndexOptions = {}): ShardIndex {
  const nat = native();
  const comm = model.comm;
  const out = model.net.spec.layers.at(-1)!;
  const d = out.inDim, w = d + 2;
  let split = splits.get(model);
  if (!split || split.headOption !== o.head) splits.set(model, (split = { ...clusterHeadAndTail(model.labelFreq, o.head), headOption: o.head }));
  const { head, tail } = split;
  const local = model.localOf;
  const mineOf = (ids: Uint32Array) => {
    const rows: number[] = [];
    for (const j of ids) if (local[j]! >= 0) rows.push(local[j]!);
    return Uint32Array.from(rows);
  };
  const headRows = mineOf(head);
  const M = tail.length;
  const C = clusterCount(M, o.clusters);
  if (C === 0) return { centroids: new Float32Array(0), offsets: new Uint32Array(1), members: new Uint32Array(0), sizes: new Uint32Array(0), head: headRows, headTotal: head.length };
  // Every tail row's squared norm (each rank its own, summed): positions in `tail`.
  const tailRows = mineOf(tail);
  const tailPos = new Uint32Array(tailRows.length);
  for (let p = 0, e = 0; p < M; p++) if (local[tail[p]!]! >= 0) tailPos[e++] = p;
  const mineNorm = new Float64Array(tailRows.length);
  nat.netClusterNorms(out.weights, out.bias, d, tailRows, mineNorm);
  const norm2 = new Float64Array(M);
  tailPos.forEach((p, e) => (norm2[p] = mineNorm[e]!));
  if (comm.size > 1) comm.allreduceSum(norm2);
  // This rank's norms by row, for the native transform.
  const normByRow = new Float64Array(out.outDim);
  tailRows.forEach((r, e) => (normByRow[r] = mineNorm[e]!));
  let M2 = 0;
  for (let p = 0; p < M; p++) if (norm2[p]! > M2) M2 = norm2[p]!;
  const invM = M2 > 0 ? 1 / Math.sqrt(M2) : 1;
  const rng = new SplitMix64(clusterIndexSeed(seed));
  // The sample: systematic, in proportion to the squared norms (positions in `tail`).
  const want = Math.max(C, Math.min(CLUSTER_INDEX_SAMPLE, M));
  let smp: number[] = [];
  let total = 0;
  for (let p = 0; p < M; p++) total += norm2[p]!;
  if (total > 0 && want < M) {
    const step = total / want;
    let next = step * (rng.nextU32() / 4294967296), acc = 0;
    for (let p = 0; p < M; p++) {
      acc += norm2[p]!;
      if (acc > next) {
        smp.push(p);
        while (next < acc) next += step;
      }
    }
  }
  if (smp.length < C) {
    // Too few distinct heavy rows: topped up uniformly (tail order), as one process does.
    const inSmp = new Uint8Array(M);
    for (const p of smp) inSmp[p] = 1;
    const rest: number[] = [];
    for (let p = 0; p < M; p++) if (!inSmp[p]) rest.push(p);
    for (let i = 0; smp.length < Math.min(want, M); i++) {
      const j = i + rng.below(rest.length - i);
      [rest[i], rest[j]] = [rest[j]!, rest[i]!];
      smp.push(rest[i]!);
    }
    smp = smp.sort((a, b) => a - b);
  }
  const m = smp.length;
  // The first centres: C distinct sample rows (a partial shuffle), each from the rank owning it.
  const pick = smp.slice();
  for (let c = 0; c < C; c++) {
    const j = c + rng.below(m - c);
    [pick[c], pick[j]] = [pick[j]!, pick[c]!];
  }
  const centroids = new Float32Array(C * w);
  transformInto(model, pick.slice(0, C).map((p) => tail[p]!), normByRow, invM, centroids);
  // Lloyd's iterations over the sample: each rank assigns its own sample rows; sums and counts added up.
  const smpRows: number[] = [];
  for (const p of smp) if (local[tail[p]!]! >= 0) smpRows.push(local[tail[p]!]!);
  const smpMine = Uint32Array.from(smpRows);
  const best = new Uint32Array(Math.max(smpMine.length, tailRows.length));
  const iters = o.iters ?? CLUSTER_INDEX_ITERS;
  for (let it = 0; it < iters; it++) {
    const sums = new Float64Array(C * w), counts = new Float64Array(C);
    nat.netClusterAssign(out.weights, out.bias, d, smpMine, normByRow, invM, centroids, best, sums, counts);
    if (comm.size > 1) {
      comm.allreduceSum(sums);
      comm.allreduceSum(counts);
    }
    const restart: number[] = [], restartAt: number[] = [];
    for (let c = 0; c < C; c++) {
      let q = 0;
      for (let r = 0; r < w; r++) q += sums[c * w + r]! * sums[c * w + r]!;
      if (counts[c] === 0 || q <= 0) {
        // An empty cluster restarts at a random sample row (from its owner).
        restart.push(tail[smp[rng.below(m)]!]!);
        restartAt.push(c);
        continue;
      }
      const inv = 1 / Math.sqrt(q);
      for (let r = 0; r < w; r++) centroids[c * w + r] = sums[c * w + r]! * inv;
    }
    if (restart.length) {
      const v = new Float32Array(restart.length * w);
      transformInto(model, restart, normByRow, invM, v);
      restartAt.forEach((c, e) => centroids.set(v.subarray(e * w, (e + 1) * w), c * w));
    }
  }
  // Every row of this rank to its nearest centre: its members of each cluster, and the clusters' sizes.
  nat.netClusterAssign(out.weights, out.bias, d, tailRows, normByRow, invM, centroids, best, null, null);
  const offsets = new Uint32Array(C + 1);
  for (let e = 0; e < tailRows.length; e++) offsets[best[e]! + 1]!++;
  const sizes64 = new Float64Array(C);
  for (let c = 0; c < C; c++) sizes64[c] = offsets[c + 1]!;
  if (comm.size > 1) comm.allreduceSum(sizes64);
  for (let c = 0; c < C; c++) offsets[c + 1]! += offsets[c]!;
  const cursor = offsets.slice(0, C);
  const members = new Uint32Array(tailRows.length);
  for (let e = 0; e < tailRows.length; e++) members[cursor[best[e]!]!++] = tailRows[e]!;
  return { centroids, offsets, members, sizes: Uint32Array.from(sizes64), head: headRows, headTotal: head.length };
}

/**
 * out (ids.length, d + 2) = the transformed rows of the global labels `ids` (a collective): each rank fills the
 * rows it owns (netClusterTransform), the ranks add up (every other entry is 0).
 */
function transformInto(model: ShardedModel, ids: number[], normByRow: Float64Array, invM: number, out: Float32Array): void {
  const outL = model.net.spec.layers.at(-1)!;
  const w = outL.inDim + 2;
  const at: number[] = [], rows: number[] = [];
  ids.forEach((j, e) => {
    const r = model.localOf[j]!;
    if (r >= 0) at.push(e), rows.push(r);
  });
  if (rows.length) {
    const v = new Float32Array(rows.length * w);
    native().netClusterTransform(outL.weights, outL.bias, outL.inDim, Uint32Array.from(rows), normByRow, invM, v);
    at.forEach((e, i) => out.set(v.subarray(i * w, (i + 1) * w), e * w));
  }
  if (model.comm.size > 1) model.comm.allreduceSum(out);
}

/** One process's predictions (Network.predictScaled's): per scale, the top-k labels and probabilities of every point. */
export interface ShardPredictions {
  /** Per scale: (points, k) global label ids (0xFFFFFFFF: none) and probabilities. */
  labels: Uint32Array[];
  scores: Float32Array[];
  /** Outputs scored per point, over every rank. */
  outputsScoredPerPoint: number;
}

/**
 * Sampled prediction of `data` (already input-scaled) with `index` (buildShardIndex): the top-k of every point
 * under each of `scales` (null: one scale of 1), candidates = one process's candidate budget. A collective;
 * every rank returns the whole result.
 *
 * What is not a rank's own labels' work is split between the ranks by points (shareOf): each rank scores the
 * centres and orders the clusters for its share of a chunk's points only (netShardProbe), and merges the ranks'
 * candidates and proposals for its share only; the lists travel in one all-gather per chunk, with the merged
 * results of the chunk before (and one more after the last chunk). Every rank computed both for every point
 * before: about 0.7 s of the 2.4 s a rank spent in held-out scoring and the shortlists on debian-deps.
 */
export function predictSharded(
  model: ShardedModel, index: ShardIndex, data: SparseDataset, k: number, scales: readonly number[] | null, candidates: number, chunk = 256,
): ShardPredictions {
  const nat = native();
  const comm = model.comm;
  const R = comm.size, me = comm.rank;
  const spec = model.net.spec;
  const out = spec.layers.at(-1)!;
  const H0 = spec.layers[0]!.outDim, d = out.inDim;
  const S = scales?.length ?? 1;
  const scaleArray = scales ? Float32Array.from(scales) : null;
  const N = data.points;
  const labels = Array.from({ length: S }, () => new Uint32Array(N * k).fill(0xffffffff));
  const scores = Array.from({ length: S }, () => new Float32Array(N * k));
  // One process lets the wide part propose a sixteenth of the budget more candidates per point (at least k).
  const extra = out.wide ? Math.max(k, Math.floor(candidates / 16)) : 0;
  const ix = { ...index, budget: candidates };
  const C = index.sizes.length;
  const mine = model.labels;
  // With several ranks and a wide part, one pass per chunk gives each rank's candidates and, apart, its best
  // proposals; the wideExtra best proposals over every rank then join the merge below (mergeProposals).
  const fused = extra > 0 && R > 1;
  const gather = (msg: Uint8Array) => (R > 1 ? comm.allgatherv(msg) : { data: msg, counts: [msg.byteLength] });
  let scored = 0, kept = 0;
  // The chunk whose share this rank merged last, not yet sent: its merged rows go with the next exchange.
  let prev: { c0: number; q: number } | null = null;
  // Words of rank r's merged rows of chunk p: per scale its share's labels, then per scale their probabilities.
  const mergedWords = (p: { c0: number; q: number } | null, r: number) => {
    if (!p) return 0;
    const [lo, hi] = shareOf(p.q, R, r);
    return 2 * S * (hi - lo) * k;
  };
  /**
   * One all-gather: this rank's probe lists for its share of the chunk (counts, then the clusters; none at the
   * end) and its merged rows of chunk `prev`; every rank's merged rows are copied into the results, and every
   * rank's probe lists returned in rank order (null: no chunk).
   */
  const exchange = (probe: { counts: Uint32Array; clusters: Uint32Array } | null, q: number): { offsets: Uint32Array; clusters: Uint32Array } | null => {
    const pw = probe ? probe.counts.length + probe.clusters.length : 0;
    const msg = new Uint32Array(pw + mergedWords(prev, me));
    let at = 0;
    if (probe) {
      msg.set(probe.counts, 0);
      msg.set(probe.clusters, probe.counts.length);
      at = pw;
    }
    if (prev) {
      const [lo, hi] = shareOf(prev.q, R, me);
      const a = (prev.c0 + lo) * k, b = (prev.c0 + hi) * k;
      for (let si = 0; si < S; si++, at += b - a) msg.set(labels[si]!.subarray(a, b), at);
      for (let si = 0; si < S; si++, at += b - a) msg.set(new Uint32Array(scores[si]!.buffer, scores[si]!.byteOffset + 4 * a, b - a), at);
    }
    const g = gather(new Uint8Array(msg.buffer));
    const all = g.data.byteOffset % 4 === 0 ? new Uint32Array(g.data.buffer, g.data.byteOffset, g.data.byteLength / 4) : new Uint32Array(g.data.slice().buffer);
    const offsets = new Uint32Array(q + 1);
    const cl: Uint32Array[] = [];
    let base = 0;
    for (let r = 0; r < R; r++) {
      let w = base;
      if (probe) {
        // Rank r's share of this chunk: its points' counts, then their clusters.
        const [lo, hi] = shareOf(q, R, r);
        let n = 0;
        for (let i = lo; i < hi; i++) n += all[w + i - lo]!;
        for (let i = lo; i < hi; i++) offsets[i + 1] = offsets[i]! + all[w + i - lo]!;
        cl.push(all.subarray(w + hi - lo, w + hi - lo + n));
        w += hi - lo + n;
      }
      if (prev) {
        const [lo, hi] = shareOf(prev.q, R, r);
        const a = (prev.c0 + lo) * k, b = (prev.c0 + hi) * k;
        if (r !== me) {
          for (let si = 0; si < S; si++, w += b - a) labels[si]!.set(all.subarray(w, w + b - a), a);
          for (let si = 0; si < S; si++, w += b - a) new Uint32Array(scores[si]!.buffer, scores[si]!.byteOffset + 4 * a, b - a).set(all.subarray(w, w + b - a));
        } else w += mergedWords(prev, r);
      }
      if (w - base !== g.counts[r]! / 4) throw new Error(`predictSharded: rank ${r} sent ${g.counts[r]} bytes, expected ${4 * (w - base)}`);
      base = w;
    }
    prev = null;
    if (!probe) return null;
    const clusters = new Uint32Array(offsets[q]!);
    let e = 0;
    for (const c of cl) clusters.set(c, e), (e += c.length);
    return { offsets, clusters };
  };
  for (let c0 = 0; c0 < N; c0 += chunk) {
    const q = Math.min(chunk, N - c0);
    const [lo, hi] = shareOf(q, R, me);
    const ids = Uint32Array.from({ length: q }, (_, i) => c0 + i);
    const Z = new Float32Array(q * H0);
    nat.netShardInput(spec, data, ids, 0, model.featureOf, Z);
    const { H } = model.hidden(Z, 0, 0);
    // The clusters this rank's share of the points probes; every rank's share gathered (with the last merge).
    const probe = { counts: new Uint32Array(hi - lo), clusters: new Uint32Array((hi - lo) * C) };
    if (hi > lo) nat.netShardProbe(spec, H.subarray(lo * d, hi * d), ix, probe);
    let n = 0;
    for (let i = 0; i < hi - lo; i++) {
      probe.clusters.copyWithin(n, i * C, i * C + probe.counts[i]!);
      n += probe.counts[i]!;
    }
    const probes = exchange({ counts: probe.counts, clusters: probe.clusters.subarray(0, n) }, q)!;
    const idx = new Uint32Array(q * S * k), val = new Float32Array(q * S * k), lse = new Float64Array(q * S * 2);
    const E = fused ? extra : 0;
    const prop = fused ? { idx: new Uint32Array(q * E), val: new Float32Array(q * E), comb: new Float32Array(q * S * E) } : null;
    scored += nat.netShardSampledScore(spec, data, ids, H, ix, k, scaleArray, extra, { idx, val, lse }, prop, probes);
    for (let e = 0; e < idx.length; e++) if (idx[e] !== 0xffffffff) idx[e] = mine[idx[e]!]!;
    if (prop) for (let e = 0; e < prop.idx.length; e++) if (prop.idx[e] !== 0xffffffff) prop.idx[e] = mine[prop.idx[e]!]!;
    // [lse f64 (q S 2)][idx u32 (q S k)][val f32 (q S k)] per rank, then (fused) [idx u32 (q E)][val f32 (q E)][comb f32 (q S E)].
    const at1 = 16 * q * S, at2 = at1 + 4 * q * S * k, at3 = at2 + 4 * q * S * k, at4 = at3 + 4 * q * E, at5 = at4 + 4 * q * E;
    const bytes = at5 + 4 * q * S * E;
    const msg = new Uint8Array(bytes);
    msg.set(new Uint8Array(lse.buffer), 0);
    msg.set(new Uint8Array(idx.buffer), at1);
    msg.set(new Uint8Array(val.buffer), at2);
    if (prop) {
      msg.set(new Uint8Array(prop.idx.buffer), at3);
      msg.set(new Uint8Array(prop.val.buffer), at4);
      msg.set(new Uint8Array(prop.comb.buffer), at5);
    }
    const g = gather(msg);
    const base = (r: number) => g.data.byteOffset + r * bytes;
    const buf = g.data.buffer;
    const view = <T>(C: new (b: ArrayBufferLike, o: number, n: number) => T, at: number, n: number, width: number): T =>
      at % width === 0 ? new C(buf, at, n) : new C(buf.slice(at, at + n * width), 0, n);
    const Ls = Array.from({ length: R }, (_, r) => view(Float64Array, base(r), 2 * q * S, 8));
    const Is = Array.from({ length: R }, (_, r) => view(Uint32Array, base(r) + at1, q * S * k, 4));
    const Vs = Array.from({ length: R }, (_, r) => view(Float32Array, base(r) + at2, q * S * k, 4));
    const props = fused
      ? {
        idx: Array.from({ length: R }, (_, r) => view(Uint32Array, base(r) + at3, q * E, 4)),
        val: Array.from({ length: R }, (_, r) => view(Float32Array, base(r) + at4, q * E, 4)),
        comb: Array.from({ length: R }, (_, r) => view(Float32Array, base(r) + at5, q * S * E, 4)),
      }
      : null;
    // The proposals kept per point (fused): up to E (rank, slot) pairs, and their scores at the current scale.
    const keptR = new Int32Array(E), keptE = new Int32Array(E), keptId = new Uint32Array(E), keptV = new Float32Array(E);
    // The lists merged per point and scale: each rank's k best (entries at * k ..), then the kept proposals (list R).
    const lists = { idx: [...Is, keptId], val: [...Vs, keptV], off: new Int32Array(R + 1), len: new Int32Array(R + 1).fill(k) };
    const cur = new Int32Array(R + 1);
    // This rank's share of the points only; the others' merged rows arrive with the next exchange.
    for (let i = lo; i < hi; i++) {
      const nk = props ? mergeProposals(props.idx, props.val, i, E, keptR, keptE) : 0;
      kept += nk;
      for (let si = 0; si < S; si++) {
        const at = i * S + si;
        // The kept proposals at this scale, best first (descending score, ties by the smaller label).
        for (let e = 0; e < nk; e++) {
          keptId[e] = props!.idx[keptR[e]!]![i * E + keptE[e]!]!;
          keptV[e] = props!.comb[keptR[e]!]![at * E + keptE[e]!]!;
        }
        if (nk > 1) sortByScore(keptId, keptV, nk);
        let M = -Infinity;
        for (let r = 0; r < R; r++) M = Math.max(M, Ls[r]![2 * at]!);
        for (let e = 0; e < nk; e++) M = Math.max(M, keptV[e]!);
        let sum = 0;
        for (let r = 0; r < R; r++) if (Ls[r]![2 * at]! > -Infinity) sum += Ls[r]![2 * at + 1]! * Math.exp(Ls[r]![2 * at]! - M);
        for (let e = 0; e < nk; e++) if (keptV[e]! > -Infinity) sum += Math.exp(keptV[e]! - M);
        const total = M + Math.log(sum);
        // Each rank's k best, and the kept proposals, are in order (descending score, ties by the smaller
        // label): a merge of R + 1 lists (the proposals are list R).
        lists.off.fill(at * k, 0, R);
        lists.len[R] = nk;
        cur.fill(0);
        const row = (c0 + i) * k;
        for (let e = 0; e < k; e++) {
          const b = bestHead(lists, cur);
          if (b < 0) break;
          const o = lists.off[b]! + cur[b]!++;
          labels[si]![row + e] = lists.idx[b]![o]!;
          scores[si]![row + e] = Math.exp(lists.val[b]![o]! - total);
        }
      }
    }
    prev = { c0, q };
  }
  // The last chunk's merged rows.
  if (prev) exchange(null, 0);
  // The kept proposals (each rank counted its share's) were scored too, as one process scores them.
  const all = new Float64Array([scored, kept]);
  if (R > 1) comm.allreduceSum(all);
  return { labels, scores, outputsScoredPerPoint: (all[0]! + all[1]!) / Math.max(1, N) };
}

/**
 * The wideExtra (E) best proposals of point i over every rank (one process's choice: descending wide score, ties
 * by the smaller label): each rank's E best, best first (global ids, UINT32_MAX past its count), in idx[r]/val[r]
 * (i * E ..), merged; writes the chosen ranks and slots to keptR/keptE and returns how many (all of them when
 * there are at most E).
 */
export function mergeProposals(idx: Uint32Array[], val: Float32Array[], i: number, E: number, keptR: Int32Array, keptE: Int32Array): number {
  const R = idx.length;
  const lists = { idx, val, off: new Int32Array(R).fill(i * E), len: new Int32Array(R).fill(E) };
  const cur = new Int32Array(R);
  let n = 0;
  for (; n < E; n++) {
    const best = bestHead(lists, cur);
    if (best < 0) break;
    keptR[n] = best;
    keptE[n] = cur[best]!++;
  }
  return n;
}

/** Sorts the first n (id, score) pairs by descending score, ties by the smaller id (insertion sort: n is small). */
function sortByScore(ids: Uint32Array, v: Float32Array, n: number): void {
  for (let a = 1; a < n; a++) {
    const x = v[a]!, j = ids[a]!;
    let b = a - 1;
    while (b >= 0 && (v[b]! < x || (v[b] === x && ids[b]! > j))) {
      v[b + 1] = v[b]!;
      ids[b + 1] = ids[b]!;
      b--;
    }
    v[b + 1] = x;
    ids[b + 1] = j;
  }
}
