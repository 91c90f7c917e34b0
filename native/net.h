// Network kernels: training and prediction of a stack of fully connected layers over a sparse input,
// one call per mini-batch slice (never per sample). Layouts: docs/design.md ("Network state").
//
// Legend
//   n        samples in the slice (pointIds.length; for training, the points that have labels)
//   D        input features (layer 0's inDim);  d_k / o_k = inDim / outDim of layer k;  Lk = last layer
//   W_k      layer 0: (D, o_0) input-major (row f = feature f); k >= 1: (o_k, d_k) neuron-major (row j = neuron j)
//   A_k      (n, o_k) activations of hidden layer k; a sampled layer's inactive neurons are 0
//   S_k(i)   active set of layer k for sample i: all o_k neurons when dense, else the LSH candidates
//            (for the last layer while training: the sample's labels first, then candidates, then random fill)
//
// Forward, per sample i (x = the sample's CSR row):
//   A_0 = act(b_0 + sum_{f in nnz(x)} x_f W_0[f, :])
//   z_k[j] = b_k[j] + W_k[j, :] . A_{k-1}       for j in S_k(i)
//   last layer with a wide part (net_wide.h): z_Lk[j] += sum_{f in nnz(x)} x_f u[f, j] over stored pairs
//   hidden: A_k = act(z_k) (relu / linear), last: p = softmax over S_Lk(i)
// Loss: labels y split evenly (1/|labels| each); loss_i = -sum_j y_j log p_j. Points without labels are
// skipped by training (no loss, no gradient, no rows touched).
// Backward (all scaled by gradScale): dz = p - y on S_Lk(i); dW_k[j, :] += dz_j A_{k-1}; dA_{k-1} += dz_j W_k[j, :]
// (pre-update weights); dz_{k-1} = dA_{k-1} * act'(z_{k-1}) on the active set; dW_0[f, :] += x_f dz_0.
// Update: lazy Adam on the rows the slice touched (rows of active neurons; layer 0: rows of the slice's
// features), each with its own step count rowSteps[r]; the bias of neuron j shares row j's count, layer 0's
// bias vector uses biasSteps[0].
//
// Threads: several threads may train the same weights concurrently (HOGWILD: plain float loads/stores,
// no locks; step counters are incremented atomically). All scratch memory is thread_local and reused.
#pragma once
#include <cstddef>
#include <cstdint>

#include "lsh.h"
#include "net_kernels.h"

namespace sl {

enum class Activation : uint32_t { ReLU = 0, Softmax = 1, Linear = 2 };

// Cluster index of a sampled output layer for sampled inference (net_cluster.cc): C centres of the
// neurons' augmented vectors [w_j, b_j] and each cluster's members.
struct ClusterIndex {
  uint32_t C = 0;
  const float* centroids = nullptr;  // (C, inDim + 2) unit centres in the transformed space [x / M, lift]
  const uint32_t* offsets = nullptr; // (C + 1): cluster c's neurons are members[offsets[c] .. offsets[c+1])
  const uint32_t* members = nullptr; // (offsets[C]) neurons, each at most once
  const uint32_t* head = nullptr;    // (nHead) neurons every query scores (not in any cluster)
  uint32_t nHead = 0;
  uint32_t budget = 0;               // clusters are probed until at least this many neurons are collected
};

// Views into one JS LayerState (all arrays TS-owned, usually on SharedArrayBuffers).
struct NetLayer {
  uint32_t inDim = 0, outDim = 0;
  Activation act = Activation::ReLU;
  bool inputMajor = false;
  float* W = nullptr;      // inputMajor ? (inDim, outDim) : (outDim, inDim)
  float* b = nullptr;      // (outDim)
  float* mW = nullptr;     // Adam moments, shaped like W
  float* vW = nullptr;
  float* mb = nullptr;     // (outDim)
  float* vb = nullptr;
  uint32_t* rowSteps = nullptr;   // inputMajor ? (inDim) : (outDim)
  uint32_t* biasSteps = nullptr;  // (1)
  bool sampled = false;           // sampling object present
  bool hasTables = false;         // sampled and its tables parsed (prediction may leave them out: net_napi.cc)
  HashParams hash;                // hash.dim == inDim
  Tables tables;                  // tables.N == outDim
  QueryOptions query;
  // Training: every sample of a slice draws the same random fill (negatives shared across the batch), so a
  // batch touches ~minActive + its candidates and labels rows instead of ~n * minActive: lazy Adam's cost
  // is proportional to the distinct rows touched. Each sample's negatives are still uniform.
  bool sharedFill = true;
  // Training: the labels of the other samples of the slice join each sample's active set as negatives
  // (in-batch negatives). They are rows the batch updates anyway (as positives), so they add compute but no
  // Adam rows, and they are drawn in proportion to label frequency: the frequent labels that a uniform fill
  // rarely reaches and that dominate wrong top-1 predictions.
  bool batchNegatives = false;
  // Training with a wide part (shared-set path): per sample, this many hard negatives, the labels its wide
  // part scores highest outside the shared set and its own labels (net_train.cc append_wide_negatives).
  uint32_t wideNegatives = 0;
  // Training only: fraction of this hidden layer's outputs zeroed per sample (inverted dropout: kept
  // outputs are scaled by 1 / (1 - dropout), so prediction uses the layer as it is). Dense hidden layers.
  float dropout = 0;
  // Training a sampled output layer with a shared set S: (outDim) logit corrections -log q_j added to the
  // logits of S's rows, q_j = the probability that neuron j is in S (sampled-softmax correction: the
  // sampled log-sum-exp then estimates the full one). Null: none.
  const float* logQ = nullptr;
  // Sampled inference: candidates from the cluster index instead of the hash tables (when present).
  bool hasIndex = false;
  ClusterIndex index;
  // Output layer: the sparse per-label wide part (net_wide.h), feature-major over the network's input
  // features: entries wideOff[f] .. wideOff[f+1] hold (label wideLab[e], weight wideW[e]) of feature f.
  bool hasWide = false;
  const uint32_t* wideOff = nullptr;  // (D + 1), D = layer 0's inDim
  const uint32_t* wideLab = nullptr;  // (nnz) label ids < outDim
  float* wideW = nullptr;             // (nnz)
  float* wideAcc = nullptr;           // (nnz) Adagrad: sums of squared gradients
  uint32_t wideD = 0;                 // features of wideOff (must equal the network's input features)
  // Optional label-major index of the same pairs (a label-sharded rank's, WideState.byLabel): label j's
  // pairs are k in [wideByOff[j], wideByOff[j+1]), feature wideByFeat[k], entry wideByEntry[k] (an index into
  // wideLab/wideW), features ascending within a label. Lets a phase that needs the terms of a few labels
  // read only those labels' pairs instead of scanning every pair of the batch's features.
  const uint32_t* wideByOff = nullptr;   // (outDim + 1)
  const uint32_t* wideByFeat = nullptr;  // (nnz)
  const uint32_t* wideByEntry = nullptr; // (nnz)
  // Layer 0: the network's input features D. Equal to inDim, except in a label-sharded rank's network
  // (net_shard.cc), whose layer 0 holds the rows of only some features (inDim of them, in a map the phases
  // take: feature -> row or -1); only the netShard* phases accept such a layer.
  uint32_t featureDim = 0;
  // rows of W: (inputMajor ? inDim : outDim); width of a row: (inputMajor ? outDim : inDim)
  uint32_t rows() const { return inputMajor ? inDim : outDim; }
  uint32_t width() const { return inputMajor ? outDim : inDim; }
};

// The dataset in CSR form (docs/design.md). Bounds: indices/values hold `nnz` entries, labelIndices `nLabels`.
struct CsrView {
  uint32_t points = 0;
  const uint32_t* offsets = nullptr;       // (points + 1)
  const uint32_t* indices = nullptr;       // (nnz)
  const float* values = nullptr;           // (nnz)
  size_t nnz = 0;
  const uint32_t* labelOffsets = nullptr;  // (points + 1), null when labels are not needed
  const uint32_t* labelIndices = nullptr;  // (nLabels)
  size_t nLabels = 0;
};

struct TrainHyper {
  // 0 adam, 1 gradient (added into gradW/gradB), 2 loss only, 3 sparse gradient (the touched rows'
  // gradients into sink[k], weights untouched; data-parallel training applies them with net_apply_rows)
  uint32_t mode = 0;
  float lr = 0, beta1 = 0.9f, beta2 = 0.999f, eps = 1e-8f;
  float gradScale = 1;  // the loss is gradScale * sum of per-sample losses
  uint32_t seed = 0;    // per slice: seeds each sample's random fill
  // Seeds the random fill of a batch-shared set (sharedFill); default: seed. Data-parallel training gives
  // every part of a global batch the same fillSeed, so the parts' shared sets mostly coincide (one
  // prefix of one stream) and their rows sum instead of adding up.
  uint32_t fillSeed = 0;
  bool hasFillSeed = false;
  float* const* gradW = nullptr;  // mode 1: per layer, shaped like W
  float* const* gradB = nullptr;  // mode 1: per layer, (outDim)
  nk::GradRows* sink = nullptr;   // mode 3: per layer, cleared by the call
  float* gradWide = nullptr;      // mode 1 with a wide output part: (nnz) gradients of its weights
  float wideLr = 0;               // mode 0 with a wide output part: its Adagrad learning rate
  // Threads sharing this slice's dense work (net_parallel.h): layer 0's forward by samples, a dense output
  // layer by rows, layer 0's update by feature rows. 1: the calling thread alone. Modes 0-2 (mode 3's
  // gradient rows are collected by one thread).
  uint32_t threads = 1;
};

// Stats written by net_train_slice (overwritten, not accumulated).
enum TrainStat { kStatLoss = 0, kStatSamples = 1, kStatActive = 2, kStatMissed = 3, kNumTrainStats = 4 };

// Checks that the layers form a network (dims chain, activations, sampling only on k >= 1, hash/tables
// sizes). Throws ArgError. Called by the bindings after parsing.
void net_check_layers(const NetLayer* layers, uint32_t nLayers);

// Trains (mode 0), accumulates gradients (mode 1) or evaluates the loss (mode 2) on rows pointIds[0..n).
// stats (4): [sum of per-sample losses (unscaled), n (samples in the slice), sum of last-layer active-set
// sizes (trained samples), true labels absent from all of the sample's L query buckets of a sampled last layer].
// Validates the slice's rows (ids, CSR bounds, feature ids < D, labels < o_Lk and strictly increasing)
// before touching any weight; throws ArgError.
void net_train_slice(double* stats, const NetLayer* layers, uint32_t nLayers, const CsrView& data,
                     const uint32_t* pointIds, uint32_t n, const TrainHyper& h);

// One contribution to net_apply_rows: gradient rows of layer `layer` (ids (n), rows (n, width), rowBias (n)
// for a neuron-major layer, else null) and, for an input-major layer, its bias gradient (outDim) or null.
struct RowGrads {
  uint32_t layer = 0;
  const uint32_t* ids = nullptr;
  uint32_t n = 0;
  const float* rows = nullptr;
  const float* rowBias = nullptr;
  const float* biasVector = nullptr;
};

// Lazy Adam on the rows named by contributions c[0..nc): per layer, the rows of all contributions are summed
// id by id in contribution order (so every caller given the same list computes the same sums), then each
// distinct row takes one Adam step with t = ++rowSteps[row] (a neuron-major row's bias too), and an input-major
// layer's bias vector takes one step with t = ++biasSteps[0] when any contribution carries it: the update of
// mode 0, for gradients computed elsewhere (mode 3 on other slices or processes). Checks every id and length
// before changing any weight; throws ArgError.
void net_apply_rows(const NetLayer* layers, uint32_t nLayers, const RowGrads* c, uint32_t nc, const TrainHyper& h);

// Spherical k-means cluster index over rows[0..M) (increasing ids < N) of a neuron-major layer (W (N, d),
// b (N)) after the MIPS transform; see net_cluster.cc. centroids (C, d + 2), offsets (C + 1), members (M).
// Lloyd's iterations on about max(C, min(sample, M)) rows sampled in proportion to |[w, b]|^2, then every
// row to its nearest centre (largest cosine). centroids are unit vectors in the transformed space (d + 2).
// Deterministic in seed, whatever `threads` (the calling thread and helpers sharing the assignment passes).
// Throws ArgError on C == 0, C > M or bad rows.
void cluster_build(float* centroids, uint32_t* offsets, uint32_t* members, const float* W, const float* b, uint32_t N,
                   uint32_t d, const uint32_t* rows, uint32_t M, uint32_t C, uint32_t iters, uint32_t sample,
                   uint64_t seed, uint32_t threads = 1);

// The pieces of cluster_build for an index built across label-sharded ranks (src/train/sharded-index.ts), each
// computed as cluster_build computes it for the same rows, so that the ranks together build one process's index:
// cluster_norms: out[s] = |[W[ids[s]], b[ids[s]]]|^2 in double (b^2 first, then the weights in order).
// cluster_assign: best[s] = the centre (C, d + 2) of largest inner product with row ids[s] after the MIPS
// transform (norm2[j]: row j's squared norm, by row id; invM 1 / the largest norm); with sums (C, d + 2) and counts (C),
// the transformed rows are also added to their centre's sum (in double, rows in order) and counted.
// cluster_transform: out (n, d + 2) = the transformed rows ids[s] (a centre drawn from them).
void cluster_transform(float* out, const float* W, const float* b, uint32_t d, const uint32_t* ids, uint32_t n,
                       const double* norm2, double invM);
void cluster_norms(double* out, const float* W, const float* b, uint32_t d, const uint32_t* ids, uint32_t n);
void cluster_assign(uint32_t* best, double* sums, double* counts, const float* W, const float* b, uint32_t d,
                    const uint32_t* ids, uint32_t n, const double* norm2, double invM, const float* centroids, uint32_t C);

// Forward only. outIdx/outVal (n, k): the k best labels of each row (descending score, ties by smaller id)
// with their softmax probabilities over the computed set; missing slots get UINT32_MAX / 0.
// sampled = false: every neuron of every layer is computed (exact). sampled = true: LSH-sampled layers
// compute only their candidates (no required ids; random fill seeded by the point id).
// scales[0..S) (S >= 1; null or S = 0: one scale of 1): the output layer's logits w_j . h + b_j are
// multiplied by each scale before its wide part's scores are added, and outIdx/outVal are (n, S, k): sample
// i's k best under scale si at ((i S) + si) k (held-out blending, ValidationOptions.blend: one candidate set
// serves every scale; exact prediction makes one pass per scale).
// threads > 1 (exact prediction only): the samples in contiguous ranges, one per thread (net_parallel.h), each
// predicted as a slice of its own; no sample's scores depend on the others', so the output is the same.
// Returns the number of output neurons scored over the slice (n * outDim when exact), once whatever S.
double net_predict_slice(uint32_t* outIdx, float* outVal, const NetLayer* layers, uint32_t nLayers,
                         const CsrView& data, const uint32_t* pointIds, uint32_t n, uint32_t k, bool sampled,
                         const float* scales = nullptr, uint32_t S = 1, uint32_t threads = 1);

// Seed of sample `key`'s random fill in layer `layer`. Training: key = (uint64(seed) << 32) | position in
// pointIds; prediction: key = point id.
inline uint64_t net_query_seed(uint64_t key, uint32_t layer) {
  uint64_t z = key * 0x9E3779B97F4A7C15ull + (uint64_t(layer) + 1) * 0xD1B54A32D192ED03ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

}  // namespace sl
