// The public Network: a stack of fully connected layers over a sparse input, some of them LSH-sampled,
// whose weights, Adam state and hash tables live in SharedArrayBuffers so that worker threads train
// it in place (HOGWILD).
import type { SparseDataset } from '../../datasets/csr.js';
import { checkDataset } from './check-data.js';
import { resolveConfig, type NetworkConfig, type ResolvedNetworkConfig } from './config.js';
import type { NetSpec } from './native-types.js';
import { allocateNetwork, networkBytes } from './allocate.js';
import { createExecutor, defaultWorkers, type Executor } from '../train/executor.js';
import { fitLoop, type FitOptions, type FitStats } from '../train/fit.js';
import { RebuildSchedule } from '../train/schedule.js';
import { computeMetrics, inversePropensity, labelFrequencies, type Metrics } from '../train/metrics.js';
import { loadModel, saveModel } from './model-file.js';

/** Options of `Network.predict`. */
export interface PredictOptions {
  /** Labels returned per point. Default 5. */
  k?: number;
  /**
   * 'exact' scores every output neuron (slower, exact top-k); 'sampled' scores only the LSH candidates
   * of sampled output layers (faster, approximate). Default 'exact'.
   */
  mode?: 'exact' | 'sampled';
  /** Worker threads. Default: the machine's cores. */
  workers?: number;
  /** Rows per task. Default 256. */
  chunk?: number;
}

/** Options of `Network.evaluate`. */
export interface EvaluateOptions extends Omit<PredictOptions, 'k'> {
  /** Cut-offs for P@k, nDCG@k and PSP@k. Default [1, 3, 5]. */
  k?: number[];
  /** Propensity model parameter A. Default 0.55 (use 0.6 for Amazon datasets). */
  propensityA?: number;
  /** Propensity model parameter B. Default 1.5 (use 2.6 for Amazon datasets). */
  propensityB?: number;
}

export interface Predictions {
  /** Points predicted. */
  points: number;
  k: number;
  /** (points, k) label ids in descending score order; 0xFFFFFFFF where fewer than k labels were scored. */
  labels: Uint32Array;
  /** (points, k) softmax probabilities over the scored neurons. */
  scores: Float32Array;
}

/**
 * A SLIDE network.
 *
 * @example
 * ```ts
 * import { Network, readXC } from 'sublinear';
 * const train = await readXC('train.txt');
 * const net = new Network({
 *   inputDim: train.features,
 *   layers: [
 *     { size: 128, activation: 'relu' },
 *     { size: train.labels, activation: 'softmax', sampling: { hash: 'dwta', K: 6, L: 50 } },
 *   ],
 * });
 * await net.fit(train, { epochs: 5, batchSize: 128, onProgress: console.log });
 * const metrics = await net.evaluate(await readXC('test.txt'), { k: [1, 3, 5] });
 * await net.save('model.sl');
 * ```
 */
export class Network {
  readonly config: ResolvedNetworkConfig;
  /** Shared state handed to the kernels (weights, Adam moments, hash tables). */
  readonly spec: NetSpec;
  /** Rebuild schedule of the sampled layers (null when no layer is sampled). */
  schedule: RebuildSchedule | null;
  /** Mini-batches trained over this network's life. */
  batchesDone = 0;
  /** Rebuild rounds done; seeds each round's bucket insertion order. */
  rebuildRound = 0;
  /** Training label frequencies (for propensity-scored metrics), recorded by fit(). */
  labelFreq: Uint32Array | null = null;
  trainPoints = 0;
  private tablesFresh = false;

  constructor(config: NetworkConfig) {
    this.config = resolveConfig(config);
    this.spec = allocateNetwork(this.config);
    this.schedule = this.config.layers.some((l) => l.sampling) ? new RebuildSchedule() : null;
  }

  get seed(): number {
    return this.config.seed;
  }

  /** Bytes of shared state (weights, Adam moments, step counters, hash tables). */
  memoryBytes(): number {
    return networkBytes(this.spec);
  }

  /** Trains on `data` (CSR rows with labels). Resolves with throughput and timing statistics. */
  async fit(data: SparseDataset, opts: FitOptions = {}): Promise<FitStats> {
    checkDataset(data, this.config, 'training data');
    if (opts.rebuild && this.schedule) this.schedule = new RebuildSchedule(opts.rebuild);
    const exec = createExecutor(opts.workers ?? defaultWorkers());
    try {
      let rebuildSeconds = 0;
      if (!this.tablesFresh) rebuildSeconds += await this.rebuildTables(exec);
      this.labelFreq = labelFrequencies(data.labelIndices, this.config.layers.at(-1)!.size);
      this.trainPoints = data.points;
      const stats = await fitLoop(this, data, exec, opts);
      // Index the final weights, so sampled inference (and a saved model) sees the trained network.
      if (this.schedule && stats.batches > 0) rebuildSeconds += await this.rebuildTables(exec);
      stats.rebuildSeconds += rebuildSeconds;
      stats.rebuilds = this.rebuildRound;
      return stats;
    } finally {
      await exec.close();
    }
  }

  /** Rebuilds every sampled layer's hash tables from its current weights (tables split across workers). */
  async rebuildTables(exec: Executor, _round?: number): Promise<number> {
    const start = performance.now();
    this.rebuildRound++;
    const jobs: Promise<number>[] = [];
    this.spec.layers.forEach((layer, li) => {
      if (!layer.sampling) return;
      const L = layer.sampling.tables.L;
      const parts = Math.min(exec.parallelism, L);
      for (let p = 0; p < parts; p++) {
        const t0 = Math.floor((p * L) / parts), t1 = Math.floor(((p + 1) * L) / parts);
        jobs.push(exec.rehash({ net: this.spec, layer: li, t0, t1, seed: (this.seed * 7919 + li * 104729 + this.rebuildRound) >>> 0 }));
      }
    });
    await Promise.all(jobs);
    this.tablesFresh = true;
    return (performance.now() - start) / 1000;
  }

  /** Top-k labels for every row of `data`. */
  async predict(data: SparseDataset, opts: PredictOptions = {}): Promise<Predictions> {
    checkDataset(data, this.config, 'prediction input', false);
    const k = opts.k ?? 5;
    if (!Number.isInteger(k) || k <= 0) throw new Error(`Expected positive integer for k but received ${JSON.stringify(opts.k)}`);
    const mode = opts.mode ?? 'exact';
    if (mode !== 'exact' && mode !== 'sampled') throw new Error(`Expected 'exact' or 'sampled' for mode but received ${JSON.stringify(opts.mode)}`);
    const chunk = opts.chunk ?? 256;
    const exec = createExecutor(opts.workers ?? defaultWorkers());
    try {
      if (mode === 'sampled' && this.schedule && !this.tablesFresh) await this.rebuildTables(exec);
      const labels = new Uint32Array(data.points * k);
      const scores = new Float32Array(data.points * k);
      const jobs: Promise<void>[] = [];
      for (let start = 0; start < data.points; start += chunk) {
        const end = Math.min(start + chunk, data.points);
        const pointIds = new Uint32Array(end - start);
        for (let i = 0; i < pointIds.length; i++) pointIds[i] = start + i;
        jobs.push(
          exec.predict({ net: this.spec, data, pointIds, k, sampled: mode === 'sampled' }).then((r) => {
            labels.set(r.idx, start * k);
            scores.set(r.val, start * k);
          }),
        );
      }
      await Promise.all(jobs);
      return { points: data.points, k, labels, scores };
    } finally {
      await exec.close();
    }
  }

  /** P@k, nDCG@k and PSP@k over the whole of `data`. */
  async evaluate(data: SparseDataset, opts: EvaluateOptions = {}): Promise<Metrics> {
    const ks = opts.k ?? [1, 3, 5];
    const kMax = Math.max(...ks);
    const pred = await this.predict(data, { ...opts, k: kMax });
    const numLabels = this.config.layers.at(-1)!.size;
    const freq = this.labelFreq ?? labelFrequencies(new Uint32Array(0), numLabels);
    const invP = inversePropensity(freq, Math.max(this.trainPoints, 1), opts.propensityA ?? 0.55, opts.propensityB ?? 1.5);
    return computeMetrics({ topIdx: pred.labels, kMax, labelOffsets: data.labelOffsets, labelIndices: data.labelIndices, invPropensity: invP, ks });
  }

  /** Writes the model (config, weights, training label frequencies) atomically with a checksum. */
  async save(path: string): Promise<void> {
    await saveModel(path, this);
  }

  /** Reads a model written by `save`. Hash tables are rebuilt from the weights on first sampled use. */
  static async load(path: string): Promise<Network> {
    return loadModel(path, (config) => new Network(config));
  }

  /** Marks tables stale (after weights were replaced from a file). */
  invalidateTables(): void {
    this.tablesFresh = false;
  }
}
