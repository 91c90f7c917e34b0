// `npm run bench`: sublinear against the dense baselines (TensorFlow.js wasm, PyTorch when installed),
// one system after the other, each in its own process (so peak RSS is its own), on the same data, network
// (sparse input -> 128 ReLU -> full softmax), batch size, learning rate, Adam and seed.
//
//   npm run bench -- [--full] [--json] [--datasets delicious,amazon-tta,amazon-670k] [--data-dir dir] [--verbose]
//   npm run bench -- --replot      (redraw the SVGs from bench/results/*.json)
//
// Datasets:
// - delicious: the Extreme Classification Repository's Delicious (<data dir>/delicious, see bench/data-dir.ts),
//   when present.
// - amazon-<L>: time to accuracy on the Amazon-670K input shape (135,909 features, ~75 nnz, ~5.45 labels
//   per point) with L labels and 10 L training points (default 2,000 labels: tfjs-wasm reaches its plateau,
//   ~0.98 P@1, in about 4 minutes here; at 5,000 labels it is still at ~0.68 after 4 minutes).
//   The dense baselines train for --tta-seconds (default 240) of training time.
//   tfjs-wasm cannot train the full 670,091-label network at all: its wasm heap is limited to 4 GiB.
// - amazon-670k: throughput (samples/s over a fixed number of batches) at the full 670,091-label shape.
// Writes bench/results/<name>.json and bench/results/<name>.svg (P@1 against training time).
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { availableParallelism, cpus } from 'node:os';
import { fileURLToPath } from 'node:url';
import { packageRoot } from '../src/util/package-root.js';
import { readXC } from '../src/datasets/index.js';
import type { SparseDataset } from '../src/datasets/csr.js';
import { commandArgv, defineCommand, UsageError } from '../src/cli/args.js';
import { benchMain } from './cli.js';
import { DATA_DIR_HELP, findDataset, requireDataset } from './data-dir.js';
import type { BaselineOptions, BaselineResult } from './baselines/common.js';
import { syntheticSplit } from './baselines/data.js';
import { pytorchAvailable, trainPytorch } from './baselines/pytorch.js';
import { trainSublinear } from './systems/sublinear.js';
import { plotCurves } from './plot.js';

const SYSTEMS = ['sublinear', 'tfjs', 'pytorch'] as const;
type System = (typeof SYSTEMS)[number];

interface DatasetPlan {
  name: string;
  kind: 'accuracy' | 'throughput';
  load(): Promise<{ train: SparseDataset; test?: SparseDataset }>;
  options(system: System): Omit<BaselineOptions, 'train' | 'test'>;
  /** Extra sublinear options. */
  sublinear?: { workers?: number; sampling?: null | Record<string, unknown> };
}

export const compareCmd = defineCommand({
  name: 'bench',
  summary: 'sublinear against dense TensorFlow.js (wasm) and PyTorch: the same data, network, batch size, learning rate, Adam and seed.',
  description:
    'Datasets: delicious (the Extreme Classification Repository\'s Delicious, when its files are found),\n' +
    'amazon-<labels> (time to accuracy on the Amazon-670K input shape), amazon-670k (throughput at the full\n' +
    'shape). Each system runs in its own process. Writes bench/results/<dataset>.json and .svg.',
  flags: {
    datasets: { type: 'string', valueName: 'list', description: 'comma-separated: delicious, amazon-tta, amazon-670k (default: all available)' },
    dataDir: { type: 'string', valueName: 'dir', description: DATA_DIR_HELP },
    full: { type: 'boolean', description: 'longer runs' },
    workers: { type: 'integer', min: 0, max: 256, default: 1, valueName: 'n', description: 'sublinear worker threads' },
    seed: { type: 'integer', min: 0, default: 1, valueName: 'n', description: 'data and initialisation seed' },
    lr: { type: 'number', min: 0, default: 1e-3, valueName: 'x', description: 'Adam learning rate' },
    ttaLabels: { type: 'integer', min: 1, default: 2000, valueName: 'n', description: 'labels of the time-to-accuracy dataset' },
    ttaSeconds: { type: 'number', min: 0, valueName: 's', description: 'training time of the dense baselines on it (default: 240, --full 600)' },
    pointsPerLabel: { type: 'integer', min: 1, default: 10, valueName: 'n', description: 'training points per label of the time-to-accuracy dataset' },
    replot: { type: 'boolean', description: 'only redraw the SVGs from bench/results/*.json' },
    verbose: { type: 'boolean', description: 'show the progress of each run' },
    json: { type: 'boolean', description: 'print only the JSON summary (the last stdout line)' },
    child: { type: 'choice', choices: SYSTEMS, description: 'internal: run this one system on --dataset in this process' },
    dataset: { type: 'string', valueName: 'name', description: 'internal: the dataset of --child' },
  },
  examples: ['--datasets amazon-670k --json', '--datasets delicious --data-dir ~/xc-data'],
  run: async (o) => main(o),
});

interface Args {
  datasets?: string; dataDir?: string; full: boolean; workers: number; seed: number; lr: number; ttaLabels: number;
  ttaSeconds?: number; pointsPerLabel: number; replot: boolean; verbose: boolean; json: boolean; child?: System; dataset?: string;
}

function plans(a: Args): DatasetPlan[] {
  const full = a.full;
  const seed = a.seed, lr = a.lr, batchSize = 128;
  const ttaLabels = a.ttaLabels;
  const ttaSeconds = a.ttaSeconds ?? (full ? 600 : 240);
  const base = { hidden: [128], batchSize, lr, seed };
  return [
    {
      name: 'delicious',
      kind: 'accuracy',
      async load() {
        const [train, test] = requireDataset('delicious', a.dataDir).files;
        return { train: await readXC(train!), test: await readXC(test!) };
      },
      options: (s) => ({ ...base, epochs: full ? 20 : s === 'tfjs' ? 4 : 5, evalEvery: { seconds: 2 }, evalPoints: 1000 }),
      sublinear: { sampling: null },
    },
    {
      name: `amazon-${ttaLabels}`,
      kind: 'accuracy',
      async load() {
        return syntheticSplit('amazon-670k', ttaLabels * a.pointsPerLabel, 2000, seed, { labels: ttaLabels });
      },
      options: (s) => ({ ...base, epochs: s === 'sublinear' ? (full ? 40 : 20) : 1000, maxSeconds: ttaSeconds, evalEvery: { seconds: full ? 20 : 10 }, evalPoints: 2000 }),
      sublinear: { sampling: { hash: 'dwta', K: 4, L: 32, budget: 400, minActive: 400 } },
    },
    {
      name: 'amazon-670k',
      kind: 'throughput',
      async load() {
        return syntheticSplit('amazon-670k', full ? 20000 : 6000, 0, seed);
      },
      options: (s) => ({
        ...base,
        maxBatches: s === 'tfjs' ? (full ? 8 : 2) : s === 'pytorch' ? (full ? 40 : 10) : full ? 150 : 40,
        warmupBatches: s === 'tfjs' ? 1 : s === 'pytorch' ? 3 : 0,
      }),
    },
  ];
}

async function runSystem(system: System, plan: DatasetPlan, a: Args): Promise<BaselineResult> {
  const { train, test } = await plan.load();
  const opts: BaselineOptions = { ...plan.options(system), train, ...(test && test.points > 0 ? { test } : {}) };
  if (a.verbose) opts.onEval = (r) => process.stderr.write(`  [${system}] t=${r.seconds.toFixed(1)}s P@1=${r.p1.toFixed(4)}\n`);
  if (system === 'sublinear') return trainSublinear({ ...opts, workers: a.workers, ...(plan.sublinear ?? {}) } as never);
  if (system === 'tfjs') {
    const { trainTfjs } = await import('./baselines/tfjs-dense.js');
    return trainTfjs({ ...opts, backend: 'wasm' });
  }
  return trainPytorch(opts);
}

/** Runs one (system, dataset) in a child process; resolves with its result or an error string. */
function runChild(system: System, dataset: string, passArgs: string[]): Promise<BaselineResult | { error: string }> {
  const self = fileURLToPath(import.meta.url);
  return new Promise((resolve) => {
    const child = spawn(process.execPath, ['--max-old-space-size=16384', self, ...passArgs, '--child', system, '--dataset', dataset], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '', err = '';
    child.stdout.on('data', (d) => (out += d));
    child.stderr.on('data', (d) => {
      err += d;
      if (passArgs.includes('--verbose')) process.stderr.write(d);
    });
    child.on('close', (code, signal) => {
      const last = out.trim().split('\n').at(-1) ?? '';
      if (code === 0) {
        try {
          return resolve(JSON.parse(last) as BaselineResult);
        } catch {
          /* fall through */
        }
      }
      const line = err.split('\n').filter((l) => l.trim()).at(-1) ?? '';
      const oom = /memory access out of bounds|out of memory/i.test(err) ? 'out of memory (the wasm heap is limited to 4 GiB); ' : '';
      resolve({ error: `${oom}exit ${code ?? signal}: ${line.slice(0, 300)}` });
    });
  });
}

/** NaN travels through JSON as null: both mean 'no value'. */
function finite(x: number | null | undefined): x is number {
  return typeof x === 'number' && Number.isFinite(x);
}

/** Seconds at which a P@1 curve first reaches `target`, or null. */
function secondsTo(curve: BaselineResult['curve'], target: number): number | null {
  for (const c of curve) if (c.p1 >= target) return c.seconds;
  return null;
}

interface SystemSummary {
  samplesPerSec: number | null;
  finalP1: number | null;
  secondsToP1: number | null;
  peakRssMB: number | null;
  trainSeconds?: number;
  error?: string;
}

const LABELS: Record<System, string> = { sublinear: 'sublinear (LSH-sampled)', tfjs: 'TensorFlow.js (wasm, dense)', pytorch: 'PyTorch (dense)' };

/** P@1 against training time, log time axis (points at t = 0, before training, are left out). */
function curvePlot(name: string, raw: Partial<Record<System, BaselineResult | { error: string }>>, denseSublinear: boolean): string {
  const series = SYSTEMS.flatMap((s) => {
    const r = raw[s];
    if (!r || 'error' in r) return [];
    const points = r.curve.filter((c) => c.seconds > 0).map((c) => [c.seconds, c.p1] as [number, number]);
    return points.length ? [{ name: s === 'sublinear' && denseSublinear ? 'sublinear (dense output)' : LABELS[s], points }] : [];
  });
  return plotCurves({
    title: `${name}: P@1 against training time (${availableParallelism()} cores)`,
    xLabel: 'wall-clock training time (s)', yLabel: 'P@1 (test subset)', series, logX: true,
  });
}

async function main(a: Args): Promise<number> {
  const all = plans(a);
  if (a.child) {
    const plan = all.find((p) => p.name === a.dataset);
    if (!plan) throw new UsageError(`--child needs --dataset, one of ${all.map((p) => p.name).join(', ')}`);
    const r = await runSystem(a.child, plan, a);
    process.stdout.write(JSON.stringify(r) + '\n');
    return 0;
  }
  if (a.replot) {
    // Redraw the plots of a finished run from bench/results/<name>.json.
    const dir = join(packageRoot(), 'bench', 'results');
    for (const p of all.filter((p) => p.kind === 'accuracy')) {
      const file = join(dir, `${p.name}.json`);
      if (!existsSync(file)) continue;
      const saved = JSON.parse(readFileSync(file, 'utf8')) as { raw: Partial<Record<System, BaselineResult | { error: string }>> };
      writeFileSync(join(dir, `${p.name}.svg`), curvePlot(p.name, saved.raw, p.sublinear?.sampling === null));
    }
    return 0;
  }
  const wanted = a.datasets !== undefined ? a.datasets.split(',') : null;
  const delicious = findDataset('delicious', a.dataDir);
  const selected = all.filter((p) => {
    if (wanted) return wanted.some((w) => p.name === w || (w === 'amazon-tta' && p.name.startsWith('amazon-') && p.kind === 'accuracy'));
    return p.name !== 'delicious' || 'files' in delicious;
  });
  if (wanted) {
    for (const w of wanted) {
      if (!selected.some((p) => p.name === w || (w === 'amazon-tta' && p.kind === 'accuracy' && p.name.startsWith('amazon-')))) {
        throw new UsageError(`unknown dataset '${w}' in --datasets (known: ${all.map((p) => p.name).join(', ')}, amazon-tta)`);
      }
    }
    if (selected.some((p) => p.name === 'delicious') && 'message' in delicious) throw new Error(delicious.message);
  }
  if (!wanted && 'message' in delicious) process.stderr.write(`note: skipping Delicious. ${delicious.message}\n`);
  const pass = commandArgv(compareCmd.spec, a as unknown as Record<string, unknown>, ['json', 'datasets', 'child', 'dataset', 'replot']);
  const torch = pytorchAvailable();
  const resultsDir = join(packageRoot(), 'bench', 'results');
  mkdirSync(resultsDir, { recursive: true });
  const datasets: unknown[] = [];
  const failures: string[] = [];
  for (const plan of selected) {
    const raw: Partial<Record<System, BaselineResult | { error: string }>> = {};
    for (const s of SYSTEMS) {
      if (s === 'pytorch' && !torch.ok) {
        raw[s] = { error: `not installed: ${torch.reason}` };
        continue;
      }
      process.stderr.write(`${plan.name}: ${s} ...\n`);
      raw[s] = await runChild(s, plan.name, pass);
      const r = raw[s]!;
      if ('error' in r) {
        process.stderr.write(`  ${r.error}\n`);
        // tfjs-wasm runs out of its 4 GiB heap at the full Amazon-670K shape: a finding, reported in its row.
        if (s === 'sublinear' || (s === 'tfjs' && plan.kind === 'accuracy')) failures.push(`${plan.name}/${s}: ${r.error}`);
      } else {
        if (r.diverged) failures.push(`${plan.name}/${s}: diverged (loss NaN/Inf)`);
        process.stderr.write(`  ${r.samplesPerSec.toFixed(1)} samples/s, final P@1 ${finite(r.finalP1) ? r.finalP1.toFixed(4) : '-'}, peak RSS ${Math.round(r.peakRssBytes / 2 ** 20)} MB\n`);
      }
    }
    const tf = raw.tfjs && !('error' in raw.tfjs) ? raw.tfjs : null;
    // The target is measured on the same eval subset as the curves: tfjs's last curve point minus 1 point.
    const target = tf && plan.kind === 'accuracy' && tf.curve.length ? tf.curve.at(-1)!.p1 - 0.01 : NaN;
    const systems: Record<string, SystemSummary> = {};
    for (const s of SYSTEMS) {
      const r = raw[s];
      if (!r || 'error' in r) {
        systems[s] = { samplesPerSec: null, finalP1: null, secondsToP1: null, peakRssMB: null, error: r ? r.error : 'not run' };
        continue;
      }
      systems[s] = {
        samplesPerSec: r.steadySamplesPerSec > 0 && Number.isFinite(r.steadySamplesPerSec) ? r.steadySamplesPerSec : r.samplesPerSec,
        finalP1: finite(r.finalP1) ? r.finalP1 : null,
        secondsToP1: Number.isNaN(target) ? null : secondsTo(r.curve, target),
        peakRssMB: Math.round(r.peakRssBytes / 2 ** 20),
        trainSeconds: r.seconds,
      };
    }
    const sl = systems.sublinear!, tfs = systems.tfjs!, pt = systems.pytorch!;
    const ratio = (x: number | null | undefined, y: number | null | undefined) => (x && y ? x / y : null);
    const entry = {
      name: plan.name,
      kind: plan.kind,
      labels: (await plan.load()).train.labels,
      // Time-to-accuracy entries: tfjs seconds to (its final subset P@1 - 1 point) over sublinear's; throughput entries: samples/s ratio.
      speedup: plan.kind === 'accuracy' ? ratio(tfs.secondsToP1, sl.secondsToP1) : ratio(sl.samplesPerSec, tfs.samplesPerSec),
      throughputVsTfjs: ratio(sl.samplesPerSec, tfs.samplesPerSec),
      throughputVsPytorch: ratio(sl.samplesPerSec, pt.samplesPerSec),
      targetP1: Number.isNaN(target) ? null : target,
      systems,
    };
    datasets.push(entry);
    writeFileSync(join(resultsDir, `${plan.name}.json`), JSON.stringify({ ...entry, raw }, null, 2) + '\n');
    if (plan.kind === 'accuracy') writeFileSync(join(resultsDir, `${plan.name}.svg`), curvePlot(plan.name, raw, plan.sublinear?.sampling === null));
  }
  const summary = { machine: { cores: availableParallelism(), cpu: cpus()[0]?.model ?? 'unknown' }, datasets };
  writeFileSync(join(resultsDir, 'summary.json'), JSON.stringify(summary, null, 2) + '\n');
  if (!a.json) {
    for (const d of datasets as { name: string; speedup: number | null; systems: Record<string, SystemSummary> }[]) {
      process.stdout.write(`\n${d.name}  (speedup ${d.speedup?.toFixed(1) ?? '-'}x)\nsystem      samples/s   final P@1  s to P@1  peak RSS MB\n`);
      for (const [s, v] of Object.entries(d.systems)) {
        if (v.error) process.stdout.write(`${s.padEnd(10)}  ${v.error}\n`);
        else process.stdout.write(`${s.padEnd(10)}  ${(v.samplesPerSec ?? 0).toFixed(1).padStart(9)}  ${v.finalP1?.toFixed(4) ?? '     -'}     ${v.secondsToP1?.toFixed(1).padStart(7) ?? '      -'}  ${String(v.peakRssMB).padStart(10)}\n`);
      }
    }
  }
  process.stdout.write(JSON.stringify(summary) + '\n');
  if (failures.length) {
    process.stderr.write(`bench failed:\n  ${failures.join('\n  ')}\n`);
    return 1;
  }
  return 0;
}

await benchMain(import.meta.url, compareCmd, 'npm run bench --');
