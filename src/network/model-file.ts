// Model files: config + weights + training label frequencies in the checksummed container of
// src/util/binfile.ts, written atomically. Hash tables are not stored: their functions derive from the
// config's seed and the tables are rebuilt from the weights, so a loaded model predicts exactly as saved.
import { readBinFile, writeBinFile, type SectionArray } from '../util/binfile.js';
import { verifyBinFileChecksum } from '../util/binfile-verify.js';
import { storedConfig, type NetworkConfig, type ResolvedNetworkConfig } from './config.js';
import type { Network } from './network.js';

interface ModelMeta {
  format: 'sublinear-model';
  config: ResolvedNetworkConfig;
  batchesDone: number;
  rebuildRound: number;
  trainPoints: number;
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

export async function saveModel(path: string, net: Network): Promise<void> {
  const meta: ModelMeta = {
    format: 'sublinear-model',
    config: net.config,
    batchesDone: net.batchesDone,
    rebuildRound: net.rebuildRound,
    trainPoints: net.trainPoints,
  };
  await writeBinFile(path, { kind: 'model', meta, sections: sections(net) });
}

/**
 * Reads a model file into a network built by `make(config)`. A checkpoint file (kind 'checkpoint') is
 * handed to `fromCheckpoint` when given, and refused otherwise.
 */
export async function loadModel(
  path: string,
  make: (c: NetworkConfig) => Network,
  fromCheckpoint?: (path: string) => Promise<Network>,
): Promise<Network> {
  // Read the header first (sections stream into the freshly allocated shared arrays).
  const head = await readBinFile<ModelMeta>(path, fromCheckpoint ? { headerOnly: true } : { kind: 'model', headerOnly: true });
  if (head.kind === 'checkpoint' && fromCheckpoint) return fromCheckpoint(path);
  // The header sizes the network (and its hash tables, which are not in the file) before the sections
  // are read: verify the checksum first, so that a damaged digit in the config cannot allocate gigabytes.
  await verifyBinFileChecksum(path);
  const meta = head.meta;
  if (!meta || meta.format !== 'sublinear-model' || !meta.config) throw new Error(`${path}: not a sublinear model (missing config)`);
  let net: Network;
  try {
    net = make(storedConfig(meta.config));
  } catch (e) {
    throw new Error(`${path}: invalid network configuration: ${(e as Error).message}`);
  }
  const into = sections(net);
  const labels = net.config.layers.at(-1)!.size;
  const hasFreq = head.table.some((t) => t.name === 'labelFreq');
  if (hasFreq) into['labelFreq'] = new Uint32Array(labels);
  await readBinFile(path, { kind: 'model', into });
  if (hasFreq) net.labelFreq = into['labelFreq'] as Uint32Array;
  net.batchesDone = meta.batchesDone;
  net.rebuildRound = meta.rebuildRound - 1; // the next rebuild replays the last round's seed
  net.trainPoints = meta.trainPoints;
  net.invalidateTables();
  return net;
}
