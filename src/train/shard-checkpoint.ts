// Checkpoints of label-sharded training (src/train/sharded.ts): one directory per checkpoint,
// `<dir>/sharded-<batchesDone>/`, holding
//   shared.bin        rank 0: the lower layers' whole training state, the training label counts, and in its
//                     meta the global network configuration, the position and the run's settings;
//   slice-<r>.bin     rank r: its output rows (weights, bias, Adam moments, step counters) and their global
//                     label ids (`labels`); with a wide part, its labels' pairs as a feature-major CSR over
//                     the input features with global label ids (`wide.offsets|labels|weights|accum`);
//   manifest.json     written by rank 0 last, after every rank's file is on disk (a barrier): the commit
//                     point. A directory without it is an unfinished write and is ignored (and removed by
//                     the next checkpoint).
// Every file goes through writeFileAtomic (writeBinFile). Only the 2 newest complete checkpoints are kept.
// `loadShardedPart` re-shards on load: under any number of ranks, each rank recomputes the sharding from the
// saved label counts and copies its labels' rows and wide pairs out of the old slices (one file at a time).
import { readdir, rm, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { readBinFile, writeBinFile, type SectionArray } from '../util/binfile.js';
import { writeFileAtomic } from '../util/atomic-write.js';
import type { NetworkConfig } from '../network/config.js';
import type { LayerState, NetSpec, WideState } from '../network/native-types.js';
import { mergeWide, pickWide, wideProblem } from '../network/wide.js';

/** What a sharded checkpoint records besides the weights. */
export interface ShardCheckpointMeta {
  format: 'sublinear-sharded-checkpoint';
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
}

/** The manifest's name inside a checkpoint directory. */
export const MANIFEST = 'manifest.json';
const KEEP = 2;

const LAYER_ARRAYS = ['weights', 'bias', 'mWeights', 'vWeights', 'mBias', 'vBias', 'rowSteps', 'biasSteps'] as const;

function layerSections(prefix: string, l: LayerState): Record<string, SectionArray> {
  const out: Record<string, SectionArray> = {};
  for (const a of LAYER_ARRAYS) out[`${prefix}.${a}`] = l[a];
  return out;
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
  dir: string, rank: number, spec: NetSpec, labels: Uint32Array, labelFreq: Uint32Array, meta: ShardCheckpointMeta, barrier: () => void,
  inputScale: Float32Array | null = null,
): Promise<string> {
  const target = shardCheckpointDir(dir, meta.batchesDone);
  const { mkdir } = await import('node:fs/promises');
  await mkdir(target, { recursive: true });
  const last = spec.layers.at(-1)!;
  const slice: Record<string, SectionArray> = { ...layerSections('out', last), labels };
  if (last.wide) {
    // Global label ids (a slice's rows are its labels in ascending order: they stay ascending per feature).
    const w = last.wide;
    slice['wide.offsets'] = w.offsets;
    slice['wide.labels'] = w.labels.map((r) => labels[r]!);
    slice['wide.weights'] = w.weights;
    slice['wide.accum'] = w.accum;
  }
  await writeBinFile(join(target, `slice-${rank}.bin`), { kind: 'checkpoint', meta: { format: 'sublinear-shard-slice', rank }, sections: slice });
  if (rank === 0) {
    const sections: Record<string, SectionArray> = { labelFreq, ...(inputScale ? { inputScale } : {}) };
    spec.layers.slice(0, -1).forEach((l, k) => Object.assign(sections, layerSections(`layer${k}`, l)));
    await writeBinFile(join(target, 'shared.bin'), { kind: 'checkpoint', meta, sections });
  }
  barrier();
  if (rank === 0) {
    await writeFileAtomic(join(target, MANIFEST), [Buffer.from(JSON.stringify({ ...meta, files: ['shared.bin', ...Array.from({ length: meta.ranks }, (_, r) => `slice-${r}.bin`)] }, null, 1) + '\n')]);
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
  return m;
}

/**
 * Reads the shared part into `spec`'s lower layers (same shapes); returns the training label counts and the
 * input divisors (null when the training data was used as it is).
 */
export async function readSharedPart(ckpt: string, spec: NetSpec): Promise<{ labelFreq: Uint32Array; inputScale: Float32Array | null }> {
  const into: Record<string, SectionArray> = {};
  spec.layers.slice(0, -1).forEach((l, k) => Object.assign(into, layerSections(`layer${k}`, l)));
  const f = await readBinFile(join(ckpt, 'shared.bin'), { kind: 'checkpoint', into });
  const freq = f.sections.labelFreq;
  if (!(freq instanceof Uint32Array)) throw new Error(`${join(ckpt, 'shared.bin')}: no labelFreq section`);
  const scale = f.sections.inputScale;
  if (scale !== undefined && !(scale instanceof Float32Array && scale.length === spec.layers[0]!.inDim)) throw new Error(`${join(ckpt, 'shared.bin')}: its inputScale section does not match the network's inputs`);
  return { labelFreq: freq, inputScale: (scale as Float32Array | undefined) ?? null };
}

/**
 * Copies the rows of `labels` (this rank's labels, by row) out of the checkpoint's slices into `out` (this
 * rank's output layer), reading one slice file at a time; with a wide part (`out.wide`), its labels' pairs
 * too, under their rows. Throws naming the file when a label is missing or a section is malformed.
 */
export async function readSliceRows(ckpt: string, ranks: number, labels: Uint32Array, numLabels: number, out: LayerState): Promise<void> {
  const rowOf = new Int32Array(numLabels).fill(-1);
  labels.forEach((j, e) => { rowOf[j] = e; });
  const d = out.inDim;
  let found = 0;
  const wideParts: WideState[] = [];
  for (let r = 0; r < ranks; r++) {
    const file = join(ckpt, `slice-${r}.bin`);
    const f = await readBinFile(join(ckpt, `slice-${r}.bin`), { kind: 'checkpoint' });
    const s = f.sections as Record<string, SectionArray>;
    const lab = s.labels as Uint32Array | undefined, W = s['out.weights'] as Float32Array | undefined;
    if (!lab || !W || W.length !== lab.length * d) throw new Error(`${file}: not a slice of this network (rows of ${d} weights expected)`);
    for (let e = 0; e < lab.length; e++) {
      const j = lab[e]!;
      if (j >= numLabels) throw new Error(`${file}: label ${j} is >= the network's ${numLabels} labels`);
      const row = rowOf[j]!;
      if (row < 0) continue;
      found++;
      out.weights.set(W.subarray(e * d, (e + 1) * d), row * d);
      (out.mWeights).set((s['out.mWeights'] as Float32Array).subarray(e * d, (e + 1) * d), row * d);
      (out.vWeights).set((s['out.vWeights'] as Float32Array).subarray(e * d, (e + 1) * d), row * d);
      out.bias[row] = (s['out.bias'] as Float32Array)[e]!;
      out.mBias[row] = (s['out.mBias'] as Float32Array)[e]!;
      out.vBias[row] = (s['out.vBias'] as Float32Array)[e]!;
      out.rowSteps[row] = (s['out.rowSteps'] as Uint32Array)[e]!;
    }
    if (out.wide) wideParts.push(pickWide(storedWide(file, s, out.wide.inputDim, numLabels), rowOf));
  }
  if (found !== labels.length) throw new Error(`${ckpt}: its slices hold ${found} of this rank's ${labels.length} labels`);
  if (out.wide) out.wide = mergeWide(wideParts, out.wide.inputDim);
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

/**
 * One rank's part of a sharded checkpoint under `size` ranks (any number): the slice network of `makeNet`
 * (called with the global config and this rank's row count), its lower layers and rows read, re-sharded by
 * the saved label counts.
 */
export async function loadShardedPart<N extends { spec: NetSpec }>(
  ckpt: string, manifest: ShardCheckpointMeta, rank: number, size: number,
  makeNet: (rows: number) => N, shard: (freq: Uint32Array, ranks: number) => { labelsOf: Uint32Array[] },
): Promise<{ net: N; labelFreq: Uint32Array; inputScale: Float32Array | null; labels: Uint32Array }> {
  const probe = makeNet(1);
  const { labelFreq } = await readSharedPart(ckpt, probe.spec);
  const labels = shard(labelFreq, size).labelsOf[rank]!;
  const net = makeNet(labels.length);
  const { inputScale } = await readSharedPart(ckpt, net.spec);
  const L = manifest.config.layers.at(-1)!.size;
  if (labelFreq.length !== L) throw new Error(`${join(ckpt, 'shared.bin')}: ${labelFreq.length} label counts for a network of ${L} labels`);
  await readSliceRows(ckpt, manifest.ranks, labels, L, net.spec.layers.at(-1)!);
  return { net, labelFreq, inputScale, labels };
}
