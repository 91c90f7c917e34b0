// `npm run bench:accuracy`: P@1/P@3/P@5, training and prediction seconds and peak memory on extreme-
// classification datasets, for sublinear (defaults; optionally its tables/dense variants), the CPU XC tools
// practitioners compare with (omikuji, PECOS XR-Linear, napkinXC, and on small sets one-vs-rest logistic
// regression: bench/anchors.ts; each run when installed,
// skipped with the reason otherwise) and fastText (optional).
//
//   npm run bench:accuracy -- [--datasets list | --quick | --full] [--systems list] [--json]
//                             [--data-dir dir] [--workers n] [--threads 2] [--python python3] [--curve]
//                             [--epochs n] [--fasttext-epochs 30] [--fasttext-lr-ova 0.25] [--fasttext-lr-hs 0.5]
//                             [--cache-dir dir] [--keep] [--verbose]
//
// Datasets (each skipped, with the reason printed, when its files are missing):
// - bibtex: the Extreme Classification Repository's Bibtex, split 1 (`sublinear data split`);
// - bibtex-300, bibtex-1000: split 1's training points subsampled to 300 / 1,000 (seeded shuffle, seed 7:
//   bench/accuracy-data.ts), the test set whole;
// - delicious, delicious-300, delicious-1000: the repository's Delicious, and its training file subsampled so;
// - debian-deps, debian-tags: real text sets (package descriptions to dependencies / debtags), in the data
//   folder's debian-deps/ and debian-tags/ (train.txt, test.txt);
// - debian-deps-tail: debian-deps without its 50 most frequent labels (counted over train and test; removed
//   from both, the others renumbered, points left without labels dropped: 38,659 / 9,727 points, 22,818 labels);
// - debian-deps-11k: debian-deps with only the labels on at least 3 training points (renumbered, points left
//   without labels dropped: 43,099 / 10,651 points, 11,604 labels): a real text set at 10^4 labels;
// - debian-tags-300, debian-tags-1000, debian-deps-300, debian-deps-1000: small bag-of-words sets with few
//   points per label: the Debian sets' term counts (recovered from their tf-idf weights:
//   termCountsFromTfidf), training points subsampled to 300 / 1,000 (seed 7), only the labels on at least 2
//   of them kept (renumbered; points left without labels dropped, in train and test): 298 / 5,966 points
//   and 115 labels, 1,000 / 6,049 and 229, 243 / 8,174 and 173, 858 / 9,055 and 600;
// - model2-200k: the second data model (`data synth --model taxonomy --shape 200k`), 100,000 / 5,000
//   points, 100,000 features, 200,000 labels, seed 1;
// - amazon-670k: synthetic at the Amazon-670K shape, 30,000 train / 2,000 test points, seed 7;
// - amazon-670k-200k: the same shape, 200,000 / 5,000 points, seed 7 (only with --full or --datasets).
// The synthetic files are generated once with `sublinear data synth` and cached under --cache-dir
// (default: <tmpdir>/sublinear-bench-cache), keyed by model, shape, sizes and seed.
//
// Systems (--systems; default sublinear and the four anchors), each run in its own process(es), so that
// peak RSS and crashes are its own:
// - sublinear: the whole `sublinear train --train --test --save` command with defaults (reading, training,
//   held-out and test evaluation, saving), then `sublinear eval` for the prediction time. With --curve it
//   also evaluates the test set after every epoch (`--eval-every 1`, which lengthens the command) and
//   plots that curve;
// - sublinear-tables: the other side of the defaults rule's tables choice; sublinear-dense: the default
//   network with a dense output layer (as before; both with per-epoch evaluation);
// - omikuji, pecos, napkinxc: bench/anchors.ts, at their defaults with --threads threads;
// - ovr-lr: one-vs-rest logistic regression (scikit-learn, liblinear, C = 1, one thread) on L2-normalised
//   rows, where labels x training points are at most 2,000,000 (bench/anchors.ts: OVR_MAX_COST);
// - fasttext: Debian's `fasttext supervised` (apt-get install fasttext) with `-loss ova` and `-loss hs`,
//   `-dim 128`, on the same points converted to fastText's text format. P@k computed here.
//
// Seconds: "train s" is the wall clock of each system's training command (for sublinear the whole `train`
// command, test evaluation and saving included; its own training seconds are in the note); "predict s" the
// wall clock of its prediction command on the test set (model loading and reading included); fastText
// reports its training loop, as before. The plot is P@1 against training seconds.
//
// Output: a table per dataset on stdout; with --json, one JSON line last on stdout:
//   { "datasets": [ { name, points, testPoints, features, labels, systems: [ { name, p1, p3, p5,
//     trainSeconds, predictSeconds, peakRssMB, curve: [[seconds, p1], ...], note?, skipped?, error? } ] } ], "machine" }
// Writes bench/results/accuracy.json (datasets of earlier runs that were not run again are kept, each
// with its measuredAt) and bench/results/accuracy-<name>.svg (P@1 against training seconds).
import { spawnSync } from 'node:child_process';
import { closeSync, existsSync, mkdirSync, mkdtempSync, openSync, readFileSync, readSync, renameSync, rmSync, writeFileSync, writeSync } from 'node:fs';
import { availableParallelism, cpus, tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { packageRoot } from '../src/util/package-root.js';
import { defineCommand, UsageError, type CliIO } from '../src/cli/args.js';
import { defaultConfig, resolveConfig, type NetworkConfig } from '../src/network/config.js';
import { computeMetrics, NO_PREDICTION } from '../src/network/metrics.js';
import { readXC, parseXCHeader, type SparseDataset } from '../src/datasets/index.js';
import { runBenchChild } from './child.js';
import { plotCurves } from './plot.js';
import { benchMain } from './cli.js';
import { DATA_DIR_HELP, findDataset } from './data-dir.js';
import { ANCHORS, ANCHOR_TITLES, anchorMissing, findPython, ovrTooLarge, runAnchor, runMeasured as runCommand, type AnchorName, type Measured } from './anchors.js';
import { frequentSplit, subsamplePoints, tailSplit, termCountsFromTfidf } from './accuracy-data.js';
import { writeXC } from '../src/datasets/index.js';

const DATASETS = [
  'bibtex', 'bibtex-300', 'bibtex-1000', 'delicious', 'delicious-300', 'delicious-1000',
  'debian-deps', 'debian-deps-tail', 'debian-deps-11k', 'debian-tags', 'debian-tags-300', 'debian-tags-1000',
  'debian-deps-300', 'debian-deps-1000', 'model2-200k', 'amazon-670k', 'amazon-670k-200k',
] as const;
type DatasetName = (typeof DATASETS)[number];
const QUICK: readonly DatasetName[] = ['bibtex', 'delicious'];
/** Run only with --full or when named in --datasets. */
const FULL_ONLY: readonly DatasetName[] = ['amazon-670k-200k'];
/** The seed of the small-data subsamples. */
const SUBSAMPLE_SEED = 7;
/** How many of debian-deps' most frequent labels its tail leaves out. */
const TAIL_DROP = 50;
/** debian-deps-11k keeps the labels on at least this many training points (11,604 of 22,868). */
const FREQUENT_MIN = 3;
/**
 * The small term-count subsamples of the Debian sets keep the labels on at least this many of their
 * training points: a label seen once can be neither learnt and checked on held-out points nor found
 * again (and debian-deps' 300 points would otherwise carry 936 labels, mostly seen once).
 */
const SMALL_MIN = 2;

const SYSTEMS = ['sublinear', 'sublinear-tables', 'sublinear-dense', 'omikuji', 'pecos', 'napkinxc', 'ovr-lr', 'fasttext'] as const;
type SystemName = (typeof SYSTEMS)[number];
const DEFAULT_SYSTEMS: readonly SystemName[] = ['sublinear', 'omikuji', 'pecos', 'napkinxc', 'ovr-lr'];

/** The CLI, relative to dist/bench (runBenchChild runs scripts from there). */
const CLI = '../src/cli.js';

// fastText learning rates (--fasttext-lr-ova, --fasttext-lr-hs): at 30 epochs on Bibtex, ova's P@1 was
// 0.39 / 0.49 / 0.58 / 0.56 at lr 0.05 / 0.1 / 0.25 / 0.5 and hs's 0.50 / 0.50 / 0.49 at lr 0.25 / 0.5 / 1.
const FASTTEXT_DIM = 128;
/** fastText ova scores every label for every training example: at this many labels it would take hours. */
const FASTTEXT_OVA_MAX_LABELS = 100_000;
/** From this many labels, the dense-output variant trains one epoch only (minutes per epoch at 670k labels). */
const DENSE_ONE_EPOCH_LABELS = 100_000;

interface Options {
  datasets?: string;
  quick: boolean;
  full: boolean;
  systems?: string;
  python?: string;
  curve: boolean;
  dataDir?: string;
  workers?: number;
  threads: number;
  epochs?: number;
  fasttextEpochs: number;
  fasttextLrOva: number;
  fasttextLrHs: number;
  cacheDir?: string;
  keep: boolean;
  verbose: boolean;
  json: boolean;
  markdown: boolean;
}

export interface SystemResult {
  name: string;
  p1: number | null;
  p3: number | null;
  p5: number | null;
  trainSeconds: number | null;
  /** Wall seconds of the prediction command on the test set (null where not measured). */
  predictSeconds?: number | null;
  peakRssMB: number | null;
  /** [training seconds, test P@1] points. */
  curve: [number, number][];
  note?: string;
  skipped?: string;
  error?: string;
  samplesPerSec?: number;
  wallSeconds?: number;
  /** sublinear: seconds per phase of the whole train command (its JSON summary's `phases`). */
  phases?: Record<string, number>;
  /** When and where this system was measured (set by the run; kept when results are merged). */
  measuredAt?: string;
  machine?: string;
}

export interface DatasetResult {
  name: string;
  points: number | null;
  testPoints: number | null;
  features: number | null;
  labels: number | null;
  systems: SystemResult[];
  skipped?: string;
  measuredAt?: string;
}

interface Prepared {
  train: string;
  test: string;
}

/** What `sublinear train --json` prints (the fields used here; `history` only in newer builds). */
interface TrainSummary {
  p1?: number;
  p3?: number;
  p5?: number;
  trainSeconds?: number;
  peakRssMB?: number;
  samplesPerSec?: number;
  epochs?: number;
  samples?: number;
  workers?: number;
  history?: { epoch?: number; trainSeconds?: number; p1?: number; test?: { p1?: number } }[];
  phases?: Record<string, number>;
}

const finite = (x: unknown): x is number => typeof x === 'number' && Number.isFinite(x);
const orNull = (x: unknown): number | null => (finite(x) ? x : null);

/** Progress messages go to stderr (stdout has the tables and the JSON line). */
function log(_o: Options, s: string): void {
  process.stderr.write(s + '\n');
}

// ---- datasets ----

/** Runs a `sublinear data ...` command with --json; resolves with its JSON line. */
function cli<T>(args: string[], o: Options): Promise<T> {
  return runBenchChild<T>(CLI, [...args, '--json'], o.verbose);
}

async function prepare(name: DatasetName, o: Options, cacheDir: string, work: string): Promise<Prepared | { skip: string }> {
  switch (name) {
    case 'bibtex':
    case 'bibtex-300':
    case 'bibtex-1000': {
      const found = findDataset('bibtex', o.dataDir);
      if ('message' in found) return { skip: found.message };
      const [data, tr, tst] = found.files as [string, string, string];
      const out = join(work, 'bibtex');
      if (!existsSync(join(out, 'train.txt'))) {
        await cli(['data', 'split', data, '--train-split', tr, '--test-split', tst, '--column', '1', '--out', out], o);
      }
      const whole = { train: join(out, 'train.txt'), test: join(out, 'test.txt') };
      return name === 'bibtex' ? whole : subsampled(name, whole, name === 'bibtex-300' ? 300 : 1000, work);
    }
    case 'delicious':
    case 'delicious-300':
    case 'delicious-1000': {
      const found = findDataset('delicious', o.dataDir);
      if ('message' in found) return { skip: found.message };
      const [train, test] = found.files as [string, string];
      return name === 'delicious' ? { train, test } : subsampled(name, { train, test }, name === 'delicious-300' ? 300 : 1000, work);
    }
    case 'debian-deps':
    case 'debian-tags': {
      const found = findDataset(name, o.dataDir);
      if ('message' in found) return { skip: found.message };
      const [train, test] = found.files as [string, string];
      return { train, test };
    }
    case 'debian-deps-tail':
    case 'debian-deps-11k': {
      const found = findDataset('debian-deps', o.dataDir);
      if ('message' in found) return { skip: found.message };
      const [train, test] = found.files as [string, string];
      const [tr, te] = [await readXC(train), await readXC(test)];
      const t = name === 'debian-deps-tail' ? tailSplit(tr, te, TAIL_DROP) : frequentSplit(tr, te, FREQUENT_MIN);
      const out = join(work, name);
      mkdirSync(out, { recursive: true });
      const files = { train: join(out, 'train.txt'), test: join(out, 'test.txt') };
      await writeXC(files.train, t.train);
      await writeXC(files.test, t.test);
      const how = name === 'debian-deps-tail' ? `the ${TAIL_DROP} most frequent removed` : `those on at least ${FREQUENT_MIN} training points`;
      log(o, `  ${name}: ${t.train.points} train / ${t.test.points} test points, ${t.train.labels} labels (${how})`);
      return files;
    }
    case 'debian-tags-300':
    case 'debian-tags-1000':
    case 'debian-deps-300':
    case 'debian-deps-1000': {
      const base = name.startsWith('debian-tags') ? 'debian-tags' : 'debian-deps';
      const found = findDataset(base, o.dataDir);
      if ('message' in found) return { skip: found.message };
      const [train, test] = found.files as [string, string];
      const tr = await readXC(train);
      const [counts, testCounts] = termCountsFromTfidf(tr, [tr, await readXC(test)]);
      const t = frequentSplit(subsamplePoints(counts!, name.endsWith('-300') ? 300 : 1000, SUBSAMPLE_SEED), testCounts!, SMALL_MIN);
      const out = join(work, name);
      mkdirSync(out, { recursive: true });
      const files = { train: join(out, 'train.txt'), test: join(out, 'test.txt') };
      await writeXC(files.train, t.train);
      await writeXC(files.test, t.test);
      log(o, `  ${name}: ${t.train.points} train / ${t.test.points} test points, ${t.train.labels} labels (term counts; those on at least ${SMALL_MIN} training points)`);
      return files;
    }
    case 'model2-200k':
      return synth('taxonomy', '200k', 100000, 5000, 1, o, cacheDir);
    case 'amazon-670k':
      return synth('prototype', 'amazon-670k', 30000, 2000, 7, o, cacheDir);
    case 'amazon-670k-200k':
      return synth('prototype', 'amazon-670k', 200000, 5000, 7, o, cacheDir);
  }
}

/** The first `n` points of a seeded shuffle of `p.train` (kept in file order), with the whole test set. */
async function subsampled(name: string, p: Prepared, n: number, work: string): Promise<Prepared> {
  const out = join(work, name);
  mkdirSync(out, { recursive: true });
  const train = join(out, 'train.txt');
  await writeXC(train, subsamplePoints(await readXC(p.train), n, SUBSAMPLE_SEED));
  return { train, test: p.test };
}

/** Synthetic train/test files from `sublinear data synth`, cached by their arguments. */
async function synth(model: 'prototype' | 'taxonomy', shape: string, train: number, test: number, seed: number, o: Options, cacheDir: string): Promise<Prepared> {
  const dir = join(cacheDir, `${model === 'taxonomy' ? 'taxonomy-' : ''}${shape}-train${train}-test${test}-seed${seed}`);
  const files = { train: join(dir, 'train.txt'), test: join(dir, 'test.txt') };
  if (existsSync(files.train) && existsSync(files.test)) {
    log(o, `  using cached ${dir}`);
    return files;
  }
  // Generated next to the cache entry and renamed into place, so an interrupted run leaves no partial entry.
  mkdirSync(cacheDir, { recursive: true });
  const tmp = `${dir}.partial-${process.pid}`;
  rmSync(tmp, { recursive: true, force: true });
  log(o, `  generating ${model} ${shape} (${train} train / ${test} test points, seed ${seed}) into ${dir}`);
  await cli(['data', 'synth', '--model', model, '--shape', shape, '--train', String(train), '--test', String(test), '--seed', String(seed), '--out', tmp], o);
  rmSync(dir, { recursive: true, force: true });
  renameSync(tmp, dir);
  return files;
}

/** The `points features labels` header of an XC file (its first line only). */
function readHeader(path: string): { points: number; features: number; labels: number } {
  const fd = openSync(path, 'r');
  try {
    const buf = Buffer.alloc(256);
    const n = readSync(fd, buf, 0, buf.length, 0);
    const text = buf.subarray(0, n).toString('latin1');
    const nl = text.indexOf('\n');
    return parseXCHeader(nl < 0 ? text : text.slice(0, nl), path);
  } finally {
    closeSync(fd);
  }
}

// ---- sublinear ----

/** P@1 against training seconds from the result's per-epoch history, else its final point. */
function sublinearCurve(r: TrainSummary): [number, number][] {
  const points: [number, number][] = [];
  for (const h of Array.isArray(r.history) ? r.history : []) {
    const s = h?.trainSeconds, p = h?.test?.p1 ?? h?.p1;
    if (finite(s) && finite(p)) points.push([s, p]);
  }
  points.sort((a, b) => a[0] - b[0]);
  if (points.length) return points;
  return finite(r.trainSeconds) && finite(r.p1) ? [[r.trainSeconds, r.p1]] : [];
}

/** The error of a failed child, shortened to its exit status and last stderr line. */
function childError(e: unknown): string {
  const msg = e instanceof Error ? e.message : String(e);
  const m = /exited with (\S+): ([\s\S]*)$/.exec(msg);
  if (!m) return msg.slice(0, 300);
  const last = m[2]!.split('\n').map((l) => l.trim()).filter(Boolean).at(-1) ?? '';
  return `exit ${m[1]}${last ? `: ${last.slice(0, 300)}` : ''}`;
}

function outputNote(c: NetworkConfig): string {
  const s = c.layers.at(-1)?.sampling;
  if (!s) return 'dense output';
  return `output ${s.hash ?? 'dwta'} K=${s.K ?? 6} L=${s.L ?? 50}${s.budget !== undefined ? ` budget=${s.budget}` : ''}`;
}

/** The CLI's file (node runs it directly, so the measured process is the command itself). */
const cliFile = () => join(packageRoot(), 'dist', 'src', 'cli.js');

/** The last stdout line of a command, parsed as JSON. */
function lastJson<T>(stdout: string, what: string): T {
  const last = stdout.trim().split('\n').at(-1) ?? '';
  try {
    return JSON.parse(last) as T;
  } catch {
    throw new Error(`${what}: last line is not JSON: ${last.slice(0, 200)}`);
  }
}

/**
 * One sublinear system: the whole `train` command, measured from outside (wall clock, peak RSS); with
 * `withPredict`, the model is saved and `sublinear eval` on the test set gives the prediction time; with
 * `curve`, the test set is also evaluated after every epoch (`--eval-every 1`).
 */
async function runSublinear(
  name: string, p: Prepared, trainPoints: number, config: NetworkConfig | null, configFile: string | null, o: Options,
  extra: string[] = [], opts: { curve: boolean; withPredict: boolean; work: string },
): Promise<SystemResult> {
  const model = join(opts.work, `${name.replace(/[^a-z0-9]+/gi, '-')}.model`);
  const args = [cliFile(), 'train', '--train', p.train, '--test', p.test, '--json', ...(opts.curve ? ['--eval-every', '1'] : []), ...extra];
  if (opts.withPredict) args.push('--save', model);
  if (o.workers !== undefined) args.push('--workers', String(o.workers));
  if (o.epochs !== undefined && !extra.includes('--epochs')) args.push('--epochs', String(o.epochs));
  if (configFile) args.push('--config', configFile);
  try {
    const t = await runCommand(process.execPath, args, { keepStdout: true, verbose: o.verbose });
    if (t.code !== 0) return failed(name, `sublinear train exit ${t.code ?? t.signal}: ${lastLine(t.stderrTail).slice(0, 300)}`);
    const r = lastJson<TrainSummary>(t.stdout, 'sublinear train');
    let predictSeconds: number | null = null, inferSeconds: number | null = null, predictRss = 0;
    if (opts.withPredict) {
      const e = await runCommand(process.execPath, [cliFile(), 'eval', '--model', model, '--test', p.test, '--json', ...(o.workers !== undefined ? ['--workers', String(o.workers)] : [])], { keepStdout: true, verbose: o.verbose });
      if (e.code !== 0) return failed(name, `sublinear eval exit ${e.code ?? e.signal}: ${lastLine(e.stderrTail).slice(0, 300)}`);
      predictSeconds = e.wallSeconds;
      inferSeconds = orNull(lastJson<{ seconds?: number }>(e.stdout, 'sublinear eval').seconds);
      predictRss = e.peakRssMB;
      if (!o.keep) rmSync(model, { force: true });
    }
    const history = Array.isArray(r.history) && r.history.length > 0;
    // Epochs actually trained (with early stopping, `epochs` may be the limit rather than the count).
    const epochs = history ? String(r.history!.length)
      : finite(r.samples) && trainPoints > 0 ? `~${Math.round((10 * r.samples) / trainPoints) / 10}` // samples / training points
        : r.epochs;
    // The curve against the whole command's clock: per-epoch training seconds shifted by what the
    // command spent outside training (reading, evaluation, saving), so its last point is the whole command.
    const shift = finite(r.trainSeconds) ? Math.max(0, t.wallSeconds - r.trainSeconds) : 0;
    const curve: [number, number][] = opts.curve ? sublinearCurve(r).map(([x, y]) => [x + shift, y]) : [];
    if (finite(r.p1) && (!curve.length || curve.at(-1)![0] < t.wallSeconds)) curve.push([t.wallSeconds, r.p1]);
    return {
      name,
      p1: orNull(r.p1), p3: orNull(r.p3), p5: orNull(r.p5),
      trainSeconds: t.wallSeconds, predictSeconds, peakRssMB: Math.max(t.peakRssMB, orNull(r.peakRssMB) ?? 0, predictRss) || null,
      curve,
      ...(finite(r.samplesPerSec) ? { samplesPerSec: r.samplesPerSec } : {}),
      ...(r.phases && typeof r.phases === 'object' ? { phases: r.phases } : {}),
      note: [
        `whole train command${opts.withPredict ? ' with --save' : ''}${opts.curve ? ' and --eval-every 1' : ''}; ${finite(r.trainSeconds) ? `${r.trainSeconds.toFixed(1)} s training` : '?'}`,
        `${epochs ?? '?'} epochs, ${finite(r.workers) ? r.workers : '?'} workers`,
        inferSeconds !== null ? `inference ${inferSeconds.toFixed(2)} s` : null,
        extra.length ? extra.join(' ') : null,
        config ? outputNote(config) : null,
      ].filter(Boolean).join('; '),
    };
  } catch (e) {
    return failed(name, childError(e));
  }
}

// ---- fastText ----

function fasttextInstalled(): boolean {
  const r = spawnSync('fasttext', [], { stdio: 'ignore' });
  return !(r.error && (r.error as NodeJS.ErrnoException).code === 'ENOENT');
}

/**
 * Writes a dataset in fastText's supervised format: per point, `__label__<id>` for each label, then
 * `f<id>` for each feature. fastText has no feature values: every feature present is one token, once
 * (the values, e.g. tf-idf weights, are dropped).
 */
function writeFastText(d: SparseDataset, path: string): void {
  const fd = openSync(path, 'w');
  try {
    let lines: string[] = [];
    for (let i = 0; i < d.points; i++) {
      const parts: string[] = [];
      for (let j = d.labelOffsets[i]!; j < d.labelOffsets[i + 1]!; j++) parts.push(`__label__${d.labelIndices[j]}`);
      for (let j = d.offsets[i]!; j < d.offsets[i + 1]!; j++) parts.push(`f${d.indices[j]}`);
      lines.push(parts.join(' '));
      if (lines.length >= 8192) {
        writeSync(fd, lines.join('\n') + '\n');
        lines = [];
      }
    }
    if (lines.length) writeSync(fd, lines.join('\n') + '\n');
  } finally {
    closeSync(fd);
  }
}

interface Run extends Measured {
  /** Seconds since the start when stderr first showed `Number of labels` (fastText's dictionary summary). */
  labelsAt: number | null;
  /** Seconds since the start when stderr last showed `Progress:` (fastText's training progress). */
  lastProgressAt: number | null;
}

/** Runs fastText (anchors' runMeasured: peak RSS sampled from /proc), noting when its stderr shows its phases. */
async function runMeasured(cmd: string, args: string[], o: Options, keepStdout: boolean): Promise<Run> {
  let labelsAt: number | null = null, lastProgressAt: number | null = null;
  const r = await runCommand(cmd, args, {
    keepStdout, verbose: o.verbose, echo: false,
    onStderr: (s, now, before) => {
      const seen = before.slice(-32) + s; // a marker may straddle two chunks
      if (labelsAt === null && seen.includes('Number of labels')) labelsAt = now;
      if (seen.includes('Progress:')) lastProgressAt = now;
    },
  });
  return { ...r, labelsAt, lastProgressAt };
}

/** fastText's training loop seconds: from its dictionary summary to its last progress line; null if not seen. */
function fasttextLoopSeconds(r: Run): number | null {
  return r.labelsAt !== null && r.lastProgressAt !== null && r.lastProgressAt >= r.labelsAt ? r.lastProgressAt - r.labelsAt : null;
}

/** Top-k label ids from `fasttext predict` output, one line per test point, padded with NO_PREDICTION. */
function parsePredictions(text: string, points: number, k: number): Uint32Array {
  const lines = text.split('\n');
  if (lines.at(-1) === '') lines.pop();
  if (lines.length !== points) throw new Error(`fasttext predict printed ${lines.length} lines for ${points} test points`);
  const top = new Uint32Array(points * k).fill(NO_PREDICTION);
  lines.forEach((line, i) => {
    let j = 0;
    for (const tok of line.split(' ')) {
      if (j >= k) break;
      if (tok.startsWith('__label__')) top[i * k + j++] = Number(tok.slice(9));
    }
  });
  return top;
}

const lastLine = (s: string) => s.split(/[\r\n]/).map((l) => l.trim()).filter(Boolean).at(-1) ?? '';

async function runFastText(loss: 'ova' | 'hs', trainFt: string, testFt: string, test: SparseDataset, work: string, o: Options): Promise<SystemResult> {
  const name = `fastText ${loss}`;
  const model = join(work, `fasttext-${loss}`);
  const epochs = o.fasttextEpochs;
  let lr = loss === 'ova' ? o.fasttextLrOva : o.fasttextLrHs;
  let t;
  const halved: number[] = [];
  // fastText aborts with "Encountered NaN" when its learning rate is too high for the data (ova at 0.25
  // on Delicious): halve it and train again, as its users do, at most three times.
  for (;;) {
    const args = ['supervised', '-input', trainFt, '-output', model, '-loss', loss, '-thread', String(o.threads), '-dim', String(FASTTEXT_DIM),
      '-epoch', String(epochs), '-lr', String(lr), '-minCount', '1', '-bucket', '0', '-wordNgrams', '1'];
    if (o.verbose) log(o, `  fasttext ${args.join(' ')}`);
    t = await runMeasured('fasttext', args, o, false);
    if (t.code !== 0 && /Encountered NaN/.test(t.stderrTail) && halved.length < 3) {
      halved.push(lr);
      lr /= 2;
      continue;
    }
    break;
  }
  if (t.code !== 0) return failed(name, `fasttext supervised exit ${t.code ?? t.signal}: ${lastLine(t.stderrTail).slice(0, 300)}`);
  const p = await runMeasured('fasttext', ['predict', `${model}.bin`, testFt, '5'], o, true);
  if (!o.keep) rmSync(`${model}.vec`, { force: true });
  if (p.code !== 0) return failed(name, `fasttext predict exit ${p.code ?? p.signal}: ${lastLine(p.stderrTail).slice(0, 300)}`);
  let m;
  try {
    const topIdx = parsePredictions(p.stdout, test.points, 5);
    m = computeMetrics({ topIdx, kMax: 5, labelOffsets: test.labelOffsets, labelIndices: test.labelIndices, ks: [1, 3, 5] });
  } catch (e) {
    return failed(name, e instanceof Error ? e.message : String(e));
  }
  const loop = fasttextLoopSeconds(t);
  const seconds = loop ?? t.wallSeconds;
  return {
    name,
    p1: m['p1']!, p3: m['p3']!, p5: m['p5']!,
    trainSeconds: seconds,
    wallSeconds: t.wallSeconds,
    peakRssMB: t.peakRssMB || null,
    curve: [[seconds, m['p1']!]],
    note: `dim ${FASTTEXT_DIM}, lr ${lr}${halved.length ? ` (NaN at lr ${halved.join(', ')})` : ''}, ${epochs} epochs, ${o.threads} threads, binary features; ` +
      (loop !== null ? `wall ${t.wallSeconds.toFixed(1)} s with I/O` : 'wall clock incl. reading and saving'),
  };
}

// ---- running ----

const skipped = (name: string, reason: string): SystemResult => ({ name, p1: null, p3: null, p5: null, trainSeconds: null, peakRssMB: null, curve: [], skipped: reason });
const failed = (name: string, error: string): SystemResult => ({ name, p1: null, p3: null, p5: null, trainSeconds: null, peakRssMB: null, curve: [], error });

async function runDataset(name: DatasetName, systemsWanted: readonly SystemName[], o: Options, cacheDir: string, work: string, python: string): Promise<DatasetResult> {
  log(o, `${name}: preparing data`);
  const p = await prepare(name, o, cacheDir, work);
  if ('skip' in p) {
    log(o, `${name}: skipped (${p.skip})`);
    return { name, points: null, testPoints: null, features: null, labels: null, systems: [], skipped: p.skip };
  }
  const h = readHeader(p.train), ht = readHeader(p.test);
  const shape = { features: h.features, labels: h.labels, points: h.points };
  const systems: SystemResult[] = [];
  const want = (s: SystemName) => systemsWanted.includes(s);
  const step = async (label: string, f: () => Promise<SystemResult>) => {
    log(o, `${name}: ${label} ...`);
    const r = await f();
    systems.push(r);
    if (r.skipped) log(o, `  skipped: ${r.skipped}`);
    else if (r.error) log(o, `  failed: ${r.error}`);
    else log(o, `  P@1 ${r.p1?.toFixed(4)}; train ${r.trainSeconds?.toFixed(2)} s, predict ${r.predictSeconds?.toFixed(2) ?? '-'} s, peak RSS ${r.peakRssMB ?? '-'} MB`);
  };
  const dsWork = join(work, `${name}-run`);
  mkdirSync(dsWork, { recursive: true });

  // The default network for this shape, as `sublinear train` builds it without --config (the same seed).
  const base = defaultConfig(shape, 1);
  const sampled = base.layers.at(-1)?.sampling;
  if (want('sublinear')) {
    await step('sublinear', () => runSublinear('sublinear', p, h.points, base, null, o, [], { curve: o.curve, withPredict: true, work: dsWork }));
  }

  // The other side of the defaults rule's choice about the tables' candidates (on below one training
  // point per ten labels): 'tables off' where the default uses them, 'tables on' where it does not.
  const tablesOn = sampled?.budget === 0;
  const variant = tablesOn ? 'sublinear, tables on' : 'sublinear, tables off';
  const variantRun = { curve: true, withPredict: false, work: dsWork };
  if (!want('sublinear-tables')) {
    // not asked for
  } else if (!sampled) {
    systems.push(skipped('sublinear, tables off', 'output layer is dense by default at this size'));
  } else {
    const { budget: _omit, ...rest } = sampled;
    const c: NetworkConfig = { ...base, layers: base.layers.map((l, i) => (i === base.layers.length - 1 ? { ...l, sampling: tablesOn ? rest : { ...sampled, budget: 0 } } : l)) };
    const file = join(work, `${name}-${tablesOn ? 'tables-on' : 'tables-off'}.json`);
    writeFileSync(file, JSON.stringify(c, null, 2) + '\n');
    let invalid: string | null = null;
    try {
      resolveConfig(c);
    } catch (e) {
      invalid = `this build rejects the configuration: ${e instanceof Error ? e.message : String(e)}`;
    }
    if (invalid) systems.push(failed(variant, invalid));
    else await step(variant, () => runSublinear(variant, p, h.points, c, file, o, [], variantRun));
  }

  if (!want('sublinear-dense')) {
    // not asked for
  } else if (!sampled) {
    systems.push(skipped('sublinear, dense output', 'the same network as "sublinear": the output layer is dense by default at this size'));
  } else if (h.labels >= 150_000 && h.points >= 100_000) {
    systems.push(skipped('sublinear, dense output', `too slow: a dense ${h.labels}-label softmax over ${h.points} points per epoch`));
  } else {
    const c: NetworkConfig = { ...base, layers: base.layers.map((l, i) => (i === base.layers.length - 1 ? { size: l.size, activation: l.activation } : l)) };
    const file = join(work, `${name}-dense-output.json`);
    writeFileSync(file, JSON.stringify(c, null, 2) + '\n');
    // A dense softmax over 10^5+ labels trains at tens of points per second: one epoch, at the rate the
    // defaults give a sampled output (the dense default, 1e-3, barely moves it in one epoch).
    const big = h.labels >= DENSE_ONE_EPOCH_LABELS;
    await step('sublinear, dense output', () => runSublinear('sublinear, dense output', p, h.points, c, file, o, big ? ['--epochs', '1', '--lr', '0.01'] : [], variantRun));
  }

  const anchors = ANCHORS.filter((a) => want(a));
  if (anchors.length) {
    const testData = await readXC(p.test);
    for (const a of anchors) {
      const title = ANCHOR_TITLES[ANCHORS.indexOf(a)]!;
      const missing = anchorMissing(a as AnchorName, python) ?? (a === 'ovr-lr' ? ovrTooLarge(h.points, h.labels) : null);
      if (missing) {
        systems.push(skipped(title, missing));
        log(o, `${name}: ${title} skipped: ${missing}`);
        continue;
      }
      const aWork = join(dsWork, a);
      mkdirSync(aWork, { recursive: true });
      await step(title, async () => {
        const r = await runAnchor(a, { train: p.train, test: p.test, testData, work: aWork, threads: o.threads, python, verbose: o.verbose });
        if (!o.keep) rmSync(aWork, { recursive: true, force: true });
        return { ...r, curve: r.p1 !== null && r.trainSeconds !== null ? [[r.trainSeconds, r.p1]] : [] };
      });
    }
  }

  if (!want('fasttext')) {
    // not asked for
  } else if (!fasttextInstalled()) {
    for (const loss of ['ova', 'hs']) systems.push(skipped(`fastText ${loss}`, 'fasttext not installed (apt-get install fasttext)'));
  } else {
    log(o, `${name}: converting to fastText's format`);
    const train = await readXC(p.train), test = await readXC(p.test);
    const trainFt = join(work, `${name}-train.ft`), testFt = join(work, `${name}-test.ft`);
    writeFastText(train, trainFt);
    writeFastText(test, testFt);
    if (train.labels >= FASTTEXT_OVA_MAX_LABELS) {
      systems.push(skipped('fastText ova', `one-vs-all scores all ${train.labels} labels for every training example (hours at this size)`));
    } else {
      await step('fastText ova', () => runFastText('ova', trainFt, testFt, test, work, o));
    }
    await step('fastText hs', () => runFastText('hs', trainFt, testFt, test, work, o));
    if (!o.keep) {
      rmSync(trainFt, { force: true });
      rmSync(testFt, { force: true });
    }
  }
  if (!o.keep) rmSync(dsWork, { recursive: true, force: true });
  const at = new Date().toISOString(), machine = `${cpuModel()}, ${availableParallelism()} cores`;
  for (const s of systems) if (!s.skipped) Object.assign(s, { measuredAt: at, machine });
  return { name, points: h.points, testPoints: ht.points, features: h.features, labels: h.labels, systems, measuredAt: at };
}

function cpuModel(): string {
  try {
    const m = /^model name\s*:\s*(.+)$/m.exec(readFileSync('/proc/cpuinfo', 'utf8'));
    if (m) return m[1]!.trim();
  } catch {
    /* not Linux */
  }
  return cpus()[0]?.model ?? 'unknown';
}

const n = (x: number | null) => (x === null ? '-' : x.toLocaleString('en-US'));

/** A train command's phases as `name seconds` pairs, largest first (those under 10 ms left out). */
export function phaseLine(phases: Record<string, number>): string {
  return Object.entries(phases)
    .filter(([k, v]) => k !== 'total' && v >= 0.01)
    .sort((a, b) => b[1] - a[1])
    .map(([k, v]) => `${k} ${v.toFixed(2)}`)
    .concat(phases.total !== undefined ? [`(total ${phases.total.toFixed(2)} s)`] : [])
    .join(', ');
}


/** The fastest anchor's training time against sublinear's whole command (null when either is missing). */
export function speedRatio(d: DatasetResult): string | null {
  const ours = d.systems.find((s) => s.name === 'sublinear' && s.trainSeconds !== null);
  const anchors = d.systems.filter((s) => (ANCHOR_TITLES as readonly string[]).includes(s.name) && s.trainSeconds !== null && !s.skipped && !s.error);
  if (!ours || !anchors.length) return null;
  const fastest = anchors.reduce((a, s) => (s.trainSeconds! < a.trainSeconds! ? s : a));
  return `fastest anchor (${fastest.name}) ${fastest.trainSeconds!.toFixed(2)} s / sublinear ${ours.trainSeconds!.toFixed(2)} s = ${(fastest.trainSeconds! / ours.trainSeconds!).toFixed(2)}`;
}

/**
 * The results as one Markdown table (--markdown): per dataset, sublinear's P@1 / P@3 / P@5, whole command and
 * peak RSS, each anchor's, the fastest anchor's training time over sublinear's, and sublinear's largest phases.
 * The best P@1 of a row is bold.
 */
export function markdownTable(datasets: readonly DatasetResult[]): string {
  const f3 = (x: number | null) => (x === null ? '-' : x.toFixed(3));
  const cell = (s: SystemResult | undefined, bold: boolean) => {
    if (!s) return '-';
    if (s.skipped || s.error) return s.skipped ? 'skipped' : 'failed';
    const p1 = bold ? `**${f3(s.p1)}**` : f3(s.p1);
    const secs = s.trainSeconds === null ? '-' : `${s.trainSeconds.toFixed(1)} s`;
    return `${p1} / ${f3(s.p3)} / ${f3(s.p5)}, ${secs}${s.peakRssMB ? `, ${s.peakRssMB} MB` : ''}`;
  };
  const lines = [
    `| dataset (train points, labels) | sublinear | ${ANCHOR_TITLES.join(' | ')} | fastest anchor / sublinear | sublinear's largest phases (s) |`,
    `|---|---|${ANCHOR_TITLES.map(() => '---|').join('')}---|---|`,
  ];
  for (const d of datasets) {
    if (d.skipped) continue;
    const ours = d.systems.find((s) => s.name === 'sublinear');
    const row = [ours, ...ANCHOR_TITLES.map((t) => d.systems.find((s) => s.name === t))];
    const best = Math.max(...row.map((s) => (s && !s.skipped && !s.error && s.p1 !== null ? s.p1 : -1)));
    const ratio = speedRatio(d);
    const phases = ours?.phases
      ? Object.entries(ours.phases).filter(([k]) => k !== 'total').sort((a, b) => b[1] - a[1]).slice(0, 4).map(([k, v]) => `${k} ${v.toFixed(1)}`).join(', ')
      : '-';
    const name = `${d.name} (${d.points ?? '?'}, ${d.labels ?? '?'})`;
    lines.push(`| ${[name, ...row.map((s) => cell(s, s !== undefined && s.p1 === best)), ratio ? ratio.replace(/.* = /, '') : '-', phases].join(' | ')} |`);
  }
  return lines.join('\n') + '\n';
}

function table(d: DatasetResult): string {
  if (d.skipped) return `\n${d.name}: skipped (${d.skipped})\n`;
  const lines = [
    '',
    `${d.name}  (${n(d.points)} train / ${n(d.testPoints)} test points, ${n(d.features)} features, ${n(d.labels)} labels)`,
    `${'system'.padEnd(24)} ${'P@1'.padStart(6)} ${'P@3'.padStart(6)} ${'P@5'.padStart(6)} ${'train s'.padStart(8)} ${'predict s'.padStart(9)} ${'peak RSS MB'.padStart(11)}  note`,
  ];
  const f = (x: number | null) => (x === null ? '-' : x.toFixed(4)).padStart(6);
  for (const s of d.systems) {
    const note = s.skipped ? `skipped: ${s.skipped}` : s.error ? `failed: ${s.error}` : s.note ?? '';
    const sec = (x: number | null | undefined, w: number) => (x === null || x === undefined ? '-' : x.toFixed(2)).padStart(w);
    lines.push(`${s.name.padEnd(24)} ${f(s.p1)} ${f(s.p3)} ${f(s.p5)} ${sec(s.trainSeconds, 8)} ${sec(s.predictSeconds, 9)} ${String(s.peakRssMB ?? '-').padStart(11)}  ${note}`);
    if (s.phases) lines.push(`${''.padEnd(24)} phases: ${phaseLine(s.phases)}`);
  }
  const ratio = speedRatio(d);
  if (ratio) lines.push(`${''.padEnd(24)} ${ratio}`);
  return lines.join('\n') + '\n';
}

function plot(d: DatasetResult, machine: { cpu: string; cores: number }): string {
  const series = d.systems.filter((s) => s.curve.length).map((s) => ({ name: s.name, points: s.curve }));
  return plotCurves({
    title: `${d.name}: P@1 against training seconds (each system's training command)`,
    subtitle: `${n(d.points)} train / ${n(d.testPoints)} test points, ${n(d.features)} features, ${n(d.labels)} labels; ${machine.cores} cores (${machine.cpu})`,
    xLabel: 'training command wall clock (s)', yLabel: 'P@1 (test set)', series, logX: true,
  });
}

/**
 * Merges this run's datasets into earlier results: a dataset not run keeps its entry; in a dataset run
 * again, each system run now replaces its earlier result unless it was skipped now (a tool missing now
 * keeps its earlier measurement), and systems not run now are kept. Each system carries its measuredAt
 * and machine. Sorted by the bench's dataset order.
 */
export function mergeResults(kept: DatasetResult[], now: DatasetResult[]): DatasetResult[] {
  const merged = kept.map((d) => ({ ...d, systems: [...d.systems] }));
  for (const d of now) {
    const i = merged.findIndex((k) => k.name === d.name);
    if (i < 0) {
      merged.push(d);
      continue;
    }
    if (d.skipped) continue; // a dataset missing now keeps its earlier measurement
    const old = merged[i]!;
    const systems = [...old.systems];
    for (const s of d.systems) {
      const j = systems.findIndex((o) => o.name === s.name);
      if (j < 0) systems.push(s);
      else if (!s.skipped || systems[j]!.skipped) systems[j] = s;
    }
    merged[i] = { ...d, systems };
  }
  merged.sort((a, b) => DATASETS.indexOf(a.name as DatasetName) - DATASETS.indexOf(b.name as DatasetName));
  return merged;
}

/** Merges the datasets of this run into bench/results/accuracy.json (see mergeResults); returns the merged entries. */
function writeResults(dir: string, datasets: DatasetResult[], machine: { cpu: string; cores: number }): DatasetResult[] {
  const file = join(dir, 'accuracy.json');
  let kept: DatasetResult[] = [];
  if (existsSync(file)) {
    try {
      kept = (JSON.parse(readFileSync(file, 'utf8')) as { datasets?: DatasetResult[] }).datasets ?? [];
    } catch {
      kept = [];
    }
  }
  const merged = mergeResults(kept, datasets);
  writeFileSync(file, JSON.stringify({ datasets: merged, machine }, null, 2) + '\n');
  return merged;
}

/** The --systems list ('all' for every system); default: sublinear and the anchors. */
export function parseSystems(list: string | undefined): SystemName[] {
  if (list === undefined) return [...DEFAULT_SYSTEMS];
  const out: SystemName[] = [];
  for (const w of list.split(',').map((s) => s.trim()).filter(Boolean)) {
    if (w === 'all') return [...SYSTEMS];
    if (!(SYSTEMS as readonly string[]).includes(w)) throw new UsageError(`unknown system '${w}' (known: ${SYSTEMS.join(', ')}, all)`);
    if (!out.includes(w as SystemName)) out.push(w as SystemName);
  }
  if (!out.length) throw new UsageError('--systems needs at least one system');
  return out;
}

async function run(o: Options, io: CliIO): Promise<number> {
  if (o.quick && o.datasets) throw new UsageError('--quick and --datasets cannot be combined');
  if (o.quick && o.full) throw new UsageError('--quick and --full cannot be combined');
  const names: DatasetName[] = o.quick ? [...QUICK] : o.datasets ? [] : DATASETS.filter((d) => o.full || !FULL_ONLY.includes(d));
  if (o.datasets) {
    for (const w of o.datasets.split(',').map((s) => s.trim()).filter(Boolean)) {
      if (!(DATASETS as readonly string[]).includes(w)) throw new UsageError(`unknown dataset '${w}' (known: ${DATASETS.join(', ')})`);
      if (!names.includes(w as DatasetName)) names.push(w as DatasetName);
    }
    if (!names.length) throw new UsageError('--datasets needs at least one dataset');
  }
  const systemsWanted = parseSystems(o.systems);
  const python = o.python ?? findPython(['python3', '/usr/bin/python3']);
  const root = packageRoot();
  if (!existsSync(join(root, 'dist', 'src', 'cli.js'))) throw new Error('dist/src/cli.js not found: build first (npm run build)');
  const cacheDir = o.cacheDir ? resolve(o.cacheDir) : join(tmpdir(), 'sublinear-bench-cache');
  const work = mkdtempSync(join(tmpdir(), 'sublinear-accuracy-'));
  const machine = { cpu: cpuModel(), cores: availableParallelism() };
  const datasets: DatasetResult[] = [];
  try {
    for (const name of names) {
      const d = await runDataset(name, systemsWanted, o, cacheDir, work, python);
      datasets.push(d);
      io.out(table(d));
    }
  } finally {
    if (o.keep) io.err(`kept the working files in ${work}\n`);
    else rmSync(work, { recursive: true, force: true });
  }
  const resultsDir = join(root, 'bench', 'results');
  mkdirSync(resultsDir, { recursive: true });
  const merged = writeResults(resultsDir, datasets, machine);
  // The plot shows every system measured on the dataset so far (this run's and kept earlier ones).
  for (const d of datasets) if (!d.skipped) writeFileSync(join(resultsDir, `accuracy-${d.name}.svg`), plot(merged.find((m) => m.name === d.name) ?? d, machine));
  if (o.markdown) io.out(`\n${markdownTable(datasets)}`);
  if (o.json) io.out(JSON.stringify({ datasets, machine }) + '\n');
  const failures = datasets.flatMap((d) => d.systems.filter((s) => s.error).map((s) => `${d.name}/${s.name}: ${s.error}`));
  if (failures.length) {
    io.err(`bench:accuracy: ${failures.length} run(s) failed:\n  ${failures.join('\n  ')}\n`);
    return 1;
  }
  return 0;
}

export const accuracyCmd = defineCommand({
  name: 'bench:accuracy',
  summary: 'P@k, training and prediction seconds, peak memory: sublinear against omikuji, PECOS XR-Linear, napkinXC and one-vs-rest LR (and fastText).',
  description:
    'Datasets: bibtex (XC repository, split 1) and its 300- and 1,000-point subsamples, delicious likewise,\n' +
    'debian-deps, debian-deps-tail (its 50 most frequent labels removed), debian-deps-11k (only its labels on\n' +
    'at least 3 training points: 11,604), debian-tags, debian-tags-300/-1000 and debian-deps-300/-1000 (term\n' +
    'counts, training points subsampled, labels on at least 2 of them), model2-200k (the\n' +
    'taxonomy data model at 200,000 labels), amazon-670k (synthetic, 30,000 points), and with --full\n' +
    'amazon-670k-200k (200,000 points); one whose files are missing is skipped with the reason.\n' +
    'Systems: sublinear (the whole train command, defaults), omikuji, pecos, napkinxc and ovr-lr (one-vs-rest\n' +
    'logistic regression, scikit-learn; up to 2,000,000 labels x training points) when installed (skipped with\n' +
    'the reason otherwise); sublinear-tables, sublinear-dense and fasttext on request.\n' +
    'Every system runs in its own process. Writes bench/results/accuracy.json and accuracy-<dataset>.svg.',
  flags: {
    datasets: { type: 'string', valueName: 'list', description: `comma-separated, of ${DATASETS.join(', ')} (default: all but ${FULL_ONLY.join(', ')})` },
    quick: { type: 'boolean', description: `only ${QUICK.join(' and ')}` },
    full: { type: 'boolean', description: `also ${FULL_ONLY.join(', ')} (slow)` },
    systems: { type: 'string', valueName: 'list', description: `comma-separated, of ${SYSTEMS.join(', ')}, or all (default: ${DEFAULT_SYSTEMS.join(',')})` },
    python: { type: 'string', valueName: 'cmd', description: 'Python that imports pecos (default: the first of python3, /usr/bin/python3 that does)' },
    curve: { type: 'boolean', description: "sublinear: evaluate the test set after every epoch and plot the curve (lengthens the train command)" },
    dataDir: { type: 'string', valueName: 'dir', description: DATA_DIR_HELP },
    workers: { type: 'integer', min: 0, max: 256, valueName: 'n', description: "sublinear workers (default: sublinear train's default)" },
    threads: { type: 'integer', min: 1, max: 256, default: availableParallelism(), valueName: 'n', description: 'threads of the anchors and fastText (default: number of cores)' },
    epochs: { type: 'integer', min: 1, valueName: 'n', description: "sublinear epochs (default: sublinear train's default)" },
    fasttextEpochs: { type: 'integer', min: 1, default: 30, valueName: 'n', description: 'fastText epochs' },
    fasttextLrOva: { type: 'number', min: 0, default: 0.25, valueName: 'x', description: 'fastText learning rate with -loss ova' },
    fasttextLrHs: { type: 'number', min: 0, default: 0.5, valueName: 'x', description: 'fastText learning rate with -loss hs' },
    cacheDir: { type: 'string', valueName: 'dir', description: 'cache of the generated synthetic datasets (default: <tmpdir>/sublinear-bench-cache)' },
    keep: { type: 'boolean', description: 'keep the working folder (split data, configs, fastText files and models)' },
    verbose: { type: 'boolean', description: "show the children's progress output" },
    json: { type: 'boolean', description: 'end with the results as one JSON line on stdout' },
    markdown: { type: 'boolean', description: 'end with one Markdown table of every dataset: P@k, times, peak RSS, the fastest anchor over sublinear, sublinear\'s largest phases' },
  },
  examples: ['--datasets bibtex', '--quick --json', '--datasets debian-deps,debian-deps-tail --systems sublinear,omikuji', '--datasets amazon-670k --workers 2 --json'],
  run: (o, io) => run(o, io),
});

await benchMain(import.meta.url, accuracyCmd, 'npm run bench:accuracy --');
