// Where a training job keeps the model when its `save` file cannot be written at the end of a run (the
// disk filled up, the path was replaced by a directory or a device since the pre-flight check): a trained
// model is never thrown away because of its file name. The places, tried in order:
//   1. next to the requested file: <dir>/<name>.rescued-<stamp><ext> (a replaced path, a file too large);
//   2. the checkpoint directory, when there is one (often another disk): <dir>/model.rescued-<stamp>.sl;
//   3. the system's temporary directory: <tmp>/sublinear-model.rescued-<stamp>.sl.
// The stamp (time and process id) keeps a rescue from replacing an earlier one. The job then says where the
// model is, and `sublinear train` exits non-zero: the file the command line named was not written.
import { tmpdir } from 'node:os';
import { basename, dirname, extname, join } from 'node:path';

/** The fallback files for `save`, in the order they are tried. */
export function rescuePaths(save: string, checkpointDir: string | undefined, stamp = `${Date.now().toString(36)}-${process.pid}`): string[] {
  const ext = extname(save);
  const stem = basename(save, ext);
  return [
    join(dirname(save), `${stem}.rescued-${stamp}${ext}`),
    ...(checkpointDir !== undefined ? [join(checkpointDir, `model.rescued-${stamp}.sl`)] : []),
    join(tmpdir(), `sublinear-model.rescued-${stamp}.sl`),
  ];
}

/** Where `saveKept` wrote the model: `path`, or the first fallback that could be written. */
export interface KeptModel {
  file: string;
  /** The files tried before it, each with its error (empty when `path` was written). */
  failed: { file: string; error: Error }[];
}

/**
 * Writes the model with `write` to `path`, or when that fails to each of `fallbacks` in turn (rescuePaths);
 * throws only when none could be written, naming every file tried and its error.
 */
export async function saveKept(write: (file: string) => Promise<void>, path: string, fallbacks: readonly string[]): Promise<KeptModel> {
  const failed: KeptModel['failed'] = [];
  for (const file of [path, ...fallbacks]) {
    try {
      await write(file);
      return { file, failed };
    } catch (e) {
      failed.push({ file, error: e instanceof Error ? e : new Error(String(e)) });
    }
  }
  throw new Error(`cannot save the model anywhere (${failed.map((f) => `${f.file}: ${f.error.message}`).join('; ')})`, { cause: failed[0]!.error });
}

/** The message of a model kept elsewhere than `save` (KeptModel with failures). */
export function keptElsewhereText(save: string, kept: KeptModel): string {
  const [first, ...others] = kept.failed;
  return `cannot save the model to ${save}: ${first!.error.message}. ` +
    `${others.length ? `Nor to ${others.map((f) => `${f.file} (${f.error.message})`).join(', ')}. ` : ''}` +
    `The model is saved to ${kept.file} instead: move it where it belongs`;
}
