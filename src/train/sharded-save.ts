// The model file of a label-sharded network (src/train/sharded.ts), streamed: an ordinary model file
// (src/network/model-file.ts, the sections Network.save writes, in its order), which one process loads, written
// by rank 0 while the ranks send it their rows round by round. No rank ever holds the whole model: rank 0 holds
// one round (at most ROUND_BYTES) besides its own part, and the output layer's biases (4 bytes a label).
//
// Every rank calls saveShardedModel with the same arguments (a collective). The sections the ranks hold in
// parts are streams (SectionStream): for a range of global ids at a time (features for layer 0 and the wide
// part, labels for the output layer and the re-ranker), each rank sends its entries of the range (MPI_Gatherv to
// rank 0), and rank 0 places them in global order and writes them. The other ranks run the same rounds, in the
// same order, sending only. The sizes the header needs (the wide part's and the re-ranker's entries) are summed
// first.
//
// A write that fails on rank 0 (the path is a directory now, the disk is full) does not leave the others in a
// round: rank 0 runs the rest of every stream's rounds without writing, and the ranks then agree on rank 0's
// error (saveShardedModel throws it on every rank). So the job can try the next place (rescue-save.ts): every
// rank calls again, with the same rounds.
import { resolve } from 'node:path';
import { resolveConfig } from '../network/config.js';
import { INPUT_LOG_SECTION, inputLogSection } from '../network/input-scale.js';
import { MODEL_VERSION, type ModelMeta, type TrainingSummary } from '../network/model-file.js';
import type { InputMap } from '../network/input-map.js';
import type { ProbabilityCalibration } from '../network/calibration.js';
import type { RerankState } from '../network/rerank.js';
import type { TextVectorizer } from '../text/vectorizer.js';
import { writeBinFile, type SectionArray, type SectionStream } from '../util/binfile.js';
import { mpi } from './mpi.js';
import type { ShardedModel } from './sharded.js';
import { agreeOnRoot } from './distributed.js';

/**
 * Most bytes of rows one round gathers on rank 0 (which holds the round's messages and the round's rows in
 * file order at once). 16 MiB: at the Amazon-670K shape 64 MiB rounds raised rank 0's peak by 150 MB.
 */
const ROUND_BYTES = 16 << 20;

/** What a model file holds besides the sharded network (alike on every rank). */
export interface ShardedModelExtras {
  trainPoints: number;
  batchesDone: number;
  inputScale: Float32Array | null;
  /** The input feature map (src/network/input-map.ts), or null: meta inputFeatures and section inputMap. */
  inputMap: InputMap | null;
  /** The inputs' count compression (InputScaleReport.method 'log'): the model file marks it. */
  inputLog: boolean;
  /** This rank's part of the re-ranker (classifiers of its labels only), and its weight and shortlist; null: none. */
  rerank: { state: RerankState | null; weight: number; shortlist: number } | null;
  textVectorizer?: TextVectorizer;
  labelNames?: readonly string[];
  training?: TrainingSummary;
  /** The calibrated probabilities (alike on every rank), or none. */
  calibration?: ProbabilityCalibration | null;
}

type Gatherv = (b: Uint8Array, root: number) => { data: Uint8Array; counts: number[] };
/** Rank 0's text handed to every rank (the write's outcome). */
type Agree = (value: string) => string;

/** The first index of ascending `a` at or above x. */
function lowerBound(a: Uint32Array, x: number): number {
  let lo = 0, hi = a.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (a[mid]! < x) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/**
 * Writes the model file of the sharded network to `path` (rank 0 writes; every rank calls it). `gatherv`: the
 * collective (default: the MPI addon's); `agree`: rank 0's text to every rank (default: an MPI allgatherv).
 * Throws rank 0's write error on every rank when the file could not be written (the rounds all ran).
 */
export async function saveShardedModel(
  path: string, model: ShardedModel, x: ShardedModelExtras, gatherv: Gatherv = (b, r) => mpi().gatherv(b, r), agree: Agree = (v) => agreeOnRoot(model.comm, v),
): Promise<void> {
  const comm = model.comm, root = comm.rank === 0;
  const g = resolveConfig(model.global);
  const layers = model.net.spec.layers;
  const K = layers.length - 1;
  const out = layers[K]!, l0 = layers[0]!;
  const D = g.inputDim, L = g.layers[K]!.size, d = out.inDim, H0 = l0.outDim;
  const sections: Record<string, SectionArray | SectionStream> = {};
  // Layer 0: rows of the input features, in feature order.
  sections['layer0.weights'] = rowStream(model.features, D, H0, (e) => l0.weights.subarray(e * H0, (e + 1) * H0), gatherv, root);
  sections['layer0.bias'] = l0.bias;
  for (let k = 1; k < K; k++) {
    sections[`layer${k}.weights`] = layers[k]!.weights;
    sections[`layer${k}.bias`] = layers[k]!.bias;
  }
  // The output layer: rows of the labels, in label order; the biases collected in the same rounds.
  const bias = root ? new Float32Array(L) : null;
  sections[`layer${K}.weights`] = rowStream(model.labels, L, d, (e) => out.weights.subarray(e * d, (e + 1) * d), gatherv, root, (j, e, v) => {
    if (bias) bias[j] = v;
  }, (e) => out.bias[e]!);
  sections[`layer${K}.bias`] = lazyArray(() => bias, 'f32', L);
  if (out.wide) {
    const w = out.wide;
    // Entries per feature over every rank.
    const counts = new Float64Array(D);
    for (let f = 0; f < D; f++) counts[f] = w.offsets[f + 1]! - w.offsets[f]!;
    if (comm.size > 1) comm.allreduceSum(counts);
    const offsets = new Uint32Array(D + 1);
    for (let f = 0; f < D; f++) offsets[f + 1] = offsets[f]! + counts[f]!;
    const nnz = offsets[D]!;
    sections[`layer${K}.wide.offsets`] = offsets;
    const wideRounds = (what: 'labels' | 'weights'): SectionStream => ({
      dtype: what === 'labels' ? 'u32' : 'f32', length: nnz,
      async *chunks() {
        for (let f0 = 0; f0 < D;) {
          let f1 = f0 + 1;
          while (f1 < D && 8 * (offsets[f1 + 1]! - offsets[f0]!) <= ROUND_BYTES) f1++;
          const n = f1 - f0, e0 = w.offsets[f0]!, e1 = w.offsets[f1]!;
          // [u32 count per feature][u32 global labels][f32 weights] of this rank's pairs of the round's features.
          const msg = new Uint32Array(n + 2 * (e1 - e0));
          for (let f = f0; f < f1; f++) msg[f - f0] = w.offsets[f + 1]! - w.offsets[f]!;
          for (let e = e0; e < e1; e++) msg[n + e - e0] = model.labels[w.labels[e]!]!;
          new Float32Array(msg.buffer).set(w.weights.subarray(e0, e1), n + (e1 - e0));
          const got = gatherv(new Uint8Array(msg.buffer), 0);
          if (root) {
            // Each feature's pairs merged over the ranks, labels ascending (a model file's order).
            const m = offsets[f1]! - offsets[f0]!;
            const labels = new Uint32Array(m), weights = new Float32Array(m);
            const parts = splitParts(got, n);
            const cur = new Uint32Array(parts.length);
            for (let f = 0; f < n; f++) {
              let at = offsets[f0 + f]! - offsets[f0]!;
              parts.forEach((p, q) => (cur[q] = p.off[f]!));
              // A k-way merge of the ranks' lists (each ascending, the ranks' labels disjoint).
              for (;;) {
                let best = -1, bestJ = 0;
                for (let q = 0; q < parts.length; q++) {
                  if (cur[q]! >= parts[q]!.off[f + 1]!) continue;
                  const j = parts[q]!.labels[cur[q]!]!;
                  if (best < 0 || j < bestJ) best = q, bestJ = j;
                }
                if (best < 0) break;
                labels[at] = bestJ;
                weights[at++] = parts[best]!.weights[cur[best]!]!;
                cur[best]!++;
              }
            }
            yield what === 'labels' ? u8(labels) : u8(weights);
          }
          f0 = f1;
        }
      },
    });
    sections[`layer${K}.wide.labels`] = wideRounds('labels');
    sections[`layer${K}.wide.weights`] = wideRounds('weights');
  }
  sections['labelFreq'] = model.labelFreq;
  if (x.inputScale) sections['inputScale'] = x.inputScale;
  if (x.inputLog) sections[INPUT_LOG_SECTION] = inputLogSection();
  if (x.inputMap) sections['inputMap'] = x.inputMap.ids;
  // The re-ranker: its classifiers' entries by label (each label's from its owner), and the biases.
  let rerankMeta: ModelMeta['rerank'];
  if (x.rerank && x.rerank.weight > 0) {
    const r = x.rerank.state;
    const counts = new Float64Array(L);
    if (r) for (const j of model.labels) counts[j] = r.offsets[j + 1]! - r.offsets[j]!;
    if (comm.size > 1) comm.allreduceSum(counts);
    const offsets = new Uint32Array(L + 1);
    for (let j = 0; j < L; j++) offsets[j + 1] = offsets[j]! + counts[j]!;
    const nnz = offsets[L]!;
    rerankMeta = { weight: x.rerank.weight, shortlist: x.rerank.shortlist, entries: nnz };
    const rrBias = root ? new Float32Array(L) : null;
    const entryRounds = (what: 'features' | 'weights'): SectionStream => ({
      dtype: what === 'features' ? 'u32' : 'f32', length: nnz,
      async *chunks() {
        for (let j0 = 0; j0 < L;) {
          let j1 = j0 + 1;
          while (j1 < L && 4 * (offsets[j1 + 1]! - offsets[j0]! + (j1 - j0)) <= ROUND_BYTES) j1++;
          // This rank's labels of the round: [u32 label, u32 count, then its entries' features (or weights)]..., and the biases.
          const a = lowerBound(model.labels, j0), b = lowerBound(model.labels, j1);
          const parts: number[] = [];
          for (let e = a; e < b; e++) {
            const j = model.labels[e]!;
            const k0 = r ? r.offsets[j]! : 0, k1 = r ? r.offsets[j + 1]! : 0;
            parts.push(j, k1 - k0, bitsOf(r ? r.bias[j]! : -1));
            for (let k = k0; k < k1; k++) parts.push(what === 'features' ? r!.features[k]! : bitsOf(r!.weights[k]!));
          }
          const got = gatherv(new Uint8Array(Uint32Array.from(parts).buffer), 0);
          if (root) {
            const buf = new Uint32Array(offsets[j1]! - offsets[j0]!);
            const words = new Uint32Array(got.data.buffer.slice(got.data.byteOffset, got.data.byteOffset + got.data.byteLength));
            for (let p = 0; p < words.length;) {
              const j = words[p]!, c = words[p + 1]!;
              if (j < j0 || j >= j1 || c !== offsets[j + 1]! - offsets[j]!) throw new Error(`the re-ranker's entries of label ${j} arrived malformed`);
              if (what === 'features') rrBias![j] = new Float32Array(Uint32Array.of(words[p + 2]!).buffer)[0]!;
              buf.set(words.subarray(p + 3, p + 3 + c), offsets[j]! - offsets[j0]!);
              p += 3 + c;
            }
            yield u8(buf);
          }
          j0 = j1;
        }
      },
    });
    sections['rerank.offsets'] = offsets;
    sections['rerank.features'] = entryRounds('features');
    sections['rerank.weights'] = entryRounds('weights');
    sections['rerank.bias'] = lazyArray(() => rrBias, 'f32', L);
  }
  const meta: ModelMeta = {
    format: 'sublinear-model', version: MODEL_VERSION, config: g, batchesDone: x.batchesDone, rebuildRound: 0, trainPoints: x.trainPoints,
    ...(x.training ? { training: x.training } : {}),
    ...(x.calibration ? { calibration: x.calibration } : {}),
    ...(x.inputMap ? { inputFeatures: x.inputMap.features } : {}),
  };
  const extraMeta: Pick<ModelMeta, 'text' | 'labelNames' | 'rerank'> = {};
  if (rerankMeta) extraMeta.rerank = rerankMeta;
  if (x.textVectorizer) {
    const p = x.textVectorizer.toParts();
    extraMeta.text = p.meta;
    sections['text.vocabulary'] = p.vocabulary;
    sections['text.idf'] = p.idf;
  }
  if (x.labelNames) {
    extraMeta.labelNames = x.labelNames.length;
    sections['labelNames'] = new TextEncoder().encode(x.labelNames.map((n) => `${n}\n`).join(''));
  }
  // Every stream's rounds run once, in section order, whether the file takes their chunks or not.
  const streams = new Map<string, ResumableStream>();
  for (const [name, s] of Object.entries(sections)) {
    if (typeof (s as SectionStream).chunks === 'function') streams.set(name, resumable(s as SectionStream));
  }
  let error = '';
  if (root) {
    const wrapped = Object.fromEntries(Object.entries(sections).map(([name, s]) => [name, streams.get(name)?.stream ?? s]));
    try {
      await writeBinFile(resolve(path), { kind: 'model', meta: { ...meta, ...extraMeta }, sections: wrapped });
    } catch (e) {
      error = (e as Error).message || String(e);
    }
  }
  // The rounds the file did not take (all of them on the other ranks: only rank 0's chunks are written).
  for (const s of streams.values()) await s.drain();
  // Rank 0's outcome reaches every rank: all go on together, or all throw its error.
  const outcome = agree(error);
  if (outcome) throw new Error(outcome);
}

/** A stream whose rounds can be finished after its reader stopped early (a failed write): `drain` runs the rest. */
interface ResumableStream {
  stream: SectionStream;
  drain(): Promise<void>;
}

function resumable(s: SectionStream): ResumableStream {
  let it: AsyncIterator<Uint8Array> | null = null;
  let done = false;
  const next = async (): Promise<IteratorResult<Uint8Array>> => {
    it ??= s.chunks()[Symbol.asyncIterator]();
    const r = await it.next();
    if (r.done) done = true;
    return r;
  };
  return {
    stream: {
      dtype: s.dtype, length: s.length,
      // Pulled by hand: a reader that stops early leaves the underlying rounds where they are (for drain).
      async *chunks() {
        for (;;) {
          const r = await next();
          if (r.done) return;
          yield r.value;
        }
      },
    },
    async drain() {
      while (!done) await next();
    },
  };
}

/**
 * The rows of a sliced layer in global order (`count` ids, rows of `width`), gathered round by round: each rank
 * sends the rows of its ids (`ids`, ascending) in the round's range (row e: row(e)), with `extra(e)` (one float
 * per row, e.g. its bias) when given; rank 0 yields the round's rows and hands each row's extra to onExtra.
 */
function rowStream(
  ids: Uint32Array, count: number, width: number, row: (e: number) => Float32Array, gatherv: Gatherv, root: boolean,
  onExtra?: (id: number, e: number, v: number) => void, extra?: (e: number) => number,
): SectionStream {
  return {
    dtype: 'f32', length: count * width,
    async *chunks() {
      const per = Math.max(1, Math.floor(ROUND_BYTES / (4 * width)));
      const w1 = width + 1 + (extra ? 1 : 0);
      for (let j0 = 0; j0 < count; j0 += per) {
        const j1 = Math.min(count, j0 + per);
        const a = lowerBound(ids, j0), b = lowerBound(ids, j1);
        // Per row: [id as u32 bits][extra][row].
        const msg = new Float32Array((b - a) * w1);
        const bits = new Uint32Array(msg.buffer);
        for (let e = a; e < b; e++) {
          const at = (e - a) * w1;
          bits[at] = ids[e]!;
          if (extra) msg[at + 1] = extra(e);
          msg.set(row(e), at + w1 - width);
        }
        const got = gatherv(new Uint8Array(msg.buffer), 0);
        if (!root) continue;
        const buf = new Float32Array((j1 - j0) * width);
        const all = got.data.byteOffset % 4 === 0
          ? new Float32Array(got.data.buffer, got.data.byteOffset, got.data.byteLength / 4)
          : new Float32Array(got.data.slice().buffer);
        const allBits = new Uint32Array(all.buffer);
        const rows = all.length / w1;
        if (rows !== j1 - j0) throw new Error(`rows ${j0}..${j1 - 1} of a sliced layer: ${rows} arrived, expected ${j1 - j0} (each held by one rank)`);
        for (let t = 0; t < rows; t++) {
          const j = allBits[t * w1]!;
          if (j < j0 || j >= j1) throw new Error(`row ${j} arrived in the round of rows ${j0}..${j1 - 1}`);
          buf.set(all.subarray(t * w1 + w1 - width, (t + 1) * w1), (j - j0) * width);
          if (onExtra && extra) onExtra(j, t, all[t * w1 + 1]!);
        }
        yield u8(buf);
      }
    },
  };
}

/** A section whose array exists on rank 0 only once the streams before it have run (the biases collected with the rows). */
function lazyArray(get: () => Float32Array | null, dtype: 'f32', length: number): SectionStream {
  return {
    dtype, length,
    async *chunks() {
      const a = get();
      if (a) yield u8(a);
    },
  };
}

/** Each rank's [counts (n)][labels][weights] of a wide round, as CSR parts. */
function splitParts(got: { data: Uint8Array; counts: number[] }, n: number): { off: Uint32Array; labels: Uint32Array; weights: Float32Array }[] {
  const parts: { off: Uint32Array; labels: Uint32Array; weights: Float32Array }[] = [];
  let base = got.data.byteOffset;
  for (const bytes of got.counts) {
    const words = new Uint32Array(got.data.buffer.slice(base, base + bytes));
    base += bytes;
    const off = new Uint32Array(n + 1);
    for (let f = 0; f < n; f++) off[f + 1] = off[f]! + words[f]!;
    const cnt = off[n]!;
    if (words.length !== n + 2 * cnt) throw new Error(`a rank's wide pairs arrived malformed (${bytes} bytes for ${cnt} pairs)`);
    parts.push({ off, labels: words.subarray(n, n + cnt), weights: new Float32Array(words.buffer, 4 * (n + cnt), cnt) });
  }
  return parts;
}

function u8(a: Float32Array | Uint32Array): Uint8Array {
  return new Uint8Array(a.buffer, a.byteOffset, a.byteLength);
}

function bitsOf(v: number): number {
  return new Uint32Array(Float32Array.of(v).buffer)[0]!;
}

/** Bytes of one round (for the plan: what rank 0 holds while saving besides its part). */
export const SAVE_ROUND_BYTES = ROUND_BYTES;
