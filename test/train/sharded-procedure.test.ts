// `train --distributed` (label-sharded) runs the parts of one process's procedure that small sets and the end
// of a run add: the selection phase on small sets (k-fold: src/train/sharded-select.ts), the calibrated
// probabilities, and a model kept elsewhere when --save cannot be written (src/train/sharded-save.ts with
// src/job/rescue-save.ts). Each against one process with one worker, spawning the compiled CLI under mpirun.
// Skipped, saying why, without mpirun or the MPI addon; the full-disk case also without tmpfs mounts (root).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawn, spawnSync } from 'node:child_process';
import { mkdirSync, readdirSync, writeFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { assertBuilt, CLI, ROOT } from '../cli/built.js';
import { MPI_ENV, mpiSkipReason } from './mpi-env.js';

const reason = mpiSkipReason();

const ENV = MPI_ENV;
type Run = { code: number | null; stdout: string; stderr: string };
function mpirun(np: number, ...args: string[]): Run {
  // (Within the tests' own time limits: a job whose ranks wait for each other forever fails here, not by the test's timeout.)
  const r = spawnSync('mpirun', ['-np', String(np), process.execPath, CLI, ...args], { cwd: ROOT, env: ENV, encoding: 'utf8', timeout: 100_000 });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}
function single(...args: string[]): Run {
  const r = spawnSync(process.execPath, [CLI, ...args], { cwd: ROOT, env: ENV, encoding: 'utf8', timeout: 240_000 });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}
const lastJson = (s: string) => JSON.parse(s.trim().split('\n').at(-1)!);

let dir: string;
const mounts: string[] = [];
function mountTmpfs(bytes: number): string | null {
  const at = join(dir, `tmpfs${mounts.length}`);
  mkdirSync(at);
  if (spawnSync('mount', ['-t', 'tmpfs', '-o', `size=${bytes}`, 'tmpfs', at]).status !== 0) return null;
  mounts.push(at);
  return at;
}
beforeAll(async () => {
  if (reason) return;
  assertBuilt(['src/cli', 'src/train', 'src/network', 'src/job']);
  dir = await mkdtemp(join(tmpdir(), 'sublinear-shard-proc-'));
  // 1,500 points: a held-out slice would hold 75 (under minHoldout 100), so the defaults choose by k-fold.
  expect(single('data', 'synth', '--shape', 'tiny', '--train', '1500', '--test', '400', '--seed', '5', '--out', dir).code).toBe(0);
}, 60_000);
afterAll(async () => {
  for (const m of mounts.reverse()) spawnSync('umount', ['-l', m]);
  if (dir) await rm(dir, { recursive: true, force: true });
});

describe.skipIf(reason !== null)(`train --distributed: small sets, calibration, a --save that fails${reason ? ` (skipped: ${reason})` : ''}`, () => {
  it('a small set: the k-fold selection, the training on all points, the re-ranker weight and the calibration are one process\'s; a resumed checkpoint keeps them', () => {
    const data = ['--train', join(dir, 'train.txt'), '--test', join(dir, 'test.txt'), '--seed', '3'];
    const one = single('train', ...data, '--workers', '1', '--json', '--save', join(dir, 'one.sl'));
    expect(one.code, one.stderr).toBe(0);
    const ck = join(dir, 'ck');
    const two = mpirun(2, 'train', ...data, '--distributed', '--json', '--save', join(dir, 'two.sl'), '--checkpoint', ck);
    expect(two.code, two.stderr).toBe(0);
    const a = lastJson(one.stdout), b = lastJson(two.stdout);
    expect(b.mode).toBe('sharded');
    expect(a.selection.method).toBe('kfold');
    // The selection: the same folds, fold-mean curve (the same code on the same initial weights) and epochs.
    expect(b.selection.method).toBe('kfold');
    expect(b.selection.folds).toBe(a.selection.folds);
    expect(b.selection.scores).toEqual(a.selection.scores);
    expect(b.selection.epochs).toBe(a.selection.epochs);
    expect(b.epochs).toBe(a.epochs);
    expect(b.bestEpoch).toBeUndefined();
    // The rate: both raises (the row-update share, the k-fold one) fixed before the settings the checkpoints keep.
    expect(b.lr).toBe(a.lr);
    expect(b.rerank.weight).toBe(a.rerank.weight);
    expect(b.rerank.tried).toEqual(a.rerank.tried);
    expect(b.rerank.points).toBe(1500);
    // The calibration the folds fitted, and its metrics on the test set.
    expect(b.calibration).toEqual(a.calibration);
    expect(b.testCalibration.threshold).toBe(a.testCalibration.threshold);
    expect(Math.abs(b.testCalibration.ece - a.testCalibration.ece)).toBeLessThan(1e-4);
    for (const k of ['p1', 'p3', 'p5']) expect(Math.abs(b.metrics[k] - a.metrics[k]), k).toBeLessThanOrEqual(0.005);
    expect(two.stderr).toContain('choosing the number of epochs by k-fold cross-validation (on rank 0');
    expect(two.stderr).toMatch(/epochs chosen by \d-fold cross-validation: \d+ .*then trained on all 1500 points/);
    // The model file: one process loads it with its calibration and scores what the ranks scored.
    const e = single('eval', '--model', join(dir, 'two.sl'), '--test', join(dir, 'test.txt'), '--json');
    expect(e.code, e.stderr).toBe(0);
    const ev = lastJson(e.stdout);
    for (const k of ['p1', 'p3', 'p5']) expect(ev[k], k).toBeCloseTo(b.metrics[k], 6);
    expect(ev.calibration.threshold).toBe(b.calibration.threshold);
    // The final checkpoint carries the selection: resumed (no epochs left), the run ends as it did.
    expect(readdirSync(ck).some((f) => f.startsWith('sharded-'))).toBe(true);
    const res = mpirun(2, 'train', '--resume', ck, '--distributed', '--json');
    expect(res.code, res.stderr).toBe(0);
    const c = lastJson(res.stdout);
    expect(c.selection).toEqual(b.selection);
    expect(c.lr).toBe(b.lr);
    expect(c.rerank.weight).toBe(b.rerank.weight);
    expect(c.calibration).toEqual(b.calibration);
    for (const k of ['p1', 'p3', 'p5']) expect(c.metrics[k], k).toBeCloseTo(b.metrics[k], 6);
  }, 400_000);

  it('a --save replaced by a directory during training: the model is kept next to it, said, the exit status is 1, and it loads', async () => {
    writeFileSync(join(dir, 'cfg.json'), JSON.stringify({ inputDim: 2000, seed: 3, layers: [{ size: 32 }, { size: 100 }] }));
    const out = join(dir, 'replaced');
    mkdirSync(out);
    const save = join(out, 'model.sl');
    const child = spawn('mpirun', ['-np', '2', process.execPath, CLI, 'train', '--train', join(dir, 'train.txt'), '--config', join(dir, 'cfg.json'),
      '--epochs', '3', '--distributed', '--save', save, '--json'], { cwd: ROOT, env: ENV });
    let stdout = '', stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    const exited = new Promise<number | null>((res) => child.on('exit', res));
    // After the pre-flight checks (the network line follows them), before the save.
    while (!stderr.includes('network: ') && child.exitCode === null) await new Promise((r) => setTimeout(r, 2));
    mkdirSync(save);
    expect(await exited, stderr).toBe(1);
    const m = /sublinear: cannot save the model to (.*): \1 is a directory, not a regular file: refusing to replace it\. The model is saved to (.*) instead: move it where it belongs\n/.exec(stderr);
    expect(m, stderr).not.toBeNull();
    expect(m![2]).toMatch(new RegExp(`^${out}/model\\.rescued-[0-9a-z]+-\\d+\\.sl$`));
    expect(lastJson(stdout)).toMatchObject({ model: m![2], saveError: `${save}: ${save} is a directory, not a regular file: refusing to replace it` });
    const ev = single('eval', '--model', m![2]!, '--test', join(dir, 'test.txt'), '--json');
    expect(ev.code, ev.stderr).toBe(0);
  }, 120_000);

  it('a --save whose disk fills up in the middle of the streamed rounds: every rank runs the rest, the model goes to the checkpoint directory, exit 1', (ctx) => {
    const disk = mountTmpfs(64 << 10);
    if (!disk) ctx.skip(); // needs root and mount permission
    // A model of ~1 MB (2,000 x 128 floats in layer 0): the 64 KiB disk fills in the first section's rounds.
    writeFileSync(join(dir, 'big.json'), JSON.stringify({ inputDim: 2000, seed: 3, layers: [{ size: 128 }, { size: 100 }] }));
    const save = join(disk!, 'model.sl'), ck = join(dir, 'ck-full');
    const r = mpirun(2, 'train', '--train', join(dir, 'train.txt'), '--config', join(dir, 'big.json'), '--epochs', '2', '--distributed', '--save', save,
      '--checkpoint', ck, '--json');
    expect(r.code, r.stderr).toBe(1);
    const m = new RegExp(`sublinear: cannot save the model to ${save}: .*no space left on device.* The model is saved to (\\S+) instead: move it where it belongs\n`).exec(r.stderr);
    expect(m, r.stderr).not.toBeNull();
    // Next to --save was tried first, on the same full disk; then the checkpoint directory.
    expect(r.stderr).toMatch(new RegExp(`Nor to ${disk}/model\\.rescued-\\S+\\.sl \\(.*no space left on device.*\\)\\. `));
    expect(m![1]).toMatch(new RegExp(`^${ck}/model\\.rescued-[0-9a-z]+-\\d+\\.sl$`));
    expect(lastJson(r.stdout)).toMatchObject({ model: m![1], saveError: expect.stringContaining('no space left on device') });
    const ev = single('eval', '--model', m![1]!, '--test', join(dir, 'test.txt'), '--json');
    expect(ev.code, ev.stderr).toBe(0);
  }, 120_000);
});
