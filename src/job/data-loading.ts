// Reading a job's data files: XC and LIBSVM files, raw text (a training file's own vectorizer, or a text
// model's), with progress displays and the memory limit.
import { stat } from 'node:fs/promises';
import { DataFormatError, readXC, readLibsvm, type SparseDataset } from '../datasets/index.js';
import type { Network } from '../network/network.js';
import { memoryLimit } from '../network/memory-plan.js';
import { UsageError } from '../util/usage-error.js';
import { EmptyVocabularyError, readTextDatasets, type TextDatasets } from '../text/load.js';
import { LabelNames, labelledDataset } from '../text/labels.js';
import { readText } from '../datasets/text-reader.js';
import type { Reporter } from './events.js';
import type { InputFormat, TrainJob } from './train-options.js';

/** The memory limit in bytes: --max-memory when given, else the default of checkMemory (90% of RAM). */
export function memoryLimitBytes(maxMemory: number | undefined): number {
  return memoryLimit(maxMemory !== undefined ? { maxBytes: maxMemory } : {}).limit;
}

/**
 * Reads a data file with a progress display (a bar on a terminal, plain lines every few seconds
 * elsewhere, nothing when quiet), refusing it if reading would pass `maxMemoryBytes` (its data and read
 * buffers together); `stats.bufferBytes` is raised to the most bytes the read buffers held.
 */
export async function loadData(path: string, format: 'xc' | 'libsvm' | undefined, label: string, r: Reporter, maxMemoryBytes?: number, zeroBased = false, stats?: { bufferBytes: number }): Promise<SparseDataset> {
  const bar = r.progress(`reading ${label}`, 'MB');
  // Opening a FIFO blocks until something writes to it: say so rather than hang silently.
  if (bar && (await stat(path).catch(() => null))?.isFIFO()) r.say(`reading ${label} from the pipe ${path} (waiting for its writer)`);
  const onProgress = bar ? (done: number, total: number) => bar.update(done / 1e6, total / 1e6) : undefined;
  try {
    return format === 'libsvm' ? await readLibsvm(path, { onProgress, maxMemoryBytes, oneBased: !zeroBased, stats }) : await readXC(path, { onProgress, maxMemoryBytes, stats });
  } catch (e) {
    // The reader's advice on a 0-based file, in the command line's words.
    if (e instanceof DataFormatError && e.problem.startsWith('feature id 0 ') && e.problem.endsWith('(read it as 0-based if its ids start at 0)')) {
      throw new DataFormatError(e.file, e.line, e.problem.replace('(read it as 0-based if its ids start at 0)', '(give --zero-based if its ids start at 0)'));
    }
    throw e;
  } finally {
    bar?.done();
  }
}

/** --format / --input-format (the same flag under two names): default xc. */
export function inputFormatOf(o: { format?: InputFormat; inputFormat?: InputFormat }): InputFormat {
  if (o.format && o.inputFormat && o.format !== o.inputFormat) throw new UsageError(`--format ${o.format} and --input-format ${o.inputFormat} disagree (they are the same option)`);
  return o.inputFormat ?? o.format ?? 'xc';
}

/**
 * Raw-text training (and test) files as tf-idf datasets: a vectorizer fitted on the training file with the
 * --min-df, --bigrams, --max-vocabulary and --hash-bits settings, or the warm start model's vectorizer and
 * label names.
 */
export async function loadTextData(trainPath: string, testPath: string | undefined, o: TrainJob, init: Network | undefined, r: Reporter, limit: number, stats?: { bufferBytes: number }): Promise<TextDatasets> {
  const bar = r.progress('reading text', 'MB');
  let t: TextDatasets;
  try {
    t = await readTextDatasets(trainPath, testPath, {
      vectorizer: init?.textVectorizer,
      labelNames: init?.labelNames,
      read: { maxMemoryBytes: limit, stats },
      vectorizerOptions: { minDf: o.minDf, bigrams: o.bigrams || undefined, maxVocabulary: o.maxVocabulary, hashBits: o.hashBits },
      onProgress: bar ? (_f, done, total) => bar.update(done / 1e6, total / 1e6) : undefined,
    });
  } catch (e) {
    throw inFlagWords(e);
  } finally {
    bar?.done();
  }
  if (!r.quiet) {
    const v = t.vectorizer;
    r.say(`text: ${t.train.points} training points, ${v.features} features (${v.mode === 'vocabulary' ? 'vocabulary' : `hashed into 2^${v.options.hashBits}`}), ` +
      `${t.labelNames.length} labels; featurised ${(t.bytes / 1e6).toFixed(1)} MB in ${t.seconds.toFixed(1)} s`);
    if (t.unknownTestLabels) r.warn(`${testPath}: ${t.unknownTestLabels} label occurrence(s) name labels not in the training data (dropped: no output can predict them)`);
  }
  return t;
}

/** An error of readTextDatasets in the job's (the command line's) words: an empty vocabulary names --min-df; others as they are. */
export function inFlagWords(e: unknown): unknown {
  if (!(e instanceof EmptyVocabularyError)) return e;
  return new Error(`${e.file}: the vocabulary is empty: no word occurs in ${e.minDf} or more of its ${e.texts} points (--min-df ${e.minDf}; the default is 2); ` +
    'give a lower --min-df (1 keeps every word) or more text', { cause: e });
}

/** Bytes of a dataset's arrays. */
export function dataBytes(d: SparseDataset): number {
  return d.offsets.byteLength + d.indices.byteLength + d.values.byteLength + d.labelOffsets.byteLength + d.labelIndices.byteLength;
}

/**
 * A raw-text file as the input of a text model: its vectorizer's rows, and (`withLabels`, for eval) the label
 * names mapped to the model's ids (names the model does not know are dropped, with a warning).
 */
export async function loadTextInput(net: Network, path: string, name: string, withLabels: boolean, r: Reporter, maxMemory: number | undefined): Promise<SparseDataset> {
  return (await loadTextPoints(net, path, name, withLabels, r, maxMemory)).data;
}

/** loadTextInput, with the texts themselves (predict --explain names a hashed feature by the text's tokens). */
export async function loadTextPoints(
  net: Network, path: string, name: string, withLabels: boolean, r: Reporter, maxMemory: number | undefined,
): Promise<{ data: SparseDataset; texts: readonly string[] }> {
  if (!net.textVectorizer) throw new Error(`the model was trained on numeric features: it cannot read raw text (give --${withLabels ? 'format' : 'input-format'} xc or libsvm)`);
  // The model is in memory already: the text gets what the limit leaves.
  const data = await readText(path, { displayName: name, maxMemoryBytes: Math.max(0, memoryLimitBytes(maxMemory) - net.memoryBytes()) });
  if (!withLabels) return { data: net.textVectorizer.transform(data.texts), texts: data.texts };
  if (!net.labelNames) throw new Error('the model has no label names: it cannot evaluate text whose labels are names');
  const l = labelledDataset(data, net.textVectorizer, new LabelNames(net.labelNames), false);
  if (l.unknownLabels && !r.quiet) r.warn(`${name}: ${l.unknownLabels} label occurrence(s) name labels the model does not know (dropped: no output can predict them)`);
  return { data: { ...l.dataset, labels: Math.min(l.dataset.labels, net.config.layers.at(-1)!.size) }, texts: data.texts };
}
