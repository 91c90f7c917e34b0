// Task dispatch overhead of the HOGWILD pool: the round trip of a minimal train task (one point of a
// tiny network) through piscina against the same call inline, so the difference is the hand-off cost
// (postMessage of the task with its shared-memory views, scheduling, result). Compare it with the time
// of one real batch (bench/scaling: ~54 ms per 128-point batch at the Amazon-670K shape, 1 worker).
//
//   node dist/bench/dispatch.js [--tasks 2000] [--json]
import { synthesize } from '../src/datasets/index.js';
import { Network } from '../src/network/network.js';
import { InlineExecutor, PoolExecutor } from '../src/network/executor.js';
import type { TrainTask } from '../src/network/tasks.js';
import { defineCommand } from '../src/cli/args.js';
import { benchMain } from './cli.js';

export const dispatchCmd = defineCommand({
  name: 'bench/dispatch',
  summary: 'Round trip of a minimal train task through the piscina pool against the same call inline.',
  flags: {
    tasks: { type: 'integer', min: 1, default: 2000, valueName: 'n', description: 'timed tasks per executor' },
    json: { type: 'boolean', description: 'print only the JSON line' },
  },
  run: async (o) => {
    await measure(o.tasks, o.json);
    return 0;
  },
});

async function measure(tasks: number, json: boolean) {
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
  if (!json) process.stdout.write(`inline ${inlineUs.toFixed(1)} us/task, pool ${poolUs.toFixed(1)} us/task: dispatch overhead ${(poolUs - inlineUs).toFixed(1)} us per task\n`);
  process.stdout.write(JSON.stringify(r) + '\n');
}

await benchMain(import.meta.url, dispatchCmd, 'node dist/bench/dispatch.js');
