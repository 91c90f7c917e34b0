// `sublinear predict` and `eval` as a user runs them: output formats with point ids, standard input, k
// checked against the model, eval's cut-offs, and a closed pipe (`| head -1`) ending quietly.
// Spawns the compiled CLI (`npm test` builds it).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { assertBuilt, CLI, ROOT } from './built.js';
import { spawnSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Network } from '../../src/network/network.js';
import { readXC } from '../../src/datasets/xc-reader.js';

let dir: string;
let model: string;
let testFile: string;
beforeAll(async () => {
  assertBuilt(['src/cli', 'src/network']);
  dir = await mkdtemp(join(tmpdir(), 'sublinear-predict-'));
  expect(run([], 'data', 'synth', '--shape', 'tiny', '--train', '1500', '--test', '9000', '--seed', '4', '--out', dir).code).toBe(0);
  testFile = join(dir, 'test.txt');
  model = join(dir, 'm.sl');
  const cfg = join(dir, 'cfg.json');
  writeFileSync(cfg, JSON.stringify({ layers: [{ size: 32 }, { size: 100 }], epochs: 2 }));
  expect(run([], 'train', '--train', join(dir, 'train.txt'), '--config', cfg, '--save', model, '--quiet').code).toBe(0);
});
afterAll(async () => {
  if (dir) await rm(dir, { recursive: true, force: true });
});

function run(input: string | string[], ...args: string[]): { code: number | null; stdout: string; stderr: string } {
  const r = spawnSync(process.execPath, [CLI, ...args], { encoding: 'utf8', cwd: ROOT, input: typeof input === 'string' ? input : undefined, maxBuffer: 1 << 28 });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

describe('sublinear predict', () => {
  it('--format xc: a "points labels" header, then point i on line i + 2, equal to Network.predict', async () => {
    const r = run([], 'predict', '--model', model, '--input', testFile, '--k', '3');
    expect([r.code, r.stderr]).toEqual([0, '']);
    const lines = r.stdout.trimEnd().split('\n');
    expect(lines[0]).toBe('9000 100');
    expect(lines).toHaveLength(9001);
    const net = await Network.load(model);
    const p = await net.predict(await readXC(testFile), { k: 3, workers: 0 });
    for (const i of [0, 1, 4567, 8999]) {
      const want = [0, 1, 2].map((j) => `${p.labels[i * 3 + j]}:${Number(p.scores[i * 3 + j]!.toPrecision(6))}`).join(' ');
      expect(lines[i + 1]).toBe(want);
    }
  });

  it('--format jsonl: one object per point with its 0-based id', () => {
    const r = run([], 'predict', '--model', model, '--input', testFile, '--k', '2', '--format', 'jsonl');
    const lines = r.stdout.trimEnd().split('\n').map((l) => JSON.parse(l) as { id: number; labels: number[]; scores: number[] });
    expect(lines).toHaveLength(9000);
    expect(lines.map((l) => l.id)).toEqual([...Array(9000).keys()]);
    expect(lines[0]!.labels).toHaveLength(2);
    expect(lines[0]!.scores[0]).toBeGreaterThanOrEqual(lines[0]!.scores[1]!);
  });

  it('--threshold t: every label scoring at least t, best first (with --k, at most k of them); t must be in (0, 1]', async () => {
    const net = await Network.load(model);
    const all = await net.predict(await readXC(testFile), { k: 100, workers: 0 });
    const lengths = (t: number) => {
      const r = run([], 'predict', '--model', model, '--input', testFile, '--threshold', String(t), '--format', 'jsonl');
      expect([r.code, r.stderr]).toEqual([0, '']);
      const got = r.stdout.trimEnd().split('\n').map((l) => JSON.parse(l) as { id: number; labels: number[]; scores: number[] });
      expect(got).toHaveLength(9000);
      for (const g of got) {
        // The reference: all 100 scores of the point, those >= t, best first.
        const want = [...Array(100).keys()].map((j) => g.id * 100 + j).filter((x) => all.scores[x]! >= t).map((x) => all.labels[x]!);
        expect(g.labels).toEqual(want);
      }
      return { got, lengths: got.map((g) => g.labels.length) };
    };
    const { got, lengths: low } = lengths(0.01);
    expect(low.some((n) => n > 1)).toBe(true); // not just top-1 ...
    expect(lengths(0.9).lengths.some((n) => n === 0)).toBe(true); // ... nor top-k
    const k1 = run([], 'predict', '--model', model, '--input', testFile, '--threshold', '0.01', '--k', '1', '--format', 'jsonl');
    const firsts = k1.stdout.trimEnd().split('\n').map((l) => (JSON.parse(l) as { labels: number[] }).labels);
    expect(firsts).toEqual(got.map((g) => g.labels.slice(0, 1)));
    const bad = run([], 'predict', '--model', model, '--input', testFile, '--threshold', '0');
    expect([bad.code, bad.stderr.split('\n')[0]]).toEqual([2, "sublinear predict: option --threshold expects a score in (0, 1] or 'model' but received 0"]);
  });

  it('--explain n: each label with its n features of largest contribution (jsonl only); --threshold model needs a calibrated model', async () => {
    const r = run([], 'predict', '--model', model, '--input', testFile, '--k', '2', '--explain', '3', '--format', 'jsonl');
    expect(r.code).toBe(0);
    const first = JSON.parse(r.stdout.split('\n')[0]!) as { labels: number[]; explanations: { label: number; score: number; bias: number; rest: number; features: { feature: number; contribution: number }[] }[] };
    expect(first.explanations.map((e) => e.label)).toEqual(first.labels);
    const row = (await readXC(testFile));
    const nnz = row.offsets[1]! - row.offsets[0]!;
    for (const e of first.explanations) {
      expect(e.features).toHaveLength(Math.min(3, nnz));
      for (const f of e.features) expect(Array.from(row.indices.subarray(row.offsets[0]!, row.offsets[1]!))).toContain(f.feature);
      expect(e.features.reduce((t, f) => t + f.contribution, e.bias + e.rest)).toBeCloseTo(e.score, 3);
    }
    const xc = run([], 'predict', '--model', model, '--input', testFile, '--explain', '3');
    expect([xc.code, xc.stderr.split('\n')[0]]).toEqual([2, 'sublinear predict: option --explain prints explanations in --format jsonl']);
    const t = run([], 'predict', '--model', model, '--input', testFile, '--threshold', 'model');
    expect(t.code).toBe(2);
    expect(t.stderr).toContain('option --threshold model needs a calibrated model');
  });

  it('--input - reads standard input, and an error in it names <stdin> and the line', () => {
    const text = readFileSync(testFile, 'utf8');
    const fromFile = run([], 'predict', '--model', model, '--input', testFile);
    const fromStdin = run(text, 'predict', '--model', model, '--input', '-');
    expect(fromStdin.code).toBe(0);
    expect(fromStdin.stdout).toBe(fromFile.stdout);
    const bad = run('2 2000 100\n1 5:1\n1 5:x\n', 'predict', '--model', model, '--input', '-');
    expect(bad.code).toBe(1);
    expect(bad.stderr).toMatch(/^sublinear: <stdin>:3: .*'5:x'/);
  });

  it('rejects --k above the model\'s labels (exit 2) and --format libsvm with a pointer to --input-format', () => {
    const r = run([], 'predict', '--model', model, '--input', testFile, '--k', '101');
    expect([r.code, r.stderr.split('\n')[0]]).toEqual([2, "sublinear predict: option --k 101 exceeds the model's 100 labels"]);
    const f = run([], 'predict', '--model', model, '--input', testFile, '--format', 'libsvm');
    expect([f.code, f.stderr.split('\n')[0]]).toEqual([2, "sublinear predict: option --format must be one of xc, jsonl but received 'libsvm' (the format of the input is --input-format)"]);
  });

  it('ends quietly with exit 0 when the reader closes the pipe (| head -1)', () => {
    const r = spawnSync('bash', ['-c', `set -o pipefail; "${process.execPath}" "${CLI}" predict --model "${model}" --input "${testFile}" --k 20 | head -1`], { encoding: 'utf8' });
    expect({ code: r.status, stdout: r.stdout, stderr: r.stderr }).toEqual({ code: 0, stdout: '9000 100\n', stderr: '' });
  });
});

describe('sublinear eval --k', () => {
  it('reports P@k, nDCG@k, PSP@k at the cut-offs asked for', () => {
    const r = run([], 'eval', '--model', model, '--test', testFile, '--k', '10,1,5', '--json');
    expect(r.code).toBe(0);
    const m = JSON.parse(r.stdout.trim()) as Record<string, number>;
    for (const k of [1, 5, 10]) for (const name of ['p', 'ndcg', 'psp']) expect(m[`${name}${k}`]).toBeTypeOf('number');
    expect(m.p3).toBeUndefined();
    expect(m.p10).toBeLessThanOrEqual(m.p5!);
    const over = run([], 'eval', '--model', model, '--test', testFile, '--k', '1,101');
    expect([over.code, over.stderr.split('\n')[0]]).toEqual([2, "sublinear eval: option --k 101 exceeds the model's 100 labels"]);
  });
});
