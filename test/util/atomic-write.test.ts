import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { spawnSync } from 'node:child_process';
import { lstat, mkdtemp, mkdir, open, readdir, readFile, readlink, rm, stat, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { NotRegularFileError, writeFileAtomic } from '../../src/util/atomic-write.js';

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'sublinear-atomic-'));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

const OLD = Buffer.from('the previous model, which must survive\n');

describe('writeFileAtomic', () => {
  it('writes array and async-iterable chunks, including SharedArrayBuffer views, and returns the size', async () => {
    const target = join(dir, 'out.bin');
    expect(await writeFileAtomic(target, [Uint8Array.of(1, 2), new Uint8Array(0), Uint8Array.of(3)])).toBe(3);
    expect([...(await readFile(target))]).toEqual([1, 2, 3]);

    const shared = new Uint8Array(new SharedArrayBuffer(16));
    for (let i = 0; i < 16; i++) shared[i] = 100 + i;
    async function* gen() {
      yield shared.subarray(0, 10);
      yield shared.subarray(10);
    }
    expect(await writeFileAtomic(target, gen())).toBe(16);
    expect([...(await readFile(target))]).toEqual(Array.from({ length: 16 }, (_, i) => 100 + i));
    expect(await readdir(dir)).toEqual(['out.bin']);
  });

  it('writes through a temporary file next to the target, invisible until the rename', async () => {
    const target = join(dir, 'model.bin');
    await writeFile(target, OLD);
    const seen: string[][] = [];
    async function* gen() {
      yield Uint8Array.of(1);
      // Mid-write: the target still holds the old bytes and one temporary file exists.
      seen.push(await readdir(dir));
      expect(await readFile(target)).toEqual(OLD);
      yield Uint8Array.of(2);
    }
    await writeFileAtomic(target, gen());
    expect(seen[0]!.length).toBe(2);
    const tmp = seen[0]!.find((n) => n !== 'model.bin')!;
    expect(tmp).toMatch(new RegExp(`^\\.model\\.bin\\.tmp-${process.pid}-[0-9a-f]{12}$`));
    expect([...(await readFile(target))]).toEqual([1, 2]);
    expect(await readdir(dir)).toEqual(['model.bin']);
  });

  it('a failure mid-write leaves the previous file byte-identical and no temporary file', async () => {
    const target = join(dir, 'model.bin');
    await writeFile(target, OLD);
    const before = await stat(target);
    let produced = 0;
    async function* failing() {
      for (let i = 0; i < 10; i++) {
        if (i === 4) throw new Error('disk on fire');
        produced++;
        yield new Uint8Array(64 * 1024).fill(i); // 256 kB reach the temporary file before the failure
      }
    }
    await expect(writeFileAtomic(target, failing())).rejects.toThrow('disk on fire');
    expect(produced).toBe(4);
    expect(await readFile(target)).toEqual(OLD);
    expect((await stat(target)).mtimeMs).toBe(before.mtimeMs);
    expect(await readdir(dir)).toEqual(['model.bin']);
  });

  it('a synchronous iterable that throws is handled the same way', async () => {
    const target = join(dir, 'model.bin');
    await writeFile(target, OLD);
    function* failing() {
      yield Uint8Array.of(9, 9, 9);
      throw new RangeError('producer bug');
    }
    await expect(writeFileAtomic(target, failing())).rejects.toThrow('producer bug');
    expect(await readFile(target)).toEqual(OLD);
    expect(await readdir(dir)).toEqual(['model.bin']);
  });

  it('rejects non-Uint8Array chunks without touching the target', async () => {
    const target = join(dir, 'model.bin');
    await writeFile(target, OLD);
    await expect(writeFileAtomic(target, [Uint8Array.of(1), 'text' as unknown as Uint8Array])).rejects.toThrow(
      `writeFileAtomic(${target}): expected Uint8Array chunks but received string`,
    );
    expect(await readFile(target)).toEqual(OLD);
    expect(await readdir(dir)).toEqual(['model.bin']);
  });

  it('refuses a directory as the target before writing anything', async () => {
    const target = join(dir, 'model.bin');
    await mkdir(target);
    await writeFile(join(target, 'keep'), 'x');
    await expect(writeFileAtomic(target, [Uint8Array.of(1, 2, 3)])).rejects.toThrow(new NotRegularFileError(`${target} is a directory, not a regular file: refusing to replace it`));
    expect(await readdir(dir)).toEqual(['model.bin']);
    expect(await readFile(join(target, 'keep'), 'utf8')).toBe('x');
  });

  it('refuses a FIFO (and, as root, a device node) instead of renaming over it', async () => {
    const fifo = join(dir, 'ckpt-000000010.bin');
    expect(spawnSync('mkfifo', [fifo]).status).toBe(0);
    await expect(writeFileAtomic(fifo, [Uint8Array.of(1)])).rejects.toThrow(`${fifo} is a FIFO (named pipe), not a regular file: refusing to replace it`);
    expect((await lstat(fifo)).isFIFO()).toBe(true);
    expect(await readdir(dir)).toEqual(['ckpt-000000010.bin']);
    if (process.getuid?.() !== 0) return; // mknod needs root
    const dev = join(dir, 'null');
    expect(spawnSync('mknod', [dev, 'c', '1', '3']).status).toBe(0);
    await expect(writeFileAtomic(dev, [Uint8Array.of(1)])).rejects.toThrow(`${dev} is a character device, not a regular file: refusing to replace it`);
    expect((await lstat(dev)).isCharacterDevice()).toBe(true);
  });

  it('follows a symbolic link to a regular file (replaced in its own directory; the link stays) and refuses a dangling one', async () => {
    await mkdir(join(dir, 'real'));
    const real = join(dir, 'real', 'model.bin');
    await writeFile(real, OLD);
    const link = join(dir, 'link.bin');
    await symlink(real, link);
    await writeFileAtomic(link, [Uint8Array.of(7, 8)]);
    expect([...(await readFile(real))]).toEqual([7, 8]);
    expect(await readlink(link)).toBe(real);
    expect((await readdir(dir)).sort()).toEqual(['link.bin', 'real']);
    expect(await readdir(join(dir, 'real'))).toEqual(['model.bin']);
    const dangling = join(dir, 'dangling.bin');
    await symlink(join(dir, 'nowhere.bin'), dangling);
    await expect(writeFileAtomic(dangling, [Uint8Array.of(1)])).rejects.toThrow(`${dangling} is a symbolic link to nothing (its target does not exist): refusing to write through it`);
    await expect(stat(join(dir, 'nowhere.bin'))).rejects.toThrow(/ENOENT/);
    const toDir = join(dir, 'to-dir');
    await symlink(join(dir, 'real'), toDir);
    await expect(writeFileAtomic(toDir, [Uint8Array.of(1)])).rejects.toThrow(`${toDir} is a symbolic link to ${join(dir, 'real')}, which is a directory, not a regular file: refusing to replace it`);
  });

  it('fails cleanly when the directory does not exist', async () => {
    await expect(writeFileAtomic(join(dir, 'missing', 'model.bin'), [Uint8Array.of(1)])).rejects.toThrow(/ENOENT/);
    expect(await readdir(dir)).toEqual([]);
  });

  it('honours mode and the fsync switch', async () => {
    const target = join(dir, 'private.bin');
    await writeFileAtomic(target, [Uint8Array.of(7)], { mode: 0o600, fsync: false });
    expect((await stat(target)).mode & 0o777).toBe(0o600);
    expect([...(await readFile(target))]).toEqual([7]);
  });

  it('fsyncs the temporary file before the rename and the directory after it', async () => {
    const target = join(dir, 'model.bin');
    await writeFile(target, OLD);
    // Every FileHandle shares one prototype: spy on its sync() and record what the directory held then.
    const probe = await open(join(dir, 'probe'), 'w');
    const proto = Object.getPrototypeOf(probe) as { sync: () => Promise<void> };
    await probe.close();
    await rm(join(dir, 'probe'));
    const seen: { names: string[]; target: string }[] = [];
    const sync = proto.sync;
    const spy = vi.spyOn(proto, 'sync').mockImplementation(async function (this: unknown) {
      seen.push({ names: (await readdir(dir)).sort(), target: (await readFile(target)).toString() });
      return sync.call(this);
    });
    try {
      await writeFileAtomic(target, [Uint8Array.of(65, 66)]);
      await writeFileAtomic(join(dir, 'scratch.bin'), [Uint8Array.of(1)], { fsync: false });
    } finally {
      spy.mockRestore();
    }
    // Two syncs, both for the first write: the file while it was still the temporary one (the target
    // still old), then the directory once the rename was done. None with fsync: false.
    expect(seen).toHaveLength(2);
    expect(seen[0]!.target).toBe(OLD.toString());
    expect(seen[0]!.names).toHaveLength(2);
    expect(seen[0]!.names[0]).toMatch(/^\.model\.bin\.tmp-/);
    expect(seen[1]).toEqual({ names: ['model.bin'], target: 'AB' });
  });

  it('removes temporary files of dead writers of the same target, and only those', async () => {
    const target = join(dir, 'model.bin');
    // A pid that is certainly dead: a child that has exited.
    const dead = spawnSync(process.execPath, ['-e', 'process.stdout.write(String(process.pid))'], { encoding: 'utf8' }).stdout;
    const stale = `.model.bin.tmp-${dead}-0123456789ab`;
    const live = `.model.bin.tmp-${process.ppid}-0123456789ab`;
    const ours = `.model.bin.tmp-${process.pid}-abcdefabcdef`;
    const other = `.other.bin.tmp-${dead}-0123456789ab`;
    for (const n of [stale, live, ours, other]) await writeFile(join(dir, n), 'partial');
    await writeFileAtomic(target, [Uint8Array.of(1)]);
    expect((await readdir(dir)).sort()).toEqual([live, ours, other, 'model.bin'].sort());
  });
});
