import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { readXC } from '../../src/datasets/xc-reader.js';
import { writeXC } from '../../src/datasets/xc-writer.js';
import { synthesize } from '../../src/datasets/synth.js';
import { DataFormatError } from '../../src/datasets/errors.js';
import type { SparseDataset } from '../../src/datasets/csr.js';

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'sublinear-xc-'));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

let n = 0;
/** Writes `text` to a fresh file and returns its path. */
async function file(text: string | Buffer): Promise<string> {
  const p = join(dir, `f${n++}.txt`);
  await writeFile(p, text);
  return p;
}

/** The DataFormatError a read fails with (fails the test if it succeeds or throws something else). */
async function failure(path: string, opts = {}): Promise<DataFormatError> {
  try {
    await readXC(path, opts);
  } catch (e) {
    expect(e).toBeInstanceOf(DataFormatError);
    return e as DataFormatError;
  }
  throw new Error(`expected ${path} to be rejected`);
}

function rows(d: SparseDataset): { labels: number[]; features: [number, number][] }[] {
  const out = [];
  for (let i = 0; i < d.points; i++) {
    const labels = Array.from(d.labelIndices.subarray(d.labelOffsets[i]!, d.labelOffsets[i + 1]!));
    const features: [number, number][] = [];
    for (let k = d.offsets[i]!; k < d.offsets[i + 1]!; k++) features.push([d.indices[k]!, d.values[k]!]);
    out.push({ labels, features });
  }
  return out;
}

function expectSameDataset(a: SparseDataset, b: SparseDataset): void {
  expect([a.points, a.features, a.labels]).toEqual([b.points, b.features, b.labels]);
  expect(a.offsets).toEqual(b.offsets);
  expect(a.indices).toEqual(b.indices);
  expect(a.values).toEqual(b.values);
  expect(a.labelOffsets).toEqual(b.labelOffsets);
  expect(a.labelIndices).toEqual(b.labelIndices);
}

describe('readXC: valid input', () => {
  it('reads header, labels, features and a no-label line into CSR on SharedArrayBuffers', async () => {
    const p = await file('3 10 5\n1,3 0:1 4:0.5 9:-2.25\n 2:3\n4 7:1e-3\n');
    const d = await readXC(p);
    expect([d.points, d.features, d.labels]).toEqual([3, 10, 5]);
    expect(rows(d)).toEqual([
      { labels: [1, 3], features: [[0, 1], [4, 0.5], [9, -2.25]] },
      { labels: [], features: [[2, 3]] },
      { labels: [4], features: [[7, Math.fround(1e-3)]] },
    ]);
    for (const a of [d.offsets, d.indices, d.values, d.labelOffsets, d.labelIndices]) {
      expect(a.buffer).toBeInstanceOf(SharedArrayBuffer);
      // Exactly sized, or a view wasting at most 1/8 of its buffer (csr-builder.ts).
      expect(a.buffer.byteLength).toBeLessThanOrEqual(Math.max(1, Math.ceil((a.length * 8) / 7)) * 4);
    }
    expect(d.offsets.length).toBe(4);
    expect(d.indices.length).toBe(5);
    expect(d.labelIndices.length).toBe(3);
  });

  it('treats a first token that is an id:value pair as a point without labels', async () => {
    const d = await readXC(await file('2 10 5\n3:0.5 4:1\n2\n'));
    expect(rows(d)).toEqual([
      { labels: [], features: [[3, 0.5], [4, 1]] },
      { labels: [2], features: [] },
    ]);
  });

  it('parses every float spelling exactly like Number() and rounds to float32', async () => {
    const spellings = ['1', '0.5', '-3.2e-4', '.5', '1.', '+2', '1E5', '2.5e+3', '-0', '0.000000', '1.000000',
      '123456789012345678', '1e-30', '3.4028234e38', '0.1', '7.038531e-26', '99999999999999999999e-20', '5e-324'];
    const line = spellings.map((s, i) => `${i}:${s}`).join(' ');
    const d = await readXC(await file(`1 ${spellings.length} 1\n0 ${line}\n`));
    expect(Array.from(d.values)).toEqual(spellings.map((s) => Math.fround(Number(s))));
    expect(Object.is(d.values[8], -0)).toBe(true);
  });

  it('accepts CRLF line endings, tabs, extra spaces, a BOM and blank/whitespace lines at the end', async () => {
    const text = '\ufeff2 10 5\r\n1,2\t0:1  3:2 \r\n 4:0.25\r\n\r\n\r\n   \n';
    const d = await readXC(await file(Buffer.from(text, 'utf8')));
    expect(rows(d)).toEqual([
      { labels: [1, 2], features: [[0, 1], [3, 2]] },
      { labels: [], features: [[4, 0.25]] },
    ]);
  });

  it('reads a last line without a newline', async () => {
    const d = await readXC(await file('2 10 5\n1 0:1\n2 3:4'));
    expect(rows(d)[1]).toEqual({ labels: [2], features: [[3, 4]] });
  });

  it('sorts unsorted feature ids (values stay paired) and unsorted labels', async () => {
    const d = await readXC(await file('1 10 10\n7,2,5 9:0.9 1:0.1 5:0.5 0:1\n'));
    expect(rows(d)).toEqual([{ labels: [2, 5, 7], features: [[0, 1], [1, Math.fround(0.1)], [5, 0.5], [9, Math.fround(0.9)]] }]);
  });

  it('reads empty datasets and points with no features and no labels', async () => {
    const empty = await readXC(await file('0 10 5\n'));
    expect([empty.points, empty.offsets.length, empty.indices.length]).toEqual([0, 1, 0]);
    const d = await readXC(await file('2 10 5\n \n3\n'));
    expect(rows(d)).toEqual([{ labels: [], features: [] }, { labels: [3], features: [] }]);
  });

  it('gives the same result whatever the chunk size (lines straddling chunk boundaries)', async () => {
    const data = synthesize({ shape: 'tiny', points: 60, seed: 3 });
    const p = join(dir, 'chunks.txt');
    await writeXC(p, data, { fsync: false });
    for (const chunkBytes of [16, 17, 64, 1000, 1 << 20]) expectSameDataset(await readXC(p, { chunkBytes }), data);
  });

  it('round-trips generated data exactly: synthesize -> writeXC -> readXC', async () => {
    for (const [shape, points] of [['tiny', 500], ['small', 300]] as const) {
      const data = synthesize({ shape, points, seed: 11 });
      const p = join(dir, `rt-${shape}.txt`);
      await writeXC(p, data, { fsync: false });
      expectSameDataset(await readXC(p), data);
    }
  });

  it('round-trips arbitrary float32 values, negative zero and rows without labels or features', async () => {
    const vals = [1, -1, 0.1, -0, 0, 3.4028234663852886e38, 1.401298464324817e-45, 1.1754943508222875e-38, 123456.7890, 1e-7, 16777217, 2 ** 40];
    const data: SparseDataset = {
      points: 3, features: 20, labels: 3,
      offsets: Uint32Array.of(0, vals.length, vals.length, vals.length),
      indices: Uint32Array.from(vals, (_, i) => i),
      values: Float32Array.from(vals),
      labelOffsets: Uint32Array.of(0, 0, 2, 2),
      labelIndices: Uint32Array.of(0, 2),
    };
    const p = join(dir, 'floats.txt');
    await writeXC(p, data, { fsync: false });
    expectSameDataset(await readXC(p), data);
  });

  it('reads the tiny fixture (20 points, one without labels)', async () => {
    const d = await readXC(join(import.meta.dirname, '../../datasets/fixtures/tiny.txt'));
    expect([d.points, d.features, d.labels]).toEqual([20, 2000, 100]);
    expect(d.labelOffsets[5]! - d.labelOffsets[4]!).toBe(0);
  });

  it('reports progress up to the file size', async () => {
    const data = synthesize({ shape: 'tiny', points: 200, seed: 1 });
    const p = join(dir, 'progress.txt');
    const bytes = await writeXC(p, data, { fsync: false });
    const calls: [number, number][] = [];
    await readXC(p, { chunkBytes: 4096, onProgress: (done, total) => calls.push([done, total]) });
    expect(calls.length).toBeGreaterThan(3);
    expect(calls.at(-1)).toEqual([bytes, bytes]);
    for (let i = 1; i < calls.length; i++) expect(calls[i]![0]).toBeGreaterThanOrEqual(calls[i - 1]![0]);
  });

  it('does not allocate for huge declared sizes before the data confirms them', async () => {
    // 4 billion points / 4 billion features: preallocating from the header would need tens of GB.
    const p = await file('4000000000 4000000000 4000000000\n1 2:1\n');
    const before = process.memoryUsage().arrayBuffers;
    const e = await failure(p);
    expect(e.message).toBe(`${p}:3: file ends after 1 points but the header declares 4000000000`);
    expect(process.memoryUsage().arrayBuffers - before).toBeLessThan(64 << 20);
  });
});

describe('readXC: every malformed input is a DataFormatError naming file and line', () => {
  const cases: [string, string, string][] = [
    ['empty file', '', '1: empty file: expected a header "points features labels"'],
    ['missing header', '1,2 0:1\n', `1: bad header '1,2 0:1': expected "points features labels" (3 non-negative integers)`],
    ['two numbers', '3 10\n', `1: bad header '3 10': expected "points features labels" (3 non-negative integers)`],
    ['four numbers', '3 10 5 1\n', `1: bad header '3 10 5 1': expected "points features labels" (3 non-negative integers)`],
    ['negative count', '3 -10 5\n', `1: bad header '3 -10 5': expected "points features labels" (3 non-negative integers)`],
    ['non-numeric header', 'N D L\n', `1: bad header 'N D L': expected "points features labels" (3 non-negative integers)`],
    ['blank header', '\n1 0:1\n', '1: bad header an empty line: expected "points features labels" (3 non-negative integers)'],
    ['too few lines', '3 10 5\n1 0:1\n2 1:1\n', '4: file ends after 2 points but the header declares 3'],
    ['truncated file', '3 10 5\n1 0:1\n2 1:1\n3 2:0.5 4:', "4: missing value in feature '4:'"],
    ['too many lines', '1 10 5\n1 0:1\n2 1:1\n', '3: more points than the header declares (1)'],
    ['feature id out of range', '2 10 5\n1 0:1\n2 10:1\n', '3: feature id 10 out of range [0, 10)'],
    ['huge feature id', '1 10 5\n1 99999999999999999999999:1\n', '2: feature id 99999999999999999999999 out of range [0, 10)'],
    ['label id out of range', '2 10 5\n1 0:1\n2,5 1:1\n', '3: label id 5 out of range [0, 5)'],
    ['duplicate feature', '1 10 5\n1 3:1 3:2\n', '2: duplicate feature id 3'],
    ['duplicate feature, not adjacent', '1 10 5\n1 3:1 5:1 3:2\n', '2: duplicate feature id 3'],
    ['duplicate label', '1 10 5\n1,1 3:1\n', '2: duplicate label id 1'],
    ['duplicate label, not adjacent', '1 10 5\n3,1,3 3:1\n', '2: duplicate label id 3'],
    ['negative feature id', '1 10 5\n1 -3:1\n', "2: negative feature id '-3'"],
    ['negative label id', '1 10 5\n-1 3:1\n', "2: negative label id '-1'"],
    ['non-numeric feature id', '1 10 5\n1 abc:1\n', "2: non-numeric feature id 'abc'"],
    ['non-numeric label', '1 10 5\nx 3:1\n', "2: non-numeric label id 'x'"],
    ['non-numeric label in a list', '1 10 5\n1,x 3:1\n', "2: non-numeric label id 'x' in '1,x'"],
    ['empty label id', '1 10 5\n1,,2 3:1\n', "2: empty label id in '1,,2'"],
    ['trailing comma', '1 10 5\n1, 3:1\n', "2: empty label id in '1,'"],
    ['non-numeric value', '1 10 5\n1 3:abc\n', "2: non-numeric value 'abc' in feature '3:abc'"],
    ['value with junk', '1 10 5\n1 3:1.5x\n', "2: non-numeric value '1.5x' in feature '3:1.5x'"],
    ['missing colon', '1 10 5\n1 3:1 4\n', "2: malformed feature '4' (expected id:value)"],
    ['missing value', '1 10 5\n1 3:\n', "2: missing value in feature '3:'"],
    ['missing id', '1 10 5\n1 :1\n', "2: malformed feature ':1' (missing id before ':')"],
    ['labels after a leading space', '1 10 5\n 1,2 3:1\n', "2: malformed feature '1,2' (expected id:value)"],
    ['nan', '1 10 5\n1 3:nan\n', "2: non-finite value 'nan' in feature '3:nan'"],
    ['NaN', '1 10 5\n1 3:NaN\n', "2: non-finite value 'NaN' in feature '3:NaN'"],
    ['inf', '1 10 5\n1 3:-inf\n', "2: non-finite value '-inf' in feature '3:-inf'"],
    ['Infinity', '1 10 5\n1 3:Infinity\n', "2: non-finite value 'Infinity' in feature '3:Infinity'"],
    ['overflow', '1 10 5\n1 3:1e999\n', "2: non-finite value '1e999' in feature '3:1e999' (outside the float32 range)"],
    ['float32 overflow', '1 10 5\n1 3:1e39\n', "2: non-finite value '1e39' in feature '3:1e39' (outside the float32 range)"],
    ['hex value', '1 10 5\n1 3:0x10\n', "2: non-numeric value '0x10' in feature '3:0x10'"],
    ['blank line inside the data', '2 10 5\n1 0:1\n\n2 1:1\n',
      '3: blank line inside the data (a point with no labels and no features is written as a single space)'],
    ['blank CRLF line inside the data', '2 10 5\r\n1 0:1\r\n\r\n2 1:1\r\n',
      '3: blank line inside the data (a point with no labels and no features is written as a single space)'],
  ];
  for (const [name, text, expected] of cases) {
    it(name, async () => {
      const p = await file(text);
      const e = await failure(p);
      expect(e.message).toBe(`${p}:${expected}`);
      expect(e.file).toBe(p);
      expect(e.line).toBe(Number(expected.split(':')[0]));
    });
  }

  it('finds errors past chunk boundaries with the right line number', async () => {
    const lines = Array.from({ length: 500 }, (_, i) => `${i % 5} ${i % 7}:1 ${10 + (i % 3)}:0.5`);
    lines[377] = '1 3:1 3:2';
    const p = await file(`500 20 5\n${lines.join('\n')}\n`);
    const e = await failure(p, { chunkBytes: 64 });
    expect(e.message).toBe(`${p}:379: duplicate feature id 3`);
  });

  it('uses displayName in messages', async () => {
    const p = await file('2 1836 159\n1 0:1\n2 2000:1\n');
    await expect(readXC(p, { displayName: 'bibtex.txt' })).rejects.toThrow(/^bibtex\.txt:3: feature id 2000 out of range \[0, 1836\)$/);
  });

  it('shortens very long tokens in messages', async () => {
    const p = await file(`1 10 5\n1 3:${'9'.repeat(30)}x${'9'.repeat(30)}\n`);
    const e = await failure(p);
    expect(e.message).toMatch(/non-numeric value '9{30}x9{6}\.\.\.' in feature '3:9{30}x9{4}\.\.\.'$/);
  });

  it('keeps Node errors for missing files', async () => {
    await expect(readXC(join(dir, 'nope.txt'))).rejects.toMatchObject({ code: 'ENOENT' });
  });
});
