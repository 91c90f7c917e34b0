// Shared internals of net_train.cc and net_predict.cc: the per-thread scratch, slice validation, the forward
// pass of the hidden layers and the LSH active sets. Legend: net.h and net_kernels.h.
#pragma once
#include <algorithm>
#include <cstdint>
#include <limits>
#include <vector>

#include "lsh.h"
#include "net.h"
#include "net_kernels.h"
#include "net_wide.h"
#include "topk.h"

#if defined(__x86_64__) || defined(__i386__)
#include <xmmintrin.h>
#endif

namespace sl {
namespace net {

// Grows v to at least n elements (never shrinks: steady-state calls allocate nothing) and returns its data.
template <typename T> inline T* grow(std::vector<T>& v, size_t n) {
  if (v.size() < n) v.resize(n);
  return v.data();
}

// Flush-to-zero / denormals-are-zero while a kernel runs (tiny Adam moments and softmax tails would
// otherwise hit the slow denormal path); the caller's floating-point state is restored on exit.
struct FtzScope {
#if defined(__x86_64__) || defined(__i386__)
  unsigned saved;
  FtzScope() : saved(_mm_getcsr()) { _mm_setcsr(saved | 0x8040u); }
  ~FtzScope() { _mm_setcsr(saved); }
#elif defined(__aarch64__) && defined(__GNUC__)
  // FPCR.FZ (bit 24): flush denormal inputs and results to zero, as FTZ + DAZ do on x86.
  unsigned saved;
  FtzScope() : saved(__builtin_aarch64_get_fpcr()) { __builtin_aarch64_set_fpcr(saved | (1u << 24)); }
  ~FtzScope() { __builtin_aarch64_set_fpcr(saved); }
#endif
};

// Inverted index of a list of (row id) entries: for each distinct row, the positions naming it.
struct RowIndex {
  std::vector<uint32_t> rows, rowStart, entPos, entSample, cursor;
  std::vector<float> coef;  // (entries) per-entry coefficients of a backward pass, entry order
  nk::RowList view() const {
    return nk::RowList{rows.data(), rowStart.data(), entPos.data(), entSample.data(), static_cast<uint32_t>(nRows)};
  }
  size_t nRows = 0;
};

// Activations and active sets of one layer for the current slice.
struct LayerBuf {
  std::vector<float> A;           // (n, lda) hidden layers: activations, row-major, zero padding
  std::vector<float> At;          // (o, ldn) the same, transposed
  uint32_t lda = 0;
  // Sampled layers: CSR active sets. Sample i's active neurons are actIds[actOff[i] .. actOff[i+1]).
  std::vector<uint32_t> actOff;   // (n + 1)
  std::vector<uint32_t> actIds;   // (P)
  std::vector<uint32_t> sampleOf; // (P) sample of each position
  std::vector<float> z;           // (P) hidden: activation; last: logits
  std::vector<float> dz;          // (P) last: probabilities, then dL/dz
  RowIndex index;                 // rows of actIds
  std::vector<float> keep;        // (n, lda) training with dropout: 0 or 1 / (1 - dropout) per output
};

struct Scratch {
  std::vector<LayerBuf> layer;
  std::vector<int32_t> slotOf;        // row -> slot of a RowIndex under construction; -1 when unused
  std::vector<uint32_t> rowsOfSlice;  // (n) dataset rows of the slice's samples
  std::vector<uint32_t> posOfSlice;   // (n) their positions in pointIds
  std::vector<uint32_t> keys;         // (n, L) query keys
  std::vector<uint32_t> required;     // (labels of a sample + labels of its slice) required ids of a query
  std::vector<uint32_t> batchLabels;  // distinct labels of a slice
  std::vector<uint32_t> labelMark;    // (N) labelMark[id] == labelEpoch <=> id in batchLabels / shared
  uint32_t labelEpoch = 0;
  std::vector<uint32_t> shared;       // the slice's shared set S, ascending (shared_set)
  std::vector<uint32_t> posInShared;  // (N) position of a marked id in shared
  std::vector<uint32_t> ownExtra;     // (n) labels of sample i outside S (the first entries of its extras)
  std::vector<float> zS;              // (|S|, ldn) logits of the shared set
  std::vector<float> wg, bg;          // (kRowBlock, d), (kRowBlock) gathered rows of S
  std::vector<HashScratch> hashS;     // per layer
  std::vector<QueryScratch> queryS;   // per layer
  // backward
  std::vector<float> dAt, dAtPrev;    // (d, ldn) gradient w.r.t. a hidden layer's output, transposed
  std::vector<float> dX;              // (n, ldx) row-major gradient from a row-list pass
  std::vector<float> g;               // (kRowBlock, ldx) row gradients
  std::vector<float> gb;              // (max(kRowBlock, o_0))
  std::vector<float> zt, dzt;         // (kRowBlock, ldn)
  std::vector<float> zAll;            // (o, ldn) a dense output layer's logits, kept from pass 1 for pass 2
  std::vector<float> mx, sum, lse, scale, zlab;  // (ldn) softmax statistics
  std::vector<uint64_t> labelPairs;   // (label << 32 | sample), sorted by label
  // layer 0 inverted index
  std::vector<uint32_t> l0Row, l0Sample;
  std::vector<float> l0Coef;
  RowIndex l0Index;
  // prediction
  std::vector<uint32_t> candIds, candCount, tmpIdx;
  std::vector<float> candVal, thr, tmpVal;
  std::vector<float> zHead;           // (nHead, ldn) head scores of a cluster-index prediction
  // Cluster-index prediction: the (sample, cluster) probes of a slice, and where each probe's members start
  // in the sample's candidates (actIds); probeOrder/cluStart group the probes by cluster.
  std::vector<uint32_t> probeSample, probeCluster, probePos, probeOrder, cluStart;
  // wide output part (net_wide.h): the slice's terms; extraPos (N, -1 when unused) maps a sample's extra
  // labels to their positions. wide_scores: wideTouched and wideSum hold one sample's labels and their wide
  // scores in the order first touched; wideSlot16 (a row of at most 65,535 list entries) or wideSlot32 (N)
  // map a label to its place there, read only for a label whose bit in wideMarks is set. The marks are bits
  // and the places 2 bytes so that they stay in L1 (25 KB at 200,000 labels) and L2 (400 KB).
  std::vector<WideTerm> wide;
  std::vector<uint32_t> wideTarget;
  std::vector<int32_t> extraPos;
  std::vector<uint64_t> wideActive;      // wide_shared_forward: (ceil(N / 64)) a bit per active label
  std::vector<uint32_t> negIds, negOff;  // append_wide_negatives: the extras before the hard negatives
  std::vector<uint8_t> negActive;        // append_wide_negatives: (N) 1 for the sample's active labels
  std::vector<float> wideSum;
  std::vector<uint64_t> wideMarks;
  std::vector<uint32_t> wideTouched;
  std::vector<uint16_t> wideSlot16;
  std::vector<uint32_t> wideSlot32;
  bool wideSlotWide = false;       // the last wide_scores used wideSlot32
  std::vector<float> wideVals;     // wide_candidates: the scores of the labels that are not candidates
  std::vector<float> wideDense;    // wide_candidates: (N) a label's wide score, kWideUntouched when it has none
  // Intra-batch threads (TrainHyper.threads > 1): part t's buffers, used by the thread running part t.
  struct Part {
    std::vector<float> zt, dzt, g, gb, mx, sum, dAt;
  };
  std::vector<Part> parts;
};

// The calling thread's scratch (thread_local: worker threads never share it).
Scratch& scratch();

// Builds idx over ids[0..P) (every id < maxId) using s.slotOf; rows in ascending order, each row's entries
// in increasing position order; entSample[e] = sampleOf[entPos[e]].
void build_index(RowIndex& idx, const uint32_t* ids, const uint32_t* sampleOf, size_t P, uint32_t maxId, Scratch& s);

// Checks rows pointIds[0..n) of data: ids < points, CSR bounds, feature ids < D, and (needLabels) label
// bounds, label ids < numLabels, strictly increasing labels. Throws ArgError before any work is done.
void check_slice(const CsrView& data, const uint32_t* pointIds, uint32_t n, uint32_t D, bool needLabels,
                 uint32_t numLabels);

// Per-slice forward context.
struct ForwardCtx {
  uint32_t n = 0, ldn = 0;
  const uint32_t* rows = nullptr;  // (n) dataset rows
  bool useSampling = true;         // false: every layer computes all neurons (exact prediction)
  bool training = true;            // seeds: (seed << 32 | position) when training, point id otherwise
  uint32_t seed = 0;
  uint32_t fillSeed = 0;           // training: seeds the random fill of a batch-shared set (shared_set)
  const uint32_t* positions = nullptr;  // (n) training: positions in pointIds
  uint32_t threads = 1;            // threads sharing layer 0's forward (TrainHyper.threads)
};

// Forward of layers 0 .. nHidden-1 (all but the last) into s.layer[k].A / At. Layer 0's pre-activation is
// left in s.layer[0].A (with its activation applied only when layer 0 is hidden, i.e. nHidden >= 1).
// Returns nothing; throws ArgError on corrupt tables.
void forward_hidden(const NetLayer* layers, uint32_t nLayers, const CsrView& data, const ForwardCtx& c, Scratch& s);

// The parts of forward_hidden, for the label-sharded phases (net_shard.cc), which form layer 0's
// pre-activation in s.layer[0].A themselves (lda = pad_to(o_0, kDimPad), padding zero):
//   finish_layer0: layer 0's activation, dropout (training) and transposed copy At;
//   forward_upper: layers 1 .. nLayers - 2 from s.layer[0].
void finish_layer0(const NetLayer& L0, LayerBuf& b0, const ForwardCtx& c);
void forward_upper(const NetLayer* layers, uint32_t nLayers, const ForwardCtx& c, Scratch& s);

// Active sets of sampled layer k for all samples into buf.actOff/actIds/sampleOf: sample i's input is
// row i of X (n, ldx). labels (optional, training the last layer): sample i's labels (the CSR label row of
// c.rows[i]) are required ids and come first, in order. missed (optional): += labels found in none of the
// sample's L query buckets. excludeShared: the per-sample part of a shared-set slice (after shared_set):
// no random fill, ids of S dropped, s.ownExtra[i] = how many of sample i's labels remain (they come first).
void sampled_active_sets(LayerBuf& buf, const NetLayer& L, uint32_t k, const float* X, uint32_t ldx,
                         const ForwardCtx& c, const CsrView* labels, double* missed, Scratch& s,
                         bool excludeShared = false);

// The batch-shared set S of a training slice of sampled output layer k (sharedFill): the slice's distinct
// labels when batchNegatives, then uniform random ids without repeats until |S| >= minActive (every id when
// that is more than half the layer), drawn from one stream per (slice seed, layer). Into s.shared, ascending;
// marks S in s.labelMark and sets s.posInShared. Returns |S|.
uint32_t shared_set(const NetLayer& L, uint32_t k, const CsrView& labels, const ForwardCtx& c, Scratch& s);

// Sampled inference with a cluster index (L.hasIndex): sample i's cluster candidates are the members of the
// clusters with the best centre scores [h_i, 1, 0] . centre, taken until, with the head, at least
// L.index.budget neurons; into buf.actOff/actIds (the head is not included), and each probe into
// s.probeSample/probeCluster/probePos. prev: the layer's input.
void cluster_active_sets(LayerBuf& buf, const NetLayer& L, const LayerBuf& prev, uint32_t n, uint32_t ldn, Scratch& s);

// Asks the kernel to back a large array with transparent huge pages (MADV_HUGEPAGE for pages not yet
// touched, MADV_COLLAPSE for pages already present, Linux >= 6.1). Random rows of a 300 MB weight matrix
// otherwise miss the TLB on every access (4 KiB pages). Done once per array per thread (a small
// thread-local list of advised ranges); failures are ignored (it is only a hint). No-op off Linux.
void advise_huge_pages(const void* p, size_t bytes);

// The opposite advice (MADV_NOHUGEPAGE): pages not yet touched are faulted in 4 KiB at a time. For an array of
// which few rows are ever written (the Adam moments of a layer 0 whose training data holds few of its input
// features: lazy Adam writes only those rows, and a huge page would zero 2 MiB around each one). Pages already
// present stay as they are. Also forgets this thread's advice of the range (advise_huge_pages gives it again).
void advise_small_pages(const void* p, size_t bytes);

// Maps every page of [p, p + bytes) now, as a write would, keeping its contents (MADV_POPULATE_WRITE, else a
// rewrite of one byte per page): the first steps of training then do not stop at each untouched page of a new
// network's moments. Returns the bytes populated. Callers run it before anything else uses the array.
size_t populate(void* p, size_t bytes);

// Gives the whole pages of [p, p + bytes) back to the kernel (MADV_DONTNEED) and zeroes the bytes around them:
// the array reads as zeros afterwards and holds no memory until written again. For training state that a run
// no longer needs (the Adam moments once its epochs are trained): dropping the JavaScript array alone frees its
// memory only when the garbage collector runs, and never while a worker thread still holds the array. Returns
// the bytes given back (0 where the kernel refused: the array is then zeroed in place).
size_t release_pages(void* p, size_t bytes);

// act applied in place to x[0..n); relu or identity.
void apply_activation(float* x, size_t n, Activation a);

// Training with L.dropout > 0 on dense hidden layer k: draws buf.keep (n, lda) (0 or 1 / (1 - dropout);
// padding 0) from stream net_query_seed((seed << 32) | position, 1000 + k) of each sample and multiplies
// buf.A by it. Returns false (and leaves buf untouched) when the layer has no dropout or c is not training.
bool apply_dropout(const NetLayer& L, uint32_t k, LayerBuf& buf, uint32_t width, const ForwardCtx& c);

// A cluster's centre score as the probe order reads it: a NaN (weights gone NaN) ranks last, below every number, so
// the order (descending score, ties by the smaller cluster) stays a strict weak one, which std::sort and
// std::partial_sort need to stay inside the array, and one process and the label-sharded ranks probe alike.
inline float probe_score(float z) { return z == z ? z : -std::numeric_limits<float>::infinity(); }

// Label j's bit in s.wideMarks (wide_scores).
inline bool wide_marked(const Scratch& s, uint32_t j) { return (s.wideMarks[j >> 6] >> (j & 63)) & 1u; }
inline void wide_unmark(Scratch& s, uint32_t j) { s.wideMarks[j >> 6] &= ~(uint64_t(1) << (j & 63)); }

// The walk of wide_scores with a place map of type Slot (see Scratch::wideSlot16).
template <typename Slot, typename Skip>
size_t wide_walk(const NetLayer& L, const CsrView& data, uint32_t row, Scratch& s, Skip skip, std::vector<Slot>& slots,
                 size_t entries) {
  const uint32_t N = L.outDim;
  if (slots.size() < N) slots.resize(N);  // read only where a label's mark is set, so never cleared
  Slot* slot = slots.data();
  uint64_t* marks = s.wideMarks.data();
  const uint32_t* off = L.wideOff;
  const uint32_t* lab = L.wideLab;
  const float* wt = L.wideW;
  uint32_t* touched = grow(s.wideTouched, entries);
  float* sum = grow(s.wideSum, entries);
  size_t nt = 0;
  for (uint32_t q = data.offsets[row]; q < data.offsets[row + 1]; ++q) {
    const uint32_t f = data.indices[q];
    const float x = data.values[q];
    for (uint32_t e = off[f], e1 = off[f + 1]; e < e1; ++e) {
      const uint32_t j = lab[e];
      if (j >= N || skip(j)) continue;  // j >= N: never stored (checked when built and loaded)
      const float v = x * wt[e];
      uint64_t& w = marks[j >> 6];
      const uint64_t bit = uint64_t(1) << (j & 63);
      if (w & bit) {
        sum[slot[j]] += v;
      } else {
        w |= bit;
        slot[j] = static_cast<Slot>(nt);
        sum[nt] = v;
        touched[nt++] = j;
      }
    }
  }
  return nt;
}

// Requests the first lines (up to 64 entries) of the wide lists of row `row`'s nonzeros and returns their
// entries in all. Each feature's list lies at its own place in arrays far larger than the caches, and a walk
// would wait on the misses of one list after another; requested first, the misses overlap (model2-200k: 80
// features and 2,300 entries per row).
inline size_t wide_prefetch_lists(const NetLayer& L, const CsrView& data, uint32_t row) {
  const uint32_t* off = L.wideOff;
  size_t entries = 0;
  for (uint32_t q = data.offsets[row], q1 = data.offsets[row + 1]; q < q1; ++q) {
    const uint32_t e0 = off[data.indices[q]], e1 = off[data.indices[q] + 1];
    entries += e1 - e0;
    for (uint32_t e = e0; e < e1 && e < e0 + 64; e += 16) {
      __builtin_prefetch(L.wideLab + e);
      __builtin_prefetch(L.wideW + e);
    }
  }
  return entries;
}

// A sample's wide scores (net_wide.h): sums x_f u[e] of row `row`'s nonzeros for every label their lists
// name that skip(j) does not reject, into s.wideTouched[0..count) (the labels, in the order first touched)
// and s.wideSum[0..count) (their sums); sets their bits in s.wideMarks (no bit may be set on entry; the
// caller clears them, wide_unmark); wide_sum_of reads a marked label's sum. Returns the count (the arrays
// are only grown, never shrunk). Sampled prediction's proposals and training's hard negatives.
template <typename Skip>
size_t wide_scores(const NetLayer& L, const CsrView& data, uint32_t row, Scratch& s, Skip skip) {
  const uint32_t N = L.outDim;
  if (s.wideMarks.size() < (size_t(N) + 63) / 64) s.wideMarks.assign((size_t(N) + 63) / 64, 0);
  const size_t entries = wide_prefetch_lists(L, data, row);
  s.wideSlotWide = entries > 0xFFFF;
  return s.wideSlotWide ? wide_walk(L, data, row, s, skip, s.wideSlot32, entries)
                        : wide_walk(L, data, row, s, skip, s.wideSlot16, entries);
}

// The wide score of label j, marked by the last wide_scores.
inline float wide_sum_of(const Scratch& s, uint32_t j) {
  return s.wideSum[s.wideSlotWide ? s.wideSlot32[j] : s.wideSlot16[j]];
}

// Moves the `take` labels of ids[0..count) with the largest scores v (v[t]: ids[t]'s) to the front, their
// scores with them (ties: the smaller id). Keeps ids[0..count) a permutation of itself (callers clear their
// marks over all of them), and the chosen ones in their order: topk_kth finds the take-th best (score, id),
// and one pass moves the labels at or above it forward.
inline void wide_top(uint32_t* ids, float* v, size_t count, size_t take) {
  if (take == 0 || take >= count) return;
  float kv = 0.0f;  // the take-th best (score, id): exactly `take` labels rank at it or above
  uint32_t kid = 0;
  const bool found = topk_kth(v, ids, count, take, kv, kid);
  size_t w = 0;
  const auto keep = [&](size_t t) {
    // topk_row's order: a NaN sum never ranks; without `take` sums that are not NaN, all of those rank.
    if (v[t] != v[t] || (found && (v[t] != kv ? v[t] < kv : ids[t] > kid))) return;
    std::swap(ids[w], ids[t]);
    std::swap(v[w], v[t]);
    ++w;
  };
  size_t t = 0;
  if (found) {
    // `take` of the thousands of sums rank: a block of 16 none of which reaches kv (NaN: never) holds none
    // of them and is passed over after one vector compare (blocks past w only: the swaps move ranked sums
    // to the front, never into the block being tested).
    for (; t + 16 <= count; t += 16)
      if (any_reaches16(v + t, kv))
        for (size_t u = t; u < t + 16; ++u) keep(u);
  }
  for (; t < count; ++t) keep(t);
}

// Wide part in sampled prediction (defined in net_predict.cc, used by native/net_shard.cc too): writes sample
// `row`'s wide scores of its candidates ids[0..m) into zw[0..m) (0 where it has none) and appends up to `extra`
// labels that only the wide part proposes (the largest wide scores, ties by the smaller id), with their network
// logit b_j + w_j . h in z and their wide score in zw. ids, z and zw must have room for m + extra. Returns the
// new count.
size_t wide_candidates(const NetLayer& L, const CsrView& data, uint32_t row, const float* h, uint32_t* ids, float* z,
                       float* zw, size_t m, size_t extra, Scratch& s);

}  // namespace net
}  // namespace sl
