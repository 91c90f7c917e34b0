// Checkpoints of label-sharded training (src/train/sharded.ts): one directory per checkpoint,
// `<dir>/sharded-<batchesDone>/`, holding
//   shared.bin        rank 0: the replicated parts (layer 0's bias with its moments and step count, the middle
//                     layers' whole state), the training label counts and feature nonzero counts, and in its
//                     meta the global network configuration, the position and the run's settings;
//   slice-<r>.bin     rank r: its output rows (weights, bias, Adam moments, step counters) and their global
//                     label ids (`labels`); with a wide part, its labels' pairs as a feature-major CSR over
//                     the input features with global label ids (`wide.offsets|labels|weights|accum`); its rows
//                     of layer 0 (`in.weights|mWeights|vWeights|rowSteps`) and their global feature ids
//                     (`features`);
//   manifest.json     written by rank 0 last, after every rank's file is on disk (a barrier): the commit
//                     point. A directory without it is an unfinished write and is ignored (and removed by
//                     the next checkpoint).
// Every file goes through writeFileAtomic (writeBinFile). Only the 2 newest complete checkpoints are kept.
// `loadShardedPart` re-shards on load: under any number of ranks, each rank recomputes both shardings from the
// saved counts and copies its labels' rows and wide pairs and its features' rows out of the old slices (one
// file at a time). Checkpoints written before layer 0 was sharded (manifest without `layout`: layer 0 whole in
// shared.bin) are read too: each rank copies its features' rows out of shared.bin's layer 0.
import { readdir, rm, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { readBinFile, writeBinFile, type SectionArray } from '../util/binfile.js';
import { writeFileAtomic } from '../util/atomic-write.js';
import { resolveConfig, type NetworkConfig } from '../network/config.js';
import type { LayerState, NetSpec, WideState } from '../native/network-types.js';
import { mergeWide, pickWide, wideProblem } from '../network/wide.js';
import { INPUT_LOG_SECTION, inputLogProblem, inputLogSection } from '../network/input-scale.js';
import { inputMapProblem, type InputMap } from '../network/input-map.js';
import { allocateRank, replicatedArrays, shardFeatures, shardLabels } from './sharded.js';
import { selectionProblem, WeightSnapshot, type EarlyStopState, type ResolvedValidation, type SelectionReport } from './early-stop.js';

/** What a sharded checkpoint records besides the weights. */
export interface ShardCheckpointMeta {
  format: 'sublinear-sharded-checkpoint';
  /** The declared input dimension of a network with an input map (its rows' ids: shared.bin's inputMap section). */
  inputFeatures?: number;
  /** The whole network's configuration. */
  config: NetworkConfig;
  /** Ranks that wrote it (slice files). */
  ranks: number;
  /** Position: epochs finished, batches done in the current epoch, batches done in all. */
  epoch: number;
  batch: number;
  batchesDone: number;
  trainPoints: number;
  /** The run's settings (training data, epochs, batch, lr, seed, ...), for --resume. */
  settings: Record<string, unknown>;
  /**
   * 2: layer 0 by feature slices (in the slice files), the feature counts in shared.bin. Absent: written before
   * layer 0 was sharded (layer 0 whole in shared.bin, no feature counts).
   */
  layout?: 2;
  /**
   * The run's held-out validation (null: a fixed number of epochs), the epochs it may run, and its early
   * stopping so far (null without validation). With a best epoch, every file holds its slices' copy of the best
   * epoch's weights (`best.*` sections). Absent in checkpoints of fixed-epoch runs written before validation
   * was sharded.
   */
  run?: {
    validation: ResolvedValidation | null; epochs: number; earlyStop: EarlyStopState | null; best: boolean; reason?: string;
    /** The selection phase the run follows (k-fold, a refit's copy), whose epochs it trains on all of the points; absent: none. */
    selection?: SelectionReport;
  };
}

/** The run state a checkpoint stores besides the weights (fitSharded's ShardRunState). */
export interface ShardRunCheckpoint {
  validation: ResolvedValidation | null;
  epochs: number;
  earlyStop: EarlyStopState | null;
  /** This rank's copy of its slices at the best epoch (null: none). */
  snapshot: WeightSnapshot | null;
  /** The selection phase the run follows, or null. */
  selection?: SelectionReport | null;
}

/** The manifest's name inside a checkpoint directory. */
export const MANIFEST = 'manifest.json';
const KEEP = 2;

/** Layout version written by writeShardCheckpoint. */
export const SHARD_LAYOUT = 2;

/** One rank's part of a label-sharded network: its network and what its slices are. */
export interface ShardPart {
  /** The rank's network (allocateRank). */
  spec: NetSpec;
  /** Its labels, by row of its output layer (global ids, ascending). */
  labels: Uint32Array;
  /** Its input features, by row of its layer 0 (global ids, ascending). */
  features: Uint32Array;
  /** (labels) training counts: the label sharding's input. */
  labelFreq: Uint32Array;
  /** (features) nonzero counts: the feature sharding's input. */
  featureFreq: Uint32Array;
}

/** The directory of the checkpoint after `batchesDone` batches. */
export function shardCheckpointDir(dir: string, batchesDone: number): string {
  return join(dir, `sharded-${String(batchesDone).padStart(10, '0')}`);
}

/**
 * Writes this rank's part of a checkpoint (a collective: every rank calls it at the same step). `barrier`
 * separates the files from the manifest; rank 0 then removes older checkpoints beyond the 2 newest and
 * unfinished ones.
 */
export async function writeShardCheckpoint(
  dir: string, rank: number, part: ShardPart, meta: ShardCheckpointMeta, barrier: () => void, inputScale: Float32Array | null = null, inputLog = false,
  run: ShardRunCheckpoint | null = null, inputMap: InputMap | null = null,
): Promise<string> {
  const target = shardCheckpointDir(dir, meta.batchesDone);
  const { mkdir } = await import('node:fs/promises');
  await mkdir(target, { recursive: true });
  const { spec, labels, features } = part;
  const last = spec.layers.at(-1)!, l0 = spec.layers[0]!;
  const slice: Record<string, SectionArray> = { labels, features };
  for (const a of ['weights', 'bias', 'mWeights', 'vWeights', 'mBias', 'vBias', 'rowSteps', 'biasSteps'] as const) slice[`out.${a}`] = last[a];
  for (const a of ['weights', 'mWeights', 'vWeights', 'rowSteps'] as const) slice[`in.${a}`] = l0[a];
  if (last.wide) {
    // Global label ids (a slice's rows are its labels in ascending order: they stay ascending per feature).
    const w = last.wide;
    slice['wide.offsets'] = w.offsets;
    slice['wide.labels'] = w.labels.map((r) => labels[r]!);
    slice['wide.weights'] = w.weights;
    slice['wide.accum'] = w.accum;
  }
  // The best epoch's copy of this rank's slices (held-out validation): rows as the live ones.
  const best = run?.snapshot ?? null;
  const K = spec.layers.length - 1;
  if (best) {
    slice['best.out.weights'] = best.weights[K]!;
    slice['best.out.bias'] = best.bias[K]!;
    slice['best.in.weights'] = best.weights[0]!;
    if (best.wide) slice['best.wide.weights'] = best.wide;
  }
  await writeBinFile(join(target, `slice-${rank}.bin`), { kind: 'checkpoint', meta: { format: 'sublinear-shard-slice', rank }, sections: slice });
  const m: ShardCheckpointMeta = {
    ...meta, layout: SHARD_LAYOUT,
    ...(run ? { run: { validation: run.validation, epochs: run.epochs, earlyStop: run.earlyStop, best: !!best, ...(run.selection ? { selection: run.selection } : {}) } } : {}),
  };
  if (rank === 0) {
    const bestShared: Record<string, SectionArray> = {};
    if (best) {
      bestShared['best.layer0.bias'] = best.bias[0]!;
      for (let k = 1; k < K; k++) {
        bestShared[`best.layer${k}.weights`] = best.weights[k]!;
        bestShared[`best.layer${k}.bias`] = best.bias[k]!;
      }
    }
    const sections: Record<string, SectionArray> = {
      labelFreq: part.labelFreq, featureFreq: part.featureFreq, ...(inputScale ? { inputScale } : {}), ...(inputLog ? { [INPUT_LOG_SECTION]: inputLogSection() } : {}),
      ...(inputMap ? { inputMap: inputMap.ids } : {}), ...replicatedArrays(spec), ...bestShared,
    };
    await writeBinFile(join(target, 'shared.bin'), { kind: 'checkpoint', meta: m, sections });
  }
  barrier();
  if (rank === 0) {
    await writeFileAtomic(join(target, MANIFEST), [Buffer.from(JSON.stringify({ ...m, files: ['shared.bin', ...Array.from({ length: meta.ranks }, (_, r) => `slice-${r}.bin`)] }, null, 1) + '\n')]);
    const all = await listShardCheckpoints(dir);
    const complete = all.filter((c) => c.complete);
    for (const c of all) {
      if (c.path === target) continue;
      if (!c.complete || complete.indexOf(c) < complete.length - KEEP) await rm(c.path, { recursive: true, force: true });
    }
  }
  barrier();
  return target;
}

/** Checkpoint directories in `dir`, oldest first, and whether each has its manifest. */
export async function listShardCheckpoints(dir: string): Promise<{ path: string; complete: boolean }[]> {
  let names: string[];
  try {
    names = (await readdir(dir)).filter((n) => /^sharded-\d+$/.test(n)).sort();
  } catch {
    return [];
  }
  const out: { path: string; complete: boolean }[] = [];
  for (const n of names) {
    const files = await readdir(join(dir, n)).catch(() => [] as string[]);
    out.push({ path: join(dir, n), complete: files.includes(MANIFEST) });
  }
  return out;
}

/** Whether `dir` is, or holds, a checkpoint of label-sharded training (complete or not). */
export async function holdsShardCheckpoints(dir: string): Promise<boolean> {
  const own = await readdir(dir).catch(() => null);
  return !!own && (own.includes(MANIFEST) || own.some((n) => /^sharded-\d+$/.test(n)));
}

/** The newest complete checkpoint in `dir` (the directory itself when it is one), or null. */
export async function newestShardCheckpoint(dir: string): Promise<string | null> {
  const own = await readdir(dir).catch(() => null);
  if (!own) throw new Error(`${dir}: not a directory of sharded checkpoints (the --checkpoint directory of train --shard-labels)`);
  if (own.includes(MANIFEST)) return dir;
  const c = (await listShardCheckpoints(dir)).filter((x) => x.complete);
  return c.length ? c.at(-1)!.path : null;
}

/** The manifest of a checkpoint directory. */
export async function readShardManifest(ckpt: string): Promise<ShardCheckpointMeta> {
  const file = join(ckpt, MANIFEST);
  let m: ShardCheckpointMeta;
  try {
    m = JSON.parse(await readFile(file, 'utf8')) as ShardCheckpointMeta;
  } catch (e) {
    throw new Error(`${file}: cannot read the manifest of a sharded checkpoint: ${(e as Error).message}`);
  }
  if (m?.format !== 'sublinear-sharded-checkpoint' || !Number.isInteger(m.ranks) || m.ranks < 1 || !m.config) {
    throw new Error(`${file}: not the manifest of a sharded checkpoint`);
  }
  if (m.layout !== undefined && m.layout !== SHARD_LAYOUT) throw new Error(`${file}: layout ${m.layout} is not one this sublinear reads (${SHARD_LAYOUT}, or none)`);
  const sel = m.run?.selection;
  const bad = sel !== undefined ? selectionProblem(sel) : null;
  if (bad) throw new Error(`${file}: run.selection: ${bad}`);
  return m;
}

/** Section `name` of `file` as a `T` of `length` elements (any length when undefined); throws naming the file. */
function section<T extends SectionArray>(file: string, s: Record<string, SectionArray>, name: string, ctor: new (...a: never[]) => T, length?: number): T {
  const a = s[name];
  if (!(a instanceof ctor)) throw new Error(`${file}: no ${name} section of the expected type`);
  if (length !== undefined && a.length !== length) throw new Error(`${file}: ${name} has ${a.length} elements, expected ${length}`);
  return a;
}

/**
 * One rank's part of a sharded checkpoint under `size` ranks (any number): both shardings recomputed from the
 * saved counts, the rank's network allocated (allocateRank) and filled: the replicated parts from shared.bin,
 * its labels' rows and wide pairs and its features' rows of layer 0 from the old slices, one file at a time.
 * `featureFreq`: the feature counts to shard by when the checkpoint has none (written before layer 0 was
 * sharded; default: every feature counts 1). Throws naming the file when a section is missing or malformed
 * or a row is missing.
 */
export async function loadShardedPart(
  ckpt: string, manifest: ShardCheckpointMeta, rank: number, size: number, opts: { featureFreq?: Uint32Array } = {},
): Promise<ShardPart & { inputScale: Float32Array | null; inputLog: boolean; inputMap: InputMap | null; snapshot: WeightSnapshot | null }> {
  const config = manifest.config;
  const g = resolveConfig(config);
  const D = g.inputDim, L = g.layers.at(-1)!.size, H0 = g.layers[0]!.size;
  const sharedFile = join(ckpt, 'shared.bin');
  const shared = await readBinFile(sharedFile, { kind: 'checkpoint' });
  const ss = shared.sections as Record<string, SectionArray>;
  const labelFreq = section(sharedFile, ss, 'labelFreq', Uint32Array);
  if (labelFreq.length !== L) throw new Error(`${sharedFile}: ${labelFreq.length} label counts for a network of ${L} labels`);
  const legacy = manifest.layout === undefined;
  const featureFreq = legacy ? (opts.featureFreq ?? new Uint32Array(D).fill(1)) : section(sharedFile, ss, 'featureFreq', Uint32Array, D);
  if (featureFreq.length !== D) throw new Error(`${sharedFile}: ${featureFreq.length} feature counts for a network of ${D} input features`);
  const scale = ss.inputScale;
  if (scale !== undefined && !(scale instanceof Float32Array && scale.length === D)) throw new Error(`${sharedFile}: its inputScale section does not match the network's inputs`);
  const log = ss[INPUT_LOG_SECTION];
  const logProblem = log === undefined ? null : log instanceof Uint8Array ? inputLogProblem(log) : `section "${INPUT_LOG_SECTION}" is not u8`;
  if (logProblem) throw new Error(`${sharedFile}: ${logProblem}`);
  let inputMap: InputMap | null = null;
  if (manifest.inputFeatures !== undefined) {
    const ids = section(sharedFile, ss, 'inputMap', Uint32Array, D);
    const mapProblem = inputMapProblem(ids, manifest.inputFeatures, D);
    if (mapProblem) throw new Error(`${sharedFile}: ${mapProblem}`);
    inputMap = { features: manifest.inputFeatures, ids };
  }
  const labels = shardLabels(labelFreq, size).labelsOf[rank]!;
  const features = shardFeatures(featureFreq, size).featuresOf[rank]!;
  const spec = allocateRank(config, labels.length, features.length);
  for (const [name, a] of Object.entries(replicatedArrays(spec))) a.set(section(sharedFile, ss, name, a.constructor as never, a.length) as never);
  const l0 = spec.layers[0]!;
  if (legacy) {
    // Layer 0 whole in shared.bin: this rank's features' rows.
    const w = section(sharedFile, ss, 'layer0.weights', Float32Array, D * H0), m = section(sharedFile, ss, 'layer0.mWeights', Float32Array, D * H0);
    const v = section(sharedFile, ss, 'layer0.vWeights', Float32Array, D * H0), steps = section(sharedFile, ss, 'layer0.rowSteps', Uint32Array, D);
    features.forEach((f, e) => copyTrainedRow(l0, e, { w, m, v, steps }, f, H0));
  }
  // The best epoch's copy (held-out validation): the replicated parts from shared.bin, the rows from the slices.
  const snapshot = manifest.run?.best ? new WeightSnapshot(spec) : null;
  const K = spec.layers.length - 1;
  if (snapshot) {
    snapshot.bias[0]!.set(section(sharedFile, ss, 'best.layer0.bias', Float32Array, H0));
    for (let k = 1; k < K; k++) {
      snapshot.weights[k]!.set(section(sharedFile, ss, `best.layer${k}.weights`, Float32Array, snapshot.weights[k]!.length));
      snapshot.bias[k]!.set(section(sharedFile, ss, `best.layer${k}.bias`, Float32Array, snapshot.bias[k]!.length));
    }
  }
  await readSliceRows(ckpt, manifest.ranks, { labels, numLabels: L, out: spec.layers.at(-1)!, features: legacy ? null : features, numFeatures: D, l0, snapshot });
  return { spec, labels, features, labelFreq, featureFreq, inputScale: (scale as Float32Array | undefined) ?? null, inputLog: log !== undefined, inputMap, snapshot };
}

/**
 * Copies the rows of `labels` (this rank's labels, by row) out of the checkpoint's slices into `out` (this
 * rank's output layer), and, given `features`, the rows of those features into `l0` (this rank's layer 0),
 * reading one slice file at a time; with a wide part (`out.wide`), its labels' pairs too, under their rows.
 * Throws naming the file when an id is out of range or held twice, or a section is malformed, and naming the
 * checkpoint when a row is missing.
 */
async function readSliceRows(
  ckpt: string, ranks: number,
  o: { labels: Uint32Array; numLabels: number; out: LayerState; features: Uint32Array | null; numFeatures: number; l0: LayerState; snapshot?: WeightSnapshot | null },
): Promise<void> {
  const { labels, numLabels, out, features, numFeatures, l0 } = o;
  const snap = o.snapshot ?? null;
  const bestWide: WideState[] = [];
  const rowOf = new Int32Array(numLabels).fill(-1);
  labels.forEach((j, e) => { rowOf[j] = e; });
  const featureRow = new Int32Array(features ? numFeatures : 0).fill(-1);
  features?.forEach((f, e) => { featureRow[f] = e; });
  const seenLabel = new Uint8Array(numLabels), seenFeature = new Uint8Array(features ? numFeatures : 0);
  const d = out.inDim, H0 = l0.outDim;
  let found = 0, foundFeatures = 0;
  const wideParts: WideState[] = [];
  for (let r = 0; r < ranks; r++) {
    const file = join(ckpt, `slice-${r}.bin`);
    const f = await readBinFile(file, { kind: 'checkpoint' });
    const s = f.sections as Record<string, SectionArray>;
    const lab = s.labels as Uint32Array | undefined, W = s['out.weights'] as Float32Array | undefined;
    if (!(lab instanceof Uint32Array) || !(W instanceof Float32Array) || W.length !== lab.length * d) throw new Error(`${file}: not a slice of this network (rows of ${d} weights expected)`);
    const oW = [section(file, s, 'out.mWeights', Float32Array, W.length), section(file, s, 'out.vWeights', Float32Array, W.length)];
    const oB = [section(file, s, 'out.bias', Float32Array, lab.length), section(file, s, 'out.mBias', Float32Array, lab.length), section(file, s, 'out.vBias', Float32Array, lab.length)];
    const oSteps = section(file, s, 'out.rowSteps', Uint32Array, lab.length);
    const bOut = snap ? { w: section(file, s, 'best.out.weights', Float32Array, W.length), b: section(file, s, 'best.out.bias', Float32Array, lab.length) } : null;
    const K = snap ? snap.weights.length - 1 : 0;
    found += forOwnedIds(file, lab, numLabels, 'label', 'labels', seenLabel, rowOf, (e, row) => {
      copyTrainedRow(out, row, { w: W, m: oW[0]!, v: oW[1]!, steps: oSteps }, e, d);
      out.bias[row] = oB[0]![e]!;
      out.mBias[row] = oB[1]![e]!;
      out.vBias[row] = oB[2]![e]!;
      if (snap && bOut) {
        snap.weights[K]!.set(bOut.w.subarray(e * d, (e + 1) * d), row * d);
        snap.bias[K]![row] = bOut.b[e]!;
      }
    });
    if (features) {
      const ids = section(file, s, 'features', Uint32Array);
      const iW = section(file, s, 'in.weights', Float32Array, ids.length * H0);
      const iM = section(file, s, 'in.mWeights', Float32Array, ids.length * H0), iV = section(file, s, 'in.vWeights', Float32Array, ids.length * H0);
      const iSteps = section(file, s, 'in.rowSteps', Uint32Array, ids.length);
      const bIn = snap ? section(file, s, 'best.in.weights', Float32Array, ids.length * H0) : null;
      foundFeatures += forOwnedIds(file, ids, numFeatures, 'feature', 'input features', seenFeature, featureRow, (e, row) => {
        copyTrainedRow(l0, row, { w: iW, m: iM, v: iV, steps: iSteps }, e, H0);
        if (snap && bIn) snap.weights[0]!.set(bIn.subarray(e * H0, (e + 1) * H0), row * H0);
      });
    }
    if (out.wide) {
      const stored = storedWide(file, s, out.wide.inputDim, numLabels);
      wideParts.push(pickWide(stored, rowOf));
      if (snap?.wide) bestWide.push(pickWide({ ...stored, weights: section(file, s, 'best.wide.weights', Float32Array, stored.labels.length) }, rowOf));
    }
  }
  if (found !== labels.length) throw new Error(`${ckpt}: its slices hold ${found} of this rank's ${labels.length} labels`);
  if (features && foundFeatures !== features.length) throw new Error(`${ckpt}: its slices hold ${foundFeatures} of this rank's ${features.length} input features`);
  if (out.wide) out.wide = mergeWide(wideParts, out.wide.inputDim);
  if (snap?.wide && out.wide) {
    const w = mergeWide(bestWide, out.wide.inputDim).weights;
    if (w.length !== snap.wide.length && snap.wide.length !== 0) throw new Error(`${ckpt}: the best epoch's wide weights do not match the wide part`);
    (snap as { wide: Float32Array | null }).wide = Float32Array.from(w);
  }
}

/**
 * Goes through the ids a slice file holds (`ids`, each < `limit`): refuses, naming the file, one out of range
 * or already held by another slice (`seen`), and calls own(e, row) for entry e of each id this rank owns
 * (rowOf[id] >= 0). Returns how many it owns.
 */
function forOwnedIds(
  file: string, ids: Uint32Array, limit: number, what: string, whatAll: string, seen: Uint8Array, rowOf: Int32Array,
  own: (e: number, row: number) => void,
): number {
  let owned = 0;
  for (let e = 0; e < ids.length; e++) {
    const x = ids[e]!;
    if (x >= limit) throw new Error(`${file}: ${what} ${x} is >= the network's ${limit} ${whatAll}`);
    if (seen[x]) throw new Error(`${file}: ${what} ${x} is held by two slices`);
    seen[x] = 1;
    const row = rowOf[x]!;
    if (row < 0) continue;
    owned++;
    own(e, row);
  }
  return owned;
}

/** Copies row `from` of stored weights, Adam moments and step counters (rows of `width`) into row `to` of `dst`. */
function copyTrainedRow(
  dst: LayerState, to: number, src: { w: Float32Array; m: Float32Array; v: Float32Array; steps: Uint32Array }, from: number, width: number,
): void {
  dst.weights.set(src.w.subarray(from * width, (from + 1) * width), to * width);
  dst.mWeights.set(src.m.subarray(from * width, (from + 1) * width), to * width);
  dst.vWeights.set(src.v.subarray(from * width, (from + 1) * width), to * width);
  dst.rowSteps[to] = src.steps[from]!;
}

/** The wide part of a slice file (global label ids), checked; throws naming the file. */
function storedWide(file: string, s: Record<string, SectionArray>, inputDim: number, numLabels: number): WideState {
  const offsets = s['wide.offsets'], labels = s['wide.labels'], weights = s['wide.weights'], accum = s['wide.accum'];
  if (!(offsets instanceof Uint32Array && labels instanceof Uint32Array && weights instanceof Float32Array && accum instanceof Float32Array)) {
    throw new Error(`${file}: no wide part (wide.offsets, wide.labels, wide.weights, wide.accum), but the network has one`);
  }
  const w: WideState = { inputDim, offsets, labels, weights, accum };
  let bad = weights.length !== labels.length || accum.length !== labels.length ? `wide.weights and wide.accum must have ${labels.length} elements like wide.labels` : wideProblem(w, numLabels);
  if (!bad) for (let e = 0; e < weights.length; e++) if (!Number.isFinite(weights[e]!)) { bad = `wide.weights[${e}] = ${weights[e]} is not finite`; break; }
  if (bad) throw new Error(`${file}: ${bad}`);
  return w;
}
