// One call from raw-text files to labelled tf-idf datasets: read the training file (src/datasets/text-reader.ts),
// fit a vectorizer on it (or use a given one), give label names ids (after the given names), and featurize
// an optional test file with the same vectorizer and names.
import { readText, type ReadTextOptions, type TextData } from '../datasets/text-reader.js';
import type { SparseDataset } from '../datasets/csr.js';
import { LabelNames, labelledDataset } from './labels.js';
import { TextVectorizer, type TextVectorizerOptions } from './vectorizer.js';

/** Options of `readTextDatasets`. */
export interface ReadTextDatasetsOptions {
  /** Settings of the vectorizer fitted on the training file (ignored when `vectorizer` is given). Default: TextVectorizer's. */
  vectorizerOptions?: TextVectorizerOptions;
  /** Use this vectorizer instead of fitting one (a warm start from a text model). Default: fit one. */
  vectorizer?: TextVectorizer;
  /** Names that keep their ids (a warm start: the model's); new names get the following ids. Default none. */
  labelNames?: readonly string[];
  /** Options of readText for both files (maxLineBytes...). Default: readText's. */
  read?: Omit<ReadTextOptions, 'displayName' | 'onProgress'>;
  /** Called with (file, bytes read, file size) while reading. Default none. */
  onProgress?: (file: string, done: number, total: number) => void;
}

/** A training text file none of whose tokens is in at least `minDf` of its texts: nothing to learn from. */
export class EmptyVocabularyError extends Error {
  override name = 'EmptyVocabularyError';
  constructor(readonly file: string, readonly texts: number, readonly minDf: number) {
    super(`${file}: the vocabulary is empty: no token occurs in ${minDf} or more of its ${texts} texts (minDf ${minDf}); ` +
      'a lower minDf keeps rarer tokens, more texts give more of them');
  }
}

/** Result of `readTextDatasets`. */
export interface TextDatasets {
  train: SparseDataset;
  /** Present when a test file was given. */
  test?: SparseDataset;
  vectorizer: TextVectorizer;
  /** Every label name, index = id: the given ones, then the training file's new ones in order of appearance. */
  labelNames: string[];
  /** Names in `labelNames` that were not among the given ones. */
  newLabels: number;
  /** Label occurrences of the test file whose name is not in `labelNames` (dropped: no output can predict them). */
  unknownTestLabels: number;
  /** Seconds spent reading, fitting and transforming (featurisation), and bytes of text read. */
  seconds: number;
  bytes: number;
}

/**
 * Reads a raw-text training file (and optionally a test file) into labelled tf-idf datasets.
 *
 * @example
 * ```ts
 * const { train, test, vectorizer, labelNames } = await readTextDatasets('train.txt', 'test.txt', { vectorizerOptions: { bigrams: true } });
 * const net = new Network(defaultConfig(train));
 * await fit(net, train);
 * net.textVectorizer = vectorizer;
 * net.labelNames = labelNames;
 * ```
 */
export async function readTextDatasets(trainPath: string, testPath?: string, opts: ReadTextDatasetsOptions = {}): Promise<TextDatasets> {
  const t0 = performance.now();
  const sizes = new Map<string, number>();
  const read = async (path: string): Promise<TextData> =>
    readText(path, {
      ...opts.read,
      onProgress: (done, total) => {
        sizes.set(path, total);
        opts.onProgress?.(path, done, total);
      },
    });
  const trainText = await read(trainPath);
  const vectorizer = opts.vectorizer ?? TextVectorizer.fit(trainText.texts, opts.vectorizerOptions);
  // A small sample file whose words each occur once keeps no token at the default minDf 2: say so here, not
  // as a network with 0 input features.
  if (vectorizer.features === 0) throw new EmptyVocabularyError(trainPath, trainText.points, vectorizer.options.minDf);
  const names = new LabelNames(opts.labelNames ?? []);
  const given = names.size;
  const train = labelledDataset(trainText, vectorizer, names, true).dataset;
  let test: SparseDataset | undefined;
  let unknownTestLabels = 0;
  if (testPath !== undefined) {
    const r = labelledDataset(await read(testPath), vectorizer, names, false);
    test = r.dataset;
    unknownTestLabels = r.unknownLabels;
  }
  return {
    train, test, vectorizer, labelNames: names.names, newLabels: names.size - given, unknownTestLabels,
    seconds: (performance.now() - t0) / 1000, bytes: [...sizes.values()].reduce((a, b) => a + b, 0),
  };
}
