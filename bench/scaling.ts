// HOGWILD scaling: samples/s and P@1 with 1 and 2 workers on Amazon-670K-shaped synthetic data, each
// run in its own process, one after the other, in one invocation.
//
//   npm run bench:scaling -- [--train 30000] [--test 2000] [--epochs 1] [--lr 1e-2] [--workers 1,2] [--split] [--json]
// Defaults match bench:engine (see there why lr 1e-2: at 1e-3 one epoch leaves P@1 near zero at this shape).
// --split: every batch is split across the workers instead of each worker taking whole batches.
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { availableParallelism, cpus } from 'node:os';
import { packageRoot } from '../src/util/package-root.js';
import { defineCommand, UsageError } from '../src/cli/args.js';
import { parseInteger } from '../src/util/parse-values.js';
import { benchMain } from './cli.js';
import { SYNTHETIC_RUN_FLAGS } from './run-flags.js';
import { runBenchChild } from './child.js';
import type { TrainRunResult } from './train-run.js';

export const scalingCmd = defineCommand({
  name: 'bench:scaling',
  summary: 'HOGWILD scaling: samples/s and P@1 of a sampled network with each worker count, each run in its own process.',
  description: 'Writes bench/results/scaling.json (scaling-split.json with --split).',
  flags: {
    ...SYNTHETIC_RUN_FLAGS,
    workers: { type: 'string', default: '1,2', valueName: 'list', description: 'comma-separated worker counts, one run each' },
    split: { type: 'boolean', description: 'split every batch across the workers instead of each worker taking whole batches' },
    verbose: { type: 'boolean', description: "show the runs' progress" },
    json: { type: 'boolean', description: 'print only the JSON line' },
  },
  run: async (o) => {
    await measureScaling(o);
    return 0;
  },
});

async function measureScaling(a: { shape: string; labels?: number; train: number; test: number; epochs: number; seed: number; lr: number; workers: string; split: boolean; verbose: boolean; json: boolean }) {
  const parsed = a.workers.split(',').map((w) => parseInteger(w.trim(), { min: 1, max: 256 }));
  const list = parsed.filter((w): w is number => w !== undefined);
  if (list.length !== parsed.length) throw new UsageError(`option --workers expects comma-separated integers in [1, 256] but received '${a.workers}'`);
  const common = ['--shape', a.shape, '--train', String(a.train), '--test', String(a.test),
    '--epochs', String(a.epochs), '--seed', String(a.seed), '--lr', String(a.lr), '--output', 'sampled', ...(a.split ? ['--split'] : [])];
  if (a.labels !== undefined) common.push('--labels', String(a.labels));
  const runs: TrainRunResult[] = [];
  for (const w of list) {
    if (!a.json) process.stderr.write(`running ${w} worker(s)...\n`);
    const r = await runBenchChild<TrainRunResult>('train-run.js', [...common, '--workers', String(w)], a.verbose);
    runs.push(r);
    if (!a.json) process.stderr.write(`  ${Math.round(r.samplesPerSec)} samples/s, P@1 ${r.p1.toFixed(4)}, rebuild ${(100 * r.rebuildShare).toFixed(1)}% of training, peak RSS ${r.peakRssMB} MB\n`);
  }
  const one = runs.find((r) => r.workers === 1), two = runs.find((r) => r.workers === 2);
  const result = {
    bench: 'scaling',
    machine: { cores: availableParallelism(), cpu: cpus()[0]?.model ?? 'unknown' },
    runs: runs.map((r) => ({ workers: r.workers, samplesPerSec: r.samplesPerSec, p1: r.p1, trainSeconds: r.trainSeconds, rebuildShare: r.rebuildShare, peakRssMB: r.peakRssMB })),
    speedup2v1: one && two ? two.samplesPerSec / one.samplesPerSec : null,
    p1Diff: one && two ? two.p1 - one.p1 : null,
  };
  if (!a.json) {
    process.stdout.write('workers  samples/s  P@1     rebuild%  peak RSS MB\n');
    for (const r of runs) process.stdout.write(`${String(r.workers).padEnd(8)} ${r.samplesPerSec.toFixed(0).padStart(9)}  ${r.p1.toFixed(4)}  ${(100 * r.rebuildShare).toFixed(1).padStart(7)}  ${String(r.peakRssMB).padStart(11)}\n`);
    if (result.speedup2v1) process.stdout.write(`2 workers / 1 worker: ${result.speedup2v1.toFixed(2)}x samples/s, P@1 difference ${(100 * result.p1Diff!).toFixed(2)} points\n`);
  }
  const dir = join(packageRoot(), 'bench', 'results');
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, a.split ? 'scaling-split.json' : 'scaling.json'), JSON.stringify(result, null, 2) + '\n');
  process.stdout.write(JSON.stringify(result) + '\n');
}

await benchMain(import.meta.url, scalingCmd, 'npm run bench:scaling --');
