import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { readLibsvm } from '../../src/datasets/libsvm-reader.js';
import { readXC } from '../../src/datasets/xc-reader.js';
import { DataFormatError } from '../../src/datasets/errors.js';

const FIX = join(import.meta.dirname, '../../datasets/fixtures');
let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'sublinear-svm-'));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

let n = 0;
async function file(text: string): Promise<string> {
  const p = join(dir, `l${n++}.svm`);
  await writeFile(p, text);
  return p;
}

describe('readLibsvm', () => {
  it('reads the fixture into the same rows as the XC fixture (1-based feature ids shifted to 0-based)', async () => {
    const svm = await readLibsvm(join(FIX, 'tiny.libsvm'), { features: 2000, labels: 100 });
    const xc = await readXC(join(FIX, 'tiny.txt'));
    expect(svm).toEqual(xc);
  });

  it('infers dimensions as the largest id + 1', async () => {
    const d = await readLibsvm(await file('0,3 1:0.5 7:1\n 2:2\n'));
    expect([d.points, d.features, d.labels]).toEqual([2, 7, 4]);
    expect(Array.from(d.indices)).toEqual([0, 6, 1]);
    expect(Array.from(d.labelIndices)).toEqual([0, 3]);
    expect(d.indices.buffer).toBeInstanceOf(SharedArrayBuffer);
  });

  it('reads 0-based files and 1-based labels when told', async () => {
    const d = await readLibsvm(await file('1,3 0:0.5 7:1\n'), { oneBased: false, labelsOneBased: true });
    expect(Array.from(d.indices)).toEqual([0, 7]);
    expect(Array.from(d.labelIndices)).toEqual([0, 2]);
    expect([d.features, d.labels]).toEqual([8, 3]);
  });

  it('shares the XC rules: sorting, CRLF, trailing blank lines', async () => {
    const d = await readLibsvm(await file('3,1 9:0.9 2:0.2\r\n\r\n'));
    expect(Array.from(d.labelIndices)).toEqual([1, 3]);
    expect(Array.from(d.indices)).toEqual([1, 8]);
    expect(Array.from(d.values)).toEqual([Math.fround(0.2), Math.fround(0.9)]);
  });

  it('reads the binary labels of LIBSVM classification files: +1 is label 1, -1 is label 0', async () => {
    const d = await readLibsvm(await file('+1 1:0.5 3:1\n-1 2:1\n1 1:1\n0 3:2\n-1\t2:1\n+1\n'));
    expect([d.points, d.features, d.labels]).toEqual([6, 3, 2]);
    expect(Array.from(d.labelOffsets)).toEqual([0, 1, 2, 3, 4, 5, 6]);
    expect(Array.from(d.labelIndices)).toEqual([1, 0, 1, 0, 0, 1]);
    expect(Array.from(d.indices)).toEqual([0, 2, 1, 0, 2, 1]);
    expect(Array.from(d.offsets)).toEqual([0, 2, 3, 4, 5, 6, 6]);
  });

  it('reads an empty file as an empty dataset', async () => {
    const d = await readLibsvm(await file(''));
    expect([d.points, d.features, d.labels]).toEqual([0, 0, 0]);
  });

  const cases: [string, string, object, string][] = [
    ['feature id 0 in a 1-based file', '1 0:1\n', {}, '1: feature id 0 in a file read with 1-based feature ids (read it as 0-based if its ids start at 0)'],
    ['label id 0 with 1-based labels', '0 1:1\n', { labelsOneBased: true }, '1: label id 0 in a file read with 1-based label ids (read it as 0-based if its ids start at 0)'],
    ['feature beyond the given dimension', '1 1:1\n1 11:1\n', { features: 10 }, '2: feature id 11 out of range [1, 11)'],
    ['label beyond the given count', '1 1:1\n5 2:1\n', { labels: 5 }, '2: label id 5 out of range [0, 5)'],
    ['duplicate feature', '1 1:1 2:1 1:3\n', {}, '1: duplicate feature id 1'],
    ['duplicate label', '2,2 1:1\n', {}, '1: duplicate label id 2'],
    ['malformed token', '1 1:1 qid\n', {}, "1: malformed feature 'qid' (expected id:value)"],
    ['non-finite value', '1 1:inf\n', {}, "1: non-finite value 'inf' in feature '1:inf'"],
    ['blank line inside', '1 1:1\n\n2 1:1\n', {}, '2: blank line inside the data (a point with no labels and no features is written as a single space)'],
    ['id too large to store', '1 99999999999:1\n', {}, '1: feature id 99999999999 too large (ids are stored as 32-bit integers)'],
    ['a signed label with 1-based labels', '+1 1:1\n', { labelsOneBased: true }, "1: non-numeric label id '+1'"],
    ['-1 with 1-based labels', '2 1:1\n-1 1:1\n', { labelsOneBased: true }, "2: negative label id '-1'"],
    ['+1 when one label is declared', '+1 1:1\n', { labels: 1 }, '1: label id 1 out of range [0, 1)'],
    ['a signed label in a list', '-1,2 1:1\n', {}, "1: negative label id '-1'"],
    ['other signed numbers', '-2 1:1\n', {}, "1: negative label id '-2'"],
  ];
  for (const [name, text, opts, expected] of cases) {
    it(`error: ${name}`, async () => {
      const p = await file(text);
      const e = await readLibsvm(p, opts).then(
        () => undefined,
        (err: unknown) => err,
      );
      expect(e).toBeInstanceOf(DataFormatError);
      expect((e as Error).message).toBe(`${p}:${expected}`);
    });
  }

  it('validates its options', async () => {
    await expect(readLibsvm(join(FIX, 'tiny.libsvm'), { features: -1 })).rejects.toThrow(
      'Expected non-negative integer for features but received -1',
    );
  });
});
