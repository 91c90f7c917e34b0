// Training checkpoints: everything needed to continue a fit() exactly where it stopped, in the
// checksummed container of src/util/binfile.ts (kind 'checkpoint'), written atomically.
//
// What a checkpoint holds, and why each part is needed for an exact resume:
// - sections: every layer's weights, bias, Adam moments (mWeights, vWeights, mBias, vBias) and step
//   counters (rowSteps, biasSteps); the hash tables of sampled layers (offsets, fill, seen, ids, keys),
//   because the tables in use at batch k were built at the last scheduled rebuild from the weights of
//   that time, which cannot be recomputed from the batch-k weights; the training label frequencies.
// - meta: the resolved network config (the hash functions and initialisation derive from its seed), the
//   position (epoch, batch within the epoch, global batch counter: batch seeds derive from it and the
//   epoch's row order derives from seed + epoch via epochOrder), the rebuild schedule state and
//   rebuildRound (rebuild seeds derive from it), the fit options (a resumed fit defaults to them), a
//   fingerprint of the training data (resuming on other data is refused), and `extra` (the CLI stores
//   its data paths and flags there).
// Nothing else carries state between batches (batch seeds and row orders are pure functions), so
// restoring these gives, with one worker, a resumed run bit-identical to an uninterrupted one.
//
// Directory layout: `ckpt-<batchesDone, 9 digits>.bin`, the newest `keep` (default 2) kept, so that a
// checkpoint that turns out to be damaged (disk error, truncated copy) still has a good predecessor.
// Files are written through writeFileAtomic (temporary `.ckpt-....bin.tmp-<pid>-<hex>`, fsync,
// rename): a crash leaves either the old set or the new file, plus possibly a temporary file that never
// matches the checkpoint name pattern and is removed by the next run once its writer is dead.
import { readdirSync } from 'node:fs';
import { mkdir, readdir, rename, rmdir, stat, unlink } from 'node:fs/promises';
import { dirname, join, resolve } from 'node:path';
import xxhash from 'xxhash-wasm';
import type { SparseDataset } from '../datasets/csr.js';
import { storedConfig, type NetworkConfig, type ResolvedNetworkConfig } from '../network/config.js';
import type { NetSpec } from '../native/network-types.js';
import { INPUT_LOG_SECTION, inputLogSection } from '../network/input-scale.js';
import { inputMapProblem, type InputMap } from '../network/input-map.js';
import { BinFileError, readBinFile, writeBinFile, type SectionArray } from '../util/binfile.js';
import { verifyBinFileChecksum } from '../util/binfile-verify.js';
import { boundJson } from '../util/bounded-text.js';
import { checkLoadMemory, fileLayout, layoutProblem, resolveStoredConfig, valuesProblem, wideEntriesOf, type LoadLimits } from '../network/file-layout.js';
import { allocateWide, wideProblem } from '../network/wide.js';
import { Network, setCheckpointReader } from '../network/network.js';
import { MemoryLimitError } from '../network/memory-plan.js';
import { RebuildSchedule, type RebuildScheduleOptions } from '../network/schedule.js';
import { lockDirectory, type DirectoryLock } from './lock.js';
import { isProcessAlive } from '../util/process-alive.js';
import { checkOutputDirs } from '../util/output-check.js';
import { formatBytes } from '../network/memory-plan.js';
import { resolveValidation, selectionProblem, WeightSnapshot, type EarlyStop, type EarlyStopState, type ResolvedValidation, type SelectionReport } from './early-stop.js';
import { durationSeconds, parseInteger } from '../util/parse-values.js';

/** `meta.format` of a checkpoint file. */
export const CHECKPOINT_FORMAT = 'sublinear-checkpoint';
/** Layout version of the checkpoint meta and sections; newer ones are refused. */
export const CHECKPOINT_VERSION = 1;

const NAME_RE = /^ckpt-(\d+)\.bin$/;
// writeFileAtomic's temporary name for a checkpoint: `.<name>.tmp-<pid>-<12 hex>`.
const TEMP_RE = /^\.ckpt-\d+\.bin\.tmp-(\d+)-[0-9a-f]+$/;

/** Options of `fit({ checkpoint })`. */
export interface CheckpointOptions {
  /**
   * Directory of the checkpoint files (created if missing). It must not hold checkpoints of another run:
   * a fresh network refuses a directory with checkpoints in it (resume them with Network.resume instead).
   */
  dir: string;
  /**
   * How often to checkpoint: a number of batches (checkpoints at every multiple of it of the network's
   * global batch counter, so resumed runs keep the same schedule), or a duration string `'<n>s'`,
   * `'<n>m'` or `'<n>h'` (wall clock since the last checkpoint). A checkpoint is also written when
   * fit() ends, normally or by its abort signal. Default '10m'.
   */
  every?: number | string;
  /** Newest checkpoint files kept; older ones are deleted after each write. Default 2 (minimum 1). */
  keep?: number;
  /**
   * JSON-serialisable data stored in every checkpoint and returned by `Network.resume` as
   * `resumeInfo.extra` (the CLI stores its data paths and flags, and the epochs' records so far). A
   * function is called at each write and its result stored. Default null.
   */
  extra?: unknown;
  /** Called after each checkpoint file is written. Default none. */
  onSaved?: (info: CheckpointInfo) => void | Promise<void>;
}

/** Where a run stands: the next batch to train is batch `batch` (0-based) of epoch `epoch` (0-based). */
export interface TrainingPosition {
  epoch: number;
  batch: number;
  /** Global batch counter of the network (batches trained over its life, all fit() calls). */
  batchesDone: number;
  /**
   * The phase of the run's procedure this position is in (fit() on small training sets first chooses the
   * epoch count on copies of the network: k-fold folds, or a held-out copy before a refit; then trains it):
   * 'selection' is the start of that choice (the network as the run began; a resume makes it again,
   * deterministically), 'train' (or absent, in files of earlier versions) the run's own training at
   * (epoch, batch).
   */
  phase?: TrainingPhase;
}

/** See TrainingPosition.phase. */
export type TrainingPhase = 'selection' | 'train';

/** Reported to `CheckpointOptions.onSaved`. */
export interface CheckpointInfo extends TrainingPosition {
  file: string;
  bytes: number;
  seconds: number;
  reason: CheckpointReason;
}

/**
 * 'periodic': `every` came due; 'end': fit() completed; 'abort': fit() stopped by its signal; 'start': the
 * run's start, written before a selection phase (TrainingPosition.phase), so that a run killed during it
 * has a checkpoint to resume from.
 */
export type CheckpointReason = 'periodic' | 'end' | 'abort' | 'start';

/** The fit options a checkpoint records (a resumed fit() defaults to them). */
export interface SavedFitOptions {
  epochs: number;
  batchSize: number;
  lr: number;
  beta1: number;
  beta2: number;
  eps: number;
  shuffle: boolean;
  rebuild: Required<RebuildScheduleOptions> | null;
  /** Held-out validation of the run (absent in files written before it existed: none). */
  validation?: ResolvedValidation | null;
  /**
   * A run whose epoch count was chosen by k-fold selection (small data) before training on all of the data:
   * what was chosen (then `epochs` is the choice and `validation` null). Absent otherwise.
   */
  selection?: SelectionReport | null;
}

/** Identifies a training set: shape plus an xxhash64 of its CSR arrays. */
export interface DataFingerprint {
  points: number;
  features: number;
  labels: number;
  nnz: number;
  labelNnz: number;
  /** xxhash64 (hex) of offsets, indices, values, labelOffsets, labelIndices. */
  hash: string;
}

/** The JSON meta of a checkpoint file. */
export interface CheckpointMeta {
  format: typeof CHECKPOINT_FORMAT;
  version: number;
  config: ResolvedNetworkConfig;
  position: TrainingPosition;
  rebuildRound: number;
  /** RebuildSchedule.state(), null for networks without sampled layers. */
  schedule: { next: number; interval: number; rebuilds: number } | null;
  options: SavedFitOptions;
  data: DataFingerprint;
  trainPoints: number;
  reason: CheckpointReason;
  savedAt: string;
  extra: unknown;
  /** Early-stopping state of a run with validation (its best weights are the `best.*` sections). */
  earlyStop?: EarlyStopState | null;
  /** The declared input dimension of a network with an input feature map (its rows' ids: section inputMap). */
  inputFeatures?: number;
}

/** The network state a checkpoint is taken from (Network implements it). */
export interface CheckpointSource {
  readonly config: ResolvedNetworkConfig;
  readonly spec: NetSpec;
  schedule: RebuildSchedule | null;
  rebuildRound: number;
  labelFreq: Uint32Array | null;
  trainPoints: number;
  /** Per-feature input divisors (raw-valued training data, src/network/input-scale.ts), or null. */
  inputScale: Float32Array | null;
  /** The count compression of term-count training data (src/network/input-scale.ts: logCompress). */
  inputLog: boolean;
  /** The input feature map (src/network/input-map.ts; section inputMap, meta inputFeatures), or null. */
  inputMap: InputMap | null;
}

/** Parsed `CheckpointOptions.every`. */
export type CheckpointEvery = { batches: number } | { seconds: number };

/** Parses `every`: a positive integer of batches, or `<n>s` / `<n>m` / `<n>h` (n may have a fraction). */
export function parseCheckpointEvery(v: number | string | undefined): CheckpointEvery {
  if (v === undefined) return { seconds: 600 };
  if (typeof v === 'number') {
    if (Number.isInteger(v) && v > 0) return { batches: v };
  } else if (typeof v === 'string') {
    const s = v.trim();
    const batches = /^\d+$/.test(s) ? parseInteger(s, { min: 1 }) : undefined;
    if (batches !== undefined) return { batches };
    const seconds = durationSeconds(s);
    if (seconds !== undefined) return { seconds };
  }
  throw new Error(`Expected a number of batches (e.g. 500) or a duration (e.g. 90s, 10m, 1h) for checkpoint every but received ${JSON.stringify(v)}`);
}

/** File name of the checkpoint taken after `batchesDone` batches. */
export function checkpointName(batchesDone: number): string {
  return `ckpt-${String(batchesDone).padStart(9, '0')}.bin`;
}

/** Checkpoint files of `dir` (name pattern only, contents unchecked), newest (most batches) first. */
export async function listCheckpoints(dir: string): Promise<{ file: string; batchesDone: number }[]> {
  let names: string[];
  try {
    names = await readdir(dir);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return [];
    throw e;
  }
  return checkpointsAmong(dir, names);
}

/**
 * listCheckpoints, synchronously, and [] for a directory that cannot be read: for a process about to exit
 * (a second Ctrl-C) that says which checkpoint it leaves. A file under a checkpoint's name is whole
 * (written to a temporary name, then renamed).
 */
export function listCheckpointsSync(dir: string): { file: string; batchesDone: number }[] {
  try {
    return checkpointsAmong(dir, readdirSync(dir));
  } catch {
    return [];
  }
}

function checkpointsAmong(dir: string, names: readonly string[]): { file: string; batchesDone: number }[] {
  const out: { file: string; batchesDone: number }[] = [];
  for (const n of names) {
    const m = NAME_RE.exec(n);
    if (m) out.push({ file: join(dir, n), batchesDone: Number(m[1]) });
  }
  return out.sort((a, b) => b.batchesDone - a.batchesDone);
}

let hashApi: ReturnType<typeof xxhash> | undefined;

/** Fingerprint of a training set (one xxhash64 pass over its arrays, about 1 GB/s). */
export async function dataFingerprint(d: SparseDataset): Promise<DataFingerprint> {
  const h = (await (hashApi ??= xxhash())).create64(0n);
  for (const a of [d.offsets, d.indices, d.values, d.labelOffsets, d.labelIndices]) {
    const bytes = new Uint8Array(a.buffer, a.byteOffset, a.byteLength);
    // Chunked: xxhash-wasm copies each update into wasm memory, which would otherwise grow to the array size.
    for (let off = 0; off < bytes.length; off += 8 << 20) h.update(bytes.subarray(off, Math.min(bytes.length, off + (8 << 20))));
  }
  return {
    points: d.points,
    features: d.features,
    labels: d.labels,
    nnz: d.offsets[d.points]!,
    labelNnz: d.labelOffsets[d.points]!,
    hash: h.digest().toString(16).padStart(16, '0'),
  };
}

/** The sections of a checkpoint, by name (the network's own arrays: written from, or read into). */
export function checkpointSections(
  spec: NetSpec, labelFreq: Uint32Array | null, best: WeightSnapshot | null = null, inputScale: Float32Array | null = null, inputLog: Uint8Array | null = null,
  inputMap: Uint32Array | null = null,
): Record<string, SectionArray> {
  const s: Record<string, SectionArray> = {};
  if (inputMap) s['inputMap'] = inputMap;
  if (inputScale) s['inputScale'] = inputScale;
  if (inputLog) s[INPUT_LOG_SECTION] = inputLog;
  best?.weights.forEach((w, i) => {
    s[`best.layer${i}.weights`] = w;
    s[`best.layer${i}.bias`] = best.bias[i]!;
  });
  if (best?.wide) s[`best.layer${spec.layers.length - 1}.wide.weights`] = best.wide;
  spec.layers.forEach((l, i) => {
    const p = `layer${i}.`;
    s[p + 'weights'] = l.weights;
    s[p + 'bias'] = l.bias;
    s[p + 'mWeights'] = l.mWeights;
    s[p + 'vWeights'] = l.vWeights;
    s[p + 'mBias'] = l.mBias;
    s[p + 'vBias'] = l.vBias;
    s[p + 'rowSteps'] = l.rowSteps;
    s[p + 'biasSteps'] = l.biasSteps;
    if (l.wide) {
      s[p + 'wide.offsets'] = l.wide.offsets;
      s[p + 'wide.labels'] = l.wide.labels;
      s[p + 'wide.weights'] = l.wide.weights;
      s[p + 'wide.accum'] = l.wide.accum;
    }
    const t = l.sampling?.tables;
    if (t) {
      s[p + 'tables.offsets'] = t.offsets;
      s[p + 'tables.fill'] = t.fill;
      s[p + 'tables.seen'] = t.seen;
      s[p + 'tables.ids'] = t.ids;
      s[p + 'tables.keys'] = t.keys;
    }
  });
  if (labelFreq) s['labelFreq'] = labelFreq;
  return s;
}

/** Writes one checkpoint file (atomically). Must be called with no batch or rebuild in flight. */
export async function writeCheckpoint(
  path: string,
  src: CheckpointSource,
  m: { position: TrainingPosition; options: SavedFitOptions; data: DataFingerprint; reason: CheckpointReason; extra: unknown; earlyStop: EarlyStop | null },
): Promise<number> {
  const meta: CheckpointMeta = {
    format: CHECKPOINT_FORMAT,
    version: CHECKPOINT_VERSION,
    config: src.config,
    position: m.position,
    rebuildRound: src.rebuildRound,
    schedule: src.schedule ? src.schedule.state() : null,
    options: m.options,
    data: m.data,
    trainPoints: src.trainPoints,
    reason: m.reason,
    savedAt: new Date().toISOString(),
    extra: m.extra ?? null,
    earlyStop: m.earlyStop?.state ?? null,
    ...(src.inputMap ? { inputFeatures: src.inputMap.features } : {}),
  };
  const sections = checkpointSections(src.spec, src.labelFreq, m.earlyStop?.snapshot ?? null, src.inputScale, src.inputLog ? inputLogSection() : null, src.inputMap?.ids ?? null);
  return writeBinFile(path, { kind: 'checkpoint', meta, sections });
}

/**
 * A checkpoint file whose contents cannot be used (a BinFileError covers damaged containers); resuming a
 * directory skips such files (renamed `<file>.corrupt`) for the newest usable one.
 *
 * @example
 * ```ts
 * try { await train({ resume: 'ckpt/ckpt-000000400.bin', save: 'model.sl' }); }
 * catch (e) { if (e instanceof CheckpointFormatError) console.error(e.message); else throw e; }
 * ```
 */
export class CheckpointFormatError extends Error {
  override name = 'CheckpointFormatError';
}

const isInt = (v: unknown, min = 0): v is number => typeof v === 'number' && Number.isSafeInteger(v) && v >= min;
const isNum = (v: unknown): v is number => typeof v === 'number' && Number.isFinite(v);

/** Checks the meta's shape; returns the first problem or null. */
function metaProblem(m: unknown): string | null {
  if (m === null || typeof m !== 'object') return 'missing meta';
  const o = m as Partial<CheckpointMeta>;
  if (o.format !== CHECKPOINT_FORMAT) return `not a sublinear checkpoint (format ${boundJson(o.format)})`;
  if (!isInt(o.version, 1)) return `invalid checkpoint version ${boundJson(o.version)}`;
  if (o.version > CHECKPOINT_VERSION) return `checkpoint version ${o.version} is newer than this sublinear (${CHECKPOINT_VERSION})`;
  if (!o.config || typeof o.config !== 'object') return 'missing config';
  const p = o.position;
  if (!p || !isInt(p.epoch) || !isInt(p.batch) || !isInt(p.batchesDone) || p.batch > p.batchesDone) return 'invalid position';
  if (p.phase !== undefined && p.phase !== 'selection' && p.phase !== 'train') return 'invalid position phase';
  if (!isInt(o.rebuildRound)) return 'invalid rebuildRound';
  const s = o.schedule;
  if (s !== null && (!s || !isInt(s.next) || !isInt(s.interval, 1) || !isInt(s.rebuilds))) return 'invalid schedule state';
  const f = o.options;
  if (!f || !isInt(f.epochs) || !isInt(f.batchSize, 1) || !isNum(f.lr) || !isNum(f.beta1) || !isNum(f.beta2) || !isNum(f.eps) || typeof f.shuffle !== 'boolean') {
    return 'invalid fit options';
  }
  if (f.rebuild !== null && (!f.rebuild || !isInt(f.rebuild.first, 1) || !isNum(f.rebuild.growth) || !isNum(f.rebuild.maxInterval))) return 'invalid rebuild options';
  const d = o.data;
  if (!d || !isInt(d.points) || !isInt(d.features) || !isInt(d.labels) || !isInt(d.nnz) || !isInt(d.labelNnz) || typeof d.hash !== 'string') return 'invalid data fingerprint';
  if (!isInt(o.trainPoints)) return 'invalid trainPoints';
  if (f.validation !== undefined && f.validation !== null) {
    try {
      resolveValidation(f.validation);
    } catch (e) {
      return `invalid validation options: ${(e as Error).message}`;
    }
  }
  if (f.selection !== undefined && f.selection !== null) {
    const p = selectionProblem(f.selection);
    if (p) return `invalid selection record: ${p}`;
  }
  const es = o.earlyStop;
  if (es !== undefined && es !== null) {
    if (typeof es !== 'object' || !isNum(es.bestScore) || !isInt(es.bestEpoch) || !isInt(es.bad) || !isNum(es.lrScale) || !(es.lrScale > 0) || !Array.isArray(es.history)) return 'invalid early-stopping state';
    // The history is reported again by the resumed fit (stats.validation): every entry must be a point.
    const bad = es.history.findIndex((h) => !h || typeof h !== 'object' || !isInt(h.epoch, 1) || ![h.p1, h.p3, h.p5, h.score, h.lr].every(isNum) ||
      (h.scale !== undefined && !(isNum(h.scale) && h.scale > 0 && h.scale <= 1)) ||
      (h.gain !== undefined && !(h.gain && typeof h.gain === 'object' && isInt(h.gain.ref) && isNum(h.gain.gain) && isNum(h.gain.se) && h.gain.se >= 0)));
    if (bad >= 0) return `invalid early-stopping history entry ${bad}`;
    if (es.refEpoch !== undefined && !isInt(es.refEpoch)) return 'invalid early-stopping reference epoch';
    if (es.annealFrom !== undefined && !isInt(es.annealFrom)) return 'invalid early-stopping anneal start';
    if (es.annealFor !== undefined && !isInt(es.annealFor, 1)) return 'invalid early-stopping anneal length';
    if (es.refScore !== undefined && !isNum(es.refScore)) return 'invalid early-stopping reference score';
    if (es.refPoints !== undefined && !(Array.isArray(es.refPoints) && es.refPoints.length <= 1e7 && es.refPoints.every(isNum))) return 'invalid early-stopping reference scores';
  }
  return null;
}

/** What readCheckpoint needs from the network it builds. */
export interface CheckpointTarget extends CheckpointSource {
  batchesDone: number;
}

/**
 * Reads and verifies one checkpoint file into a network built by `make(config)`. Order: header and
 * structure, then the checksum of the whole file (streamed, nothing kept), then the meta, the stored
 * configuration (by the rules of a user configuration) and the section table against what it implies
 * (src/network/file-layout.ts: every section present with its dtype and length, nothing else), then the
 * memory plan of the network against `limits.maxMemory` (MemoryLimitError) and `beforeAllocate`; only
 * then the network is allocated and the sections streamed into it (so neither a damaged nor a crafted
 * header can size an allocation), and finally the values are checked (finite weights and moments, hash
 * tables that index inside their arrays). Throws BinFileError for a damaged file, CheckpointFormatError
 * for intact files that are not usable checkpoints, MemoryLimitError for one that does not fit.
 */
export async function readCheckpoint<N extends CheckpointTarget>(
  path: string,
  make: (c: NetworkConfig) => N,
  beforeAllocate?: (c: NetworkConfig) => void,
  limits: LoadLimits = {},
): Promise<{ network: N; meta: CheckpointMeta; earlyStop: EarlyStop | null }> {
  const head = await readBinFile<CheckpointMeta>(path, { kind: 'checkpoint', headerOnly: true });
  await verifyBinFileChecksum(path);
  const problem = metaProblem(head.meta);
  if (problem) throw new CheckpointFormatError(`${path}: ${problem}`);
  const meta = head.meta;
  const resolved = resolveStoredConfig(meta.config);
  if (typeof resolved === 'string') throw new CheckpointFormatError(`${path}: ${resolved}`);
  const present: boolean[] = [];
  const wideEntries = wideEntriesOf(resolved, head.table);
  const layout = layoutProblem(fileLayout(resolved, 'checkpoint', wideEntries), head.table, present);
  if (layout) throw new CheckpointFormatError(`${path}: ${layout}`);
  const [hasFreq, hasBest, hasScale, hasLog, hasMap] = present as [boolean, boolean, boolean, boolean, boolean];
  if (hasMap !== (meta.inputFeatures !== undefined)) throw new CheckpointFormatError(`${path}: section "inputMap" and meta inputFeatures must come together`);
  checkLoadMemory(path, resolved, limits, hasBest, wideEntries);
  const config = storedConfig(meta.config);
  // A caller's refusal (e.g. a memory limit) comes before any allocation and is not a damaged file.
  beforeAllocate?.(config);
  let network: N;
  try {
    network = make(config);
  } catch (e) {
    throw new CheckpointFormatError(`${path}: invalid network configuration: ${(e as Error).message}`);
  }
  const labels = network.config.layers.at(-1)!.size;
  const last = network.spec.layers.at(-1)!;
  if (last.wide) last.wide = allocateWide(resolved.inputDim, wideEntries);
  const freq = hasFreq ? new Uint32Array(labels) : null;
  const best = hasBest ? new WeightSnapshot(network.spec) : null;
  const scale = hasScale ? new Float32Array(resolved.inputDim) : null;
  const ids = hasMap ? new Uint32Array(resolved.inputDim) : null;
  const into = checkpointSections(network.spec, freq, best, scale, hasLog ? new Uint8Array(1) : null, ids);
  await readBinFile(path, { kind: 'checkpoint', into });
  const mapProblem = ids ? inputMapProblem(ids, meta.inputFeatures, resolved.inputDim) : null;
  if (mapProblem) throw new CheckpointFormatError(`${path}: ${mapProblem}`);
  const values = valuesProblem(resolved, into) ?? (last.wide ? wideProblem(last.wide, last.outDim) : null);
  if (values) throw new CheckpointFormatError(`${path}: ${values}`);
  if ((network.schedule === null) !== (meta.schedule === null)) throw new CheckpointFormatError(`${path}: schedule state does not match the configuration`);
  if (network.schedule) {
    // The schedule's growth and cap shape every later interval: rebuild it with the run's options.
    try {
      network.schedule = new RebuildSchedule(meta.options.rebuild ?? {});
    } catch (e) {
      throw new CheckpointFormatError(`${path}: invalid rebuild options: ${(e as Error).message}`);
    }
    network.schedule.restore(meta.schedule!);
  }
  network.rebuildRound = meta.rebuildRound;
  network.batchesDone = meta.position.batchesDone;
  network.labelFreq = freq;
  network.inputScale = scale;
  network.inputLog = hasLog;
  network.inputMap = ids ? { features: meta.inputFeatures!, ids } : null;
  network.trainPoints = meta.trainPoints;
  return { network, meta, earlyStop: meta.earlyStop ? { state: meta.earlyStop, snapshot: best } : null };
}

/** An error thrown by loadLatestCheckpoint's beforeAllocate, carried out of the search unchanged. */
class Refusal {
  constructor(readonly error: unknown) {}
}

/** A checkpoint that could not be written (FitStats.checkpointFailures): training went on without it. */
export interface CheckpointFailure {
  file: string;
  reason: CheckpointReason;
  error: string;
}

/** A file skipped while looking for a usable checkpoint. */
export interface SkippedCheckpoint {
  file: string;
  error: string;
  /** Where the damaged file was moved (`<file>.corrupt`), or null if it was left in place. */
  movedTo: string | null;
}

/**
 * Loads the newest usable checkpoint of `dir`. A file that is damaged or not a usable checkpoint is
 * renamed to `<file>.corrupt` (so that later runs neither pick it again nor count it among the kept
 * checkpoints; the KEEP_CORRUPT newest such files are kept, older ones deleted) and the next older one is
 * tried; `warn` is told about each. Throws if there is none. An error thrown by `beforeAllocate` (see
 * readCheckpoint), or the memory limit (`limits`, MemoryLimitError), ends the search at once: it is the
 * caller's refusal, not a damaged file (older checkpoints of the run have the same network).
 */
export async function loadLatestCheckpoint<N extends CheckpointTarget>(
  dir: string,
  make: (c: NetworkConfig) => N,
  warn: (message: string) => void,
  beforeAllocate?: (c: NetworkConfig) => void,
  limits: LoadLimits = {},
): Promise<{ network: N; meta: CheckpointMeta; earlyStop: EarlyStop | null; file: string; skipped: SkippedCheckpoint[] }> {
  try {
    if (!(await stat(dir)).isDirectory()) throw new Error(`${dir}: not a directory`);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') throw new Error(`${dir}: no such checkpoint directory`);
    throw e;
  }
  const files = await listCheckpoints(dir);
  if (files.length === 0) throw new Error(`${dir}: no checkpoints (ckpt-<batches>.bin files) found`);
  const skipped: SkippedCheckpoint[] = [];
  // Wrapped so the catch below tells the caller's refusal apart from a damaged file.
  const guard = beforeAllocate && ((c: NetworkConfig) => {
    try {
      beforeAllocate(c);
    } catch (error) {
      throw new Refusal(error);
    }
  });
  for (let i = 0; i < files.length; i++) {
    const { file } = files[i]!;
    try {
      const r = await readCheckpoint(file, make, guard, limits);
      return { ...r, file, skipped };
    } catch (e) {
      if (e instanceof Refusal) throw e.error;
      if (e instanceof MemoryLimitError) throw e;
      const msg = (e as Error).message;
      const damaged = e instanceof BinFileError || e instanceof CheckpointFormatError;
      let movedTo: string | null = null;
      if (damaged) {
        try {
          await rename(file, file + '.corrupt');
          movedTo = file + '.corrupt';
          await pruneCorrupt(dir);
        } catch {
          // Leave it; the message below says it stayed.
        }
      }
      skipped.push({ file, error: msg, movedTo });
      const next = files[i + 1];
      warn(
        `checkpoint ${file} is unusable: ${msg}` +
          (movedTo ? ` (moved to ${movedTo})` : '') +
          (next ? `; falling back to the previous checkpoint ${next.file}` : ''),
      );
    }
  }
  throw new Error(`${dir}: no usable checkpoint (${skipped.map((s) => `${s.file}: ${s.error}`).join('; ')})`);
}

/** Damaged checkpoints kept as `<file>.corrupt` for inspection; older ones are deleted. */
export const KEEP_CORRUPT = 3;

/** Deletes all but the KEEP_CORRUPT newest (highest batch count) `ckpt-*.bin.corrupt` files of `dir`. */
async function pruneCorrupt(dir: string): Promise<void> {
  const corrupt = (await readdir(dir))
    .map((n) => ({ n, m: /^ckpt-(\d+)\.bin\.corrupt$/.exec(n) }))
    .filter((x) => x.m)
    .sort((a, b) => Number(b.m![1]) - Number(a.m![1]));
  for (const c of corrupt.slice(KEEP_CORRUPT)) await unlink(join(dir, c.n)).catch(() => {});
}

/** Removes leftover temporary checkpoint files whose writing process is gone (killed mid-write). */
async function removeStaleTemps(dir: string): Promise<void> {
  for (const n of await readdir(dir)) {
    const m = TEMP_RE.exec(n);
    if (!m) continue;
    const pid = Number(m[1]);
    if (pid !== process.pid && isProcessAlive(pid)) continue; // another live process is writing it
    if (pid === process.pid) continue; // ours, in progress
    await unlink(join(dir, n)).catch(() => {});
  }
}

/**
 * Bytes of one checkpoint file of `src` (sections plus a bound on the header), for the space pre-flight.
 * `bestWeights`: the run keeps the best epoch's weights (held-out validation), stored as `best.*`.
 */
export function checkpointFileBytes(src: Pick<CheckpointSource, 'spec' | 'config'>, bestWeights: boolean): number {
  let bytes = 64 * 1024; // header (meta JSON, section table), trailer and alignment: a few kB in practice
  for (const a of Object.values(checkpointSections(src.spec, null))) bytes += a.byteLength + 8;
  bytes += 4 * src.config.layers.at(-1)!.size + 8 * src.config.inputDim + 48; // labelFreq, inputScale, inputLog, inputMap
  if (bestWeights) for (const l of src.spec.layers) bytes += l.weights.byteLength + l.bias.byteLength + 16;
  return bytes;
}

/**
 * Removes `dir` and its parents up to and including `top` (the first directory a recursive mkdir created
 * for it), each only while it is empty: what a refused checkpoint directory left behind, nothing else.
 */
async function removeEmptyDirs(dir: string, top: string): Promise<void> {
  const stop = resolve(top);
  for (let d = resolve(dir); ; d = dirname(d)) {
    try {
      await rmdir(d);
    } catch {
      return; // not empty (or gone): leave it and its parents
    }
    if (d === stop || dirname(d) === d) return;
  }
}

/**
 * Periodic checkpointing during one fit(): decides when a checkpoint is due and writes it. The fit loop
 * asks `due()` between batches, drains the batches in flight when it is, then calls `save()`.
 *
 * A checkpoint that cannot be written (ENOSPC, EACCES, EROFS, ...) does not stop training: the failure is
 * reported through `warn` (path and error) and recorded in `failures`, earlier checkpoints stay as they
 * were, and the next one is attempted when it comes due (the final one included). The trained network is
 * still in memory, so the caller can save it elsewhere (the CLI always tries --save).
 */
export class Checkpointer {
  readonly dir: string;
  readonly every: CheckpointEvery;
  readonly keep: number;
  private lastSaved = -1;
  /** Batch count of the last failed write: not due again at that count (the loop would retry forever). */
  private lastFailed = -1;
  private lastTime = performance.now();
  private lock: DirectoryLock | null = null;
  /** Checkpoints written by this checkpointer. */
  written = 0;
  /** Checkpoints that could not be written. */
  readonly failures: CheckpointFailure[] = [];

  constructor(
    private opts: CheckpointOptions,
    private src: CheckpointSource,
    private options: SavedFitOptions,
    private data: DataFingerprint,
    private warn: (message: string) => void = (m) => void process.stderr.write(`sublinear: ${m}\n`),
    /** The early stopping of the run (fit with validation) at the time of each checkpoint, or null. */
    private earlyStop: () => EarlyStop | null = () => null,
  ) {
    if (!opts || typeof opts.dir !== 'string' || opts.dir.length === 0) {
      throw new Error(`Expected a directory path for checkpoint.dir but received ${JSON.stringify(opts?.dir)}`);
    }
    this.dir = opts.dir;
    this.every = parseCheckpointEvery(opts.every);
    this.keep = opts.keep ?? 2;
    if (!Number.isInteger(this.keep) || this.keep < 1) throw new Error(`Expected positive integer for checkpoint.keep but received ${JSON.stringify(opts.keep)}`);
  }

  /** The fit options every checkpoint records. */
  get savedOptions(): SavedFitOptions {
    return this.options;
  }

  /** Replaces the recorded fit options (fit() does once k-fold selection has chosen the epoch count). */
  setOptions(options: SavedFitOptions): void {
    this.options = options;
  }

  /**
   * Creates the directory, takes its lock (src/train/lock.ts: a directory another live run writes to is
   * refused, naming that run's pid), removes dead writers' temporary files, refuses a directory that
   * holds checkpoints this network did not come from (its newest must not be newer than `owned`, the
   * batch count of the checkpoint this network last wrote to or was resumed from in this directory), and
   * checks that the directory is writable and its filesystem has room for the checkpoints to come: keep
   * + 1 files at the peak (a new one is written before the oldest is deleted), less the ones already
   * there. A refused directory that prepare() created is removed again (with the parents it created, if
   * empty), its lock released. Call close() when the run ends, also after prepare() threw.
   */
  async prepare(startBatches: number, owned: { dir: string; batchesDone: number } | null): Promise<void> {
    // A missing parent, a read-only filesystem or a file in the way: said plainly, naming the directory.
    await checkOutputDirs([{ dir: this.dir, bytes: 0, what: 'checkpoint directory', creatable: true }]);
    // The first directory mkdir created (undefined: it existed): a refusal below removes what it created.
    const created = await mkdir(this.dir, { recursive: true });
    try {
      await this.checkDirectory(startBatches, owned);
    } catch (e) {
      await this.close();
      if (created !== undefined) await removeEmptyDirs(this.dir, created);
      throw e;
    }
  }

  /** prepare()'s checks of a directory that exists: lock, stale temporaries, other runs' checkpoints, room. */
  private async checkDirectory(startBatches: number, owned: { dir: string; batchesDone: number } | null): Promise<void> {
    this.lock = await lockDirectory(this.dir);
    await removeStaleTemps(this.dir);
    const existing = await listCheckpoints(this.dir);
    const mine = owned !== null && resolve(owned.dir) === resolve(this.dir);
    if (existing.length > 0 && !(mine && existing[0]!.batchesDone <= owned.batchesDone)) {
      throw new Error(
        `checkpoint directory ${this.dir} already holds checkpoints of another run (newest: ${existing[0]!.file}); ` +
          'resume them (sublinear train --resume, Network.resume) or use an empty directory',
      );
    }
    const size = checkpointFileBytes(this.src, !!this.options.validation);
    const files = Math.max(1, this.keep + 1 - existing.length);
    await checkOutputDirs([{
      dir: this.dir, bytes: files * size, what: 'checkpoint directory',
      detail: `${files} more checkpoint file(s) of ${formatBytes(size)}: keep ${this.keep} plus the one being written, ${existing.length} already there`,
    }]);
    this.lastSaved = startBatches;
    this.lastTime = performance.now();
  }

  /** Releases the directory's lock (idempotent). */
  async close(): Promise<void> {
    const l = this.lock;
    this.lock = null;
    await l?.release();
  }

  /** True when a checkpoint is due with `batchesDone` batches trained (never twice at one count). */
  due(batchesDone: number): boolean {
    if (batchesDone === this.lastSaved || batchesDone === this.lastFailed) return false;
    if ('batches' in this.every) return batchesDone % this.every.batches === 0;
    return (performance.now() - this.lastTime) / 1000 >= this.every.seconds;
  }

  /**
   * Writes a checkpoint at `position`, then deletes all but the newest `keep`. `tasksInFlight` must be 0:
   * a checkpoint taken while a task updates the weights is the state of no batch count (an exact resume
   * from it is impossible), so a caller that asks for one has a bug and gets an error. Returns null (and
   * writes nothing) if a checkpoint at this batch count was already written or resumed from, or if the
   * write failed (reported through `warn`, recorded in `failures`; training goes on).
   */
  /**
   * Writes the checkpoint of `position` (nothing when the last one written, or the run's start, is at the
   * same batch count, unless `force`: a run stopped during k-fold selection records its start, so that
   * it can be resumed).
   */
  async save(position: TrainingPosition, reason: CheckpointReason, tasksInFlight = 0, force = false): Promise<CheckpointInfo | null> {
    if (tasksInFlight !== 0) {
      throw new Error(`internal error: checkpoint at batch ${position.batchesDone} requested with ${tasksInFlight} task(s) in flight (checkpoints must be taken between fully applied batches)`);
    }
    // The state at a given batch count is unique, so an 'end' right after a periodic one adds nothing.
    if (position.batchesDone === this.lastSaved && !force) return null;
    const t0 = performance.now();
    const file = join(this.dir, checkpointName(position.batchesDone));
    let bytes: number;
    try {
      bytes = await writeCheckpoint(file, this.src, { position, options: this.options, data: this.data, reason, extra: (typeof this.opts.extra === 'function' ? (this.opts.extra as () => unknown)() : this.opts.extra) ?? null, earlyStop: this.earlyStop() });
    } catch (e) {
      // Training goes on: the weights are in memory and the next checkpoint (or the final save) may
      // succeed (space freed, disk remounted); stopping would throw away everything since the last one.
      // The time-based schedule waits a full interval before trying again.
      this.lastTime = performance.now();
      this.lastFailed = position.batchesDone;
      const error = (e as Error).message;
      this.failures.push({ file, reason, error });
      const last = this.lastSaved >= 0 && this.written > 0 ? join(this.dir, checkpointName(this.lastSaved)) : null;
      this.warn(
        `cannot write checkpoint ${file}: ${error}. ` +
          (reason === 'periodic' ? 'Training goes on; ' : 'The final state is not checkpointed; ') +
          (last ? `the newest checkpoint is ${last}.` : 'earlier checkpoints are untouched.'),
      );
      return null;
    }
    this.lastSaved = position.batchesDone;
    this.lastTime = performance.now();
    this.written++;
    const all = await listCheckpoints(this.dir);
    for (const old of all.slice(this.keep)) await unlink(old.file).catch(() => {});
    const info: CheckpointInfo = { ...position, file, bytes, seconds: (performance.now() - t0) / 1000, reason };
    await this.opts.onSaved?.(info);
    return info;
  }
}

// Network.load reads a checkpoint file's network (for evaluation) through this: the network layer does not
// know training state. The checkpoint's tables index the weights of its last scheduled rebuild; inference
// wants the current ones: the seed of that rebuild is replayed, as a loaded model does.
setCheckpointReader(async (file, limits) => {
  const { network } = await readCheckpoint(file, (config) => new Network(config), undefined, limits);
  network.rebuildRound = Math.max(0, network.rebuildRound - 1);
  network.invalidateTables();
  return network;
});
