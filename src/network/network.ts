// The Network: a stack of fully connected layers over a sparse input, some of them LSH-sampled, whose
// weights, Adam state and hash tables live in SharedArrayBuffers so that worker threads train it in place
// (HOGWILD). This file is the model: it predicts, evaluates, grows, saves and loads, and keeps its hash tables
// and cluster index fresh. Training it is src/train's (fit-network.ts: fit() and resume()).
import { sharedFloat32, sharedUint32, toShared, type SparseDataset } from '../datasets/csr.js';
import { native, nativeThreads } from '../native/addon.js';
import type { TextVectorizer } from '../text/vectorizer.js';
import { allocateNetwork, allocateTablesOf, emptyTables, hasTables, networkBytes } from './allocate.js';
import { calibrate, calibrationMetrics, type CalibrationMetrics, type ProbabilityCalibration } from './calibration.js';
import { checkDataset } from './check-data.js';
import { resolveConfig, storedConfig, tablesQueriedInTraining, type NetworkConfig, type ResolvedNetworkConfig } from './config.js';
import { CLUSTER_INDEX_ITERS, CLUSTER_INDEX_SAMPLE, clusterCount, clusterHeadAndTail, clusterIndexSeed } from './cluster-split.js';
import { createExecutor, defaultWorkers, type Executor } from './executor.js';
import type { LoadLimits } from './file-layout.js';
import { applyInputScale } from './input-scale.js';
import { inputMapProblem, networkInput, type InputMap } from './input-map.js';
import { explainLabels, type LabelExplanation } from './explain.js';
import { computeMetrics, inversePropensity, labelFrequencies, type Metrics } from './metrics.js';
import { loadModel, saveModel, type TrainingSummary } from './model-file.js';
import type { LayerState, NetSpec } from '../native/network-types.js';
import { rerankCombine, rerankScores, type RerankState } from './rerank.js';
import { RebuildSchedule } from './schedule.js';
import { glorotRows, hasTrainingArrays } from './state.js';
import { allocateWide } from './wide.js';


/** How predict() scores the output layer (PredictOptions.mode). */
export type PredictMode = 'exact' | 'sampled' | 'auto';

/** Options of `Network.predict`. */
export interface PredictOptions {
  /** Labels returned per point. Default 5. */
  k?: number;
  /**
   * 'exact' scores every output neuron (slower, exact top-k); 'sampled' scores only the candidates of a
   * sampled output layer's cluster index and wide part (faster, approximate); 'auto' is 'sampled' for a
   * sampled output layer with a wide part (the defaults from 8,192 labels, whose held-out selection already
   * scores that way: test P@1, P@3, P@5 within 0.1 points of exact on a real 11,604-label text set in a
   * third of the time) and 'exact' otherwise (see Network.inferenceMode). Default 'auto'.
   */
  mode?: PredictMode;
  /** Worker threads. Default: the machine's cores. */
  workers?: number;
  /** Rows per task. Default 256. */
  chunk?: number;
  /**
   * 'sampled' mode: output neurons scored per point. The output layer's cluster index is probed from the
   * best centre down until this many neurons are collected (a cluster is taken whole, so a few more may
   * be scored; `outputsScoredPerPoint` says how many were). Default: 0.5% of the outputs, at least 256 (defaultCandidates).
   */
  candidates?: number;
  /** Called as chunks finish with (points predicted so far, points). Default: none. */
  onProgress?: (done: number, total: number) => void;
  /**
   * Selection by probability (a network with a calibration only: `Network.calibration`): each point's labels
   * are those of its top `shortlist` candidates by score whose calibrated probability is at least this,
   * ordered by probability, at most `k` of them (`k` then defaults to the shortlist); the rest of a row is
   * 0xFFFFFFFF. 'model': the threshold chosen in training (best held-out micro-F1). Default: none (top-k by score).
   */
  threshold?: number | 'model';
  /**
   * Runs the chunks on this executor, which the call leaves open, instead of a pool of `workers` threads
   * started and closed by the call (`workers` is then ignored). For callers that predict often, e.g. the
   * prediction server (src/serve/). Default: none.
   */
  executor?: Executor;
  /**
   * Called when the call cannot do what it was asked: mode 'sampled' on a network whose output layer is
   * dense scores every output (see `sampledModeNote`). Default: the message on stderr, `sublinear: warning: ...`.
   */
  onWarning?: (message: string) => void;
}

/**
 * Why mode 'sampled' is no faster than 'exact' on a network of this configuration, or undefined: a dense
 * (not LSH-sampled) output layer has no candidates to take, so every output is scored (sampled hidden
 * layers, if any, are still sampled).
 */
export function sampledModeNote(config: { layers: readonly { sampling?: unknown }[] }): string | undefined {
  if (config.layers.at(-1)!.sampling) return undefined;
  const hidden = config.layers.slice(0, -1).some((l) => l.sampling);
  return `the output layer is dense (not LSH-sampled), so every output is scored, as in exact mode${hidden ? ' (the sampled hidden layers are sampled)' : ''}`;
}

/**
 * Options of `Network.load`: limits checked before the file's network is allocated (every file is first
 * checked against its own configuration: see src/network/file-layout.ts).
 */
export type LoadOptions = LoadLimits;

/**
 * Default output neurons scored per point in sampled mode (PredictOptions.candidates): 0.5% of the outputs,
 * at least 256. With a wide part (the defaults at these sizes) that matched exact P@1 and P@5 at 670k and
 * 200k labels (11-14x faster than exact); on a 22,868-label set 256 lost 0.06 points of P@1 and 115 (0.5%)
 * lost 0.5, hence the floor.
 */
export function defaultCandidates(outputs: number): number {
  return Math.min(outputs, Math.max(256, Math.ceil(0.005 * outputs)));
}


/**
 * How Network.load reads a training checkpoint file (its network, for evaluation): installed by
 * src/train/checkpoint.ts when that module loads (the package entry and the CLI load it), since a
 * checkpoint holds training state that this layer does not know. Until then a checkpoint is refused as
 * not a model file.
 */
let checkpointReader: ((path: string, limits: LoadLimits) => Promise<Network>) | null = null;

/** The maxMemory each network loaded by Network.load was loaded under (see loadMemoryLimit). */
const loadedUnder = new WeakMap<Network, number | undefined>();

/**
 * The maxMemory a model file was loaded under (Network.load), undefined for other networks: the load checked
 * the inference plan against it, and a fit() of the loaded network checks its training plan against it too.
 */
export function loadMemoryLimit(net: Network): number | undefined {
  return loadedUnder.get(net);
}

/** Installs the reader of checkpoint files that Network.load uses (src/train/checkpoint.ts). */
export function setCheckpointReader(reader: (path: string, limits: LoadLimits) => Promise<Network>): void {
  checkpointReader = reader;
}

/** Options of `new Network`. */
export interface NetworkOptions {
  /**
   * Allocate an inference-sized state: weights, biases and hash functions, without Adam moments, step
   * counters, hash tables or the wide part's Adagrad sums (what prediction does not read). The first fit()
   * (or grow()) allocates them, zero as a new network's; a sampled prediction allocates the tables it
   * queries (those of sampled hidden layers). `Network.load` builds its networks this way. Default false.
   */
  inference?: boolean;
  /**
   * false: the weights start at zero instead of their seeded initialisation, for a caller that then sets
   * every one of them (Network.load reads them from the file: drawing 60M weights first cost about 1.5 s).
   * Default true.
   */
  initialise?: boolean;
  /**
   * The network's state, already allocated for this configuration, instead of a new one (Network.grow with
   * `shareHidden` builds one that shares the source's arrays). Default: allocated.
   */
  state?: NetSpec;
  /**
   * An input feature map (src/network/input-map.ts: inputMapOf) over the configuration's `inputDim` features:
   * layer 0 then holds rows only for `inputMap.ids`, each initialised as the whole layer's draw would have
   * initialised that feature's row (Glorot over all `inputDim` features), so that the network trains as the
   * unmapped one does on data holding only those features. config.inputDim becomes the number of rows;
   * Network.inputMap keeps the map. Default: none (a row per feature).
   */
  inputMap?: InputMap;
}

/** Options of `Network.save`. */
export interface SaveOptions {
  /** How the model was trained, stored in the file and shown by `sublinear info`. Default none. */
  training?: TrainingSummary;
}


/** Options of `Network.evaluate`. */
export interface EvaluateOptions extends Omit<PredictOptions, 'k' | 'threshold'> {
  /**
   * A calibrated network (`Network.calibration`) also reports `calibration` (CalibrationMetrics): ECE, and
   * micro/macro-F1 of selection by this threshold against every fixed top-k cut. Default 'model' (the
   * threshold chosen in training).
   */
  threshold?: number | 'model';
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
  /**
   * (points, k) calibrated probabilities P(label is relevant | point) of the labels (0 where none), for a
   * network with a calibration (`Network.calibration`); absent otherwise. A label past a point's top
   * `shortlist` candidates by score gets the same map, outside the range it was fitted on.
   */
  probabilities?: Float32Array;
  /** Mean number of output neurons scored per point (every output when exact). */
  outputsScoredPerPoint: number;
}

/**
 * A SLIDE network.
 *
 * @example
 * ```ts
 * import { Network, readXC, train } from 'sublinear';
 * await train({ train: 'train.txt', save: 'model.sl' });   // or train({ train, networkConfig: {...} })
 * const net = await Network.load('model.sl');
 * const test = await readXC('test.txt');
 * const top = await net.predict(test, { k: 5 });           // labels and scores, (points, k)
 * const metrics = await net.evaluate(test, { k: [1, 3, 5] });
 * await net.grow(net.config.layers.at(-1)!.size + 10).save('grown.sl');
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
  /**
   * The vectorizer of a network trained on raw text (it turns new text into this network's input); saved
   * and loaded with the model. Default undefined (numeric input).
   */
  textVectorizer: TextVectorizer | undefined = undefined;
  /** Label names, index = label id (a network trained on text); saved and loaded with the model. Default undefined. */
  labelNames: readonly string[] | undefined = undefined;
  /**
   * The output layer's trained re-ranker (RerankConfig), applied by predict() when its weight is positive;
   * saved and loaded with the model. null: none (not configured, not trained yet, or not helping on the
   * held-out points). fit() drops it when training starts and trains a new one at the end.
   */
  rerank: RerankState | null = null;
  /**
   * Calibrated per-label probabilities (src/network/calibration.ts): fitted by training on its held-out
   * points (FitOptions.calibration), saved and loaded with the model; predict() then returns `probabilities`
   * and can select by threshold. null: none (not trained with validation, or a file written before them).
   */
  calibration: ProbabilityCalibration | null = null;
  /** The hash tables index the current weights (training sets it false when it moves them: src/train). */
  tablesFresh = false;
  /** The output layer's cluster index (sampled inference) matches the current weights. */
  indexFresh = false;
  /**
   * Per-feature divisors applied to every input (fit, predict, evaluate) when the training data was
   * raw-valued (src/network/input-scale.ts); decided by the first fit() and kept in model files and
   * checkpoints. null: inputs are used as they are.
   */
  inputScale: Float32Array | null = null;
  /**
   * The count compression applied to every input (src/network/input-scale.ts: logCompress) when the
   * training data was term counts; decided by the first fit() and kept in model files and checkpoints.
   */
  inputLog = false;
  /**
   * The input feature map (src/network/input-map.ts): with it, layer 0 (config.inputDim rows) holds rows
   * only for the features the training data held, row i standing for feature `inputMap.ids[i]` of the
   * `inputMap.features` the data declares; predict(), evaluate(), explain(), fit() and online learning take
   * data in the original ids and ignore a feature without a row. Set by training (`train`) when the training
   * data leaves features unseen; kept in model files (version 3) and checkpoints. null: row = feature id.
   */
  inputMap: InputMap | null = null;
  /** Seconds spent building cluster indexes (sampled inference), over this network's life. */
  clusterIndexSeconds = 0;
  /** Last code-drift sketch taken by the 'change' rebuild policy (fraction of codes changed). */
  lastCodeChange = 0;

  /** Set only while blankNetwork() constructs: the new network's state is copied in, so no Glorot draw. */
  private static copying = false;

  /**
   * A network of `config` whose weights start at zero instead of the Glorot draw, for a copy whose whole state
   * is written next (the selection copies of src/train/fit-network.ts): 5 copies of a 26,000 x 1,024 first
   * layer spent about half a second drawing weights the copy overwrote. Not part of the public API.
   */
  static blank(config: NetworkConfig): Network {
    Network.copying = true;
    try {
      return new Network(config);
    } finally {
      Network.copying = false;
    }
  }

  constructor(config: NetworkConfig, opts: NetworkOptions = {}) {
    const map = opts.inputMap;
    if (map) {
      const declared = resolveConfig(config).inputDim;
      const problem = inputMapProblem(map.ids, map.features, map.ids.length) ?? (map.features !== declared ? `the map is over ${map.features} features but inputDim is ${declared}` : null);
      if (problem) throw new Error(`NetworkOptions.inputMap: ${problem}`);
    }
    this.config = resolveConfig(map ? { ...config, inputDim: map.ids.length } : config);
    const init = (opts.initialise ?? true) && !Network.copying;
    this.spec = opts.state ?? allocateNetwork(this.config, opts.inference ?? false, init);
    if (map) {
      this.inputMap = map;
      const l0 = this.spec.layers[0]!;
      if (init && !opts.state) glorotRows(l0.weights, this.config.seed, 0, map.ids, map.features, l0.outDim);
    }
    this.schedule = this.config.layers.some((l) => l.sampling) ? new RebuildSchedule() : null;
  }

  /** The input dimension data is given in: the declared features of a mapped network (inputMap), config.inputDim otherwise. */
  get inputFeatures(): number {
    return this.inputMap?.features ?? this.config.inputDim;
  }

  get seed(): number {
    return this.config.seed;
  }

  /** Adagrad rate of the output layer's wide part (undefined without one): see FitTarget.wideLr. */
  get wideLr(): number | undefined {
    return this.config.layers.at(-1)!.wide?.lr;
  }

  /** Bytes of shared state (weights, Adam moments, step counters, hash tables: those allocated so far). */
  memoryBytes(): number {
    return networkBytes(this.spec);
  }

  /** Whether the network holds its training state (false for an inference-sized one until it trains: NetworkOptions.inference). */
  get hasTrainingState(): boolean {
    return hasTrainingArrays(this.spec.layers[0]!);
  }

  /** See FitTarget.tablesInTraining and tablesQueriedInTraining. */
  get tablesInTraining(): boolean {
    return tablesQueriedInTraining(this.config);
  }

  /** See FitTarget.scheduledRebuild. */
  async scheduledRebuild(exec: Executor): Promise<{ seconds: number; rebuilt: boolean }> {
    const start = performance.now();
    if (this.schedule?.policy === 'change') {
      this.lastCodeChange = this.codeChangeFraction(this.schedule.sample);
      if (this.lastCodeChange < this.schedule.threshold) return { seconds: (performance.now() - start) / 1000, rebuilt: false };
    }
    await this.rebuildTables(exec);
    return { seconds: (performance.now() - start) / 1000, rebuilt: true };
  }

  /**
   * A cheap sketch of how stale the tables are: rehashes `sample` evenly spaced neurons of each sampled
   * layer from their current weights and returns the fraction of (neuron, table) codes that differ from
   * the codes the tables hold. 0 right after a rebuild.
   */
  codeChangeFraction(sample = 1024): number {
    let changed = 0, total = 0;
    this.spec.layers.forEach((layer) => {
      const s = layer.sampling;
      if (!s) return;
      const N = layer.outDim, D = layer.inDim, L = s.tables.L;
      const n = Math.min(sample, N);
      const vectors = new Float32Array(n * D);
      const ids = new Uint32Array(n);
      for (let i = 0; i < n; i++) {
        ids[i] = Math.floor((i * N) / n);
        vectors.set(layer.weights.subarray(ids[i]! * D, ids[i]! * D + D), i * D);
      }
      const keys = new Uint32Array(n * L);
      native().lshHashDense(s.hash, vectors, n, 0, L, keys);
      for (let i = 0; i < n; i++) {
        for (let t = 0; t < L; t++) if (keys[i * L + t] !== s.tables.keys[t * N + ids[i]!]) changed++;
      }
      total += n * L;
    });
    return total ? changed / total : 0;
  }

  /**
   * Rebuilds every sampled layer's hash tables from its current weights (tables split across workers),
   * allocating those of an inference-sized network first. `forPrediction`: an output layer whose tables are
   * not allocated keeps none (sampled prediction probes its cluster index); the tables then count as
   * stale for training.
   */
  async rebuildTables(exec: Executor, forPrediction = false): Promise<number> {
    const start = performance.now();
    this.rebuildRound++;
    const jobs: Promise<number>[] = [];
    const last = this.spec.layers.length - 1;
    let skipped = false;
    this.spec.layers.forEach((layer, li) => {
      if (!layer.sampling) return;
      if (!hasTables(layer.sampling.tables)) {
        if (forPrediction && li === last) {
          skipped = true;
          return;
        }
        layer.sampling.tables = allocateTablesOf(this.config, li);
      }
      const L = layer.sampling.tables.L;
      const parts = Math.min(exec.parallelism, L);
      for (let p = 0; p < parts; p++) {
        const t0 = Math.floor((p * L) / parts), t1 = Math.floor(((p + 1) * L) / parts);
        jobs.push(exec.rehash({ net: this.spec, layer: li, t0, t1, seed: (this.seed * 7919 + li * 104729 + this.rebuildRound) >>> 0 }));
      }
    });
    await Promise.all(jobs);
    this.tablesFresh = !skipped;
    return (performance.now() - start) / 1000;
  }

  /**
   * The mode a predict() with `mode` runs in ('auto' and undefined resolved: 'sampled' for a sampled output
   * layer with a wide part, else 'exact'). Throws on anything else than 'exact', 'sampled', 'auto'.
   */
  inferenceMode(mode: PredictMode | undefined): 'exact' | 'sampled' {
    if (mode === undefined || mode === 'auto') {
      const out = this.config.layers.at(-1)!;
      return out.sampling && out.wide ? 'sampled' : 'exact';
    }
    if (mode !== 'exact' && mode !== 'sampled') throw new Error(`Expected 'exact', 'sampled' or 'auto' for mode but received ${JSON.stringify(mode)}`);
    return mode;
  }

  /** Top-k labels for every row of `data`. */
  async predict(data: SparseDataset, opts: PredictOptions = {}): Promise<Predictions> {
    data = networkInput(this, data, 'prediction input', false);
    data = toShared(data);
    data = applyInputScale(data, this.inputScale, this.inputLog);
    const k = opts.k ?? 5;
    if (!Number.isInteger(k) || k <= 0) throw new Error(`Expected positive integer for k but received ${JSON.stringify(opts.k)}`);
    const mode = this.inferenceMode(opts.mode);
    // ('auto' never resolves to 'sampled' on a dense output layer: only a 'sampled' asked for is noted.)
    const note = mode === 'sampled' ? sampledModeNote(this.config) : undefined;
    if (note) (opts.onWarning ?? ((m: string) => void process.stderr.write(`sublinear: warning: mode 'sampled': ${m}\n`)))(note);
    const chunk = opts.chunk ?? 256;
    if (!Number.isInteger(chunk) || chunk <= 0) throw new Error(`Expected positive integer for chunk but received ${JSON.stringify(opts.chunk)}`);
    const outputs = this.config.layers.at(-1)!.size;
    const candidates = opts.candidates ?? defaultCandidates(outputs);
    if (!Number.isInteger(candidates) || candidates <= 0) throw new Error(`Expected positive integer for candidates but received ${JSON.stringify(opts.candidates)}`);
    const cal = this.calibration;
    let threshold: number | undefined;
    if (opts.threshold !== undefined) {
      if (!cal) throw new Error('Selection by threshold needs calibrated probabilities, and this network has none (training fits them on its held-out points: train with validation, the default)');
      threshold = opts.threshold === 'model' ? cal.threshold : opts.threshold;
      if (!(typeof threshold === 'number' && threshold > 0 && threshold <= 1)) throw new Error(`Expected a probability in (0, 1] or 'model' for threshold but received ${JSON.stringify(opts.threshold)}`);
    }
    const want = opts.k === undefined && threshold !== undefined ? Math.min(cal!.shortlist, this.config.layers.at(-1)!.size) : k;
    // Selection by threshold looks at every candidate of the shortlist.
    const kk = threshold !== undefined ? Math.min(Math.max(want, cal!.shortlist), this.config.layers.at(-1)!.size) : want;
    const run = (exec: Executor) => this.predictWith(exec, data, kk, mode, chunk, candidates, opts.onProgress);
    let pred: Predictions;
    if (opts.executor) {
      pred = await run(opts.executor);
    } else {
      const exec = createExecutor(opts.workers ?? defaultWorkers());
      try {
        pred = await run(exec);
      } finally {
        await exec.close();
      }
    }
    if (!cal) return pred;
    pred.probabilities = calibrate(cal, pred.labels, pred.scores, pred.k);
    return threshold === undefined ? pred : selectByThreshold(pred, want, cal.shortlist, threshold);
  }

  /**
   * predict() on a given executor (arguments already validated; data on shared memory and already divided
   * by the input scaling: training's held-out points are), without probabilities. With a re-ranker
   * (this.rerank), the network's top max(k, shortlist) of every point are re-scored and the k best kept.
   */
  async predictWith(
    exec: Executor, data: SparseDataset, k: number, mode: 'exact' | 'sampled', chunk = 256, candidates = 0,
    onProgress?: (done: number, total: number) => void,
  ): Promise<Predictions> {
    const rr = this.rerank;
    if (!rr || rr.weight === 0) return (await this.predictScaled(exec, data, k, mode, chunk, candidates, null, onProgress))[0]!;
    const S = Math.min(Math.max(k, rr.shortlist), this.config.layers.at(-1)!.size);
    const top = (await this.predictScaled(exec, data, S, mode, chunk, candidates, null, onProgress))[0]!;
    const s = rerankScores(rr, data, null, top.labels, S, this.config.inputDim, nativeThreads(defaultWorkers()));
    const labels = new Uint32Array(data.points * k), scores = new Float32Array(data.points * k);
    rerankCombine(top.labels, top.scores, s, S, rr.weight, k, labels, scores);
    return { points: data.points, k, labels, scores, outputsScoredPerPoint: top.outputsScoredPerPoint };
  }

  /**
   * predictWith under each of `scales` (the output layer's logits multiplied by the scale before its wide
   * part's scores are added: ValidationOptions.blend), one prediction per scale from one pass over the data
   * (sampled mode scores one candidate set for every scale). null: the weights as they are.
   */
  async predictScaled(
    exec: Executor, data: SparseDataset, k: number, mode: 'exact' | 'sampled', chunk: number, candidates: number,
    scales: readonly number[] | null, onProgress?: (done: number, total: number) => void,
  ): Promise<Predictions[]> {
    let net = this.spec;
    if (mode === 'sampled' && this.schedule) {
      const last = this.spec.layers.length - 1;
      // Sampled hidden layers query their hash tables; the output layer probes its cluster index.
      if (!this.tablesFresh && this.spec.layers.some((l, k) => l.sampling && k < last)) await this.rebuildTables(exec, true);
      const s = this.spec.layers[last]!.sampling;
      if (s) {
        if (!this.indexFresh) this.buildClusterIndex();
        // The budget travels with this call's copy of the spec (concurrent calls may differ).
        const layers = this.spec.layers.slice();
        layers[last] = { ...layers[last]!, sampling: { ...s, index: { ...s.index!, budget: candidates } } };
        net = { layers };
      }
    }
    let scored = 0;
    const S = scales?.length ?? 1;
    const labels = Array.from({ length: S }, () => new Uint32Array(data.points * k));
    const scores = Array.from({ length: S }, () => new Float32Array(data.points * k));
    const scaleArray = scales ? Float32Array.from(scales) : undefined;
    const jobs: Promise<void>[] = [];
    let done = 0;
    for (let start = 0; start < data.points; start += chunk) {
      const end = Math.min(start + chunk, data.points);
      const pointIds = new Uint32Array(end - start);
      for (let i = 0; i < pointIds.length; i++) pointIds[i] = start + i;
      jobs.push(
        exec.predict({ net, data, pointIds, k, sampled: mode === 'sampled', ...(scaleArray ? { scales: scaleArray } : {}) }).then((r) => {
          // r holds (points, S, k): point i's k best under scale si at (i S + si) k.
          if (S === 1) {
            labels[0]!.set(r.idx, start * k);
            scores[0]!.set(r.val, start * k);
          } else {
            for (let i = 0; i < end - start; i++) {
              for (let si = 0; si < S; si++) {
                const from = (i * S + si) * k;
                labels[si]!.set(r.idx.subarray(from, from + k), (start + i) * k);
                scores[si]!.set(r.val.subarray(from, from + k), (start + i) * k);
              }
            }
          }
          scored += r.scored;
          done += end - start;
          onProgress?.(done, data.points);
        }),
      );
    }
    await Promise.all(jobs);
    return labels.map((l, si) => ({ points: data.points, k, labels: l, scores: scores[si]!, outputsScoredPerPoint: scored / Math.max(1, data.points) }));
  }

  /**
   * P@k, nDCG@k and PSP@k over the whole of `data`, how many outputs were scored per point, and the
   * seconds the predictions took (`predictSeconds`, metrics excluded; the start of the worker threads included unless `executor` is given).
   */
  async evaluate(data: SparseDataset, opts: EvaluateOptions = {}): Promise<Metrics & { outputsScoredPerPoint: number; predictSeconds: number; calibration?: CalibrationMetrics }> {
    if (data?.points === 0) throw new Error('Cannot evaluate on 0 points: the evaluation data is empty');
    const ks = opts.k ?? [1, 3, 5];
    const kMax = Math.max(...ks);
    const cal = this.calibration;
    if (opts.threshold !== undefined && !cal) throw new Error('EvaluateOptions.threshold needs calibrated probabilities, and this network has none');
    const threshold = opts.threshold === undefined || opts.threshold === 'model' ? cal?.threshold : opts.threshold;
    if (threshold !== undefined && !(threshold > 0 && threshold <= 1)) throw new Error(`Expected a probability in (0, 1] or 'model' for threshold but received ${JSON.stringify(opts.threshold)}`);
    const numLabels = this.config.layers.at(-1)!.size;
    // A calibrated network's shortlist is predicted too, for its probability metrics.
    const kk = cal ? Math.max(kMax, Math.min(cal.shortlist, numLabels)) : kMax;
    const t0 = performance.now();
    const pred = await this.predict(data, { ...opts, threshold: undefined, k: kk });
    const predictSeconds = (performance.now() - t0) / 1000;
    const freq = this.labelFreq ?? labelFrequencies(new Uint32Array(0), numLabels);
    const invP = inversePropensity(freq, Math.max(this.trainPoints, 1), opts.propensityA ?? 0.55, opts.propensityB ?? 1.5);
    let top = pred.labels;
    if (kk > kMax) {
      top = new Uint32Array(data.points * kMax);
      for (let i = 0; i < data.points; i++) top.set(pred.labels.subarray(i * kk, i * kk + kMax), i * kMax);
    }
    const m = computeMetrics({ topIdx: top, kMax, labelOffsets: data.labelOffsets, labelIndices: data.labelIndices, invPropensity: invP, ks });
    return Object.assign(m, {
      outputsScoredPerPoint: pred.outputsScoredPerPoint, predictSeconds,
      ...(cal && kk >= cal.shortlist ? { calibration: calibrationMetrics(cal, pred.labels, pred.scores, kk, data, threshold) } : {}),
    });
  }

  /**
   * Why each point got its labels: the labels predict() returns for it (with the same options: k, mode,
   * threshold), each label's score split over the point's input features (src/network/explain.ts: exact
   * gradient x input of the network, plus the wide part's and the re-ranker's per-feature terms), the `top`
   * largest contributions kept. Default `top` 10.
   *
   * @example
   * ```ts
   * const { predictions, explanations } = await net.explain(points, { k: 3, top: 5 });
   * console.log(explanations[0][0].features); // [{ feature: 812, contribution: 2.31, ... }, ...]
   * ```
   */
  async explain(data: SparseDataset, opts: PredictOptions & { top?: number } = {}): Promise<{ predictions: Predictions; explanations: LabelExplanation[][] }> {
    const top = opts.top ?? 10;
    if (!Number.isInteger(top) || top < 0) throw new Error(`Expected non-negative integer for top but received ${JSON.stringify(opts.top)}`);
    const predictions = await this.predict(data, opts);
    const explanations: LabelExplanation[][] = [];
    for (let i = 0; i < data.points; i++) {
      const labels: number[] = [];
      for (let r = 0; r < predictions.k; r++) {
        const l = predictions.labels[i * predictions.k + r]!;
        if (l !== 0xffffffff) labels.push(l);
      }
      const lo = data.offsets[i]!, hi = data.offsets[i + 1]!;
      explanations.push(explainLabels(this, { indices: data.indices.subarray(lo, hi), values: data.values.subarray(lo, hi) }, labels, top));
    }
    return { predictions, explanations };
  }

  /**
   * A copy of this network with `labels` output neurons (at least the current number), for training on
   * data with labels it has never seen (warm start). Every layer's weights, biases, Adam moments and step
   * counters are copied, so old labels keep their rows bit for bit; the new rows are initialised as a new
   * network's are (seeded, zero bias, zero moments, zero steps). Hash tables, the logQ correction and the
   * cluster index are rebuilt for the new label count by the next fit() or sampled predict(). The text
   * vectorizer, input scaling and calibration (new labels: its pooled map) are kept, and the re-ranker
   * for the old labels (a new label has no classifier); `labelNames` (default: the current names) must
   * name every label when given. `shareHidden` (online learning, src/network/online.ts): the copy's hidden
   * layers are this network's arrays, not copies, and its new output rows are zero. This network is left
   * unchanged.
   *
   * @example
   * ```ts
   * const net = await Network.load('m.sl');
   * const grown = net.grow(net.config.layers.at(-1)!.size + 50);
   * await train({ train: moreData, init: grown, epochs: 3, save: 'm2.sl' });
   * ```
   */
  grow(labels: number, labelNames?: readonly string[], opts: { shareHidden?: boolean } = {}): Network {
    const last = this.config.layers.length - 1;
    const outputs = this.config.layers[last]!.size;
    if (!Number.isInteger(labels) || labels < outputs || labels > 0xffffffff) {
      throw new Error(`Expected integer >= ${outputs} (the current labels) for labels but received ${JSON.stringify(labels)}`);
    }
    if (labelNames !== undefined && labelNames.length > labels) {
      throw new Error(`Expected at most ${labels} label names but received ${labelNames.length}`);
    }
    const stored = storedConfig(this.config);
    // An inference-sized network (Network.load) has no optimizer state to copy: the new one's stays zero,
    // as the loaded model's would have been.
    const trained = this.hasTrainingState;
    const share = opts.shareHidden === true && last > 0;
    const grownConfig: NetworkConfig = { ...stored, layers: stored.layers.map((l, k) => (k === last ? { ...l, size: labels } : l)) };
    if (share && !trained) return this.growShared(grownConfig, labels, labelNames);
    const net = new Network(grownConfig, { initialise: !share });
    // shareHidden (online learning, which never changes them): the hidden layers are this network's own
    // arrays, not copies, and the new output rows are zero: growing costs a copy of the output layer only.
    if (share) for (let k = 0; k < last; k++) net.spec.layers[k] = this.spec.layers[k]!;
    this.spec.layers.forEach((from, k) => {
      const to = net.spec.layers[k]!;
      if (share && k < last) return;
      if (k < last || labels === outputs) {
        for (const key of ['weights', 'bias', 'mWeights', 'vWeights', 'mBias', 'vBias', 'rowSteps', 'biasSteps'] as const) {
          if (trained || key === 'weights' || key === 'bias') to[key].set(from[key]);
        }
        return;
      }
      if (from.inputMajor) {
        // (inDim, outDim): each input row keeps its first `outputs` entries.
        for (const key of ['weights', 'mWeights', 'vWeights'] as const) {
          if (!trained && key !== 'weights') continue;
          for (let i = 0; i < from.inDim; i++) to[key].set(from[key].subarray(i * outputs, (i + 1) * outputs), i * labels);
        }
        if (trained) to.rowSteps.set(from.rowSteps);
      } else {
        // (outDim, inDim): the old rows are a prefix.
        for (const key of ['weights', 'mWeights', 'vWeights', 'rowSteps'] as const) if (trained || key === 'weights') to[key].set(from[key]);
      }
      for (const key of ['bias', 'mBias', 'vBias', 'biasSteps'] as const) if (trained || key === 'bias') to[key].set(from[key]);
    });
    // The wide part's pairs name old labels only (ids stay valid): copied as they are. New labels learn
    // through the network; they get no pairs of their own (pairs are chosen by a network's first fit).
    const fromWide = this.spec.layers[last]!.wide;
    if (fromWide && net.spec.layers[last]!.wide) {
      const w = allocateWide(fromWide.inputDim, fromWide.labels.length);
      w.offsets.set(fromWide.offsets);
      w.labels.set(fromWide.labels);
      w.weights.set(fromWide.weights);
      if (fromWide.accum.length === fromWide.labels.length) w.accum.set(fromWide.accum);
      net.spec.layers[last]!.wide = w;
    }
    this.copyExtrasTo(net, labels, outputs, labelNames);
    return net;
  }

  /**
   * grow() with `shareHidden` of an inference-sized network (online learning): the hidden layers and the
   * wide part are this network's own; the output rows stay in their SharedArrayBuffers when those have room
   * (a longer view of the same memory: no copy), else move to new ones with room for a quarter more labels
   * (at least 1,024): growing by a few labels at a time costs a copy of the output layer now and then,
   * not at every growth (a copy of a 22,868 x 1,024 layer took 230 ms). The new rows are zero.
   */
  private growShared(config: NetworkConfig, labels: number, labelNames: readonly string[] | undefined): Network {
    const last = this.spec.layers.length - 1;
    const from = this.spec.layers[last]!;
    const D = from.inDim, outputs = from.outDim;
    const room = (a: Float32Array, n: number) => a.byteOffset === 0 && a.buffer.byteLength >= 4 * n;
    let weights: Float32Array, bias: Float32Array;
    if (room(from.weights, labels * D) && room(from.bias, labels)) {
      weights = new Float32Array(from.weights.buffer, 0, labels * D);
      bias = new Float32Array(from.bias.buffer, 0, labels);
    } else {
      const rows = Math.max(labels + 1024, Math.ceil(1.25 * labels));
      weights = new Float32Array(new SharedArrayBuffer(4 * rows * D), 0, labels * D);
      bias = new Float32Array(new SharedArrayBuffer(4 * rows), 0, labels);
      weights.set(from.weights);
      bias.set(from.bias);
    }
    // The rows past the old ones may hold a dropped growth's values: zero them.
    weights.fill(0, outputs * D);
    bias.fill(0, outputs);
    const resolved = resolveConfig(config);
    return this.adoptOutputLayer({
      ...from, outDim: labels, weights, bias,
      ...(from.sampling ? { sampling: { ...from.sampling, tables: emptyTables(resolved, last) } } : {}),
    }, labelNames);
  }

  /**
   * (Online learning on another thread: src/serve/learner-thread.ts.) A network whose hidden layers are this
   * one's and whose output layer is `layer`: this network's output layer as another thread grew and updated it
   * (Network.grow with `shareHidden` there), its arrays on the same SharedArrayBuffers. The extras are this
   * network's, as grow() carries them (new labels: frequency 0, no re-ranker classifier, the pooled
   * calibration); `indexFresh`: whether `layer`'s cluster index holds the current weights (Network.indexFresh
   * of the other thread's network). This network is unchanged.
   */
  adoptOutputLayer(layer: LayerState, labelNames?: readonly string[], indexFresh = false): Network {
    const last = this.spec.layers.length - 1;
    const outputs = this.spec.layers[last]!.outDim, labels = layer.outDim;
    if (layer.inDim !== this.spec.layers[last]!.inDim || labels < outputs) {
      throw new Error(`adoptOutputLayer: expected an output layer over ${this.spec.layers[last]!.inDim} inputs with at least ${outputs} labels`);
    }
    const stored = storedConfig(this.config);
    const config: NetworkConfig = { ...stored, layers: stored.layers.map((l, k) => (k === last ? { ...l, size: labels } : l)) };
    const net = new Network(config, { state: { layers: [...this.spec.layers.slice(0, last), layer] } });
    this.copyExtrasTo(net, labels, outputs, labelNames);
    net.indexFresh = indexFresh && layer.sampling?.index !== undefined;
    return net;
  }

  /**
   * What grow() carries besides the weights: counters, label frequencies (new labels 0), text vectorizer,
   * names, input scaling, re-ranker, calibration.
   */
  private copyExtrasTo(net: Network, labels: number, outputs: number, labelNames: readonly string[] | undefined): void {
    net.batchesDone = this.batchesDone;
    net.rebuildRound = this.rebuildRound;
    net.trainPoints = this.trainPoints;
    if (this.labelFreq) {
      net.labelFreq = new Uint32Array(labels);
      net.labelFreq.set(this.labelFreq.subarray(0, Math.min(outputs, this.labelFreq.length)));
    }
    net.textVectorizer = this.textVectorizer;
    net.labelNames = labelNames ?? this.labelNames;
    net.inputScale = this.inputScale;
    net.inputLog = this.inputLog;
    net.inputMap = this.inputMap;
    // The re-ranker goes on scoring the old labels; a new one has no classifier (the intercept of a label
    // without training points, as training gives it). Training a grown network trains a new re-ranker anyway.
    const rr = this.rerank;
    if (rr) {
      const offsets = new Uint32Array(labels + 1), bias = new Float32Array(labels).fill(-1);
      offsets.set(rr.offsets);
      offsets.fill(rr.offsets[outputs]!, outputs + 1);
      bias.set(rr.bias);
      net.rerank = { ...rr, offsets, bias };
    }
    // New labels get the pooled map (training the grown network fits a new calibration).
    net.calibration = this.calibration;
  }

  /**
   * Writes the model (config, weights, training label frequencies) atomically with a checksum. `path` must
   * be a regular file or a new name (a symbolic link is followed to its regular file; see writeFileAtomic).
   */
  async save(path: string, opts: SaveOptions = {}): Promise<void> {
    await saveModel(path, this, opts.training);
  }

  /**
   * Reads a model written by `save` (or the weights of a checkpoint file, for evaluation). Hash tables
   * are rebuilt from the weights on first sampled use. The file is checked before anything is allocated:
   * its configuration by the rules of `new Network`, its sections against that configuration, and the
   * network's memory against `opts.maxMemory` (default: 90% of the machine's memory); weights must be
   * finite. Errors name the file and what is wrong with it.
   *
   * A model file loads inference-sized (NetworkOptions.inference): weights, biases and hash functions, and
   * the memory plan checked is that of prediction; fit() and grow() allocate the optimizer state (zero: a
   * model file holds none) and tables when the network trains. A checkpoint file loads with its optimizer
   * state and tables (the training plan), through the reader src/train/checkpoint.ts installs
   * (setCheckpointReader).
   */
  static async load(path: string, opts: LoadOptions = {}): Promise<Network> {
    const limits: LoadLimits = { maxMemory: opts.maxMemory, workers: opts.workers };
    const reader = checkpointReader;
    const make = (config: NetworkConfig) => {
      const net = new Network(config, { inference: true, initialise: false });
      loadedUnder.set(net, opts.maxMemory);
      return net;
    };
    return loadModel(path, make, reader ? (file) => reader(file, limits) : undefined, limits);
  }

  /**
   * (Online learning, src/network/online.ts.) Takes the cluster index of `from`, a network whose first
   * labels this one shares (Network.grow's source), with `labels` added to its head: sampled prediction
   * scores them for every query, and the index of the other labels is not rebuilt. Nothing when `from` has
   * no current index.
   */
  adoptClusterIndex(from: Network, labels: readonly number[]): void {
    const s = this.spec.layers.at(-1)!.sampling, fs = from.spec.layers.at(-1)!.sampling;
    if (!s || !fs?.index || !from.indexFresh) return;
    const head = sharedUint32(fs.index.head.length + labels.length);
    head.set(fs.index.head);
    head.set(labels, fs.index.head.length);
    head.sort();
    s.index = { ...fs.index, head };
    this.indexFresh = true;
  }

  /**
   * (Online learning.) The network's top `k` labels of each row of `data` (points x k), as prediction ranks
   * them before the re-ranker: for choosing the negatives of a learning step. `data` is as the kernels see
   * it: the model's input transform (scaling, count compression) already applied.
   */
  async predictCandidates(data: SparseDataset, k: number, mode: 'exact' | 'sampled', executor?: Executor): Promise<Uint32Array> {
    checkDataset(data, this.config, 'prediction input', false);
    data = toShared(data);
    const exec = executor ?? createExecutor(0);
    const outputs = this.config.layers.at(-1)!.size;
    return (await this.predictScaled(exec, data, k, mode, 256, defaultCandidates(outputs), null))[0]!.labels;
  }

  /** Marks tables and the cluster index stale (after weights were replaced from a file). */
  invalidateTables(): void {
    this.tablesFresh = false;
    this.indexFresh = false;
  }

  /**
   * Builds the index that sampled inference probes for a sampled output layer, from its current weights
   * (native/net_cluster.cc): a head of the `head` most frequent training labels (default 0.5% of the
   * outputs), scored for every query, and spherical k-means clusters (after the MIPS transform) of the
   * other labels seen in training, probed by centre score (labels never seen in training are not
   * indexed: no training point gave them evidence, and the exact top-1 is one of them for under 1% of
   * points at the 670k shape). Default `clusters`: round(sqrt(indexed labels)). The assignment passes run
   * on as many threads as the pool has workers (they wait meanwhile); the index does not depend on them.
   * Returns seconds.
   */
  buildClusterIndex(o: { head?: number; clusters?: number; iters?: number } = {}): number {
    const t0 = performance.now();
    const last = this.spec.layers.at(-1)!;
    const s = last.sampling;
    if (s) {
      const N = last.outDim, d = last.inDim;
      const freq = this.labelFreq && this.labelFreq.length === N ? this.labelFreq : new Uint32Array(N);
      const split = clusterHeadAndTail(freq, o.head);
      const head = sharedUint32(split.head.length);
      head.set(split.head);
      const tail = split.tail;
      const C = clusterCount(tail.length, o.clusters);
      const centroids = sharedFloat32(C * (d + 2)), offsets = sharedUint32(C + 1), members = sharedUint32(tail.length);
      if (C > 0) {
        native().netClusterBuild(last.weights, last.bias, d, tail, C, o.iters ?? CLUSTER_INDEX_ITERS, CLUSTER_INDEX_SAMPLE,
          clusterIndexSeed(this.seed), centroids, offsets, members, nativeThreads(defaultWorkers()));
      }
      s.index = { C, budget: 0, centroids, offsets, members, head };
    }
    this.indexFresh = true;
    const seconds = (performance.now() - t0) / 1000;
    this.clusterIndexSeconds += seconds;
    return seconds;
  }
}


/**
 * PredictOptions.threshold: of each point's first `shortlist` candidates (of pred.k, by score), those whose
 * probability reaches `threshold`, by descending probability (ties: by score), at most k.
 */
function selectByThreshold(pred: Predictions, k: number, shortlist: number, threshold: number): Predictions {
  const K = pred.k, n = pred.points, probs = pred.probabilities!;
  const labels = new Uint32Array(n * k).fill(0xffffffff), scores = new Float32Array(n * k), probabilities = new Float32Array(n * k);
  const order: number[] = [];
  for (let i = 0; i < n; i++) {
    order.length = 0;
    for (let r = 0; r < Math.min(shortlist, K); r++) {
      const e = i * K + r;
      if (pred.labels[e] !== 0xffffffff && probs[e]! >= threshold) order.push(e);
    }
    order.sort((u, v) => probs[v]! - probs[u]! || u - v);
    for (let j = 0; j < Math.min(k, order.length); j++) {
      const e = order[j]!;
      labels[i * k + j] = pred.labels[e]!;
      scores[i * k + j] = pred.scores[e]!;
      probabilities[i * k + j] = probs[e]!;
    }
  }
  return { points: n, k, labels, scores, probabilities, outputsScoredPerPoint: pred.outputsScoredPerPoint };
}
