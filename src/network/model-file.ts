// Model files: config + weights + training label frequencies (+ the input divisors of a network trained
// on raw-valued data, section inputScale, or the mark of its count compression, section inputLog) in the checksummed container of
// src/util/binfile.ts, written atomically. Hash tables are not stored: their functions derive from the
// config's seed and the tables are rebuilt from the weights, so a loaded model predicts exactly as saved.
// A model trained on raw text also holds its text vectorizer (meta.text; sections text.vocabulary, u8:
// the UTF-8 tokens each followed by '\n', and text.idf, f32) and label names (meta.labelNames: their count;
// section labelNames, u8: each name followed by '\n'). Files without them (numeric models, and every file
// written before text models existed) load as before. A model with a trained re-ranker (RerankConfig) holds
// it in meta.rerank (weight, shortlist, entries) and sections rerank.offsets (u32, labels + 1),
// rerank.features (u32, entries), rerank.weights (f32, entries) and rerank.bias (f32, labels); files without
// them predict with the network alone. Version 2 (meta.version; absent in version 1) adds calibrated
// probabilities (meta.calibration, JSON: src/network/calibration.ts); version 1 files load as before,
// without them, and files of a newer version are refused. Version 3 adds the input feature map
// (src/network/input-map.ts) of a network whose layer 0 holds rows only for the features its training data
// held: meta.inputFeatures (the declared input dimension) and section inputMap (u32, config.inputDim
// increasing feature ids, one per layer-0 row); files without them (every earlier file) have a row per feature.
import { readBinFile, writeBinFile, type SectionArray, type SectionDtype, type SectionInfo } from '../util/binfile.js';
import { verifyBinFileChecksum } from '../util/binfile-verify.js';
import { boundJson } from '../util/bounded-text.js';
import { storedConfig, type NetworkConfig, type ResolvedNetworkConfig } from './config.js';
import { checkLoadMemory, fileLayout, layoutProblem, resolveStoredConfig, valuesProblem, wideEntriesOf, type LoadLimits } from './file-layout.js';
import { allocateWide, wideProblem } from './wide.js';
import { INPUT_LOG_SECTION, inputLogSection } from './input-scale.js';
import { hasTrainingArrays } from './state.js';
import { inputMapProblem, type InputMap } from './input-map.js';
import type { NetSpec } from '../native/network-types.js';

/**
 * What a model file is written from and read into: the fields of a Network it touches (Network satisfies
 * it; a structural type, so that this module does not import network.ts, which imports it).
 */
export interface ModelTarget {
  readonly config: ResolvedNetworkConfig;
  readonly spec: NetSpec;
  batchesDone: number;
  rebuildRound: number;
  trainPoints: number;
  labelFreq: Uint32Array | null;
  inputScale: Float32Array | null;
  inputLog: boolean;
  inputMap: InputMap | null;
  textVectorizer: TextVectorizer | undefined;
  labelNames: readonly string[] | undefined;
  rerank: RerankState | null;
  calibration: ProbabilityCalibration | null;
  invalidateTables(): void;
}

/** Version of the model meta written by this build (ModelMeta.version); newer files are refused. */
export const MODEL_VERSION = 3;
import { TextVectorizer, type TextVectorizerMeta } from '../text/vectorizer.js';
import { rerankProblem, type RerankState } from './rerank.js';
import { calibrationProblem, type ProbabilityCalibration } from './calibration.js';

/**
 * How a model was trained, stored in its file for `sublinear info` (`Network.save(path, { training })`;
 * `train --save` fills it). Every field is optional; loading ignores it. `train` records only what an
 * identical run reproduces (no times, no worker count), so a resumed run still saves the same file, byte
 * for byte, as an uninterrupted one.
 */
export interface TrainingSummary {
  /** The training data: its path as given to train (absolute) and its shape. */
  data?: { file?: string; points?: number; features?: number; labels?: number; nonzeros?: number };
  /** Epochs trained (counted over the whole run, resumes included). */
  epochs?: number;
  /** With held-out validation: the epoch whose weights the model holds. */
  bestEpoch?: number;
  /** Training options: batch size and learning rate. */
  batchSize?: number;
  lr?: number;
  /** The sublinear version that wrote the file. */
  version?: string;
}

/** The meta of a model file. */
export interface ModelMeta {
  format: 'sublinear-model';
  /** MODEL_VERSION of the build that wrote it; absent: 1 (files written before calibrated probabilities). */
  version?: number;
  config: ResolvedNetworkConfig;
  batchesDone: number;
  rebuildRound: number;
  trainPoints: number;
  /** The text vectorizer's settings (models trained on raw text only). */
  text?: TextVectorizerMeta;
  /** Number of label names (models with label names only). */
  labelNames?: number;
  /** How it was trained (absent in files saved without it). */
  training?: TrainingSummary;
  /** The trained re-ranker's weight, shortlist and number of classifier weights (models with one only). */
  rerank?: { weight: number; shortlist: number; entries: number };
  /** Calibrated probabilities (version 2; models trained with validation). */
  calibration?: ProbabilityCalibration;
  /** The declared input dimension of a network with an input feature map (version 3; section inputMap). */
  inputFeatures?: number;
}

/** Sections of the text vectorizer, label names and re-ranker, outside the layout the network configuration implies. */
const TEXT_SECTIONS = ['text.vocabulary', 'text.idf', 'labelNames'] as const;
const RERANK_SECTIONS = ['rerank.offsets', 'rerank.features', 'rerank.weights', 'rerank.bias'] as const;
const EXTRA_SECTIONS: readonly string[] = [...TEXT_SECTIONS, ...RERANK_SECTIONS, 'inputMap'];

// The sections outside the network configuration's layout (text vectorizer, label names, re-ranker) and the meta announcing them.
function extraSections(net: ModelTarget): { meta: Pick<ModelMeta, 'text' | 'labelNames' | 'rerank' | 'inputFeatures'>; sections: Record<string, SectionArray> } {
  const sections: Record<string, SectionArray> = {};
  const meta: Pick<ModelMeta, 'text' | 'labelNames' | 'rerank' | 'inputFeatures'> = {};
  if (net.inputMap) {
    meta.inputFeatures = net.inputMap.features;
    sections['inputMap'] = net.inputMap.ids;
  }
  const r = net.rerank;
  if (r) {
    meta.rerank = { weight: r.weight, shortlist: r.shortlist, entries: r.features.length };
    sections['rerank.offsets'] = r.offsets;
    sections['rerank.features'] = r.features;
    sections['rerank.weights'] = r.weights;
    sections['rerank.bias'] = r.bias;
  }
  if (net.textVectorizer) {
    const p = net.textVectorizer.toParts();
    meta.text = p.meta;
    sections['text.vocabulary'] = p.vocabulary;
    sections['text.idf'] = p.idf;
  }
  if (net.labelNames) {
    meta.labelNames = net.labelNames.length;
    sections['labelNames'] = new TextEncoder().encode(net.labelNames.map((n) => `${n}\n`).join(''));
  }
  return { meta, sections };
}

function sections(net: ModelTarget): Record<string, SectionArray> {
  const s: Record<string, SectionArray> = {};
  net.spec.layers.forEach((l, i) => {
    s[`layer${i}.weights`] = l.weights;
    s[`layer${i}.bias`] = l.bias;
    if (l.wide) {
      s[`layer${i}.wide.offsets`] = l.wide.offsets;
      s[`layer${i}.wide.labels`] = l.wide.labels;
      s[`layer${i}.wide.weights`] = l.wide.weights;
    }
  });
  if (net.labelFreq) s['labelFreq'] = net.labelFreq;
  if (net.inputScale) s['inputScale'] = net.inputScale;
  if (net.inputLog) s[INPUT_LOG_SECTION] = inputLogSection();
  return s;
}

/** Bytes of the model file of `net` (sections plus a bound on the header), for the space pre-flight. */
export function modelFileBytes(net: ModelTarget): number {
  let bytes = 64 * 1024; // header (meta JSON, section table), trailer and alignment: a few kB in practice
  for (const l of net.spec.layers) {
    bytes += l.weights.byteLength + l.bias.byteLength + 16;
    if (l.wide) bytes += l.wide.offsets.byteLength + l.wide.labels.byteLength + l.wide.weights.byteLength + 24;
  }
  for (const a of Object.values(extraSections(net).sections)) bytes += a.byteLength + 16;
  return bytes + 4 * net.config.layers.at(-1)!.size + 8 + (net.inputScale ? 4 * net.config.inputDim + 8 : 0) + (net.inputLog ? 16 : 0); // labelFreq, inputScale, inputLog
}

export async function saveModel(path: string, net: ModelTarget, training?: TrainingSummary): Promise<void> {
  const meta: ModelMeta = {
    format: 'sublinear-model',
    version: MODEL_VERSION,
    config: net.config,
    batchesDone: net.batchesDone,
    rebuildRound: net.rebuildRound,
    trainPoints: net.trainPoints,
    ...(training ? { training } : {}),
    ...(net.calibration ? { calibration: net.calibration } : {}),
  };
  const extra = extraSections(net);
  await writeBinFile(path, { kind: 'model', meta: { ...meta, ...extra.meta }, sections: { ...sections(net), ...extra.sections } });
}

/** Checks the model meta's shape; returns the first problem or null. */
function modelMetaProblem(m: unknown): string | null {
  if (m === null || typeof m !== 'object') return 'not a sublinear model (missing meta)';
  const o = m as Partial<ModelMeta>;
  if (o.format !== 'sublinear-model' || !o.config) return 'not a sublinear model (missing config)';
  if (o.version !== undefined) {
    if (typeof o.version !== 'number' || !Number.isSafeInteger(o.version) || o.version < 1) return `invalid model version ${boundJson(o.version)} in the model meta`;
    if (o.version > MODEL_VERSION) return `model version ${o.version} is newer than this sublinear (it reads versions 1 to ${MODEL_VERSION}): upgrade sublinear to load it`;
  }
  for (const k of ['batchesDone', 'rebuildRound', 'trainPoints'] as const) {
    const v = o[k];
    if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < 0) return `invalid ${k} ${boundJson(v)} in the model meta`;
  }
  return null;
}

/**
 * Reads a model file into a network built by `make(config)`, which should be inference-sized (Network.load:
 * a model file holds no optimizer state, and the memory plan checked is the inference plan). A checkpoint
 * file (kind 'checkpoint') is handed to `fromCheckpoint` when given, and refused otherwise.
 *
 * Nothing is allocated before the file has been checked (src/network/file-layout.ts): header and checksum,
 * then the stored configuration by the rules of a user configuration, the section table against what the
 * configuration implies (names, dtypes, lengths), and the memory plan of the network against
 * `limits.maxMemory`; after the read, weights and biases must be finite.
 */
export async function loadModel<N extends ModelTarget>(
  path: string,
  make: (c: NetworkConfig) => N,
  fromCheckpoint?: (path: string) => Promise<N>,
  limits: LoadLimits = {},
): Promise<N> {
  const head = await readBinFile<ModelMeta>(path, fromCheckpoint ? { headerOnly: true } : { kind: 'model', headerOnly: true });
  if (head.kind === 'checkpoint' && fromCheckpoint) return fromCheckpoint(path);
  // The header sizes the network (and its hash tables, which are not in the file) before the sections
  // are read: verify the checksum first, so that a damaged digit in the config cannot allocate gigabytes,
  // then the structure, so that a crafted file with a valid checksum cannot either.
  await verifyBinFileChecksum(path);
  const meta = head.meta;
  const metaProblem = modelMetaProblem(meta);
  if (metaProblem) throw new Error(`${path}: ${metaProblem}`);
  const config = resolveStoredConfig(meta.config);
  if (typeof config === 'string') throw new Error(`${path}: ${config}`);
  const present: boolean[] = [];
  const wideEntries = wideEntriesOf(config, head.table);
  const extraTable = head.table.filter((t) => EXTRA_SECTIONS.includes(t.name));
  const layout = layoutProblem(fileLayout(config, 'model', wideEntries), head.table.filter((t) => !extraTable.includes(t)), present)
    ?? extraLayoutProblem(meta, extraTable, config);
  if (layout) throw new Error(`${path}: ${layout}`);
  checkLoadMemory(path, config, limits, false, wideEntries, true);
  let net: N;
  try {
    net = make(storedConfig(meta.config));
  } catch (e) {
    throw new Error(`${path}: invalid network configuration: ${(e as Error).message}`);
  }
  const last = net.spec.layers.at(-1)!;
  if (last.wide) last.wide = allocateWide(config.inputDim, wideEntries, !hasTrainingArrays(last));
  const into = sections(net);
  const hasFreq = present[0]!, hasScale = present[1]!, hasLog = present[2]!;
  if (hasFreq) into['labelFreq'] = new Uint32Array(config.layers.at(-1)!.size);
  // Files written before input scaling existed have no inputScale: their inputs are used as they are.
  if (hasScale) into['inputScale'] = new Float32Array(config.inputDim);
  // Files without inputLog (all written before the count compression existed) feed the inputs uncompressed.
  if (hasLog) into[INPUT_LOG_SECTION] = new Uint8Array(1);
  const read = await readBinFile(path, { kind: 'model', into });
  const values = valuesProblem(config, into) ?? (last.wide ? wideProblem(last.wide, last.outDim) : null);
  if (values) throw new Error(`${path}: ${values}`);
  if (hasFreq) net.labelFreq = into['labelFreq'] as Uint32Array;
  net.inputScale = hasScale ? (into['inputScale'] as Float32Array) : null;
  net.inputLog = hasLog;
  const extra = read.sections;
  try {
    if (meta.text) net.textVectorizer = TextVectorizer.fromParts(meta.text, extra['text.vocabulary'] as Uint8Array, extra['text.idf'] as Float32Array);
    if (meta.labelNames !== undefined) net.labelNames = decodeNames(extra['labelNames'] as Uint8Array, meta.labelNames);
    if (meta.rerank !== undefined) {
      const r: RerankState = {
        weight: meta.rerank.weight, shortlist: meta.rerank.shortlist,
        offsets: extra['rerank.offsets'] as Uint32Array, features: extra['rerank.features'] as Uint32Array,
        weights: extra['rerank.weights'] as Float32Array, bias: extra['rerank.bias'] as Float32Array,
      };
      const problem = rerankProblem(r, config.layers.at(-1)!.size, config.inputDim);
      if (problem) throw new Error(problem);
      net.rerank = r;
    }
    if (meta.inputFeatures !== undefined) {
      const ids = extra['inputMap'] as Uint32Array;
      const problem = inputMapProblem(ids, meta.inputFeatures, config.inputDim);
      if (problem) throw new Error(problem);
      net.inputMap = { features: meta.inputFeatures, ids };
    }
    if (meta.calibration !== undefined) {
      const problem = calibrationProblem(meta.calibration, config.layers.at(-1)!.size);
      if (problem) throw new Error(problem);
      net.calibration = meta.calibration;
    }
  } catch (e) {
    throw new Error(`${path}: ${(e as Error).message}`);
  }
  net.batchesDone = meta.batchesDone;
  net.rebuildRound = Math.max(0, meta.rebuildRound - 1); // the next rebuild replays the last round's seed (0: none was built)
  net.trainPoints = meta.trainPoints;
  net.invalidateTables();
  return net;
}

/** The text and re-ranker sections must be exactly those the meta announces, with the dtypes and lengths it implies. */
function extraLayoutProblem(meta: ModelMeta, table: readonly SectionInfo[], config: ResolvedNetworkConfig): string | null {
  const want = new Map<string, SectionDtype>();
  if (meta.text !== undefined) {
    if (meta.text === null || typeof meta.text !== 'object') return 'invalid text settings in the model meta';
    want.set('text.vocabulary', 'u8').set('text.idf', 'f32');
    const declared = meta.inputFeatures ?? config.inputDim;
    if (meta.text.features !== undefined && !(Number.isSafeInteger(meta.text.features) && meta.text.features <= declared)) {
      return `the text vectorizer has ${boundJson(meta.text.features)} features but the network's inputDim is ${declared}`;
    }
  }
  if (meta.labelNames !== undefined) {
    const n = meta.labelNames;
    const outputs = config.layers.at(-1)!.size;
    if (typeof n !== 'number' || !Number.isSafeInteger(n) || n < 0 || n > outputs) return `invalid labelNames ${boundJson(n)} in the model meta (the network has ${outputs} labels)`;
    want.set('labelNames', 'u8');
  }
  const lengths = new Map<string, number>();
  if (meta.inputFeatures !== undefined) {
    want.set('inputMap', 'u32');
    lengths.set('inputMap', config.inputDim);
  }
  if (meta.rerank !== undefined) {
    const r = meta.rerank;
    const labels = config.layers.at(-1)!.size;
    if (r === null || typeof r !== 'object' || !Number.isSafeInteger(r.entries) || r.entries < 0 || typeof r.weight !== 'number' || typeof r.shortlist !== 'number') {
      return `invalid re-ranker ${boundJson(r)} in the model meta`;
    }
    want.set('rerank.offsets', 'u32').set('rerank.features', 'u32').set('rerank.weights', 'f32').set('rerank.bias', 'f32');
    lengths.set('rerank.offsets', labels + 1).set('rerank.features', r.entries).set('rerank.weights', r.entries).set('rerank.bias', labels);
  }
  for (const t of table) {
    const d = want.get(t.name);
    if (d === undefined) return `unexpected section "${t.name}" for this model's meta`;
    if (t.dtype !== d) return `section "${t.name}" is ${t.dtype} but must be ${d}`;
    const n = lengths.get(t.name);
    if (n !== undefined && t.length !== n) return `section "${t.name}" holds ${t.length} values but must hold ${n}`;
    want.delete(t.name);
  }
  const missing = [...want.keys()][0];
  return missing ? `missing section "${missing}"` : null;
}

/** Label names stored as UTF-8, each followed by a line break. */
function decodeNames(bytes: Uint8Array, count: number): string[] {
  let text: string;
  try {
    text = new TextDecoder('utf-8', { fatal: true }).decode(bytes);
  } catch {
    throw new Error('the label names are not UTF-8');
  }
  const names = text === '' ? [] : text.slice(0, -1).split('\n');
  if ((text !== '' && !text.endsWith('\n')) || names.length !== count) throw new Error(`section "labelNames" does not hold ${count} names`);
  if (names.some((n) => n === '' || n.includes(',') || n.includes('\t') || n.includes('\r'))) throw new Error('section "labelNames" holds an empty name or one with a comma, tab or line break');
  if (new Set(names).size !== names.length) throw new Error('section "labelNames" holds a name twice');
  return names;
}
