// Bounds on what reading a data file may cost: a line longer than maxLineBytes (a file with no newlines,
// a binary file) is a file:line error instead of a buffer grown until the process dies, and a file whose
// data would pass maxMemoryBytes is refused as it is read. A directory names its path.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdirSync, writeFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { readXC } from '../../datasets/xc-reader.js';
import { readLibsvm } from '../../datasets/libsvm-reader.js';

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'sublinear-limits-'));
});
afterAll(async () => {
  if (dir) await rm(dir, { recursive: true, force: true });
});

describe('read limits', () => {
  it('a line longer than maxLineBytes is an error naming the file and line', async () => {
    const p = join(dir, 'long.txt');
    writeFileSync(p, `3 100 5\n0 1:1\n1 ${'2:1 '.repeat(5000)}\n2 3:1\n`);
    await expect(readXC(p, { maxLineBytes: 4096, chunkBytes: 1024 })).rejects.toThrow(`${p}:3: line longer than 4096 bytes`);
    // The same file is fine with the default limit.
    await expect(readXC(p, { chunkBytes: 1024 })).rejects.toThrow(/repeated|duplicate/);
    const q = join(dir, 'noline.libsvm');
    writeFileSync(q, 'x'.repeat(10000));
    await expect(readLibsvm(q, { maxLineBytes: 2048, chunkBytes: 512 })).rejects.toThrow(`${q}:1: line longer than 2048 bytes`);
  });

  it('a file whose data passes maxMemoryBytes is refused while it is read', async () => {
    const p = join(dir, 'big.txt');
    const rows = Array.from({ length: 20000 }, (_, i) => `${i % 5} ${Array.from({ length: 20 }, (_, j) => `${i % 50 + j * 50}:1`).join(' ')}`);
    writeFileSync(p, `20000 1000 5\n${rows.join('\n')}\n`);
    const ok = await readXC(p, { chunkBytes: 4096 });
    expect(ok.points).toBe(20000);
    await expect(readXC(p, { chunkBytes: 4096, maxMemoryBytes: 1_000_000 })).rejects.toThrow(`${p}: cannot be read within the memory limit`);
  });

  it('a directory is an error naming it', async () => {
    const d = join(dir, 'adir');
    mkdirSync(d);
    await expect(readXC(d)).rejects.toThrow(`EISDIR: illegal operation on a directory, read '${d}'`);
  });
});
