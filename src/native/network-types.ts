// Private description of the network part of the native addon (math and legend: native/net.h; layouts:
// docs/design.md "Network state"). Public classes validate user input before calling these; the C++ side
// re-checks every length and range and throws `sublinear native: ...` errors instead of crashing.
import type { HashSpec, QuerySpec, TablesSpec } from './lsh-types.js';
import type { SparseDataset } from '../datasets/csr.js';

/** Activation codes of LayerState.activation. */
export const ACTIVATION_CODE = { relu: 0, softmax: 1, linear: 2 } as const;

/** Training modes of TrainHyper.mode. */
export const TRAIN_MODE = { adam: 0, gradient: 1, loss: 2, sparseGradient: 3 } as const;

/** LSH sampling of a layer k >= 1: its hash functions, tables and query options (src/lsh). */
export interface LayerSampling {
  /** hash.dim === the layer's inDim. */
  hash: HashSpec;
  /**
   * tables.N === the layer's outDim. In an inference-sized network (`Network.load`) its arrays are empty until
   * training or a sampled prediction that queries them allocates them (an output layer with a cluster index
   * never does).
   */
  tables: TablesSpec;
  query: QuerySpec;
  /**
   * Training the output layer: all samples of a slice share one set of negatives S (computed as a dense
   * block), see SamplingConfig.sharedFill. Absent: true.
   */
  sharedFill?: boolean;
  /** In-batch negatives (see SamplingConfig.batchNegatives). Absent: false. */
  batchNegatives?: boolean;
  /** Training with a wide part: hard negatives per sample from the wide part's scores (WideConfig.negatives). Absent: 0. */
  wideNegatives?: number;
  /** (outDim) on a SharedArrayBuffer: -log q_j added to shared-set logits in training (SamplingConfig.logQ). Absent: none. */
  logQ?: Float32Array;
  /** Sampled inference of an output layer: the cluster index (native/net_cluster.cc). Absent: the hash tables. */
  index?: ClusterIndexSpec;
}

/**
 * One fully connected layer, every array on a SharedArrayBuffer so that worker threads train it in place.
 * Layer 0 is input-major (row f = the weights of input feature f), later layers neuron-major (row j =
 * neuron j's incoming weights, the vector LSH hashes).
 */
export interface LayerState {
  inDim: number;
  outDim: number;
  /** 0 relu, 1 softmax (last layer only, required there), 2 linear. */
  activation: 0 | 1 | 2;
  /** 1 for layer 0 only. */
  inputMajor: 0 | 1;
  /** Training only: inverted dropout of a dense hidden layer's outputs, in [0, 1). Absent: 0. */
  dropout?: number;
  /**
   * Layer 0 of a label-sharded rank (src/train/sharded.ts) only: the network's input features D, when the
   * layer holds the rows of only inDim of them (that rank's features; the phases of NativeShard take the
   * feature -> row map). Only the NativeShard phases accept such a layer. Absent: inDim.
   */
  features?: number;
  /**
   * Layer 0 in training only: its Adam moments are left to 4 KiB pages (set by fit() when the training data
   * holds under half of the input features: lazy Adam writes only those rows, and a huge page would zero
   * 2 MiB around each; netAdviseHugePages(a, false)). Absent: huge pages, as for every large training array.
   */
  smallPages?: boolean;
  /** inputMajor ? (inDim, outDim) : (outDim, inDim), row-major. */
  weights: Float32Array;
  /** (outDim). */
  bias: Float32Array;
  /**
   * Adam first moments, shaped like weights. This and the other training arrays (vWeights, mBias, vBias,
   * rowSteps, biasSteps, the wide part's accum) are empty in an inference-sized network (`Network.load`)
   * until it trains: prediction does not read them.
   */
  mWeights: Float32Array;
  /** Adam second moments, shaped like weights. */
  vWeights: Float32Array;
  /** (outDim). */
  mBias: Float32Array;
  /** (outDim). */
  vBias: Float32Array;
  /** Adam steps taken by each row: (inDim) if inputMajor else (outDim). A neuron-major row's bias shares its row's count. */
  rowSteps: Uint32Array;
  /** (1): Adam steps of an input-major layer's bias vector. */
  biasSteps: Uint32Array;
  /** Present iff the layer is LSH-sampled (k >= 1 only). */
  sampling?: LayerSampling;
  /** The output layer's sparse per-label wide part (native/net_wide.h, WideConfig). Absent: none. */
  wide?: WideState;
}

/**
 * The wide part of an output layer: feature-major CSR over the network's input features, every array on a
 * SharedArrayBuffer. Feature f's entries are e in [offsets[f], offsets[f + 1]): label labels[e] (< outDim)
 * with weight weights[e]; logit j += sum over the sample's features f of x_f * weights[e] for f's entries
 * naming j. Offsets never decrease (checked where built and loaded; the kernels check only the ends).
 */
export interface WideState {
  /** The network's input dimension (layer 0's inDim). */
  inputDim: number;
  /** (inputDim + 1), from 0 to labels.length. */
  offsets: Uint32Array;
  /** (nnz) label ids, ascending within a feature. */
  labels: Uint32Array;
  /** (nnz) weights. */
  weights: Float32Array;
  /** (nnz) Adagrad sums of squared gradients. */
  accum: Float32Array;
  /**
   * Optional label-major index of the same pairs (a label-sharded rank's: wideByLabel in src/train/sharded.ts):
   * label j's pairs are k in [offsets[j], offsets[j + 1]) with feature features[k] and entry entries[k] (an
   * index into labels/weights/accum), features ascending within a label. netShardOutForward then reads only
   * the pairs of its active labels. Derived: never stored in files.
   */
  byLabel?: { offsets: Uint32Array; features: Uint32Array; entries: Uint32Array };
}

/** A k-means cluster index of a layer's neurons (augmented vectors [w_j, b_j]); see native/net_cluster.cc. */
export interface ClusterIndexSpec {
  /** Clusters, in [1, outDim]. */
  C: number;
  /** Sampled inference probes clusters by descending centre score until at least this many neurons are collected. */
  budget: number;
  /** (C, inDim + 2): unit centres in the transformed space [w_j / M, b_j / M, sqrt(1 - |[w_j, b_j]|^2 / M^2)]. */
  centroids: Float32Array;
  /** (C + 1), from 0 to outDim. */
  offsets: Uint32Array;
  /** (offsets[C]): the neurons of cluster c are members[offsets[c] .. offsets[c + 1]). */
  members: Uint32Array;
  /** Neurons every query scores, in no cluster. */
  head: Uint32Array;
}

/** The network handed to the kernels: layers from the input to the softmax output. */
export interface NetSpec {
  layers: LayerState[];
}

/** Dense gradient buffers of one layer (TrainHyper.grads, mode 1). */
export interface LayerGrads {
  /** Shaped like the layer's weights. */
  weights: Float32Array;
  /** (outDim). */
  bias: Float32Array;
}

/**
 * Gradient rows of one layer: what netTrainSlice returns per layer in mode 3, and what netApplyRows takes.
 * Row `ids[e]` (a feature of an input-major layer 0, a neuron of a later layer) has gradient
 * `rows[e * width .. (e + 1) * width)` (width = outDim for layer 0, else inDim). Each id appears at most once
 * in what mode 3 returns; netApplyRows sums repeated ids.
 */
export interface RowGradients {
  ids: Uint32Array;
  rows: Float32Array;
  /** Neuron-major layers: the bias gradient of each row (ids.length). Null for an input-major layer. */
  rowBias: Float32Array | null;
  /** Input-major layer 0: the bias gradient (outDim), null when the slice trained no sample. Null otherwise. */
  biasVector: Float32Array | null;
}

/** One contribution to netApplyRows: gradient rows of layer `layer`. */
export interface RowUpdate {
  layer: number;
  ids: Uint32Array;
  rows: Float32Array;
  rowBias?: Float32Array | null;
  biasVector?: Float32Array | null;
}

/** Hyper-parameters of one netTrainSlice call. */
export interface TrainHyper {
  /**
   * 0 Adam update, 1 add gradients into `grads` (weights untouched), 2 loss only, 3 return the gradient rows
   * of the rows the slice touched (weights untouched; see netApplyRows).
   */
  mode: 0 | 1 | 2 | 3;
  /** Adam learning rate (mode 0). */
  lr: number;
  beta1: number;
  beta2: number;
  eps: number;
  /** The loss is gradScale * (sum of per-sample losses); usually 1 / batch size. Default 1. */
  gradScale?: number;
  /**
   * u32 seed of this slice's random choices. Sample at position i of pointIds draws its random fill in
   * layer k from splitmix-style mix of ((seed << 32) | i, k) (native/net.h net_query_seed).
   */
  seed: number;
  /**
   * u32 seed of the random fill of a batch-shared set (LayerSampling.sharedFill) instead of `seed`.
   * Data-parallel training gives every part of a global batch the same fillSeed. Default: `seed`.
   */
  fillSeed?: number;
  /** Mode 1 only: one entry per layer; gradients are ADDED into these buffers. */
  grads?: LayerGrads[];
  /** Mode 1 with a wide output part: (its nnz) gradients of the wide weights, ADDED into. */
  gradWide?: Float32Array;
  /** Mode 0 with a wide output part: its Adagrad learning rate (required there). */
  wideLr?: number;
  /**
   * Threads (1..256) sharing the slice's dense work: layer 0's forward by samples, a dense output layer by
   * rows, layer 0's update by feature rows (native/net_parallel.h). Ignored in mode 3. Default 1.
   */
  threads?: number;
}

/**
 * Index of the fields of netTrainSlice's outStats (a Float64Array of at least 4, overwritten per call).
 * loss: sum of per-sample losses (not scaled by gradScale); samples: pointIds.length; active: sum of the
 * last layer's active-set sizes over the trained samples (points without labels are skipped); missed: true
 * labels found in none of their sample's L query buckets (sampled output layers; 0 when dense).
 */
export const TRAIN_STAT = { loss: 0, samples: 1, active: 2, missed: 3 } as const;

/**
 * Raw network functions of the addon (one call per mini-batch slice, never per sample).
 *
 * Memory: each calling thread keeps private scratch that grows to the largest slice seen and is reused
 * (no allocation in steady state). Roughly, in bytes: 4 * (10 * P + 3 * n * H + maxRows) + 40 * nnz, where
 * n = slice size, P = sum of the sampled layers' active-set sizes over the slice (n * outDim for none:
 * dense layers never store per-sample outputs of the output layer), H = sum of hidden widths, maxRows =
 * the widest layer or input dimension (row -> slot map), nnz = the slice's input nonzeros. Amazon-670K
 * with 128 samples and ~3,400 active labels: about 20 MB per thread. Gradients are never materialised
 * per layer: each touched row is updated as soon as its gradient is complete.
 * On Linux the first call on a thread asks for transparent huge pages on arrays of 16 MiB or more
 * (weights and Adam moments; random row access otherwise misses the TLB on every row).
 */
export interface NativeNetwork {
  /**
   * Instruction set of the dense block kernels selected for this CPU at load time: 'avx512', 'avx2', 'sse'
   * (x86-64 baseline); 'neon' or 'scalar' on arm64; 'generic' elsewhere. The environment variable
   * SUBLINEAR_BLOCK_ISA=avx2|sse (x86-64) or scalar (arm64) forces a lower one.
   */
  readonly netKernelIsa: 'avx512' | 'avx2' | 'sse' | 'neon' | 'scalar' | 'generic';
  /**
   * Whether sampled prediction's walk over the wide part's lists (native/net_wide_walk.cc) may use its
   * AVX-512 loop, which it does where netKernelIsa is 'avx512' (the default: true); false selects the scalar
   * loop, which gives the same sums (tests compare both). Returns whether the vector loop is now in use.
   */
  netWideVector(allow?: boolean): boolean;
  /**
   * Trains on rows `pointIds` of `data` (mode 0), accumulates their gradients (mode 1) or computes their loss
   * (mode 2). Per sample: forward through every layer (sampled layers: the LSH candidates of the sample's
   * activation; the last layer while training also gets the sample's labels first), softmax cross-entropy
   * with the labels split evenly, backward, then lazy Adam on the rows the slice touched (each row with
   * its own step count). Points without labels are skipped. Safe to call from several threads on the
   * same shared weights (HOGWILD).
   *
   * @param data SparseDataset (src/datasets/csr.ts): points, offsets (points+1), indices, values, labelOffsets, labelIndices.
   * @param pointIds (n) rows of this slice.
   * @param outStats Float64Array (>= 4), see TRAIN_STAT.
   */
  netTrainSlice(
    net: NetSpec,
    data: {
      points: number;
      offsets: Uint32Array;
      indices: Uint32Array;
      values: Float32Array;
      labelOffsets: Uint32Array;
      labelIndices: Uint32Array;
    },
    pointIds: Uint32Array,
    hyper: TrainHyper,
    outStats: Float64Array,
  ): RowGradients[] | undefined;
  /**
   * Lazy Adam on gradient rows computed by mode 3 (of this or other slices, threads or processes): per layer,
   * the rows of all `updates` are summed id by id in array order, then every distinct row takes one Adam step
   * with its own step count (rowSteps; a neuron-major row's bias shares it), and layer 0's bias vector one
   * step (biasSteps) when any update carries it. With the single update that mode 3 returned for a slice,
   * the weights end exactly as mode 0 on that slice leaves them. Every id and length is checked before any
   * weight changes. Data-parallel training (src/train/distributed.ts) gives every replica the same list.
   */
  netApplyRows(net: NetSpec, hyper: { lr: number; beta1: number; beta2: number; eps: number }, updates: RowUpdate[]): void;
  /**
   * Top-k labels of rows `pointIds`, in descending score order (ties: smaller id first), with softmax
   * probabilities over the computed set. sampled 0: every neuron of every layer is computed (exact);
   * sampled 1: LSH-sampled layers compute only their candidates (no labels added; random fill seeded by
   * the point id, so predictions are reproducible). Slots beyond the computed set: id 4294967295, value 0.
   *
   * With `scales` (S finite values, 1..64), the output layer's logits w_j . h + b_j are multiplied by each scale
   * before its wide part's scores are added, and the result holds each point's k best under every scale (one
   * candidate set for all of them; exact prediction makes a pass per scale).
   *
   * @param outIdx Uint32Array (n, S, k) (S = 1 without scales).
   * @param outVal Float32Array (n, S, k).
   * @param threads exact prediction (sampled 0) only: threads sharing the slice, each predicting a contiguous
   *   range of its points (the same results as one thread). 1 to 256; default 1.
   */
  netPredictSlice(
    net: NetSpec,
    data: { points: number; offsets: Uint32Array; indices: Uint32Array; values: Float32Array },
    pointIds: Uint32Array,
    k: number,
    sampled: 0 | 1,
    outIdx: Uint32Array,
    outVal: Float32Array,
    scales?: Float32Array,
    threads?: number,
  ): number;

  /**
   * Spherical k-means over `rows` (increasing ids) of a neuron-major layer after the MIPS transform of
   * [w_j, b_j]: Lloyd's iterations on about min(M, max(C, sample)) rows sampled in proportion to their
   * squared norm, then every row to its nearest centre (native/net_cluster.cc).
   * @param weights Float32Array (N, d); @param bias Float32Array (N), N = bias.length; @param rows Uint32Array (M).
   * @param outCentroids Float32Array (C, d + 2); @param outOffsets Uint32Array (C + 1); @param outMembers Uint32Array (M).
   * @param threads threads sharing the assignment passes (1..256 as every other native call, default 1); the index is the same for any.
   */
  netClusterBuild(
    weights: Float32Array, bias: Float32Array, d: number, rows: Uint32Array, C: number, iters: number, sample: number, seed: number,
    outCentroids: Float32Array, outOffsets: Uint32Array, outMembers: Uint32Array, threads?: number,
  ): void;
  /**
   * Maps every page of `net`'s training state now (weights, Adam moments, step counters, the wide part's
   * Adagrad sums), with the huge-page advice training's first call gives: a fresh network's moments are
   * otherwise first touched page by page during its first steps. Layer 0 may be a label-sharded rank's feature
   * slice. Returns the bytes mapped. Not while another thread trains on the same arrays.
   */
  netPrefault(net: NetSpec): number;
  /**
   * The huge-page advice training gives a large array (16 MiB and more; native/net_internal.h
   * advise_huge_pages), given before the array is first written: its pages are then faulted in as huge
   * pages instead of being copied into them when training first asks (a synchronous MADV_COLLAPSE of every
   * page written so far). A hint: failures are ignored. `huge` false: the opposite advice (4 KiB pages for the
   * pages not yet touched; LayerState.smallPages). Default true.
   */
  netAdviseHugePages(a: Float32Array, huge?: boolean): void;
  /**
   * Zeroes `a` and gives its whole pages back to the kernel (MADV_DONTNEED; native/net_internal.h
   * release_pages): it holds no memory until written again, even while another thread (a worker) still holds
   * the array. For training state a run no longer needs. Returns the bytes given back (0 where the kernel
   * refused, or on another OS: the array is then zeroed in place).
   */
  netReleasePages(a: Float32Array | Uint32Array): number;
  /**
   * a[i] = fround((2 u_i - 1) x limit) with u_i the i-th nextFloat() of the Xoshiro128 whose words() are
   * `state` (src/util/rng.ts): the Glorot draw of allocateLayers, the numbers its loop in JavaScript gives.
   */
  netGlorotFill(a: Float32Array, state: Uint32Array, limit: number, rows?: Uint32Array, width?: number): void;
  /**
   * For a cluster index built across label-sharded ranks (src/train/sharded-index.ts), as netClusterBuild
   * computes it: out[s] = |[w, b]|^2 (double) of row ids[s] of (weights (N, d), bias (N)).
   */
  netClusterNorms(weights: Float32Array, bias: Float32Array, d: number, ids: Uint32Array, out: Float64Array): void;
  /** out (n, d + 2): rows ids[s] after the maximum-inner-product transform (norm2 (N) by row, invM), as netClusterBuild draws its first centres. */
  netClusterTransform(weights: Float32Array, bias: Float32Array, d: number, ids: Uint32Array, norm2: Float64Array, invM: number, out: Float32Array): void;
  /**
   * outBest[s] = the centre (centroids (C, d + 2)) nearest to row ids[s] after the maximum-inner-product
   * transform (norm2 (N): the squared norms by row, invM: 1 / the largest norm); with sums (C, d + 2) and
   * counts (C), each transformed row is also added to its centre's sum and counted (one Lloyd iteration's part).
   */
  netClusterAssign(
    weights: Float32Array, bias: Float32Array, d: number, ids: Uint32Array, norm2: Float64Array, invM: number, centroids: Float32Array,
    outBest: Uint32Array, sums: Float64Array | null, counts: Float64Array | null,
  ): void;
  /**
   * The wide part's pairs chosen from `data`'s rows `rows` (every row when null): see buildWide
   * (src/network/wide.ts) and native/net_wide.h wide_build; `slice`: only those labels, stored under their
   * positions in it; `threads` (default 1, at most 1024): the labels split over that many threads, the same
   * pairs on any number. Fresh arrays: offsets (inputDim + 1), labels and weights (nnz).
   */
  netWideBuild(
    data: SparseDataset, rows: Uint32Array | null, inputDim: number, labels: number, maxPerLabel: number, init: number, minShare: number,
    slice: Uint32Array | null, threads?: number,
  ): { offsets: Uint32Array; labels: Uint32Array; weights: Float32Array };
}

/** A trained re-ranker's classifiers (native/net_rerank.cc, src/network/rerank.ts). */
export interface RerankArrays {
  /** (labels + 1) label j's entries are [offsets[j], offsets[j + 1]). */
  offsets: Uint32Array;
  /** (entries) input feature ids, ascending within a label. */
  features: Uint32Array;
  /** (entries) weights over the unit-length input row. */
  weights: Float32Array;
  /** (labels) intercepts (-1 for a label with no training example). */
  bias: Float32Array;
}

/** The re-ranker's kernels (native/net_rerank.cc). */
export interface NativeRerank {
  /**
   * Per label, a squared-hinge SVM (dual coordinate descent, rows at unit length, bias as a constant feature)
   * on the label's points among rows (null: every point) and the points whose shortlist row (rows x S; ids >=
   * labels and 0xFFFFFFFF ignored) holds it without it being theirs; weights with |w| <= prune dropped.
   * Deterministic for a seed whatever `threads` is.
   */
  rerankTrain(o: {
    data: SparseDataset; rows: Uint32Array | null; shortlist: Uint32Array; S: number; labels: number; features: number;
    C: number; eps: number; maxIter: number; prune: number; threads: number; seed: number;
    /** Only these labels (ids < labels) are trained, each as without `only` (a label-sharded rank's); the others get no weights and bias -1. Default: all. */
    only?: Uint32Array;
  }): RerankArrays;
  /** out (rows x S) = s_j(x / |x|) of each candidate j (rows x S; 0xFFFFFFFF: none, scored -inf) of each row. */
  rerankScore(o: {
    data: SparseDataset; rows: Uint32Array | null; candidates: Uint32Array; S: number; features: number;
    model: RerankArrays; threads: number; out: Float32Array;
  }): void;
  /** rerankCombine (src/network/rerank.ts): labels, probs, scores (rows x S) -> outLabels, outScores (rows x k). */
  rerankCombine(o: {
    labels: Uint32Array; probs: Float32Array; scores: Float32Array; S: number; weight: number; k: number;
    outLabels: Uint32Array; outScores: Float32Array;
  }): void;
}

/**
 * Label-sharded training and prediction (native/net_shard.h, src/train/sharded.ts): the training step split
 * into phases so that MPI ranks can exchange O(batch x hidden) values between them. Every phase runs on the
 * whole global batch. `net` is a rank's network: layer 0 holds the rows of the rank's input features (inDim of
 * them, `features` = D; `featureOf` (D) maps a feature to its row or -1), the layers between layer 0 and the
 * output are whole, and the output layer is the rank's slice of the labels (dense: no sampling; its wide part,
 * if any, holds the pairs of the slice's labels under their rows); d = the output layer's inDim. Phases 1, 2
 * and 5 keep their state in the calling thread's scratch, 3 and 4 in another: call them in order on one thread.
 */
export interface NativeShard {
  /**
   * Phase 1: layer 0's partial pre-activation over this rank's features. training = 1: the points of
   * `pointIds` that have labels (in order); training = 0: every point. outZ (pointIds.length, o_0): row i of
   * the first n = sum over point i's features f with featureOf[f] >= 0 of x_f W0[featureOf[f], :] (no bias);
   * returns n. The caller sums the rows over the ranks (MPI_Allreduce) before phase 2.
   */
  netShardInput(net: NetSpec, data: SparseDataset, pointIds: Uint32Array, training: 0 | 1, featureOf: Int32Array, outZ: Float32Array): number;
  /**
   * Phase 2: from Z (n, o_0), the summed pre-activations of the points of the last netShardInput on this
   * thread: layer 0's bias, activation and (training) dropout (each point's mask drawn from `seed` and its
   * position in that call's pointIds, as netTrainSlice with that seed draws it), then the layers between
   * layer 0 and the output, into outH (n, d). Returns n.
   */
  netShardHidden(net: NetSpec, Z: Float32Array, training: 0 | 1, seed: number, outH: Float32Array): number;
  /**
   * Phase 3 over the global batch: `rows` (B) its labelled points, H (B, d) their hidden activations,
   * localOf (numLabels) global label -> row of this slice or -1. outStats (B, 3) = [max logit, sum of
   * exp(z - max), sum of the logits of the sample's labels in this slice] over the active set S: every row
   * when minActive is 0, else this rank's part of one process's batch-shared set over all numLabels labels
   * (the batch's labels (batchNegatives, default 1), then ids drawn from the batch's stream until it holds
   * minActive), so that the ranks' sets together are one process's; logQ (this slice's rows of one process's
   * correction) added to S's logits; with a wide part, each sample's wide terms of the labels in S too. Returns |S|.
   */
  netShardOutForward(
    net: NetSpec, data: SparseDataset, rows: Uint32Array, H: Float32Array, localOf: Int32Array, seed: number, minActive: number,
    logQ: Float32Array | null, outStats: Float64Array, batchNegatives?: 0 | 1,
  ): number;
  /**
   * Phase 4: from the global log-sum-exp of every sample (B), dz = (softmax - y) * gradScale on S; mode 0
   * takes the Adam step of S's rows and the Adagrad step of the wide terms of phase 3 (at `wideLr`, required
   * with a wide part), mode 2 changes nothing. outDH (B, d) = this slice's part of dL/dH (the wide part has
   * no share in it).
   */
  netShardOutBackward(net: NetSpec, lse: Float64Array, hyper: { mode: 0 | 2; lr: number; beta1: number; beta2: number; eps: number; gradScale: number; wideLr?: number }, outDH: Float32Array): void;
  /**
   * Phase 5: Adam on the layers below the output from dH (n, d), dL/dH summed over the ranks, for the points of
   * the last training netShardHidden on this thread: the middle layers and layer 0's bias as one process
   * updates them (every rank alike), layer 0 in the rows of this rank's features only.
   */
  netShardLowerBackward(net: NetSpec, data: SparseDataset, dH: Float32Array, hyper: { lr: number; beta1: number; beta2: number; eps: number }, featureOf: Int32Array): void;
  /**
   * Exact scores of this slice for the q = rows.length points `rows` of `data`, H (q, d) their hidden
   * activations (their features give the wide terms): outIdx/outVal (q, k) the k best (local row, logit),
   * descending, ties by the smaller row (UINT32_MAX / -inf when the slice is smaller than k); outStats (q, 2)
   * = [max logit, sum of exp(z - max)] over the slice.
   */
  netShardScore(net: NetSpec, data: SparseDataset, rows: Uint32Array, H: Float32Array, k: number, outIdx: Uint32Array, outVal: Float32Array, outStats: Float64Array, scale?: number): void;
  /**
   * Sampled prediction of this slice for the points `rows` (H (q, d) their hidden activations), the part of one
   * process's cluster-index prediction that falls on this rank's labels (native/net_shard.cc): `index` is this
   * rank's part of an index built across the ranks (its members and head rows, every rank's cluster sizes and
   * head count, the candidate budget). out: per point and scale (scales: the network's logit multipliers, null:
   * 1) the k best (local row, raw score), ties by the smaller row, and [max, sum of exp(score - max)] over the
   * labels scored. Without `prop` (one rank) the wide part's wideExtra best proposals join the candidates, as in
   * one process. With `prop` (several ranks) `out` covers the candidates alone, and `prop` gets each point's
   * wideExtra best proposals of this rank, best first (descending wide score, ties by the smaller row): local
   * rows, wide scores and raw scores (q, scales, wideExtra), UINT32_MAX / -inf past the count, for the caller to
   * keep the wideExtra best over every rank. `probes`: the clusters each point probes (offsets (q + 1) into
   * clusters, in probe order: netShardProbe's lists), instead of scoring the centres here. Returns the outputs
   * scored (with `prop`, the candidates).
   */
  netShardSampledScore(
    net: NetSpec, data: SparseDataset, rows: Uint32Array, H: Float32Array,
    index: { centroids: Float32Array; offsets: Uint32Array; members: Uint32Array; sizes: Uint32Array; head: Uint32Array; headTotal: number; budget: number },
    k: number, scales: Float32Array | null, wideExtra: number,
    out: { idx: Uint32Array; val: Float32Array; lse: Float64Array }, prop: { idx: Uint32Array; val: Float32Array; comb: Float32Array } | null,
    probes?: { offsets: Uint32Array; clusters: Uint32Array } | null,
  ): number;
  /**
   * The clusters one process probes for each of the points whose output-layer inputs are H (q, d), under the part
   * of a cluster index that every rank holds alike (centroids, every rank's cluster sizes, the head's size, the
   * candidate budget): point i's counts[i] clusters, in probe order, at clusters[i C ..] (out.clusters: q x C).
   * netShardSampledScore takes such lists as `probes` (the ranks compute them for a share of the points each).
   */
  netShardProbe(
    net: NetSpec, H: Float32Array, index: { centroids: Float32Array; sizes: Uint32Array; headTotal: number; budget: number },
    out: { counts: Uint32Array; clusters: Uint32Array },
  ): void;
}
