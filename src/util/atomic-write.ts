// Crash-safe file replacement: a model or checkpoint is either the complete old file or the complete
// new one, never a torn mix, even if the process dies or the disk fills up halfway through a 1 GB write.
//
// Protocol: write everything to a temporary file in the target's directory (same filesystem, so the
// rename is atomic), fsync it (the data is on disk before the name points to it), rename it over the
// target, then fsync the directory (the rename itself is on disk). Any failure before the rename
// removes the temporary file and leaves the target untouched. A process killed mid-write leaves its
// temporary file behind: the next write of the same target removes those whose writer (the pid in the
// name) is dead on this host.
import { open, readdir, rename, unlink, type FileHandle } from 'node:fs/promises';
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
 * target, if any, is left as it was. If `path` is a symlink, the link itself is replaced by the new file.
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
  const dir = dirname(path);
  await removeStaleTemps(dir, basename(path));
  const tmp = join(dir, `.${basename(path)}.tmp-${process.pid}-${randomBytes(6).toString('hex')}`);
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
    await rename(tmp, path);
  } catch (err) {
    if (handle) await handle.close().catch(() => {});
    await unlink(tmp).catch(() => {}); // ENOENT after a failed rename is fine; anything else we cannot fix
    throw err;
  }
  if (doSync) await syncDirectory(dir, path);
  return total;
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
