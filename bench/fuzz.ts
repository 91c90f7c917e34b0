// Hostile-input fuzzing of everything sublinear reads from disk: the XC and LIBSVM readers
// (datasets/), model files (Network.load) and checkpoints (readCheckpoint, Network.resume).
//
//   node dist/bench/fuzz.js [--cases N] [--seed S] [--targets xc,libsvm,model,checkpoint]
//                           [--time-limit-ms T] [--keep] [--json]
//
// Defaults: --cases 2000 (spread over the targets), --seed 1, every target (xc, libsvm, model, checkpoint,
// crafted-model, crafted-checkpoint), --time-limit-ms 2000.
// Every case is derived from (seed, case index) alone, so a failure is reproduced by its pair. Files
// of failing cases are kept in the printed folder; with --keep, all are.
//
// The contract checked for each case:
// - readers: either a dataset that satisfies the CSR invariants of src/datasets/csr.ts (offsets start at 0
//   and are monotone, ids < dims and strictly increasing within a row, values finite, array lengths
//   consistent), or a DataFormatError naming the file and a line inside it. Files the generator wrote
//   without mutation must come back exactly as generated. Nothing else may be thrown (a RangeError from
//   a huge allocation, a TypeError...).
// - model and checkpoint files: any mutation of the bytes must be refused with an Error whose message
//   starts with the path (the checksum covers every byte, so nothing mutated may load).
// - crafted-model, crafted-checkpoint: files with hostile structure behind a valid checksum (absurd or
//   inconsistent dimensions, missing/duplicate/overlapping sections, wrong dtypes and lengths, NaN/Inf,
//   step counters near 2^32): each loads into a consistent network or is refused cleanly, under a memory
//   limit; see bench/fuzz-structured.ts.
// - every target: each case finishes within the time limit, and grows ArrayBuffer memory by less than
//   64 MiB (a file of a few kB that declares billions of points must not allocate for them).
// The runner executes cases in a worker thread and a watchdog terminates it if one case hangs, naming
// the case; the test suite (test/bench/fuzz.test.ts) calls runFuzz in-process with a small count.
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CaseRng } from './case-rng.js';
import { fileURLToPath } from 'node:url';
import { isMainThread, parentPort, Worker, workerData } from 'node:worker_threads';
import type { SparseDataset } from '../src/datasets/csr.js';
import { DataFormatError } from '../src/datasets/errors.js';
import { readLibsvm } from '../src/datasets/libsvm-reader.js';
import { readXC } from '../src/datasets/xc-reader.js';
import { Network } from '../src/network/network.js';
import { readCheckpoint } from '../src/train/checkpoint.js';
import { defineCommand, UsageError } from '../src/cli/args.js';
import { benchMain } from './cli.js';
import { craftedSeeds, runCraftedCase, type CraftedSeeds } from './fuzz-structured.js';
import { fit } from '../src/train/fit-network.js';

export type FuzzTarget = 'xc' | 'libsvm' | 'model' | 'checkpoint' | 'crafted-model' | 'crafted-checkpoint';
export const FUZZ_TARGETS: readonly FuzzTarget[] = ['xc', 'libsvm', 'model', 'checkpoint', 'crafted-model', 'crafted-checkpoint'];

/** Options of `runFuzz`. */
export interface FuzzOptions {
  /** Number of cases, dealt round-robin over `targets`. */
  cases: number;
  /** Seed of every random choice. */
  seed: number;
  /** Folder for the case files (created if missing). */
  dir: string;
  /** Targets to fuzz. Default: all four. */
  targets?: readonly FuzzTarget[];
  /** Longest a case may take. Default 2000 ms. */
  timeLimitMs?: number;
  /** Keep every case file (default: only failing cases' files are kept). */
  keep?: boolean;
  /** Called before each case (the runner's watchdog heartbeat). Default none. */
  onCase?: (index: number) => void;
}

export interface FuzzFailure {
  target: FuzzTarget;
  index: number;
  file: string;
  problem: string;
}

export interface FuzzReport {
  cases: number;
  /** Per target: cases whose input was accepted, and refused with a proper error. */
  outcomes: Record<FuzzTarget, { accepted: number; rejected: number }>;
  /** Reader cases whose file was left unmutated (checked for an exact round trip). */
  exact: number;
  failures: FuzzFailure[];
  seconds: number;
  /** Peak resident memory of the process that ran the cases, MiB (every case's allocations included). */
  peakRssMB: number;
}

// ---- valid documents ----

interface Doc {
  points: number;
  features: number;
  labels: number;
  rows: { labels: number[]; ids: number[]; values: number[] }[];
}

const VALUE_SPELLINGS: ((r: CaseRng) => string)[] = [
  (r) => String(r.int(10)),
  (r) => (r.next() * 4 - 2).toFixed(r.int(6)),
  (r) => `${(r.next() * 9 + 1).toFixed(3)}e${r.pick(['-', '+', ''])}${r.int(30)}`,
  (r) => `${r.pick(['-', '+', ''])}.${r.int(1000)}`,
  (r) => `${r.int(100)}.`,
  (r) => String(r.next() * 1e-30),
  (r) => '0.12345678901234567890123',
];

function randomDoc(r: CaseRng): Doc {
  const points = r.int(25);
  const features = 1 + r.int(r.chance(0.2) ? 100000 : 60);
  const labels = 1 + r.int(r.chance(0.2) ? 100000 : 20);
  const rows: Doc['rows'] = [];
  for (let i = 0; i < points; i++) {
    const nf = r.int(Math.min(features, 12) + 1), nl = r.int(Math.min(labels, 5) + 1);
    rows.push({ labels: distinct(r, nl, labels), ids: distinct(r, nf, features), values: [] });
  }
  return { points, features, labels, rows };
}

/** `n` distinct ids below `limit`, in random order (readers must sort them). */
function distinct(r: CaseRng, n: number, limit: number): number[] {
  const s = new Set<number>();
  while (s.size < n) s.add(r.int(limit));
  const a = [...s];
  if (!r.chance(0.3)) a.sort((x, y) => x - y);
  return a;
}

/** Renders a document; fills `values` with what each spelling denotes. */
function render(doc: Doc, r: CaseRng, format: 'xc' | 'libsvm', base: 0 | 1): string {
  const lines: string[] = [];
  if (format === 'xc') lines.push(`${doc.points} ${doc.features} ${doc.labels}`);
  const sep = () => (r.chance(0.1) ? '\t' : ' ');
  for (const row of doc.rows) {
    const spelled = row.ids.map(() => r.pick(VALUE_SPELLINGS)(r));
    row.values = spelled.map((s) => Math.fround(Number(s)));
    const feats = row.ids.map((id, k) => `${id + base}:${spelled[k]}`).join(sep());
    // A point without labels starts with whitespace (XC), or with its first feature (LIBSVM).
    const lab = row.labels.join(',');
    let line = lab === '' ? (format === 'xc' || feats === '' ? ' ' : '') + feats : `${lab}${feats ? sep() + feats : ''}`;
    if (r.chance(0.05)) line += '\r';
    lines.push(line);
  }
  return lines.join('\n') + (r.chance(0.8) ? '\n' : '');
}

// ---- mutations ----

const GARBAGE_TOKENS = [
  'nan', 'inf', '-inf', '1e999', '1e39', '-0', '99999999999999999999', '4294967295', '4294967296', '18446744073709551616',
  ':', '::', ',', ',,', '1,,2', ':5', '5:', '5:x', '-3:1', '3:-', '1:1:1', '\r', '\r\n', '\n\n', '\t', '  ', '\ufeff',
  '\u0000', '\u00ff', 'é', '1e', '1e+', '.e1', '0x10:1', '1:0x10', '1:1e-400', '1:3.4028236e38', '1:-3.4028234e38',
  '2,1', '1,1', '3:1 3:2', '+1:2', '1.5 2:1', '\v', '\f',
];

const HOSTILE_HEADERS = [
  '999999999999 5 5', '4294967295 4294967295 4294967295', '4294967296 1 1', '0 0 0', '1 0 0', '-1 2 3', '1e3 5 5',
  '3 5', '3 5 5 5', '', ' ', '3\t5\t5', '00003 005 05', '3 5 5\r', '1 99999999999999999999 1',
];

function mutate(bytes: Buffer, r: CaseRng, format: 'xc' | 'libsvm' | 'binary'): Buffer {
  let b = Buffer.from(bytes);
  const n = 1 + r.int(3);
  for (let m = 0; m < n; m++) {
    const kind = r.int(format === 'binary' ? 6 : 9);
    const at = b.length ? r.int(b.length) : 0;
    switch (kind) {
      case 0: // bit flip
        if (b.length) b[at] ^= 1 << r.int(8);
        break;
      case 1: // byte overwrite
        if (b.length) b[at] = r.chance(0.5) ? r.int(256) : r.pick([32, 9, 10, 13, 58, 44, 45, 43, 46, 101, 48, 57, 0, 255]);
        break;
      case 2: // truncation
        b = b.subarray(0, r.int(b.length + 1));
        break;
      case 3: { // inserted garbage bytes
        const junk = Buffer.alloc(1 + r.int(16));
        for (let i = 0; i < junk.length; i++) junk[i] = r.int(256);
        b = Buffer.concat([b.subarray(0, at), junk, b.subarray(at)]);
        break;
      }
      case 4: { // deleted range
        const len = 1 + r.int(Math.max(1, b.length >> 3));
        b = Buffer.concat([b.subarray(0, at), b.subarray(Math.min(b.length, at + len))]);
        break;
      }
      case 5: { // a zeroed or 0xff-filled range (sector-sized damage)
        const len = 1 + r.int(64);
        b.fill(r.chance(0.5) ? 0 : 0xff, at, Math.min(b.length, at + len));
        break;
      }
      case 6: { // inserted token
        const tok = Buffer.from(r.pick(GARBAGE_TOKENS), 'utf8');
        b = Buffer.concat([b.subarray(0, at), tok, b.subarray(at)]);
        break;
      }
      case 7: { // a numeric token replaced by a huge or odd number
        const s = b.toString('latin1');
        const re = /\d+/g;
        const matches = [...s.matchAll(re)];
        if (matches.length) {
          const mm = r.pick(matches);
          const rep = r.pick(['99999999999999999999', '4294967295', '4294967296', '1e308', '0', '00000000000000000001', String(2 ** 53 + 1)]);
          b = Buffer.from(s.slice(0, mm.index) + rep + s.slice(mm.index! + mm[0].length), 'latin1');
        }
        break;
      }
      case 8: { // a hostile header (XC) or a duplicated / shuffled line
        const s = b.toString('latin1');
        const lines = s.split('\n');
        if (format === 'xc' && r.chance(0.6)) lines[0] = r.pick(HOSTILE_HEADERS);
        else if (lines.length > 1) {
          const i = r.int(lines.length), j = r.int(lines.length);
          if (r.chance(0.5)) lines.splice(j, 0, lines[i]!);
          else [lines[i], lines[j]] = [lines[j]!, lines[i]!];
        }
        b = Buffer.from(lines.join('\n'), 'latin1');
        break;
      }
    }
  }
  return b;
}

/** A file of random bytes drawn mostly from the formats' own alphabet. */
function randomText(r: CaseRng): Buffer {
  const alphabet = '0123456789:, \t\n\r.-+eE';
  const out = Buffer.alloc(r.int(400));
  for (let i = 0; i < out.length; i++) out[i] = r.chance(0.9) ? alphabet.charCodeAt(r.int(alphabet.length)) : r.int(256);
  return out;
}

// ---- checks ----

/** The first violated CSR invariant of `d`, or null. */
export function csrProblem(d: SparseDataset): string | null {
  const { points, features, labels } = d;
  for (const [k, v] of [['points', points], ['features', features], ['labels', labels]] as const) {
    if (!Number.isInteger(v) || v < 0 || v > 0xffffffff) return `${k} = ${v} is not a u32`;
  }
  if (d.offsets.length !== points + 1 || d.labelOffsets.length !== points + 1) return 'offsets length is not points + 1';
  if (d.offsets[0] !== 0 || d.labelOffsets[0] !== 0) return 'offsets do not start at 0';
  if (d.offsets[points] !== d.indices.length || d.indices.length !== d.values.length) return 'nnz disagrees with indices/values lengths';
  if (d.labelOffsets[points] !== d.labelIndices.length) return 'label count disagrees with labelIndices length';
  for (let i = 0; i < points; i++) {
    if (d.offsets[i + 1]! < d.offsets[i]!) return `offsets decrease at row ${i}`;
    if (d.labelOffsets[i + 1]! < d.labelOffsets[i]!) return `labelOffsets decrease at row ${i}`;
  }
  for (let i = 0; i < points; i++) {
    const a = d.offsets[i]!, b = d.offsets[i + 1]!;
    for (let k = a; k < b; k++) {
      if (d.indices[k]! >= features) return `row ${i}: feature id ${d.indices[k]} >= features ${features}`;
      if (k > a && d.indices[k]! <= d.indices[k - 1]!) return `row ${i}: feature ids not strictly increasing`;
      if (!Number.isFinite(d.values[k]!)) return `row ${i}: non-finite value ${d.values[k]}`;
    }
    const la = d.labelOffsets[i]!, lb = d.labelOffsets[i + 1]!;
    for (let k = la; k < lb; k++) {
      if (d.labelIndices[k]! >= labels) return `row ${i}: label id ${d.labelIndices[k]} >= labels ${labels}`;
      if (k > la && d.labelIndices[k]! <= d.labelIndices[k - 1]!) return `row ${i}: label ids not strictly increasing`;
    }
  }
  return null;
}

/** Where `d` differs from the document it was generated from, or null. */
function docProblem(d: SparseDataset, doc: Doc, format: 'xc' | 'libsvm'): string | null {
  if (d.points !== doc.points) return `points ${d.points}, generated ${doc.points}`;
  if (format === 'xc' && (d.features !== doc.features || d.labels !== doc.labels)) return 'dims differ from the header';
  for (let i = 0; i < doc.points; i++) {
    const row = doc.rows[i]!;
    const order = row.ids.map((_, k) => k).sort((x, y) => row.ids[x]! - row.ids[y]!);
    const a = d.offsets[i]!;
    if (d.offsets[i + 1]! - a !== order.length) return `row ${i}: ${d.offsets[i + 1]! - a} features, generated ${order.length}`;
    for (let k = 0; k < order.length; k++) {
      if (d.indices[a + k] !== row.ids[order[k]!] || !Object.is(d.values[a + k], row.values[order[k]!])) {
        return `row ${i}: feature ${k} is ${d.indices[a + k]}:${d.values[a + k]}, generated ${row.ids[order[k]!]}:${row.values[order[k]!]}`;
      }
    }
    const labs = [...row.labels].sort((x, y) => x - y);
    const got = Array.from(d.labelIndices.subarray(d.labelOffsets[i]!, d.labelOffsets[i + 1]!));
    if (got.join(',') !== labs.join(',')) return `row ${i}: labels ${got}, generated ${labs}`;
  }
  return null;
}

const MEMORY_LIMIT = 64 * 1024 * 1024;

/** Runs `cases` fuzz cases; never throws for a case's outcome (failures are collected). */
export async function runFuzz(opts: FuzzOptions): Promise<FuzzReport> {
  const t0 = performance.now();
  const targets = opts.targets ?? FUZZ_TARGETS;
  const limit = opts.timeLimitMs ?? 2000;
  await mkdir(opts.dir, { recursive: true });
  const outcomes = Object.fromEntries(FUZZ_TARGETS.map((t) => [t, { accepted: 0, rejected: 0 }])) as FuzzReport['outcomes'];
  const failures: FuzzFailure[] = [];
  let exact = 0;
  const seeds: Partial<Record<'model' | 'checkpoint', Buffer>> = {};
  if (targets.includes('model') || targets.includes('checkpoint')) Object.assign(seeds, await seedFiles(opts.dir));
  // Structure-aware cases (bench/fuzz-structured.ts): valid checksums, hostile structure.
  const crafted: CraftedSeeds | null = targets.some((t) => t.startsWith('crafted-')) ? await craftedSeeds(opts.dir) : null;

  for (let index = 0; index < opts.cases; index++) {
    opts.onCase?.(index);
    const target = targets[index % targets.length]!;
    const r = new CaseRng(opts.seed, index);
    const file = join(opts.dir, `case-${index}.${target === 'xc' ? 'txt' : target === 'libsvm' ? 'svm' : 'bin'}`);
    const mem0 = process.memoryUsage().arrayBuffers;
    const c0 = performance.now();
    let problem: string | null = null;
    let accepted = false;
    try {
      if (target === 'xc' || target === 'libsvm') {
        const base: 0 | 1 = target === 'xc' ? 0 : r.chance(0.8) ? 1 : 0;
        let doc: Doc | null = null;
        let bytes: Buffer;
        if (r.chance(0.1)) bytes = randomText(r);
        else {
          doc = randomDoc(r);
          bytes = Buffer.from(render(doc, r, target, base), 'latin1');
          if (!r.chance(0.15)) {
            bytes = mutate(bytes, r, target);
            doc = null;
          }
        }
        await writeFile(file, bytes);
        let d: SparseDataset | null = null;
        try {
          // Small chunks put line and token boundaries across reads (the streaming carry-over logic).
          const chunkBytes = r.pick([undefined, undefined, 16, 17, 31, 64, 257]);
          d = target === 'xc' ? await readXC(file, { chunkBytes }) : await readLibsvm(file, { oneBased: base === 1, chunkBytes });
        } catch (e) {
          problem = readerErrorProblem(e, file, bytes);
        }
        if (d) {
          accepted = true;
          problem = csrProblem(d);
          if (!problem && doc) {
            problem = docProblem(d, doc, target);
            exact++;
          }
        }
      } else if (target === 'crafted-model' || target === 'crafted-checkpoint') {
        const out = await runCraftedCase(target === 'crafted-model' ? 'model' : 'checkpoint', crafted!, r, file);
        accepted = out.accepted;
        if (out.problem) problem = `${out.problem} (mutations: ${out.did.join('; ')})`;
      } else {
        const original = seeds[target as 'model' | 'checkpoint']!;
        let bytes = mutate(original, r, 'binary');
        if (bytes.equals(original)) bytes = Buffer.concat([original, Buffer.from([r.int(256)])]);
        await writeFile(file, bytes);
        try {
          if (target === 'model') await Network.load(file);
          else await readCheckpoint(file, (c) => new Network(c));
          accepted = true;
          problem = 'a mutated file was accepted';
        } catch (e) {
          if (!(e instanceof Error)) problem = `threw a non-Error ${String(e)}`;
          else if (!e.message.startsWith(`${file}: `)) problem = `error does not name the file: ${e.name}: ${e.message}`;
        }
      }
    } catch (e) {
      problem = `harness error: ${(e as Error).stack ?? String(e)}`;
    }
    const ms = performance.now() - c0;
    const grown = process.memoryUsage().arrayBuffers - mem0;
    if (!problem && ms > limit) problem = `took ${ms.toFixed(0)} ms (limit ${limit} ms)`;
    if (!problem && grown > MEMORY_LIMIT) problem = `ArrayBuffer memory grew by ${(grown / 2 ** 20).toFixed(0)} MiB`;
    if (problem) failures.push({ target, index, file, problem });
    else {
      outcomes[target][accepted ? 'accepted' : 'rejected']++;
      if (!opts.keep) await rm(file, { force: true });
    }
  }
  return { cases: opts.cases, outcomes, exact, failures, seconds: (performance.now() - t0) / 1000, peakRssMB: Math.round(process.resourceUsage().maxRSS / 1024) };
}

/** Null if `e` is a proper reader refusal of `file`, else what is wrong with it. */
function readerErrorProblem(e: unknown, file: string, bytes: Buffer): string | null {
  if (!(e instanceof DataFormatError)) return `threw ${(e as Error)?.name ?? typeof e} instead of DataFormatError: ${(e as Error)?.message ?? String(e)}`;
  if (e.file !== file || !e.message.startsWith(`${file}:`)) return `error does not name the file: ${e.message}`;
  // Lines are counted by '\n'; an unterminated last line still counts, and "ends after" may point one past it.
  let lines = 1;
  for (const c of bytes) if (c === 10) lines++;
  if (!(e.line >= 1 && e.line <= lines + 1)) return `error line ${e.line} is outside the file's ${lines} lines: ${e.message}`;
  return null;
}

/** A small trained model and checkpoint to mutate. */
async function seedFiles(dir: string): Promise<{ model: Buffer; checkpoint: Buffer }> {
  const { synthesize } = await import('../src/datasets/synth.js');
  const data = synthesize({ shape: 'tiny', points: 300, seed: 5 });
  const net = new Network({
    inputDim: data.features,
    layers: [{ size: 8 }, { size: data.labels, sampling: { hash: 'dwta', K: 2, L: 4, budget: 8 } }],
    seed: 2,
  });
  const ck = join(dir, 'seed-ckpt');
  await fit(net, data, { epochs: 1, workers: 0, checkpoint: { dir: ck, every: 1000 } });
  const model = join(dir, 'seed-model.sl');
  await net.save(model);
  const { listCheckpoints } = await import('../src/train/checkpoint.js');
  const [latest] = await listCheckpoints(ck);
  const out = { model: await readFile(model), checkpoint: await readFile(latest!.file) };
  await rm(ck, { recursive: true, force: true });
  await rm(model, { force: true });
  return out;
}

// ---- the command-line runner ----

interface CliArgs {
  cases: number;
  seed: number;
  targets: FuzzTarget[];
  timeLimitMs: number;
  keep: boolean;
  json: boolean;
}

export const fuzzCmd = defineCommand({
  name: 'bench/fuzz',
  summary: 'Hostile-input fuzzing of the XC and LIBSVM readers, model files and checkpoints.',
  description:
    'Every case is derived from (seed, case index) alone, so a failure is reproduced by its pair. Files of\n' +
    'failing cases are kept in the printed folder; with --keep, all are. Exit code 1 when a case fails or hangs.',
  flags: {
    cases: { type: 'integer', min: 1, default: 2000, valueName: 'n', description: 'cases, spread over the targets' },
    seed: { type: 'integer', min: 0, default: 1, valueName: 's', description: 'seed of every case' },
    targets: { type: 'string', default: FUZZ_TARGETS.join(','), valueName: 'list', description: 'comma-separated targets' },
    timeLimitMs: { type: 'integer', min: 1, default: 2000, valueName: 'ms', description: 'time limit of one case (a case hung for 5x this stops the run)' },
    keep: { type: 'boolean', description: 'keep the files of every case' },
    json: { type: 'boolean', description: 'print only the JSON report' },
  },
  run: async (o) => {
    const targets = o.targets.split(',');
    for (const t of targets) {
      if (!FUZZ_TARGETS.includes(t as FuzzTarget)) throw new UsageError(`unknown target '${t}' in --targets (targets: ${FUZZ_TARGETS.join(', ')})`);
    }
    return fuzzInWorker({ ...o, targets: targets as FuzzTarget[] });
  },
});

/**
 * Runs the cases in a worker thread while this thread watches a heartbeat (the index and start time of
 * the current case): a case stuck in a synchronous loop cannot be interrupted from its own thread.
 */
async function fuzzInWorker(a: CliArgs): Promise<number> {
  const dir = await mkdtemp(join(tmpdir(), 'sublinear-fuzz-'));
  const beat = new Float64Array(new SharedArrayBuffer(16)); // [case index, start time (ms since epoch)]
  beat[0] = -1;
  const worker = new Worker(fileURLToPath(import.meta.url), { workerData: { opts: { ...a, dir }, beat } });
  const report = await new Promise<FuzzReport>((resolve, reject) => {
    const watchdog = setInterval(() => {
      const index = beat[0]!;
      // Worker start-up and the seed files are not timed; a case gets 5x its limit before it counts as hung.
      if (index >= 0 && Date.now() - beat[1]! > 5 * a.timeLimitMs) {
        clearInterval(watchdog);
        void worker.terminate();
        reject(new Error(`case ${index} (seed ${a.seed}) hung for more than ${5 * a.timeLimitMs} ms; its file is in ${dir}`));
      }
    }, 200);
    worker.once('message', (r: FuzzReport) => {
      clearInterval(watchdog);
      resolve(r);
    });
    worker.once('error', (e) => {
      clearInterval(watchdog);
      reject(e);
    });
  });
  await worker.terminate();
  if (!a.json) {
    process.stdout.write(`fuzz: ${report.cases} cases (seed ${a.seed}) in ${report.seconds.toFixed(1)} s; ${report.exact} exact round trips; peak RSS ${report.peakRssMB} MiB\n`);
    for (const t of a.targets) process.stdout.write(`  ${t}: ${report.outcomes[t].accepted} accepted, ${report.outcomes[t].rejected} refused cleanly\n`);
    for (const f of report.failures) process.stdout.write(`  FAIL ${f.target} case ${f.index} (${f.file}): ${f.problem}\n`);
    process.stdout.write(report.failures.length ? `${report.failures.length} failure(s); files kept in ${dir}\n` : 'no failures\n');
  }
  process.stdout.write(JSON.stringify({ ...report, seed: a.seed, dir: report.failures.length || a.keep ? dir : null }) + '\n');
  if (!report.failures.length && !a.keep) await rm(dir, { recursive: true, force: true });
  return report.failures.length ? 1 : 0;
}

if (!isMainThread && (workerData as { beat?: unknown } | null)?.beat) {
  const { opts, beat } = workerData as { opts: CliArgs & { dir: string }; beat: Float64Array };
  void runFuzz({
    cases: opts.cases, seed: opts.seed, dir: opts.dir, targets: opts.targets, timeLimitMs: opts.timeLimitMs, keep: opts.keep,
    onCase: (i) => {
      beat[1] = Date.now();
      beat[0] = i;
    },
  }).then((r) => parentPort!.postMessage(r));
} else if (isMainThread) {
  await benchMain(import.meta.url, fuzzCmd, 'node dist/bench/fuzz.js');
}
