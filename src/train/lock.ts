// A lock file on a checkpoint directory: one run at a time writes there. Two runs resuming (or starting)
// in one directory would otherwise both train and interleave their checkpoints, and the next resume would
// mix their states.
//
// The lock is `sublinear.lock` in the directory, created with O_EXCL and holding JSON: the owner's pid,
// hostname, start time and a random token. It is released when the run ends (normally or with an error:
// Network.fit's finally; on process.exit, e.g. a second Ctrl-C: an exit handler). A process killed
// outright (SIGKILL, power loss) leaves it behind: a lock whose pid is dead on this host is stale and is
// taken over. A lock from another host cannot be checked and is respected (the message says how to clear
// it); so is one that cannot be parsed and is younger than 10 s (its writer may be filling it in).
import { open, readFile, rename, stat, unlink } from 'node:fs/promises';
import { readFileSync, unlinkSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import { join, resolve } from 'node:path';
import { isProcessAlive } from '../util/process-alive.js';

/** File name of the lock in a locked directory. */
export const LOCK_FILE = 'sublinear.lock';

/** What a lock file says about its owner. */
export interface LockOwner {
  pid: number;
  hostname: string;
  /** ISO time the lock was taken. */
  since: string;
  token: string;
}

/**
 * A checkpoint directory locked by another live run (the message names its pid and host).
 *
 * @example
 * ```ts
 * try { await train({ train: 'train.txt', checkpoint: 'ckpt' }); }
 * catch (e) { if (e instanceof DirectoryLockedError) console.error(e.message); else throw e; }
 * ```
 */
export class DirectoryLockedError extends Error {
  override name = 'DirectoryLockedError';
  constructor(readonly dir: string, readonly owner: LockOwner | null, message: string) {
    super(message);
  }
}

/** Locks held by this process (absolute lock path -> token), released by the exit handler too. */
const held = new Map<string, string>();
let exitHandler = false;

/** A held lock; `release()` removes the file (idempotent). */
export interface DirectoryLock {
  readonly file: string;
  release(): Promise<void>;
}

/**
 * Takes the lock of `dir` (which must exist), or throws DirectoryLockedError naming the directory and the
 * owner's pid and host. `what` names the directory in messages (default 'checkpoint directory').
 */
export async function lockDirectory(dir: string, what = 'checkpoint directory'): Promise<DirectoryLock> {
  const file = resolve(join(dir, LOCK_FILE));
  const token = randomBytes(8).toString('hex');
  const me: LockOwner = { pid: process.pid, hostname: hostname(), since: new Date().toISOString(), token };
  for (let tries = 0; ; tries++) {
    try {
      const fh = await open(file, 'wx');
      try {
        await fh.writeFile(JSON.stringify(me) + '\n');
      } catch (e) {
        // A lock file we could not fill (a full disk) would read as another run "starting" for 10 s.
        await fh.close().catch(() => {});
        await unlink(file).catch(() => {});
        throw e;
      }
      await fh.close();
      held.set(file, token);
      if (!exitHandler) {
        exitHandler = true;
        process.on('exit', releaseAllSync);
      }
      return { file, release: () => release(file, token) };
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'EEXIST' || tries >= 3) throw e;
    }
    const owner = await liveOwner(file, dir, what);
    if (owner) throw lockedError(dir, what, owner);
    // Stale: move it out of the way under a unique name (of two processes doing this at once, one
    // rename succeeds and the other gets ENOENT and simply tries again), then take the lock.
    const aside = `${file}.stale-${process.pid}-${token}`;
    try {
      await rename(file, aside);
      await unlink(aside).catch(() => {});
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'ENOENT') throw e;
    }
  }
}

/**
 * Throws DirectoryLockedError if a live run holds the lock of `dir` (a stale lock is ignored, a missing
 * directory is unlocked). For checks before long work, e.g. before loading a checkpoint to resume it.
 */
export async function assertUnlocked(dir: string, what = 'checkpoint directory'): Promise<void> {
  const owner = await liveOwner(resolve(join(dir, LOCK_FILE)), dir, what);
  if (owner) throw lockedError(dir, what, owner);
}

function lockedError(dir: string, what: string, owner: LockOwner | 'unreadable'): DirectoryLockedError {
  const file = join(dir, LOCK_FILE);
  if (owner === 'unreadable') {
    return new DirectoryLockedError(dir, null, `${what} ${dir} is locked by another run that is starting (lock file ${file}); try again, or delete the lock file if no run uses the directory`);
  }
  const here = owner.hostname === hostname();
  return new DirectoryLockedError(
    dir, owner,
    `${what} ${dir} is in use by process ${owner.pid} on ${here ? 'this host' : `host ${owner.hostname}`} (since ${owner.since}; lock file ${file}). ` +
      (here ? 'Wait for that run to finish or stop it.' : 'Wait for that run to finish; if it is gone, delete the lock file.'),
  );
}

/** The owner of the lock at `file` if it is live (or cannot be judged), null if none or stale. */
async function liveOwner(file: string, dir: string, what: string): Promise<LockOwner | 'unreadable' | null> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    if (code === 'ENOENT' || code === 'ENOTDIR') return null;
    throw new Error(`${what} ${dir}: cannot read its lock file ${file}: ${(e as Error).message}`);
  }
  const owner = parseOwner(text);
  if (!owner) {
    // Being written right now (open and write are two steps), or garbage left by a crash.
    const age = await stat(file).then((s) => Date.now() - s.mtimeMs, () => Infinity);
    return age < 10_000 ? 'unreadable' : null;
  }
  if (owner.hostname !== hostname()) return owner;
  if (owner.pid === process.pid) return held.get(file) === owner.token ? owner : null; // ours, or a dead predecessor's with our pid
  return isProcessAlive(owner.pid) ? owner : null;
}

function parseOwner(text: string): LockOwner | null {
  try {
    const o = JSON.parse(text) as Partial<LockOwner>;
    if (o && Number.isSafeInteger(o.pid) && typeof o.hostname === 'string' && typeof o.token === 'string') {
      return { pid: o.pid!, hostname: o.hostname, since: String(o.since ?? '?'), token: o.token };
    }
  } catch {
    // not JSON
  }
  return null;
}

async function release(file: string, token: string): Promise<void> {
  if (held.get(file) !== token) return;
  held.delete(file);
  try {
    // Remove it only if it is still ours (a stale-lock takeover by someone else must not be undone).
    if (parseOwner(await readFile(file, 'utf8'))?.token === token) await unlink(file);
  } catch {
    // gone already
  }
}

function releaseAllSync(): void {
  for (const [file, token] of held) {
    try {
      if (parseOwner(readFileSync(file, 'utf8'))?.token === token) unlinkSync(file);
    } catch {
      // gone already
    }
  }
  held.clear();
}
