// `sublinear train` on a checkpoint disk that fills up mid-run (a real full tmpfs): the checkpoints fail
// with warnings, training finishes, --save (on another disk) is written and the exit status is 0; without
// --save the final state is saved nowhere and the exit status is 1. A --save disk that fills up: the model
// is kept in the checkpoint directory, or without one in the system temporary directory, said, and the
// exit status is 1. Spawns the compiled CLI.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawn, spawnSync } from 'node:child_process';
import { closeSync, existsSync, mkdirSync, mkdtempSync, openSync, readdirSync, rmSync, writeFileSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { assertBuilt, CLI, ROOT } from './built.js';

const root = mkdtempSync(join(tmpdir(), 'sublinear-clifault-'));
const mounts: string[] = [];
function mountTmpfs(bytes: number): string | null {
  const dir = join(root, `tmpfs${mounts.length}`);
  mkdirSync(dir);
  if (spawnSync('mount', ['-t', 'tmpfs', '-o', `size=${bytes}`, 'tmpfs', dir]).status !== 0) return null;
  mounts.push(dir);
  return dir;
}
const canMount = mountTmpfs(1 << 20) !== null;
if (!canMount) console.warn('cannot mount a tmpfs here (needs root and mount permission): the CLI full-disk tests are skipped');

let trainFile: string, cfgFile: string;
beforeAll(() => {
  assertBuilt(['src/cli', 'src/train', 'src/network', 'src/util']);
  const synth = spawnSync(process.execPath, [CLI, 'data', 'synth', '--shape', 'tiny', '--train', '3000', '--seed', '7', '--out', join(root, 'data')], { encoding: 'utf8' });
  expect(synth.status).toBe(0);
  trainFile = join(root, 'data', 'train.txt');
  cfgFile = join(root, 'config.json');
  writeFileSync(cfgFile, JSON.stringify({ inputDim: 2000, seed: 3, layers: [{ size: 48 }, { size: 100, sampling: { hash: 'dwta', K: 3, L: 8, budget: 16 } }] }));
});
afterAll(() => {
  for (const m of mounts.reverse()) spawnSync('umount', ['-l', m]);
  rmSync(root, { recursive: true, force: true });
});

/**
 * Runs the CLI; fills the filesystem of `disk` as soon as a first checkpoint appears in `ckpt` (or, with
 * `ckpt` null, once training has started: the pre-flight checks are behind it).
 */
function trainFillingDisk(disk: string, ckpt: string | null, args: string[]): Promise<{ code: number | null; stdout: string; stderr: string; filled: boolean }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [CLI, 'train', ...args], { cwd: ROOT });
    let stdout = '', stderr = '', filled = false;
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    // Kept full: a checkpoint whose write had its blocks before the disk filled up completes and then
    // deletes the oldest one, and the space it frees is taken again at the next tick (on a busy machine a
    // checkpoint could otherwise fit into it, and the final one succeed).
    const timer = setInterval(() => {
      if (!filled && (ckpt === null ? !stderr.includes('network: ') : !existsSync(ckpt) || !readdirSync(ckpt).some((n) => /^ckpt-\d+\.bin$/.test(n)))) return;
      filled = true;
      const fd = openSync(join(disk, 'filler'), 'a');
      for (const size of [64 * 1024, 4096]) {
        try {
          for (;;) writeSync(fd, Buffer.alloc(size, 1));
        } catch {
          // ENOSPC: full at this size
        }
      }
      closeSync(fd);
    }, 2);
    child.on('exit', (code) => {
      clearInterval(timer);
      resolve({ code, stdout, stderr, filled });
    });
  });
}

describe.skipIf(!canMount)('sublinear train on a checkpoint disk that fills up', () => {
  const common = () => ['--train', trainFile, '--config', cfgFile, '--epochs', '15', '--workers', '0', '--checkpoint-every', '2', '--json'];

  it('warns about the first failed checkpoints and the final one, still writes --save, and exits 0', async () => {
    const disk = mountTmpfs(16 << 20)!;
    const ckpt = join(disk, 'ckpt');
    const model = join(root, 'model.sl');
    const r = await trainFillingDisk(disk, ckpt, [...common(), '--checkpoint', ckpt, '--save', model]);
    expect(r.filled).toBe(true);
    expect(r.stderr).toMatch(new RegExp(`sublinear: warning: cannot write checkpoint ${ckpt}/ckpt-\\d+\\.bin: ENOSPC: no space left on device`));
    expect(r.stderr).toMatch(/The final state is not checkpointed/);
    expect(r.code).toBe(0);
    const summary = JSON.parse(r.stdout.trim().split('\n').at(-1)!) as Record<string, number>;
    expect(summary.checkpointFailures).toBeGreaterThan(4);
    // A full disk fails every checkpoint alike: three periodic failures are shown, then they are only
    // counted, and the final one is shown again.
    const shown = r.stderr.split('\n').filter((l) => l.startsWith('sublinear: warning: cannot write checkpoint'));
    expect(shown).toHaveLength(4);
    expect(r.stderr).toContain('sublinear: warning: further checkpoint write failures are counted, not shown\n');
    expect(summary.lostBatches).toBe(0);
    expect(summary.batchesDone).toBe(15 * Math.ceil(3000 / 128));
    expect(existsSync(model)).toBe(true);
    const ev = spawnSync(process.execPath, [CLI, 'eval', '--model', model, '--test', trainFile, '--json'], { encoding: 'utf8' });
    expect(ev.status).toBe(0);
  });

  it('without --save, a failed final checkpoint means the trained state is saved nowhere: exit 1', async () => {
    const disk = mountTmpfs(16 << 20)!;
    const ckpt = join(disk, 'ckpt');
    const r = await trainFillingDisk(disk, ckpt, [...common(), '--checkpoint', ckpt]);
    expect(r.filled).toBe(true);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(new RegExp(`sublinear: the trained state was not saved: the final checkpoint ${ckpt}/ckpt-\\d+\\.bin could not be written \\(ENOSPC: no space left on device.*\\) and no --save was given\\n$`));
  });
});

describe.skipIf(!canMount)('sublinear train whose --save disk fills up before the end', () => {
  const common = () => ['--train', trainFile, '--config', cfgFile, '--epochs', '6', '--workers', '0', '--json'];
  const rescuedFrom = (stderr: string, save: string) =>
    new RegExp(`sublinear: cannot save the model to ${save}: .*no space left on device.* The model is saved to (\\S+) instead: move it where it belongs\n`).exec(stderr)?.[1];

  it('keeps the model in the checkpoint directory (another disk), says where, exits 1', async () => {
    const disk = mountTmpfs(1 << 20)!;
    const save = join(disk, 'model.sl');
    // The checkpoints on another disk (a tmpfs too: fsync of a real disk is slow on a busy machine).
    const ckpt = join(mountTmpfs(16 << 20)!, 'ck');
    const r = await trainFillingDisk(disk, ckpt, [...common(), '--save', save, '--checkpoint', ckpt, '--checkpoint-every', '20']);
    expect(r.filled).toBe(true);
    expect(r.code, r.stderr).toBe(1);
    const file = rescuedFrom(r.stderr, save);
    expect(file, r.stderr).toMatch(new RegExp(`^${ckpt}/model\\.rescued-[0-9a-z]+-\\d+\\.sl$`));
    // Next to --save was tried first, on the same full disk.
    expect(r.stderr).toMatch(new RegExp(`Nor to ${disk}/model\\.rescued-\\S+\\.sl \\(.*no space left on device.*\\)\\. `));
    expect(existsSync(save)).toBe(false);
    expect(JSON.parse(r.stdout.trim().split('\n').at(-1)!)).toMatchObject({ model: file, saveError: expect.stringContaining('no space left on device') });
    const ev = spawnSync(process.execPath, [CLI, 'eval', '--model', file!, '--test', trainFile, '--json'], { encoding: 'utf8' });
    expect(ev.status, ev.stderr).toBe(0);
  });

  it('without a checkpoint directory, keeps it in the system temporary directory', async () => {
    const disk = mountTmpfs(1 << 20)!;
    const save = join(disk, 'model.sl');
    const r = await trainFillingDisk(disk, null, [...common(), '--save', save]);
    expect(r.filled).toBe(true);
    expect(r.code, r.stderr).toBe(1);
    const file = rescuedFrom(r.stderr, save);
    try {
      expect(file, r.stderr).toMatch(new RegExp(`^${tmpdir()}/sublinear-model\\.rescued-[0-9a-z]+-\\d+\\.sl$`));
      const ev = spawnSync(process.execPath, [CLI, 'eval', '--model', file!, '--test', trainFile, '--json'], { encoding: 'utf8' });
      expect(ev.status, ev.stderr).toBe(0);
    } finally {
      if (file) rmSync(file, { force: true });
    }
  });
});
