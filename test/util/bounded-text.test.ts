// Error messages that echo input stay bounded (src/util/bounded-text.ts): a million-digit id in a data
// file, a huge split row, a huge config value or section name is shown by its first 80 characters and a
// count of the rest (a 100-million-digit id once printed 100 MB to stderr).
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readLibsvm } from '../../src/datasets/libsvm-reader.js';
import { readSplit } from '../../src/datasets/split-reader.js';
import { readXC } from '../../src/datasets/xc-reader.js';
import { resolveConfig, type NetworkConfig } from '../../src/network/config.js';
import { boundJson, boundText } from '../../src/util/bounded-text.js';
import { readBinFile } from '../../src/util/binfile.js';
import { encodeCrafted } from '../../bench/fuzz-structured.js';
import { Network } from '../../src/network/network.js';

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'sublinear-bounded-'));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

const DIGITS = '7'.repeat(1_000_000);
const CUT = `${'7'.repeat(80)}…(999920 more characters)`;

async function message(f: () => Promise<unknown> | unknown): Promise<string> {
  try {
    await f();
  } catch (e) {
    return (e as Error).message;
  }
  throw new Error('expected an error');
}

describe('boundText / boundJson', () => {
  it('keep short text, cut long text at 80 characters and count the rest', () => {
    expect(boundText('abc')).toBe('abc');
    expect(boundText('x'.repeat(80))).toBe('x'.repeat(80));
    expect(boundText('x'.repeat(81))).toBe(`${'x'.repeat(80)}…(1 more characters)`);
    expect(boundJson('ab')).toBe('"ab"');
    expect(boundJson(undefined)).toBe('undefined');
    expect(boundJson(10n)).toBe('10');
    expect(boundJson({ a: 'y'.repeat(100) })).toBe(`{"a":"${'y'.repeat(74)}…(28 more characters)`);
  });
});

describe('readers cut echoed ids', () => {
  it('a million-digit feature id (XC, LIBSVM), label id, XC header size and split row', async () => {
    const xc = join(dir, 'f.txt');
    await writeFile(xc, `1 10 5\n1 ${DIGITS}:1\n`);
    expect(await message(() => readXC(xc))).toBe(`${xc}:2: feature id ${CUT} out of range [0, 10)`);
    const svm = join(dir, 'f.svm');
    await writeFile(svm, `1 ${DIGITS}:1\n`);
    expect(await message(() => readLibsvm(svm))).toBe(`${svm}:1: feature id ${CUT} too large (ids are stored as 32-bit integers)`);
    const lab = join(dir, 'l.txt');
    await writeFile(lab, `1 10 5\n${DIGITS} 1:1\n`);
    expect(await message(() => readXC(lab))).toBe(`${lab}:2: label id ${CUT} out of range [0, 5)`);
    const head = join(dir, 'h.txt');
    await writeFile(head, `${DIGITS} 10 5\n`);
    expect(await message(() => readXC(head))).toBe(`${head}:1: header declares ${CUT} points, more than the supported 4294967295`);
    const split = join(dir, 's.txt');
    await writeFile(split, `1\n${DIGITS}\n`);
    expect(await message(() => readSplit(split, 1, 5))).toBe(`${split}:2: row ${CUT} in column 1 out of range [1, 5]`);
  });
});

describe('configurations and files cut echoed values', () => {
  it('a huge config value or option name', async () => {
    const huge = 'z'.repeat(1_000_000);
    const m1 = await message(() => resolveConfig({ inputDim: huge, layers: [{ size: 2 }] } as unknown as NetworkConfig));
    expect(m1).toBe(`Expected positive integer for inputDim but received "${'z'.repeat(79)}…(999922 more characters)`);
    const m2 = await message(() => resolveConfig({ inputDim: 4, layers: [{ size: 2 }, { size: 4, sampling: { [huge]: 1 } }] } as unknown as NetworkConfig));
    expect(m2.length).toBeLessThan(200);
    expect(m2).toContain('…(999920 more characters)');
  });

  it('a model whose config or section names are huge: the load error stays short', async () => {
    const huge = 'q'.repeat(1_000_000);
    const p1 = join(dir, 'm1.sl');
    await writeFile(p1, await encodeCrafted({
      kind: 'model',
      meta: { format: 'sublinear-model', config: { inputDim: 4, layers: [{ size: 2, activation: huge }] }, batchesDone: 0, rebuildRound: 0, trainPoints: 0 },
      sections: [],
    }));
    const m1 = await message(() => Network.load(p1));
    expect(m1.length).toBeLessThan(300);
    expect(m1).toContain('…(999922 more characters)');
    const p2 = join(dir, 'm2.sl');
    await writeFile(p2, await encodeCrafted({ kind: 'model', meta: null, sections: [{ name: huge, dtype: 'f16', length: 1, data: new Uint8Array(8) }] }));
    expect(await message(() => readBinFile(p2))).toBe(`${p2}: corrupt header: section "${'q'.repeat(80)}…(999920 more characters)" has unknown dtype "f16"`);
  });
});
