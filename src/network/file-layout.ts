// What a model or checkpoint file must hold, derived from its network configuration alone, and the checks
// that a file's header and contents match it. Loaders run these before they allocate anything:
//
//   1. the header (readBinFile headerOnly: section table in order, aligned, inside the file) and the
//      checksum (verifyBinFileChecksum: nothing but a fixed buffer),
//   2. `resolveStoredConfig`: the stored configuration passes the rules of a user configuration
//      (resolveConfig, plus the limits allocation enforces), and `layoutProblem`: the section table is
//      exactly what it implies (every expected section present with its dtype and length, nothing unknown),
//   3. `checkLoadMemory`: the memory plan of the network against the limit (src/network/memory-plan.ts),
//   4. only then the network is allocated and the sections streamed into it, and `valuesProblem` refuses
//      non-finite weights, biases and Adam moments, and hash tables whose entries point outside their arrays.
//
// A checksum only proves that the bytes are the ones a writer wrote, not that the writer was sublinear: a
// file crafted with a valid checksum (the container format is documented) must be refused by these checks
// with a message naming the section, never by an allocation of what its header claims.
import { tableCapacity } from '../lsh/tables.js';
import { hashSpecBytesFor } from '../lsh/hash-params.js';
import { hashOptionsOf } from './allocate.js';
import type { SectionArray, SectionDtype, SectionInfo } from '../util/binfile.js';
import { boundText } from '../util/bounded-text.js';
import { checkMemory, MemoryLimitError, planNetworkMemory, type MemoryPlan } from './memory-plan.js';
import { INPUT_LOG_SECTION, inputLogProblem, inputScaleProblem } from './input-scale.js';
import { resolveConfig, storedConfig, type NetworkConfig, type ResolvedNetworkConfig } from './config.js';
import { wideBytes } from './wide.js';

/** Limits of `Network.load` and `Network.resume`, checked before a file's network is allocated. */
export interface LoadLimits {
  /**
   * Refuse a file whose network needs more bytes than this (the memory plan of src/network/memory-plan.ts;
   * the CLI's `--max-memory`): a model loaded by `Network.load` is planned for inference (weights, the
   * hash tables of sampled hidden layers, the output layer's cluster index, prediction scratch), a
   * checkpoint for training (also Adam moments, step counters and every layer's tables). Default: 90% of
   * the machine's memory (or of the container's limit, if lower).
   */
  maxMemory?: number;
  /** Worker threads the network will run on, for the plan's scratch estimate. Default 0 (one set of scratch, the least). */
  workers?: number;
}

/**
 * Throws MemoryLimitError (`<path>: Not enough memory: ...`) when the network of `c` does not fit the
 * limit; `bestWeights`: the file also holds a best-epoch copy of the weights; `inference`: the network is
 * loaded to predict (a model file: no Adam moments, step counters or output tables; see planMemory).
 */
export function checkLoadMemory(path: string, c: ResolvedNetworkConfig, limits: LoadLimits = {}, bestWeights = false, wideEntries = 0, inference = false): void {
  const plan = planNetworkMemory(c, limits.workers ?? 0, undefined, bestWeights, inference);
  // The hash functions' parameters, which the training plan leaves out as small, are counted here: a
  // stored configuration may make them large (SimHash projections grow with K * L * dim).
  // The plan's bound on the wide part is replaced by the file's own count of pairs.
  const parts = plan.parts.filter((p) => p.name !== 'output layer wide part');
  if (c.layers.at(-1)!.wide) parts.push({ name: 'output layer wide part', bytes: wideBytes(c.inputDim, wideEntries, inference) + (bestWeights ? 4 * wideEntries : 0) });
  c.layers.forEach((l, i) => {
    if (l.sampling) parts.push({ name: `${i === c.layers.length - 1 ? 'output layer' : `layer ${i}`} hash functions`, bytes: hashSpecBytesFor(hashOptionsOf(c, i)) });
  });
  parts.sort((a, b) => b.bytes - a.bytes);
  const withHash: MemoryPlan = { totalBytes: parts.reduce((t, p) => t + p.bytes, 0), parts };
  try {
    checkMemory(withHash, limits.maxMemory !== undefined ? { maxBytes: limits.maxMemory } : {});
  } catch (e) {
    if (e instanceof MemoryLimitError) throw new MemoryLimitError(`${path}: ${e.message}`);
    throw e;
  }
}

/** Dtype and element count of one expected section. */
export interface SectionShape {
  dtype: SectionDtype;
  length: number;
}

/** The sections a file for a configuration holds: all `required`, and each `optional` group all or none. */
export interface FileLayout {
  required: Map<string, SectionShape>;
  /** Groups of sections that are present together or not at all (labelFreq; a checkpoint's best.* weights; inputScale; inputLog). */
  optional: Map<string, SectionShape>[];
}

/** Largest weight matrix a layer may have (allocateLayers' limit): its elements are indexed by u32 in native code. */
const MAX_LAYER_WEIGHTS = 2 ** 32;

/**
 * The layout of a model ('model': weights and biases) or checkpoint ('checkpoint': also the Adam moments,
 * step counters and hash tables) file for `c`, as src/network/model-file.ts and src/train/checkpoint.ts
 * write it.
 */
export function fileLayout(c: ResolvedNetworkConfig, kind: 'model' | 'checkpoint', wideEntries = 0): FileLayout {
  const required = new Map<string, SectionShape>();
  const best = new Map<string, SectionShape>();
  const f32 = (length: number): SectionShape => ({ dtype: 'f32', length });
  const u32 = (length: number): SectionShape => ({ dtype: 'u32', length });
  let inDim = c.inputDim;
  c.layers.forEach((l, i) => {
    const p = `layer${i}.`;
    const params = inDim * l.size;
    required.set(p + 'weights', f32(params));
    required.set(p + 'bias', f32(l.size));
    if (kind === 'checkpoint') {
      best.set(`best.${p}weights`, f32(params));
      best.set(`best.${p}bias`, f32(l.size));
      required.set(p + 'mWeights', f32(params));
      required.set(p + 'vWeights', f32(params));
      required.set(p + 'mBias', f32(l.size));
      required.set(p + 'vBias', f32(l.size));
      required.set(p + 'rowSteps', u32(i === 0 ? inDim : l.size));
      required.set(p + 'biasSteps', u32(1));
      const s = l.sampling;
      if (s) {
        const B = 2 ** s.rangeBits, N = l.size, L = s.L;
        required.set(p + 'tables.offsets', u32(L * (B + 1)));
        required.set(p + 'tables.fill', u32(L * B));
        required.set(p + 'tables.seen', u32(L * B));
        required.set(p + 'tables.ids', u32(L * tableCapacity(N, s.rangeBits, s.slack)));
        required.set(p + 'tables.keys', u32(L * N));
      }
    }
    if (l.wide) {
      // The wide part's pairs: their number comes from the training data (wideEntriesOf reads it from the
      // section table; every other wide section must agree with it).
      required.set(p + 'wide.offsets', u32(c.inputDim + 1));
      required.set(p + 'wide.labels', u32(wideEntries));
      required.set(p + 'wide.weights', f32(wideEntries));
      if (kind === 'checkpoint') {
        required.set(p + 'wide.accum', f32(wideEntries));
        best.set(`best.${p}wide.weights`, f32(wideEntries));
      }
    }
    inDim = l.size;
  });
  const optional = [new Map([['labelFreq', u32(c.layers.at(-1)!.size)]])];
  if (kind === 'checkpoint') optional.push(best);
  // Last, so that the groups above keep their positions in `present`: the input divisors of a network
  // trained on raw-valued data, then the mark of its count compression (src/network/input-scale.ts). A
  // loader that predates a group refuses the file (unexpected section) rather than feed it raw inputs.
  optional.push(new Map([['inputScale', f32(c.inputDim)]]));
  optional.push(new Map([[INPUT_LOG_SECTION, { dtype: 'u8', length: 1 }]]));
  // A checkpoint's input feature map (src/network/input-map.ts; a model file's is one of its extra sections).
  if (kind === 'checkpoint') optional.push(new Map([['inputMap', u32(c.inputDim)]]));
  return { required, optional };
}

/** Pairs of the output layer's wide part of a file of configuration `c` (the length of its labels section; 0 when absent). */
export function wideEntriesOf(c: ResolvedNetworkConfig, table: readonly SectionInfo[]): number {
  if (!c.layers.at(-1)!.wide) return 0;
  const name = `layer${c.layers.length - 1}.wide.labels`;
  return table.find((s) => s.name === name)?.length ?? 0;
}

/**
 * Validates a stored configuration by the rules of a user configuration (resolveConfig) and the limits
 * allocation enforces (weights per layer, hash-table capacity), so that a file is refused with a message
 * instead of failing, or allocating, halfway through building its network. Returns the resolved
 * configuration, or a description of the problem.
 */
export function resolveStoredConfig(raw: unknown): ResolvedNetworkConfig | string {
  let c: ResolvedNetworkConfig;
  try {
    c = resolveConfig(storedConfig(raw as NetworkConfig));
  } catch (e) {
    return `invalid network configuration: ${(e as Error).message}`;
  }
  if (c.inputDim > 0xffffffff) return `invalid network configuration: inputDim ${c.inputDim} does not fit 32 bits`;
  let inDim = c.inputDim;
  for (let i = 0; i < c.layers.length; i++) {
    const l = c.layers[i]!;
    if (l.size > 0xffffffff) return `invalid network configuration: layers[${i}].size ${l.size} does not fit 32 bits`;
    const params = inDim * l.size;
    if (!Number.isSafeInteger(params) || params > MAX_LAYER_WEIGHTS) {
      return `invalid network configuration: layers[${i}] has ${inDim} x ${l.size} weights, more than 2^32`;
    }
    const s = l.sampling;
    if (s && tableCapacity(l.size, s.rangeBits, s.slack) > 0xffffffff) {
      return `invalid network configuration: layers[${i}].sampling: table capacity size + 2^rangeBits * slack exceeds 2^32 - 1`;
    }
    if (s) {
      // The hash functions' own rules (binSize <= the layer's input dimension, K * L bounds...).
      try {
        hashSpecBytesFor(hashOptionsOf(c, i));
      } catch (e) {
        return `invalid network configuration: layers[${i}].sampling: ${(e as Error).message}`;
      }
    }
    inDim = l.size;
  }
  return c;
}

/**
 * Checks a file's section table against the layout of its configuration: every required section present
 * with the expected dtype and length, optional groups complete or absent, no other sections. (Offsets,
 * overlaps and extents were checked by readBinFile against the file size.) Returns a description of the
 * first problem, or null; `present` reports which optional groups the file holds.
 */
export function layoutProblem(layout: FileLayout, table: readonly SectionInfo[], present?: boolean[]): string | null {
  const byName = new Map(table.map((s) => [s.name, s]));
  const known = new Set<string>();
  const check = (name: string, want: SectionShape): string | null => {
    const got = byName.get(name)!;
    if (got.dtype !== want.dtype) return `section "${name}" is ${got.dtype} but the configuration needs ${want.dtype}`;
    if (got.length !== want.length) return `section "${name}" has ${got.length} elements but the configuration needs ${want.length}`;
    return null;
  };
  for (const [name, want] of layout.required) {
    known.add(name);
    if (!byName.has(name)) return `missing section "${name}"`;
    const p = check(name, want);
    if (p) return p;
  }
  for (const group of layout.optional) {
    const names = [...group.keys()];
    names.forEach((n) => known.add(n));
    const have = names.filter((n) => byName.has(n));
    if (have.length > 0 && have.length < names.length) {
      return `missing section "${names.find((n) => !byName.has(n))}" (the file has "${have[0]}", which comes with it)`;
    }
    for (const n of have) {
      const p = check(n, group.get(n)!);
      if (p) return p;
    }
    present?.push(have.length > 0);
  }
  const extra = table.find((s) => !known.has(s.name));
  if (extra) return `unexpected section "${boundText(extra.name)}" for this network configuration`;
  return null;
}

/** Where the first non-finite value of `a` is (and what it is), or -1. */
function firstNonFinite(a: Float32Array): number {
  for (let i = 0; i < a.length; i++) {
    // x - x is 0 for every finite x and NaN for NaN and +-Infinity: one compare per element.
    const x = a[i]!;
    if (x - x !== 0) return i;
  }
  return -1;
}

/**
 * Checks the values of sections just read: weights, biases, Adam moments and best-epoch weights must be
 * finite (a NaN weight makes every prediction that touches it NaN, and a NaN moment spreads NaN into the
 * weights at the next update), and second moments must not be negative (their square root is taken).
 * Returns the first problem (naming the section and index) or null.
 */
export function valuesProblem(_c: ResolvedNetworkConfig, sections: Record<string, SectionArray>): string | null {
  for (const [name, a] of Object.entries(sections)) {
    if (name === INPUT_LOG_SECTION && a instanceof Uint8Array) {
      const p = inputLogProblem(a);
      if (p) return p;
    }
    if (!(a instanceof Float32Array)) continue;
    const i = firstNonFinite(a);
    if (i >= 0) return `section "${name}" holds a non-finite value (${a[i]}) at index ${i}`;
    if (name === 'inputScale') {
      const p = inputScaleProblem(a);
      if (p) return p;
    }
    if (/(^|\.)v(Weights|Bias)$/.test(name)) {
      for (let j = 0; j < a.length; j++) if (a[j]! < 0) return `section "${name}" holds a negative second moment (${a[j]}) at index ${j}`;
    }
  }
  // Hash tables are not checked here: a checkpoint's tables are checked in full where they are used
  // (Network.resume, src/lsh/tables-check.ts), and rebuilt from the weights when damaged; Network.load
  // rebuilds them anyway.
  return null;
}
