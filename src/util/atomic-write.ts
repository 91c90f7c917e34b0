// Crash-safe file replacement: a model or checkpoint is either the complete old file or the complete
// new one, never a torn mix, even if the process dies or the disk fills up halfway through a 1 GB write.
//
// Protocol: write everything to a temporary file in the target's directory (same filesystem, so the
// rename is atomic), fsync it (the data is on disk before the name points to it), rename it over the
// target, then fsync the directory (the rename itself is on disk). Any failure before the rename
// removes the temporary file and leaves the target untouched. A process killed mid-write leaves its
// temporary file behind: the next write of the same target removes those whose writer (the pid in the
// name) is dead on this host.
//
// Only regular files are replaced: renaming over a device, a FIFO or a socket would destroy it (`--save
// /dev/null` would remove /dev/null for the whole machine). A symbolic link is followed to the regular
// file it names, which is replaced in its own directory; the link stays.
import type { Stats } from 'node:fs';
import { lstat, open, readdir, realpath, rename, unlink, type FileHandle } from 'node:fs/promises';
import { randomBytes } from 'node:crypto';
import { basename, dirname, join } from 'node:path';
import { isProcessAlive } from './process-alive.js';

/** Options of `writeFileAtomic`. */
export interface AtomicWriteOptions {
  /** Permission bits of a newly created file (before the umask). Default 0o666, like fs.writeFile. */
  mode?: number;
  /**
   * fsync the file before the rename and the directory after it. Default true. Turning it off keeps
   * atomicity against process crashes but not against power loss or an OS crash; only for tests and
   * scratch files.
   */
  fsync?: boolean;
}

/**
 * Writes `chunks` to `path` atomically and returns the number of bytes written.
 *
 * Chunks are written in order, each completely, before the next one is requested from the iterable, so
 * a producer may reuse one scratch buffer for every chunk it yields. Chunks may be views of
 * SharedArrayBuffers. If the iterable throws, a write fails or the rename fails, the temporary file
 * (`.<name>.tmp-<pid>-<random>` next to the target) is removed and the error is rethrown; the previous
 * target, if any, is left as it was. `path` must name a regular file or nothing (see outputTarget): a
 * symbolic link is followed to the regular file it points to, which is replaced (the link stays); a
 * directory, device, FIFO, socket or dangling link is refused with a NotRegularFileError before anything
 * is written.
 *
 * @example
 * ```ts
 * async function* rows() { for (const line of lines) yield new TextEncoder().encode(line + '\n'); }
 * await writeFileAtomic('out/labels.txt', rows());
 * ```
 */
export async function writeFileAtomic(
  path: string,
  chunks: Iterable<Uint8Array> | AsyncIterable<Uint8Array>,
  options: AtomicWriteOptions = {},
): Promise<number> {
  const doSync = options.fsync ?? true;
  const target = await outputTarget(path);
  const dir = dirname(target);
  await removeStaleTemps(dir, basename(target));
  const tmp = join(dir, `.${basename(target)}.tmp-${process.pid}-${randomBytes(6).toString('hex')}`);
  // 'wx': never follow or reuse an existing file under the temporary name.
  const fh = await open(tmp, 'wx', options.mode ?? 0o666);
  let handle: FileHandle | null = fh;
  let total = 0;
  try {
    for await (const chunk of chunks) {
      if (!(chunk instanceof Uint8Array)) {
        throw new TypeError(`writeFileAtomic(${path}): expected Uint8Array chunks but received ${describe(chunk)}`);
      }
      total += await writeFully(fh, chunk);
    }
    if (doSync) await fh.sync();
    handle = null;
    await fh.close();
    // Checked again right before the rename: something may have been put there while the file was written.
    await checkReplaceable(path, target);
    await rename(tmp, target);
  } catch (err) {
    if (handle) await handle.close().catch(() => {});
    await unlink(tmp).catch(() => {}); // ENOENT after a failed rename is fine; anything else we cannot fix
    throw err;
  }
  if (doSync) await syncDirectory(dir, path);
  return total;
}

/** An output path that names something other than a regular file (or nothing). */
export class NotRegularFileError extends Error {
  override name = 'NotRegularFileError';
}

/**
 * The type tests of an fs.Stats that describeFileType reads, typed here so that the package's published
 * typings need no @types/node (this module's declarations are part of them).
 */
export type FileTypeTests = Record<'isFile' | 'isDirectory' | 'isCharacterDevice' | 'isBlockDevice' | 'isFIFO' | 'isSocket' | 'isSymbolicLink', () => boolean>;

/** 'a directory', 'a character device', ... for messages. */
export function describeFileType(st: FileTypeTests): string {
  if (st.isFile()) return 'a regular file';
  if (st.isDirectory()) return 'a directory';
  if (st.isCharacterDevice()) return 'a character device';
  if (st.isBlockDevice()) return 'a block device';
  if (st.isFIFO()) return 'a FIFO (named pipe)';
  if (st.isSocket()) return 'a socket';
  if (st.isSymbolicLink()) return 'a symbolic link';
  return 'not a regular file';
}

/**
 * The file an output written to `path` replaces: `path` itself when nothing is there or it is a regular
 * file; for a symbolic link (or a chain of them), the regular file it resolves to. Throws a
 * NotRegularFileError naming `path` and what is there when it is a directory, a device, a FIFO, a socket,
 * or a link to one of them or to nothing. Other errors (a missing directory, permissions) are left to
 * the write, which reports them.
 */
export async function outputTarget(path: string): Promise<string> {
  let st: Stats;
  try {
    st = await lstat(path);
  } catch {
    return path;
  }
  if (st.isFile()) return path;
  if (!st.isSymbolicLink()) throw new NotRegularFileError(`${path} is ${describeFileType(st)}, not a regular file: refusing to replace it`);
  let real: string;
  try {
    real = await realpath(path);
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    throw new NotRegularFileError(`${path} is a symbolic link to ${code === 'ELOOP' ? 'itself (a loop)' : 'nothing (its target does not exist)'}: refusing to write through it`);
  }
  const rst = await lstat(real);
  if (!rst.isFile()) throw new NotRegularFileError(`${path} is a symbolic link to ${real}, which is ${describeFileType(rst)}, not a regular file: refusing to replace it`);
  return real;
}

/** Throws a NotRegularFileError if `target` is now something a rename must not replace. */
async function checkReplaceable(path: string, target: string): Promise<void> {
  const st = await lstat(target).catch(() => null);
  if (st && !st.isFile()) {
    throw new NotRegularFileError(`${path}${target === path ? '' : ` (${target})`} became ${describeFileType(st)} while it was written: refusing to replace it`);
  }
}

/**
 * Removes `.<name>.tmp-<pid>-<hex>` files of dead writers next to the target (killed saves of the same
 * file). Temporary files of live processes, this one included, are left alone; errors are ignored (the
 * write itself reports a directory it cannot use).
 */
async function removeStaleTemps(dir: string, name: string): Promise<void> {
  let names: string[];
  try {
    names = await readdir(dir);
  } catch {
    return;
  }
  const prefix = `.${name}.tmp-`;
  for (const n of names) {
    if (!n.startsWith(prefix)) continue;
    const m = /^(\d+)-[0-9a-f]+$/.exec(n.slice(prefix.length));
    if (!m) continue;
    const pid = Number(m[1]);
    if (pid === process.pid || isProcessAlive(pid)) continue;
    await unlink(join(dir, n)).catch(() => {});
  }
}

/** fs writes may be partial (e.g. close to ENOSPC on some filesystems); loop until the chunk is out. */
async function writeFully(fh: FileHandle, chunk: Uint8Array): Promise<number> {
  let off = 0;
  while (off < chunk.byteLength) {
    const { bytesWritten } = await fh.write(chunk, off, chunk.byteLength - off);
    if (bytesWritten <= 0) throw new Error('write returned 0 bytes');
    off += bytesWritten;
  }
  return off;
}

/**
 * Makes the rename durable. The file is already in place at this point, so an error here must not be
 * reported as "the old file is still there". Platforms that cannot fsync a directory (Windows: EPERM,
 * EISDIR; some network filesystems: EINVAL, ENOTSUP) are skipped silently; any other error is thrown with
 * a message that says the new file is in place.
 */
async function syncDirectory(dir: string, path: string): Promise<void> {
  let dh: FileHandle | undefined;
  try {
    dh = await open(dir, 'r');
    await dh.sync();
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'EPERM' || code === 'EISDIR' || code === 'EINVAL' || code === 'ENOTSUP' || code === 'EBADF') return;
    throw new Error(`${path} was written, but syncing its directory failed (it may not survive a power loss): ${(err as Error).message}`, { cause: err });
  } finally {
    await dh?.close().catch(() => {});
  }
}

function describe(v: unknown): string {
  if (v === null) return 'null';
  if (typeof v === 'object') return (v as object).constructor?.name ?? 'object';
  return typeof v;
}
