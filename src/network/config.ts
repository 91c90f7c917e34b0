// Network configuration: the typed object users write (or load from JSON), its documented defaults,
// and validation with clear messages. Defaults follow SLIDE's published Amazon-670K settings
// (DWTA, K=6, L=50, 128-slot buckets, hidden 128, batch 128) unless noted; the learning rate defaults
// to 1e-3 (SLIDE uses 1e-4 for Amazon-670K; 1e-3 converges in fewer epochs on the datasets we measured).
import { boundJson, boundText } from '../util/bounded-text.js';

import { checkKnownKeys } from '../util/suggest.js';
import { nativeThreads } from '../native/addon.js';

/** Hash family of a sampled layer. */
export type HashName = 'dwta' | 'simhash' | 'wta' | 'minhash';
/** How the L buckets a query hits are turned into a candidate set. */
export type SelectionMode = 'union' | 'topk' | 'threshold';

/** LSH sampling of a layer: which neurons are computed for a sample. */
export interface SamplingConfig {
  /** Hash family. Default 'dwta' (SLIDE's choice for Amazon-670K). */
  hash?: HashName;
  /** Sub-hashes per table key. Default 6. */
  K?: number;
  /** Number of tables. Default 50. */
  L?: number;
  /** DWTA/WTA bin size (power of two; bitsPerHash = log2). Default 8. */
  binSize?: number;
  /** SimHash: fraction of input dims in each projection. Default 1/3. */
  density?: number;
  /** MinHash: bits kept per sub-hash. Default 2. */
  bitsPerHash?: number;
  /** log2 of buckets per table; wider keys are folded. Default min(K * bitsPerHash, 20). */
  rangeBits?: number;
  /** Max neuron ids per bucket. Default 128. */
  bucketSize?: number;
  /** What a full bucket does on insertion. Default 'fifo'. */
  policy?: 'fifo' | 'reservoir';
  /** Spare slots per bucket kept at rebuild for incremental inserts. Default 1. */
  slack?: number;
  /** Candidate selection. Default 'union'. */
  mode?: SelectionMode;
  /**
   * Max candidates taken from the tables per sample (true labels not counted); 0 turns the tables' candidates
   * off (labels and random negatives only). Default: max(32, ceil(0.005 * size)).
   */
  budget?: number;
  /** 'threshold' mode: min number of tables an id must appear in. Default 2. */
  minFreq?: number;
  /** Random fill up to this many active neurons per sample (negatives for the softmax). Default: max(32, ceil(0.005 * size)). */
  minActive?: number;
  /**
   * Training: the samples of a mini-batch share one set S of negatives (the batch's labels when
   * batchNegatives, then uniform random ids up to minActive), and each sample adds its own labels and LSH
   * candidates. S's logits are one dense (|S|, batch) block computed with the blocked GEMM kernels, and a
   * batch updates ~|S| rows instead of batchSize * minActive (lazy Adam's cost is proportional to the rows
   * updated). false draws a random fill per sample, as SLIDE does. Default true (false for a model or
   * checkpoint file written before this option existed: see storedConfig).
   */
  sharedFill?: boolean;
  /**
   * Training: the labels of the other samples of the mini-batch are negatives for every sample (in-batch
   * negatives). They are drawn in proportion to label frequency, so they push down exactly the frequent
   * labels that dominate wrong top-1 predictions, and they are rows the batch updates anyway. On
   * Amazon-670K-shaped data this lifts P@1 after one epoch from 0.05 to 0.55 (bench/engine.ts). Default true
   * (false for a model or checkpoint file written before this option existed: see storedConfig).
   */
  batchNegatives?: boolean;
  /**
   * Training with sharedFill: subtract log q_j from the logit of every neuron j of the shared set, where
   * q_j is the probability that j is in a batch's shared set (from the training labels' frequencies, the
   * batch size and minActive). This is the sampled-softmax correction: without it, frequent labels, which
   * are in almost every batch, are pushed down as negatives far more than a full softmax would push them,
   * and the model learns to rank rare labels over frequent ones. Default false.
   */
  logQ?: boolean;
}

/**
 * The output layer's sparse per-label "wide" part: next to the network's logit w_j . h + b_j, each label j
 * gets its own sparse linear model over the input features, z_j += sum_f x_f u[f, j], with weights only for
 * the features that carry most of label j's mass in the training data (its `maxPerLabel` largest summed
 * feature values over its training points), as linear extreme classifiers keep them. A label with a handful
 * of training points keeps their own evidence instead of squeezing it through the hidden layer. The pairs are
 * chosen by the first fit() from its training data; the weights start at 0 and are trained by the same
 * softmax loss with Adagrad. Output layer only (with a hidden layer below it); a sampled output layer needs
 * sharedFill; not with data-parallel train --distributed (train --distributed --shard-labels shards it with the
 * labels, without its `negatives`).
 */
export interface WideConfig {
  /** Features kept per label (the largest sums of the label's training points' values). Default 64. */
  maxPerLabel?: number;
  /** Adagrad learning rate of the wide weights (scaled by early stopping's rate cuts like the network's). Default 0.05. */
  lr?: number;
  /**
   * Initial weights: `init` times the label's unit-length centroid over its kept features (the normalised sums
   * of its training points' values, as PIFA label embeddings), so training starts from the centroid
   * classifier's scores init * cos(x, centroid_j). 0 starts every weight at 0. Default 0.
   */
  init?: number;
  /**
   * A feature is kept for a label only if its summed value is at least this share of the norm of the label's
   * whole summed feature vector (the label's strongest feature always stays). Frequent labels spread over
   * common words; without a cut those words would carry the lists of thousands of labels and every sample
   * would pay for them. Default 0.1.
   */
  minShare?: number;
  /**
   * Sampled output layers, in training: per sample, this many hard negatives join its active set, the labels
   * its wide part scores highest besides its own (and outside the batch's shared random set). They are the
   * labels that compete with the sample's own at prediction time. Each costs a row of the output layer per
   * sample (forward, backward, Adam): 32 doubled the training time at the 670k shape for the same P@1 once
   * the network's logit is blended (ValidationOptions.blend), +0.4 points on a 200k-label taxonomy, -0.2 on
   * a real 22,868-label text set. 0 turns them off. Default 0.
   */
  negatives?: number;
}

/**
 * The output layer's re-ranker: after the network is trained, each label gets its own sparse linear
 * classifier over the input row (scaled to unit length), a one-vs-rest L2-regularised squared-hinge SVM as
 * linear extreme classifiers (PECOS, Parabel) train them, but on the label's training points and its hard
 * negatives: the training points whose network top `shortlist` holds the label without it being theirs. At
 * prediction the network's top `shortlist` labels are re-scored by log p_j + weight x s_j(x). The network
 * shares evidence across labels through its hidden layer; the classifiers keep each label's own, and learn
 * from the network's mistakes. Trained at the end of fit() on the rows it trained on; with held-out
 * validation its weight is chosen on the held-out points (0: off, when it does not help there), after k-fold
 * selection (small training sets) by the folds. Needs neither a hidden layer nor a sampled output; not
 * trained by train --distributed (either kind).
 */
export interface RerankConfig {
  /** Network candidates per point: the negatives each training point contributes and the labels re-scored at prediction. Default 32. */
  shortlist?: number;
  /**
   * Training points whose shortlists are predicted for the hard negatives (a seeded sample when there are more;
   * every training point is a positive of its labels). Each costs a prediction. Default 50,000.
   */
  shortlistRows?: number;
  /** The SVMs' cost of a margin error against the L2 penalty (LIBLINEAR's C, PECOS's default). Default 1. */
  C?: number;
  /** Classifier weights with |w| at most this are dropped after training (rows have unit length; PECOS's threshold). Default 0.1. */
  prune?: number;
  /**
   * Passes of dual coordinate descent per label at most (it stops earlier when the projected gradients are within
   * 0.1). Default 10: on debian-tags, debian-deps, debian-deps-11k, model2-200k, Bibtex and Delicious the test
   * P@1/3/5 were within 0.1 point of 20 passes' (same networks) at 0.75-0.85 of the time; 7 lost 0.5-0.6 on two.
   */
  maxIter?: number;
  /**
   * The weight of the classifiers' scores against the network's log-probabilities. Default: chosen on the
   * held-out points (or by k-fold selection) from RERANK_WEIGHTS, 0 included; with a fixed number of epochs
   * nothing is trained unless a weight is given.
   */
  weight?: number;
}

/** One fully connected layer. */
export interface LayerConfig {
  /** Number of neurons (for the last layer: the number of labels). */
  size: number;
  /** 'relu' for hidden layers (default), 'softmax' for the last layer (default there), 'linear'. */
  activation?: 'relu' | 'softmax' | 'linear';
  /** LSH sampling of this layer's neurons. Absent: dense (every neuron computed). Not allowed on the first layer. */
  sampling?: SamplingConfig;
  /**
   * Hidden, dense layers only: fraction of the layer's outputs zeroed for each training sample (inverted
   * dropout; prediction uses every output). Default 0 (defaultConfig chooses a value from the data's shape).
   */
  dropout?: number;
  /** Output layer only: the sparse per-label wide part (WideConfig). Absent: none (defaultConfig decides from the data's shape). */
  wide?: WideConfig;
  /** Output layer only: the re-ranker trained after the network (RerankConfig). Absent: none (defaultConfig adds one). */
  rerank?: RerankConfig;
}

/** A network over a sparse input of `inputDim` features. */
export interface NetworkConfig {
  /** Input feature dimension (the dataset's `features`). */
  inputDim: number;
  /** Layers from the input to the output; the last one is the softmax over labels. */
  layers: LayerConfig[];
  /** Seed of every random choice (initialisation, hash functions, shuffles). Default 1. */
  seed?: number;
}

/**
 * Training options are not part of a network's configuration (they are fit()'s, and train()'s `training`): a
 * NetworkConfig that holds one gets this hint instead of a did-you-mean. (The CLI's --config file may
 * hold them next to the network: src/job/config-file.ts.)
 */
const TRAINING_KEY_HINTS: Record<string, string> = Object.fromEntries(
  ['epochs', 'batchSize', 'lr', 'beta1', 'beta2', 'eps', 'workers', 'validation', 'rebuild', 'inputScaling'].map((k) => [k, `${k} is a training option: give it to train() (or next to the network in a --config file)`]),
);

/** Fully resolved sampling settings (every default filled in). */
export type ResolvedSampling = Required<SamplingConfig>;
export interface ResolvedLayer {
  size: number;
  activation: 'relu' | 'softmax' | 'linear';
  /** Present iff the layer is LSH-sampled. */
  sampling?: ResolvedSampling;
  dropout: number;
  /** Present iff the layer (the output layer) has a wide part. */
  wide?: Required<WideConfig>;
  /** Present iff the layer (the output layer) has a re-ranker; `weight` absent: chosen on held-out points. */
  rerank?: ResolvedRerank;
}
/** RerankConfig with its defaults filled in (`weight` stays optional: absent means chosen on held-out points). */
export type ResolvedRerank = Required<Omit<RerankConfig, 'weight'>> & Pick<RerankConfig, 'weight'>;
export interface ResolvedNetworkConfig {
  inputDim: number;
  layers: ResolvedLayer[];
  seed: number;
}

/** The keys of each configuration object: anything else is a typo, refused with a did-you-mean. */
export const NETWORK_KEYS = ['inputDim', 'layers', 'seed'] as const satisfies readonly (keyof NetworkConfig)[];
export const LAYER_KEYS = ['size', 'activation', 'sampling', 'dropout', 'wide', 'rerank'] as const satisfies readonly (keyof LayerConfig)[];
export const SAMPLING_KEYS = [
  'hash', 'K', 'L', 'binSize', 'density', 'bitsPerHash', 'rangeBits', 'bucketSize', 'policy', 'slack', 'mode',
  'budget', 'minFreq', 'minActive', 'sharedFill', 'batchNegatives', 'logQ',
] as const satisfies readonly (keyof SamplingConfig)[];
export const WIDE_KEYS = ['maxPerLabel', 'lr', 'init', 'minShare', 'negatives'] as const satisfies readonly (keyof WideConfig)[];
export const RERANK_KEYS = ['shortlist', 'shortlistRows', 'C', 'prune', 'maxIter', 'weight'] as const satisfies readonly (keyof RerankConfig)[];

const HASHES: readonly HashName[] = ['dwta', 'simhash', 'wta', 'minhash'];
const MODES: readonly SelectionMode[] = ['union', 'topk', 'threshold'];

/**
 * A network configuration that breaks a rule (an unknown key, a value out of range), naming the key.
 *
 * @example
 * ```ts
 * try { new Network({ inputDim: 10, layers: [{ size: 4, dropuot: 0.5 }] } as never); }
 * catch (e) { if (e instanceof ConfigError) console.error(e.message); else throw e; } // did you mean layers[0].dropout?
 * ```
 */
export class ConfigError extends Error {
  override name = 'ConfigError';
}
const configError = (m: string) => new ConfigError(m);

function positiveInt(v: unknown, what: string): number {
  if (typeof v !== 'number' || !Number.isInteger(v) || v <= 0) {
    throw new ConfigError(`Expected positive integer for ${what} but received ${boundJson(v)}`);
  }
  return v;
}
function nonNegativeInt(v: unknown, what: string): number {
  if (typeof v !== 'number' || !Number.isInteger(v) || v < 0) {
    throw new ConfigError(`Expected non-negative integer for ${what} but received ${boundJson(v)}`);
  }
  return v;
}

/** Bits per sub-hash of a family (needed to check that K fits the 32-bit key). */
export function bitsPerHashOf(s: { hash: HashName; binSize: number; bitsPerHash: number }): number {
  if (s.hash === 'simhash') return 1;
  if (s.hash === 'minhash') return s.bitsPerHash;
  return Math.log2(s.binSize);
}

/** Fills defaults and validates. Throws ConfigError with a message naming the field. */
export function resolveSampling(s: SamplingConfig, size: number, where: string): ResolvedSampling {
  if (s === null || typeof s !== 'object' || Array.isArray(s)) throw new ConfigError(`Expected an object for ${where} but received ${JSON.stringify(s)}`);
  checkKnownKeys(s, SAMPLING_KEYS, where, configError);
  const hash = s.hash ?? 'dwta';
  if (!HASHES.includes(hash)) {
    throw new ConfigError(`Unknown hash family ${boundJson(hash)} for ${where}.hash (expected one of ${HASHES.join(', ')})`);
  }
  const K = positiveInt(s.K ?? 6, `${where}.K`);
  const L = positiveInt(s.L ?? 50, `${where}.L`);
  if (L > 1024) throw new ConfigError(`${where}.L must be at most 1024 but received ${L}`);
  const binSize = positiveInt(s.binSize ?? 8, `${where}.binSize`);
  if ((binSize & (binSize - 1)) !== 0 || binSize < 2) throw new ConfigError(`${where}.binSize must be a power of two >= 2 but received ${binSize}`);
  const density = s.density ?? 1 / 3;
  if (!(typeof density === 'number' && density > 0 && density <= 1)) throw new ConfigError(`${where}.density must be in (0, 1] but received ${boundJson(density)}`);
  const bitsPerHash = positiveInt(s.bitsPerHash ?? 2, `${where}.bitsPerHash`);
  const bits = bitsPerHashOf({ hash, binSize, bitsPerHash });
  if (K * bits > 32) {
    throw new ConfigError(`${where}.K = ${K} is too large for the 32-bit key: K * bitsPerHash = ${K * bits} > 32`);
  }
  const rangeBits = positiveInt(s.rangeBits ?? Math.min(K * bits, 20), `${where}.rangeBits`);
  if (rangeBits > 24) throw new ConfigError(`${where}.rangeBits must be at most 24 but received ${rangeBits}`);
  const bucketSize = positiveInt(s.bucketSize ?? 128, `${where}.bucketSize`);
  if (bucketSize > 65535) throw new ConfigError(`${where}.bucketSize must be at most 65535 but received ${bucketSize}`);
  const policy = s.policy ?? 'fifo';
  if (policy !== 'fifo' && policy !== 'reservoir') throw new ConfigError(`Unknown bucket policy ${boundJson(policy)} for ${where}.policy (expected fifo or reservoir)`);
  const slack = nonNegativeInt(s.slack ?? 1, `${where}.slack`);
  const mode = s.mode ?? 'union';
  if (!MODES.includes(mode)) throw new ConfigError(`Unknown selection mode ${boundJson(mode)} for ${where}.mode (expected one of ${MODES.join(', ')})`);
  const defaultBudget = Math.min(size, Math.max(32, Math.ceil(0.005 * size)));
  const budget = nonNegativeInt(s.budget ?? defaultBudget, `${where}.budget`);
  // The kernels take it as a u32 (more than the layer's size means "every candidate" anyway).
  if (budget > 0xffffffff) throw new ConfigError(`${where}.budget must be at most 4294967295 but received ${budget}`);
  const minFreq = positiveInt(s.minFreq ?? 2, `${where}.minFreq`);
  if (minFreq > L) throw new ConfigError(`${where}.minFreq = ${minFreq} exceeds L = ${L}`);
  const minActive = nonNegativeInt(s.minActive ?? defaultBudget, `${where}.minActive`);
  if (minActive > size) throw new ConfigError(`${where}.minActive = ${minActive} exceeds the layer size ${size}`);
  const sharedFill = s.sharedFill ?? true;
  if (typeof sharedFill !== 'boolean') throw new ConfigError(`Expected boolean for ${where}.sharedFill but received ${boundJson(sharedFill)}`);
  const batchNegatives = s.batchNegatives ?? true;
  if (typeof batchNegatives !== 'boolean') throw new ConfigError(`Expected boolean for ${where}.batchNegatives but received ${boundJson(batchNegatives)}`);
  const logQ = s.logQ ?? false;
  if (typeof logQ !== 'boolean') throw new ConfigError(`Expected boolean for ${where}.logQ but received ${boundJson(logQ)}`);
  return { hash, K, L, binSize, density, bitsPerHash, rangeBits, bucketSize, policy, slack, mode, budget, minFreq, minActive, sharedFill, batchNegatives, logQ };
}

/** Fills the wide part's defaults and validates. */
export function resolveWide(w: WideConfig, where: string): Required<WideConfig> {
  if (w === null || typeof w !== 'object' || Array.isArray(w)) throw new ConfigError(`Expected an object for ${where} but received ${boundJson(w)}`);
  checkKnownKeys(w, WIDE_KEYS, where, configError);
  const maxPerLabel = positiveInt(w.maxPerLabel ?? 64, `${where}.maxPerLabel`);
  if (maxPerLabel > 65536) throw new ConfigError(`${where}.maxPerLabel must be at most 65536 but received ${maxPerLabel}`);
  const lr = w.lr ?? 0.05;
  if (!(typeof lr === 'number' && Number.isFinite(lr) && lr >= 0)) throw new ConfigError(`Expected finite number >= 0 for ${where}.lr but received ${boundJson(w.lr)}`);
  const init = w.init ?? 0;
  if (!(typeof init === 'number' && Number.isFinite(init) && init >= 0)) throw new ConfigError(`Expected finite number >= 0 for ${where}.init but received ${boundJson(w.init)}`);
  const minShare = w.minShare ?? 0.1;
  if (!(typeof minShare === 'number' && minShare >= 0 && minShare <= 1)) throw new ConfigError(`Expected number in [0, 1] for ${where}.minShare but received ${boundJson(w.minShare)}`);
  const negatives = nonNegativeInt(w.negatives ?? 0, `${where}.negatives`);
  if (negatives > 65536) throw new ConfigError(`${where}.negatives must be at most 65536 but received ${negatives}`);
  return { maxPerLabel, lr, init, minShare, negatives };
}

/** Fills the re-ranker's defaults and validates. */
export function resolveRerank(r: RerankConfig, where: string): ResolvedRerank {
  if (r === null || typeof r !== 'object' || Array.isArray(r)) throw new ConfigError(`Expected an object for ${where} but received ${boundJson(r)}`);
  checkKnownKeys(r, RERANK_KEYS, where, configError);
  const shortlist = positiveInt(r.shortlist ?? 32, `${where}.shortlist`);
  if (shortlist > 4096) throw new ConfigError(`${where}.shortlist must be at most 4096 but received ${shortlist}`);
  const finite = (v: unknown, what: string, ok: (x: number) => boolean, want: string): number => {
    if (!(typeof v === 'number' && Number.isFinite(v) && ok(v))) throw new ConfigError(`Expected ${want} for ${where}.${what} but received ${boundJson(v)}`);
    return v;
  };
  const shortlistRows = positiveInt(r.shortlistRows ?? 50000, `${where}.shortlistRows`);
  const C = finite(r.C ?? 1, 'C', (x) => x > 0, 'finite number > 0');
  const prune = finite(r.prune ?? 0.1, 'prune', (x) => x >= 0, 'finite number >= 0');
  const maxIter = positiveInt(r.maxIter ?? 10, `${where}.maxIter`);
  if (maxIter > 10000) throw new ConfigError(`${where}.maxIter must be at most 10000 but received ${maxIter}`);
  const weight = r.weight === undefined ? undefined : finite(r.weight, 'weight', (x) => x >= 0, 'finite number >= 0');
  return { shortlist, shortlistRows, C, prune, maxIter, ...(weight !== undefined ? { weight } : {}) };
}

/** Validates a network configuration and fills in every default. */
export function resolveConfig(c: NetworkConfig): ResolvedNetworkConfig {
  if (c === null || typeof c !== 'object' || Array.isArray(c)) throw new ConfigError('Expected a network configuration object');
  checkKnownKeys(c, NETWORK_KEYS, '', configError, TRAINING_KEY_HINTS);
  const inputDim = positiveInt(c.inputDim, 'inputDim');
  if (!Array.isArray(c.layers) || c.layers.length === 0) throw new ConfigError('Expected at least one layer in layers');
  const seed = nonNegativeInt(c.seed ?? 1, 'seed');
  const layers = c.layers.map((l, i): ResolvedLayer => {
    const where = `layers[${i}]`;
    if (l === null || typeof l !== 'object' || Array.isArray(l)) throw new ConfigError(`Expected an object for ${where}`);
    checkKnownKeys(l, LAYER_KEYS, where, configError);
    const size = positiveInt(l.size, `${where}.size`);
    const last = i === c.layers.length - 1;
    const activation = l.activation ?? (last ? 'softmax' : 'relu');
    if (!['relu', 'softmax', 'linear'].includes(activation)) {
      throw new ConfigError(`Unknown activation ${boundJson(activation)} for ${where}.activation (expected relu, softmax or linear)`);
    }
    if (activation === 'softmax' && !last) throw new ConfigError(`${where}.activation: softmax is only allowed on the last layer`);
    if (last && activation !== 'softmax') throw new ConfigError(`${where}.activation: the last layer must be softmax (multi-label cross-entropy)`);
    if (l.sampling && i === 0) {
      throw new ConfigError(`${where}.sampling: the first layer reads the sparse input and cannot be sampled; sample a wider later layer`);
    }
    const dropout = l.dropout ?? 0;
    if (!(typeof dropout === 'number' && dropout >= 0 && dropout < 1)) throw new ConfigError(`Expected number in [0, 1) for ${where}.dropout but received ${boundJson(l.dropout)}`);
    if (dropout > 0 && last) throw new ConfigError(`${where}.dropout: dropout applies to hidden layers, not the output layer`);
    if (dropout > 0 && l.sampling) throw new ConfigError(`${where}.dropout: dropout applies to dense hidden layers, not sampled ones`);
    const sampling = l.sampling ? resolveSampling(l.sampling, size, `${where}.sampling`) : undefined;
    const wide = l.wide === undefined ? undefined : resolveWide(l.wide, `${where}.wide`);
    if (wide && !last) throw new ConfigError(`${where}.wide: only the output layer has a wide part`);
    if (wide && i === 0) throw new ConfigError(`${where}.wide: the wide part needs a hidden layer below the output layer`);
    if (wide && sampling && !sampling.sharedFill) throw new ConfigError(`${where}.wide: a sampled output layer needs sampling.sharedFill for its wide part`);
    const rerank = l.rerank === undefined ? undefined : resolveRerank(l.rerank, `${where}.rerank`);
    if (rerank && !last) throw new ConfigError(`${where}.rerank: only the output layer has a re-ranker`);
    return { size, activation, ...(sampling ? { sampling } : {}), dropout, ...(wide ? { wide } : {}), ...(rerank ? { rerank } : {}) };
  });
  return { inputDim, layers, seed };
}

/** Training options added after the first file format, each off in files written before it existed. */
const LATER_SAMPLING_OPTIONS = ['sharedFill', 'batchNegatives', 'logQ'] as const;

/**
 * The configuration of a model or checkpoint file, as the network is to be built from it. Files store the
 * resolved configuration, where every option is explicit, so a sampling option missing from it means the
 * file predates the option: it was trained without it, and the option is set off rather than to today's
 * default, so that a resumed run goes on as it started. Anything malformed is returned as is, for
 * resolveConfig to report.
 */
export function storedConfig(c: NetworkConfig): NetworkConfig {
  if (!c || typeof c !== 'object' || !Array.isArray(c.layers)) return c;
  const layers = c.layers.map((l) => {
    const s = (l as Partial<LayerConfig> | null)?.sampling;
    if (!s || typeof s !== 'object') return l;
    const missing = LATER_SAMPLING_OPTIONS.filter((k) => !(k in s));
    return missing.length ? { ...l, sampling: { ...s, ...Object.fromEntries(missing.map((k) => [k, false])) } } : l;
  });
  return { ...c, layers };
}

/**
 * What the defaults rule reads of the data: its dimensions, and for the hidden width the nonzeros per point,
 * from `nnz` (summed over the points) or the CSR `offsets` of a dataset (so a SparseDataset itself will do).
 */
export interface DataShapeForDefaults {
  features: number;
  labels: number;
  points?: number;
  nnz?: number;
  offsets?: ArrayLike<number>;
}

/** Output layers with at least this many labels are LSH-sampled by default (docs/defaults.md). */
export const SAMPLED_OUTPUT_MIN_LABELS = 8192;
/** The default hidden width keeps its two weight matrices under this many parameters (else 128 units). */
export const HIDDEN_PARAMETER_BUDGET = 2 ** 26;
/**
 * A dense output layer is as wide as 1024 or 512 units when a training sample's multiply-adds through the
 * network, width x (nonzeros per point + labels), stay under this many; else 256. Every sample computes every
 * output, so the width is what the training time scales with.
 */
export const DENSE_WIDTH_BUDGET = 2 ** 18;

/**
 * The defaults rule (docs/defaults.md), from the data's shape alone:
 * - one ReLU hidden layer (defaultWidth): with a dense output layer, 1024 or 512 units where a training
 *   sample's multiply-adds, width x (nonzeros per point + labels), stay under DENSE_WIDTH_BUDGET (2^18), else
 *   256; with a sampled output layer 256; never more than the parameter budget allows ((features + labels) x
 *   width <= 2^26), else 128. The per-label wide part and the re-ranker carry most of the accuracy at 10^4+
 *   labels and on real text: a 256-wide layer scored as 1024 did on a real 22,868-label text set (P@1 0.800
 *   against 0.798) in a fifth of the time, and 128 as 256 on its 11,604-label cut; on Bibtex, whose 159
 *   outputs are cheap, 1024 stays (256 lost 0.2 to 0.4 points over ten splits) (docs/defaults.md "How the
 *   defaults were chosen");
 * - dropout on it: 0.7 at width >= 512, else 0.5;
 * - a dense softmax below 8,192 labels, else a sampled one with the logQ correction and a wide part (below).
 *   On a real text set cut to 3,896 labels the dense output was better (P@1 0.842 against 0.838, P@5 0.449
 *   against 0.431) in 4x the time; cut to 11,604 labels the sampled one reached a higher P@1 (0.814 against
 *   0.809; P@5 0.428 against 0.444) in 1/20 of the time (96 s against 32 minutes). DWTA tables (L = 50,
 *   128-slot buckets, as SLIDE), with K = round(log2(labels / 2.5) / 3)
 *   sub-hashes of 3 bits, so that a bucket holds 2-3 neurons on average (K = 6 at 670k labels; K = 5 there
 *   was as accurate and half as fast); sampled inference probes the cluster index instead;
 * - with a sampled output, a sparse per-label wide part next to the network (DEFAULT_WIDE): each label keeps
 *   the input features that carry its training points' mass, so a label seen a few times keeps their
 *   evidence instead of squeezing it through the hidden layer (+4.3 points of P@1 on the tail of a real
 *   22,868-label text set, +4 points after 4 epochs at the 670k shape); held-out validation then weighs the
 *   network's logit against the wide part (ValidationOptions.blend);
 * - a re-ranker on every output layer (RerankConfig, defaults): per-label linear classifiers trained after the
 *   network on its shortlists, weighted against it on held-out points (or by the k-fold selection); +1.5 to
 *   2.4 points of P@1 on the real text sets, +3.1 on the taxonomy data model and on 300 Bibtex points, +0.3
 *   and 0.0 at the 670k shape (30,000 and 200,000 points; +1.1 points of P@3 there);
 * - no table candidates in training (budget 0: the labels and the shared random negatives only). Without
 *   the wide part they added 4.5-6.8 points of P@1 at 670k labels with 30,000 points (and cost 1.2 points
 *   at 200,000); with it they cost 0.7-1.2 points there and twice the training time (0.8465 or 0.842 on,
 *   0.854 off): the wide part's per-label evidence does what their hard negatives did. `points` and `nnz` are
 *   used only for the width of a dense output layer's hidden layer.
 *
 * @example
 * ```ts
 * const data = await readXC('train.txt');
 * const config = defaultConfig(data);            // what `sublinear train` builds for this data
 * config.layers[0] = { ...config.layers[0]!, size: 256 };
 * await train({ train: data, networkConfig: config, save: 'model.sl' });
 * ```
 */
export function defaultConfig(shape: DataShapeForDefaults, seed = 1): NetworkConfig {
  const sampled = shape.labels >= SAMPLED_OUTPUT_MIN_LABELS;
  const width = defaultWidth(shape);
  return {
    inputDim: shape.features,
    seed,
    layers: [
      { size: width, activation: 'relu', dropout: width >= 512 ? 0.7 : 0.5 },
      {
        size: shape.labels, activation: 'softmax',
        ...(sampled ? { sampling: { hash: 'dwta', K: tableBits(shape.labels), L: 50, logQ: true, budget: 0 } } : {}),
        ...(sampled ? { wide: { ...DEFAULT_WIDE } } : {}),
        rerank: {},
      },
    ],
  };
}

/**
 * The hidden width of the defaults rule (defaultConfig): with a dense output layer (under 8,192 labels) the
 * widest of 1024 and 512 whose multiply-adds per sample, width x (nonzeros per point + labels), stay under
 * DENSE_WIDTH_BUDGET, else 256; with a sampled one 256. Either way at most what the parameter budget allows
 * ((features + labels) x width <= HIDDEN_PARAMETER_BUDGET), and never below 128. Without `points` and `nnz`
 * the nonzeros are not counted.
 */
export function defaultWidth(shape: DataShapeForDefaults): number {
  const fits = (w: number) => (shape.features + shape.labels) * w <= HIDDEN_PARAMETER_BUDGET;
  const nnz = shape.nnz ?? (shape.points !== undefined ? shape.offsets?.[shape.points] : undefined);
  const perPoint = shape.points && nnz !== undefined ? nnz / shape.points : 0;
  const cheap = (w: number) => w * (perPoint + shape.labels) <= DENSE_WIDTH_BUDGET;
  const dense = shape.labels < SAMPLED_OUTPUT_MIN_LABELS;
  return (dense ? [1024, 512].find((w) => fits(w) && cheap(w)) : undefined) ?? (fits(256) ? 256 : 128);
}

/**
 * The wide part of the default sampled output layers (docs/defaults.md "How the defaults were chosen"): 64 pairs per
 * label at most, each holding at least 10% of its label's centroid norm, starting from 8 x the label's unit
 * centroid, Adagrad at 0.2, no hard negatives (WideConfig.negatives). Dense outputs (fewer than 8,192 labels) have none: on Bibtex it cost 0.7 points
 * of P@1 and doubled the training time.
 */
export const DEFAULT_WIDE: Required<WideConfig> = { maxPerLabel: 64, lr: 0.2, init: 8, minShare: 0.1, negatives: 0 };

/**
 * Whether training queries hash tables (Network.tablesInTraining, the plan's Workload.tablesQueried): a sampled
 * hidden layer does; a sampled output layer only with table candidates (budget > 0) or without the
 * batch-shared set (its per-sample fill). The defaults' output layers take neither (the wide part replaced
 * the candidates), and prediction probes the cluster index: rebuilding their tables was 25-30% of the
 * training time at the 670k shape.
 */
export function tablesQueriedInTraining(c: ResolvedNetworkConfig): boolean {
  const last = c.layers.length - 1;
  return c.layers.some((l, k) => !!l.sampling && (k < last || l.sampling.budget > 0 || !l.sampling.sharedFill));
}

/** DWTA sub-hashes per key (3 bits each) for a sampled layer of `neurons`: about 2.5 neurons per bucket. */
function tableBits(neurons: number): number {
  return Math.min(8, Math.max(2, Math.round(Math.log2(neurons / 2.5) / 3)));
}

/**
 * Training defaults that depend on the network (used by Network.fit when the option is not given):
 * - lr 2e-3 with a dense output layer, 1e-2 with a sampled one, under the held-out 'anneal' schedule and for a
 *   fixed number of epochs alike: a sampled output row is updated only in the batches whose shared set holds
 *   it, so lazy Adam takes far fewer steps per row than a dense layer does and needs the larger rate (3
 *   label-sharded epochs at the 670k shape: P@1 0.835 at 1e-2, 0.814 at 5e-3). With the 'anneal' schedule,
 *   whose descent replaces the plateau's halvings, 1e-2 reached on the real text sets what 5e-3 reached with
 *   the plateau in half the epochs or fewer (debian-deps: 8 against 14-17); dense layers of 256 units took 2e-3 (Delicious, three seeds each:
 *   P@5 0.595 at 2e-3, 0.593 at 4e-3) (docs/defaults.md "How the defaults were chosen");
 * - with a dense output layer and `data` given, 4e-3 where the first layer's rows are updated in few batches
 *   (rowUpdateShare under RARE_ROW_SHARE): lazy Adam moves a row only in the batches that hold its feature, so
 *   rows met in a tenth of the batches need the larger rate for the same reason as the sampled outputs' rows
 *   (debian-tags, 0.09 of the batches, seeds 1-3: 6.7 epochs against 8.7, test P@k level or higher; Delicious
 *   and Bibtex, 0.9 of the batches, lost 1.1 points of P@1 at 4e-3 and 0.5 at 1,024 units: they keep 2e-3);
 * - workers: one when the output layer is dense (every batch updates every output row, so HOGWILD
 *   workers would overwrite each other's updates on all of them: measured on Bibtex, 2 workers lost
 *   4 points of P@1 and once diverged), else the machine's cores;
 * - threads: with a dense output layer (and one worker) the cores share each batch's dense work inside the
 *   kernels instead (FitOptions.threads: by rows and samples, no races, so the result is that of one thread
 *   up to the order of a few sums); else 1.
 */
export function defaultTraining(c: ResolvedNetworkConfig, cores: number, data?: RowUpdateData, batchSize = 128): { lr: number; workers: number; threads: number } {
  const sampled = !!c.layers.at(-1)!.sampling;
  const rare = !sampled && data !== undefined && rowUpdateShare(data, batchSize) < RARE_ROW_SHARE;
  return { lr: sampled ? 1e-2 : rare ? 4e-3 : 2e-3, workers: sampled ? cores : 1, threads: sampled ? 1 : nativeThreads(cores) };
}

/**
 * Under this rowUpdateShare a dense output layer's network trains at 4e-3 instead of 2e-3 (defaultTraining).
 * The sets measured lie far on either side: debian-tags 0.09 (4e-3: as accurate in 2 epochs fewer), Bibtex
 * 0.88 and Delicious 0.90 (4e-3 lost 0.5 and 1.1 points of P@1); the small cuts of the text sets (300 to
 * 1,000 points, 0.28 to 0.55) keep 2e-3, the rate their k-fold selection was measured at.
 */
export const RARE_ROW_SHARE = 0.25;

/** What rowUpdateShare reads of a dataset (a SparseDataset will do). */
export interface RowUpdateData {
  points: number;
  features: number;
  offsets: ArrayLike<number>;
  indices: ArrayLike<number>;
}

/**
 * The share of `batchSize`-point batches that update a first-layer row, averaged over the input features the
 * data holds: for a feature held by df of the N points, 1 - (1 - df / N)^batchSize (batches drawn at random).
 * A feature repeated within a point counts once. 0 for data without points or nonzeros.
 */
export function rowUpdateShare(data: RowUpdateData, batchSize: number): number {
  const N = data.points;
  const df = new Uint32Array(data.features);
  const last = new Int32Array(data.features).fill(-1);
  for (let i = 0; i < N; ++i)
    for (let q = data.offsets[i]!, q1 = data.offsets[i + 1]!; q < q1; ++q) {
      const f = data.indices[q]!;
      if (f >= data.features || last[f] === i) continue;
      last[f] = i;
      ++df[f];
    }
  let held = 0;
  let sum = 0;
  for (let f = 0; f < data.features; ++f) {
    if (df[f] === 0) continue;
    ++held;
    sum += 1 - Math.pow(1 - df[f]! / N, batchSize);
  }
  return held > 0 ? sum / held : 0;
}

/**
 * The default intra-batch threads (FitOptions.threads) of a process training with `workers` workers on `cores`
 * cores: they share the cores with HOGWILD workers, so only a lone worker gets them (defaultTraining's
 * `threads`: all the cores with a dense output layer, else 1).
 */
export function defaultThreads(c: ResolvedNetworkConfig, cores: number, workers: number): number {
  return workers <= 1 ? defaultTraining(c, cores).threads : 1;
}
