// Pre-flight checks of output directories: missing, not a directory, not creatable, not enough room.
import { afterAll, describe, expect, it } from 'vitest';
import { mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { statfs } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { checkOutputDirs } from '../../src/util/output-check.js';

const root = mkdtempSync(join(tmpdir(), 'sublinear-outcheck-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

describe('checkOutputDirs', () => {
  it('accepts an existing writable directory with room, and leaves nothing behind', async () => {
    const dir = join(root, 'ok');
    mkdirSync(dir);
    await checkOutputDirs([{ dir, bytes: 1000, what: 'checkpoint directory' }]);
    expect(readdirSync(dir)).toEqual([]);
  });

  it('a missing directory: refused unless creatable, and then not created', async () => {
    const dir = join(root, 'missing', 'deeper');
    await expect(checkOutputDirs([{ dir, bytes: 1, what: 'directory of --save' }])).rejects.toThrow(`directory of --save ${dir} does not exist`);
    await checkOutputDirs([{ dir, bytes: 1, what: 'checkpoint directory', creatable: true }]);
    expect(readdirSync(root)).not.toContain('missing');
  });

  it('a file in the way', async () => {
    const file = join(root, 'file');
    writeFileSync(file, 'x');
    await expect(checkOutputDirs([{ dir: file, bytes: 1, what: 'checkpoint directory' }])).rejects.toThrow(`checkpoint directory ${file} is not a directory`);
    await expect(checkOutputDirs([{ dir: join(file, 'sub'), bytes: 1, what: 'checkpoint directory', creatable: true }])).rejects.toThrow(
      `checkpoint directory ${join(file, 'sub')} cannot be created: ${file} is not a directory`,
    );
  });

  it('not enough free space: outputs on one filesystem are added up, and the message names them', async () => {
    const a = join(root, 'a'), b = join(root, 'b');
    mkdirSync(a);
    mkdirSync(b);
    const fs = await statfs(a);
    const avail = Number(fs.bavail) * Number(fs.bsize);
    // Each fits alone, both together do not.
    const half = Math.floor(avail * 0.6);
    await checkOutputDirs([{ dir: a, bytes: half, what: 'checkpoint directory' }]);
    await expect(checkOutputDirs([
      { dir: a, bytes: half, what: 'checkpoint directory', detail: '3 checkpoints' },
      { dir: b, bytes: half, what: 'directory of --save' },
    ])).rejects.toThrow(new RegExp(`^not enough free space: .* needed, .* available on the filesystem of ${a} \\(checkpoint directory ${a}: .* \\(3 checkpoints\\); directory of --save ${b}: .*\\)$`));
  });
});
