// One sublinear training run in its own process (so its peak RSS is its own), printing one JSON line.
// Used by bench/engine.ts (sampled vs dense) and bench/scaling.ts (1 vs 2 workers).
//
//   node dist/bench/train-run.js --shape amazon-670k --train 20000 --test 2000 --seed 1 \
//        --workers 1 --output sampled|dense --epochs 1 --lr 1e-3 [--labels n] [--K 6] [--L 50] [--budget n] [--mode union|topk|threshold]
//        [--min-active n] [--per-sample-fill] [--no-batch-negatives] [--split] [--verbose]
import { synthesize, subset, resolveShape, SHAPE_NAMES, type ShapeName, type SynthShape } from '../src/datasets/index.js';
import { Network } from '../src/network/network.js';
import type { NetworkConfig } from '../src/network/config.js';
import { peakRssMB } from '../src/util/peak-rss.js';
import { defineCommand } from '../src/cli/args.js';
import { benchMain } from './cli.js';
import { fit } from '../src/train/fit-network.js';

export interface TrainRunResult {
  shape: string;
  labels: number;
  features: number;
  output: 'sampled' | 'dense';
  workers: number;
  epochs: number;
  trainPoints: number;
  samplesPerSec: number;
  trainSeconds: number;
  rebuildSeconds: number;
  rebuildShare: number;
  indexSeconds: number;
  p1: number;
  p3: number;
  p5: number;
  evalSeconds: number;
  peakRssMB: number;
  sharedStateMB: number;
  avgActive: number;
  labelMissRate: number;
}

export const trainRunCmd = defineCommand({
  name: 'bench/train-run',
  summary: 'One sublinear training run on synthetic data in this process; prints one JSON line (used by bench:engine and bench:scaling).',
  flags: {
    shape: { type: 'choice', choices: SHAPE_NAMES, default: 'amazon-670k', description: 'synthetic dataset shape' },
    labels: { type: 'integer', min: 1, valueName: 'n', description: "label count (default: the shape's)" },
    train: { type: 'integer', min: 1, default: 20000, valueName: 'n', description: 'training points' },
    test: { type: 'integer', min: 1, default: 2000, valueName: 'n', description: 'test points' },
    seed: { type: 'integer', min: 0, default: 1, valueName: 'n', description: 'data and network seed' },
    workers: { type: 'integer', min: 0, max: 256, default: 1, valueName: 'n', description: 'worker threads (0: in the main thread)' },
    epochs: { type: 'integer', min: 1, default: 1, valueName: 'n', description: 'passes over the training data' },
    lr: { type: 'number', min: 0, default: 1e-3, valueName: 'x', description: 'Adam learning rate' },
    batch: { type: 'integer', min: 1, default: 128, valueName: 'n', description: 'mini-batch size' },
    output: { type: 'choice', choices: ['sampled', 'dense'] as const, default: 'sampled', description: 'output layer: DWTA-sampled or dense' },
    K: { type: 'integer', min: 1, default: 6, valueName: 'k', description: 'sampled output: DWTA hashes per table' },
    L: { type: 'integer', min: 1, default: 50, valueName: 'l', description: 'sampled output: hash tables' },
    budget: { type: 'integer', min: 0, valueName: 'n', description: "sampled output: table candidates per sample (default: the config's)" },
    mode: { type: 'choice', choices: ['union', 'topk', 'threshold'] as const, description: "sampled output: candidate selection (default: the config's)" },
    minActive: { type: 'integer', min: 0, valueName: 'n', description: "sampled output: minimum active outputs per batch (default: the config's)" },
    perSampleFill: { type: 'boolean', description: 'sampled output: random negatives per sample instead of one shared fill (sharedFill: false)' },
    noBatchNegatives: { type: 'boolean', description: "sampled output: do not use the batch's other labels as negatives (batchNegatives: false)" },
    split: { type: 'boolean', description: 'split every batch across the workers' },
    verbose: { type: 'boolean', description: 'progress on stderr' },
  },
  run: async (o) => {
    await trainRun(o);
    return 0;
  },
});

interface TrainRunOptions {
  shape: ShapeName; labels?: number; train: number; test: number; seed: number; workers: number; epochs: number; lr: number;
  batch: number; output: 'sampled' | 'dense'; K: number; L: number; budget?: number; mode?: 'union' | 'topk' | 'threshold';
  minActive?: number; perSampleFill: boolean; noBatchNegatives: boolean; split: boolean; verbose: boolean;
}

async function trainRun(a: TrainRunOptions) {
  const shapeName = a.shape;
  const base = resolveShape(shapeName);
  const shape: SynthShape = a.labels !== undefined ? { ...base, labels: a.labels } : base;
  const nTrain = a.train, nTest = a.test, seed = a.seed;
  const workers = a.workers, epochs = a.epochs, lr = a.lr;
  const output = a.output;
  const all = synthesize({ shape, points: nTrain + nTest, seed });
  const train = subset(all, Uint32Array.from({ length: nTrain }, (_, i) => i));
  const test = subset(all, Uint32Array.from({ length: nTest }, (_, i) => nTrain + i));
  const config: NetworkConfig = {
    inputDim: shape.features,
    seed,
    layers: [
      { size: 128, activation: 'relu' },
      { size: shape.labels, activation: 'softmax', ...(output === 'sampled' ? { sampling: { hash: 'dwta', K: a.K, L: a.L, ...(a.budget !== undefined ? { budget: a.budget } : {}), ...(a.mode ? { mode: a.mode } : {}), ...(a.minActive !== undefined ? { minActive: a.minActive } : {}), ...(a.perSampleFill ? { sharedFill: false } : {}), ...(a.noBatchNegatives ? { batchNegatives: false } : {}) } } : {}) },
    ],
  };
  const net = new Network(config);
  let active = 0, miss = 0, reps = 0;
  const stats = await fit(net, train, {
    epochs, lr, workers, batchSize: a.batch, split: a.split,
    onProgress: (p) => {
      if (p.avgActive > 0) { active += p.avgActive; miss += p.labelMissRate; reps++; }
      if (a.verbose) process.stderr.write(`  ${p.samples} samples ${Math.round(p.samplesPerSec)}/s loss ${p.loss.toFixed(3)}\n`);
    },
  });
  const e0 = performance.now();
  const m = await net.evaluate(test, { workers: Math.max(1, workers) });
  const evalSeconds = (performance.now() - e0) / 1000;
  const r: TrainRunResult = {
    shape: shapeName, labels: shape.labels, features: shape.features, output, workers, epochs, trainPoints: nTrain,
    samplesPerSec: stats.samplesPerSec, trainSeconds: stats.trainSeconds, rebuildSeconds: stats.rebuildSeconds,
    rebuildShare: stats.rebuildSeconds / stats.trainSeconds, indexSeconds: stats.indexSeconds,
    p1: m['p1']!, p3: m['p3']!, p5: m['p5']!, evalSeconds,
    peakRssMB: peakRssMB(),
    sharedStateMB: Math.round(net.memoryBytes() / 1e6),
    avgActive: reps ? active / reps : shape.labels, labelMissRate: reps ? miss / reps : 0,
  };
  process.stdout.write(JSON.stringify(r) + '\n');
}

await benchMain(import.meta.url, trainRunCmd, 'node dist/bench/train-run.js');
