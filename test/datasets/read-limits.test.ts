// Bounds on what reading a data file may cost: a line longer than maxLineBytes (a file with no newlines,
// a binary file) is a file:line error instead of a buffer grown until the process dies, and a file whose
// data would pass maxMemoryBytes is refused as it is read. A directory names its path.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdirSync, writeFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { readXC } from '../../src/datasets/xc-reader.js';
import { readLibsvm } from '../../src/datasets/libsvm-reader.js';

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

  it('the read buffers count against maxMemoryBytes at their real size: a long line makes them grow', async () => {
    // A 300 kB line (mostly spaces: almost no data) read in 4 kB chunks: the buffers grow to hold it.
    const p = join(dir, 'long-line.txt'), q = join(dir, 'long-line.svm');
    writeFileSync(p, `2 10 3\n0 1:1\n1 2:1${' '.repeat(300_000)}3:1\n`);
    writeFileSync(q, `0 1:1\n1 2:1${' '.repeat(300_000)}3:1\n`);
    for (const [file, read] of [[p, readXC], [q, readLibsvm]] as const) {
      const stats = { bufferBytes: 0 };
      expect((await read(file, { chunkBytes: 4096, stats })).points).toBe(2);
      // Two buffers, one of them holding the line (while it grows, the old one is alive too).
      expect(stats.bufferBytes).toBeGreaterThan(2 * 300_000);
      // The least limit that reads the file: above the buffers (two 4 kB chunks were all that was counted).
      let lo = 0, hi = 16e6;
      while (hi - lo > 1) {
        const mid = Math.floor((lo + hi) / 2);
        if (await read(file, { chunkBytes: 4096, maxMemoryBytes: mid }).then(() => true, () => false)) hi = mid;
        else lo = mid;
      }
      expect(hi).toBeGreaterThan(stats.bufferBytes);
      // Just under it: refused, naming the file and the read buffers.
      const err = await read(file, { chunkBytes: 4096, maxMemoryBytes: hi - 1 }).catch((e: unknown) => e as Error);
      expect(err).toBeInstanceOf(Error);
      expect((err as Error).message.startsWith(`${file}: cannot be read within the memory limit: `)).toBe(true);
      expect((err as Error).message).toMatch(/the read buffers need [\d.]+ MB for a line of more than [\d.]+ MB besides [\d.]+ MB of data read so far, more than the memory limit of [\d.]+ MB$|besides [\d.]+ MB of read buffers and need [\d.]+ MB to grow\)$/);
    }
  });

  it('the data and the read buffers are counted together', async () => {
    const p = join(dir, 'some.txt');
    const rows = Array.from({ length: 2000 }, (_, i) => `${i % 5} ${Array.from({ length: 10 }, (_, j) => `${(i + j * 97) % 1000}:1`).join(' ')}`);
    writeFileSync(p, `2000 1000 5\n${rows.join('\n')}\n`);
    // A file smaller than a chunk is read with buffers of its own size.
    const stats = { bufferBytes: 0 };
    await readXC(p, { stats });
    const size = (await import('node:fs')).statSync(p).size;
    expect(stats.bufferBytes).toBe(2 * (size + 1));
    const err = await readXC(p, { maxMemoryBytes: stats.bufferBytes + 50_000 }).catch((e: unknown) => e as Error);
    expect((err as Error).message).toMatch(/: cannot be read within the memory limit: the data needs more than the memory limit of [\d.]+ MB \(\d+ points read so far hold [\d.]+ MB besides [\d.]+ MB of read buffers and need [\d.]+ MB to grow\)$/);
  });

  it('a directory is an error naming it', async () => {
    const d = join(dir, 'adir');
    mkdirSync(d);
    await expect(readXC(d)).rejects.toThrow(`EISDIR: illegal operation on a directory, read '${d}'`);
  });
});
