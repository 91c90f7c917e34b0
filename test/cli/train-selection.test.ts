// `sublinear train` on a small, raw-valued training set: the epoch count is chosen by k-fold
// cross-validation and the inputs are scaled, both said on stderr and in --json; `eval` of the saved
// model applies the same scaling; term counts are compressed instead. Spawns the compiled CLI (`npm test` builds it).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { assertBuilt, CLI, ROOT } from './built.js';
import { spawnSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Xoshiro128 } from '../../src/util/rng.js';

let dir: string;
let data: string;
let cfg: string;
beforeAll(async () => {
  assertBuilt(['src/cli', 'src/network', 'src/train']);
  dir = await mkdtemp(join(tmpdir(), 'sublinear-select-cli-'));
  // 200 points, 6 features on scales 1e-3 .. 1e2; the label is the largest of the first three (scaled) features.
  const rng = new Xoshiro128(3);
  const lines = ['200 6 3'];
  for (let p = 0; p < 200; p++) {
    const u = Array.from({ length: 6 }, () => 0.01 + 0.99 * rng.nextFloat());
    const label = u.slice(0, 3).indexOf(Math.max(...u.slice(0, 3)));
    lines.push(`${label} ${u.map((x, j) => `${j}:${(x * 10 ** (j - 3)).toPrecision(6)}`).join(' ')}`);
  }
  data = join(dir, 'raw.txt');
  writeFileSync(data, lines.join('\n') + '\n');
  cfg = join(dir, 'cfg.json');
  writeFileSync(cfg, JSON.stringify({ layers: [{ size: 16 }, { size: 3 }], validation: { maxEpochs: 6 } }));
});
afterAll(async () => {
  if (dir) await rm(dir, { recursive: true, force: true });
});

function run(...args: string[]): { code: number | null; stdout: string; stderr: string } {
  const r = spawnSync(process.execPath, [CLI, ...args], { encoding: 'utf8', cwd: ROOT, maxBuffer: 1 << 26 });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

describe('train on a small raw-valued set', () => {
  it('--json reports the k-fold selection and the input scaling; eval of the saved model scales the same way', () => {
    const model = join(dir, 'm.sl');
    const r = run('train', '--train', data, '--test', data, '--config', cfg, '--save', model, '--json', '--quiet');
    expect([r.code, r.stderr]).toEqual([0, '']);
    const s = JSON.parse(r.stdout.trim().split('\n').at(-1)!);
    expect(s.selection).toMatchObject({ method: 'kfold', folds: 5, holdoutPoints: 10 });
    expect(s.epochs).toBe(s.selection.epochs);
    expect(s.selection.scores.length).toBeGreaterThanOrEqual(s.epochs);
    expect(s.inputScaling).toMatchObject({ scaled: true, method: 'maxabs' });
    expect(s.inputScaling.reason).toMatch(/^raw-valued inputs, values outside \[-1, 1\] \(largest \|value\| 9\d\.\d/);
    const e = run('eval', '--model', model, '--test', data, '--k', '1,3', '--json', '--quiet');
    expect([e.code, e.stderr]).toEqual([0, '']);
    const m = JSON.parse(e.stdout.trim());
    expect(m.inputScaled).toBe(true);
    expect(m.p1).toBe(s.p1);
  });

  it('says both on stderr', () => {
    const r = run('train', '--train', data, '--config', cfg);
    expect(r.code).toBe(0);
    expect(r.stderr).toMatch(/\ninputs scaled: raw-valued inputs, values outside \[-1, 1\] .*: each feature divided by its largest \|value\| in the training data \(stored in the model; predict and eval apply it\)\n/);
    expect(r.stderr).toMatch(/\nepochs chosen by 5-fold cross-validation: \d+ \(mean held-out P@1 0\.\d{4}; a held-out slice would hold only 10 points\), then trained on all 200 points\n/);
  });

  it('the config file turns the scaling off, and names a wrong value', () => {
    const off = join(dir, 'off.json');
    writeFileSync(off, JSON.stringify({ layers: [{ size: 16 }, { size: 3 }], epochs: 1, inputScaling: 'off' }));
    const r = run('train', '--train', data, '--config', off, '--json');
    expect(r.code).toBe(0);
    expect(JSON.parse(r.stdout.trim().split('\n').at(-1)!).inputScaling).toMatchObject({ scaled: false, reason: 'input scaling is off' });
    const bad = join(dir, 'bad.json');
    writeFileSync(bad, JSON.stringify({ layers: [{ size: 16 }, { size: 3 }], inputScaling: 'minmax' }));
    const b = run('train', '--train', data, '--config', bad);
    expect([b.code, b.stderr]).toEqual([1, `sublinear: ${bad}: Expected 'auto', 'maxabs', 'log' or 'off' for inputScaling but received "minmax"\n`]);
  });

  it('counts the fold copies in the memory check', () => {
    // A 200,000-wide hidden layer: about 335 MB per copy with its worker's scratch; one copy fits 1 GB, six do not.
    const wide = join(dir, 'wide.json');
    writeFileSync(wide, JSON.stringify({ layers: [{ size: 200000 }, { size: 3 }] }));
    const r = run('train', '--train', data, '--config', wide, '--max-memory', '1GB');
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/^sublinear: Not enough memory: the configuration needs 2\.\d\d GB \(5 network copies for k-fold selection 1\.\d\d GB, /);
    expect(run('train', '--train', data, '--config', wide, '--max-memory', '1GB', '--epochs', '1', '--quiet').code).toBe(0);
  });
});

describe('train on term counts', () => {
  it('compresses the counts, says so, and eval of the saved model applies the same transform', () => {
    // 120 points of 4 topics: each holds 2 of its topic's 5 words and 4 of 20 shared words, 1 to 4 times each.
    const rng = new Xoshiro128(5);
    const lines = ['120 40 4'];
    for (let p = 0; p < 120; p++) {
      const l = p % 4, words = new Map<number, number>();
      while (words.size < 2) words.set(5 * l + rng.below(5), 1 + rng.below(4));
      while (words.size < 6) words.set(20 + rng.below(20), 1 + rng.below(4));
      lines.push(`${l} ${[...words.keys()].sort((a, b) => a - b).map((w) => `${w}:${words.get(w)}`).join(' ')}`);
    }
    const counts = join(dir, 'counts.txt'), model = join(dir, 'counts.sl');
    writeFileSync(counts, lines.join('\n') + '\n');
    const cfg4 = join(dir, 'cfg4.json');
    writeFileSync(cfg4, JSON.stringify({ layers: [{ size: 16 }, { size: 4 }], validation: { maxEpochs: 6 } }));
    const r = run('train', '--train', counts, '--test', counts, '--config', cfg4, '--save', model, '--json');
    expect(r.code).toBe(0);
    expect(r.stderr).toMatch(/\ninputs transformed: term counts \(non-negative integers up to 4\.00\): each count n > 1 replaced by 1 \+ ln n \(stored in the model; predict and eval apply it\)\n/);
    const s = JSON.parse(r.stdout.trim().split('\n').at(-1)!);
    expect(s.inputScaling).toMatchObject({ scaled: true, method: 'log', maxAbs: 4 });
    const e = run('eval', '--model', model, '--test', counts, '--k', '1,3', '--json');
    expect(e.code).toBe(0);
    expect(e.stderr).toContain("applying the model's input transform (term counts: each value n > 1 replaced by 1 + ln n)\n");
    const m = JSON.parse(e.stdout.trim());
    expect(m.inputScaled).toBe(true);
    expect(m.p1).toBe(s.p1);
  });
});
