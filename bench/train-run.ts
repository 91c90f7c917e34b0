// One sublinear training run in its own process (so its peak RSS is its own), printing one JSON line.
// Used by bench/engine.ts (sampled vs dense) and bench/scaling.ts (1 vs 2 workers).
//
//   node dist/bench/train-run.js --shape amazon-670k --train 20000 --test 2000 --seed 1 \
//        --workers 1 --output sampled|dense --epochs 1 --lr 1e-3 [--labels n] [--K 6] [--L 50] [--budget n] [--mode union|topk|threshold]
//        [--min-active n] [--per-sample-fill 1] [--no-batch-negatives 1]
import { synthesize, subset, resolveShape, type SynthShape } from '../datasets/index.js';
import { Network } from '../src/network/network.js';
import type { NetworkConfig } from '../src/network/config.js';
import { peakRssMB } from '../src/util/peak-rss.js';
import { parseBenchArgs, num } from './args.js';

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

async function main() {
  const a = parseBenchArgs(process.argv.slice(2));
  const shapeName = String(a.shape ?? 'amazon-670k');
  const base = resolveShape(shapeName as never);
  const shape: SynthShape = a.labels ? { ...base, labels: num(a, 'labels', base.labels) } : base;
  const nTrain = num(a, 'train', 20000), nTest = num(a, 'test', 2000), seed = num(a, 'seed', 1);
  const workers = num(a, 'workers', 1), epochs = num(a, 'epochs', 1), lr = num(a, 'lr', 1e-3);
  const output = a.output === 'dense' ? 'dense' : 'sampled';
  const all = synthesize({ shape, points: nTrain + nTest, seed });
  const train = subset(all, Uint32Array.from({ length: nTrain }, (_, i) => i));
  const test = subset(all, Uint32Array.from({ length: nTest }, (_, i) => nTrain + i));
  const config: NetworkConfig = {
    inputDim: shape.features,
    seed,
    layers: [
      { size: 128, activation: 'relu' },
      { size: shape.labels, activation: 'softmax', ...(output === 'sampled' ? { sampling: { hash: 'dwta', K: num(a, 'K', 6), L: num(a, 'L', 50), ...(a.budget ? { budget: num(a, 'budget', 0) } : {}), ...(a.mode ? { mode: String(a.mode) as 'union' | 'topk' | 'threshold' } : {}), ...(a['min-active'] ? { minActive: num(a, 'min-active', 0) } : {}), ...(a['per-sample-fill'] ? { sharedFill: false } : {}), ...(a['no-batch-negatives'] ? { batchNegatives: false } : {}) } } : {}) },
    ],
  };
  const net = new Network(config);
  let active = 0, miss = 0, reps = 0;
  const stats = await net.fit(train, {
    epochs, lr, workers, batchSize: num(a, 'batch', 128), split: !!a.split,
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

main().catch((e) => {
  process.stderr.write(`train-run: ${e instanceof Error ? e.stack : e}\n`);
  process.exit(1);
});
