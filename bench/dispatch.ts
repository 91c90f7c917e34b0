// Task dispatch overhead of the HOGWILD pool: the round trip of a minimal train task (one point of a
// tiny network) through piscina against the same call inline, so the difference is the hand-off cost
// (postMessage of the task with its shared-memory views, scheduling, result). Compare it with the time
// of one real batch (bench/scaling: ~54 ms per 128-point batch at the Amazon-670K shape, 1 worker).
//
//   node dist/bench/dispatch.js [--tasks 2000] [--json]
import { synthesize } from '../datasets/index.js';
import { Network } from '../src/network/network.js';
import { InlineExecutor, PoolExecutor } from '../src/train/executor.js';
import type { TrainTask } from '../src/train/tasks.js';
import { parseBenchArgs, num } from './args.js';

async function main() {
  const a = parseBenchArgs(process.argv.slice(2));
  const tasks = num(a, 'tasks', 2000);
  const data = synthesize({ shape: 'tiny', points: 64, seed: 1 });
  const net = new Network({ inputDim: data.features, layers: [{ size: 8 }, { size: data.labels }] });
  const task = (i: number): TrainTask => ({
    net: net.spec, data, pointIds: Uint32Array.of(i % data.points),
    lr: 1e-3, beta1: 0.9, beta2: 0.999, eps: 1e-8, gradScale: 1, seed: i,
  });
  const inline = new InlineExecutor();
  const pool = new PoolExecutor(1);
  for (let i = 0; i < 200; i++) { await inline.train(task(i)); await pool.train(task(i)); } // warm-up
  let t0 = performance.now();
  for (let i = 0; i < tasks; i++) await inline.train(task(i));
  const inlineUs = ((performance.now() - t0) * 1000) / tasks;
  t0 = performance.now();
  for (let i = 0; i < tasks; i++) await pool.train(task(i));
  const poolUs = ((performance.now() - t0) * 1000) / tasks;
  await pool.close();
  const r = { bench: 'dispatch', tasks, inlineMicros: inlineUs, poolMicros: poolUs, overheadMicros: poolUs - inlineUs };
  if (!a.json) process.stdout.write(`inline ${inlineUs.toFixed(1)} us/task, pool ${poolUs.toFixed(1)} us/task: dispatch overhead ${(poolUs - inlineUs).toFixed(1)} us per task\n`);
  process.stdout.write(JSON.stringify(r) + '\n');
}

main().catch((e) => {
  process.stderr.write(`bench/dispatch: ${e instanceof Error ? e.message : e}\n`);
  process.exit(1);
});
