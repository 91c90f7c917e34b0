// Model files: config + weights + training label frequencies in the checksummed container of
// src/util/binfile.ts, written atomically. Hash tables are not stored: their functions derive from the
// config's seed and the tables are rebuilt from the weights, so a loaded model predicts exactly as saved.
import { readBinFile, writeBinFile, type SectionArray } from '../util/binfile.js';
import { verifyBinFileChecksum } from '../util/binfile-verify.js';
import { boundJson } from '../util/bounded-text.js';
import { storedConfig, type NetworkConfig, type ResolvedNetworkConfig } from './config.js';
import { checkLoadMemory, fileLayout, layoutProblem, resolveStoredConfig, valuesProblem, type LoadLimits } from './file-layout.js';
import type { Network } from './network.js';

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
  config: ResolvedNetworkConfig;
  batchesDone: number;
  rebuildRound: number;
  trainPoints: number;
  /** How it was trained (absent in files saved without it). */
  training?: TrainingSummary;
}

function sections(net: Network): Record<string, SectionArray> {
  const s: Record<string, SectionArray> = {};
  net.spec.layers.forEach((l, i) => {
    s[`layer${i}.weights`] = l.weights;
    s[`layer${i}.bias`] = l.bias;
  });
  if (net.labelFreq) s['labelFreq'] = net.labelFreq;
  return s;
}

/** Bytes of the model file of `net` (sections plus a bound on the header), for the space pre-flight. */
export function modelFileBytes(net: Network): number {
  let bytes = 64 * 1024; // header (meta JSON, section table), trailer and alignment: a few kB in practice
  for (const l of net.spec.layers) bytes += l.weights.byteLength + l.bias.byteLength + 16;
  return bytes + 4 * net.config.layers.at(-1)!.size + 8; // labelFreq
}

export async function saveModel(path: string, net: Network, training?: TrainingSummary): Promise<void> {
  const meta: ModelMeta = {
    format: 'sublinear-model',
    config: net.config,
    batchesDone: net.batchesDone,
    rebuildRound: net.rebuildRound,
    trainPoints: net.trainPoints,
    ...(training ? { training } : {}),
  };
  await writeBinFile(path, { kind: 'model', meta, sections: sections(net) });
}

/** Checks the model meta's shape; returns the first problem or null. */
function modelMetaProblem(m: unknown): string | null {
  if (m === null || typeof m !== 'object') return 'not a sublinear model (missing meta)';
  const o = m as Partial<ModelMeta>;
  if (o.format !== 'sublinear-model' || !o.config) return 'not a sublinear model (missing config)';
  for (const k of ['batchesDone', 'rebuildRound', 'trainPoints'] as const) {
    const v = o[k];
    if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < 0) return `invalid ${k} ${boundJson(v)} in the model meta`;
  }
  return null;
}

/**
 * Reads a model file into a network built by `make(config)`. A checkpoint file (kind 'checkpoint') is
 * handed to `fromCheckpoint` when given, and refused otherwise.
 *
 * Nothing is allocated before the file has been checked (src/network/file-layout.ts): header and checksum,
 * then the stored configuration by the rules of a user configuration, the section table against what the
 * configuration implies (names, dtypes, lengths), and the memory plan of the network against
 * `limits.maxMemory`; after the read, weights and biases must be finite.
 */
export async function loadModel(
  path: string,
  make: (c: NetworkConfig) => Network,
  fromCheckpoint?: (path: string) => Promise<Network>,
  limits: LoadLimits = {},
): Promise<Network> {
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
  const layout = layoutProblem(fileLayout(config, 'model'), head.table, present);
  if (layout) throw new Error(`${path}: ${layout}`);
  checkLoadMemory(path, config, limits);
  let net: Network;
  try {
    net = make(storedConfig(meta.config));
  } catch (e) {
    throw new Error(`${path}: invalid network configuration: ${(e as Error).message}`);
  }
  const into = sections(net);
  const hasFreq = present[0]!;
  if (hasFreq) into['labelFreq'] = new Uint32Array(config.layers.at(-1)!.size);
  await readBinFile(path, { kind: 'model', into });
  const values = valuesProblem(config, into);
  if (values) throw new Error(`${path}: ${values}`);
  if (hasFreq) net.labelFreq = into['labelFreq'] as Uint32Array;
  net.batchesDone = meta.batchesDone;
  net.rebuildRound = meta.rebuildRound - 1; // the next rebuild replays the last round's seed
  net.trainPoints = meta.trainPoints;
  net.invalidateTables();
  return net;
}
