// The raw-text reader: both line forms (labels<TAB>text, fastText __label__ prefixes), and every refusal
// named by file and line, word for word.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { readText, parseTextLine, firstInvalidUtf8 } from '../../src/datasets/text-reader.js';

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'sublinear-text-'));
});
afterAll(async () => {
  if (dir) await rm(dir, { recursive: true, force: true });
});

async function file(name: string, content: string | Uint8Array): Promise<string> {
  const p = join(dir, name);
  await writeFile(p, content);
  return p;
}

describe('readText', () => {
  it('reads labels<TAB>text, fastText prefixes and unlabelled lines; CRLF, a BOM and a final line without a newline', async () => {
    const p = await file('ok.txt', '\ufeffa,b\tHello world\r\n__label__c __label__d Good  day\n\tno labels here\nplain text line\n c , e \tspaces in names');
    const d = await readText(p);
    expect(d.points).toBe(5);
    expect(d.labels).toEqual([['a', 'b'], ['c', 'd'], [], [], ['c', 'e']]);
    expect(d.texts).toEqual(['Hello world', 'Good day', 'no labels here', 'plain text line', 'spaces in names']);
    expect(Array.from(d.lines)).toEqual([1, 2, 3, 4, 5]);
  });

  it('allows blank lines at the end only', async () => {
    expect((await readText(await file('end.txt', 'a\tx\n\n\n'))).points).toBe(1);
    const p = await file('mid.txt', 'a\tx\n\nb\ty\n');
    await expect(readText(p)).rejects.toThrow(`${p}:2: blank line inside the data (every point needs a text)`);
  });

  it('refuses invalid UTF-8 with file:line and the byte', async () => {
    const p = await file('bad.txt', Buffer.concat([Buffer.from('a\tok\nb\tbad '), Buffer.from([0xc3, 0x28]), Buffer.from('\n')]));
    await expect(readText(p)).rejects.toThrow(`${p}:2: invalid UTF-8 at byte 7 of the line`);
  });

  it('refuses an empty text, an empty label name and a fastText label with a comma', async () => {
    const empty = await file('empty.txt', 'a\tx\nb\t   \n');
    await expect(readText(empty)).rejects.toThrow(`${empty}:2: empty text (a point needs some text after its labels)`);
    const emptyName = await file('name.txt', 'a,,b\tx\n');
    await expect(readText(emptyName)).rejects.toThrow(`${emptyName}:1: empty label name in 'a,,b' (label names are separated by single commas)`);
    const comma = await file('comma.txt', 'x\tfine\n__label__a,b some text\n');
    await expect(readText(comma)).rejects.toThrow(`${comma}:2: label name 'a,b' contains a comma (label names cannot)`);
    const onlyLabels = await file('only.txt', '__label__a __label__b\n');
    await expect(readText(onlyLabels)).rejects.toThrow(`${onlyLabels}:1: empty text (a point needs some text after its labels)`);
  });

  it('refuses a line over the limit, naming it, also when it straddles chunks', async () => {
    const p = await file('long.txt', `a\tshort\nb\t${'x'.repeat(300)}\nc\tshort\n`);
    await expect(readText(p, { maxLineBytes: 100 })).rejects.toThrow(`${p}:2: line longer than 100 bytes`);
    await expect(readText(p, { maxLineBytes: 100, chunkBytes: 16 })).rejects.toThrow(`${p}:2: line longer than 100 bytes`);
    expect((await readText(p, { maxLineBytes: 400, chunkBytes: 16 })).points).toBe(3);
  });

  it('refuses a file whose text would pass maxMemoryBytes, naming the file', async () => {
    const p = await file('big.txt', Array.from({ length: 50 }, (_, i) => `a\tword ${i} ${'x'.repeat(100)}`).join('\n'));
    // The read buffers (two of the file's size, + 1 byte each) count against the limit too.
    const buffers = 2 * (statSync(p).size + 1);
    const mb = (b: number) => `${(b / 1e6).toPrecision(3)} MB`;
    await expect(readText(p, { maxMemoryBytes: buffers + 2000 })).rejects.toThrow(
      `${p}: cannot be read within the memory limit: its text needs more than 0.00200 MB by line 6 (besides ${mb(buffers)} of read buffers; the limit is ${mb(buffers + 2000)})`);
    await expect(readText(p, { maxMemoryBytes: buffers - 1 })).rejects.toThrow(
      `${p}: cannot be read within the memory limit: the read buffers need ${mb(buffers)} besides 0.00 MB of data read so far, more than the memory limit of ${mb(buffers - 1)}`);
    expect((await readText(p, { maxMemoryBytes: 1e6 })).points).toBe(50);
  });

  it('gives the same points whatever the chunk size', async () => {
    const lines = Array.from({ length: 200 }, (_, i) => `l${i % 7},m${i % 3}\tdocument ${i} ünïcödé ${'w'.repeat(i % 13)}`);
    const p = await file('many.txt', lines.join('\n') + '\n');
    const a = await readText(p);
    const b = await readText(p, { chunkBytes: 17 });
    expect(b).toEqual(a);
    expect(a.points).toBe(200);
    expect(a.texts[5]).toBe('document 5 ünïcödé wwwww');
  });
});

describe('parseTextLine and firstInvalidUtf8', () => {
  it('strips __label__ in the TAB form too, and keeps __label__ words in the text after a TAB', () => {
    expect(parseTextLine('__label__a,b\tsee __label__c', 'f', 1)).toEqual({ labels: ['a', 'b'], text: 'see __label__c' });
  });
  it('finds the first invalid byte (truncated sequences, overlong forms, surrogates)', () => {
    expect(firstInvalidUtf8(Buffer.from('héllo'))).toBe(6); // valid: its byte length
    expect(firstInvalidUtf8(Uint8Array.from([0x61, 0xe2, 0x82]))).toBe(1);
    expect(firstInvalidUtf8(Uint8Array.from([0xc0, 0x80]))).toBe(0);
    expect(firstInvalidUtf8(Uint8Array.from([0x61, 0xed, 0xa0, 0x80]))).toBe(1);
    expect(firstInvalidUtf8(Uint8Array.from([0xf4, 0x90, 0x80, 0x80]))).toBe(0);
  });
});
