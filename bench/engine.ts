// Sampled vs dense output layer on Amazon-670K-shaped synthetic data (135,909 -> 128 -> 670,091),
// the same network, data, epochs and seed; each run in its own process. Reports samples/s, peak
// memory and P@1, and the ratios.
//
//   npm run bench:engine -- [--train 30000] [--test 2000] [--epochs 1] [--lr 1e-2] [--workers 1] [--json]
//
// The defaults take about 6 minutes, nearly all of it the dense run (~120 samples/s). lr 1e-2: at 1e-3 neither
// network gets past P@1 0.01 in one epoch on 30k points, which makes the accuracy comparison meaningless.
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { availableParallelism, cpus } from 'node:os';
import { packageRoot } from '../src/util/package-root.js';
import { defineCommand } from '../src/cli/args.js';
import { benchMain } from './cli.js';
import { SYNTHETIC_RUN_FLAGS } from './run-flags.js';
import { runBenchChild } from './child.js';
import type { TrainRunResult } from './train-run.js';

export const engineCmd = defineCommand({
  name: 'bench:engine',
  summary: 'Sampled against dense output layer: the same network, data, epochs and seed, each in its own process.',
  description: 'Writes bench/results/engine.json. The defaults take about 6 minutes, nearly all of it the dense run.',
  flags: {
    ...SYNTHETIC_RUN_FLAGS,
    workers: { type: 'integer', min: 0, max: 256, default: 1, valueName: 'n', description: 'worker threads of both runs' },
    verbose: { type: 'boolean', description: "show the runs' progress" },
    json: { type: 'boolean', description: 'print only the JSON line' },
  },
  run: async (o) => {
    await compareEngines(o);
    return 0;
  },
});

async function compareEngines(a: { shape: string; labels?: number; train: number; test: number; epochs: number; seed: number; lr: number; workers: number; verbose: boolean; json: boolean }) {
  const common = ['--shape', a.shape, '--train', String(a.train), '--test', String(a.test),
    '--epochs', String(a.epochs), '--seed', String(a.seed), '--lr', String(a.lr), '--workers', String(a.workers)];
  if (a.labels !== undefined) common.push('--labels', String(a.labels));
  const runs: Record<'sampled' | 'dense', TrainRunResult> = {} as never;
  for (const output of ['sampled', 'dense'] as const) {
    if (!a.json) process.stderr.write(`running the ${output} output layer...\n`);
    runs[output] = await runBenchChild<TrainRunResult>('train-run.js', [...common, '--output', output], a.verbose);
    const r = runs[output];
    if (!a.json) process.stderr.write(`  ${r.samplesPerSec.toFixed(1)} samples/s, P@1 ${r.p1.toFixed(4)}, peak RSS ${r.peakRssMB} MB\n`);
  }
  const s = runs.sampled, d = runs.dense;
  const result = {
    bench: 'engine',
    machine: { cores: availableParallelism(), cpu: cpus()[0]?.model ?? 'unknown' },
    shape: s.shape, labels: s.labels, trainPoints: s.trainPoints, epochs: s.epochs, workers: s.workers,
    sampled: s, dense: d,
    speedup: s.samplesPerSec / d.samplesPerSec,
    p1Diff: s.p1 - d.p1,
  };
  if (!a.json) {
    process.stdout.write(`output   samples/s  P@1     P@5     peak RSS MB  avg active\n`);
    for (const r of [s, d]) process.stdout.write(`${r.output.padEnd(8)} ${r.samplesPerSec.toFixed(1).padStart(9)}  ${r.p1.toFixed(4)}  ${r.p5.toFixed(4)}  ${String(r.peakRssMB).padStart(11)}  ${Math.round(r.avgActive)}\n`);
    process.stdout.write(`sampled / dense: ${result.speedup.toFixed(1)}x samples/s; P@1 difference ${(100 * result.p1Diff).toFixed(2)} points\n`);
  }
  const dir = join(packageRoot(), 'bench', 'results');
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, 'engine.json'), JSON.stringify(result, null, 2) + '\n');
  process.stdout.write(JSON.stringify(result) + '\n');
}

await benchMain(import.meta.url, engineCmd, 'npm run bench:engine --');
