// `sublinear data inspect | split | synth | featurize`: look at, split, generate and featurize datasets.
import { mkdir, stat } from 'node:fs/promises';
import { basename, join } from 'node:path';
import {
  describe, generateSynthetic, generateTaxonomy, readLibsvm, readSplit, readXC, SHAPE_NAMES, subset, TAXONOMY_SHAPE_NAMES,
  writeXC, type DatasetStats, type SparseDataset, type ShapeName, type TaxonomyShapeName,
} from '../datasets/index.js';
import { Progress, formatAmount } from '../util/progress.js';
import { writeFileAtomic } from '../util/atomic-write.js';
import { readTextDatasets } from '../text/load.js';
import { inFlagWords } from '../job/data-loading.js';
import { defineCommand, defineGroup, UsageError, type CliIO } from './args.js';

const FORMATS = ['xc', 'libsvm'] as const;
type Format = (typeof FORMATS)[number];

/**
 * Reads a dataset with a progress bar on a terminal's stderr (not when `quiet`). Opening a FIFO blocks until
 * something writes to it: unless `silent`, that is said on stderr first rather than hanging without a word.
 */
async function load(path: string, format: Format, zeroBased: boolean, quiet: boolean, io: CliIO, silent: boolean): Promise<SparseDataset> {
  if (!silent && (await stat(path).catch(() => null))?.isFIFO()) io.err(`reading ${path} from a pipe (waiting for its writer)\n`);
  const bar = quiet ? null : new Progress({ label: `reading ${basename(path)}`, unit: 'MB' });
  const onProgress = bar ? (done: number, total: number) => bar.update(done / 1e6, total / 1e6) : undefined;
  try {
    return format === 'libsvm'
      ? await readLibsvm(path, { onProgress, oneBased: !zeroBased })
      : await readXC(path, { onProgress });
  } finally {
    bar?.done();
  }
}

const formatFlag = {
  type: 'choice',
  choices: FORMATS,
  default: 'xc',
  description: 'input format: xc (Extreme Classification Repository, with header) or libsvm (multi-label, no header)',
} as const;
const zeroBasedFlag = {
  type: 'boolean',
  description: 'libsvm only: feature ids in the file start at 0 (LIBSVM files are 1-based by default)',
} as const;
const jsonFlag = { type: 'boolean', description: 'print the result as one JSON object (the last stdout line); no progress on stderr' } as const;
const quietFlag = { type: 'boolean', short: 'q', description: 'no progress on stderr (errors are still printed)' } as const;

const inspect = defineCommand({
  name: 'inspect',
  summary: 'Print a summary of a dataset: sizes, nonzeros, labels per point, label frequencies.',
  positionals: [{ name: 'file', description: 'dataset file' }],
  flags: { format: formatFlag, zeroBased: zeroBasedFlag, json: jsonFlag, quiet: quietFlag },
  examples: ['data inspect train.txt', 'data inspect train.txt --json', 'data inspect rcv1.svm --format libsvm'],
  async run(o, io) {
    const bytes = (await stat(o.file)).size;
    const t0 = performance.now();
    const d = await load(o.file, o.format, o.zeroBased, o.json || o.quiet, io, !!o.quiet);
    const seconds = (performance.now() - t0) / 1000;
    const s = describe(d);
    if (o.json) {
      io.out(JSON.stringify({ file: o.file, format: o.format, bytes, readSeconds: seconds, ...s }) + '\n');
    } else {
      io.out(inspectText(o.file, o.format, bytes, seconds, s));
    }
    return 0;
  },
});

function inspectText(file: string, format: string, bytes: number, seconds: number, s: DatasetStats): string {
  const n = (x: number) => formatAmount(x);
  const pct = (x: number) => `${(100 * x).toFixed(1)}%`;
  const f = s.labelFrequency;
  const rows: [string, string][] = [
    ['file', `${file} (${format}, ${(bytes / 1e6).toFixed(2)} MB, read in ${seconds.toFixed(2)} s)`],
    ['points', n(s.points)],
    ['features', `${n(s.features)} (${n(s.featuresNeverSeen)} never used)`],
    ['labels', `${n(s.labels)} (${n(s.labelsNeverSeen)} never used)`],
    ['nonzeros', `${n(s.nnz)} (${s.points && s.features ? pct(s.nnz / (s.points * s.features)) : '0%'} dense)`],
    ['features/point', `${s.avgFeatures.toFixed(2)} average, ${n(s.maxFeaturesPerPoint)} max, ${n(s.pointsWithoutFeatures)} points with none`],
    ['labels/point', `${s.avgLabels.toFixed(2)} average, ${n(s.maxLabelsPerPoint)} max, ${n(s.pointsWithoutLabels)} points with none`],
    ['points/label', `min ${n(f.min)}, median ${n(f.median)}, p90 ${n(f.p90)}, max ${n(f.max)} (over the ${n(s.labelsSeen)} labels used)`],
    ['top-10 labels', `${pct(s.top10LabelShare)} of ${n(s.labelOccurrences)} label occurrences`],
  ];
  return rows.map(([k, v]) => `${k.padEnd(15)} ${v}`).join('\n') + '\n';
}

const split = defineCommand({
  name: 'split',
  summary: "Split a dataset into train.txt and test.txt with the repository's split files.",
  description:
    'Split files (e.g. bibtex_trSplit.txt, bibtex_tstSplit.txt) hold one column per split; each entry is a\n' +
    '1-based row of the data file (header not counted). Both outputs are in XC format.',
  positionals: [{ name: 'data', description: 'the full dataset' }],
  flags: {
    trainSplit: { type: 'string', required: true, valueName: 'file', description: 'split file listing the training rows' },
    testSplit: { type: 'string', required: true, valueName: 'file', description: 'split file listing the test rows' },
    column: { type: 'integer', min: 1, default: 1, valueName: 'k', description: 'which split (column, 1-based)' },
    out: { type: 'string', required: true, valueName: 'dir', description: 'output folder (created if missing)' },
    format: formatFlag,
    zeroBased: zeroBasedFlag,
    json: jsonFlag,
    quiet: quietFlag,
  },
  examples: ['data split Bibtex_data.txt --train-split bibtex_trSplit.txt --test-split bibtex_tstSplit.txt --column 1 --out bibtex1'],
  async run(o, io) {
    const d = await load(o.data, o.format, o.zeroBased, o.json || o.quiet, io, !!o.quiet);
    const trainRows = readSplit(o.trainSplit, o.column, d.points);
    const testRows = readSplit(o.testSplit, o.column, d.points);
    const overlap = countOverlap(trainRows, testRows, d.points);
    if (overlap > 0) io.err(`warning: ${overlap} rows are in both the train and the test split\n`);
    await mkdir(o.out, { recursive: true });
    const train = join(o.out, 'train.txt'), test = join(o.out, 'test.txt');
    await writeXC(train, subset(d, trainRows));
    await writeXC(test, subset(d, testRows));
    if (o.json) {
      io.out(JSON.stringify({ train, test, trainPoints: trainRows.length, testPoints: testRows.length, overlap }) + '\n');
    } else {
      io.out(`wrote ${train} (${formatAmount(trainRows.length)} points) and ${test} (${formatAmount(testRows.length)} points)\n`);
    }
    return 0;
  },
});

function countOverlap(a: Uint32Array, b: Uint32Array, n: number): number {
  const inA = new Uint8Array(n);
  for (const r of a) inA[r] = 1;
  let k = 0;
  for (const r of b) k += inA[r]!;
  return k;
}

const DATA_MODELS = ['prototype', 'taxonomy'] as const;
const ALL_SHAPES = [...new Set<string>([...SHAPE_NAMES, ...TAXONOMY_SHAPE_NAMES])];

const synth = defineCommand({
  name: 'synth',
  summary: 'Generate a seeded synthetic dataset (train.txt, test.txt) at the shape of a real benchmark.',
  description:
    'Two data models (docs/data.md describes both); the same seed always writes the same bytes.\n' +
    '  prototype (default): independent Zipf-popular labels, each with its own feature prototype. Shapes:\n' +
    '    tiny (2,000 features / 100 labels), small (20,000 / 2,000), amazon-670k (135,909 / 670,091),\n' +
    '    delicious-200k (782,585 / 205,443), wiki-325k (1,617,899 / 325,056).\n' +
    '  taxonomy: labels in a topic > group > label tree with correlated co-occurrence, documents mixing\n' +
    '    background, topic, group and label words, measured tf-idf. Shapes: tiny (2,000 / 200),\n' +
    '    small (20,000 / 5,000), 200k (100,000 / 200,000).',
  flags: {
    model: { type: 'choice', choices: DATA_MODELS, default: 'prototype', description: 'data model' },
    shape: { type: 'choice', choices: ALL_SHAPES, required: true, description: 'dataset shape (of the chosen model)' },
    train: { type: 'integer', min: 0, max: 0xffffffff, required: true, valueName: 'n', description: 'training points' },
    test: { type: 'integer', min: 0, max: 0xffffffff, default: 0, valueName: 'n', description: 'test points' },
    seed: { type: 'integer', min: 0, default: 1, valueName: 's', description: 'random seed' },
    out: { type: 'string', required: true, valueName: 'dir', description: 'output folder (created if missing)' },
    json: jsonFlag,
    quiet: quietFlag,
  },
  examples: [
    'data synth --shape amazon-670k --train 100000 --test 10000 --seed 1 --out amazon-synth',
    'data synth --model taxonomy --shape 200k --train 100000 --test 5000 --seed 1 --out taxonomy-200k',
  ],
  async run(o, io) {
    const known: readonly string[] = o.model === 'taxonomy' ? TAXONOMY_SHAPE_NAMES : SHAPE_NAMES;
    if (!known.includes(o.shape)) {
      throw new UsageError(`option --shape must be one of ${known.join(', ')} for --model ${o.model} but received '${o.shape}'`);
    }
    const bar = o.json || o.quiet ? null : new Progress({ label: `generating ${o.shape}`, unit: 'points' });
    const t0 = performance.now();
    let r;
    try {
      const common = {
        train: o.train, test: o.test, seed: o.seed, outDir: o.out,
        onProgress: bar ? (done: number, total: number) => bar.update(done, total) : undefined,
      };
      r = o.model === 'taxonomy'
        ? await generateTaxonomy({ ...common, shape: o.shape as TaxonomyShapeName })
        : await generateSynthetic({ ...common, shape: o.shape as ShapeName });
    } finally {
      bar?.done();
    }
    const seconds = (performance.now() - t0) / 1000;
    if (o.json) {
      io.out(JSON.stringify({
        train: r.train, test: r.test, model: o.model, shape: o.shape, trainPoints: o.train, testPoints: o.test, seed: o.seed,
        bytes: r.bytes, seconds,
      }) + '\n');
    } else {
      io.out(`wrote ${r.train} (${formatAmount(o.train)} points) and ${r.test} (${formatAmount(o.test)} points): ` +
        `${(r.bytes / 1e6).toFixed(1)} MB in ${seconds.toFixed(1)} s\n`);
    }
    return 0;
  },
});

const featurize = defineCommand({
  name: 'featurize',
  summary: 'Turn raw-text files into XC numeric files: tf-idf features, label ids, and the names of both.',
  description:
    'Input: one point per line, label names separated by commas, a TAB, then the text (or fastText\'s\n' +
    '__label__name prefixes). The vocabulary and idf come from --train (words in at least --min-df points;\n' +
    'above --max-vocabulary words they are hashed into 2^--hash-bits features), exactly as train --input-format\n' +
    'text does. Writes train.txt (and test.txt) in XC format, labels.txt (id<TAB>name per line) and, for a\n' +
    'vocabulary, vocabulary.txt (id<TAB>word per line).',
  flags: {
    train: { type: 'string', required: true, valueName: 'file', description: 'raw-text training data (the vocabulary and label ids come from it)' },
    test: { type: 'string', valueName: 'file', description: 'raw-text test data, featurized with the same vocabulary and labels' },
    out: { type: 'string', required: true, valueName: 'dir', description: 'output folder (created if missing)' },
    minDf: { type: 'integer', min: 1, default: 2, valueName: 'n', description: 'keep words found in at least n training points' },
    bigrams: { type: 'boolean', description: 'also use pairs of neighbouring words as features' },
    maxVocabulary: { type: 'integer', min: 1, max: 0xffffffff, default: 200000, valueName: 'n', description: 'above n kept words, hash them into 2^hash-bits features' },
    hashBits: { type: 'integer', min: 1, max: 26, default: 18, valueName: 'b', description: 'hashed feature space of 2^b features' },
    json: jsonFlag,
    quiet: quietFlag,
  },
  examples: ['data featurize --train raw-train.txt --test raw-test.txt --out numeric', 'data featurize --train docs.txt --bigrams --min-df 3 --out docs-xc'],
  async run(o, io) {
    const bar = o.json || o.quiet ? null : new Progress({ label: 'reading text', unit: 'MB' });
    let r;
    try {
      r = await readTextDatasets(o.train, o.test, {
        vectorizerOptions: { minDf: o.minDf, bigrams: o.bigrams, maxVocabulary: o.maxVocabulary, hashBits: o.hashBits },
        onProgress: bar ? (_f, done, total) => bar.update(done / 1e6, total / 1e6) : undefined,
      });
    } catch (e) {
      throw inFlagWords(e);
    } finally {
      bar?.done();
    }
    await mkdir(o.out, { recursive: true });
    const files: string[] = [];
    const out = (name: string) => {
      const f = join(o.out, name);
      files.push(f);
      return f;
    };
    await writeXC(out('train.txt'), r.train);
    if (r.test) await writeXC(out('test.txt'), r.test);
    const lines = (items: readonly string[]) => [new TextEncoder().encode(items.map((x, i) => `${i}\t${x}\n`).join(''))];
    await writeFileAtomic(out('labels.txt'), lines(r.labelNames));
    if (r.vectorizer.mode === 'vocabulary') await writeFileAtomic(out('vocabulary.txt'), lines(r.vectorizer.vocabulary));
    const v = r.vectorizer;
    if (o.json) {
      io.out(JSON.stringify({
        files, trainPoints: r.train.points, testPoints: r.test?.points ?? 0, features: v.features, mode: v.mode, labels: r.labelNames.length,
        unknownTestLabels: r.unknownTestLabels, bytes: r.bytes, seconds: r.seconds, mbPerSec: r.bytes / 1e6 / r.seconds,
      }) + '\n');
    } else {
      io.out(`wrote ${files.join(', ')}: ${formatAmount(r.train.points)} training points, ${formatAmount(v.features)} features ` +
        `(${v.mode === 'vocabulary' ? 'vocabulary' : `hashed into 2^${v.options.hashBits}`}), ${formatAmount(r.labelNames.length)} labels; ` +
        `featurised ${(r.bytes / 1e6).toFixed(1)} MB in ${r.seconds.toFixed(2)} s\n`);
      if (r.unknownTestLabels) io.err(`warning: ${o.test}: ${r.unknownTestLabels} label occurrence(s) name labels not in the training data (dropped)\n`);
    }
    return 0;
  },
});

/** `sublinear data ...` */
export const dataCommands = defineGroup('data', 'Inspect, split, generate and featurize datasets.', [inspect, split, synth, featurize]);

