// Allocation and initialisation of the layers' shared state (weights, biases, Adam moments, step counters)
// on SharedArrayBuffers, in the layouts of docs/design.md: layer 0 input-major (inDim, outDim), later layers
// neuron-major (outDim, inDim). Sampling objects (hash functions and tables) are attached by the caller
// (src/network/allocate.ts); `sampling` passes through untouched.
import { native } from '../native/addon.js';
import { Xoshiro128 } from '../util/rng.js';
import { ACTIVATION_CODE, type LayerState } from '../native/network-types.js';

/** Shape of one layer for allocation. */
export interface StateLayerConfig {
  /** Neurons of the layer (the last layer: number of labels). */
  size: number;
  activation: 'relu' | 'softmax' | 'linear';
  /** Training dropout of a hidden layer's outputs. Default 0. */
  dropout?: number;
}

/** Input of allocateLayers. */
export interface StateConfig {
  /** Input feature dimension (layer 0's inDim). */
  inputDim: number;
  layers: StateLayerConfig[];
  /** Seed of the weight initialisation (non-negative integer). */
  seed: number;
  /**
   * Inference only: the Adam moments and step counters are empty arrays (allocateTrainingState allocates
   * them when the network trains). Default false.
   */
  inference?: boolean;
  /**
   * false: the weights start at zero instead of the Glorot draw, for a network whose whole state is copied
   * in next (Network's selection copies: the draw would be overwritten). Default true.
   */
  init?: boolean;
}

/**
 * Bytes of one layer's shared state: weights and both Adam moments (3 * inDim * outDim floats), bias and its
 * moments (3 * outDim), the per-row step counters (inDim for the input-major layer 0, else outDim) and the
 * bias step counter. Sampling (tables, hash parameters) is not included.
 */
export function layerBytes(inDim: number, outDim: number, inputMajor: boolean): number {
  return 4 * (3 * inDim * outDim + 3 * outDim + (inputMajor ? inDim : outDim) + 1);
}

/** Bytes of every layer of `config` (see layerBytes). */
export function stateBytes(config: StateConfig): number {
  let total = 0;
  let inDim = config.inputDim;
  config.layers.forEach((l, k) => {
    total += layerBytes(inDim, l.size, k === 0);
    inDim = l.size;
  });
  return total;
}

function positiveInt(v: unknown, what: string): number {
  if (typeof v !== 'number' || !Number.isInteger(v) || v <= 0) {
    throw new Error(`Expected positive integer for ${what} but received ${JSON.stringify(v)}`);
  }
  return v;
}

function sharedF32(length: number, what: string): Float32Array {
  try {
    return new Float32Array(new SharedArrayBuffer(Math.max(1, length) * 4), 0, length);
  } catch (e) {
    throw new Error(`Cannot allocate ${what} (${length * 4} bytes): ${(e as Error).message}`);
  }
}

function sharedU32(length: number, what: string): Uint32Array {
  try {
    return new Uint32Array(new SharedArrayBuffer(Math.max(1, length) * 4), 0, length);
  } catch (e) {
    throw new Error(`Cannot allocate ${what} (${length * 4} bytes): ${(e as Error).message}`);
  }
}

/** Seed of layer k's initialisation stream under the network seed. */
export function initSeed(seed: number, k: number): bigint {
  return (BigInt(seed) << 16n) + BigInt(k) + 0x5eedn;
}

/**
 * Allocates every layer of `config` on SharedArrayBuffers and initialises the weights with Glorot (Xavier)
 * uniform, U(-sqrt(6 / (inDim + outDim)), +sqrt(6 / (inDim + outDim))), from a Xoshiro128 stream per layer
 * seeded by (seed, layer); biases, Adam moments and step counters start at zero. Deterministic in `seed`.
 */
export function allocateLayers(config: StateConfig): LayerState[] {
  const inputDim = positiveInt(config.inputDim, 'inputDim');
  if (!Array.isArray(config.layers) || config.layers.length === 0) throw new Error('Expected at least one layer in layers');
  const seed = config.seed;
  if (typeof seed !== 'number' || !Number.isInteger(seed) || seed < 0) {
    throw new Error(`Expected non-negative integer for seed but received ${JSON.stringify(seed)}`);
  }
  const out: LayerState[] = [];
  let inDim = inputDim;
  config.layers.forEach((l, k) => {
    const where = `layers[${k}]`;
    const outDim = positiveInt(l.size, `${where}.size`);
    const code = ACTIVATION_CODE[l.activation];
    if (code === undefined) {
      throw new Error(`Unknown activation ${JSON.stringify(l.activation)} for ${where}.activation (expected relu, softmax or linear)`);
    }
    const last = k === config.layers.length - 1;
    if (last !== (code === ACTIVATION_CODE.softmax)) {
      throw new Error(`${where}.activation: softmax is required on the last layer and only there`);
    }
    const inputMajor = k === 0;
    const n = inDim * outDim;
    if (!Number.isSafeInteger(n) || n > 2 ** 32) throw new Error(`${where} has ${n} weights, more than 2^32`);
    const weights = sharedF32(n, `${where}.weights`);
    // Training state gets its huge-page advice before the first write (the initialisation below).
    if (!config.inference) native().netAdviseHugePages(weights);
    const limit = Math.sqrt(6 / (inDim + outDim));
    const rng = new Xoshiro128(initSeed(seed, k));
    // Natively (netGlorotFill: the same numbers as `weights[i] = (2 * rng.nextFloat() - 1) * limit` here,
    // a fifth of the time: 0.17 s of debian-tags' start went to this loop).
    if (config.init !== false) native().netGlorotFill(weights, rng.words(), limit);
    out.push({
      inDim,
      outDim,
      activation: code,
      inputMajor: inputMajor ? 1 : 0,
      dropout: l.dropout ?? 0,
      weights,
      bias: sharedF32(outDim, `${where}.bias`),
      ...trainingArrays(inDim, outDim, inputMajor, where, config.inference ?? false),
    });
    inDim = outDim;
  });
  return out;
}

/**
 * Layer `k`'s Glorot draw (allocateLayers) restricted to rows `rows` (increasing ids < rowsTotal, rows of
 * `width` floats): row e of `weights` = row rows[e] of the draw of the whole rowsTotal x width layer, the
 * same numbers (a network with an input feature map: src/network/input-map.ts).
 */
export function glorotRows(weights: Float32Array, seed: number, k: number, rows: Uint32Array, rowsTotal: number, width: number): void {
  const limit = Math.sqrt(6 / (rowsTotal + width));
  native().netGlorotFill(weights, new Xoshiro128(initSeed(seed, k)).words(), limit, rows, width);
}

type TrainingArrays = Pick<LayerState, 'mWeights' | 'vWeights' | 'mBias' | 'vBias' | 'rowSteps' | 'biasSteps'>;

/** A layer's Adam moments and step counters, zero (or empty when `empty`: an inference-sized layer). */
function trainingArrays(inDim: number, outDim: number, inputMajor: boolean, where: string, empty: boolean): TrainingArrays {
  const n = empty ? 0 : inDim * outDim, b = empty ? 0 : outDim;
  const moment = (what: string) => {
    const a = sharedF32(n, `${where}.${what}`);
    if (!empty) native().netAdviseHugePages(a); // before anything writes it (see NativeNetwork.netAdviseHugePages)
    return a;
  };
  return {
    mWeights: moment('mWeights'),
    vWeights: moment('vWeights'),
    mBias: sharedF32(b, `${where}.mBias`),
    vBias: sharedF32(b, `${where}.vBias`),
    rowSteps: sharedU32(empty ? 0 : inputMajor ? inDim : outDim, `${where}.rowSteps`),
    biasSteps: sharedU32(empty ? 0 : 1, `${where}.biasSteps`),
  };
}

/** Whether layer `l` holds its training arrays (an inference-sized layer holds empty ones). */
export function hasTrainingArrays(l: LayerState): boolean {
  return l.biasSteps.length === 1;
}

/**
 * Makes a trained layer inference-sized again: its Adam moments and step counters are zeroed, their pages
 * given back to the kernel (netReleasePages: at once, whoever else still holds the arrays) and replaced by
 * empty arrays. A later training run then starts them at zero (allocateTrainingArrays), as a loaded model's.
 * Returns the bytes given back.
 */
export function releaseTrainingArrays(l: LayerState): number {
  if (!hasTrainingArrays(l)) return 0;
  let bytes = 0;
  for (const a of [l.mWeights, l.vWeights, l.mBias, l.vBias, l.rowSteps]) bytes += native().netReleasePages(a);
  Object.assign(l, trainingArrays(l.inDim, l.outDim, l.inputMajor === 1, '', true));
  return bytes;
}

/**
 * Gives an inference-sized layer (allocateLayers with `inference`) zero Adam moments and step counters, as
 * a new or loaded network's are; a layer that has them is left as it is. Returns whether it allocated.
 */
export function allocateTrainingArrays(l: LayerState, k: number): boolean {
  if (hasTrainingArrays(l)) return false;
  Object.assign(l, trainingArrays(l.inDim, l.outDim, l.inputMajor === 1, `layers[${k}]`, false));
  return true;
}
