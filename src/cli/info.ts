// `sublinear info <file>`: what a model or checkpoint file holds, without loading the network: its
// configuration and sizes, the labels, how and on what it was trained (`train --save` stores a
// TrainingSummary; checkpoints record their position, options and data), checked by its checksum.
import { stat } from 'node:fs/promises';
import { readBinFile } from '../util/binfile.js';
import { verifyBinFileChecksum } from '../util/binfile-verify.js';
import { boundText } from '../util/bounded-text.js';
import { resolveStoredConfig, wideEntriesOf } from '../network/file-layout.js';
import type { ResolvedNetworkConfig } from '../network/config.js';
import type { TrainingSummary } from '../network/model-file.js';
import { formatBytes } from '../network/memory-plan.js';
import { defineCommand } from './args.js';
import { checkInputFile } from '../job/preflight.js';

/** What `info --json` prints (the text form shows the same). */
export interface FileInfo {
  file: string;
  kind: 'model' | 'checkpoint';
  bytes: number;
  /** Format version of the container. */
  formatVersion: number;
  /** Models: the model version (2: with calibrated probabilities; 1: written before them). */
  modelVersion?: number;
  config: ResolvedNetworkConfig;
  /** Weights and biases of every layer. */
  parameters: number;
  /** Outputs of the last layer. */
  labels: number;
  /** Pairs (feature, label) of the output layer's wide part (absent without one). */
  widePairs?: number;
  /** Models with a trained re-ranker: its weight, shortlist and classifier weights. */
  rerank?: { weight: number; shortlist: number; entries: number };
  /** Models with calibrated probabilities (model version 2): their threshold, shortlist and held-out ECE. */
  calibration?: { threshold: number; shortlist: number; ece: number; points: number };
  /** Batches trained over the network's life. */
  batchesDone: number;
  /** Training points the label frequencies were counted on. */
  trainPoints?: number;
  /** Models: how they were trained, when the file says. */
  training?: TrainingSummary;
  /** The declared input dimension of a network with an input feature map (config.inputDim: its layer-0 rows). */
  inputFeatures?: number;
  /** Checkpoints: where the run stood, its options, its data and why the file was written. */
  checkpoint?: { position: unknown; options: unknown; data: unknown; reason: unknown; savedAt: unknown; trainFile?: string };
}

/** Reads the header of a model or checkpoint file after checking its checksum; throws naming the file. */
export async function fileInfo(path: string): Promise<FileInfo> {
  const head = await readBinFile<Record<string, unknown>>(path, { headerOnly: true });
  await verifyBinFileChecksum(path);
  const meta = head.meta;
  if (!meta || typeof meta !== 'object') throw new Error(`${path}: not a sublinear model or checkpoint (no meta)`);
  const config = resolveStoredConfig(meta.config);
  if (typeof config === 'string') throw new Error(`${path}: ${config}`);
  let parameters = 0, prev = config.inputDim;
  for (const l of config.layers) {
    parameters += prev * l.size + l.size;
    prev = l.size;
  }
  const num = (v: unknown) => (typeof v === 'number' && Number.isFinite(v) ? v : undefined);
  const info: FileInfo = {
    file: path, kind: head.kind, bytes: (await stat(path)).size, formatVersion: head.version, ...(head.kind === 'model' ? { modelVersion: num(meta.version) ?? 1 } : {}), config, parameters,
    labels: config.layers.at(-1)!.size,
    ...(num(meta.inputFeatures) !== undefined ? { inputFeatures: num(meta.inputFeatures) } : {}),
    batchesDone: num(meta.batchesDone) ?? num((meta.position as { batchesDone?: unknown } | undefined)?.batchesDone) ?? 0,
  };
  if (config.layers.at(-1)!.wide) info.widePairs = wideEntriesOf(config, head.table);
  const rr = meta.rerank as { weight?: unknown; shortlist?: unknown; entries?: unknown } | undefined;
  if (head.kind === 'model' && rr && typeof rr === 'object') info.rerank = { weight: num(rr.weight) ?? NaN, shortlist: num(rr.shortlist) ?? NaN, entries: num(rr.entries) ?? NaN };
  const cal = meta.calibration as { threshold?: unknown; shortlist?: unknown; report?: { ece?: unknown; points?: unknown } } | undefined;
  if (head.kind === 'model' && cal && typeof cal === 'object') {
    info.calibration = { threshold: num(cal.threshold) ?? NaN, shortlist: num(cal.shortlist) ?? NaN, ece: num(cal.report?.ece) ?? NaN, points: num(cal.report?.points) ?? NaN };
  }
  const trainPoints = num(meta.trainPoints);
  if (trainPoints !== undefined) info.trainPoints = trainPoints;
  if (head.kind === 'model' && meta.training && typeof meta.training === 'object') info.training = meta.training as TrainingSummary;
  if (head.kind === 'checkpoint') {
    const cli = (meta.extra as { cli?: { train?: unknown } } | null)?.cli;
    info.checkpoint = {
      position: meta.position, options: meta.options, data: meta.data, reason: meta.reason, savedAt: meta.savedAt,
      ...(typeof cli?.train === 'string' ? { trainFile: cli.train } : {}),
    };
  }
  return info;
}

/** The text form of `info`: one fact per line. Strings from the file are shown escaped and cut. */
export function infoText(i: FileInfo): string {
  const s = (v: unknown) => boundText(String(v), 200);
  const n = (v: unknown) => (typeof v === 'number' ? v.toLocaleString('en-US') : '?');
  const layers = i.config.layers.map((l) => {
    const parts: string[] = [l.activation];
    if (l.sampling) parts.push(`${l.sampling.hash} K=${l.sampling.K} L=${l.sampling.L}`);
    if (l.dropout) parts.push(`dropout ${l.dropout}`);
    return `${l.size} (${parts.join(', ')})`;
  });
  const lines = [
    `${i.file}: sublinear ${i.kind} (format ${i.formatVersion}${i.modelVersion !== undefined ? `, model version ${i.modelVersion}` : ''}), ${formatBytes(i.bytes)}, checksum ok`,
    `network: ${i.inputFeatures ?? i.config.inputDim} -> ${layers.join(' -> ')}; seed ${i.config.seed}`,
    `parameters: ${n(i.parameters)}; labels: ${n(i.labels)}${i.widePairs !== undefined ? `; wide part: ${n(i.widePairs)} (feature, label) weights` : ''}` +
      (i.inputFeatures !== undefined ? `; layer-0 rows for the ${n(i.config.inputDim)} features the training data held` : ''),
    `trained: ${n(i.batchesDone)} batches${i.trainPoints !== undefined ? ` on ${n(i.trainPoints)} points` : ''}`,
  ];
  if (i.rerank) lines.push(`re-ranker: ${n(i.rerank.entries)} classifier weights, weighted x${s(i.rerank.weight)} on the network's top ${n(i.rerank.shortlist)}`);
  if (i.calibration) {
    const c = i.calibration;
    lines.push(`probabilities: calibrated on ${n(c.points)} held-out points for each point's top ${n(c.shortlist)} (held-out ECE ${c.ece.toFixed(4)}); threshold ${c.threshold.toFixed(3)}`);
  }
  const t = i.training;
  if (t) {
    const d = t.data;
    if (d) lines.push(`data: ${d.file !== undefined ? s(d.file) : '?'} (${n(d.points)} points, ${n(d.features)} features, ${n(d.labels)} labels, ${n(d.nonzeros)} nonzeros)`);
    const run = [
      t.epochs !== undefined ? `${n(t.epochs)} epoch(s)${t.bestEpoch !== undefined ? `, weights of epoch ${n(t.bestEpoch)} (best held-out score)` : ''}` : null,
      t.batchSize !== undefined ? `batch ${n(t.batchSize)}` : null,
      t.lr !== undefined ? `lr ${s(t.lr)}` : null,
    ].filter((x) => x !== null);
    if (run.length) lines.push(`training: ${run.join('; ')}`);
    if (t.version !== undefined) lines.push(`saved by sublinear ${s(t.version)}`);
  } else if (i.kind === 'model') {
    lines.push('training: not recorded (saved without a summary)');
  }
  const c = i.checkpoint;
  if (c) {
    const p = c.position as { epoch?: number; batch?: number } | undefined;
    const o = c.options as { epochs?: number; batchSize?: number; lr?: number; validation?: unknown } | undefined;
    const d = c.data as { points?: number; features?: number; labels?: number; hash?: string } | undefined;
    lines.push(`position: epoch ${n((p?.epoch ?? NaN) + 1)}, batch ${n(p?.batch)} (${s(c.reason)}; written ${s(c.savedAt)})`);
    if (o) lines.push(`options: ${o.validation ? `held-out validation, at most ${n(o.epochs)} epochs` : `${n(o.epochs)} epochs`}; batch ${n(o.batchSize)}; lr ${s(o.lr)}`);
    if (d) lines.push(`data: ${c.trainFile !== undefined ? s(c.trainFile) : 'not recorded'} (${n(d.points)} points, ${n(d.features)} features, ${n(d.labels)} labels; fingerprint ${s(d.hash)})`);
  }
  return lines.join('\n') + '\n';
}

export const infoCmd = defineCommand({
  name: 'info',
  summary: 'Describe a model or checkpoint file: configuration, sizes, labels, and how and on what it was trained.',
  positionals: [{ name: 'file', description: 'model file (train --save) or checkpoint file' }],
  flags: { json: { type: 'boolean', description: 'print one JSON object' } },
  examples: ['info model.sl', 'info ckpt/ckpt-000004000.bin --json'],
  async run(o, io) {
    await checkInputFile(o.file, 'file');
    const i = await fileInfo(o.file);
    io.out(o.json ? JSON.stringify(i) + '\n' : infoText(i));
    return 0;
  },
});
