// bench/baselines/pack_xc.py (the exact, compact data file the GPU baseline reads) and
// bench/baselines/pytorch_gpu.py (dense softmax, time to a target P@1), run on the CPU: the measurement itself
// needs a GPU, but the format, the reader and the training loop are the same code.
import { describe, expect, it } from 'vitest';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DEFAULT_PYTHON, pytorchAvailable } from '../../bench/baselines/pytorch.js';
import { packageRoot } from '../../src/util/package-root.js';

const script = (name: string) => join(packageRoot(), 'bench', 'baselines', name);
const numpy = spawnSync(DEFAULT_PYTHON, ['-c', 'import numpy'], { encoding: 'utf8' });
const numpyReason = numpy.error ? `${DEFAULT_PYTHON} not found` : numpy.status !== 0 ? `${DEFAULT_PYTHON} has no numpy` : '';
const torch = pytorchAvailable();

/** A learnable XC text split: label j <=> one feature of block j (features 0-39), plus 3 noise features (40-59). */
function xcText(points: number, seed: number): string {
  const lines = [`${points} 60 5`];
  let s = seed;
  const rnd = () => ((s = (s * 1103515245 + 12345) % 2147483648) / 2147483648);
  for (let i = 0; i < points; i++) {
    const label = i % 5;
    const feats = new Set<number>([label * 8 + Math.floor(rnd() * 8)]);
    while (feats.size < 4) feats.add(40 + Math.floor(rnd() * 20));
    const row = [...feats].sort((a, b) => a - b).map((f) => `${f}:${(Math.floor(rnd() * 9999) + 1) / 10000}`);
    lines.push(`${label} ${row.join(' ')}`);
  }
  return lines.join('\n') + '\n';
}

function py(args: string[]) {
  return spawnSync(DEFAULT_PYTHON, args, { encoding: 'utf8', timeout: 120_000 });
}

describe.skipIf(numpyReason !== '')(`pack_xc.py${numpyReason ? ` — SKIPPED: ${numpyReason}` : ''}`, () => {
  it('reads back exactly the arrays the text holds, and the check fails when they differ', () => {
    const dir = mkdtempSync(join(tmpdir(), 'pack-xc-'));
    try {
      writeFileSync(join(dir, 'train.txt'), xcText(300, 1));
      writeFileSync(join(dir, 'test.txt'), xcText(100, 2));
      const packed = join(dir, 'data.bin');
      const pack = py([script('pack_xc.py'), dir, packed]);
      expect(pack.stderr).toBe('');
      expect(pack.status).toBe(0);
      const same = py([script('pack_xc.py'), '--check', dir, packed]);
      expect(same.stdout.trim()).toBe('same');
      // One value of the text changed after packing: the check names the array that differs.
      const text = readFileSync(join(dir, 'train.txt'), 'utf8').split('\n');
      text[5] = text[5]!.replace(/:([0-9.]+)$/, (_, v: string) => `:${v === '0.5' ? '0.25' : '0.5'}`);
      writeFileSync(join(dir, 'train.txt'), text.join('\n'));
      const differs = py([script('pack_xc.py'), '--check', dir, packed]);
      expect(differs.status).toBe(1);
      expect(differs.stderr).toContain('train.val differs');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('refuses a row whose feature indices are not ascending, naming the file', () => {
    const dir = mkdtempSync(join(tmpdir(), 'pack-xc-'));
    try {
      writeFileSync(join(dir, 'train.txt'), '2 10 3\n0 1:0.5 7:0.25\n1,2 8:0.5 3:0.125\n');
      writeFileSync(join(dir, 'test.txt'), '1 10 3\n0 1:0.5\n');
      const r = py([script('pack_xc.py'), dir, join(dir, 'data.bin')]);
      expect(r.status).toBe(1);
      expect(r.stderr).toContain(`${join(dir, 'train.txt')}: feature indices must be ascending within each row`);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe.skipIf(!torch.ok || numpyReason !== '')(`pytorch_gpu.py on the CPU${torch.ok ? '' : ` — SKIPPED: ${torch.reason}`}`, () => {
  it('learns a tiny problem, reports its curve and the first time each target was reached', () => {
    const dir = mkdtempSync(join(tmpdir(), 'pytorch-gpu-'));
    try {
      writeFileSync(join(dir, 'train.txt'), xcText(400, 3));
      writeFileSync(join(dir, 'test.txt'), xcText(200, 4));
      const packed = join(dir, 'data.bin');
      expect(py([script('pack_xc.py'), dir, packed]).status).toBe(0);
      const configs = JSON.stringify([{ name: 'tiny', batch: 32, lr: 0.01, hidden: 16, precision: 'tf32' }]);
      const r = py([script('pytorch_gpu.py'), '--device', 'cpu', '--data', packed, '--configs', configs,
        '--targets', '0.5,0.999', '--max-epochs', '40', '--max-seconds', '60', '--eval-every-seconds', '0.05']);
      expect(r.status, r.stderr).toBe(0);
      const events = r.stdout.trim().split('\n').map((l) => JSON.parse(l) as Record<string, unknown>);
      expect(events.map((e) => e.event)[0]).toBe('start');
      const evals = events.filter((e) => e.event === 'eval') as { p1: number; trainSeconds: number }[];
      const done = events.find((e) => e.event === 'done') as { best: [number, number]; reached: Record<string, { trainSeconds: number }> };
      expect(evals.length).toBeGreaterThan(1);
      expect(done.best[1]).toBeGreaterThan(0.9); // each label has its own block of features
      const first = evals.find((e) => e.p1 >= 0.5)!;
      expect(done.reached['0.5']!.trainSeconds).toBe(first.trainSeconds);
      for (let i = 1; i < evals.length; i++) expect(evals[i]!.trainSeconds).toBeGreaterThan(evals[i - 1]!.trainSeconds);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
