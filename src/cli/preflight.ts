// Checks of the command line's files before any work: inputs exist and are files, outputs can be
// written. A mistake in a path should cost a second, not a training run: `--save /no/such/dir/m.sl`
// used to train for minutes and then fail, losing the model.
import { randomBytes } from 'node:crypto';
import { constants } from 'node:fs';
import { access, rm, stat, statfs, writeFile } from 'node:fs/promises';
import { dirname, join, resolve } from 'node:path';
import { formatBytes } from '../train/memory-plan.js';

/** An input file (`flag` names it in messages): it must exist, be a file (or a device/pipe) and be readable. */
export async function checkInputFile(path: string, flag: string): Promise<void> {
  let st;
  try {
    st = await stat(path);
  } catch (e) {
    throw new Error(`${flag} ${path}: ${reason(e)}`);
  }
  if (st.isDirectory()) throw new Error(`${flag} ${path}: is a directory, expected a file`);
  try {
    await access(path, constants.R_OK);
  } catch (e) {
    throw new Error(`${flag} ${path}: ${reason(e)}`);
  }
}

/**
 * An output file (`--save`, `--log`): not a directory, and its directory exists and takes a new file
 * (probed by creating and removing one: this also catches read-only file systems, even as root).
 */
export async function checkOutputFile(path: string, flag: string): Promise<void> {
  const st = await stat(path).catch(() => null);
  if (st?.isDirectory()) throw new Error(`${flag} ${path}: is a directory, expected a file name`);
  const dir = dirname(resolve(path));
  const dst = await stat(dir).catch((e: unknown) => {
    throw new Error(`${flag} ${path}: the directory ${dir} ${reason(e) === 'no such file or directory' ? 'does not exist' : `cannot be used: ${reason(e)}`}`);
  });
  if (!dst.isDirectory()) throw new Error(`${flag} ${path}: ${dir} is not a directory`);
  await probeWritable(dir, `${flag} ${path}`);
}

/**
 * An output directory (`--checkpoint`): a directory, or creatable (its nearest existing ancestor is a
 * writable directory). Nothing is created here.
 */
export async function checkOutputDir(path: string, flag: string): Promise<void> {
  let dir = resolve(path);
  for (;;) {
    const st = await stat(dir).catch(() => null);
    if (st) {
      if (!st.isDirectory()) {
        throw new Error(dir === resolve(path) ? `${flag} ${path}: is a file, expected a directory` : `${flag} ${path}: ${dir} is a file, not a directory`);
      }
      await probeWritable(dir, `${flag} ${path}`);
      return;
    }
    const parent = dirname(dir);
    if (parent === dir) return;
    dir = parent;
  }
}

/**
 * Free space on the file system of `path` (a file or directory, existing or about to be created) must
 * hold `bytes`: refuses before training rather than at the first write. `what` says what needs the room.
 */
export async function checkFreeSpace(path: string, bytes: number, what: string): Promise<void> {
  let dir = resolve(path);
  while (!(await stat(dir).catch(() => null))?.isDirectory()) {
    const parent = dirname(dir);
    if (parent === dir) return;
    dir = parent;
  }
  const fs = await statfs(dir).catch(() => null);
  if (!fs) return; // not every file system reports its space: the write itself will say
  const free = Number(fs.bavail) * Number(fs.bsize);
  if (free < bytes) {
    throw new Error(`${path}: ${what} need about ${formatBytes(bytes)} but ${dir} has ${formatBytes(free)} free`);
  }
}

async function probeWritable(dir: string, what: string): Promise<void> {
  const probe = join(dir, `.sublinear-probe-${process.pid}-${randomBytes(4).toString('hex')}`);
  try {
    await writeFile(probe, '');
  } catch (e) {
    throw new Error(`${what}: cannot write in ${dir}: ${reason(e)}`);
  }
  await rm(probe, { force: true });
}

/** The readable part of a file-system error. */
export function reason(e: unknown): string {
  const code = (e as NodeJS.ErrnoException)?.code;
  const why: Record<string, string> = {
    ENOENT: 'no such file or directory',
    EACCES: 'permission denied',
    EPERM: 'operation not permitted',
    EISDIR: 'is a directory',
    ENOTDIR: 'a part of the path is not a directory',
    ENOSPC: 'no space left on device',
    EROFS: 'read-only file system',
    ENAMETOOLONG: 'name too long',
  };
  return (code && why[code]) ?? (e instanceof Error ? e.message : String(e));
}
