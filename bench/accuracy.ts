// `npm run bench:accuracy`: P@1 against training seconds on extreme-classification datasets, for
// sublinear (defaults, hash tables off, dense output) and fastText (one-vs-all and hierarchical softmax).
//
//   npm run bench:accuracy -- [--datasets bibtex,delicious,amazon-670k,amazon-670k-200k | --quick] [--json]
//                             [--data-dir dir] [--workers 2] [--epochs n] [--fasttext-epochs 30]
//                             [--fasttext-lr-ova 0.25] [--fasttext-lr-hs 0.5]
//                             [--cache-dir dir] [--keep] [--verbose]
//
// Datasets (each skipped, with the reason printed, when its files are missing):
// - bibtex: the Extreme Classification Repository's Bibtex, split 1 (`sublinear data split`);
// - delicious: the repository's Delicious train/test files;
// - amazon-670k: synthetic at the Amazon-670K shape, 30,000 train / 2,000 test points, seed 7;
// - amazon-670k-200k: the same shape, 200,000 / 5,000 points, seed 7.
// The synthetic files are generated once with `sublinear data synth` and cached under --cache-dir
// (default: <tmpdir>/sublinear-bench-cache), keyed by shape, sizes and seed.
//
// Systems, each run in its own child process (so peak RSS and crashes are its own):
// - sublinear: `sublinear train --json --eval-every 1` with the default network for the data shape;
//   its P@1 curve is the per-epoch test P@1 of the result's `history` (the final point when absent);
// - sublinear, tables off: the default network with the output layer's sampling budget set to 0 (no
//   hash-table candidates: each sample's labels plus random negatives); skipped when the default output
//   layer is dense;
// - sublinear, dense output: the default network without the output layer's sampling (every label
//   computed); skipped when that is the default network already, and at amazon-670k-200k (too slow);
// - fastText ova / fastText hs: Debian's `fasttext supervised` (apt-get install fasttext) with
//   `-loss ova|hs -dim 128`, on the same points converted to fastText's text format; P@1, P@3, P@5 are
//   computed here from `fasttext predict` with the XC definition (test points without labels count
//   as misses; fastText's own `test` command leaves them out). A single point on the curve.
//
// Training seconds: sublinear's own trainSeconds (data loading and evaluation excluded); fastText's
// training loop, timed from its progress output on stderr (from the dictionary summary to the last
// progress line; data reading and model saving excluded, +-0.1 s), with the process's wall clock in the
// JSON as wallSeconds.
//
// Output: a table per dataset on stdout; with --json, one JSON line last on stdout:
//   { "datasets": [ { name, points, testPoints, features, labels, systems: [ { name, p1, p3, p5,
//     trainSeconds, peakRssMB, curve: [[seconds, p1], ...], note?, skipped?, error? } ] } ], "machine" }
// Writes bench/results/accuracy.json (datasets of earlier runs that were not run again are kept, each
// with its measuredAt) and bench/results/accuracy-<name>.svg (P@1 against training seconds).
import { spawn, spawnSync } from 'node:child_process';
import { closeSync, existsSync, mkdirSync, mkdtempSync, openSync, readFileSync, readSync, renameSync, rmSync, writeFileSync, writeSync } from 'node:fs';
import { availableParallelism, cpus, tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { packageRoot } from '../src/util/package-root.js';
import { defineCommand, UsageError, type CliIO } from '../src/cli/args.js';
import { defaultConfig, resolveConfig, type NetworkConfig } from '../src/network/config.js';
import { computeMetrics, NO_PREDICTION } from '../src/train/metrics.js';
import { readXC, parseXCHeader, type SparseDataset } from '../datasets/index.js';
import { runBenchChild } from './child.js';
import { plotCurves } from './plot.js';
import { benchMain } from './cli.js';
import { DATA_DIR_HELP, findDataset } from './data-dir.js';

const DATASETS = ['bibtex', 'delicious', 'amazon-670k', 'amazon-670k-200k'] as const;
type DatasetName = (typeof DATASETS)[number];
const QUICK: readonly DatasetName[] = ['bibtex', 'delicious'];

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
}

interface SystemResult {
  name: string;
  p1: number | null;
  p3: number | null;
  p5: number | null;
  trainSeconds: number | null;
  peakRssMB: number | null;
  /** [training seconds, test P@1] points. */
  curve: [number, number][];
  note?: string;
  skipped?: string;
  error?: string;
  samplesPerSec?: number;
  wallSeconds?: number;
}

interface DatasetResult {
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
    case 'bibtex': {
      const found = findDataset('bibtex', o.dataDir);
      if ('message' in found) return { skip: found.message };
      const [data, tr, tst] = found.files as [string, string, string];
      const out = join(work, 'bibtex');
      await cli(['data', 'split', data, '--train-split', tr, '--test-split', tst, '--column', '1', '--out', out], o);
      return { train: join(out, 'train.txt'), test: join(out, 'test.txt') };
    }
    case 'delicious': {
      const found = findDataset('delicious', o.dataDir);
      if ('message' in found) return { skip: found.message };
      const [train, test] = found.files as [string, string];
      return { train, test };
    }
    case 'amazon-670k':
      return synth('amazon-670k', 30000, 2000, 7, o, cacheDir);
    case 'amazon-670k-200k':
      return synth('amazon-670k', 200000, 5000, 7, o, cacheDir);
  }
}

/** Synthetic train/test files from `sublinear data synth`, cached by their arguments. */
async function synth(shape: string, train: number, test: number, seed: number, o: Options, cacheDir: string): Promise<Prepared> {
  const dir = join(cacheDir, `${shape}-train${train}-test${test}-seed${seed}`);
  const files = { train: join(dir, 'train.txt'), test: join(dir, 'test.txt') };
  if (existsSync(files.train) && existsSync(files.test)) {
    log(o, `  using cached ${dir}`);
    return files;
  }
  // Generated next to the cache entry and renamed into place, so an interrupted run leaves no partial entry.
  mkdirSync(cacheDir, { recursive: true });
  const tmp = `${dir}.partial-${process.pid}`;
  rmSync(tmp, { recursive: true, force: true });
  log(o, `  generating ${shape} (${train} train / ${test} test points, seed ${seed}) into ${dir}`);
  await cli(['data', 'synth', '--shape', shape, '--train', String(train), '--test', String(test), '--seed', String(seed), '--out', tmp], o);
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

async function runSublinear(name: string, p: Prepared, trainPoints: number, config: NetworkConfig | null, configFile: string | null, o: Options, extra: string[] = []): Promise<SystemResult> {
  const args = ['train', '--train', p.train, '--test', p.test, '--json', '--eval-every', '1', ...extra];
  if (o.workers !== undefined) args.push('--workers', String(o.workers));
  if (o.epochs !== undefined && !extra.includes('--epochs')) args.push('--epochs', String(o.epochs));
  if (configFile) args.push('--config', configFile);
  try {
    const r = await runBenchChild<TrainSummary>(CLI, args, o.verbose);
    const history = Array.isArray(r.history) && r.history.length > 0;
    // Epochs actually trained (with early stopping, `epochs` may be the limit rather than the count).
    const epochs = history ? String(r.history!.length)
      : finite(r.samples) && trainPoints > 0 ? `~${Math.round((10 * r.samples) / trainPoints) / 10}` // samples / training points
        : r.epochs;
    return {
      name,
      p1: orNull(r.p1), p3: orNull(r.p3), p5: orNull(r.p5),
      trainSeconds: orNull(r.trainSeconds), peakRssMB: orNull(r.peakRssMB),
      curve: sublinearCurve(r),
      ...(finite(r.samplesPerSec) ? { samplesPerSec: r.samplesPerSec } : {}),
      note: [
        `${epochs ?? '?'} epochs trained, ${finite(r.workers) ? r.workers : '?'} workers`,
        extra.length ? extra.join(' ') : null,
        config ? outputNote(config) : null,
        history ? null : 'no per-epoch history: final point only',
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

/** Peak RSS (VmHWM) of a running process in MiB, or 0 once it is gone. */
function vmHwmMB(pid: number): number {
  try {
    const m = /^VmHWM:\s+(\d+)\s+kB/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Math.round(Number(m[1]) / 1024) : 0;
  } catch {
    return 0;
  }
}

interface Run {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderrTail: string;
  wallSeconds: number;
  /** Highest VmHWM seen (sampled every 50 ms while it runs). */
  peakRssMB: number;
  /** Seconds since the start when stderr first showed `Number of labels` (fastText's dictionary summary). */
  labelsAt: number | null;
  /** Seconds since the start when stderr last showed `Progress:` (fastText's training progress). */
  lastProgressAt: number | null;
}

/** Runs a program, sampling its peak RSS from /proc while it runs. */
function runMeasured(cmd: string, args: string[], o: Options, keepStdout: boolean): Promise<Run> {
  return new Promise((resolvePromise, reject) => {
    const t0 = performance.now();
    const child = spawn(cmd, args, { stdio: ['ignore', keepStdout ? 'pipe' : 'ignore', 'pipe'] });
    let stdout = '', tail = '', peak = 0;
    let labelsAt: number | null = null, lastProgressAt: number | null = null;
    const poll = setInterval(() => {
      if (child.pid) peak = Math.max(peak, vmHwmMB(child.pid));
    }, 50);
    child.stdout?.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr!.on('data', (d: Buffer) => {
      const s = d.toString(), now = (performance.now() - t0) / 1000;
      const seen = tail.slice(-32) + s; // a marker may straddle two chunks
      if (labelsAt === null && seen.includes('Number of labels')) labelsAt = now;
      if (seen.includes('Progress:')) lastProgressAt = now;
      tail = (tail + s).slice(-4000);
      if (o.verbose) process.stderr.write(s);
    });
    child.on('error', (e) => {
      clearInterval(poll);
      reject(e);
    });
    child.on('close', (code, signal) => {
      clearInterval(poll);
      resolvePromise({ code, signal, stdout, stderrTail: tail, wallSeconds: (performance.now() - t0) / 1000, peakRssMB: peak, labelsAt, lastProgressAt });
    });
  });
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

async function runDataset(name: DatasetName, o: Options, cacheDir: string, work: string): Promise<DatasetResult> {
  log(o, `${name}: preparing data`);
  const p = await prepare(name, o, cacheDir, work);
  if ('skip' in p) {
    log(o, `${name}: skipped (${p.skip})`);
    return { name, points: null, testPoints: null, features: null, labels: null, systems: [], skipped: p.skip };
  }
  const h = readHeader(p.train), ht = readHeader(p.test);
  const shape = { features: h.features, labels: h.labels, points: h.points };
  const systems: SystemResult[] = [];
  const step = async (label: string, f: () => Promise<SystemResult>) => {
    log(o, `${name}: ${label} ...`);
    const r = await f();
    systems.push(r);
    if (r.skipped) log(o, `  skipped: ${r.skipped}`);
    else if (r.error) log(o, `  failed: ${r.error}`);
    else log(o, `  P@1 ${r.p1?.toFixed(4)} in ${r.trainSeconds?.toFixed(2)} s, peak RSS ${r.peakRssMB ?? '-'} MB`);
  };

  // The default network for this shape, as `sublinear train` builds it without --config (the same seed).
  const base = defaultConfig(shape, 1);
  const sampled = base.layers.at(-1)?.sampling;
  await step('sublinear', () => runSublinear('sublinear', p, h.points, base, null, o));

  // The other side of the defaults rule's choice about the tables' candidates (on below one training
  // point per ten labels): 'tables off' where the default uses them, 'tables on' where it does not.
  const tablesOn = sampled?.budget === 0;
  const variant = tablesOn ? 'sublinear, tables on' : 'sublinear, tables off';
  if (!sampled) {
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
    else await step(variant, () => runSublinear(variant, p, h.points, c, file, o));
  }

  if (!sampled) {
    systems.push(skipped('sublinear, dense output', 'the same network as "sublinear": the output layer is dense by default at this size'));
  } else if (name === 'amazon-670k-200k') {
    systems.push(skipped('sublinear, dense output', `too slow: a dense ${h.labels}-label softmax over ${h.points} points per epoch`));
  } else {
    const c: NetworkConfig = { ...base, layers: base.layers.map((l, i) => (i === base.layers.length - 1 ? { size: l.size, activation: l.activation } : l)) };
    const file = join(work, `${name}-dense-output.json`);
    writeFileSync(file, JSON.stringify(c, null, 2) + '\n');
    // A dense softmax over 10^5+ labels trains at tens of points per second: one epoch, at the rate the
    // defaults give a sampled output (the dense default, 1e-3, barely moves it in one epoch).
    const big = h.labels >= DENSE_ONE_EPOCH_LABELS;
    await step('sublinear, dense output', () => runSublinear('sublinear, dense output', p, h.points, c, file, o, big ? ['--epochs', '1', '--lr', '0.01'] : []));
  }

  if (!fasttextInstalled()) {
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
  return { name, points: h.points, testPoints: ht.points, features: h.features, labels: h.labels, systems, measuredAt: new Date().toISOString() };
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

function table(d: DatasetResult): string {
  if (d.skipped) return `\n${d.name}: skipped (${d.skipped})\n`;
  const lines = [
    '',
    `${d.name}  (${n(d.points)} train / ${n(d.testPoints)} test points, ${n(d.features)} features, ${n(d.labels)} labels)`,
    `${'system'.padEnd(24)} ${'P@1'.padStart(6)} ${'P@3'.padStart(6)} ${'P@5'.padStart(6)} ${'train s'.padStart(8)} ${'peak RSS MB'.padStart(11)}  note`,
  ];
  const f = (x: number | null) => (x === null ? '-' : x.toFixed(4)).padStart(6);
  for (const s of d.systems) {
    const note = s.skipped ? `skipped: ${s.skipped}` : s.error ? `failed: ${s.error}` : s.note ?? '';
    lines.push(`${s.name.padEnd(24)} ${f(s.p1)} ${f(s.p3)} ${f(s.p5)} ${(s.trainSeconds === null ? '-' : s.trainSeconds.toFixed(2)).padStart(8)} ${String(s.peakRssMB ?? '-').padStart(11)}  ${note}`);
  }
  return lines.join('\n') + '\n';
}

function plot(d: DatasetResult, machine: { cpu: string; cores: number }): string {
  const series = d.systems.filter((s) => s.curve.length).map((s) => ({ name: s.name, points: s.curve }));
  return plotCurves({
    title: `${d.name}: P@1 against training time`,
    subtitle: `${n(d.points)} train / ${n(d.testPoints)} test points, ${n(d.features)} features, ${n(d.labels)} labels; ${machine.cores} cores (${machine.cpu})`,
    xLabel: 'training time (s)', yLabel: 'P@1 (test set)', series, logX: true,
  });
}

/** Replaces the datasets of this run in bench/results/accuracy.json, keeping the others. */
function writeResults(dir: string, datasets: DatasetResult[], machine: { cpu: string; cores: number }): void {
  const file = join(dir, 'accuracy.json');
  let kept: DatasetResult[] = [];
  if (existsSync(file)) {
    try {
      kept = (JSON.parse(readFileSync(file, 'utf8')) as { datasets?: DatasetResult[] }).datasets ?? [];
    } catch {
      kept = [];
    }
  }
  const merged = [...kept];
  for (const d of datasets) {
    const i = merged.findIndex((k) => k.name === d.name);
    if (i < 0) merged.push(d);
    else if (!d.skipped) merged[i] = d; // a dataset missing now keeps its earlier measurement
  }
  merged.sort((a, b) => DATASETS.indexOf(a.name as DatasetName) - DATASETS.indexOf(b.name as DatasetName));
  writeFileSync(file, JSON.stringify({ datasets: merged, machine }, null, 2) + '\n');
}

async function run(o: Options, io: CliIO): Promise<number> {
  if (o.quick && o.datasets) throw new UsageError('--quick and --datasets cannot be combined');
  const names: DatasetName[] = o.quick ? [...QUICK] : o.datasets ? [] : [...DATASETS];
  if (o.datasets) {
    for (const w of o.datasets.split(',').map((s) => s.trim()).filter(Boolean)) {
      if (!(DATASETS as readonly string[]).includes(w)) throw new UsageError(`unknown dataset '${w}' (known: ${DATASETS.join(', ')})`);
      if (!names.includes(w as DatasetName)) names.push(w as DatasetName);
    }
    if (!names.length) throw new UsageError('--datasets needs at least one dataset');
  }
  const root = packageRoot();
  if (!existsSync(join(root, 'dist', 'src', 'cli.js'))) throw new Error('dist/src/cli.js not found: build first (npm run build)');
  const cacheDir = o.cacheDir ? resolve(o.cacheDir) : join(tmpdir(), 'sublinear-bench-cache');
  const work = mkdtempSync(join(tmpdir(), 'sublinear-accuracy-'));
  const machine = { cpu: cpuModel(), cores: availableParallelism() };
  const datasets: DatasetResult[] = [];
  try {
    for (const name of names) {
      const d = await runDataset(name, o, cacheDir, work);
      datasets.push(d);
      io.out(table(d));
    }
  } finally {
    if (o.keep) io.err(`kept the working files in ${work}\n`);
    else rmSync(work, { recursive: true, force: true });
  }
  const resultsDir = join(root, 'bench', 'results');
  mkdirSync(resultsDir, { recursive: true });
  for (const d of datasets) if (!d.skipped) writeFileSync(join(resultsDir, `accuracy-${d.name}.svg`), plot(d, machine));
  writeResults(resultsDir, datasets, machine);
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
  summary: 'P@1 against training seconds: sublinear (defaults, tables off, dense output) and fastText (ova, hs).',
  description:
    'Datasets: bibtex (XC repository, split 1), delicious, amazon-670k (synthetic, 30,000 points) and\n' +
    'amazon-670k-200k (synthetic, 200,000 points); one whose files are missing is skipped with the reason.\n' +
    'Every system runs in its own process. Writes bench/results/accuracy.json and accuracy-<dataset>.svg.\n' +
    'fastText rows need Debian\'s fasttext (apt-get install fasttext).',
  flags: {
    datasets: { type: 'string', valueName: 'list', description: `comma-separated, of ${DATASETS.join(', ')} (default: all)` },
    quick: { type: 'boolean', description: `only ${QUICK.join(' and ')}` },
    dataDir: { type: 'string', valueName: 'dir', description: DATA_DIR_HELP },
    workers: { type: 'integer', min: 0, max: 256, valueName: 'n', description: "sublinear workers (default: sublinear train's default)" },
    threads: { type: 'integer', min: 1, max: 256, default: availableParallelism(), valueName: 'n', description: 'fastText threads (default: number of cores)' },
    epochs: { type: 'integer', min: 1, valueName: 'n', description: "sublinear epochs (default: sublinear train's default)" },
    fasttextEpochs: { type: 'integer', min: 1, default: 30, valueName: 'n', description: 'fastText epochs' },
    fasttextLrOva: { type: 'number', min: 0, default: 0.25, valueName: 'x', description: 'fastText learning rate with -loss ova' },
    fasttextLrHs: { type: 'number', min: 0, default: 0.5, valueName: 'x', description: 'fastText learning rate with -loss hs' },
    cacheDir: { type: 'string', valueName: 'dir', description: 'cache of the generated synthetic datasets (default: <tmpdir>/sublinear-bench-cache)' },
    keep: { type: 'boolean', description: 'keep the working folder (split data, configs, fastText files and models)' },
    verbose: { type: 'boolean', description: "show the children's progress output" },
    json: { type: 'boolean', description: 'end with the results as one JSON line on stdout' },
  },
  examples: ['--datasets bibtex', '--quick --json', '--datasets amazon-670k --workers 2 --json'],
  run: (o, io) => run(o, io),
});

await benchMain(import.meta.url, accuracyCmd, 'npm run bench:accuracy --');
