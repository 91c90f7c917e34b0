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
import { parseBenchArgs, num } from './args.js';
import { runBenchChild } from './child.js';
import type { TrainRunResult } from './train-run.js';

async function main() {
  const a = parseBenchArgs(process.argv.slice(2));
  const list = String(a.workers ?? '1,2').split(',').map(Number);
  const common = ['--shape', String(a.shape ?? 'amazon-670k'), '--train', String(num(a, 'train', 30000)), '--test', String(num(a, 'test', 2000)),
    '--epochs', String(num(a, 'epochs', 1)), '--seed', String(num(a, 'seed', 1)), '--lr', String(num(a, 'lr', 1e-2)), '--output', 'sampled', ...(a.split ? ['--split'] : [])];
  const runs: TrainRunResult[] = [];
  for (const w of list) {
    if (!a.json) process.stderr.write(`running ${w} worker(s)...\n`);
    const r = await runBenchChild<TrainRunResult>('train-run.js', [...common, '--workers', String(w)], !!a.verbose);
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

main().catch((e) => {
  process.stderr.write(`bench/scaling: ${e instanceof Error ? e.message : e}\n`);
  process.exit(1);
});
