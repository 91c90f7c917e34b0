// Quick measurements of the dense baselines (not the main benchmark).
//
//   node dist/bench/baselines/measure.js delicious [--systems tfjs,pytorch] [--epochs 2] [--threads 2]
//   node dist/bench/baselines/measure.js amazon    [--systems tfjs,pytorch] [--labels 670091] [--points 3000]
//                                                  [--tfjs-batches 3 --tfjs-warmup 1] [--pytorch-batches 15 --pytorch-warmup 5]
//   node dist/bench/baselines/measure.js tta       [--labels 2000,5000] [--max-seconds 240] [--points-per-label 10]
//   common: [--batch 128] [--lr 1e-3] [--seed 1] [--emb sparse_adam|adam] [--json]
//
// delicious: ../shared/datasets/delicious (or --train/--test paths); amazon: datasets/synth.ts points at
// the Amazon-670K shape (135,909 features, ~75 nnz and ~5.45 labels per point), a fixed number of batches;
// tta: the same generator with --labels labels and --points-per-label x labels training points, trained
// for --max-seconds (P@1 on 2,000 held-out points of the same stream every --eval-seconds).
// Each system runs in its own child process (`--child`), so peak RSS is that system's alone.

import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { packageRoot } from '../../src/util/package-root.js';
import type { SparseDataset } from '../../datasets/csr.js';
import { median, type BaselineOptions, type BaselineResult } from './common.js';
import { readXC } from '../../datasets/xc-reader.js';
import { syntheticSplit } from './data.js';
import { pytorchAvailable, trainPytorch } from './pytorch.js';

type Args = Record<string, string | boolean>;
function parseArgs(argv: string[]): { cmd: string; args: Args } {
  const args: Args = {};
  let cmd = '';
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    if (a.startsWith('--')) {
      const next = argv[i + 1];
      if (next !== undefined && !next.startsWith('--')) { args[a.slice(2)] = next; i++; } else args[a.slice(2)] = true;
    } else if (!cmd) cmd = a;
  }
  return { cmd, args };
}
const numArg = (a: Args, k: string, d: number) => (typeof a[k] === 'string' ? Number(a[k]) : d);
const strArg = (a: Args, k: string, d: string) => (typeof a[k] === 'string' ? (a[k] as string) : d);

async function runSystem(system: string, opts: BaselineOptions, a: Args): Promise<BaselineResult> {
  const log = (r: { seconds: number; samples: number; p1: number; loss: number }) =>
    process.stderr.write(`  [${system}] t=${r.seconds.toFixed(1)}s samples=${r.samples} P@1=${r.p1.toFixed(4)} loss=${r.loss.toFixed(4)}\n`);
  if (system === 'tfjs') {
    const { trainTfjs } = await import('./tfjs-dense.js');
    return trainTfjs({ ...opts, onEval: log, backend: strArg(a, 'backend', 'wasm') as 'wasm' | 'cpu' });
  }
  return trainPytorch({
    ...opts, onEval: log,
    threads: typeof a.threads === 'string' ? Number(a.threads) : undefined,
    embeddingOptimizer: strArg(a, 'emb', 'sparse_adam') as 'sparse_adam' | 'adam',
  });
}

async function datasetFor(cmd: string, a: Args): Promise<{ train: SparseDataset; test?: SparseDataset }> {
  const seed = numArg(a, 'seed', 1);
  if (cmd === 'delicious') {
    const dir = join(packageRoot(), '..', 'shared', 'datasets', 'delicious');
    const train = await readXC(strArg(a, 'train', join(dir, 'Delicious_train.txt')));
    const test = await readXC(strArg(a, 'test', join(dir, 'Delicious_test.txt')));
    return { train, test };
  }
  // datasets/synth.ts at the Amazon-670K shape (135,909 features, ~75 nnz, ~5.45 labels per point),
  // with the label count overridden by --labels
  const labels = numArg(a, 'labels', cmd === 'amazon' ? 670_091 : 5000);
  const trainN = cmd === 'amazon' ? numArg(a, 'points', 3000) : Math.round(numArg(a, 'points-per-label', 10) * labels);
  const testN = cmd === 'amazon' ? 0 : numArg(a, 'test-points', 2000);
  const s = syntheticSplit('amazon-670k', trainN, testN, seed, { labels });
  return cmd === 'amazon' ? { train: s.train } : s;
}

/** Child mode: run one system on one dataset and print its result as JSON on the last stdout line. */
async function child(cmd: string, system: string, a: Args): Promise<void> {
  const { train, test } = await datasetFor(cmd, a);
  const base = { batchSize: numArg(a, 'batch', 128), lr: numArg(a, 'lr', 1e-3), seed: numArg(a, 'seed', 1), hidden: strArg(a, 'hidden', '128').split(',').map(Number) };
  let opts: BaselineOptions;
  if (cmd === 'delicious') {
    opts = { ...base, train, test, epochs: numArg(a, 'epochs', 2), evalEvery: { seconds: numArg(a, 'eval-seconds', 5) }, evalPoints: 1000 };
  } else if (cmd === 'amazon') {
    const b = system === 'tfjs' ? numArg(a, 'tfjs-batches', 3) : numArg(a, 'pytorch-batches', 15);
    const w = system === 'tfjs' ? numArg(a, 'tfjs-warmup', 1) : numArg(a, 'pytorch-warmup', 5);
    opts = { ...base, train, maxBatches: b, warmupBatches: w };
  } else {
    opts = {
      ...base, train, test, epochs: numArg(a, 'epochs', 1000), maxSeconds: numArg(a, 'max-seconds', 240),
      evalEvery: { seconds: numArg(a, 'eval-seconds', 10) }, evalPoints: 2000,
    };
  }
  const r = await runSystem(system, opts, a);
  process.stdout.write(JSON.stringify({ cmd, labels: train.labels, features: train.features, trainPoints: train.points, ...r }) + '\n');
}

async function main(): Promise<void> {
  const { cmd, args } = parseArgs(process.argv.slice(2));
  if (!['delicious', 'amazon', 'tta'].includes(cmd)) {
    process.stderr.write('usage: measure.js delicious|amazon|tta [options] (see the header of bench/baselines/measure.ts)\n');
    process.exit(2);
  }
  if (typeof args.child === 'string') return child(cmd, args.child, args);
  const systems = strArg(args, 'systems', cmd === 'tta' ? 'tfjs' : 'tfjs,pytorch').split(',');
  const labelList = cmd === 'tta' ? strArg(args, 'labels', '2000,5000,10000').split(',') : [strArg(args, 'labels', '')];
  const self = fileURLToPath(import.meta.url);
  const passThrough = process.argv.slice(3).filter((x, i, all) => !(x === '--labels' || all[i - 1] === '--labels' || x === '--systems' || all[i - 1] === '--systems'));
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

await main();
