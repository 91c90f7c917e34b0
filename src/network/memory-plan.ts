// Up-front memory accounting: how many bytes a configuration will allocate, by part, so that a run that
// cannot fit fails in a second with a message naming what to shrink, instead of swapping for an hour or
// being killed by the OOM killer halfway through allocating SharedArrayBuffers.
//
// The counts follow docs/design.md (LayerState, TablesSpec) and src/datasets/csr.ts exactly; only the
// per-worker scratch is an estimate (the kernels' private buffers are not visible from TypeScript).
import { boundJson } from '../util/bounded-text.js';
import { totalmem } from 'node:os';
import type { SparseDataset } from '../datasets/csr.js';
import type { ResolvedNetworkConfig } from './config.js';
import { parseSize } from '../util/parse-values.js';

/** LSH tables of a sampled layer (the fields of the network config's sampling block that cost memory). */
export interface SampledPlan {
  /** Number of hash tables. */
  L: number;
  /** log2 of buckets per table: B = 2^rangeBits buckets. */
  rangeBits: number;
  /** Max ids per bucket. Caps how full buckets get; the arrays are sized by N and slack, not by it. */
  bucketSize: number;
  /** Spare slots per bucket kept for incremental inserts. */
  slack: number;
  /**
   * Candidates per sample, for the scratch estimate. Default min(size, max(32, ceil(0.005 * size))),
   * the network config's default budget.
   */
  budget?: number;
}

/** One layer of the plan, from the input to the output. */
export interface LayerPlan {
  /** Neurons (the last layer: number of labels). */
  size: number;
  /** Present iff the layer is LSH-sampled. */
  sampled?: SampledPlan;
}

/** Input of `planMemory`. */
export interface MemoryPlanInput {
  /** Input feature dimension. */
  inputDim: number;
  layers: LayerPlan[];
  /** Training data held in memory (CSR, src/datasets/csr.ts). Default: not counted. */
  dataset?: {
    /** Stored (feature, value) pairs. */
    nnz: number;
    /** Stored labels (length of labelIndices). */
    labelNnz: number;
    points: number;
  };
  /** Worker threads; 0 trains in the calling thread, which needs one set of scratch like one worker. */
  workers: number;
  /** Points per mini-batch, for the scratch estimate. Default 128 (SLIDE, and fit()'s default). */
  batchSize?: number;
  /**
   * Training keeps a copy of the best epoch's weights and biases (held-out validation, the default when
   * the number of epochs is not given): 4 bytes per parameter and per neuron. Default false.
   */
  bestWeights?: boolean;
  /**
   * Inference only (a loaded model: Network.load, and so eval, predict and serve): weights and biases
   * without Adam moments or step counters; hash tables only for sampled hidden layers (a sampled output
   * layer is probed through its cluster index, counted instead); the scratch of prediction. Default false.
   */
  inference?: boolean;
}

/** One named part of a plan. */
export interface MemoryPart {
  name: string;
  bytes: number;
}

/** Result of `planMemory`. */
export interface MemoryPlan {
  totalBytes: number;
  /** Non-empty parts, largest first. */
  parts: MemoryPart[];
}

/**
 * Bytes a network configuration needs, by part.
 *
 * Per layer k (inDim -> size), as allocated by src/network/state.ts (docs/design.md, LayerState):
 * - `weights+Adam`: weights, mWeights, vWeights (4 + 8 bytes per parameter, inDim * size parameters) and
 *   bias, mBias, vBias (4 + 8 bytes per neuron).
 * - `step counters`: rowSteps, one u32 per row (inDim rows for layer 0, which is input-major; size rows
 *   otherwise), plus the one-element biasSteps.
 * - `hash tables` (sampled layers), all u32, with N = size, B = 2^rangeBits:
 *   offsets L * (B + 1), fill L * B, seen L * B, ids L * (N + B * slack), keys L * N.
 *   Hash-function parameters (a few kB) are not counted.
 * - `training data`: the CSR arrays, 4 bytes each: offsets and labelOffsets (points + 1), indices and
 *   values (nnz), labelIndices (labelNnz).
 * - `worker scratch`, an estimate per worker (max(1, workers) of them), for batch = batchSize:
 *   12 * batch * Σ_k active_k bytes of activations, deltas and active ids (active_k = size for dense
 *   layers, the sampling budget for sampled ones; true labels added to the active set are not
 *   counted), plus 4-byte gradients for the rows a batch touches: for layers k >= 1,
 *   min(size, batch * active_k) neuron rows of inDim floats (the "batch x active x hidden" term that
 *   dominates for a sampled output layer); for layer 0, min(inputDim, batch * ceil(nnz / points)) input
 *   rows of size floats when the dataset is given (not counted otherwise). This is an upper bound for
 *   kernels that buffer a batch's gradients; kernels that apply them row by row need less.
 *
 * With `inference` (a model loaded to predict): per layer `weights` (4 bytes per parameter and per neuron);
 * no step counters; `hash tables` of sampled hidden layers only; for a sampled output layer its `cluster
 * index` (sampled inference: at most round(sqrt(size)) centres of inDim + 2 floats, the members and head,
 * 4 bytes a label, and 8 bytes a label while it is built); and `worker scratch` per worker for a slice of
 * batchSize points (the prediction chunk, default 256 for inference): 12 * chunk * (Σ hidden sizes + 128)
 * bytes of activations and candidate buffers plus 12 bytes per output (the wide part's sums, or a
 * one-layer network's scores).
 *
 * @example
 * ```ts
 * const plan = planMemory({ inputDim: 135909, workers: 8, layers: [
 *   { size: 128 },
 *   { size: 670091, sampled: { L: 50, rangeBits: 18, bucketSize: 128, slack: 1 } },
 * ] });
 * checkMemory(plan, { maxBytes: parseBytes('4GB') }); // throws "Not enough memory: ..." if it does not fit
 * ```
 */
export function planMemory(input: MemoryPlanInput): MemoryPlan {
  const inputDim = positiveInt(input.inputDim, 'inputDim');
  if (!Array.isArray(input.layers) || input.layers.length === 0) throw new Error('Expected at least one layer in layers');
  const workers = nonNegativeInt(input.workers, 'workers');
  const inference = input.inference ?? false;
  const batch = positiveInt(input.batchSize ?? (inference ? 256 : 128), 'batchSize');
  const ds = input.dataset;
  if (ds) {
    nonNegativeInt(ds.nnz, 'dataset.nnz');
    nonNegativeInt(ds.labelNnz, 'dataset.labelNnz');
    nonNegativeInt(ds.points, 'dataset.points');
  }

  const parts: MemoryPart[] = [];
  let activeSum = 0;
  let gradientFloats = 0;
  let snapshotBytes = 0;
  let hiddenSum = 0;
  let inDim = inputDim;
  input.layers.forEach((layer, k) => {
    const where = `layers[${k}]`;
    const size = positiveInt(layer?.size, `${where}.size`);
    const last = k === input.layers.length - 1;
    const name = last ? 'output layer' : `layer ${k}`;
    const params = inDim * size;
    if (!last) hiddenSum += size;
    if (inference) {
      parts.push({ name: `${name} weights`, bytes: 4 * params + 4 * size });
      if (layer.sampled && last) {
        const C = Math.round(Math.sqrt(size));
        parts.push({ name: `${name} cluster index`, bytes: 4 * C * (inDim + 2) + 4 * (C + 1) + 12 * size });
      }
    } else {
      parts.push({ name: `${name} weights+Adam`, bytes: 12 * params + 12 * size });
      snapshotBytes += 4 * (params + size);
      parts.push({ name: `${name} step counters`, bytes: 4 * ((k === 0 ? inDim : size) + 1) });
    }
    let active = size;
    if (layer.sampled && !(inference && last)) {
      const s = layer.sampled;
      const L = positiveInt(s.L, `${where}.sampled.L`);
      const rangeBits = positiveInt(s.rangeBits, `${where}.sampled.rangeBits`);
      if (rangeBits > 31) throw new Error(`Expected rangeBits <= 31 for ${where}.sampled.rangeBits but received ${rangeBits}`);
      positiveInt(s.bucketSize, `${where}.sampled.bucketSize`);
      const slack = nonNegativeInt(s.slack, `${where}.sampled.slack`);
      const B = 2 ** rangeBits;
      const N = size;
      const u32s = L * (B + 1) + L * B + L * B + L * (N + B * slack) + L * N;
      parts.push({ name: `${name} hash tables`, bytes: 4 * u32s });
      const budget = s.budget === undefined ? Math.min(size, Math.max(32, Math.ceil(0.005 * size))) : positiveInt(s.budget, `${where}.sampled.budget`);
      active = Math.min(size, budget);
    }
    activeSum += active;
    if (k >= 1) gradientFloats += Math.min(size, batch * active) * inDim;
    else if (ds && ds.points > 0) gradientFloats += Math.min(inDim, batch * Math.ceil(ds.nnz / ds.points)) * size;
    inDim = size;
  });
  if (input.bestWeights && !inference) parts.push({ name: 'best-epoch weights', bytes: snapshotBytes });
  if (ds) {
    parts.push({ name: inference ? 'input data' : 'training data', bytes: 4 * (2 * (ds.points + 1) + 2 * ds.nnz + ds.labelNnz) });
  }
  const scratchSets = Math.max(1, workers);
  const outputs = input.layers.at(-1)!.size;
  const perWorker = inference ? 12 * batch * (hiddenSum + 128) + 12 * outputs : 12 * batch * activeSum + 4 * gradientFloats;
  parts.push({ name: `worker scratch (${scratchSets} worker${scratchSets > 1 ? 's' : ''})`, bytes: scratchSets * perWorker });

  const nonEmpty = parts.filter((p) => p.bytes > 0);
  nonEmpty.sort((a, b) => b.bytes - a.bytes || (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  const totalBytes = nonEmpty.reduce((s, p) => s + p.bytes, 0);
  if (!Number.isSafeInteger(totalBytes)) throw new Error(`The configuration needs more than ${Number.MAX_SAFE_INTEGER} bytes`);
  return { totalBytes, parts: nonEmpty };
}

/**
 * `planMemory` for a resolved network configuration: its layers and sampling tables, the scratch of
 * `workers`, and the training data when given (not counted otherwise); `inference`: the plan of a model
 * loaded to predict (MemoryPlanInput.inference).
 */
export function planNetworkMemory(config: ResolvedNetworkConfig, workers: number, data?: SparseDataset, bestWeights = false, inference = false): MemoryPlan {
  const plan = planMemory({
    inputDim: config.inputDim,
    layers: config.layers.map((l) => ({
      size: l.size,
      ...(l.sampling ? { sampled: { L: l.sampling.L, rangeBits: l.sampling.rangeBits, bucketSize: l.sampling.bucketSize, slack: l.sampling.slack } } : {}),
    })),
    ...(data ? { dataset: { nnz: data.offsets[data.points]!, labelNnz: data.labelOffsets[data.points]!, points: data.points } } : {}),
    workers,
    bestWeights,
    inference,
  });
  // The output layer's wide part: its pairs come from the data (at most maxPerLabel per label, and at most
  // one per (feature, label) occurrence in the data); 12 bytes a pair (label, weight, Adagrad sum), 4 more
  // with the best-epoch copy, plus the offsets. Without data: maxPerLabel per label.
  const wide = config.layers.at(-1)!.wide;
  if (wide) {
    let occurrences = Infinity;
    if (data) {
      occurrences = 0;
      for (let i = 0; i < data.points; i++) {
        occurrences += (data.offsets[i + 1]! - data.offsets[i]!) * (data.labelOffsets[i + 1]! - data.labelOffsets[i]!);
      }
    }
    const pairs = Math.min(wide.maxPerLabel * config.layers.at(-1)!.size, occurrences);
    const bytes = 4 * (config.inputDim + 1) + (inference ? 8 : bestWeights ? 16 : 12) * pairs;
    plan.parts.push({ name: 'output layer wide part', bytes });
    plan.parts.sort((a, b) => b.bytes - a.bytes || (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
    plan.totalBytes += bytes;
  }
  return plan;
}

/** Adds a part to `plan` (kept sorted, largest first, and totalled); a part of 0 bytes is left out. */
export function addPart(plan: MemoryPlan, name: string, bytes: number): void {
  if (bytes <= 0) return;
  plan.parts.push({ name, bytes });
  plan.parts.sort((a, b) => b.bytes - a.bytes || (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  plan.totalBytes += bytes;
}

/**
 * Thrown by `checkMemory` (and the loaders' memory check) when a plan exceeds the limit, before anything
 * is allocated; the message names the largest parts.
 *
 * @example
 * ```ts
 * try { await train({ train: 'train.txt', maxMemory: 2 ** 30 }); }
 * catch (e) { if (e instanceof MemoryLimitError) console.error(e.message); else throw e; }
 * ```
 */
export class MemoryLimitError extends Error {
  override name = 'MemoryLimitError';
}

/** Options of `checkMemory`. */
export interface CheckMemoryOptions {
  /** Hard limit in bytes (the `--max-memory` flag). Default: 90% of the machine's memory (see checkMemory). */
  maxBytes?: number;
  /** How the limit is named in the error. Default '--max-memory' with maxBytes, else a description of the default. */
  limitName?: string;
  /** Memory of the machine, for the default limit. Default: os.totalmem(), or the cgroup limit if lower. */
  machineBytes?: number;
}

/**
 * Throws `Not enough memory: the configuration needs 3.20 GB (output layer weights+Adam 1.04 GB, ...)
 * but the limit is 2.00 GB (--max-memory)` when a plan exceeds the limit, naming its three largest parts.
 * Returns the limit that was applied.
 *
 * Default limit: 90% of the machine's memory, where the machine's memory is os.totalmem() or the
 * container's cgroup limit (process.constrainedMemory()) if that is lower. Free memory (os.freemem())
 * is deliberately not used: it fluctuates with page cache and other processes, so a check based on it
 * would refuse a run one minute and accept it the next. The default only catches configurations that
 * cannot fit at all; --max-memory is the way to be stricter on a shared machine.
 */
/** The limit checkMemory applies (see there): `maxBytes`, else 90% of the machine's or container's memory. */
export function memoryLimit(options: CheckMemoryOptions = {}): { limit: number; limitName: string } {
  let limit: number;
  let limitName: string;
  if (options.maxBytes !== undefined) {
    if (!(Number.isFinite(options.maxBytes) && options.maxBytes > 0)) {
      throw new Error(`Expected a positive number of bytes for maxBytes but received ${options.maxBytes}`);
    }
    limit = options.maxBytes;
    limitName = options.limitName ?? '--max-memory';
  } else {
    let machine = options.machineBytes;
    let what = 'of the machine memory';
    if (machine === undefined) {
      machine = totalmem();
      const cg = (process as { constrainedMemory?: () => number | undefined }).constrainedMemory?.() ?? 0;
      // libuv reports "no limit" as 0 or as a huge number (2^63 - page size).
      if (cg > 0 && cg < machine) {
        machine = cg;
        what = 'of the container memory limit';
      }
    }
    limit = Math.floor(0.9 * machine);
    limitName = options.limitName ?? `90% ${what}`;
  }
  return { limit, limitName };
}

export function checkMemory(plan: MemoryPlan, options: CheckMemoryOptions = {}): number {
  const { limit, limitName } = memoryLimit(options);
  if (plan.totalBytes <= limit) return limit;
  const top = plan.parts.slice(0, 3).map((p) => `${p.name} ${formatBytes(p.bytes)}`);
  if (plan.parts.length > 3) top.push('...');
  throw new MemoryLimitError(`Not enough memory: the configuration needs ${formatBytes(plan.totalBytes)} (${top.join(', ')}) but the limit is ${formatBytes(limit)} (${limitName})`);
}

/**
 * Parses a byte size for flags like --max-memory ('2.5GB', '512M', '4GiB', '1e9'); see parseSize in
 * src/util/parse-values.ts, which the command line and the benchmarks share.
 */
export const parseBytes: (text: string, what?: string) => number = parseSize;

/** Formats bytes with SI units and 3 significant digits: 1029259776 -> '1.03 GB', 512 -> '512 B'. */
export function formatBytes(bytes: number): string {
  const units = ['B', 'kB', 'MB', 'GB', 'TB', 'PB'];
  let i = 0;
  let v = bytes;
  // Switch units where the 3-digit rounding would reach 1000 (999.6 MB prints as 1.00 GB).
  while (i < units.length - 1 && Number(v.toPrecision(3)) >= 1000) {
    v /= 1000;
    i++;
  }
  return `${i === 0 ? String(Math.round(v)) : v.toPrecision(3)} ${units[i]}`;
}

function positiveInt(v: unknown, what: string): number {
  if (typeof v !== 'number' || !Number.isSafeInteger(v) || v <= 0) {
    throw new Error(`Expected positive integer for ${what} but received ${boundJson(v)}`);
  }
  return v;
}
function nonNegativeInt(v: unknown, what: string): number {
  if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < 0) {
    throw new Error(`Expected non-negative integer for ${what} but received ${boundJson(v)}`);
  }
  return v;
}
