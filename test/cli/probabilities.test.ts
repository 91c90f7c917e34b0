// Calibrated probabilities on the command line: `train` (held-out validation, the default) says what the
// calibration found and, with --test, the test set's ECE and F1; `info` shows it; `eval` prints and reports
// it (--threshold changes the F1's threshold); `predict --threshold model` chooses each point's labels by
// probability (and prints the probabilities in the xc format). Spawns the compiled CLI (`npm test` builds it).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { assertBuilt, CLI, ROOT } from './built.js';
import { spawnSync } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { subset, synthesize } from '../../src/datasets/index.js';
import { writeXC } from '../../src/datasets/xc-writer.js';
import { Network } from '../../src/network/network.js';

let dir: string, train: string, test: string, model: string;
beforeAll(async () => {
  assertBuilt(['src/cli', 'src/job', 'src/network', 'src/train']);
  dir = await mkdtemp(join(tmpdir(), 'sublinear-probabilities-cli-'));
  const all = synthesize({ shape: 'small', points: 6500, seed: 21 });
  train = join(dir, 'train.txt');
  test = join(dir, 'test.txt');
  await writeXC(train, subset(all, Uint32Array.from({ length: 6000 }, (_, i) => i)));
  await writeXC(test, subset(all, Uint32Array.from({ length: 500 }, (_, i) => 6000 + i)));
  model = join(dir, 'm.sl');
});
afterAll(async () => {
  if (dir) await rm(dir, { recursive: true, force: true });
});

function run(...args: string[]): { code: number | null; stdout: string; stderr: string } {
  const r = spawnSync(process.execPath, [CLI, ...args], { encoding: 'utf8', cwd: ROOT, maxBuffer: 1 << 26 });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

describe('calibrated probabilities on the command line', () => {
  it('train says what the calibration found and the test set\'s ECE; info shows it; eval prints and reports it', () => {
    const t = run('train', '--train', train, '--test', test, '--save', model, '--workers', '2');
    expect(t.code, t.stderr).toBe(0);
    expect(t.stderr).toMatch(/probabilities: calibrated on \d+ held-out points \(\d+ labels with their own fit; ECE 0\.\d{4}, softmax scores 0\.\d{4}\); threshold 0\.\d{3}/);
    expect(t.stdout).toMatch(/^test probabilities: ECE 0\.\d{4} \(softmax scores 0\.\d{4}; top label 0\.\d{4}\); threshold 0\.\d{3}: micro-F1/m);
    const i = run('info', model);
    expect(i.stdout).toMatch(/\(format \d+, model version 3\)/);
    expect(i.stdout).toMatch(/probabilities: calibrated on \d+ held-out points for each point's top 10 \(held-out ECE 0\.\d{4}\); threshold 0\.\d{3}/);
    const e = run('eval', '--model', model, '--test', test, '--json', '--quiet');
    expect(e.code, e.stderr).toBe(0);
    const rep = JSON.parse(e.stdout) as { calibration: { threshold: number; ece: number; microF1: number; topk: { microF1: number }[] }; metrics: Record<string, unknown> };
    expect(rep.calibration.ece).toBeLessThan(0.1);
    expect(rep.metrics).not.toHaveProperty('calibration');
    const at = run('eval', '--model', model, '--test', test, '--threshold', '0.9', '--json', '--quiet');
    expect((JSON.parse(at.stdout) as typeof rep).calibration.threshold).toBe(0.9);
    const text = run('eval', '--model', model, '--test', test, '--quiet');
    expect(text.stdout.split('\n')[2]).toMatch(/^probabilities: ECE /);
  }, 300_000);

  it('predict --threshold model: each point\'s labels are its shortlist candidates whose probability reaches the model\'s threshold, by probability', async () => {
    const net = await Network.load(model);
    const cal = net.calibration!;
    const j = run('predict', '--model', model, '--input', test, '--threshold', 'model', '--format', 'jsonl', '--quiet');
    expect(j.code, j.stderr).toBe(0);
    const rows = j.stdout.trim().split('\n').map((l) => JSON.parse(l) as { labels: number[]; probabilities: number[] });
    expect(rows).toHaveLength(500);
    let labelled = 0;
    for (const r of rows) {
      expect(r.labels.length).toBeLessThanOrEqual(cal.shortlist);
      for (const p of r.probabilities) expect(p).toBeGreaterThanOrEqual(cal.threshold);
      expect(r.probabilities).toEqual([...r.probabilities].sort((a, b) => b - a));
      if (r.labels.length) labelled++;
    }
    expect(labelled).toBeGreaterThan(250);
    // The xc format prints the probabilities in place of the scores.
    const x = run('predict', '--model', model, '--input', test, '--threshold', 'model', '--quiet');
    const first = x.stdout.split('\n')[1]!;
    expect(first).toBe(rows[0]!.labels.map((l, t) => `${l}:${rows[0]!.probabilities[t]}`).join(' '));
  }, 120_000);
});
