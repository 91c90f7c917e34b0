// Pre-flight checks of output directories: a run must learn before it trains, not at its first
// checkpoint ten minutes later or when it saves its model after hours, that a directory is missing,
// read-only or too full for the files it will write.
import { open, stat, statfs, unlink } from 'node:fs/promises';
import { randomBytes } from 'node:crypto';
import { dirname, join, resolve } from 'node:path';
import { fsErrorReason } from './fs-errors.js';

/** One directory a run will write to, and how much. */
export interface PlannedOutput {
  /** The directory the files go to. */
  dir: string;
  /** Bytes that must be free there at the peak (e.g. keep + 1 checkpoints while a new one is written). */
  bytes: number;
  /** What it is, for messages, e.g. 'checkpoint directory' or 'directory of --save model.sl'. */
  what: string;
  /** How `bytes` was counted, for messages, e.g. '3 checkpoints of 12.1 MB'. Default none. */
  detail?: string;
  /**
   * The directory may be missing if it can be created (its nearest existing ancestor is a writable
   * directory); it is not created here. Default false: it must exist.
   */
  creatable?: boolean;
}

/**
 * An output directory that cannot take the planned files (missing, not writable, or without room): thrown
 * before any data is read.
 *
 * @example
 * ```ts
 * try { await train({ train: 'train.txt', save: '/read-only/model.sl' }); }
 * catch (e) { if (e instanceof OutputCheckError) console.error(e.message); else throw e; }
 * ```
 */
export class OutputCheckError extends Error {
  override name = 'OutputCheckError';
}

/**
 * Checks every planned output before a run: each directory exists (or, with `creatable`, its nearest
 * existing ancestor is a directory), is writable (a temporary file is created and removed), and its
 * filesystem has room for the planned bytes (fs.statfs; outputs on one filesystem are added up). Throws
 * an OutputCheckError naming the path and the problem; resolves with nothing when all is well.
 */
export async function checkOutputDirs(outputs: readonly PlannedOutput[]): Promise<void> {
  const byDevice = new Map<number, { probe: string; avail: number; items: PlannedOutput[] }>();
  for (const out of outputs) {
    const dir = resolve(out.dir);
    const existing = await nearestExisting(dir, out);
    await probeWritable(existing, out);
    const st = await stat(existing);
    let group = byDevice.get(st.dev);
    if (!group) {
      let avail = Infinity;
      try {
        const fs = await statfs(existing);
        avail = Number(fs.bavail) * Number(fs.bsize);
      } catch {
        // statfs unsupported here: the write probe above is all we can check
      }
      group = { probe: existing, avail, items: [] };
      byDevice.set(st.dev, group);
    }
    group.items.push(out);
  }
  for (const g of byDevice.values()) {
    const need = g.items.reduce((a, o) => a + Math.max(0, o.bytes), 0);
    if (need > g.avail) {
      const list = g.items.map((o) => `${o.what} ${o.dir}: ${formatSize(o.bytes)}${o.detail ? ` (${o.detail})` : ''}`).join('; ');
      throw new OutputCheckError(
        `not enough free space: ${formatSize(need)} needed, ${formatSize(g.avail)} available on the filesystem of ${g.probe} (${list})`,
      );
    }
  }
}

/** `dir` if it exists, else (creatable) its nearest existing ancestor; checks that it is a directory. */
async function nearestExisting(dir: string, out: PlannedOutput): Promise<string> {
  let p = dir;
  for (;;) {
    try {
      const st = await stat(p);
      if (!st.isDirectory()) {
        throw new OutputCheckError(p === dir ? `${out.what} ${out.dir} is not a directory` : `${out.what} ${out.dir} cannot be created: ${p} is not a directory`);
      }
      return p;
    } catch (e) {
      if (e instanceof OutputCheckError) throw e;
      const code = (e as NodeJS.ErrnoException).code;
      if (code !== 'ENOENT' && code !== 'ENOTDIR') throw new OutputCheckError(`${out.what} ${out.dir}: ${(e as Error).message}`);
      if (!out.creatable) throw new OutputCheckError(`${out.what} ${out.dir} does not exist`);
      const up = dirname(p);
      if (up === p) throw new OutputCheckError(`${out.what} ${out.dir} cannot be created: no existing ancestor`);
      p = up;
    }
  }
}

/** Creates and removes a temporary file in `dir`. */
async function probeWritable(dir: string, out: PlannedOutput): Promise<void> {
  const tmp = join(dir, `.sublinear-write-check-${process.pid}-${randomBytes(4).toString('hex')}`);
  try {
    const fh = await open(tmp, 'wx');
    await fh.close();
    await unlink(tmp);
  } catch (e) {
    const why = fsErrorReason(e);
    throw new OutputCheckError(
      dir === resolve(out.dir) ? `${out.what} ${out.dir} is not writable: ${why}` : `${out.what} ${out.dir} cannot be created: ${dir} is not writable: ${why}`,
    );
  }
}

function formatSize(bytes: number): string {
  if (!Number.isFinite(bytes)) return 'unknown';
  const units = ['B', 'kB', 'MB', 'GB', 'TB', 'PB'];
  let i = 0, v = bytes;
  while (i < units.length - 1 && v >= 1000) {
    v /= 1000;
    i++;
  }
  return i === 0 ? `${v} B` : `${v.toPrecision(3)} ${units[i]}`;
}
