// Loading hostile model and checkpoint files whose checksums are valid (src/network/file-layout.ts): the
// configuration, the section table and the memory plan are checked before anything is allocated, and the
// values after the read. Files are crafted with bench/fuzz-structured.ts's encoder.
import { mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { encodeCrafted, parseBinFile, writeCrafted, type CraftedFile } from '../../bench/fuzz-structured.js';
import { Network } from '../../src/network/network.js';
import { loadModel } from '../../src/network/model-file.js';
import { CheckpointFormatError, listCheckpoints, loadLatestCheckpoint, readCheckpoint } from '../../src/train/checkpoint.js';
import { MemoryLimitError } from '../../src/network/memory-plan.js';
import { BinFileError } from '../../src/util/binfile.js';
import { verifyBinFileChecksum } from '../../src/util/binfile-verify.js';
import { synthesize } from '../../src/datasets/synth.js';
import { fit, resume, resumeInfo } from '../../src/train/fit-network.js';

let dir: string;
let model: CraftedFile;
let ckptDir: string;
let ckpt: CraftedFile;
const CONFIG = {
  inputDim: 2000,
  seed: 3,
  layers: [{ size: 8 }, { size: 100, sampling: { hash: 'dwta' as const, K: 2, L: 4, budget: 8, minActive: 8 } }],
};

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'sublinear-load-validation-'));
  const data = synthesize({ shape: 'tiny', points: 200, seed: 4 });
  const net = new Network(CONFIG);
  ckptDir = join(dir, 'ckpt');
  await fit(net, data, { epochs: 2, workers: 0, checkpoint: { dir: ckptDir, every: 2 } });
  await net.save(join(dir, 'seed.sl'));
  model = await parseBinFile(join(dir, 'seed.sl'));
  ckpt = await parseBinFile((await listCheckpoints(ckptDir))[0]!.file);
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

const copy = (f: CraftedFile): CraftedFile => ({ kind: f.kind, meta: structuredClone(f.meta), sections: f.sections.map((s) => ({ ...s, data: s.data.slice() })) });
const section = (f: CraftedFile, name: string) => f.sections.find((s) => s.name === name)!;
const config = (f: CraftedFile) => (f.meta as { config: { inputDim: number; layers: { size: number; sampling?: Record<string, unknown> }[] } }).config;

/** Loads `f` written to a fresh file; returns the error (the test fails if it loads), the time and the ArrayBuffer growth. */
async function refusal(f: CraftedFile, load: (path: string) => Promise<unknown>): Promise<{ error: Error; path: string; ms: number; grownMiB: number }> {
  const path = join(dir, `crafted-${Math.random().toString(36).slice(2)}.bin`);
  await writeCrafted(path, f);
  const m0 = process.memoryUsage().arrayBuffers;
  const t0 = performance.now();
  let error: unknown = null;
  try {
    await load(path);
  } catch (e) {
    error = e;
  }
  const ms = performance.now() - t0, grownMiB = (process.memoryUsage().arrayBuffers - m0) / 2 ** 20;
  if (!(error instanceof Error)) throw new Error(`expected ${path} to be refused`);
  return { error, path, ms, grownMiB };
}
const loadAny = (path: string) => Network.load(path);
const loadCkpt = (path: string) => readCheckpoint(path, (c) => new Network(c));

describe('Network.load refuses crafted models before allocating', () => {
  it('a 300-byte model claiming inputDim 2^23 (sections absent): refused in milliseconds, nothing allocated', async () => {
    const f: CraftedFile = {
      kind: 'model',
      meta: { format: 'sublinear-model', config: { inputDim: 2 ** 23, layers: [{ size: 128 }, { size: 10 }], seed: 1 }, batchesDone: 0, rebuildRound: 0, trainPoints: 0 },
      sections: [],
    };
    expect((await encodeCrafted(f)).length).toBeLessThan(400);
    const r = await refusal(f, loadAny);
    expect(r.error.message).toBe(`${r.path}: missing section "layer0.weights"`);
    expect(r.ms).toBeLessThan(1000);
    expect(r.grownMiB).toBeLessThan(16);
  });

  it('sections of the wrong length or dtype, unknown or half of a group: named', async () => {
    const cases: [string, (f: CraftedFile) => void, string][] = [
      ['config says more inputs', (f) => void (config(f).inputDim = 2 ** 23), 'section "layer0.weights" has 16000 elements but the configuration needs 67108864'],
      ['wrong dtype', (f) => void (section(f, 'layer1.bias').dtype = 'u32'), 'section "layer1.bias" is u32 but the configuration needs f32'],
      ['unknown section', (f) => void f.sections.push({ name: 'bogus', dtype: 'u8', length: 1, data: Uint8Array.of(1) }), 'unexpected section "bogus" for this network configuration'],
      ['labelFreq of the wrong length', (f) => { const s = section(f, 'labelFreq'); s.length = 99; s.data = s.data.subarray(0, 396); }, 'section "labelFreq" has 99 elements but the configuration needs 100'],
      ['an invalid config', (f) => void (config(f).layers[1]!.sampling!['rangeBits'] = 25), 'invalid network configuration: layers[1].sampling.rangeBits must be at most 24 but received 25'],
      ['a layer too large for u32 indexing', (f) => void (config(f).inputDim = 2 ** 30), 'invalid network configuration: layers[0] has 1073741824 x 8 weights, more than 2^32'],
      ['a budget the kernels cannot take', (f) => void (config(f).layers[1]!.sampling!['budget'] = 2 ** 32), 'invalid network configuration: layers[1].sampling.budget must be at most 4294967295 but received 4294967296'],
      ['a counter that is not one', (f) => void ((f.meta as Record<string, unknown>)['rebuildRound'] = -1), 'invalid rebuildRound -1 in the model meta'],
    ];
    for (const [what, breakIt, message] of cases) {
      const f = copy(model);
      breakIt(f);
      const r = await refusal(f, loadAny);
      expect(r.error.message, what).toBe(`${r.path}: ${message}`);
      expect(r.grownMiB, what).toBeLessThan(16);
    }
  });

  it('huge hash tables of the output layer (not stored in a model: L = 1024, rangeBits = 24) are never allocated by a load for inference', async () => {
    // 1024 tables of 2^24 buckets would take over 200 GB: a model loads inference-sized, and sampled
    // inference of the output layer probes its cluster index, not its tables.
    const f = copy(model);
    Object.assign(config(f).layers[1]!.sampling!, { L: 1024, rangeBits: 24, K: 8, binSize: 8 });
    const path = join(dir, 'huge-tables.sl');
    await writeCrafted(path, f);
    const m0 = process.memoryUsage().arrayBuffers;
    const net = await Network.load(path, { maxMemory: 2e9 });
    const data = synthesize({ shape: 'tiny', points: 20, seed: 5 });
    const p = await net.predict(data, { k: 3, mode: 'sampled', workers: 0 });
    expect(p.labels.length).toBe(60);
    expect(net.spec.layers[1]!.sampling!.tables.ids.length).toBe(0);
    expect((process.memoryUsage().arrayBuffers - m0) / 2 ** 20).toBeLessThan(16);
  });

  it('non-finite weights and biases: refused naming the section and the first bad index', async () => {
    for (const [name, index, value] of [['layer1.weights', 5, NaN], ['layer0.bias', 3, Infinity], ['layer0.weights', 15999, -Infinity]] as const) {
      const f = copy(model);
      const s = section(f, name);
      new Float32Array(s.data.buffer, s.data.byteOffset, s.data.length / 4)[index] = value;
      const r = await refusal(f, loadAny);
      expect(r.error.message).toBe(`${r.path}: section "${name}" holds a non-finite value (${value}) at index ${index}`);
    }
  });

  it('the unmutated file loads (the encoder is faithful)', async () => {
    const path = join(dir, 'faithful.sl');
    await writeCrafted(path, model);
    expect((await Network.load(path)).config.inputDim).toBe(2000);
  });
});

describe('readCheckpoint refuses crafted checkpoints', () => {
  it('missing, mistyped or inconsistent sections: CheckpointFormatError naming the section', async () => {
    const cases: [string, (f: CraftedFile) => void, string][] = [
      ['a dropped moment', (f) => void f.sections.splice(f.sections.indexOf(section(f, 'layer1.vWeights')), 1), 'missing section "layer1.vWeights"'],
      ['tables of another L', (f) => void (config(f).layers[1]!.sampling!['L'] = 5), 'section "layer1.tables.offsets" has 260 elements but the configuration needs 325'],
      ['step counters as f32', (f) => void (section(f, 'layer0.rowSteps').dtype = 'f32'), 'section "layer0.rowSteps" is f32 but the configuration needs u32'],
      ['a garbage early-stopping history', (f) => void ((f.meta as Record<string, unknown>)['earlyStop'] = { bestScore: 0.5, bestEpoch: 1, bad: 0, lrScale: 1, history: [{ epoch: 1, p1: 'x' }] }),
        'invalid early-stopping history entry 0'],
      ['half of the best-weights group', (f) => void f.sections.push({ name: 'best.layer0.weights', dtype: 'f32', length: 16000, data: new Uint8Array(64000) }), 'missing section "best.layer0.bias" (the file has "best.layer0.weights", which comes with it)'],
    ];
    for (const [what, breakIt, message] of cases) {
      const f = copy(ckpt);
      breakIt(f);
      const r = await refusal(f, loadCkpt);
      expect(r.error, what).toBeInstanceOf(CheckpointFormatError);
      expect(r.error.message, what).toBe(`${r.path}: ${message}`);
    }
  });

  // (Damaged hash tables are not refused here: Network.resume checks them and rebuilds them from the
  // weights, test/train/checkpoint-faults.test.ts; Network.load rebuilds them anyway.)
  it('NaN Adam moments and negative second moments', async () => {
    const cases: [string, string, 'f32' | 'u32', number, number, string][] = [
      ['NaN moment', 'layer1.mWeights', 'f32', 7, NaN, 'section "layer1.mWeights" holds a non-finite value (NaN) at index 7'],
      ['negative second moment', 'layer0.vBias', 'f32', 2, -1, 'section "layer0.vBias" holds a negative second moment (-1) at index 2'],
    ];
    for (const [what, name, dtype, index, value, message] of cases) {
      const f = copy(ckpt);
      const s = section(f, name);
      (dtype === 'f32' ? new Float32Array(s.data.buffer, s.data.byteOffset, s.data.length / 4) : new Uint32Array(s.data.buffer, s.data.byteOffset, s.data.length / 4))[index] = value;
      const r = await refusal(f, loadCkpt);
      expect(r.error, what).toBeInstanceOf(CheckpointFormatError);
      expect(r.error.message, what).toBe(`${r.path}: ${message}`);
    }
  });

  it('Network.resume falls back from a crafted newest checkpoint, and stops at once on the memory limit', async () => {
    const files = await listCheckpoints(ckptDir);
    expect(files.length).toBe(2);
    const newest = files[0]!.file;
    const original = await readFile(newest);
    const f = copy(ckpt);
    const s = section(f, 'layer1.weights');
    new Float32Array(s.data.buffer, s.data.byteOffset, s.data.length / 4)[0] = NaN;
    await writeCrafted(newest, f);
    const warnings: string[] = [];
    const net = await resume(ckptDir, { onWarning: (m) => warnings.push(m) });
    expect(resumeInfo(net)!.file).toBe(files[1]!.file);
    expect(warnings[0]).toContain(`${newest}: section "layer1.weights" holds a non-finite value (NaN) at index 0`);
    await writeFile(newest, original);
    await rm(newest + '.corrupt', { force: true });

    // The memory limit is the caller's refusal: no file is renamed, no older one tried.
    const err = await resume(ckptDir, { maxMemory: 1000, onWarning: (m) => warnings.push(m) }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(MemoryLimitError);
    expect((err as Error).message).toMatch(new RegExp(`^${newest.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}: Not enough memory: .* but the limit is 1.00 kB \\(--max-memory\\)$`));
    expect((await readdir(ckptDir)).filter((n) => n.endsWith('.corrupt'))).toEqual([]);
    expect(warnings.length).toBe(1);
    await expect(loadLatestCheckpoint(ckptDir, (c) => new Network(c), () => {}, undefined, { maxMemory: 1000 })).rejects.toBeInstanceOf(MemoryLimitError);
  });
});

describe('the checksum is verified before a header can size an allocation', () => {
  // A damaged digit in a model's config that keeps the section table consistent: the hash tables are not
  // stored in a model, so L = 4 read as L = 9 passes every structural check; only the checksum knows.
  it('verifyBinFileChecksum refuses a damaged header, and neither loadModel nor readCheckpoint builds the network', async () => {
    const path = join(dir, 'damaged-header.sl');
    const bytes = await encodeCrafted(model);
    const text = bytes.toString('latin1');
    const at = text.indexOf('"L":4');
    expect(at).toBeGreaterThan(0);
    bytes[at + 4] = '9'.charCodeAt(0);
    await writeFile(path, bytes);
    await expect(verifyBinFileChecksum(path)).rejects.toThrow(`${path}: checksum mismatch (file is corrupt or truncated)`);
    let built = 0;
    const err = await loadModel(path, (c) => {
      built++;
      return new Network(c);
    }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(BinFileError);
    expect((err as BinFileError).problem).toBe('checksum');
    expect(built).toBe(0);

    // The same for a checkpoint: a damaged seed digit keeps every section consistent.
    const cpath = join(dir, 'damaged-header.bin');
    const cbytes = await encodeCrafted(ckpt);
    const cat = cbytes.toString('latin1').indexOf('"seed":3');
    expect(cat).toBeGreaterThan(0);
    cbytes[cat + 7] = '4'.charCodeAt(0);
    await writeFile(cpath, cbytes);
    const cerr = await readCheckpoint(cpath, (c) => {
      built++;
      return new Network(c);
    }).catch((e: unknown) => e);
    expect(cerr).toBeInstanceOf(BinFileError);
    expect((cerr as BinFileError).problem).toBe('checksum');
    expect(built).toBe(0);
  });
});
