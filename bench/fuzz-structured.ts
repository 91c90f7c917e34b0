// Structure-aware fuzzing of model and checkpoint files: files that are hostile behind a VALID checksum.
//
// bench/fuzz.ts's byte mutations all break the checksum, so they only ever test that damage is detected.
// The container format (src/util/binfile.ts) is documented and anyone can write it, so a model downloaded
// from someone else may be crafted: a header with absurd or inconsistent dimensions, sections missing,
// duplicated, overlapping or of the wrong dtype or length, NaN weights, step counters near 2^32. This
// module takes a real model and checkpoint apart (header object + section bytes), mutates the structure,
// and writes the result with a correct trailer, so every case reaches the validation behind the checksum.
//
// The contract checked for each case (runCraftedCase):
// - the load (Network.load, readCheckpoint) either succeeds, and then the network is consistent: every
//   array has the size its configuration implies, every weight, bias and moment is finite, and a
//   prediction (and for checkpoints a short training run, with 0 or 2 workers) gives finite results; or
//   it throws an Error whose message starts with the file's path and is of a known kind (BinFileError,
//   CheckpointFormatError, MemoryLimitError, or a plain Error), never a RangeError, TypeError or a crash;
// - the loader runs under a memory limit (`maxMemory`, 48 MiB by default) and the runner (bench/fuzz.ts)
//   checks that ArrayBuffer memory grows by less than 64 MiB and that the case ends within its time limit:
//   nothing is allocated beyond the plan, whatever the header claims.
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import xxhash from 'xxhash-wasm';
import type { SparseDataset } from '../src/datasets/csr.js';
import { CsrBuilder } from '../src/datasets/csr-builder.js';
import { Network } from '../src/network/network.js';
import { DivergedError } from '../src/train/fit.js';
import { CheckpointFormatError, listCheckpoints, readCheckpoint } from '../src/train/checkpoint.js';
import { BinFileError, readBinFile } from '../src/util/binfile.js';
import { MemoryLimitError } from '../src/network/memory-plan.js';
import type { CaseRng } from './case-rng.js';
import { fit } from '../src/train/fit-network.js';

/** One section of a crafted file: its table entry (any values) and the bytes placed at its offset. */
export interface CraftedSection {
  name: unknown;
  dtype: unknown;
  length: unknown;
  /** Absolute offset; default: after the previous section (aligned to 8), as writeBinFile lays them out. */
  byteOffset?: unknown;
  data: Uint8Array;
}

/** A model or checkpoint file taken apart: the header's kind and meta, and its sections in file order. */
export interface CraftedFile {
  kind: unknown;
  meta: unknown;
  sections: CraftedSection[];
}

const align8 = (n: number): number => Math.ceil(n / 8) * 8;
/** Data further out than this is not written (the file then ends early: a truncated-file case). */
const MAX_PLACED = 64 * 1024 * 1024;

let hashApi: ReturnType<typeof xxhash> | undefined;

/**
 * The bytes of `f` in the container layout (magic, version 1, header JSON, sections at their offsets,
 * trailer with the file length and a correct xxhash64), whatever the header says.
 */
export async function encodeCrafted(f: CraftedFile): Promise<Buffer> {
  let dataStart = 0;
  let json = '';
  let offsets: number[] = [];
  for (;;) {
    let pos = dataStart;
    offsets = [];
    const table = f.sections.map((s) => {
      const off = s.byteOffset === undefined ? pos : s.byteOffset;
      if (typeof off === 'number') {
        offsets.push(off);
        if (s.byteOffset === undefined) pos = align8(pos + s.data.length);
        else pos = align8(Math.max(pos, off + s.data.length));
      } else offsets.push(-1);
      return { name: s.name, dtype: s.dtype, length: s.length, byteOffset: off };
    });
    json = JSON.stringify({ kind: f.kind, sections: table, meta: f.meta });
    const next = align8(16 + Buffer.byteLength(json));
    if (next === dataStart) break;
    dataStart = next;
  }
  let end = dataStart;
  f.sections.forEach((s, i) => {
    const off = offsets[i]!;
    if (Number.isSafeInteger(off) && off >= dataStart && off + s.data.length <= MAX_PLACED) end = Math.max(end, align8(off + s.data.length));
  });
  const total = end + 16;
  const buf = Buffer.alloc(total);
  buf.write('SUBLIN01', 0, 'latin1');
  buf.writeUInt32LE(1, 8);
  buf.writeUInt32LE(Buffer.byteLength(json), 12);
  buf.write(json, 16, 'utf8');
  f.sections.forEach((s, i) => {
    const off = offsets[i]!;
    if (Number.isSafeInteger(off) && off >= dataStart && off + s.data.length <= MAX_PLACED) buf.set(s.data, off);
  });
  buf.writeBigUInt64LE(BigInt(total), total - 16);
  const h = (await (hashApi ??= xxhash())).create64(0n);
  h.update(buf.subarray(0, total - 8));
  buf.writeBigUInt64LE(h.digest(), total - 8);
  return buf;
}

/** Writes `f` (see encodeCrafted) to `path`. */
export async function writeCrafted(path: string, f: CraftedFile): Promise<void> {
  await writeFile(path, await encodeCrafted(f));
}

/** Takes a valid file apart into a CraftedFile (offsets left to the default layout). */
export async function parseBinFile(path: string): Promise<CraftedFile> {
  const r = await readBinFile(path);
  return {
    kind: r.kind,
    meta: r.meta,
    sections: r.table.map((t) => {
      const a = r.sections[t.name]!;
      return { name: t.name, dtype: t.dtype, length: t.length, data: new Uint8Array(a.buffer, a.byteOffset, a.byteLength).slice() };
    }),
  };
}

/** A deep copy (meta is JSON; section bytes are copied). */
function clone(f: CraftedFile): CraftedFile {
  return {
    kind: f.kind,
    meta: JSON.parse(JSON.stringify(f.meta)) as unknown,
    sections: f.sections.map((s) => ({ ...s, data: s.data.slice() })),
  };
}

// ---- seeds ----

/** The valid files the cases start from, taken apart. */
export interface CraftedSeeds {
  model: CraftedFile;
  /** A checkpoint of a run without validation... */
  checkpoint: CraftedFile;
  /** ...and one with held-out validation (it holds the best.* sections). */
  checkpointBest: CraftedFile;
}

/** Shape of the seed networks: 60 features, a hidden layer of 8, 40 labels sampled by DWTA tables. */
const SEED_FEATURES = 60, SEED_LABELS = 40;

function seedData(points: number, seed: number): SparseDataset {
  const b = new CsrBuilder();
  let s = seed >>> 0;
  const rnd = (n: number) => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    return s % n;
  };
  for (let i = 0; i < points; i++) {
    const label = rnd(SEED_LABELS);
    const ids = [...new Set([label % SEED_FEATURES, rnd(SEED_FEATURES), rnd(SEED_FEATURES)])].sort((x, y) => x - y);
    b.addRow([label], 0, 1, ids, ids.map(() => 1), 0, ids.length);
  }
  return b.toDataset(SEED_FEATURES, SEED_LABELS);
}

/** Trains the seed networks and takes their files apart (about a second). */
export async function craftedSeeds(dir: string): Promise<CraftedSeeds> {
  const data = seedData(200, 3);
  const config = {
    inputDim: SEED_FEATURES,
    seed: 4,
    layers: [{ size: 8 }, { size: SEED_LABELS, sampling: { hash: 'dwta' as const, K: 2, L: 3, budget: 8, minActive: 8 } }],
  };
  const net = new Network(config);
  const ck = join(dir, 'crafted-seed-ckpt');
  await fit(net, data, { epochs: 1, batchSize: 32, workers: 0, checkpoint: { dir: ck, every: 1000 } });
  const modelPath = join(dir, 'crafted-seed.sl');
  await net.save(modelPath);
  const net2 = new Network(config);
  const ck2 = join(dir, 'crafted-seed-ckpt-best');
  await fit(net2, data, { batchSize: 32, workers: 0, validation: { maxEpochs: 2 }, checkpoint: { dir: ck2, every: 1000 } });
  const [c1] = await listCheckpoints(ck);
  const [c2] = await listCheckpoints(ck2);
  return { model: await parseBinFile(modelPath), checkpoint: await parseBinFile(c1!.file), checkpointBest: await parseBinFile(c2!.file) };
}

// ---- mutations ----

const HOSTILE_NUMBERS: unknown[] = [
  0, -1, 1.5, 2 ** 23, 2 ** 31, 2 ** 32 - 1, 2 ** 32, 2 ** 53, 1e308, -0, null, '8', true, [], {}, 'NaN',
];
/** Field-specific values: huge L / K / rangeBits / slack / bucketSize / sizes. */
const FIELD_VALUES: Record<string, unknown[]> = {
  inputDim: [2 ** 23, 2 ** 26, 2 ** 32, 2 ** 32 + 1, 1, 59, 61],
  size: [2 ** 23, 2 ** 31, 1, 7, 9, 39, 41, 65536],
  L: [4, 128, 1024, 1025, 65535],
  K: [1, 3, 11, 16, 33],
  rangeBits: [1, 7, 20, 24, 25, 31, 32],
  slack: [0, 2, 1e6, 2 ** 31],
  bucketSize: [1, 65535, 65536],
  binSize: [2, 3, 256, 2 ** 31],
  budget: [0, 41, 2 ** 31, 2 ** 32, 1e308],
  minActive: [0, 40, 41],
  minFreq: [1, 4, 2 ** 31],
  seed: [0, 2 ** 32, -1, 0.5],
  dropout: [0.5, 1, -0.1],
  density: [0, 1, 2],
};
const FLOAT_SPECIALS = [NaN, Infinity, -Infinity, -1, 3.4e38, -3.4e38, 1e-45];
const U32_SPECIALS = [0xffffffff, 0xfffffffe, 0xfffffff0, 0x80000000, 0];
const DTYPES: unknown[] = ['f32', 'u32', 'i32', 'u8', 'f64', 'f16', '', 7, null];

/** The object at `path` inside `root` (arrays and objects), or undefined. */
function numericLeaves(root: unknown, prefix: (string | number)[] = [], out: (string | number)[][] = []): (string | number)[][] {
  if (root !== null && typeof root === 'object') {
    for (const [k, v] of Object.entries(root as Record<string, unknown>)) {
      const key = Array.isArray(root) ? Number(k) : k;
      if (typeof v === 'number' || typeof v === 'boolean' || v === null) out.push([...prefix, key]);
      else numericLeaves(v, [...prefix, key], out);
    }
  }
  return out;
}

function setAt(root: unknown, path: (string | number)[], value: unknown): void {
  let o = root as Record<string | number, unknown>;
  for (let i = 0; i < path.length - 1; i++) o = o[path[i]!] as Record<string | number, unknown>;
  const last = path[path.length - 1]!;
  if (value === undefined) delete o[last];
  else o[last] = value;
}

function viewOf(s: CraftedSection): Float32Array | Uint32Array | null {
  if (s.data.length % 4 !== 0 || s.data.length === 0) return null;
  if (s.dtype === 'f32') return new Float32Array(s.data.buffer, s.data.byteOffset, s.data.length / 4);
  if (s.dtype === 'u32') return new Uint32Array(s.data.buffer, s.data.byteOffset, s.data.length / 4);
  return null;
}

/** Bytes of `n` elements of `dtype` (4 for unknown dtypes), filled with small finite values for floats. */
function freshData(dtype: unknown, n: number, r: CaseRng): Uint8Array {
  const bytes = dtype === 'f64' ? 8 : dtype === 'u8' ? 1 : 4;
  const out = new Uint8Array(n * bytes);
  if (dtype === 'f32') {
    const f = new Float32Array(out.buffer);
    for (let i = 0; i < n; i++) f[i] = (r.next() - 0.5) * 0.2;
  }
  return out;
}

/** The names of the config's numeric-like fields with their paths (for field-specific values). */
function configField(meta: Record<string, unknown>, r: CaseRng): (string | number)[] | null {
  const cfg = meta['config'];
  const leaves = numericLeaves(cfg, ['config']);
  return leaves.length ? r.pick(leaves) : null;
}

/** Resizes the hidden layer of a seed consistently: every section regenerated with the lengths the new config implies. */
function consistentResize(f: CraftedFile, r: CaseRng, hidden: number): boolean {
  const meta = f.meta as { config?: { inputDim?: unknown; layers?: { size?: unknown }[] } } | null;
  const c = meta?.config;
  const small = (v: unknown): v is number => typeof v === 'number' && Number.isInteger(v) && v > 0 && v <= 4096;
  // Only on a config an earlier mutation left in shape (two layers of sane sizes).
  if (!c || !small(c.inputDim) || !Array.isArray(c.layers) || c.layers.length !== 2 || !c.layers[0] || !c.layers[1] || !small(c.layers[1].size)) return false;
  c.layers[0].size = hidden;
  const inDim = c.inputDim, labels = c.layers[1].size;
  const lengths: Record<string, number> = {
    'layer0.weights': inDim * hidden, 'layer0.mWeights': inDim * hidden, 'layer0.vWeights': inDim * hidden,
    'best.layer0.weights': inDim * hidden, 'layer0.bias': hidden, 'layer0.mBias': hidden, 'layer0.vBias': hidden, 'best.layer0.bias': hidden,
    'layer1.weights': labels * hidden, 'layer1.mWeights': labels * hidden, 'layer1.vWeights': labels * hidden, 'best.layer1.weights': labels * hidden,
  };
  for (const s of f.sections) {
    const n = lengths[s.name as string];
    if (n === undefined) continue;
    s.length = n;
    s.data = freshData(s.dtype, n, r);
    if (/^layer\d\.v/.test(s.name as string)) s.data.fill(0); // second moments are non-negative
  }
  return true;
}

/** Applies 1-3 structure-aware mutations to a copy of `seed`; returns the copy and what was done. */
export function mutateCrafted(seed: CraftedFile, r: CaseRng): { file: CraftedFile; did: string[] } {
  const f = clone(seed);
  const did: string[] = [];
  const n = 1 + r.int(3);
  for (let m = 0; m < n; m++) {
    const meta = (f.meta ?? {}) as Record<string, unknown>;
    const secs = f.sections;
    const s = secs.length ? r.pick(secs) : null;
    switch (r.int(12)) {
      case 0: { // a config field set to a field-specific or hostile value
        const path = configField(meta, r);
        if (!path) break;
        const field = String(path[path.length - 1]);
        const v = FIELD_VALUES[field] && r.chance(0.7) ? r.pick(FIELD_VALUES[field]) : r.pick(HOSTILE_NUMBERS);
        setAt(meta, path, v);
        did.push(`config ${path.slice(1).join('.')} = ${JSON.stringify(v)}`);
        break;
      }
      case 1: { // config structure: a field removed, an unknown one, a layer added or removed, sampling moved
        const cfg = meta['config'] as { layers?: unknown[]; [k: string]: unknown } | undefined;
        if (!cfg || !Array.isArray(cfg.layers)) break;
        const what = r.int(5);
        if (what === 0) { const path = configField(meta, r); if (path) { setAt(meta, path, undefined); did.push(`config ${path.slice(1).join('.')} removed`); } }
        else if (what === 1) { cfg['bogus'] = 1; did.push('unknown config option'); }
        else if (what === 2) { cfg.layers.splice(r.int(cfg.layers.length + 1), 0, { size: r.pick([1, 8, 2 ** 20]), activation: 'relu', dropout: 0 }); did.push('layer added'); }
        else if (what === 3 && cfg.layers.length > 1) { cfg.layers.splice(r.int(cfg.layers.length), 1); did.push('layer removed'); }
        else { const l0 = cfg.layers[0] as Record<string, unknown>; const ll = cfg.layers.at(-1) as Record<string, unknown>; l0['sampling'] = ll['sampling']; did.push('sampling on layer 0'); }
        break;
      }
      case 2: // a section dropped
        if (s) { secs.splice(secs.indexOf(s), 1); did.push(`section ${String(s.name)} dropped`); }
        break;
      case 3: // a section listed twice, or renamed, or an unknown one added
        if (!s) break;
        if (r.chance(0.4)) { secs.splice(r.int(secs.length + 1), 0, { ...s, data: s.data.slice() }); did.push(`section ${String(s.name)} duplicated`); }
        else if (r.chance(0.5)) { s.name = r.pick(['layer9.weights', 'bogus', '', 'labelFreq', 'best.layer0.weights', 'layer0.tables.ids']); did.push(`section renamed ${String(s.name)}`); }
        else { secs.push({ name: 'extra', dtype: 'u8', length: 3, data: Uint8Array.of(1, 2, 3) }); did.push('unknown section added'); }
        break;
      case 4: // a wrong dtype
        if (s) { s.dtype = r.pick(DTYPES); did.push(`section ${String(s.name)} dtype ${JSON.stringify(s.dtype)}`); }
        break;
      case 5: { // a wrong length (with or without matching bytes)
        if (!s) break;
        const len = s.length as number;
        const v = r.pick([len + 1, len - 1, 0, 2 ** 32, 2 ** 53, -1, 1.5, 2 ** 30]);
        s.length = v;
        if (r.chance(0.5) && Number.isSafeInteger(v) && v >= 0 && v < 1 << 16) s.data = freshData(s.dtype, v, r);
        did.push(`section ${String(s.name)} length ${v}`);
        break;
      }
      case 6: { // offsets: overlapping, unaligned, past the end, or sections swapped in the file
        if (secs.length < 2) break;
        const i = 1 + r.int(secs.length - 1);
        const what = r.int(3);
        if (what === 0) { secs[i]!.byteOffset = r.pick([0, 8, 2 ** 40, 2 ** 53, -8, 12]); did.push(`section ${i} byteOffset ${String(secs[i]!.byteOffset)}`); }
        else if (what === 1) { [secs[i - 1], secs[i]] = [secs[i]!, secs[i - 1]!]; did.push(`sections ${i - 1} and ${i} swapped`); }
        else { const a = secs[i - 1]!, b = secs[i]!; [a.name, b.name] = [b.name, a.name]; did.push(`names of sections ${i - 1} and ${i} swapped`); }
        break;
      }
      case 7: { // NaN / Inf / negative / huge floats at a random index of a float section
        const floats = secs.filter((x) => x.dtype === 'f32' && x.data.length >= 4);
        if (!floats.length) break;
        const t = r.pick(floats);
        const v = viewOf(t) as Float32Array;
        const i = r.int(v.length);
        v[i] = r.pick(FLOAT_SPECIALS);
        did.push(`${String(t.name)}[${i}] = ${v[i]}`);
        break;
      }
      case 8: { // step counters near 2^32, or garbage in the tables
        const u32 = secs.filter((x) => x.dtype === 'u32' && x.data.length >= 4);
        if (!u32.length) break;
        const steps = u32.filter((x) => /Steps$/.test(String(x.name)));
        const t = steps.length && r.chance(0.6) ? r.pick(steps) : r.pick(u32);
        const v = viewOf(t) as Uint32Array;
        if (/Steps$/.test(String(t.name)) && r.chance(0.5)) v.fill(r.pick(U32_SPECIALS));
        else v[r.int(v.length)] = r.pick(U32_SPECIALS);
        did.push(`${String(t.name)} set to near 2^32`);
        break;
      }
      case 9: { // meta fields (positions, schedule, fit options, counters)
        const leaves = numericLeaves(meta).filter((p) => p[0] !== 'config');
        if (!leaves.length) break;
        const p = r.pick(leaves);
        const v = r.pick([...HOSTILE_NUMBERS, 1, 0.9999999, 1e-300]);
        setAt(meta, p, v);
        did.push(`meta ${p.join('.')} = ${JSON.stringify(v)}`);
        break;
      }
      case 10: // kind or format swapped
        if (r.chance(0.5)) { f.kind = f.kind === 'model' ? 'checkpoint' : 'model'; did.push('kind swapped'); }
        else { meta['format'] = r.pick(['sublinear-model', 'sublinear-checkpoint', 'x', null]); did.push(`format ${String(meta['format'])}`); }
        break;
      case 11: { // consistent resize of the hidden layer (loads fine), or a consistent but huge one
        const big = r.chance(0.3);
        const hidden = big ? r.pick([2 ** 16, 2 ** 20]) : 1 + r.int(24);
        if (big) {
          // Huge but consistent: declared lengths match the config, the data is not there (truncated).
          const cfg = (meta['config'] as { layers: { size: number }[] } | undefined);
          if (!cfg?.layers?.[0]) break;
          cfg.layers[0].size = hidden;
          for (const x of secs) if (/^(best\.)?layer0\.(m|v)?[wW]eights$/.test(String(x.name))) x.length = 60 * hidden;
        } else if (!consistentResize(f, r, hidden)) break;
        did.push(`hidden layer resized to ${hidden}${big ? ' (data absent)' : ''}`);
        break;
      }
    }
  }
  return { file: f, did };
}

// ---- one case ----

/** Options of runCraftedCase. */
export interface CraftedCaseOptions {
  /** Memory limit given to the loader. Default 48 MiB. */
  maxMemory?: number;
}

const KNOWN_ERRORS = new Set(['Error', 'BinFileError', 'CheckpointFormatError', 'MemoryLimitError']);

/**
 * Crafts a file from a seed, loads it and checks the contract (see the top of this file). Returns
 * whether the file was accepted and, if the contract was broken, the problem.
 */
export async function runCraftedCase(
  target: 'model' | 'checkpoint',
  seeds: CraftedSeeds,
  r: CaseRng,
  file: string,
  opts: CraftedCaseOptions = {},
): Promise<{ accepted: boolean; problem: string | null; did: string[] }> {
  const maxMemory = opts.maxMemory ?? 48 * 2 ** 20;
  const seed = target === 'model' ? seeds.model : r.chance(0.3) ? seeds.checkpointBest : seeds.checkpoint;
  const { file: crafted, did } = r.chance(0.05) ? { file: clone(seed), did: ['unmutated'] } : mutateCrafted(seed, r);
  await writeCrafted(file, crafted);
  let net: Network;
  try {
    if (target === 'model' || r.chance(0.2)) net = await Network.load(file, { maxMemory });
    else net = (await readCheckpoint(file, (c) => new Network(c), undefined, { maxMemory })).network;
  } catch (e) {
    if (!(e instanceof Error)) return { accepted: false, problem: `threw a non-Error ${String(e)}`, did };
    if (!KNOWN_ERRORS.has(e.name) || !(e instanceof BinFileError || e instanceof CheckpointFormatError || e instanceof MemoryLimitError || e.constructor === Error)) {
      return { accepted: false, problem: `threw ${e.name}: ${e.message.slice(0, 300)}`, did };
    }
    if (!e.message.startsWith(`${file}: `)) return { accepted: false, problem: `error does not name the file: ${e.message.slice(0, 300)}`, did };
    if (e.message.length > 1000) return { accepted: false, problem: `error message of ${e.message.length} characters`, did };
    return { accepted: false, problem: null, did };
  }
  return { accepted: true, problem: await consistencyProblem(net, r), did };
}

/** Checks a loaded network: sizes match its config, values finite, prediction and training finite. */
async function consistencyProblem(net: Network, r: CaseRng): Promise<string | null> {
  const c = net.config;
  let inDim = c.inputDim;
  // Finite but extreme values (a weight of 3e38) are valid floats and load; the arithmetic on them may
  // overflow like training with an absurd learning rate would, so finite results are only required of
  // networks whose values stay below 1e6 (every trained network's do).
  let extreme = false;
  for (let k = 0; k < c.layers.length; k++) {
    const l = net.spec.layers[k]!, size = c.layers[k]!.size;
    if (l.weights.length !== inDim * size || l.bias.length !== size) return `layer ${k}: arrays do not match the config`;
    for (const [name, a] of [['weights', l.weights], ['bias', l.bias], ['mWeights', l.mWeights], ['vWeights', l.vWeights], ['mBias', l.mBias], ['vBias', l.vBias]] as const) {
      for (let i = 0; i < a.length; i++) {
        if (!Number.isFinite(a[i]!)) return `layer ${k} ${name}[${i}] = ${a[i]} was accepted`;
        if (Math.abs(a[i]!) > 1e6) extreme = true;
      }
    }
    inDim = size;
  }
  if (net.labelFreq && net.labelFreq.length !== c.layers.at(-1)!.size) return 'labelFreq length does not match the config';
  // A few points whose features and labels fit the network.
  const b = new CsrBuilder();
  const labels = c.layers.at(-1)!.size;
  for (let i = 0; i < 16; i++) {
    const f = [i % c.inputDim];
    b.addRow([i % labels], 0, 1, f, [1], 0, 1);
  }
  const data = b.toDataset(Math.min(c.inputDim, 16), Math.min(labels, 16));
  const p = await net.predict(data, { k: 1, workers: 0 });
  for (let i = 0; i < p.scores.length && !extreme; i++) if (!Number.isFinite(p.scores[i]!)) return `prediction ${i} is ${p.scores[i]}`;
  const workers = r.chance(0.1) ? 2 : 0;
  const stepsBefore = net.spec.layers.map((l) => l.rowSteps.slice());
  // Large but finite crafted values can make the loss blow up: training then stops with DivergedError,
  // a clean refusal (no NaN weights kept, nothing saved), which is what is required of it.
  // A model whose training state (optimizer, hash tables of up to 2^24 buckets) exceeds the load's memory
  // limit is refused by fit() with a MemoryLimitError before anything is allocated: a clean refusal too.
  const st = await fit(net, data, { epochs: 1, batchSize: 8, workers, validation: false }).catch((e: unknown) => {
    if (e instanceof DivergedError || e instanceof MemoryLimitError) return null;
    throw e;
  });
  // Step counters only grow (they saturate at 2^32 - 1): one that went down wrapped around.
  for (const [k, l] of net.spec.layers.entries()) {
    const before = stepsBefore[k]!;
    for (let i = 0; i < before.length; i++) if (l.rowSteps[i]! < before[i]!) return `layer ${k} rowSteps[${i}] went from ${before[i]} to ${l.rowSteps[i]} (wrapped)`;
  }
  if (extreme || st === null) return null;
  if (!Number.isFinite(st.lastLoss)) return `training loss ${st.lastLoss} (${workers} workers)`;
  for (const [k, l] of net.spec.layers.entries()) {
    for (let i = 0; i < l.weights.length; i++) if (!Number.isFinite(l.weights[i]!)) return `after training (${workers} workers), layer ${k} weights[${i}] = ${l.weights[i]}`;
  }
  return null;
}
