import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { readSplit, subset } from '../../src/datasets/split-reader.js';
import { readXC } from '../../src/datasets/xc-reader.js';
import { DataFormatError } from '../../src/datasets/errors.js';
import type { SparseDataset } from '../../src/datasets/csr.js';

const FIX = join(import.meta.dirname, '../../datasets/fixtures');
let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'sublinear-split-'));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

let n = 0;
async function file(text: string): Promise<string> {
  const p = join(dir, `s${n++}.txt`);
  await writeFile(p, text);
  return p;
}

function failure(f: () => unknown): DataFormatError {
  try {
    f();
  } catch (e) {
    expect(e).toBeInstanceOf(DataFormatError);
    return e as DataFormatError;
  }
  throw new Error('expected an error');
}

describe('readSplit', () => {
  it('reads a column as 0-based rows in file order', async () => {
    const p = await file('3 1\n1 2\n2 3\n');
    expect(Array.from(readSplit(p, 1, 3))).toEqual([2, 0, 1]);
    expect(Array.from(readSplit(p, 2, 3))).toEqual([0, 1, 2]);
  });

  it('accepts tabs, CRLF and trailing blank lines', async () => {
    const p = await file('3\t1\r\n1\t2\r\n\r\n\n');
    expect(Array.from(readSplit(p, 2, 3))).toEqual([0, 1]);
  });

  it('reads the fixtures: the train and test columns partition the 20 points', () => {
    for (const column of [1, 2]) {
      const tr = readSplit(join(FIX, 'tiny_trSplit.txt'), column, 20);
      const ts = readSplit(join(FIX, 'tiny_tstSplit.txt'), column, 20);
      expect([tr.length, ts.length]).toEqual([14, 6]);
      expect([...tr, ...ts].sort((a, b) => a - b)).toEqual(Array.from({ length: 20 }, (_, i) => i));
    }
  });

  const cases: [string, string, number, number, string][] = [
    ['column out of range', '1 2\n3 4\n', 3, 10, '1: column 3 out of range: the split file has 2 columns'],
    ['one column', '1\n2\n', 2, 10, '1: column 2 out of range: the split file has 1 column'],
    ['row out of range', '1 2\n11 4\n', 1, 10, '2: row 11 in column 1 out of range [1, 10]'],
    ['row 0', '1 2\n0 4\n', 1, 10, '2: row 0 in column 1 out of range [1, 10]'],
    ['non-integer', '1 2\n3.5 4\n', 1, 10, "2: non-integer row '3.5' in column 1"],
    ['negative', '1 2\n-3 4\n', 1, 10, "2: non-integer row '-3' in column 1"],
    ['text', '1 2\nx 4\n', 1, 10, "2: non-integer row 'x' in column 1"],
    ['ragged', '1 2\n3\n', 1, 10, '2: line has 1 columns but line 1 has 2'],
    ['duplicate', '1 2\n3 4\n1 5\n', 1, 10, '3: row 1 appears twice in column 1 (first on line 1)'],
    ['blank line inside', '1 2\n\n3 4\n', 1, 10, '2: blank line inside the split file'],
  ];
  for (const [name, text, column, points, expected] of cases) {
    it(name, async () => {
      const p = await file(text);
      expect(failure(() => readSplit(p, column, points)).message).toBe(`${p}:${expected}`);
    });
  }

  it('rejects an empty split file and bad arguments', async () => {
    const p = await file('\n\n');
    expect(failure(() => readSplit(p, 1, 10)).message).toBe(`${p}: empty split file`);
    expect(() => readSplit(p, 0, 10)).toThrow('Expected positive integer for column (1-based) but received 0');
    expect(() => readSplit(p, 1, -1)).toThrow('Expected non-negative integer for numPoints but received -1');
  });
});

describe('subset', () => {
  it('selects rows in order (repeats allowed) into new shared arrays', async () => {
    const d = await readXC(join(FIX, 'tiny.txt'));
    const rows = [4, 0, 19, 0];
    const s: SparseDataset = subset(d, rows);
    expect([s.points, s.features, s.labels]).toEqual([4, d.features, d.labels]);
    rows.forEach((r, i) => {
      expect(s.indices.subarray(s.offsets[i], s.offsets[i + 1])).toEqual(d.indices.subarray(d.offsets[r], d.offsets[r + 1]));
      expect(s.values.subarray(s.offsets[i], s.offsets[i + 1])).toEqual(d.values.subarray(d.offsets[r], d.offsets[r + 1]));
      expect(s.labelIndices.subarray(s.labelOffsets[i], s.labelOffsets[i + 1])).toEqual(
        d.labelIndices.subarray(d.labelOffsets[r], d.labelOffsets[r + 1]),
      );
    });
    expect(s.indices.buffer).toBeInstanceOf(SharedArrayBuffer);
    expect(s.indices.length).toBe(s.offsets[4]);
    const empty = subset(d, []);
    expect([empty.points, empty.offsets.length, empty.indices.length]).toEqual([0, 1, 0]);
  });

  it('rejects rows outside the dataset', async () => {
    const d = await readXC(join(FIX, 'tiny.txt'));
    expect(() => subset(d, [0, 20])).toThrow('Expected row ids in [0, 20) but received 20 at position 1');
  });
});
