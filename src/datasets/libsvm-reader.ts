// Reader for multi-label LIBSVM files: `l1,l2 f:v f:v ...` per line, no header, feature ids usually
// 1-based. Shares the byte parser (and every rule about sorting, duplicates and errors) with the XC reader:
// see src/datasets/line-parser.ts.
import { stat } from 'node:fs/promises';
import type { SparseDataset } from './csr.js';
import { LineParser, ReadMemory, readerBuilder, rethrowReadError, streamLines, type StreamOptions } from './line-parser.js';

/** Options of `readLibsvm`. */
export interface ReadLibsvmOptions extends StreamOptions {
  /** Feature ids in the file start at 1 (the LIBSVM convention); they are stored 0-based. Default true. */
  oneBased?: boolean;
  /**
   * Label ids in the file start at 1; they are stored 0-based. Default false (labels are 0-based ids).
   * Without it, the binary labels of LIBSVM classification files are accepted: a line labelled `+1` has
   * label 1 and a line labelled `-1` has label 0 (so `+1`/`-1` and `1`/`0` files read the same, as two
   * labels); with it, a sign is an error (label 0 does not exist in a 1-based file).
   */
  labelsOneBased?: boolean;
  /** Feature dimension D; a larger id is an error. Default: inferred as the largest id + 1. */
  features?: number;
  /** Label count L; a larger label is an error. Default: inferred as the largest label + 1. */
  labels?: number;
  /** Name used for the file in error messages. Default: the path as given. */
  displayName?: string;
}

/**
 * Reads a multi-label LIBSVM file into a CSR dataset on SharedArrayBuffers (0-based ids).
 *
 * @example
 * ```ts
 * const data = await readLibsvm('train.svm', { oneBased: true });
 * console.log(data.points, data.features, data.labels);
 * ```
 */
export async function readLibsvm(path: string, opts: ReadLibsvmOptions = {}): Promise<SparseDataset> {
  for (const k of ['features', 'labels'] as const) {
    const v = opts[k];
    if (v !== undefined && !(Number.isInteger(v) && v >= 0 && v <= 0xffffffff)) {
      throw new Error(`Expected non-negative integer for ${k} but received ${v}`);
    }
  }
  // Initial capacities from the file size: a nonzero takes at least 4 bytes (`1:1 `), a label 2 (`1,`).
  const total = (await stat(path)).size;
  const memory = new ReadMemory(opts);
  const parser = new LineParser(
    {
      file: opts.displayName ?? path,
      features: opts.features,
      labels: opts.labels,
      featureBase: (opts.oneBased ?? true) ? 1 : 0,
      labelBase: opts.labelsOneBased ? 1 : 0,
      lineOffset: 0,
      signedBinaryLabels: !opts.labelsOneBased,
    },
    readerBuilder(Math.min(total + 1, 1 << 16), Math.min(total / 4 + 1, 1 << 20), Math.min(total / 2 + 1, 1 << 18), opts, memory),
  );
  let sampled = false;
  await streamLines(
    path,
    (buf, start, end, consumed, size, eof) => {
      parser.parse(buf, start, end);
      if (!sampled && !eof) {
        sampled = true;
        parser.reserveFromSample(consumed, size);
      }
    },
    opts,
    memory,
  ).catch((e: unknown) => rethrowReadError(e, opts.displayName ?? path, parser.line + 1));
  return parser.builder.toDataset(opts.features ?? parser.maxFeature + 1, opts.labels ?? parser.maxLabel + 1);
}
