import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import xxhash from 'xxhash-wasm';
import { BinFileError, readBinFile, writeBinFile, type SectionArray } from '../../src/util/binfile.js';
import { Xoshiro128 } from '../../src/util/rng.js';

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'sublinear-binfile-'));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

const CHECKSUM = 'checksum mismatch (file is corrupt or truncated)';

function sampleSections(): Record<string, SectionArray> {
  const w = new Float32Array(1000);
  for (let i = 0; i < w.length; i++) w[i] = Math.sin(i) * 1e-3;
  return {
    'layer0.weights': w,
    ids: Uint32Array.from([0, 1, 0xffffffff, 42]),
    signed: Int32Array.from([-1, 2147483647, -2147483648]),
    odd: Uint8Array.from([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13]), // 13 bytes: padded to 16
    empty: new Float32Array(0),
    doubles: Float64Array.from([Math.PI, -0, Number.MIN_VALUE, 1e308]),
  };
}
const META = { config: { inputDim: 10, layers: [{ size: 4 }] }, seed: 1, rng: '12345678901234567890', paths: ['train.txt'] };

function expectSameSections(got: Record<string, SectionArray>, want: Record<string, SectionArray>): void {
  expect(Object.keys(got)).toEqual(Object.keys(want));
  for (const name of Object.keys(want)) {
    expect(got[name]!.constructor).toBe(want[name]!.constructor);
    // Byte comparison: also distinguishes -0 from 0 and NaN payloads.
    const a = got[name]!, b = want[name]!;
    expect(Buffer.from(a.buffer, a.byteOffset, a.byteLength).equals(Buffer.from(b.buffer, b.byteOffset, b.byteLength))).toBe(true);
  }
}

/** A valid file's bytes and its layout facts (data start = first section offset). */
async function validFile(name: string): Promise<{ path: string; bytes: Buffer; dataStart: number }> {
  const path = join(dir, name);
  await writeBinFile(path, { kind: 'model', meta: META, sections: sampleSections() });
  const bytes = await readFile(path);
  const hl = bytes.readUInt32LE(12);
  return { path, bytes, dataStart: Math.ceil((16 + hl) / 8) * 8 };
}

async function expectError(path: string, message: string, problem?: string): Promise<void> {
  let err: unknown;
  try {
    await readBinFile(path);
  } catch (e) {
    err = e;
  }
  expect(err).toBeInstanceOf(BinFileError);
  expect((err as Error).message).toBe(`${path}: ${message}`);
  if (problem) expect((err as BinFileError).problem).toBe(problem);
}

/** Builds a file with an arbitrary header and a correct trailer (to test checks behind the checksum). */
async function crafted(path: string, header: unknown, data: Uint8Array = new Uint8Array(0), version = 1): Promise<number> {
  const json = new TextEncoder().encode(JSON.stringify(header));
  const dataStart = Math.ceil((16 + json.length) / 8) * 8;
  const total = dataStart + Math.ceil(data.length / 8) * 8 + 16;
  const buf = Buffer.alloc(total);
  buf.write('SUBLIN01', 0, 'latin1');
  buf.writeUInt32LE(version, 8);
  buf.writeUInt32LE(json.length, 12);
  buf.set(json, 16);
  buf.set(data, dataStart);
  buf.writeBigUInt64LE(BigInt(total), total - 16);
  const h = (await xxhash()).create64(0n);
  h.update(buf.subarray(0, total - 8));
  buf.writeBigUInt64LE(h.digest(), total - 8);
  await writeFile(path, buf);
  return total;
}

describe('writeBinFile / readBinFile round trip', () => {
  it('restores kind, meta and every section, including empty, odd-sized and f64 ones', async () => {
    const path = join(dir, 'roundtrip.bin');
    const sections = sampleSections();
    const size = await writeBinFile(path, { kind: 'checkpoint', meta: META, sections });
    const bytes = await readFile(path);
    expect(bytes.length).toBe(size);
    expect(bytes.subarray(0, 8).toString('latin1')).toBe('SUBLIN01');
    expect(bytes.readUInt32LE(8)).toBe(1);
    expect(bytes.readBigUInt64LE(size - 16)).toBe(BigInt(size));

    const f = await readBinFile<typeof META>(path);
    expect(f.version).toBe(1);
    expect(f.kind).toBe('checkpoint');
    expect(f.meta).toEqual(META);
    expectSameSections(f.sections, sections);
    expect(f.table.map((s) => [s.name, s.dtype, s.length])).toEqual([
      ['layer0.weights', 'f32', 1000],
      ['ids', 'u32', 4],
      ['signed', 'i32', 3],
      ['odd', 'u8', 13],
      ['empty', 'f32', 0],
      ['doubles', 'f64', 4],
    ]);
    // Offsets are absolute, 8-aligned and contiguous up to padding.
    const dataStart = Math.ceil((16 + bytes.readUInt32LE(12)) / 8) * 8;
    expect(f.table.map((s) => s.byteOffset)).toEqual([dataStart, dataStart + 4000, dataStart + 4016, dataStart + 4032, dataStart + 4048, dataStart + 4048]);
    expect(size).toBe(dataStart + 4048 + 32 + 16);
    // A section can be read straight from the file at its offset.
    const d = f.table.find((s) => s.name === 'doubles')!;
    expect(bytes.readDoubleLE(d.byteOffset)).toBe(Math.PI);
  });

  it('streams a large array in many chunks, from and into SharedArrayBuffers', async () => {
    const path = join(dir, 'large.bin');
    const n = 250_003; // ~1 MB, not a multiple of the chunk
    const big = new Float32Array(new SharedArrayBuffer(n * 4));
    for (let i = 0; i < n; i++) big[i] = i * 0.5 - 7;
    const small = Uint32Array.from([5, 6, 7]);
    await writeBinFile(path, { kind: 'model', meta: null, sections: { big, small } }, { chunkBytes: 4096 });

    const shared = await readBinFile(path, { shared: true, chunkBytes: 1000 });
    expect(shared.sections.big!.buffer).toBeInstanceOf(SharedArrayBuffer);
    expect(shared.sections.small!.buffer).toBeInstanceOf(SharedArrayBuffer);
    expectSameSections(shared.sections, { big, small });

    const dest = new Float32Array(new SharedArrayBuffer(n * 4));
    const r = await readBinFile(path, { kind: 'model', into: { big: dest }, chunkBytes: 8192 });
    expect(r.sections.big).toBe(dest); // filled in place
    expect(r.sections.small!.buffer).toBeInstanceOf(ArrayBuffer);
    expect(r.meta).toBeNull();
    expectSameSections({ big: dest }, { big });
  });

  it('headerOnly returns meta and the table without reading sections', async () => {
    const { path, bytes, dataStart } = await validFile('header-only.bin');
    const h = await readBinFile<typeof META>(path, { headerOnly: true, kind: 'model', into: { ids: new Uint32Array(1) } });
    expect(h.meta).toEqual(META);
    expect(h.sections).toEqual({});
    expect(h.table.map((s) => s.name)).toEqual(['layer0.weights', 'ids', 'signed', 'odd', 'empty', 'doubles']);
    // Section bytes are not verified in this mode (documented), but size and structure are.
    const b = Buffer.from(bytes);
    b[dataStart + 5] = b[dataStart + 5]! ^ 1;
    await writeFile(path, b);
    expect((await readBinFile(path, { headerOnly: true })).kind).toBe('model');
    await writeFile(path, bytes.subarray(0, bytes.length - 3));
    await expect(readBinFile(path, { headerOnly: true })).rejects.toThrow(`${path}: truncated: expected ${bytes.length} bytes, found ${bytes.length - 3}`);
    await expect(readBinFile(path, { headerOnly: true, kind: 'checkpoint' })).rejects.toThrow('truncated');
  });

  it('writes atomically: a failed write keeps the old file', async () => {
    const path = join(dir, 'atomic.bin');
    await writeBinFile(path, { kind: 'model', sections: { a: Uint8Array.of(1) } });
    const before = await readFile(path);
    const cyclic: Record<string, unknown> = {};
    cyclic.self = cyclic;
    await expect(writeBinFile(path, { kind: 'model', meta: cyclic, sections: {} })).rejects.toThrow(
      `writeBinFile(${path}): meta is not JSON-serializable`,
    );
    await expect(writeBinFile(path, { kind: 'model', meta: { n: 1n }, sections: {} })).rejects.toThrow('meta is not JSON-serializable');
    await expect(writeBinFile(path, { kind: 'model', sections: { x: new Int16Array(2) as unknown as Uint8Array } })).rejects.toThrow(
      `writeBinFile(${path}): expected a Float32Array, Float64Array, Uint32Array, Int32Array or Uint8Array for section "x" but received Int16Array`,
    );
    await expect(writeBinFile(path, { kind: 'weights' as 'model', sections: {} })).rejects.toThrow(
      `writeBinFile(${path}): expected kind 'model' or 'checkpoint' but received "weights"`,
    );
    expect(await readFile(path)).toEqual(before);
    expect((await readdir(dir)).filter((n) => n.includes('.tmp-'))).toEqual([]);
  });
});

describe('readBinFile refuses damaged files with exact messages', () => {
  it('flipped bytes in the header, a section or the trailer: checksum mismatch', async () => {
    const { path, bytes, dataStart } = await validFile('flip.bin');
    const size = bytes.length;
    const cases = {
      'header JSON': 20,
      'header padding': dataStart - 1,
      'header length field': 14,
      'first section': dataStart + 3,
      'last section byte': size - 17,
      'trailer length': size - 12,
      'trailer hash': size - 1,
    };
    for (const [what, pos] of Object.entries(cases)) {
      const b = Buffer.from(bytes);
      b[pos] = b[pos]! ^ 0x40;
      await writeFile(path, b);
      await expectError(path, CHECKSUM, 'checksum').catch((e) => {
        throw new Error(`${what} (byte ${pos}): ${(e as Error).message}`);
      });
    }
  });

  it('a header length that points past the end is checksum mismatch, not a huge read', async () => {
    const { path, bytes } = await validFile('hl.bin');
    const b = Buffer.from(bytes);
    b.writeUInt32LE(0xffffffff, 12);
    await writeFile(path, b);
    await expectError(path, CHECKSUM, 'checksum');
  });

  it('truncation at several points', async () => {
    const { path, bytes, dataStart } = await validFile('trunc.bin');
    const size = bytes.length;
    const cases: [number, string][] = [
      [0, 'truncated: expected at least 32 bytes, found 0'],
      [5, 'truncated: expected at least 32 bytes, found 5'],
      [12, 'truncated: expected at least 32 bytes, found 12'],
      [40, `truncated: expected at least ${dataStart + 16} bytes, found 40`],
      [dataStart, `truncated: expected at least ${dataStart + 16} bytes, found ${dataStart}`],
      [dataStart + 1000, `truncated: expected ${size} bytes, found ${dataStart + 1000}`],
      [size - 16, `truncated: expected ${size} bytes, found ${size - 16}`],
      [size - 1, `truncated: expected ${size} bytes, found ${size - 1}`],
    ];
    for (const [cut, message] of cases) {
      await writeFile(path, bytes.subarray(0, cut));
      await expectError(path, message, 'truncated');
    }
  });

  it('extra bytes after the trailer', async () => {
    const { path, bytes } = await validFile('long.bin');
    await writeFile(path, Buffer.concat([bytes, Buffer.alloc(24)]));
    await expectError(path, `size mismatch: expected ${bytes.length} bytes, found ${bytes.length + 24} (file is corrupt)`, 'size');
  });

  it('wrong magic and foreign files', async () => {
    const { path, bytes } = await validFile('magic.bin');
    const b = Buffer.from(bytes);
    b[3] = 0x78;
    await writeFile(path, b);
    await expectError(path, 'not a sublinear file (bad magic)', 'bad-magic');
    await writeFile(path, 'label1,label2 1:0.5 3:0.25\n');
    await expectError(path, 'not a sublinear file (bad magic)', 'bad-magic');
    await writeFile(path, 'SUB'); // a prefix of the magic: a truncated sublinear file
    await expectError(path, 'truncated: expected at least 32 bytes, found 3', 'truncated');
  });

  it('newer and invalid format versions', async () => {
    const { path, bytes } = await validFile('version.bin');
    const b = Buffer.from(bytes);
    b.writeUInt32LE(7, 8);
    await writeFile(path, b);
    await expectError(path, 'format version 7 is newer than this sublinear (1)', 'version');
    b.writeUInt32LE(0, 8);
    await writeFile(path, b);
    await expectError(path, 'unsupported format version 0', 'version');
  });

  it('kind and `into` mismatches', async () => {
    const { path } = await validFile('into.bin');
    await expect(readBinFile(path, { kind: 'checkpoint' })).rejects.toThrow(`${path}: expected a checkpoint file but this is a model`);
    await expect(readBinFile(path, { into: { 'layer0.weights': new Float32Array(999) } })).rejects.toThrow(
      `${path}: section "layer0.weights" has 1000 elements but the destination has 999`,
    );
    await expect(readBinFile(path, { into: { ids: new Int32Array(4) } })).rejects.toThrow(`${path}: section "ids" is u32 but the destination is a Int32Array`);
    await expect(readBinFile(path, { into: { bias: new Float32Array(4) } })).rejects.toThrow(`${path}: has no section "bias"`);
    // Nothing was written into a destination that failed validation.
    const untouched = new Float32Array(1000).fill(3);
    await expect(readBinFile(path, { into: { 'layer0.weights': untouched, ids: new Uint32Array(5) } })).rejects.toThrow('destination has 5');
    expect(untouched.every((v) => v === 3)).toBe(true);
  });

  it('header problems behind a valid checksum get specific messages', async () => {
    const path = join(dir, 'crafted.bin');
    // A header declaring a 4 TB section: refused by the size check before anything is allocated.
    const size = await crafted(path, { kind: 'model', meta: null, sections: [{ name: 'w', dtype: 'f32', length: 1e12, byteOffset: 256 }] });
    await expectError(path, `truncated: expected ${256 + 4e12 + 16} bytes, found ${size}`, 'truncated');

    await crafted(path, { kind: 'model', meta: null, sections: [{ name: 'w', dtype: 'f16', length: 2, byteOffset: 256 }] }, new Uint8Array(8));
    await expectError(path, 'corrupt header: section "w" has unknown dtype "f16"', 'header');

    await crafted(path, { kind: 'weights', sections: [] });
    await expectError(path, 'corrupt header: unknown kind "weights"', 'header');

    await crafted(path, [1, 2, 3]);
    await expectError(path, 'corrupt header: expected a JSON object', 'header');

    await crafted(path, {
      kind: 'model',
      sections: [
        { name: 'a', dtype: 'u8', length: 16, byteOffset: 256 },
        { name: 'b', dtype: 'u8', length: 8, byteOffset: 264 },
      ],
    });
    await expectError(path, 'corrupt header: section "b" at byte 264 overlaps the data before it (which ends at 272)', 'header');

    await crafted(path, { kind: 'model', sections: [{ name: 'a', dtype: 'u32', length: 1, byteOffset: 260 }] });
    await expectError(path, 'corrupt header: section "a" has invalid byteOffset 260', 'header');

    await crafted(path, { kind: 'model', sections: [] }, new Uint8Array(0), 1);
    const ok = await readBinFile(path);
    expect(ok).toEqual({ version: 1, kind: 'model', meta: null, sections: {}, table: [] });
  });

  it('headers too costly to parse (over 2^20 JSON values, nesting over 256) are refused before JSON.parse, and not written', async () => {
    const path = join(dir, 'costly.bin');
    // 2^20 empty objects: a 3 MB header that JSON.parse would turn into a million objects.
    const many = `{"kind":"model","sections":[],"meta":[${'{},'.repeat(1 << 20)}{}]}`;
    const json = new TextEncoder().encode(many);
    const dataStart = Math.ceil((16 + json.length) / 8) * 8;
    const total = dataStart + 16;
    const buf = Buffer.alloc(total);
    buf.write('SUBLIN01', 0, 'latin1');
    buf.writeUInt32LE(1, 8);
    buf.writeUInt32LE(json.length, 12);
    buf.set(json, 16);
    buf.writeBigUInt64LE(BigInt(total), total - 16);
    const h = (await xxhash()).create64(0n);
    h.update(buf.subarray(0, total - 8));
    buf.writeBigUInt64LE(h.digest(), total - 8);
    await writeFile(path, buf);
    await expectError(path, 'corrupt header: more than 1048576 JSON values', 'header');
    // Commas inside strings are not values.
    await crafted(path, { kind: 'model', sections: [], meta: ','.repeat(2 ** 21) });
    expect((await readBinFile(path)).meta).toBe(','.repeat(2 ** 21));

    let deep: unknown = 1;
    for (let i = 0; i < 300; i++) deep = [deep];
    await crafted(path, { kind: 'model', sections: [], meta: deep });
    await expectError(path, 'corrupt header: JSON nested deeper than 256 levels', 'header');
    await expect(writeBinFile(path, { kind: 'model', meta: deep, sections: {} })).rejects.toThrow(
      `writeBinFile(${path}): the JSON header holds JSON nested deeper than 256 levels; store bulk data as sections`,
    );
    await expect(writeBinFile(path, { kind: 'model', meta: new Array(2 ** 20).fill(0), sections: {} })).rejects.toThrow(
      `writeBinFile(${path}): the JSON header holds more than 1048576 JSON values; store bulk data as sections`,
    );
  });

  it('non-UTF-8 header bytes', async () => {
    const path = join(dir, 'utf8.bin');
    await crafted(path, { kind: 'model', sections: [], meta: 'xx' });
    const b = await readFile(path);
    const i = b.indexOf('xx');
    b[i] = 0xff; // invalid UTF-8; the checksum now fails first
    await writeFile(path, b);
    await expectError(path, CHECKSUM, 'checksum');
  });
});

describe('readBinFile fuzz', () => {
  it('300 seeded random mutations: each loads identically or throws a clean BinFileError', async () => {
    const { path, bytes, dataStart } = await validFile('fuzz.bin');
    const reference = await readBinFile(path);
    const rng = new Xoshiro128(20240601);
    let tried = 0, identical = 0;
    const problems: Record<string, number> = {};
    for (let t = 0; t < 300; t++) {
      let b = Buffer.from(bytes);
      const op = rng.below(8);
      if (op === 0) {
        const p = rng.below(b.length);
        b[p] = b[p]! ^ (1 << rng.below(8)); // one bit
      } else if (op === 1) {
        b[rng.below(b.length)] = rng.below(256); // one byte, sometimes unchanged
      } else if (op === 2) {
        b = b.subarray(0, rng.below(b.length)); // truncation
      } else if (op === 3) {
        const extra = Buffer.alloc(1 + rng.below(40));
        for (let i = 0; i < extra.length; i++) extra[i] = rng.below(256);
        b = Buffer.concat([b, extra]); // garbage appended
      } else if (op === 4) {
        const p = rng.below(b.length), n = 1 + rng.below(32);
        for (let i = p; i < Math.min(b.length, p + n); i++) b[i] = rng.below(256); // a damaged run
      } else if (op === 5) {
        b[16 + rng.below(dataStart - 16)] = 32 + rng.below(95); // printable garbage inside the header
      } else if (op === 6) {
        const p = rng.below(b.length), n = 1 + rng.below(16);
        b = Buffer.concat([b.subarray(0, p), b.subarray(p + n)]); // bytes removed from the middle
      } else {
        const p = rng.below(b.length);
        b[p] = bytes[p]!; // a no-op rewrite: must load identically
      }
      tried++;
      await writeFile(path, b);
      try {
        const got = await readBinFile(path);
        identical++;
        // Only a mutation that changed nothing may load, and then it loads exactly the original.
        expect(b.equals(bytes)).toBe(true);
        expect(got.meta).toEqual(reference.meta);
        expectSameSections(got.sections, reference.sections);
      } catch (e) {
        if (!(e instanceof BinFileError)) throw e;
        expect(e.message.startsWith(`${path}: `)).toBe(true);
        expect(b.equals(bytes)).toBe(false);
        problems[e.problem] = (problems[e.problem] ?? 0) + 1;
      }
    }
    expect(tried).toBe(300);
    const thrown = Object.values(problems).reduce((a, c) => a + c, 0);
    expect(identical + thrown).toBe(300);
    // Every mutation class was reached (fixed seed, so these counts are stable).
    // Fixed seed, so the outcome is stable: 36 no-op rewrites loaded identically; bytes removed from the
    // middle read as truncation (or, inside the header, as a corrupt header); damage anywhere else is a
    // checksum mismatch; appended garbage is a size mismatch.
    expect(identical).toBe(36);
    expect(problems).toEqual({ checksum: 155, size: 35, truncated: 70, header: 4 });
  });
});
