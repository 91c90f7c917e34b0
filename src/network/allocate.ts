// Allocates a network's shared state: layer weights and Adam state (src/network/state.ts) plus, for
// sampled layers, hash-function parameters and empty tables (src/lsh). Tables are filled by the first
// rebuild (Network.fit / predict), which runs across workers.
import { allocateTables, generateHashSpec, MODE_CODE, tablesBytes } from '../lsh/index.js';
import type { HashParamsOptions } from '../lsh/hash-params.js';
import type { ResolvedNetworkConfig } from './config.js';
import type { NetSpec } from './native-types.js';
import { allocateLayers } from './state.js';
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

export function allocateNetwork(c: ResolvedNetworkConfig): NetSpec {
  const layers = allocateLayers({
    inputDim: c.inputDim,
    layers: c.layers.map((l) => ({ size: l.size, activation: l.activation, dropout: l.dropout })),
    seed: c.seed,
  });
  c.layers.forEach((l, i) => {
    const s = l.sampling;
    if (!s) return;
    const hash = generateHashSpec(hashOptionsOf(c, i));
    const tables = allocateTables({ L: s.L, N: l.size, rangeBits: hash.rangeBits, bucketSize: s.bucketSize, slack: s.slack, policy: s.policy });
    const query = { mode: MODE_CODE[s.mode], budget: s.budget, minFreq: s.minFreq, minActive: s.minActive };
    const wideNegatives = c.layers[i]!.wide?.negatives ?? 0;
    layers[i]!.sampling = { hash, tables, query, sharedFill: s.sharedFill, batchNegatives: s.batchNegatives, ...(wideNegatives ? { wideNegatives } : {}) };
  });
  // The wide part's pairs come from the training data (Network.fit): none until then.
  if (c.layers.at(-1)!.wide) layers.at(-1)!.wide = emptyWide(c.inputDim);
  return { layers };
}

/** Bytes of a network's shared state. */
export function networkBytes(spec: NetSpec): number {
  let total = 0;
  for (const l of spec.layers) {
    for (const a of [l.weights, l.bias, l.mWeights, l.vWeights, l.mBias, l.vBias, l.rowSteps, l.biasSteps]) total += a.byteLength;
    if (l.sampling) total += tablesBytes(l.sampling.tables);
    if (l.wide) for (const a of [l.wide.offsets, l.wide.labels, l.wide.weights, l.wide.accum]) total += a.byteLength;
  }
  return total;
}
