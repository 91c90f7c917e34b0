// Allocates a network's shared state: layer weights and Adam state (src/network/state.ts) plus, for
// sampled layers, hash-function parameters and empty tables (src/lsh). Tables are filled by the first
// rebuild (Network.fit / predict), which runs across workers. An inference-sized network (`inference`:
// Network.load) gets weights, biases and hash functions only; allocateTrainingState and allocateTablesOf
// add the rest when it trains or when sampled prediction queries a layer's tables.
import { allocateTables, generateHashSpec, MODE_CODE, POLICY_CODE } from '../lsh/index.js';
import type { HashParamsOptions } from '../lsh/hash-params.js';
import type { ResolvedNetworkConfig } from './config.js';
import type { NetSpec } from '../native/network-types.js';
import type { TablesSpec } from '../native/lsh-types.js';
import { sharedFloat32 } from '../datasets/csr.js';
import { allocateLayers, allocateTrainingArrays, releaseTrainingArrays } from './state.js';
import { native } from '../native/addon.js';
import { emptyWide } from './wide.js';

/** Seed of layer `i`'s hash functions under network seed `seed` (stored implicitly: the config's seed). */
export function hashSeed(seed: number, layer: number): number {
  return seed * 1_000_003 + layer * 7_919 + 1;
}

/** The hash-function options of sampled layer `i` of `c` (its family's fields, seeded by the network seed). */
export function hashOptionsOf(c: ResolvedNetworkConfig, i: number): HashParamsOptions {
  const s = c.layers[i]!.sampling!;
  return {
    family: s.hash,
    K: s.K,
    L: s.L,
    dim: c.layers[i - 1]!.size,
    seed: hashSeed(c.seed, i),
    ...(s.hash === 'dwta' || s.hash === 'wta' ? { binSize: s.binSize } : {}),
    ...(s.hash === 'simhash' ? { density: s.density } : {}),
    ...(s.hash === 'minhash' ? { bitsPerHash: s.bitsPerHash } : {}),
    rangeBits: s.rangeBits,
  };
}

/**
 * The state of a network of configuration `c`; `inference`: weights, biases and hash functions only (empty
 * Adam moments, step counters, tables and wide Adagrad sums); `init` false: zero weights instead of the
 * Glorot draw (a state about to be copied in).
 */
export function allocateNetwork(c: ResolvedNetworkConfig, inference = false, init = true): NetSpec {
  const layers = allocateLayers({
    inputDim: c.inputDim,
    layers: c.layers.map((l) => ({ size: l.size, activation: l.activation, dropout: l.dropout })),
    seed: c.seed,
    inference,
    init,
  });
  c.layers.forEach((l, i) => {
    const s = l.sampling;
    if (!s) return;
    const hash = generateHashSpec(hashOptionsOf(c, i));
    const tables = inference ? emptyTables(c, i) : allocateTablesOf(c, i);
    const query = { mode: MODE_CODE[s.mode], budget: s.budget, minFreq: s.minFreq, minActive: s.minActive };
    const wideNegatives = c.layers[i]!.wide?.negatives ?? 0;
    layers[i]!.sampling = { hash, tables, query, sharedFill: s.sharedFill, batchNegatives: s.batchNegatives, ...(wideNegatives ? { wideNegatives } : {}) };
  });
  // The wide part's pairs come from the training data (Network.fit): none until then.
  if (c.layers.at(-1)!.wide) layers.at(-1)!.wide = emptyWide(c.inputDim);
  return { layers };
}

/** Empty hash tables of sampled layer `i` of `c`. */
export function allocateTablesOf(c: ResolvedNetworkConfig, i: number): TablesSpec {
  const s = c.layers[i]!.sampling!;
  return allocateTables({ L: s.L, N: c.layers[i]!.size, rangeBits: s.rangeBits, bucketSize: s.bucketSize, slack: s.slack, policy: s.policy });
}

/** The tables of sampled layer `i` of `c` with their shape and no arrays (an inference-sized network's). */
export function emptyTables(c: ResolvedNetworkConfig, i: number): TablesSpec {
  const s = c.layers[i]!.sampling!, N = c.layers[i]!.size, none = new Uint32Array(0);
  return {
    L: s.L, N, rangeBits: s.rangeBits, bucketSize: s.bucketSize, slack: s.slack, policy: POLICY_CODE[s.policy],
    tableCapacity: N + 2 ** s.rangeBits * s.slack, offsets: none, fill: none, seen: none, ids: none, keys: none,
  };
}

/** Whether a sampled layer's tables are allocated (an inference-sized network allocates them on demand). */
export function hasTables(t: TablesSpec): boolean {
  return t.ids.length > 0;
}

/**
 * Completes an inference-sized network for training: zero Adam moments and step counters, empty tables
 * and zero wide Adagrad sums where they are missing (what a loaded model's are). Returns whether anything
 * was allocated.
 */
export function allocateTrainingState(c: ResolvedNetworkConfig, spec: NetSpec): boolean {
  let any = false;
  spec.layers.forEach((l, i) => {
    if (allocateTrainingArrays(l, i)) any = true;
    if (l.sampling && !hasTables(l.sampling.tables)) {
      l.sampling.tables = allocateTablesOf(c, i);
      any = true;
    }
    if (l.wide && l.wide.accum.length !== l.wide.labels.length) {
      l.wide.accum = sharedFloat32(l.wide.labels.length);
      any = true;
    }
  });
  return any;
}

/**
 * The opposite of allocateTrainingState once a run has trained its epochs: every layer's Adam moments and step
 * counters, and the wide part's Adagrad sums, zeroed, their pages given back to the kernel and replaced by empty
 * arrays (a loaded model's state; a later training run starts them at zero again). Weights, biases, tables
 * and the wide weights stay. Returns the bytes given back.
 */
export function releaseTrainingState(spec: NetSpec): number {
  let bytes = 0;
  for (const l of spec.layers) {
    bytes += releaseTrainingArrays(l);
    if (l.wide && l.wide.accum.length > 0) {
      bytes += native().netReleasePages(l.wide.accum);
      l.wide.accum = sharedFloat32(0);
    }
  }
  return bytes;
}

/** Bytes of a network's shared state (the arrays it holds: an inference-sized network's are fewer). */
export function networkBytes(spec: NetSpec): number {
  let total = 0;
  for (const l of spec.layers) {
    for (const a of [l.weights, l.bias, l.mWeights, l.vWeights, l.mBias, l.vBias, l.rowSteps, l.biasSteps]) total += a.byteLength;
    if (l.sampling) {
      const t = l.sampling.tables;
      for (const a of [t.offsets, t.fill, t.seen, t.ids, t.keys]) total += a.byteLength;
    }
    if (l.wide) for (const a of [l.wide.offsets, l.wide.labels, l.wide.weights, l.wide.accum]) total += a.byteLength;
  }
  return total;
}
