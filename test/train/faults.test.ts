// Worker faults and exactly-once weights: a task that fails before touching the weights is retried and
// the model is bit-identical to an uninterrupted run (one worker); a task that fails (throws, its thread
// dies, or hangs until its timeout) after applying its update is not retried, so the batch is applied
// once, not twice, and reported as lost; a hung worker is terminated by the task timeout; a stop request
// (Ctrl-C) is honoured while a worker hangs; the pool really runs tasks in parallel; and worker threads
// load the same native addon as the main thread.
import { describe, expect, it } from 'vitest';
import { spawnSync } from 'node:child_process';
import { copyFileSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Network } from '../../src/network/network.js';
import { PoolExecutor } from '../../src/network/executor.js';
import { addonFile } from '../../src/native/addon.js';
import { packageRoot } from '../../src/util/package-root.js';
import type { FitOptions } from '../../src/train/fit.js';
import { faultFixture, weightBytes } from './state-bytes.js';
import { fit } from '../../src/train/fit-network.js';

// 1000 points / batch 128 = 8 batches per epoch.
const { data, config, base, uninterrupted } = faultFixture(1000, { epochs: 2, workers: 1, rebuild: { first: 3 }, lr: 2e-3 });

async function withFault(fault: NonNullable<FitOptions['faultInjection']>, extra: FitOptions = {}) {
  const net = new Network(config());
  const warnings: string[] = [];
  const stats = await fit(net, data, { ...base, ...extra, faultInjection: fault, onWarning: (m) => warnings.push(m) });
  return { net, stats, warnings };
}

describe('a task that fails before touching the weights is retried: the model equals an uninterrupted run', () => {
  it.each([
    ['throws', { batch: 3, failures: 1 as const, kind: 'throw' as const }],
    ['its worker thread dies (process.exit)', { batch: 3, failures: 1 as const, kind: 'exit' as const }],
  ])('%s', async (_what, fault) => {
    const { net, stats, warnings } = await withFault({ ...fault, at: 'before-update' });
    expect(stats.lostBatches).toBe(0);
    expect(stats.batches).toBe(16);
    expect(stats.samples).toBe(2 * data.points);
    expect(warnings).toEqual([]);
    expect(weightBytes(net).equals(await uninterrupted())).toBe(true);
  });
});

describe('a task that fails after applying its update is not retried: applied once, reported as lost', () => {
  it.each([
    ['throws', 'throw' as const, /injected failure after the update \(attempt 0\)/],
    ['its worker thread dies (process.exit)', 'exit' as const, /worker exited with code: 70/],
  ])('%s', async (_what, kind, cause) => {
    const { net, stats, warnings } = await withFault({ batch: 5, failures: 1, kind, at: 'after-update' });
    expect(stats.lostBatches).toBe(1);
    // The lost batch's loss and samples never came back: they are not counted.
    expect(stats.batches).toBe(15);
    expect(stats.samples).toBe(2 * data.points - 128);
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toMatch(/^batch 5 of epoch 1 was lost: /);
    expect(warnings[0]).toMatch(cause);
    expect(warnings[0]).toMatch(/after its task had started updating the weights: not retried/);
    // Its update was applied exactly once (the retry of the old loop applied it twice): the weights are
    // those of the uninterrupted run.
    expect(weightBytes(net).equals(await uninterrupted())).toBe(true);
  });

  it('more lost batches than max(3, 0.1% of the run) stop training', async () => {
    const warnings: string[] = [];
    await expect(fit(new Network(config()), data, {
      ...base, onWarning: (m) => warnings.push(m), faultInjection: { batch: 1, failures: 1, kind: 'throw', at: 'after-update', count: 5 },
    })).rejects.toThrow(/^training stopped: 4 batches lost to worker failures \(more than 3\); the last: batch 4 of epoch 1\. 1 batches completed\.$/);
    expect(warnings).toHaveLength(4);
  });

  it('the comparison can fail: a run without that batch differs', async () => {
    // The weights compared above are sensitive to one batch: skipping batch 5's update changes them.
    const net = new Network(config());
    await fit(net, data, { ...base, epochs: 1 });
    const oneEpoch = weightBytes(net);
    const more = new Network(config());
    await fit(more, data, { ...base, epochs: 1, batchSize: 125 });
    expect(weightBytes(more).equals(oneEpoch)).toBe(false);
  });
});

// One worker sends consecutive batches as one task (a group; FitOptions, BatchRunner.runGroup). With no
// rebuild due in the run, the first task holds batch 0 alone (no task time known yet) and the next ones the
// rest of each epoch: a fault at batch 4 strikes in the middle of a group, after batches of that group
// have been applied and before others have started.
describe('groups of batches in one task: a failure part-way through is handled batch by batch', () => {
  const grouped = faultFixture(1000, { epochs: 2, workers: 1, rebuild: { first: 1000 }, lr: 2e-3 });
  async function groupFault(fault: FitOptions['faultInjection'], extra: FitOptions = {}) {
    const net = new Network(grouped.config());
    const warnings: string[] = [];
    const stats = await fit(net, grouped.data, { ...grouped.base, ...extra, faultInjection: fault, onWarning: (m) => warnings.push(m) });
    return { net, stats, warnings };
  }

  it('the batches go to the worker in groups', async () => {
    const { stats } = await groupFault(undefined);
    expect(stats.batches).toBe(16);
    expect(stats.trainTasks).toBeLessThan(8);
  });

  it.each([
    ['it throws', 'throw' as const],
    ['its worker thread dies (process.exit)', 'exit' as const],
  ])('when %s before its update, a batch is retried before the batches after it run: the model equals an uninterrupted run', async (_what, kind) => {
    const { net, stats, warnings } = await groupFault({ batch: 4, failures: 1, kind, at: 'before-update' });
    expect(warnings).toEqual([]);
    expect(stats.lostBatches).toBe(0);
    expect(stats.batches).toBe(16);
    expect(stats.samples).toBe(2 * grouped.data.points);
    expect(stats.trainTasks).toBeLessThan(12);
    expect(weightBytes(net).equals(await grouped.uninterrupted())).toBe(true);
  });

  it('a batch that fails after its update is lost alone: the batches after it in its group still run, once', async () => {
    const { net, stats, warnings } = await groupFault({ batch: 4, failures: 1, kind: 'exit', at: 'after-update' });
    expect(stats.lostBatches).toBe(1);
    expect(stats.batches).toBe(15);
    expect(stats.samples).toBe(2 * grouped.data.points - 128);
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toMatch(/^batch 4 of epoch 1 was lost: worker exited with code: 70, after its task had started updating the weights/);
    expect(weightBytes(net).equals(await grouped.uninterrupted())).toBe(true);
  });

  it('a batch that fails twice stops training without running the batches after it', async () => {
    await expect(groupFault({ batch: 4, failures: 2 })).rejects.toThrow(
      /^training stopped: batch 4 of epoch 1 failed twice: injected failure before the update \(attempt 1\) \(first: injected failure before the update \(attempt 0\)\)\. 4 batches completed\.$/,
    );
  });

  it('a worker hung in the middle of a group is terminated by the timeout, and its batch retried before the rest of the group', async () => {
    const t0 = performance.now();
    const { net, stats, warnings } = await groupFault({ batch: 4, failures: 1, kind: 'hang', at: 'before-update' }, { taskTimeout: 3 });
    expect((performance.now() - t0) / 1000).toBeLessThan(30);
    expect(warnings).toEqual([]);
    expect(stats.lostBatches).toBe(0);
    expect(weightBytes(net).equals(await grouped.uninterrupted())).toBe(true);
  }, 60_000);
});

// The hang tests' task timeout is 3 s: with 1 s they failed twice on a 2-core machine at load 19 (and passed
// alone), a healthy batch there being able to outlast the timeout; the test is of the handling, not the load.
describe('hung workers', () => {
  it('a worker hung before updating is terminated by the task timeout and the batch retried', async () => {
    const t0 = performance.now();
    const { net, stats, warnings } = await withFault({ batch: 2, failures: 1, kind: 'hang', at: 'before-update' }, { taskTimeout: 3 });
    expect((performance.now() - t0) / 1000).toBeLessThan(30);
    expect(stats.lostBatches).toBe(0);
    expect(warnings).toEqual([]);
    expect(weightBytes(net).equals(await uninterrupted())).toBe(true);
  });

  it('a worker hung after updating is terminated and its batch reported as lost', async () => {
    const { net, stats, warnings } = await withFault({ batch: 2, failures: 1, kind: 'hang', at: 'after-update' }, { taskTimeout: 3 });
    expect(stats.lostBatches).toBe(1);
    expect(warnings[0]).toMatch(/^batch 2 of epoch 1 was lost: timed out: no result after 3\.0 s \(its worker thread was terminated\), after its task had started/);
    expect(weightBytes(net).equals(await uninterrupted())).toBe(true);
  });

  it('a stop request (Ctrl-C) is honoured while workers hang, without waiting for the task timeout, and stays a clean stop', async () => {
    const net = new Network(config());
    const ac = new AbortController();
    const warnings: string[] = [];
    // The first 4 batches hang on 4 workers (default timeout: 10 minutes; no rebuild due before batch 50 to
    // hold the dispatch back), so nothing else is dispatched:
    // more hung batches than the lost-batch limit (3), which must not turn the stop into an error. Stop
    // 1 s in, while they hang (or wait to start: they count as lost alike).
    const t0 = performance.now();
    setTimeout(() => ac.abort(), 1000);
    const stats = await fit(net, data, {
      ...base, workers: 4, rebuild: { first: 50 }, signal: ac.signal, onWarning: (m) => warnings.push(m),
      faultInjection: { batch: 0, failures: 1, kind: 'hang', count: 4 },
    });
    const seconds = (performance.now() - t0) / 1000;
    expect(stats.aborted).toBe(true);
    // The hung tasks get the stop grace (5 s) and are then terminated.
    expect(seconds).toBeLessThan(30);
    expect(stats.lostBatches).toBe(4);
    expect(warnings).toHaveLength(4);
    for (const w of warnings) expect(w).toMatch(/^batch [0-3] of epoch 1 did not finish before training stopped and is lost: no result 5\.0 s after training was asked to stop .*; not retried because training is stopping/);
  });

  it('taskTimeout is validated', async () => {
    await expect(fit(new Network(config()), data, { ...base, taskTimeout: 0 })).rejects.toThrow('Expected positive number of seconds for taskTimeout but received 0');
  });

  it("'exit' and 'hang' faults need a worker pool", async () => {
    await expect(fit(new Network(config()), data, { ...base, workers: 0, faultInjection: { batch: 1, failures: 1, kind: 'hang' } })).rejects.toThrow(
      "faultInjection kind 'hang' needs a worker pool (workers >= 1)",
    );
  });
});

describe('the worker pool', () => {
  it('two workers run two tasks at the same time, on two threads', async () => {
    const pool = new PoolExecutor(2);
    try {
      const r = await pool.rendezvous(2, 20_000);
      expect(r.map((x) => x.met)).toEqual([true, true]);
      expect(new Set(r.map((x) => x.threadId)).size).toBe(2);
      expect(r.every((x) => x.threadId !== 0)).toBe(true);
    } finally {
      await pool.close();
    }
  });

  it('worker threads load the same native addon file as the main thread (the sanitized one under test:asan)', async () => {
    const pool = new PoolExecutor(2);
    try {
      const r = await pool.rendezvous(2, 20_000);
      expect(r.map((x) => x.addon)).toEqual([addonFile(), addonFile()]);
    } finally {
      await pool.close();
    }
  });

  it('SUBLINEAR_ADDON reaches worker threads', () => {
    // A copy of the addon under another name: the worker must load exactly that file.
    const dir = mkdtempSync(join(tmpdir(), 'sublinear-addon-'));
    try {
      const copy = join(dir, 'copy.node');
      copyFileSync(addonFile(), copy);
      const script = `
        const { PoolExecutor } = await import(${JSON.stringify(join(packageRoot(), 'dist/src/network/executor.js'))});
        const { addonFile } = await import(${JSON.stringify(join(packageRoot(), 'dist/src/native/addon.js'))});
        const pool = new PoolExecutor(1);
        const [r] = await pool.rendezvous(1, 20000);
        await pool.close();
        console.log(JSON.stringify({ main: addonFile(), worker: r.addon }));`;
      const out = spawnSync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8', env: { ...process.env, SUBLINEAR_ADDON: copy } });
      expect(out.stderr).toBe('');
      expect(JSON.parse(out.stdout)).toEqual({ main: copy, worker: copy });
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
