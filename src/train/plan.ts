// The plan of a training job, before anything is allocated: the network the defaults build for a data
// shape, the memory per rank by part, and the predicted samples/s of one process with W workers, of
// today's replicated data-parallel ranks and of label-sharded ranks (labels and input features sharded),
// from per-machine costs that a short timing probe measures with the real kernels and the real sharded
// phases (`calibrate`). `sublinear plan` prints it; `train` prints its one-line summary at start.
//
// Legend: N points, D features, L labels, B global batch, R ranks, b = B / R points per rank, W worker
// threads per rank, H0 the first hidden layer's width, H the last hidden layer's width (the output
// layer's input), nnz the mean nonzero features per point, S the output layer's active set per sample
// (dense: L; sampled with sharedFill: the batch's distinct labels plus the random fill, at least minActive),
// w the wide pairs a sample scans, U(n) the distinct input features of n points.
import { cpus, totalmem } from 'node:os';
import { CHUNK_BYTES, streamLines } from '../datasets/line-parser.js';
import { DataFormatError } from '../datasets/errors.js';
import type { SparseDataset } from '../datasets/csr.js';
import { sharedFloat32, sharedUint32 } from '../datasets/csr.js';
import { zipfCdf, sampleCdf } from '../datasets/synth.js';
import { defaultConfig, defaultThreads, defaultTraining, resolveConfig, tablesQueriedInTraining, type NetworkConfig, type ResolvedNetworkConfig } from '../network/config.js';
import { planMemory, formatBytes, type MemoryPlan, type MemoryPart } from '../network/memory-plan.js';
import { Xoshiro128 } from '../util/rng.js';
import { buildWide } from '../network/wide.js';
import { boundJson } from '../util/bounded-text.js';
import { SAVE_ROUND_BYTES } from './sharded-save.js';
import { holdoutSize, resolveValidation } from './early-stop.js';

/** The shape of a training set: what the plan needs from the data. */
export interface DataShape {
  /** Training points N. */
  points: number;
  /** Feature dimension D. */
  features: number;
  /** Number of labels L. */
  labels: number;
  /** Stored (feature, value) pairs, summed over the points. */
  nnz: number;
  /** Stored labels, summed over the points. */
  labelNnz: number;
  /** Sum over the points of nnz_i x labels_i: the most (feature, label) pairs a wide part can hold. Default nnz x labelNnz / points. */
  occurrences?: number;
  /** Points holding each label (length L). Absent: labels are taken as equally frequent. */
  labelFreq?: Uint32Array;
  /** Points holding each feature (length D). Absent: features are taken as equally frequent. */
  featureFreq?: Uint32Array;
  /** The first points of the data (at most `scanDataShape`'s headPoints), for the wide part's estimate. */
  head?: SparseDataset;
  /**
   * The most bytes the reader's buffers held while the file was read (line-parser.ts ReadMemory: two chunks of
   * at most 8 MiB, the file's size if smaller). Default: those of a file larger than a chunk, 2 x (8 MiB + 1).
   */
  readBufferBytes?: number;
}

/** Shapes of public benchmarks, from the Extreme Classification Repository (training split). */
export const PLAN_SHAPES = {
  /** Amazon-670K: 490,449 points, 135,909 features, 670,091 labels, 75.68 nonzeros and 5.45 labels per point. */
  'amazon-670k': { points: 490449, features: 135909, labels: 670091, avgNnz: 75.68, avgLabels: 5.45 },
  /** Amazon-3M: 1,717,899 points, 337,067 features, 2,812,281 labels, 36.04 nonzeros and 36.17 labels per point. */
  'amazon-3m': { points: 1717899, features: 337067, labels: 2812281, avgNnz: 36.04, avgLabels: 36.17 },
} as const;
export type PlanShapeName = keyof typeof PLAN_SHAPES;

/** A shape from its mean counts (no frequencies: labels and features are taken as equally frequent). */
export function shapeFromCounts(c: { points: number; features: number; labels: number; avgNnz: number; avgLabels: number }): DataShape {
  for (const k of ['points', 'features', 'labels'] as const) {
    if (!(Number.isSafeInteger(c[k]) && c[k] > 0)) throw new Error(`Expected positive integer for ${k} but received ${boundJson(c[k])}`);
  }
  if (!(c.avgNnz > 0 && c.avgNnz <= c.features)) throw new Error(`Expected avgNnz in (0, features] but received ${boundJson(c.avgNnz)}`);
  if (!(c.avgLabels > 0 && c.avgLabels <= c.labels)) throw new Error(`Expected avgLabels in (0, labels] but received ${boundJson(c.avgLabels)}`);
  const nnz = Math.round(c.points * c.avgNnz), labelNnz = Math.round(c.points * c.avgLabels);
  return { points: c.points, features: c.features, labels: c.labels, nnz, labelNnz, occurrences: Math.round(c.points * c.avgNnz * c.avgLabels) };
}

/** The shape of a dataset in memory, with its label and feature frequencies. */
export function datasetShape(d: SparseDataset): DataShape {
  const labelFreq = new Uint32Array(d.labels), featureFreq = new Uint32Array(d.features);
  let occurrences = 0;
  for (let i = 0; i < d.points; i++) {
    const f0 = d.offsets[i]!, f1 = d.offsets[i + 1]!, l0 = d.labelOffsets[i]!, l1 = d.labelOffsets[i + 1]!;
    occurrences += (f1 - f0) * (l1 - l0);
    for (let q = f0; q < f1; q++) featureFreq[d.indices[q]!]!++;
    for (let q = l0; q < l1; q++) labelFreq[d.labelIndices[q]!]!++;
  }
  return { points: d.points, features: d.features, labels: d.labels, nnz: d.offsets[d.points]!, labelNnz: d.labelOffsets[d.points]!, occurrences, labelFreq, featureFreq, head: d };
}

/** Points of the data the wide part's cost is estimated on (the first ones). */
export const WIDE_ESTIMATE_POINTS = 50000;

/**
 * Wide pairs a training sample scans (the lists of its features), measured: the wide part is chosen as fit()
 * chooses it (buildWide), on the first WIDE_ESTIMATE_POINTS points of `head`, and the lists of those points'
 * features are counted. Labels seen in more points than the head holds keep more pairs, so on larger data
 * this is a lower bound.
 */
export function measureWideScan(head: SparseDataset, config: ResolvedNetworkConfig, maxPoints = WIDE_ESTIMATE_POINTS): { scan: number; pairs: number; occurrences: number } {
  const wide = config.layers.at(-1)!.wide;
  if (!wide || head.points === 0) return { scan: 0, pairs: 0, occurrences: 0 };
  const n = Math.min(head.points, maxPoints);
  const rows = n === head.points ? null : Uint32Array.from({ length: n }, (_, i) => i);
  const w = buildWide(head, rows, config.inputDim, config.layers.at(-1)!.size, wide.maxPerLabel, wide.init, wide.minShare);
  let s = 0, occurrences = 0;
  for (let q = 0; q < head.offsets[n]!; q++) {
    const f = head.indices[q]!;
    if (f < config.inputDim) s += w.offsets[f + 1]! - w.offsets[f]!;
  }
  for (let i = 0; i < n; i++) occurrences += (head.offsets[i + 1]! - head.offsets[i]!) * (head.labelOffsets[i + 1]! - head.labelOffsets[i]!);
  return { scan: s / n, pairs: w.labels.length, occurrences };
}

/**
 * Reads the shape of an XC file (header `points features labels`, then `l1,l2 f:v f:v` per line) in one
 * streaming pass: counts, label and feature frequencies, nothing else kept. Throws a DataFormatError naming
 * `file:line` for a bad header, an id out of range or a line that is not `labels features`.
 */
export async function scanDataShape(path: string, headPoints = WIDE_ESTIMATE_POINTS): Promise<DataShape> {
  const hIdx: number[] = [], hVal: number[] = [], hLab: number[] = [], hOff = [0], hLabOff = [0];
  let line = 0, header: [number, number, number] | null = null, points = 0, nnz = 0, labelNnz = 0, occurrences = 0;
  let labelFreq = new Uint32Array(0), featureFreq = new Uint32Array(0);
  const fail = (msg: string): never => {
    throw new DataFormatError(path, line, msg);
  };
  const text = new TextDecoder();
  // The same reader as training's (job/data-loading.ts): its buffers are the ones a training process holds.
  const readStats = { bufferBytes: 0 };
  await streamLines(path, (buf, start, end) => {
    let p = start;
    while (p < end) {
      let e = p;
      while (buf[e] !== 0x0a) e++;
      line++;
      let stop = e;
      if (stop > p && buf[stop - 1] === 0x0d) stop--;
      if (!header) {
        const parts = text.decode(buf.subarray(p, stop)).trim().split(/\s+/);
        const nums = parts.map((x) => (/^\d+$/.test(x) ? Number(x) : NaN));
        if (nums.length !== 3 || nums.some((x) => !Number.isSafeInteger(x)) || nums[1]! <= 0 || nums[2]! <= 0) {
          fail(`expected the XC header 'points features labels' but found ${boundJson(text.decode(buf.subarray(p, Math.min(stop, p + 80))))}`);
        }
        header = nums as [number, number, number];
        labelFreq = new Uint32Array(header[2]);
        featureFreq = new Uint32Array(header[1]);
      } else if (stop > p) {
        // Labels: digits and commas up to the first space; then `id:value` tokens.
        let q = p, cur = -1, nl = 0, nf = 0;
        const keep = points < headPoints;
        while (q < stop && buf[q] !== 0x20 && buf[q] !== 0x09) {
          const c = buf[q]!;
          if (c >= 0x30 && c <= 0x39) cur = (cur < 0 ? 0 : cur * 10) + (c - 0x30);
          else if (c === 0x2c && cur >= 0) {
            if (cur >= header[2]) fail(`label ${cur} is out of range (the header says ${header[2]} labels)`);
            labelFreq[cur]!++;
            nl++;
            if (keep) hLab.push(cur);
            cur = -1;
          } else fail(`unexpected character ${boundJson(String.fromCharCode(c))} in the labels`);
          q++;
        }
        if (cur >= 0) {
          if (cur >= header[2]) fail(`label ${cur} is out of range (the header says ${header[2]} labels)`);
          labelFreq[cur]!++;
          nl++;
          if (keep) hLab.push(cur);
        }
        while (q < stop) {
          while (q < stop && (buf[q] === 0x20 || buf[q] === 0x09)) q++;
          if (q >= stop) break;
          let id = 0, digits = 0;
          while (q < stop && buf[q]! >= 0x30 && buf[q]! <= 0x39) {
            id = id * 10 + (buf[q]! - 0x30);
            digits++;
            q++;
          }
          if (digits === 0 || buf[q] !== 0x3a) fail('expected feature:value');
          if (id >= header[1]) fail(`feature ${id} is out of range (the header says ${header[1]} features)`);
          featureFreq[id]!++;
          nf++;
          const v0 = ++q;
          while (q < stop && buf[q] !== 0x20 && buf[q] !== 0x09) q++;
          if (keep) {
            const v = Number(text.decode(buf.subarray(v0, q)));
            if (!Number.isFinite(v)) fail(`expected a finite value after feature ${id}:`);
            hIdx.push(id);
            hVal.push(v);
          }
        }
        if (keep) {
          hOff.push(hIdx.length);
          hLabOff.push(hLab.length);
        }
        points++;
        nnz += nf;
        labelNnz += nl;
        occurrences += nf * nl;
      } else {
        if (points < headPoints) {
          hOff.push(hIdx.length);
          hLabOff.push(hLab.length);
        }
        points++;
      }
      p = e + 1;
    }
  }, { stats: readStats });
  if (!header) throw new DataFormatError(path, 0, "empty file (expected the XC header 'points features labels')");
  const h = header as [number, number, number];
  if (points !== h[0]) throw new DataFormatError(path, 0, `the header says ${h[0]} points but the file holds ${points}`);
  if (points === 0) throw new DataFormatError(path, 0, 'no points');
  // The head's rows sorted by feature id (readers sort them; buildWide needs no order, the check does not run).
  const head: SparseDataset = {
    points: hOff.length - 1, features: h[1], labels: h[2], offsets: Uint32Array.from(hOff), indices: Uint32Array.from(hIdx),
    values: Float32Array.from(hVal), labelOffsets: Uint32Array.from(hLabOff), labelIndices: Uint32Array.from(hLab),
  };
  return { points, features: h[1], labels: h[2], nnz, labelNnz, occurrences, labelFreq, featureFreq, head, readBufferBytes: readStats.bufferBytes };
}

/**
 * Expected distinct ids among `draws` points, where id j is in a point with probability freq[j] / points:
 * sum_j 1 - (1 - freq_j / points)^draws. Without frequencies, `perPoint` ids per point spread evenly over `ids`.
 */
export function expectedDistinct(draws: number, points: number, ids: number, perPoint: number, freq?: Uint32Array): number {
  if (draws <= 0) return 0;
  if (!freq) return ids * (1 - Math.pow(Math.max(0, 1 - perPoint / ids), draws));
  let s = 0;
  for (let j = 0; j < freq.length; j++) {
    const p = freq[j]! / points;
    if (p > 0) s += 1 - Math.pow(Math.max(0, 1 - p), draws);
  }
  return s;
}

// ---------------------------------------------------------------------------------------------------------
// The work of one sample and of one step.

/** Per-sample work of a network on a data shape, in the units the calibration prices. */
export interface Workload {
  /** Multiply-adds below the output layer per sample: nnz x H0 + the dense hidden layers' in x out. */
  lowerMacs: number;
  /** Output-layer multiply-adds per sample: S x H (dense output: L x H). */
  outputMacs: number;
  /** Output neurons active per sample (S). */
  active: number;
  /** Wide pairs a sample scans (its features' lists), estimated. */
  widePairs: number;
  /**
   * Where widePairs comes from: 'measured' on the data's first points (a data file), 'assumed' spread evenly
   * over the features (a shape or counts: real features are skewed), 'none' without a wide part.
   */
  widePairsFrom: 'measured' | 'assumed' | 'none';
  /** Wide pairs the network holds at most (memory-plan.ts's count). */
  widePairsTotal: number;
  /** Wide pairs the network is expected to hold: chosen on the data's first points, scaled by the data's (feature, label) occurrences. */
  widePairsExpected: number;
  /** Rows of the sampled output layer hashed per rebuild (0: dense output). */
  rebuildRows: number;
  /** Hash tables of the sampled output layer. */
  tables: number;
  /**
   * Training queries hash tables (Network.tablesInTraining). Without, fit() builds none: the output layer's
   * tables stay allocated and untouched, so they are not resident.
   */
  tablesQueried: boolean;
  /** Buckets of the sampled output layer's tables (tables x 2^rangeBits). */
  buckets: number;
  /** Rebuilds per training step of the default schedule over the first epoch. */
  rebuildsPerStep: number;
}

/** The wide pairs memory-plan.ts counts for a shape: min(maxPerLabel x L, occurrences). */
export function widePairsOf(config: ResolvedNetworkConfig, shape: DataShape): number {
  const out = config.layers.at(-1)!;
  if (!out.wide) return 0;
  const occ = shape.occurrences ?? Math.round((shape.nnz * shape.labelNnz) / Math.max(1, shape.points));
  return Math.min(out.wide.maxPerLabel * out.size, occ);
}

/** Rebuilds per step of the default schedule (first after 50 batches, intervals x1.15, at most 1000) over `steps`. */
export function rebuildsPerStep(steps: number): number {
  let next = 50, interval = 50, n = 0;
  while (next <= steps) {
    n++;
    interval = Math.min(1000, interval * 1.15);
    next += Math.round(interval);
  }
  return steps > 0 ? n / steps : 0;
}

/**
 * The work of one sample and of one step of `config` on `shape` at global batch `batch`. `widePoints`: the
 * points of `shape.head` the wide part is estimated on (default WIDE_ESTIMATE_POINTS).
 */
export function workload(config: ResolvedNetworkConfig, shape: DataShape, batch: number, widePoints = WIDE_ESTIMATE_POINTS): Workload {
  const nnzPer = shape.nnz / shape.points, labelsPer = shape.labelNnz / shape.points;
  const layers = config.layers;
  let lowerMacs = nnzPer * layers[0]!.size;
  for (let k = 1; k < layers.length - 1; k++) lowerMacs += layers[k - 1]!.size * layers[k]!.size;
  const out = layers.at(-1)!;
  const H = layers.length > 1 ? layers.at(-2)!.size : config.inputDim;
  let active = out.size;
  if (out.sampling) {
    const s = out.sampling;
    if (s.sharedFill) {
      const distinct = s.batchNegatives ? expectedDistinct(batch, shape.points, shape.labels, labelsPer, shape.labelFreq) : 0;
      // Plus the wide part's hard negatives (WideConfig.negatives), per sample beyond the shared set.
      active = Math.min(out.size, Math.max(s.minActive, distinct + labelsPer) + s.budget + (out.wide?.negatives ?? 0));
    } else {
      active = Math.min(out.size, Math.max(s.minActive, labelsPer + s.budget));
    }
  }
  const widePairsTotal = widePairsOf(config, shape);
  // With data at hand, measured on its first points (measureWideScan); from counts alone, the pairs spread
  // evenly over the features (a rough guess: real features are skewed, and frequent ones hold more pairs).
  let widePairs = 0, widePairsExpected = widePairsTotal;
  if (widePairsTotal > 0 && shape.head) {
    const m = measureWideScan(shape.head, config, widePoints);
    widePairs = m.scan;
    const occ = shape.occurrences ?? m.occurrences;
    widePairsExpected = Math.min(widePairsTotal, Math.round(m.occurrences > 0 ? (m.pairs * occ) / m.occurrences : m.pairs));
  } else if (widePairsTotal > 0) {
    widePairs = (nnzPer * widePairsTotal) / shape.features;
  }
  const steps = Math.ceil(shape.points / batch);
  const tablesQueried = tablesQueriedInTraining(config);
  return {
    lowerMacs, outputMacs: active * H, active, widePairs, widePairsTotal, widePairsExpected,
    widePairsFrom: widePairsTotal === 0 ? 'none' : shape.head ? 'measured' : 'assumed',
    rebuildRows: out.sampling ? out.size : 0, tables: out.sampling ? out.sampling.L : 0, buckets: out.sampling ? out.sampling.L * 2 ** out.sampling.rangeBits : 0,
    // Scheduled rebuilds only where training queries the tables (Network.tablesInTraining).
    rebuildsPerStep: tablesQueried ? rebuildsPerStep(steps) : 0,
    tablesQueried,
  };
}

// ---------------------------------------------------------------------------------------------------------
// The machine and its measured costs.

/** Per-machine costs measured by `calibrate` (seconds, one thread). */
export interface Calibration {
  /** CPU model the probe ran on. */
  cpu: string;
  /** Hidden width the probe used (the costs depend a little on it). */
  hidden: number;
  /** Seconds per multiply-add below the output layer (forward, backward and Adam of the rows touched). */
  lowerPerMac: number;
  /** Seconds per output-layer multiply-add (active neuron x H: forward, softmax, backward and Adam). */
  outputPerMac: number;
  /** Seconds per wide pair a sample scans (sum, gradient, Adagrad). */
  widePerPair: number;
  /** Seconds per sample not proportional to the above. */
  perSample: number;
  /** Seconds of netApplyRows per gradient float applied (lazy Adam of exchanged rows). */
  applyPerFloat: number;
  /** Seconds per (row, table) of a hash-table rebuild of a sampled layer. */
  rebuildPerRowTable: number;
  /** Seconds per bucket (tables x 2^rangeBits) of a rebuild, whatever the rows. */
  rebuildPerBucket: number;
  /**
   * A label-sharded rank's costs, measured on the sharded phases themselves (ShardedModel.step of a rank of 2
   * on the probe network, the exchange left out): they run on the whole global batch of B points.
   */
  shard: ShardCalibration;
  /** Throughput of W worker threads over W x one thread's, for W = the cores the probe had (1 when 1 core). */
  parallelEfficiency: number;
  /** Cores the parallel probe used. */
  parallelWorkers: number;
  /**
   * Throughput of one worker whose batches `parallelWorkers` intra-batch threads share (FitOptions.threads)
   * over one thread's, measured on a dense output layer's probe network (absent in calibrations of sampled
   * networks and in older ones: no speed-up is assumed).
   */
  threadSpeedup?: number;
  /** Resident memory of this process before the probe allocated anything (Node + the addon), bytes. */
  baseRssBytes: number;
  /**
   * Resident memory that a process's pool of worker threads adds (their V8 isolates, Node environments and the
   * worker module), measured (calibrate.ts measureWorkerRss): the first worker's bytes (with what the pool
   * shares) and each further worker's. One process's pool of W workers adds first + (W - 1) x next; a
   * label-sharded rank starts no pool. Absent in older calibrations: not counted.
   */
  workerRss?: { first: number; next: number };
  /** Seconds the probe took. */
  probeSeconds: number;
}

/** Per-sample costs of a label-sharded rank's step (seconds, one thread; per sample of the global batch). */
export interface ShardCalibration {
  /** Per multiply-add below the output: layer 0 over the rank's features (forward, backward, Adam of its rows) and the middle layers. */
  lowerPerMac: number;
  /** Per sample, what every rank repeats below the output: layer 0's bias, ReLU and dropout, the layouts of the batch. */
  lowerPerSample: number;
  /** Per output multiply-add of the rank's slice (active row x H: forward, softmax, backward and Adam). */
  outputPerMac: number;
  /** Per wide pair of the rank's labels a sample scans (term, gradient, Adagrad). */
  widePerPair: number;
  /** Per sample, the rest of a step (the output phases' fixed costs, the softmax statistics combined, TypeScript). */
  perSample: number;
  /**
   * Per sample, the summed standard deviations of a step's segments between two collectives (ShardedModel
   * segments), measured on the probe's steps: a collective waits for the slowest of R ranks, about E[max of R
   * standard normals] x that per segment (waitFactor).
   */
  spreadPerSample: number;
  /**
   * A rank's step when another rank shares the probe's machine (2 ranks, each collective a barrier of the two:
   * probe-comm.ts arrive), over its step alone: the cores' and memory's sharing and the waits at the collectives. The plan
   * applies it when MachineSpec.ranksPerMachine > 1. At least 1.
   */
  coLocated: number;
  /**
   * How the probe's two threads waited at their collectives when `coLocated` was measured: 2 (polling, then
   * asleep: probe-comm.ts arrive). A cached calibration without it (the threads only spun, which measured 5.5 to
   * 8x on a loaded machine where runs went 1.3 to 1.9x) is measured again.
   */
  coLocatedBarrier?: number;
}

/**
 * E[max of R independent standard normal draws] (0 for one): how far, in standard deviations, the slowest of R
 * ranks is behind the mean at a collective. Numerically: the integral of x R phi(x) Phi(x)^(R-1).
 */
export function waitFactor(R: number): number {
  if (R <= 1) return 0;
  const phi = (x: number) => Math.exp(-x * x / 2) / Math.sqrt(2 * Math.PI);
  // Phi by the Abramowitz-Stegun 7.1.26 erf approximation (error < 1.5e-7).
  const Phi = (x: number) => {
    const z = Math.abs(x) / Math.SQRT2, t = 1 / (1 + 0.3275911 * z);
    const erf = 1 - (((((1.061405429 * t - 1.453152027) * t) + 1.421413741) * t - 0.284496736) * t + 0.254829592) * t * Math.exp(-z * z);
    return x >= 0 ? (1 + erf) / 2 : (1 - erf) / 2;
  };
  let sum = 0;
  const h = 0.01;
  for (let x = -8; x <= 8; x += h) sum += x * R * phi(x) * Math.pow(Phi(x), R - 1) * h;
  return sum;
}

/** The machines of a job. */
export interface MachineSpec {
  /** Cores per machine. Default: this machine's. */
  cores?: number;
  /** Memory per machine in bytes; the plan keeps 90% of it. Default: this machine's. */
  memoryBytes?: number;
  /** Link speed in Gb/s. Default 10. */
  linkGbps?: number;
  /** Latency of one message in seconds. Default 20e-6. */
  latency?: number;
  /** Ranks per machine. Default 1. */
  ranksPerMachine?: number;
}

// ---------------------------------------------------------------------------------------------------------
// The exchange of one step.

/** One collective of a step: its name, the bytes it carries in all (every rank's contribution) and its kind. */
export interface Collective {
  name: string;
  kind: 'allgather' | 'allreduce';
  /** Bytes of the whole result (allgather: the sum of the ranks' parts; allreduce: the reduced buffer). */
  bytes: number;
}

/**
 * Bytes a rank receives and the time of a collective (the Thakur-Rabenseifner model: bandwidth-optimal
 * ring for the bytes, recursive doubling for the latency): allgather (R - 1)/R x bytes and
 * ceil(log2 R) messages; allreduce 2 (R - 1)/R x bytes and 2 ceil(log2 R) messages.
 */
export function collectiveCost(c: Collective, R: number, linkGbps: number, latency: number): { received: number; seconds: number } {
  if (R <= 1) return { received: 0, seconds: 0 };
  const steps = Math.ceil(Math.log2(R));
  const f = c.kind === 'allgather' ? 1 : 2;
  const received = (f * (R - 1) * c.bytes) / R;
  return { received, seconds: f * steps * latency + (received * 8) / (linkGbps * 1e9) };
}

/** Inputs of the exchange formulas. */
export interface ExchangeInput {
  /** Ranks R. */
  ranks: number;
  /** Global batch B. */
  batch: number;
  /** Width of the first hidden layer H0 (a layer-0 gradient row's floats). */
  firstWidth: number;
  /** Width of the last hidden layer H (the output layer's input). */
  lastWidth: number;
  /** Distinct input features of one rank's b = B / R points, U(b). */
  featuresPerRank: number;
  /** Distinct input features of the global batch, U(B). */
  featuresPerBatch: number;
  /** Floats all-reduced for the dense layers: layer 0's bias (H0) plus every dense hidden layer's weights and bias. */
  denseFloats: number;
  /** Replicated mode only: output rows one rank's part touches, S(b), and the union over the batch, S(B). */
  outputRowsPerRank?: number;
  outputRowsPerBatch?: number;
}

/**
 * The collectives of one step of label-sharded training (rank r owns a slice of the labels and a slice of the
 * input features' rows of layer 0; every phase runs on the global batch):
 * - `pre-activations`: allreduce of layer 0's partial pre-activations, B x H0 x 4 bytes (each rank's features'
 *   share of every sample);
 * - `softmax stats`: allgather of 3 doubles per sample per rank (max, sum of exponentials, true-label logits),
 *   24 B R bytes;
 * - `hidden gradient`: allreduce of dL/dH, B x H x 4 bytes (each rank's slice contributes to every sample).
 * Nothing else: no gradient rows. None of it grows with the number of labels or features.
 */
export function shardedExchange(x: { ranks: number; batch: number; firstWidth: number; lastWidth: number }): Collective[] {
  const { ranks: R, batch: B } = x;
  return [
    { name: 'pre-activations', kind: 'allreduce', bytes: 4 * B * x.firstWidth },
    { name: 'softmax stats', kind: 'allgather', bytes: 24 * B * R },
    { name: 'hidden gradient', kind: 'allreduce', bytes: 4 * B * x.lastWidth },
  ];
}

/**
 * The collectives of one step of replicated data-parallel training (`train --distributed --data-parallel`): the
 * lower exchange above plus the output layer's rows, gathered (R S(b) rows of H + 1 floats) or summed over
 * their union S(B) when that moves fewer bytes.
 */
export function replicatedExchange(x: ExchangeInput): Collective[] {
  const { ranks: R } = x;
  const gathered = R * x.featuresPerRank, outGathered = R * (x.outputRowsPerRank ?? 0), outUnion = x.outputRowsPerBatch ?? 0;
  const rowsReduced = 2 * x.featuresPerBatch < gathered, outReduced = 2 * outUnion < outGathered;
  return [
    { name: 'ids', kind: 'allgather', bytes: 4 * (gathered + outGathered + 2 * R) },
    rowsReduced
      ? { name: 'lower rows (summed)', kind: 'allreduce', bytes: 4 * x.featuresPerBatch * x.firstWidth }
      : { name: 'lower rows (gathered)', kind: 'allgather', bytes: 4 * gathered * x.firstWidth },
    outReduced
      ? { name: 'output rows (summed)', kind: 'allreduce', bytes: 4 * outUnion * (x.lastWidth + 1) }
      : { name: 'output rows (gathered)', kind: 'allgather', bytes: 4 * outGathered * (x.lastWidth + 1) },
    { name: 'dense', kind: 'allreduce', bytes: 4 * x.denseFloats },
  ];
}

// ---------------------------------------------------------------------------------------------------------
// Memory per rank.

/**
 * Memory of one rank: memory-plan.ts's parts; sharded, the output layer cut to the rank's slice of the labels
 * and layer 0 to its slice of the input features (their rows, moments and step counters).
 */
export function rankMemory(
  config: ResolvedNetworkConfig, shape: DataShape,
  o: { ranks: number; sharded: boolean; workers: number; batch: number; bestWeights: boolean; active: number; rerankThreads?: number },
): MemoryPlan {
  const R = o.sharded ? o.ranks : 1;
  const out = config.layers.at(-1)!;
  const slice = Math.ceil(out.size / R);
  const plan = planMemory({
    inputDim: o.sharded ? Math.ceil(config.inputDim / R) : config.inputDim,
    layers: config.layers.map((l, k) => {
      const last = k === config.layers.length - 1;
      const size = last ? slice : l.size;
      if (!l.sampling) return { size };
      return { size, sampled: { L: l.sampling.L, rangeBits: l.sampling.rangeBits, bucketSize: l.sampling.bucketSize, slack: l.sampling.slack, ...(R > 1 ? { budget: Math.max(1, Math.ceil(o.active / R)) } : {}) } };
    }),
    dataset: { nnz: shape.nnz, labelNnz: shape.labelNnz, points: shape.points },
    workers: o.workers,
    batchSize: o.batch,
    bestWeights: o.bestWeights,
  });
  if (o.sharded) {
    // A rank's slice is trained without hash tables (its negatives are uniform within the slice).
    plan.totalBytes -= plan.parts.filter((p) => p.name === 'output layer hash tables').reduce((t, p) => t + p.bytes, 0);
    plan.parts = plan.parts.filter((p) => p.name !== 'output layer hash tables');
  }
  const pairs = widePairsOf(config, shape);
  if (pairs > 0) {
    // memory-plan.ts's wide part (planNetworkMemory), the pairs of the rank's labels only; a sharded rank also
    // holds their label-major index (WideState.byLabel: 8 bytes a pair, 4 a label).
    const bytes = 4 * (config.inputDim + 1) + (o.bestWeights ? 16 : 12) * Math.ceil(pairs / R) + (o.sharded ? 8 * Math.ceil(pairs / R) + 4 * (slice + 1) : 0);
    plan.parts.push({ name: 'output layer wide part', bytes });
    plan.totalBytes += bytes;
  }
  if (o.sharded) {
    // --save on rank 0 (src/train/sharded-save.ts): one round of rows as gathered and in file order, and the
    // output layer's biases; no rank gathers the whole model.
    const bytes = 2 * SAVE_ROUND_BYTES + 4 * out.size;
    plan.parts.push({ name: 'model file rounds (rank 0, --save)', bytes });
    plan.totalBytes += bytes;
  }
  const rr = rerankTrainingBytes(config, shape, { bestWeights: o.bestWeights, threads: o.rerankThreads ?? 1, ranks: R });
  if (rr > 0) {
    plan.parts.push({ name: 're-ranker training (after the epochs)', bytes: rr });
    plan.totalBytes += rr;
  }
  // The reader's buffers (every rank reads the data): garbage once the file is read, but V8 frees them only at
  // a collection, and a training process whose JavaScript heap stays small goes minutes without one (RSS
  // traces hold them to the end of the run), as train's own plan counts them (job/train.ts, 'read buffers').
  const read = shape.readBufferBytes ?? 2 * (CHUNK_BYTES + 1);
  plan.parts.push({ name: 'read buffers', bytes: read });
  plan.totalBytes += read;
  if (o.sharded && o.ranks > 1) {
    const H = config.layers.length > 1 ? config.layers.at(-2)!.size : config.inputDim;
    // The global batch's pre-activations (summed in place), hidden activations and hidden gradients.
    const bytes = 4 * o.batch * (config.layers[0]!.size + 2 * H);
    plan.parts.push({ name: 'exchange buffers', bytes });
    plan.totalBytes += bytes;
  }
  plan.parts.sort((a, b) => b.bytes - a.bytes || (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  return plan;
}

/**
 * Bytes the re-ranker's training holds besides the network (fit-network.ts trainReranker, sharded-fit.ts, and
 * native/net_rerank.cc rerank_train), once the epochs are done: on n training points (those not held out) and
 * p = min(n, shortlistRows) of them predicted, with S = min(shortlist, L):
 * - the shortlists: p x S labels and scores as the prediction returns them (8 bytes), the copy that crosses
 *   from the worker (8 more), n x S labels placed by training row (4); and, with points held out, the p
 *   predicted rows copied out of the training data (their CSR arrays);
 * - the examples, label-major: E = the n points' labels plus their hard negatives (at most n x S), 4 bytes of
 *   row and 1 of sign each (a label-sharded rank collects its own labels' only: E / R), and per label its
 *   offsets, fill cursor, owner, count and start (24 bytes); 1/norm of every row (8 bytes);
 * - per solver thread: a dense weight vector and its touched marks over the features (9 bytes a feature), and
 *   the copy of one label's example rows with their dual variables (nnz x 8 + 20 bytes a row), sized by the
 *   label with the most examples: label j is a positive of freq_j n / N rows and, with the shortlists' hard
 *   negatives taken in proportion to the labels' frequencies, a negative of n (S - labels per point) freq_j /
 *   labelNnz more, at most n.
 * The classifiers' own weights (the labels' kept entries after pruning: data-dependent, 8 bytes each) are not
 * counted. Without held-out points (a fixed --epochs) no re-ranker is trained: 0.
 */
export function rerankTrainingBytes(config: ResolvedNetworkConfig, shape: DataShape, o: { bestWeights: boolean; threads: number; ranks?: number }): number {
  const out = config.layers.at(-1)!, cfg = out.rerank;
  if (!cfg || !o.bestWeights || shape.points === 0) return 0;
  const N = shape.points, L = out.size, D = config.inputDim;
  const v = resolveValidation({});
  const held = holdoutSize(N, v.fraction, v.maxPoints); // the default held-out slice, as fit() takes it
  const n = N - held, p = Math.min(n, cfg.shortlistRows), S = Math.min(cfg.shortlist, L);
  const nnzPer = shape.nnz / N, labelsPer = shape.labelNnz / N;
  const shortlists = 16 * p * S + 4 * n * S + (p < N ? Math.round(p * (8 * nnzPer + 4 * labelsPer + 8)) : 0);
  const E = Math.round(n * labelsPer) + n * S;
  const examples = Math.round((5 * E) / Math.max(1, o.ranks ?? 1)) + 24 * (L + 1) + 8 * n;
  let maxFreq = 0;
  if (shape.labelFreq) for (let j = 0; j < shape.labelFreq.length; j++) maxFreq = Math.max(maxFreq, shape.labelFreq[j]!);
  else maxFreq = Math.ceil(shape.labelNnz / L);
  const mMax = Math.min(n, Math.ceil((maxFreq * n) / N + (n * Math.max(0, S - labelsPer) * maxFreq) / Math.max(1, shape.labelNnz)));
  const perThread = 9 * D + Math.round(mMax * (8 * nnzPer + 20));
  return shortlists + examples + Math.max(1, o.threads) * perThread;
}

// ---------------------------------------------------------------------------------------------------------
// The plan.

export type PlanMode = 'single' | 'replicated' | 'sharded';

/** The cost of one step on one rank, by term (seconds), and what it moves. */
export interface StepCost {
  /** Forward, backward and update below the output layer, for the rank's b points on its W workers (sharded: its features' share of the global batch). */
  lower: number;
  /** The output layer (its slice when sharded) for the points it scores, on W workers. */
  output: number;
  /** The wide part (its slice when sharded). */
  wide: number;
  /** Per-sample overhead. */
  overhead: number;
  /** Applying the exchanged gradient rows of other ranks (lazy Adam, main thread; none when sharded). */
  apply: number;
  /** Hash-table rebuilds, amortised per step (the rank's slice when sharded). */
  rebuild: number;
  /** The exchange on the link. */
  exchange: number;
  /** Label-sharded: the waits for the slowest rank at the step's collectives (ShardCalibration.spreadPerSample x waitFactor(R)). */
  wait: number;
  /** Sum of the above. */
  total: number;
  /** Bytes one rank receives per step. */
  receivedBytes: number;
  /** Bytes of the step's collectives (their whole results). */
  exchangedBytes: number;
  collectives: Collective[];
}

/** One configuration considered. */
export interface PlanCandidate {
  mode: PlanMode;
  ranks: number;
  workers: number;
  /** Intra-batch threads per process (single mode; 1 elsewhere). */
  threads: number;
  batch: number;
  linkGbps: number;
  memoryPerRank: MemoryPlan;
  fits: boolean;
  /**
   * Predicted peak resident memory per rank: the process's measured base, plus the plan's parts with two
   * upper bounds replaced by expectations: the wide part's pairs (`Workload.widePairsExpected`) and the
   * worker scratch (the kernels apply gradients row by row, so only the activations, deltas and active ids
   * of a batch, 12 x batch x the active neurons of every layer per worker, are resident); and without the
   * output layer's hash tables where training queries none (`Workload.tablesQueried`: allocated, never
   * touched); plus the worker threads' pool (poolRss: measured per worker by the probe).
   */
  peakRssBytes: number;
  step: StepCost;
  samplesPerSec: number;
  epochSeconds: number;
  /** Why it cannot run, when it cannot (memory, a wide part in replicated mode). */
  excluded?: string;
}

/** Input of `planTraining`. */
export interface PlanInput {
  shape: DataShape;
  /** The network; default: the defaults rule for the shape (`defaultConfig`). */
  config?: NetworkConfig;
  /** Global batch. Default 128. */
  batch?: number;
  /** Worker threads per rank. Default: the defaults rule (the cores per rank with a sampled output, else 1). */
  workers?: number;
  /**
   * Intra-batch threads of one process (FitOptions.threads). Default: the defaults rule (the cores with a
   * dense output layer and one worker, else 1).
   */
  threads?: number;
  /** Rank counts to consider. Default [1]. */
  ranks?: number[];
  /** Link speeds to consider (Gb/s). Default [machine.linkGbps]. */
  linkGbps?: number[];
  /** Modes to consider. Default all three. */
  modes?: PlanMode[];
  machine?: MachineSpec;
  /** Training keeps the best epoch's weights (no fixed epoch count; never in label-sharded mode, which needs --epochs). Default false. */
  bestWeights?: boolean;
  /** Points of the data's head the wide part is estimated on. Default WIDE_ESTIMATE_POINTS (50,000). */
  widePoints?: number;
}

export interface TrainingPlan {
  config: ResolvedNetworkConfig;
  shape: { points: number; features: number; labels: number; avgNnz: number; avgLabels: number };
  workload: Workload;
  machine: Required<MachineSpec>;
  calibration: Calibration;
  candidates: PlanCandidate[];
  /** The fastest candidate that fits (else the one needing the least memory per rank). */
  chosen: PlanCandidate;
  reason: string;
}

/** Predicted cost of one step of `mode` on R ranks with W workers each. */
export function stepCost(
  config: ResolvedNetworkConfig, shape: DataShape, w: Workload, cal: Calibration,
  o: { mode: PlanMode; ranks: number; workers: number; batch: number; linkGbps: number; latency: number; cores: number; ranksPerMachine?: number; threads?: number },
): StepCost {
  const R = o.mode === 'single' ? 1 : o.ranks;
  const B = o.batch, b = B / R;
  const layers = config.layers;
  const H0 = layers[0]!.size, H = layers.length > 1 ? layers.at(-2)!.size : config.inputDim;
  const nnzPer = shape.nnz / shape.points;
  let collectives: Collective[] = [];
  let lower: number, output: number, wide: number, overhead: number, rebuild: number, apply = 0, wait = 0;
  if (o.mode === 'sharded') {
    // Every phase on the global batch of B points, one thread, priced by the sharded phases' own costs: layer 0
    // over the rank's 1/R of the features (by nonzero count), the middle layers whole, the output layer and the
    // wide part on the rank's 1/R of the active set and of the pairs; no tables (uniform negatives in the
    // slice), no gradient rows to apply; the exchange is two B-row all-reduces and the softmax statistics.
    const k = cal.shard;
    const lowerAt = (r: number) => B * ((nnzPer * H0) / r + (w.lowerMacs - nnzPer * H0)) * k.lowerPerMac + B * k.lowerPerSample;
    const workAt = (r: number) => lowerAt(r) + (B * w.outputMacs * k.outputPerMac) / r + (B * w.widePairs * k.widePerPair) / r + B * k.perSample;
    // Ranks sharing a machine: each phase at the probe's co-located speed (which includes the waits of two
    // ranks at their collectives; the model's waits beyond two ranks are added).
    const shared = R > 1 && (o.ranksPerMachine ?? 1) > 1 ? Math.max(1, k.coLocated ?? 1) : 1;
    lower = lowerAt(R) * shared;
    output = ((B * w.outputMacs * k.outputPerMac) / R) * shared;
    wide = ((B * w.widePairs * k.widePerPair) / R) * shared;
    overhead = B * k.perSample * shared;
    rebuild = 0;
    if (R > 1) {
      collectives = shardedExchange({ ranks: R, batch: B, firstWidth: H0, lastWidth: H });
      // The segments' spread, measured on a rank of 2, scaled with the rank's work.
      const f = shared > 1 ? Math.max(0, waitFactor(R) - waitFactor(2)) : waitFactor(R);
      wait = f * B * (k.spreadPerSample ?? 0) * (workAt(R) / workAt(2));
    }
  } else {
    const threads = Math.max(1, Math.min(o.workers, o.cores));
    // One worker whose batches T intra-batch threads share: the probe's measured speed-up with its cores,
    // in proportion for fewer threads.
    const T = Math.max(1, Math.min(o.threads ?? 1, o.cores));
    const shared = threads === 1 && T > 1 && cal.threadSpeedup ? 1 + ((cal.threadSpeedup - 1) * (T - 1)) / Math.max(1, cal.parallelWorkers - 1) : 1;
    const speedup = threads > 1 ? threads * cal.parallelEfficiency : shared;
    lower = (b * w.lowerMacs * cal.lowerPerMac) / speedup;
    overhead = (b * cal.perSample) / speedup;
    output = (b * w.outputMacs * cal.outputPerMac) / speedup;
    wide = (b * w.widePairs * cal.widePerPair) / speedup;
    // Rebuilds split their tables across the workers.
    rebuild = (w.rebuildsPerStep * (w.rebuildRows * w.tables * cal.rebuildPerRowTable + w.buckets * cal.rebuildPerBucket)) / speedup;
    if (R > 1) {
      const uB = expectedDistinct(B, shape.points, shape.features, nnzPer, shape.featureFreq);
      const ub = expectedDistinct(b, shape.points, shape.features, nnzPer, shape.featureFreq);
      let denseFloats = H0;
      for (let k = 1; k < layers.length - 1; k++) denseFloats += layers[k - 1]!.size * layers[k]!.size + layers[k]!.size;
      const x: ExchangeInput = { ranks: R, batch: B, firstWidth: H0, lastWidth: H, featuresPerRank: ub, featuresPerBatch: uB, denseFloats };
      const out = layers.at(-1)!;
      const labelsPer = shape.labelNnz / shape.points;
      const sOf = (n: number) => {
        if (!out.sampling) return out.size;
        const distinct = expectedDistinct(n, shape.points, shape.labels, labelsPer, shape.labelFreq);
        return Math.min(out.size, Math.max(out.sampling.minActive, distinct) + out.sampling.budget);
      };
      const sb = sOf(b);
      // Replicas share the fill (fillSeed), so the parts' sets overlap in it: the union is the batch's set.
      x.outputRowsPerRank = sb;
      x.outputRowsPerBatch = sOf(B);
      collectives = replicatedExchange(x);
      const lowerRows = 2 * uB < R * ub ? uB : R * ub;
      const outRows = 2 * x.outputRowsPerBatch < R * sb ? x.outputRowsPerBatch : R * sb;
      // Replicated ranks compute gradients only (mode 3) and apply every exchanged row on every rank; the
      // measured per-MAC costs include the rank's own Adam, so only the other ranks' rows are added.
      apply = Math.max(0, lowerRows - ub) * H0 * cal.applyPerFloat + Math.max(0, outRows - sb) * (H + 1) * cal.applyPerFloat + denseFloats * cal.applyPerFloat;
    }
  }
  let exchange = 0, receivedBytes = 0, exchangedBytes = 0;
  for (const c of collectives) {
    const k = collectiveCost(c, R, o.linkGbps, o.latency);
    exchange += k.seconds;
    receivedBytes += k.received;
    exchangedBytes += c.bytes;
  }
  const total = lower + output + wide + overhead + apply + rebuild + exchange + wait;
  return { lower, output, wide, overhead, apply, rebuild, exchange, wait, total, receivedBytes, exchangedBytes, collectives };
}

/** The machine with its defaults filled in. */
export function resolveMachine(m: MachineSpec = {}): Required<MachineSpec> {
  const cores = m.cores ?? cpus().length;
  const memoryBytes = m.memoryBytes ?? totalmem();
  const linkGbps = m.linkGbps ?? 10;
  const latency = m.latency ?? 20e-6;
  const ranksPerMachine = m.ranksPerMachine ?? 1;
  if (!(Number.isSafeInteger(cores) && cores > 0)) throw new Error(`Expected positive integer for cores but received ${boundJson(cores)}`);
  if (!(memoryBytes > 0)) throw new Error(`Expected positive number for memory but received ${boundJson(memoryBytes)}`);
  if (!(linkGbps > 0)) throw new Error(`Expected positive number for linkGbps but received ${boundJson(linkGbps)}`);
  if (!(latency >= 0)) throw new Error(`Expected non-negative number for latency but received ${boundJson(latency)}`);
  if (!(Number.isSafeInteger(ranksPerMachine) && ranksPerMachine > 0)) throw new Error(`Expected positive integer for ranksPerMachine but received ${boundJson(ranksPerMachine)}`);
  return { cores, memoryBytes, linkGbps, latency, ranksPerMachine };
}

/**
 * The plan of a training job from a data shape, the machines and measured costs: every configuration
 * considered (mode x ranks x link), its memory per rank and predicted samples/s, and the one chosen.
 *
 * @example
 * ```ts
 * const shape = await scanDataShape('train.txt');
 * const config = resolveConfig(defaultConfig(shape));
 * const cal = await calibrate({ config, shape });
 * const plan = planTraining({ shape, ranks: [1, 2, 4] }, cal);
 * console.log(formatPlanLine(plan)); // plan: 1 process x 2 workers, batch 128: 4,100 samples/s, ...
 * ```
 */
export function planTraining(input: PlanInput, cal: Calibration): TrainingPlan {
  const shape = input.shape;
  const config = resolveConfig(input.config ?? defaultConfig(shape));
  const machine = resolveMachine(input.machine);
  const batch = input.batch ?? 128;
  if (!(Number.isSafeInteger(batch) && batch > 0)) throw new Error(`Expected positive integer for batch but received ${boundJson(batch)}`);
  const ranksList = input.ranks ?? [1];
  for (const r of ranksList) if (!(Number.isSafeInteger(r) && r > 0)) throw new Error(`Expected positive integer ranks but received ${boundJson(r)}`);
  const links = input.linkGbps ?? [machine.linkGbps];
  const modes = input.modes ?? ['single', 'replicated', 'sharded'];
  const limit = Math.floor(0.9 * machine.memoryBytes);
  const coresPerRank = Math.max(1, Math.floor(machine.cores / machine.ranksPerMachine));
  // The defaults rule's workers and threads for a process with `cores` cores: a rank gets its share of the
  // machine, one process alone (mode 'single') all of it, as `sublinear train` without MPI takes them.
  const defaultsOn = (cores: number) => {
    const W = input.workers ?? defaultTraining(config, cores).workers;
    return { workers: W, threads: input.threads ?? defaultThreads(config, cores, W) };
  };
  const perRank = defaultsOn(coresPerRank), alone = defaultsOn(machine.cores);
  const w = workload(config, shape, batch, input.widePoints);
  const wide = !!config.layers.at(-1)!.wide;
  const candidates: PlanCandidate[] = [];
  for (const mode of modes) {
    for (const R of mode === 'single' ? [1] : ranksList.filter((r) => r > 1)) {
      for (const link of mode === 'single' ? [links[0]!] : links) {
        // Every mode keeps a copy of the best epoch's weights under held-out validation (a sharded rank, of its
        // slices); a sharded rank runs one thread (train --distributed refuses --workers above 1).
        const best = !!input.bestWeights;
        const { workers, threads } = mode === 'single' ? alone : perRank;
        const W = mode === 'sharded' ? 1 : workers;
        // The re-ranker's solver runs on the machine's cores in one process, on the rank's one thread when sharded.
        const memoryPerRank = rankMemory(config, shape, { ranks: R, sharded: mode === 'sharded', workers: W, batch, bestWeights: best, active: w.active, rerankThreads: mode === 'sharded' ? 1 : machine.cores });
        // Ranks on one machine share its cores and memory (one process alone has them all).
        const together = Math.min(R, machine.ranksPerMachine);
        const cores = Math.max(1, Math.floor(machine.cores / together));
        const step = stepCost(config, shape, w, cal, { mode, ranks: R, workers: W, batch, linkGbps: link, latency: machine.latency, cores, ranksPerMachine: together, ...(mode === 'single' ? { threads } : {}) });
        const fits = memoryPerRank.totalBytes * together <= limit;
        const samplesPerSec = batch / step.total;
        const Rs = mode === 'sharded' ? R : 1;
        let resident = memoryPerRank.totalBytes;
        for (const part of memoryPerRank.parts) {
          if (part.name === 'output layer hash tables' && !w.tablesQueried) resident -= part.bytes;
          if (part.name === 'output layer wide part') resident -= (best ? 16 : mode === 'sharded' ? 20 : 12) * (Math.ceil(w.widePairsTotal / Rs) - Math.ceil(w.widePairsExpected / Rs));
          if (part.name.startsWith('worker scratch')) {
            let act = 0;
            config.layers.forEach((l, k) => (act += k === config.layers.length - 1 && l.sampling ? w.active / Rs : l.size));
            resident -= part.bytes - Math.max(1, W) * 12 * batch * act;
          }
        }
        const c: PlanCandidate = {
          mode, ranks: R, workers: W, threads: mode === 'single' ? threads : 1, batch, linkGbps: link, memoryPerRank, fits, peakRssBytes: cal.baseRssBytes + resident + poolRss(mode, W, cal),
          step, samplesPerSec, epochSeconds: shape.points / samplesPerSec,
        };
        if (mode === 'replicated' && wide) c.excluded = 'replicated ranks cannot train a wide part (give a --config without one, or shard the labels)';
        else if (!fits) c.excluded = `needs ${formatBytes(memoryPerRank.totalBytes * together)} per machine, more than 90% of ${formatBytes(machine.memoryBytes)}`;
        candidates.push(c);
      }
    }
  }
  if (candidates.length === 0) throw new Error('No configuration to plan: give ranks > 1 for the replicated and sharded modes, or the single mode');
  const ok = candidates.filter((c) => !c.excluded && c.linkGbps === links[0]);
  let chosen: PlanCandidate, reason: string;
  if (ok.length) {
    // The fewest ranks within 5% of the fastest (more ranks cost machines for nothing).
    const best = ok.reduce((a, c) => (c.samplesPerSec > a.samplesPerSec ? c : a));
    chosen = ok.filter((c) => c.samplesPerSec >= best.samplesPerSec / 1.05).reduce((a, c) => (c.ranks < a.ranks || (c.ranks === a.ranks && c.samplesPerSec > a.samplesPerSec) ? c : a));
    const single = ok.find((c) => c.mode === 'single');
    const what = chosen.mode === 'single' ? 'one process' : `${chosen.ranks} ${chosen.mode} ranks`;
    if (chosen.mode === 'single' && ok.length === 1) reason = 'it fits one machine and no other configuration was considered or fits';
    else if (chosen.mode === 'single') reason = 'one process is within 5% of the fastest configuration that fits (more ranks cost exchange and repeated updates)';
    else {
      const gain = single ? ` (${(chosen.samplesPerSec / single.samplesPerSec).toFixed(2)}x one process)` : single === undefined && candidates.some((c) => c.mode === 'single') ? ' (one process does not fit)' : '';
      reason = chosen === best
        ? `${what} are the fastest configuration that fits${gain}`
        : `${what} are within 5% of the fastest configuration that fits (${best.ranks} ${best.mode} ranks) with fewer ranks${gain}`;
    }
  } else {
    chosen = candidates.reduce((a, c) => (c.memoryPerRank.totalBytes < a.memoryPerRank.totalBytes ? c : a));
    reason = `nothing considered fits: the smallest needs ${formatBytes(chosen.memoryPerRank.totalBytes)} per rank (${chosen.excluded}); add ranks (sharded) or memory`;
  }
  return {
    config, workload: w, machine, calibration: cal, candidates, chosen, reason,
    shape: { points: shape.points, features: shape.features, labels: shape.labels, avgNnz: shape.nnz / shape.points, avgLabels: shape.labelNnz / shape.points },
  };
}

/**
 * Resident memory of the worker threads' pool: one process (and a replicated rank) runs W workers, each its own
 * V8 isolate and Node environment (Calibration.workerRss); a label-sharded rank trains and predicts on its main
 * thread and native threads, and starts none.
 */
export function poolRss(mode: PlanMode, workers: number, cal: Calibration): number {
  if (mode === 'sharded' || !cal.workerRss || workers < 1) return 0;
  return cal.workerRss.first + (workers - 1) * cal.workerRss.next;
}

/** The network as one line: `135909 -> 128 -> 670091 (sampled dwta K=6 L=50, wide)`. */
export function networkLine(c: ResolvedNetworkConfig): string {
  return [c.inputDim, ...c.layers.map((l) => `${l.size}${l.sampling ? ` (sampled ${l.sampling.hash} K=${l.sampling.K} L=${l.sampling.L}${l.wide ? ', wide' : ''})` : l.wide ? ' (wide)' : ''}`)].join(' -> ');
}

/** One line: what would run and what it costs. `train` prints it at start. */
export function formatPlanLine(p: TrainingPlan): string {
  const c = p.chosen;
  const who = c.mode === 'single' ? `1 process x ${c.workers} worker${c.workers > 1 ? 's' : ''}${c.threads > 1 ? ` x ${c.threads} threads per batch` : ''}` : `${c.ranks} ${c.mode} ranks x ${c.workers} worker${c.workers > 1 ? 's' : ''} at ${c.linkGbps} Gb/s`;
  const speed = `${Math.round(c.samplesPerSec).toLocaleString('en-US')} samples/s, ${formatSeconds(c.epochSeconds)} per epoch`;
  return `plan: ${who}, batch ${c.batch}: ${formatBytes(c.memoryPerRank.totalBytes)} per ${c.mode === 'single' ? 'process' : 'rank'} (peak RSS ~${formatBytes(c.peakRssBytes)}), ~${speed}`;
}

export function formatSeconds(s: number): string {
  if (s < 120) return `${s.toFixed(s < 10 ? 1 : 0)} s`;
  if (s < 7200) return `${(s / 60).toFixed(1)} min`;
  return `${(s / 3600).toFixed(1)} h`;
}

/** The memory parts as text: `output layer weights+Adam 1.03 GB, ...`. */
export function formatParts(parts: MemoryPart[]): string {
  return parts.map((p) => `${p.name} ${formatBytes(p.bytes)}`).join(', ');
}

// ---------------------------------------------------------------------------------------------------------
// Probe data (in memory, seeded).

/** A seeded synthetic dataset with a shape's mean counts, on SharedArrayBuffers (for the probe). */
export function probeDataset(o: { points: number; features: number; labels: number; avgNnz: number; avgLabels: number; seed: number }): SparseDataset {
  const rng = new Xoshiro128(BigInt(o.seed));
  const fCdf = zipfCdf(o.features, 1, 20), lCdf = zipfCdf(o.labels, 1, 50);
  const offsets = sharedUint32(o.points + 1), labelOffsets = sharedUint32(o.points + 1);
  const idx: number[] = [], lab: number[] = [];
  const draw = (mean: number) => Math.max(1, Math.floor(mean) + (rng.nextFloat() < mean - Math.floor(mean) ? 1 : 0));
  for (let i = 0; i < o.points; i++) {
    const fs = new Set<number>(), ls = new Set<number>();
    const nf = Math.min(o.features, draw(o.avgNnz)), nl = Math.min(o.labels, draw(o.avgLabels));
    for (let t = 0; fs.size < nf && t < 4 * nf; t++) fs.add(sampleCdf(fCdf, rng.nextFloat()));
    for (let t = 0; ls.size < nl && t < 4 * nl; t++) ls.add(sampleCdf(lCdf, rng.nextFloat()));
    idx.push(...[...fs].sort((a, b) => a - b));
    lab.push(...[...ls].sort((a, b) => a - b));
    offsets[i + 1] = idx.length;
    labelOffsets[i + 1] = lab.length;
  }
  const indices = sharedUint32(idx.length), values = sharedFloat32(idx.length), labelIndices = sharedUint32(lab.length);
  indices.set(idx);
  labelIndices.set(lab);
  for (let i = 0; i < o.points; i++) {
    const n = offsets[i + 1]! - offsets[i]!;
    for (let q = offsets[i]!; q < offsets[i + 1]!; q++) values[q] = 1 / Math.sqrt(n);
  }
  return { points: o.points, features: o.features, labels: o.labels, offsets, indices, values, labelOffsets, labelIndices };
}

/**
 * The plan line of a run about to start (what `train` prints): the run's own mode, ranks, workers and batch,
 * its memory per rank, and, with a calibration of this machine (`sublinear plan` caches one), its predicted
 * samples/s and epoch time; without one, says how to get it.
 */
export function runPlanLine(
  config: ResolvedNetworkConfig, data: SparseDataset, o: { workers: number; threads?: number; batch: number; bestWeights: boolean; ranks: number; mode: PlanMode; cores?: number }, cal: Calibration | null,
): string {
  const shape = datasetShape(data);
  if (!cal) {
    const w = { ...workload(config, { ...shape, head: undefined }, o.batch) };
    const mem = rankMemory(config, shape, { ranks: o.ranks, sharded: o.mode === 'sharded', workers: o.workers, batch: o.batch, bestWeights: o.bestWeights, active: w.active });
    const who = o.mode === 'single' ? `1 process x ${o.workers} worker${o.workers > 1 ? 's' : ''}` : `${o.ranks} ${o.mode} ranks x ${o.workers} worker${o.workers > 1 ? 's' : ''}`;
    return `plan: ${who}, batch ${o.batch}: ${formatBytes(mem.totalBytes)} per ${o.mode === 'single' ? 'process' : 'rank'}; speed not calibrated on this machine (sublinear plan measures it)`;
  }
  const p = planTraining({
    // The wide part estimated on 5,000 points: choosing its pairs on more would hold memory the run needs.
    shape, config, batch: o.batch, workers: o.workers, ...(o.threads !== undefined ? { threads: o.threads } : {}), ranks: [o.ranks], modes: [o.mode], bestWeights: o.bestWeights, widePoints: 5000,
    machine: { ...(o.cores !== undefined ? { cores: o.cores } : {}), ranksPerMachine: 1 },
  }, cal);
  return formatPlanLine(p);
}
