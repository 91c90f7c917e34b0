// Checks of the command line's files before any work: inputs exist and are files, outputs can be
// written. A mistake in a path should cost a second, not a training run: `--save /no/such/dir/m.sl`
// used to train for minutes and then fail, losing the model.
import { constants } from 'node:fs';
import { access, stat } from 'node:fs/promises';
import { dirname, resolve } from 'node:path';
import { fsErrorReason } from '../util/fs-errors.js';
import { checkOutputDirs } from '../util/output-check.js';
import { NotRegularFileError, outputTarget } from '../util/atomic-write.js';

/** An input file (`flag` names it in messages): it must exist, be a file (or a device/pipe) and be readable. */
export async function checkInputFile(path: string, flag: string): Promise<void> {
  let st;
  try {
    st = await stat(path);
  } catch (e) {
    throw new Error(`${flag} ${path}: ${fsErrorReason(e)}`);
  }
  if (st.isDirectory()) throw new Error(`${flag} ${path}: is a directory, expected a file`);
  try {
    await access(path, constants.R_OK);
  } catch (e) {
    throw new Error(`${flag} ${path}: ${fsErrorReason(e)}`);
  }
}

/**
 * An output file (`--save`, `--log`): a regular file or nothing (a directory, device, FIFO or socket is
 * refused: writing the output would replace or block on it; a symbolic link is followed to the regular
 * file it points to, see outputTarget), and the directory of the file written exists, takes a new file
 * (probed by creating and removing one: this also catches read-only file systems, even as root) and, when
 * `bytes` is given, has that much room.
 */
export async function checkOutputFile(path: string, flag: string, bytes = 0): Promise<void> {
  const st = await stat(path).catch(() => null);
  if (st?.isDirectory()) throw new Error(`${flag} ${path}: is a directory, expected a file name`);
  let target: string;
  try {
    target = await outputTarget(path);
  } catch (e) {
    if (e instanceof NotRegularFileError) throw new Error(`${flag} ${e.message}`);
    throw e;
  }
  await checkOutputDirs([{ dir: dirname(resolve(target)), bytes, what: `${flag} ${path}: directory`, detail: 'the file' }]);
}

/**
 * An output directory (`--checkpoint`): a directory, or creatable (its nearest existing ancestor is a
 * writable directory). Nothing is created here; the room checkpoints need is checked by the Checkpointer
 * once the network's size is known.
 */
export async function checkOutputDir(path: string, flag: string): Promise<void> {
  await checkOutputDirs([{ dir: path, bytes: 0, what: flag, creatable: true }]);
}
