// Quick measurements of the dense baselines (not the main benchmark).
//
//   node dist/bench/baselines/measure.js delicious [--systems tfjs,pytorch] [--epochs 2] [--threads 2]
//   node dist/bench/baselines/measure.js amazon    [--systems tfjs,pytorch] [--labels 670091] [--points 3000]
//                                                  [--tfjs-batches 3 --tfjs-warmup 1] [--pytorch-batches 15 --pytorch-warmup 5]
//   node dist/bench/baselines/measure.js tta       [--labels 2000,5000] [--max-seconds 240] [--points-per-label 10]
//   common: [--batch 128] [--lr 1e-3] [--seed 1] [--emb sparse_adam|adam] [--json]
//
// delicious: <data dir>/delicious (--data-dir or $SUBLINEAR_DATASETS; or --train/--test paths); amazon: src/datasets/synth.ts points at
// the Amazon-670K shape (135,909 features, ~75 nnz and ~5.45 labels per point), a fixed number of batches;
// tta: the same generator with --labels labels and --points-per-label x labels training points, trained
// for --max-seconds (P@1 on 2,000 held-out points of the same stream every --eval-seconds).
// Each system runs in its own child process (`--child`), so peak RSS is that system's alone.

import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import type { SparseDataset } from '../../src/datasets/csr.js';
import { median, type BaselineOptions, type BaselineResult } from './common.js';
import { readXC } from '../../src/datasets/xc-reader.js';
import { syntheticSplit } from './data.js';
import { pytorchAvailable, trainPytorch } from './pytorch.js';
import { commandArgv, defineCommand, UsageError } from '../../src/cli/args.js';
import { parseInteger } from '../../src/util/parse-values.js';
import { benchMain } from '../cli.js';
import { DATA_DIR_HELP, requireDataset } from '../data-dir.js';

const DATASETS = ['delicious', 'amazon', 'tta'] as const;

export const measureCmd = defineCommand({
  name: 'bench/baselines/measure',
  summary: 'Quick measurements of the dense baselines (TensorFlow.js, PyTorch), each system in its own process.',
  description:
    '<dataset>: delicious (the XC repository\'s Delicious), amazon (synthetic Amazon-670K shape, a fixed number\n' +
    'of batches) or tta (the same generator with --labels labels, trained for --max-seconds).',
  positionals: [{ name: 'dataset', description: DATASETS.join(' | ') }],
  flags: {
    systems: { type: 'string', valueName: 'list', description: 'comma-separated: tfjs, pytorch (default: tfjs,pytorch; tta: tfjs)' },
    labels: { type: 'string', valueName: 'n|list', description: 'label count (amazon: 670091; tta: a list, default 2000,5000,10000)' },
    dataDir: { type: 'string', valueName: 'dir', description: DATA_DIR_HELP },
    train: { type: 'string', valueName: 'file', description: 'delicious: training file (default: <data dir>/delicious/Delicious_train.txt)' },
    test: { type: 'string', valueName: 'file', description: 'delicious: test file (default: <data dir>/delicious/Delicious_test.txt)' },
    points: { type: 'integer', min: 1, default: 3000, valueName: 'n', description: 'amazon: training points' },
    pointsPerLabel: { type: 'number', min: 0, default: 10, valueName: 'x', description: 'tta: training points per label' },
    testPoints: { type: 'integer', min: 1, default: 2000, valueName: 'n', description: 'tta: test points' },
    epochs: { type: 'integer', min: 1, valueName: 'n', description: 'delicious: epochs (default 2); tta: at most this many (default 1000)' },
    maxSeconds: { type: 'number', min: 0, default: 240, valueName: 's', description: 'tta: training time' },
    evalSeconds: { type: 'number', min: 0, valueName: 's', description: 'seconds between evaluations (default: delicious 5, tta 10)' },
    tfjsBatches: { type: 'integer', min: 1, default: 3, valueName: 'n', description: 'amazon: timed tfjs batches' },
    tfjsWarmup: { type: 'integer', min: 0, default: 1, valueName: 'n', description: 'amazon: untimed tfjs batches' },
    pytorchBatches: { type: 'integer', min: 1, default: 15, valueName: 'n', description: 'amazon: timed PyTorch batches' },
    pytorchWarmup: { type: 'integer', min: 0, default: 5, valueName: 'n', description: 'amazon: untimed PyTorch batches' },
    batch: { type: 'integer', min: 1, default: 128, valueName: 'n', description: 'mini-batch size' },
    lr: { type: 'number', min: 0, default: 1e-3, valueName: 'x', description: 'Adam learning rate' },
    seed: { type: 'integer', min: 0, default: 1, valueName: 'n', description: 'data and initialisation seed' },
    hidden: { type: 'string', default: '128', valueName: 'list', description: 'hidden layer sizes, comma-separated' },
    threads: { type: 'integer', min: 1, valueName: 'n', description: "PyTorch threads (default: PyTorch's)" },
    emb: { type: 'choice', choices: ['sparse_adam', 'adam'] as const, default: 'sparse_adam', description: 'PyTorch optimizer of the sparse first layer' },
    backend: { type: 'choice', choices: ['wasm', 'cpu'] as const, default: 'wasm', description: 'TensorFlow.js backend' },
    child: { type: 'choice', choices: ['tfjs', 'pytorch'] as const, description: 'internal: run this one system in this process' },
    json: { type: 'boolean', description: 'print the results as JSON' },
  },
  run: async (o) => {
    if (!(DATASETS as readonly string[]).includes(o.dataset)) throw new UsageError(`unknown dataset '${o.dataset}' (datasets: ${DATASETS.join(', ')})`);
    const hidden = o.hidden.split(',').map((h) => parseInteger(h.trim(), { min: 1 }));
    if (hidden.some((h) => h === undefined)) throw new UsageError(`option --hidden expects comma-separated positive integers but received '${o.hidden}'`);
    // The children get this run's options, less the ones set per child.
    const passThrough = commandArgv(measureCmd.spec, o, ['labels', 'systems', 'child', 'json']);
    const a: Args = { ...o, cmd: o.dataset as Args['cmd'], hidden: hidden as number[], passThrough };
    if (a.child) await child(a, a.child);
    else await main(a);
    return 0;
  },
});

interface Args {
  cmd: (typeof DATASETS)[number];
  systems?: string; labels?: string; dataDir?: string; train?: string; test?: string;
  points: number; pointsPerLabel: number; testPoints: number; epochs?: number; maxSeconds: number; evalSeconds?: number;
  tfjsBatches: number; tfjsWarmup: number; pytorchBatches: number; pytorchWarmup: number;
  batch: number; lr: number; seed: number; hidden: number[]; threads?: number;
  emb: 'sparse_adam' | 'adam'; backend: 'wasm' | 'cpu'; child?: 'tfjs' | 'pytorch'; json: boolean;
  passThrough: string[];
}

async function runSystem(system: string, opts: BaselineOptions, a: Args): Promise<BaselineResult> {
  const log = (r: { seconds: number; samples: number; p1: number; loss: number }) =>
    process.stderr.write(`  [${system}] t=${r.seconds.toFixed(1)}s samples=${r.samples} P@1=${r.p1.toFixed(4)} loss=${r.loss.toFixed(4)}\n`);
  if (system === 'tfjs') {
    const { trainTfjs } = await import('./tfjs-dense.js');
    return trainTfjs({ ...opts, onEval: log, backend: a.backend });
  }
  return trainPytorch({
    ...opts, onEval: log,
    threads: a.threads,
    embeddingOptimizer: a.emb,
  });
}

async function datasetFor(a: Args): Promise<{ train: SparseDataset; test?: SparseDataset }> {
  const { cmd, seed } = a;
  if (cmd === 'delicious') {
    const files = a.train !== undefined && a.test !== undefined ? [a.train, a.test] : requireDataset('delicious', a.dataDir).files;
    return { train: await readXC(a.train ?? files[0]!), test: await readXC(a.test ?? files[1]!) };
  }
  // src/datasets/synth.ts at the Amazon-670K shape (135,909 features, ~75 nnz, ~5.45 labels per point),
  // with the label count overridden by --labels
  const labels = a.labels === undefined ? (cmd === 'amazon' ? 670_091 : 5000) : parseInteger(a.labels, { min: 1 });
  if (labels === undefined) throw new UsageError(`option --labels expects a positive integer but received '${a.labels}'`);
  const trainN = cmd === 'amazon' ? a.points : Math.round(a.pointsPerLabel * labels);
  const testN = cmd === 'amazon' ? 0 : a.testPoints;
  const s = syntheticSplit('amazon-670k', trainN, testN, seed, { labels });
  return cmd === 'amazon' ? { train: s.train } : s;
}

/** Child mode: run one system on one dataset and print its result as JSON on the last stdout line. */
async function child(a: Args, system: 'tfjs' | 'pytorch'): Promise<void> {
  const cmd = a.cmd;
  const { train, test } = await datasetFor(a);
  const base = { batchSize: a.batch, lr: a.lr, seed: a.seed, hidden: a.hidden };
  let opts: BaselineOptions;
  if (cmd === 'delicious') {
    opts = { ...base, train, test, epochs: a.epochs ?? 2, evalEvery: { seconds: a.evalSeconds ?? 5 }, evalPoints: 1000 };
  } else if (cmd === 'amazon') {
    const b = system === 'tfjs' ? a.tfjsBatches : a.pytorchBatches;
    const w = system === 'tfjs' ? a.tfjsWarmup : a.pytorchWarmup;
    opts = { ...base, train, maxBatches: b, warmupBatches: w };
  } else {
    opts = {
      ...base, train, test, epochs: a.epochs ?? 1000, maxSeconds: a.maxSeconds,
      evalEvery: { seconds: a.evalSeconds ?? 10 }, evalPoints: 2000,
    };
  }
  const r = await runSystem(system, opts, a);
  process.stdout.write(JSON.stringify({ cmd, labels: train.labels, features: train.features, trainPoints: train.points, ...r }) + '\n');
}

async function main(args: Args): Promise<void> {
  const cmd = args.cmd;
  const systems = (args.systems ?? (cmd === 'tta' ? 'tfjs' : 'tfjs,pytorch')).split(',');
  for (const s of systems) if (s !== 'tfjs' && s !== 'pytorch') throw new UsageError(`unknown system '${s}' in --systems (systems: tfjs, pytorch)`);
  const labelList = cmd === 'tta' ? (args.labels ?? '2000,5000,10000').split(',') : [args.labels ?? ''];
  const self = fileURLToPath(import.meta.url);
  const passThrough = args.passThrough;
  const results: Record<string, unknown>[] = [];
  for (const labels of labelList) {
    for (const system of systems) {
      if (system === 'pytorch') {
        const av = pytorchAvailable();
        if (!av.ok) { results.push({ cmd, system, labels, error: av.reason }); continue; }
      }
      process.stderr.write(`${cmd} ${system}${labels ? ` labels=${labels}` : ''} ...\n`);
      const extra = labels ? ['--labels', labels] : [];
      const p = spawnSync(process.execPath, ['--max-old-space-size=16384', self, cmd, ...passThrough, ...extra, '--child', system], {
        encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], maxBuffer: 64 << 20,
      });
      process.stderr.write((p.stderr || '').split('\n').filter((l) => !/^\s+at |Hi, looks like|^=+$/.test(l)).join('\n'));
      const last = (p.stdout || '').trim().split('\n').pop() ?? '';
      try {
        results.push(JSON.parse(last) as Record<string, unknown>);
      } catch {
        const err = (p.stderr || '').split('\n').find((l) => /Error|error:/.test(l)) ?? '';
        const why = /memory access out of bounds|Out of memory|Cannot allocate/i.test(p.stderr || '')
          ? 'out of memory (' + err.trim() + ')' : err.trim();
        results.push({ cmd, system, labels, error: `exit ${p.status ?? p.signal}: ${why}` });
      }
    }
  }
  if (args.json) { process.stdout.write(JSON.stringify(results, null, 1) + '\n'); return; }
  for (const r of results) {
    if (r.error) { console.log(`${r.cmd}\t${r.system}\tlabels=${r.labels}\tERROR ${r.error}`); continue; }
    const x = r as unknown as BaselineResult & { labels: number; trainPoints: number };
    console.log([
      r.cmd, x.system, `labels=${x.labels}`, `batches=${x.batches}`, `samples/s=${x.samplesPerSec.toFixed(1)}`, `steady=${typeof x.steadySamplesPerSec === 'number' ? x.steadySamplesPerSec.toFixed(1) : '-'}`,
      `s/batch=${(x.seconds / Math.max(1, x.batches)).toFixed(3)}`, `median_s/batch=${median(x.batchSeconds ?? []).toFixed(3)}`, `train_s=${x.seconds.toFixed(1)}`,
      `P@1=${typeof x.finalP1 === 'number' && !Number.isNaN(x.finalP1) ? x.finalP1.toFixed(4) : '-'}`, `peakRSS=${(x.peakRssBytes / 2 ** 20).toFixed(0)}MiB`,
      `diverged=${x.diverged}`, JSON.stringify(x.info),
    ].join('\t'));
    if (x.curve?.length) console.log('  curve ' + x.curve.map((c) => `${c.seconds.toFixed(0)}s:${c.p1.toFixed(3)}`).join(' '));
  }
}

await benchMain(import.meta.url, measureCmd, 'node dist/bench/baselines/measure.js');
