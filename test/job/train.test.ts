// train(job) and evaluate(job) (src/job/): what `sublinear train` and `eval` do, as library calls. The
// CLI's JSON is the job's report: run side by side on the same files, they train the same network (one
// worker, one thread: deterministic) and report the same fields and test metrics.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { synthesize, writeXC } from '../../src/datasets/index.js';
import { evaluate, EVAL_REPORT_FIELDS } from '../../src/job/evaluate.js';
import type { ProgressSink } from '../../src/job/events.js';
import { train } from '../../src/job/train.js';
import { TRAIN_REPORT_FIELDS } from '../../src/job/train-report.js';
import { Network } from '../../src/network/network.js';
import { assertBuilt, CLI, ROOT } from '../cli/built.js';

const dir = mkdtempSync(join(tmpdir(), 'sublinear-job-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const trainData = synthesize({ shape: 'tiny', points: 600, seed: 11 });
const testData = synthesize({ shape: 'tiny', points: 150, seed: 12 });
const trainFile = join(dir, 'train.txt'), testFile = join(dir, 'test.txt');
await writeXC(trainFile, trainData);
await writeXC(testFile, testData);
const fixed = { epochs: 2, workers: 1, threads: 1, seed: 5 } as const;

function cli(...args: string[]): { code: number | null; stdout: string; stderr: string } {
  const r = spawnSync(process.execPath, [CLI, ...args], { encoding: 'utf8' });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

describe('train(job)', () => {
  it('trains on datasets in memory and returns the network with the report', async () => {
    const { network, report, rank } = await train({ train: trainData, test: testData, ...fixed, quiet: true });
    expect(rank).toBe(0);
    expect(network).toBeInstanceOf(Network);
    for (const f of TRAIN_REPORT_FIELDS) expect(report, f).toHaveProperty(f);
    expect(report.mode).toBe('single');
    expect(report.epochs).toBe(2);
    expect(report.model).toBeNull();
    expect(report.history.map((h) => h.epoch)).toEqual([1, 2]);
    // The report's metrics are the returned network's on the test data.
    const m = await network!.evaluate(testData, { workers: 1 });
    expect(report.metrics!.p1).toBe(m.p1);
  });

  it('is what `sublinear train --json` does: the same network, fields and test metrics', async () => {
    assertBuilt(['src/cli', 'src/job']);
    const model = join(dir, 'cli.sl');
    const r = cli('train', '--train', trainFile, '--test', testFile, '--epochs', '2', '--workers', '1', '--threads', '1', '--seed', '5', '--save', model, '--json', '--quiet');
    expect(r.code, r.stderr).toBe(0);
    const printed = JSON.parse(r.stdout.trim().split('\n').at(-1)!) as Record<string, unknown>;
    const saved = join(dir, 'lib.sl');
    const { report } = await train({ train: trainFile, test: testFile, ...fixed, save: saved, quiet: true });
    expect(Object.keys(report).sort()).toEqual(Object.keys(printed).sort());
    const { predictSeconds: _, ...metrics } = report.metrics as unknown as Record<string, number>;
    const { predictSeconds: __, ...printedMetrics } = printed['metrics'] as Record<string, number>;
    expect(metrics).toEqual(printedMetrics);
    expect(report.samples).toBe(printed['samples']);
    const [a, b] = [await Network.load(model), await Network.load(saved)];
    expect(Buffer.from(a.spec.layers[0]!.weights.buffer).equals(Buffer.from(b.spec.layers[0]!.weights.buffer))).toBe(true);
  });

  it('reports through its callbacks: information lines, warnings and progress displays', async () => {
    const info: string[] = [], warnings: string[] = [], displays: string[] = [];
    const progress = (label: string, unit: string): ProgressSink => {
      displays.push(`${label}/${unit}`);
      return { update: () => {}, clear: () => {}, done: () => {} };
    };
    await train({ train: trainFile, ...fixed, onInfo: (l) => info.push(l), onWarning: (m) => warnings.push(m), progress });
    expect(info.some((l) => l.startsWith('network: 2000 -> '))).toBe(true);
    expect(warnings).toContain('no --save: the trained model will not be kept (give --save <model> to keep it)');
    expect(displays).toEqual(['reading training data/MB', 'training/batches']);
  });

  it('takes training options in memory, as a config file holds them; its own options override them', async () => {
    const a = await train({ train: trainData, workers: 1, threads: 1, quiet: true, training: { epochs: 1, lr: 0.002, batchSize: 64 } });
    expect([a.report.epochs, a.report.lr, a.report.batchSize]).toEqual([1, 0.002, 64]);
    const b = await train({ train: trainData, workers: 1, threads: 1, quiet: true, epochs: 2, training: { epochs: 1 } });
    expect(b.report.epochs).toBe(2);
  });

  it('refuses options as the command line does, naming the flag', async () => {
    await expect(train({ ...fixed })).rejects.toThrow('missing required option --train (or --resume <dir>)');
    await expect(train({ train: trainFile, lr: -1 })).rejects.toThrow('option --lr must be > 0 but received -1');
    await expect(train({ train: trainFile, shardLabels: true })).rejects.toThrow('--shard-labels needs --distributed (under mpirun)');
  });

  it('stops after the batches in flight when its signal aborts, and says so', async () => {
    const stop = new AbortController();
    stop.abort('SIGTERM');
    const info: string[] = [];
    const { report } = await train({ train: trainData, test: testData, ...fixed, epochs: 50, signal: stop.signal, onInfo: (l) => info.push(l) });
    expect(report['signal']).toBe('SIGTERM');
    expect(report['aborted']).toBe(true);
    expect(report.metrics).toBeNull();
    expect(info).toContain('\nSIGTERM: stopping after the batches in flight (SIGTERM again to stop at once)');
  });
});

describe('evaluate(job)', () => {
  it('is what `sublinear eval --json` prints', async () => {
    assertBuilt(['src/cli', 'src/job']);
    const model = join(dir, 'eval.sl');
    await train({ train: trainFile, ...fixed, save: model, quiet: true });
    const r = cli('eval', '--model', model, '--test', testFile, '--workers', '1', '--json');
    expect(r.code, r.stderr).toBe(0);
    const printed = JSON.parse(r.stdout.trim().split('\n').at(-1)!) as Record<string, unknown>;
    const { report, rank } = await evaluate({ model, test: testFile, workers: 1, quiet: true });
    expect(rank).toBe(0);
    for (const f of EVAL_REPORT_FIELDS) expect(report, f).toHaveProperty(f);
    expect(Object.keys(report).sort()).toEqual(Object.keys(printed).sort());
    expect(report.metrics).toEqual(printed['metrics']);
    expect(report.ks).toEqual([1, 3, 5]);
  });
});

describe('docs/cli.md', () => {
  it('documents every field of the train and eval reports', () => {
    const doc = readFileSync(join(ROOT, 'docs', 'cli.md'), 'utf8');
    const section = (from: string, to: string) => doc.slice(doc.indexOf(from), to ? doc.indexOf(to) : undefined);
    const trainDoc = section('### `train --json`', '### `eval --json`'), evalDoc = section('### `eval --json`', '');
    expect(TRAIN_REPORT_FIELDS.filter((f) => !trainDoc.includes(`| \`${f}\` |`))).toEqual([]);
    expect(EVAL_REPORT_FIELDS.filter((f) => !evalDoc.includes(`| \`${f}\` |`))).toEqual([]);
  });
});
