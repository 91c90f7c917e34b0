// Checkpoints under faults: a disk that fills up mid-run (a real full tmpfs) costs checkpoints, never the
// trained weights; output directories are checked before training (missing, read-only, too small; a
// refused one that the run created is removed again); the
// checkpoint directory is locked against a second run (pid named, stale locks taken over, released on
// exit); checkpoints are only taken with no task in flight; damaged tables in a checkpoint are rebuilt on
// resume; `.corrupt` files do not pile up.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import {
  closeSync, existsSync, mkdirSync, mkdtempSync, openSync, readdirSync, readFileSync, rmSync, utimesSync, writeFileSync, writeSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Network } from '../../src/network/network.js';
import {
  checkpointFileBytes, checkpointName, Checkpointer, dataFingerprint, KEEP_CORRUPT, listCheckpoints, type CheckpointInfo,
} from '../../src/train/checkpoint.js';
import { LOCK_FILE } from '../../src/train/lock.js';
import { packageRoot } from '../../src/util/package-root.js';
import { faultFixture, weightBytes } from './state-bytes.js';
import { readBinFile, writeBinFile } from '../../src/util/binfile.js';
import { fit, resume } from '../../src/train/fit-network.js';

const root = mkdtempSync(join(tmpdir(), 'sublinear-ckfault-'));
let dirCount = 0;
const freshDir = () => join(root, `run${dirCount++}`);

// 12 batches per epoch.
const { data, config, base, uninterrupted } = faultFixture(1500, { epochs: 3, workers: 0, rebuild: { first: 3 }, lr: 2e-3 });

// Real filesystems for the disk faults: tmpfs mounts (root only). Skipped, saying why, where mount fails.
const mounts: string[] = [];
function mountTmpfs(bytes: number): string | null {
  const dir = join(root, `tmpfs${mounts.length}`);
  mkdirSync(dir);
  const r = spawnSync('mount', ['-t', 'tmpfs', '-o', `size=${bytes}`, 'tmpfs', dir], { encoding: 'utf8' });
  if (r.status !== 0) return null;
  mounts.push(dir);
  return dir;
}
const probe = mountTmpfs(1 << 20);
const mountProblem = probe ? null : 'cannot mount a tmpfs here (needs root and mount permission): the full-disk tests are skipped';
if (mountProblem) console.warn(mountProblem);

afterAll(() => {
  for (const m of mounts.reverse()) spawnSync('umount', ['-l', m]);
  rmSync(root, { recursive: true, force: true });
});

/** Fills the filesystem of `dir` (a filler file written until ENOSPC). */
function fillDisk(dir: string): void {
  const fd = openSync(join(dir, 'filler'), 'w');
  const chunk = Buffer.alloc(64 * 1024, 1);
  try {
    for (;;) writeSync(fd, chunk);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'ENOSPC') throw e;
  } finally {
    closeSync(fd);
  }
}

describe.skipIf(mountProblem !== null)('a disk that fills up during training', () => {
  it('checkpoints fail with ENOSPC, training goes on, the weights are intact and can be saved elsewhere', async () => {
    const size = checkpointFileBytes(new Network(config()), false);
    const disk = mountTmpfs(4 * size + (1 << 20))!;
    const dir = join(disk, 'ckpt');
    const net = new Network(config());
    const warnings: string[] = [];
    const saved: CheckpointInfo[] = [];
    const stats = await fit(net, data, {
      ...base,
      onWarning: (m) => warnings.push(m),
      checkpoint: { dir, every: 4, onSaved: (i) => { saved.push(i); if (saved.length === 1) fillDisk(disk); } },
    });
    expect(saved.map((s) => s.batchesDone)).toEqual([4]);
    expect(stats.batches).toBe(36);
    const failures = stats.checkpointFailures!;
    expect(failures.map((f) => f.reason)).toEqual(['periodic', 'periodic', 'periodic', 'periodic', 'periodic', 'periodic', 'periodic', 'end']);
    for (const f of failures) expect(f.error).toMatch(/^ENOSPC: no space left on device/);
    expect(warnings).toHaveLength(failures.length);
    expect(warnings[0]).toBe(`cannot write checkpoint ${join(dir, checkpointName(8))}: ${failures[0]!.error}. Training goes on; the newest checkpoint is ${join(dir, checkpointName(4))}.`);
    expect(warnings.at(-1)).toMatch(new RegExp(`^cannot write checkpoint ${join(dir, checkpointName(36))}: ENOSPC.*\\. The final state is not checkpointed; `));
    // The failed writes left no temporary files; the good checkpoint is still there and loads.
    expect(readdirSync(dir)).toEqual([checkpointName(4)]);
    expect((await resume(dir)).batchesDone).toBe(4);
    // Nothing trained was lost, and it can be saved on another disk.
    expect(weightBytes(net).equals(await uninterrupted())).toBe(true);
    const model = join(freshDir() + '-model.sl');
    await net.save(model);
    expect(Buffer.from((await Network.load(model)).spec.layers[1]!.weights.buffer).equals(Buffer.from(net.spec.layers[1]!.weights.buffer))).toBe(true);
  });

  it('a checkpoint directory without room for keep + 1 checkpoints is refused before training', async () => {
    const size = checkpointFileBytes(new Network(config()), false);
    const disk = mountTmpfs(2 * size + 4096)!;
    const dir = join(disk, 'ckpt');
    let batches = 0;
    await expect(fit(new Network(config()), data, { ...base, onProgress: () => void batches++, checkpoint: { dir, every: 4 } })).rejects.toThrow(
      new RegExp(`^not enough free space: \\d\\.\\d\\d [kM]B needed, .* available on the filesystem of ${dir} \\(checkpoint directory ${dir}: .* \\(3 more checkpoint file\\(s\\) of .*: keep 2 plus the one being written, 0 already there\\)\\)$`),
    );
    expect(batches).toBe(0);
    // Released the lock on the way out, and removed the directory it had created (nothing is left behind).
    expect(existsSync(join(dir, LOCK_FILE))).toBe(false);
    expect(existsSync(dir)).toBe(false);
    // Likewise the parents it created; a directory that was there before stays, with what it held.
    const deep = join(disk, 'a', 'b', 'ckpt');
    await expect(fit(new Network(config()), data, { ...base, checkpoint: { dir: deep, every: 4 } })).rejects.toThrow('not enough free space');
    expect(readdirSync(disk)).toEqual([]);
    mkdirSync(dir);
    writeFileSync(join(dir, 'notes.txt'), 'mine');
    await expect(fit(new Network(config()), data, { ...base, checkpoint: { dir, every: 4 } })).rejects.toThrow('not enough free space');
    expect(readdirSync(dir)).toEqual(['notes.txt']);
  });

  it('a read-only checkpoint filesystem is refused before training, naming the directory', async () => {
    const disk = mountTmpfs(1 << 20)!;
    mkdirSync(join(disk, 'ckpt'));
    expect(spawnSync('mount', ['-o', 'remount,ro', disk]).status).toBe(0);
    const dir = join(disk, 'ckpt');
    await expect(fit(new Network(config()), data, { ...base, checkpoint: { dir, every: 4 } })).rejects.toThrow(
      `checkpoint directory ${dir} is not writable: read-only filesystem`,
    );
  });
});

describe('checkpoints are only taken between fully applied batches', () => {
  it('save() refuses to write while tasks are in flight', async () => {
    const net = new Network(config());
    const dir = freshDir();
    const c = new Checkpointer(
      { dir }, net,
      { epochs: 1, batchSize: 128, lr: 1e-3, beta1: 0.9, beta2: 0.999, eps: 1e-8, shuffle: true, rebuild: null },
      await dataFingerprint(data),
    );
    await c.prepare(0, null);
    try {
      await expect(c.save({ epoch: 0, batch: 3, batchesDone: 3 }, 'periodic', 1)).rejects.toThrow(
        'internal error: checkpoint at batch 3 requested with 1 task(s) in flight (checkpoints must be taken between fully applied batches)',
      );
      expect(await listCheckpoints(dir)).toEqual([]);
    } finally {
      await c.close();
    }
  });

  it('with two workers and a checkpoint after every batch, every checkpoint is taken with nothing in flight', async () => {
    const dir = freshDir();
    const seen: number[] = [];
    // save() throws if the loop asks for a checkpoint while a task is in flight (a loop that does not
    // drain first would fail here).
    const stats = await fit(new Network(config()), data, { ...base, workers: 2, checkpoint: { dir, every: 1, keep: 1, onSaved: (i) => void seen.push(i.batchesDone) } });
    expect(seen).toEqual(Array.from({ length: 36 }, (_, i) => i + 1));
    expect(stats.checkpointFailures).toEqual([]);
  });
});

/** A child process that takes the lock of `dir` and waits (or exits at once with `exitCode`). */
function lockHolder(dir: string, exitCode?: number): Promise<ChildProcess> {
  const script = `
    const { lockDirectory } = await import(${JSON.stringify(join(packageRoot(), 'dist/src/train/lock.js'))});
    await lockDirectory(${JSON.stringify(dir)});
    ${exitCode === undefined ? "console.log('locked'); setInterval(() => {}, 1000);" : `process.exit(${exitCode});`}`;
  const child = spawn(process.execPath, ['--input-type=module', '-e', script], { stdio: ['ignore', 'pipe', 'inherit'] });
  return new Promise((resolve, reject) => {
    if (exitCode !== undefined) child.on('exit', () => resolve(child));
    else child.stdout!.once('data', () => resolve(child));
    child.on('error', reject);
  });
}

describe('the checkpoint directory lock', () => {
  let holder: ChildProcess | undefined;
  afterAll(() => void holder?.kill('SIGKILL'));

  it('a second run on a directory in use fails at once, naming the directory and the owner pid; a stale lock is taken over', async () => {
    const dir = freshDir();
    mkdirSync(dir);
    holder = await lockHolder(dir);
    const pid = holder.pid!;
    const msg = `checkpoint directory ${dir} is in use by process ${pid} on this host`;
    await expect(fit(new Network(config()), data, { ...base, checkpoint: { dir, every: 4 } })).rejects.toThrow(msg);
    // Resuming is refused before anything is read or renamed there.
    await expect(resume(dir)).rejects.toThrow(msg);
    // The owner dies without releasing it (SIGKILL): the lock is stale and a new run takes over.
    holder.kill('SIGKILL');
    await new Promise((r) => holder!.once('exit', r));
    expect(existsSync(join(dir, LOCK_FILE))).toBe(true);
    const stats = await fit(new Network(config()), data, { ...base, epochs: 1, checkpoint: { dir, every: 4 } });
    expect(stats.batches).toBe(12);
    // Released at the end of the run.
    expect(existsSync(join(dir, LOCK_FILE))).toBe(false);
  });

  it('two runs in one process: the second is refused; the lock is released when a run fails', async () => {
    const dir = freshDir();
    let second: Promise<unknown> | undefined;
    // While the first run is at its first checkpoint, a second one starts on the same directory.
    const first = fit(new Network(config()), data, {
      ...base,
      checkpoint: { dir, every: 4, onSaved: () => void (second ??= fit(new Network(config()), data, { ...base, checkpoint: { dir, every: 4 } }).catch((e) => e)) },
    });
    await first;
    expect(((await second) as Error).message).toMatch(new RegExp(
      `^checkpoint directory ${dir} is in use by process ${process.pid} on this host \\(since [0-9T:.Z-]+; lock file ${join(dir, LOCK_FILE)}\\)\\. Wait for that run to finish or stop it\\.$`,
    ));
    const other = freshDir();
    await expect(fit(new Network(config()), data, { ...base, workers: 1, faultInjection: { batch: 1, failures: 2 }, checkpoint: { dir: other, every: 4 } })).rejects.toThrow(/training stopped/);
    expect(existsSync(join(other, LOCK_FILE))).toBe(false);
  });

  it('is released when the owning process exits (process.exit)', async () => {
    const dir = freshDir();
    mkdirSync(dir);
    const child = await lockHolder(dir, 3);
    expect(child.exitCode).toBe(3);
    expect(existsSync(join(dir, LOCK_FILE))).toBe(false);
  });

  it('a lock from another host is respected; an unreadable old one is taken over', async () => {
    const dir = freshDir();
    mkdirSync(dir);
    const lock = join(dir, LOCK_FILE);
    writeFileSync(lock, JSON.stringify({ pid: 1234, hostname: 'elsewhere.example', since: '2026-01-01T00:00:00.000Z', token: 'x' }));
    await expect(fit(new Network(config()), data, { ...base, checkpoint: { dir, every: 4 } })).rejects.toThrow(
      `checkpoint directory ${dir} is in use by process 1234 on host elsewhere.example (since 2026-01-01T00:00:00.000Z; lock file ${lock}). Wait for that run to finish; if it is gone, delete the lock file.`,
    );
    writeFileSync(lock, 'garbage');
    const old = new Date(Date.now() - 60_000);
    utimesSync(lock, old, old);
    const stats = await fit(new Network(config()), data, { ...base, epochs: 1, checkpoint: { dir, every: 4 } });
    expect(stats.batches).toBe(12);
  });
});

describe('damaged checkpoints', () => {
  it('hash tables damaged behind a valid checksum are rebuilt on resume, with a warning', async () => {
    const dir = freshDir();
    const ac = new AbortController();
    await fit(new Network(config()), data, { ...base, signal: ac.signal, checkpoint: { dir, every: 4, onSaved: (i) => { if (i.batchesDone === 8) ac.abort(); } } });
    const file = join(dir, checkpointName(8));
    const f = await readBinFile(file);
    (f.sections['layer1.tables.ids'] as Uint32Array).fill(0xffffffff);
    await writeBinFile(file, { kind: f.kind, meta: f.meta, sections: f.sections });
    const warnings: string[] = [];
    const net = await resume(dir, { onWarning: (m) => warnings.push(m) });
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toMatch(new RegExp(`^checkpoint ${file}: the hash tables of layer 1 are damaged \\(table 0: bucket \\d+ holds id 4294967295 >= ${data.labels}\\); they will be rebuilt from the checkpoint's weights, so the resumed run will not be bit-identical to an uninterrupted one$`));
    const stats = await fit(net, data, { workers: 0 });
    expect(stats.batches).toBe(28);
  });

  it(`at most ${KEEP_CORRUPT} .corrupt files are kept`, async () => {
    const dir = freshDir();
    mkdirSync(dir);
    for (let b = 1; b <= 6; b++) writeFileSync(join(dir, checkpointName(b)), 'not a checkpoint');
    await expect(resume(dir, { onWarning: () => {} })).rejects.toThrow(`${dir}: no usable checkpoint`);
    // The newest (highest batch count) ones.
    expect(readdirSync(dir).sort()).toEqual([4, 5, 6].map((b) => checkpointName(b) + '.corrupt'));
  });
});
