// Bounded hostile-input fuzzing (bench/fuzz.ts): a fixed seed and case count, so every run of the suite
// checks the same 1,000 files: the XC and LIBSVM readers return valid CSR or a DataFormatError naming
// file and line (unmutated files round-trip exactly), and mutated model and checkpoint files are all
// refused with an error naming the file; no case is slow or allocates more than 64 MiB.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { csrProblem, runFuzz } from '../../bench/fuzz.js';
import type { SparseDataset } from '../../src/datasets/csr.js';

const dir = mkdtempSync(join(tmpdir(), 'sublinear-fuzz-test-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('fuzz: hostile files', () => {
  it('1,000 cases (seed 20240607): readers, model files and checkpoints hold their contract', async () => {
    const report = await runFuzz({ cases: 1000, seed: 20240607, dir, timeLimitMs: 2000, targets: ['xc', 'libsvm', 'model', 'checkpoint'] });
    expect(report.failures).toEqual([]);
    expect(report.cases).toBe(1000);
    const o = report.outcomes;
    for (const t of ['xc', 'libsvm', 'model', 'checkpoint'] as const) expect(o[t].accepted + o[t].rejected).toBe(250);
    // The generator must exercise both sides of the reader contract, and the binary files are all refused.
    expect(o.xc.accepted).toBeGreaterThan(10);
    expect(o.xc.rejected).toBeGreaterThan(100);
    expect(o.libsvm.accepted).toBeGreaterThan(10);
    expect(o.libsvm.rejected).toBeGreaterThan(100);
    expect(o.model).toEqual({ accepted: 0, rejected: 250 });
    expect(o.checkpoint).toEqual({ accepted: 0, rejected: 250 });
    expect(report.exact).toBeGreaterThan(30);
    expect(report.seconds).toBeLessThan(20);
  });
});

describe('fuzz: crafted model and checkpoint files with valid checksums (bench/fuzz-structured.ts)', () => {
  it('800 cases (seed 20261123): each loads into a consistent network or is refused naming the file, within 2 s and 64 MiB', async () => {
    const report = await runFuzz({ cases: 800, seed: 20261123, dir, timeLimitMs: 2000, targets: ['crafted-model', 'crafted-checkpoint'] });
    expect(report.failures).toEqual([]);
    const o = report.outcomes;
    // Both sides of the contract are exercised: crafted files that are valid load (and train), the rest are refused.
    for (const t of ['crafted-model', 'crafted-checkpoint'] as const) {
      expect(o[t].accepted + o[t].rejected).toBe(400);
      expect(o[t].accepted).toBeGreaterThan(20);
      expect(o[t].rejected).toBeGreaterThan(200);
    }
    expect(report.seconds).toBeLessThan(30);
  });
});

describe('fuzz: the CSR checker catches what it must', () => {
  const ok = (): SparseDataset => ({
    points: 2, features: 5, labels: 3,
    offsets: Uint32Array.of(0, 2, 3), indices: Uint32Array.of(1, 4, 0), values: Float32Array.of(1, 2, 3),
    labelOffsets: Uint32Array.of(0, 1, 1), labelIndices: Uint32Array.of(2),
  });
  it.each([
    ['valid', (_d: SparseDataset) => {}, null],
    ['id out of range', (d: SparseDataset) => void (d.indices[1] = 5), 'row 0: feature id 5 >= features 5'],
    ['unsorted ids', (d: SparseDataset) => void (d.indices[0] = 4), 'row 0: feature ids not strictly increasing'],
    ['non-finite value', (d: SparseDataset) => void (d.values[2] = Infinity), 'row 1: non-finite value Infinity'],
    ['label out of range', (d: SparseDataset) => void (d.labelIndices[0] = 3), 'row 0: label id 3 >= labels 3'],
    ['decreasing offsets', (d: SparseDataset) => void (d.offsets[1] = 4), 'offsets decrease at row 1'],
    ['nnz mismatch', (d: SparseDataset) => void (d.offsets[2] = 2), 'nnz disagrees with indices/values lengths'],
    ['offsets not from 0', (d: SparseDataset) => void (d.labelOffsets[0] = 1), 'offsets do not start at 0'],
  ] as const)('%s', (_name, breakIt, problem) => {
    const d = ok();
    breakIt(d);
    expect(csrProblem(d)).toBe(problem);
  });
});

describe('fuzz runner (node dist/bench/fuzz.js)', () => {
  it('runs cases in a watched worker and prints a JSON report', () => {
    const cli = join(import.meta.dirname, '../../dist/bench/fuzz.js');
    if (!existsSync(cli)) throw new Error(`${cli} is missing: build first (npx tsc -p .; npm test does it)`);
    const r = spawnSync(process.execPath, [cli, '--cases', '60', '--seed', '9', '--json'], { encoding: 'utf8' });
    expect(r.status).toBe(0);
    const report = JSON.parse(r.stdout.trim().split('\n').at(-1)!) as { cases: number; failures: unknown[]; seed: number; dir: string | null };
    expect(report).toMatchObject({ cases: 60, failures: [], seed: 9, dir: null });
    const bad = spawnSync(process.execPath, [cli, '--cases', '0'], { encoding: 'utf8' });
    expect(bad.status).toBe(2);
    expect(bad.stderr).toBe("bench/fuzz: option --cases must be >= 1 but received 0\nRun 'node dist/bench/fuzz.js --help' for usage.\n");
  });
});
