import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { formatFloat32, writeXC } from '../../src/datasets/xc-writer.js';
import type { SparseDataset } from '../../src/datasets/csr.js';
import { Xoshiro128 } from '../../src/util/rng.js';

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'sublinear-xcw-'));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

/** Significant digits of a decimal string. */
function sigDigits(s: string): number {
  return s.replace(/^-/, '').replace(/e.*$/i, '').replace('.', '').replace(/^0+/, '').replace(/0+$/, '').length || 1;
}

/** Reference: the first p whose toPrecision round-trips (slow linear scan). */
function shortestDigits(f: number): number {
  for (let p = 1; p <= 9; p++) if (Math.fround(Number(f.toPrecision(p))) === f) return p;
  return 9;
}

describe('formatFloat32', () => {
  it('prints simple values simply', () => {
    const cases: [number, string][] = [
      [1, '1'], [0, '0'], [-0, '-0'], [-2.5, '-2.5'], [0.5, '0.5'], [0.1, '0.1'], [1e-7, '0.0000001'],
      [123456.7, '123456.7'], [16777216, '16777216'], [0.000123, '0.000123'], [Math.fround(0.1) * 3, '0.3'],
      [3.4028234663852886e38, '3.4028235e+38'], [1.401298464324817e-45, '1e-45'], [1.1754943508222875e-38, '1.1754944e-38'],
    ];
    for (const [v, s] of cases) expect(formatFloat32(v)).toBe(s);
  });

  it('is the shortest round-tripping decimal for random float32 bit patterns and for 4-6 digit values', () => {
    const rng = new Xoshiro128(5);
    const bits = new Uint32Array(1);
    const f32 = new Float32Array(bits.buffer);
    const values: number[] = [];
    for (let i = 0; i < 20000; i++) {
      bits[0] = rng.nextU32();
      if (Number.isFinite(f32[0]!)) values.push(f32[0]!);
      values.push(Math.fround(rng.below(1e6) / 10 ** (1 + rng.below(8))));
    }
    for (const f of values) {
      const s = formatFloat32(f);
      expect(Math.fround(Number(s))).toBe(f);
      if (!Number.isInteger(f)) expect(sigDigits(s)).toBe(shortestDigits(f));
    }
  });

  it('refuses non-finite values', () => {
    expect(() => formatFloat32(NaN)).toThrow('cannot write non-finite value NaN');
    expect(() => formatFloat32(1e39)).toThrow('cannot write non-finite value 1e+39');
  });
});

describe('writeXC', () => {
  const data: SparseDataset = {
    points: 4, features: 10, labels: 5,
    offsets: Uint32Array.of(0, 2, 3, 3, 3),
    indices: Uint32Array.of(0, 9, 4),
    values: Float32Array.of(1, 0.25, -3),
    labelOffsets: Uint32Array.of(0, 2, 2, 3, 3),
    labelIndices: Uint32Array.of(1, 4, 0),
  };

  it('writes the header, labels, no-label lines with a leading space, and empty points as a single space', async () => {
    const p = join(dir, 'small.txt');
    const bytes = await writeXC(p, data);
    const text = await readFile(p, 'latin1');
    expect(text).toBe('4 10 5\n1,4 0:1 9:0.25\n 4:-3\n0\n \n');
    expect(bytes).toBe(text.length);
    expect((await readdir(dir)).filter((f) => f.includes('.tmp-'))).toEqual([]);
  });

  it('replaces the target atomically and leaves it untouched when the data is invalid', async () => {
    const p = join(dir, 'keep.txt');
    await writeFile(p, 'old contents\n');
    const bad = { ...data, values: Float32Array.of(1, NaN, 2) };
    await expect(writeXC(p, bad)).rejects.toThrow('cannot write non-finite value NaN');
    expect(await readFile(p, 'latin1')).toBe('old contents\n');
    expect((await readdir(dir)).filter((f) => f.includes('.tmp-'))).toEqual([]);
    await writeXC(p, data, { fsync: false });
    expect((await readFile(p, 'latin1')).startsWith('4 10 5\n')).toBe(true);
  });

  it('rejects inconsistent arrays with a clear message', async () => {
    const bad = { ...data, offsets: Uint32Array.of(0, 2, 3) };
    await expect(writeXC(join(dir, 'bad.txt'), bad)).rejects.toThrow(
      'Expected offsets and labelOffsets of length points + 1 = 5 but received 3 and 5',
    );
  });

  it('writes rows longer than its buffer and reports progress', async () => {
    const nnz = 300_000;
    const big: SparseDataset = {
      points: 1, features: nnz, labels: 1,
      offsets: Uint32Array.of(0, nnz), indices: Uint32Array.from({ length: nnz }, (_, i) => i),
      values: Float32Array.from({ length: nnz }, (_, i) => i / 7),
      labelOffsets: Uint32Array.of(0, 1), labelIndices: Uint32Array.of(0),
    };
    const calls: number[][] = [];
    const p = join(dir, 'big.txt');
    await writeXC(p, big, { fsync: false, onProgress: (r, t) => calls.push([r, t]) });
    const line = (await readFile(p, 'latin1')).split('\n')[1]!;
    expect(line.split(' ').length).toBe(nnz + 1);
    expect(calls.at(-1)).toEqual([1, 1]);
  });
});
