// netTrainSlice: forward, softmax cross-entropy, backward and lazy Adam for one mini-batch slice.
// Math and legend: net.h. Memory: everything per slice lives in the thread's Scratch; gradients are never
// materialised for a whole layer. Each touched row is updated right after its gradient is complete:
//   * dense layers (k >= 1): blocks of kRowBlock rows (kMaxRowBlock in the dense output layer); the gradient of
//     a block is a small GEMM (dzt (R, n) x A_{k-1} (n, d)), then Adam on those R rows;
//   * sampled layers and layer 0: an inverted index (row -> entries of the slice that touch it) built with
//     a row -> slot map; each row's gradient is summed from its entries, then Adam on that row.
// The dense softmax output never stores (n, outDim) logits: pass 1 streams blocks of rows to get each
// sample's log-sum-exp, pass 2 recomputes each block's logits to form dz = p - y and backpropagates it.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "napi_util.h"
#include "net_internal.h"
#include "net_parallel.h"

namespace sl {
namespace {

using net::grow;

// Row update of R neuron-major rows from gradients g (R, ldg) and gb (R): rows ids[0..R) when ids != null,
// else the consecutive rows j0..j0+R.
void update_rows(const NetLayer& L, uint32_t k, uint32_t j0, uint32_t R, const float* g, uint32_t ldg,
                 const float* gb, const TrainHyper& h, nk::AdamCorrection& corr, const uint32_t* ids = nullptr) {
  const uint32_t d = L.inDim;
  float* gradW = h.mode == 1 ? h.gradW[k] : nullptr;
  float* gradB = h.mode == 1 ? h.gradB[k] : nullptr;
  for (uint32_t r = 0; r < R; ++r) {
    const uint32_t j = ids ? ids[r] : j0 + r;
    if (h.mode == 3) {
      h.sink[k].add(j, g + size_t(r) * ldg, d, gb + r);
    } else if (h.mode == 0) {
      const uint32_t step = nk::bump_step(L.rowSteps + j);
      corr.at(step);
      const nk::AdamStep a{h.lr, h.beta1, h.beta2, h.eps, corr.ibc1, corr.ibc2};
      nk::adam_row(L.W + size_t(j) * d, L.mW + size_t(j) * d, L.vW + size_t(j) * d, g + size_t(r) * ldg, d, a);
      nk::adam_row(L.b + j, L.mb + j, L.vb + j, gb + r, 1, a);
    } else {
      nk::add(gradW + size_t(j) * d, g + size_t(r) * ldg, d);
      gradB[j] += gb[r];
    }
  }
}

nk::RowUpdate row_update(const NetLayer& L, uint32_t k, const TrainHyper& h, bool withBias) {
  nk::RowUpdate u;
  u.mode = static_cast<int>(h.mode);
  u.W = L.W;
  u.mW = L.mW;
  u.vW = L.vW;
  u.rowSteps = L.rowSteps;
  if (withBias) {
    u.bias = L.b;
    u.mB = L.mb;
    u.vB = L.vb;
  }
  if (h.mode == 1) {
    u.gW = h.gradW[k];
    u.gBias = withBias ? h.gradB[k] : nullptr;
  }
  if (h.mode == 3) u.sink = &h.sink[k];
  u.lr = h.lr;
  u.b1 = h.beta1;
  u.b2 = h.beta2;
  u.eps = h.eps;
  return u;
}

struct Slice {
  uint32_t n, ldn;
  const uint32_t* rows;
  const CsrView* data;
  uint32_t labelsOf(uint32_t i) const { return data->labelOffsets[rows[i] + 1] - data->labelOffsets[rows[i]]; }
  const uint32_t* labelPtr(uint32_t i) const { return data->labelIndices + data->labelOffsets[rows[i]]; }
};

// Softmax cross-entropy of one sample over logits z[0..m) whose first nl entries are its labels (sparse output)
// or whose labels are ids lab[0..nl) (dense, lab != null). Writes dz[0..m) = (p - y) * scale when dz != null.
// Returns the loss.
double softmax_xent(const float* z, uint32_t m, const uint32_t* lab, uint32_t nl, float* dz, float scale,
                    float* probs) {
  float mx = -std::numeric_limits<float>::infinity();
  for (uint32_t j = 0; j < m; ++j) mx = std::max(mx, z[j]);
  nk::exp_shift(probs, z, mx, m);
  double sum = 0;
  for (uint32_t j = 0; j < m; ++j) sum += probs[j];
  const double lse = mx + std::log(sum);
  double zl = 0;
  for (uint32_t e = 0; e < nl; ++e) zl += z[lab ? lab[e] : e];
  const double loss = lse - zl / nl;
  if (dz) {
    const float c = static_cast<float>(scale / sum), y = scale / static_cast<float>(nl);
    for (uint32_t j = 0; j < m; ++j) dz[j] = probs[j] * c;
    for (uint32_t e = 0; e < nl; ++e) dz[lab ? lab[e] : e] -= y;
  }
  return loss;
}

// Logits of a dense output layer up to this size (o * ldn floats) are kept from pass 1 for pass 2 (s.zAll)
// instead of computed again: pass 2 then runs two GEMM-like blocks per row block instead of three (a quarter
// of the layer's multiply-adds). 32 MB holds the 128-sample logits of 65,536 outputs.
constexpr size_t kKeptLogitsBytes = size_t(32) << 20;

// Dense softmax output layer k >= 1 (every neuron active). Returns the loss sum; when updating, writes
// dA_{k-1}^T into dAt (d, ldn) and updates every row. With h.threads > 1 the rows are split into contiguous
// ranges of whole blocks, one per part (net_parallel.h): each range streams its own rows in both passes,
// the ranges' log-sum-exp statistics and dA^T parts are combined in range order.
double output_dense(const NetLayer& L, uint32_t k, const Slice& sl, const net::LayerBuf& prev, float* dAt,
                    const TrainHyper& h, net::Scratch& s) {
  const uint32_t n = sl.n, ldn = sl.ldn, d = L.inDim, o = L.outDim, ldx = prev.lda;
  // The parts' ranges are whole blocks of kRowBlock rows (as many parts and the same ranges as before the
  // kernels took wider blocks: the dA^T parts, summed in part order, keep their bits); inside a range the
  // kernels take RB = kMaxRowBlock rows at a time (dA^T is read and written once per RB rows, not per 4).
  constexpr uint32_t RA = nk::kRowBlock, RB = nk::kMaxRowBlock;
  const float* X = prev.A.data();
  const float* Xt = prev.At.data();
  float* mx = grow(s.mx, ldn);
  float* sum = grow(s.sum, ldn);
  float* lse = grow(s.lse, ldn);
  float* scale = grow(s.scale, ldn);
  // (label, sample) pairs sorted by label, to meet each label in the block that computes it.
  s.labelPairs.clear();
  for (uint32_t i = 0; i < n; ++i) {
    const uint32_t* lab = sl.labelPtr(i);
    for (uint32_t e = 0, nl = sl.labelsOf(i); e < nl; ++e) s.labelPairs.push_back(uint64_t(lab[e]) << 32 | i);
  }
  std::sort(s.labelPairs.begin(), s.labelPairs.end());
  const uint64_t* pairs = s.labelPairs.data();
  const size_t nPairs = s.labelPairs.size();
  float* zlab = grow(s.zlab, nPairs);
  // Pass 1's logits for pass 2 (when training and they fit kKeptLogitsBytes); else pass 2 computes them again.
  float* zAll = h.mode != 2 && sizeof(float) * size_t(o) * ldn <= kKeptLogitsBytes ? grow(s.zAll, size_t(o) * ldn) : nullptr;
  // Wide part: the slice's terms by label, met block by block like the labels.
  s.wide.clear();
  if (L.hasWide) {
    net::wide_terms(s.wide, L, *sl.data, sl.rows, n);
    net::wide_sort_by_label(s.wide);
  }
  const net::WideTerm* wt = s.wide.data();
  // The parts: at least 16 blocks of rows each.
  const uint32_t T = std::max(1u, std::min(h.threads, (o + 16 * RA - 1) / (16 * RA)));
  if (s.parts.size() < T) s.parts.resize(T);
  // First label pair and wide term of the rows from j on.
  auto firstPair = [&](uint32_t j) {
    return size_t(std::lower_bound(pairs, pairs + nPairs, uint64_t(j) << 32) - pairs);
  };
  auto firstTerm = [&](uint32_t j) {
    return size_t(std::lower_bound(s.wide.begin(), s.wide.end(), j, [](const net::WideTerm& a, uint32_t v) { return a.label < v; }) -
                  s.wide.begin());
  };

  // Pass 1: log-sum-exp of every sample, and the logits of its labels.
  net::fork_join(T, [&](uint32_t t) {
    net::Scratch::Part& pt = s.parts[t];
    uint32_t lo, hi;
    net::split_range(o, T, t, RA, lo, hi);
    float* zt = grow(pt.zt, size_t(RB) * ldn);
    float* pmx = t == 0 ? mx : grow(pt.mx, ldn);
    float* psum = t == 0 ? sum : grow(pt.sum, ldn);
    std::fill(pmx, pmx + ldn, -std::numeric_limits<float>::infinity());
    std::fill(psum, psum + ldn, 0.0f);
    size_t pp = firstPair(lo), wp = firstTerm(lo);
    for (uint32_t j0 = lo; j0 < hi; j0 += RB) {
      const uint32_t R = std::min(RB, hi - j0);
      if (zAll) zt = zAll + size_t(j0) * ldn;
      nk::blk_forward(zt, L.W + size_t(j0) * d, d, L.b + j0, Xt, R, ldn);
      net::wide_add_block(zt, ldn, L, s.wide, wp, j0, R);
      // In blocks of kRowBlock rows: the running maximum's steps, and so the sums' bits, stay as they were.
      for (uint32_t r0 = 0; r0 < R; r0 += RA) nk::lse_update(pmx, psum, zt + size_t(r0) * ldn, std::min(RA, R - r0), ldn);
      for (; pp < nPairs && (pairs[pp] >> 32) < j0 + R; ++pp)
        zlab[pp] = zt[size_t((pairs[pp] >> 32) - j0) * ldn + uint32_t(pairs[pp])];
    }
  });
  for (uint32_t t = 1; t < T; ++t) {
    const float* pmx = s.parts[t].mx.data();
    const float* psum = s.parts[t].sum.data();
    for (uint32_t i = 0; i < ldn; ++i) {
      const float M = std::max(mx[i], pmx[i]);
      sum[i] = sum[i] * std::exp(mx[i] - M) + psum[i] * std::exp(pmx[i] - M);
      mx[i] = M;
    }
  }
  double loss = 0;
  for (uint32_t i = 0; i < n; ++i) {
    lse[i] = mx[i] + std::log(sum[i]);
    loss += lse[i];
  }
  for (uint32_t i = n; i < ldn; ++i) lse[i] = 0;
  for (size_t q = 0; q < nPairs; ++q) {
    const uint32_t i = uint32_t(pairs[q]);
    loss -= double(zlab[q]) / sl.labelsOf(i);
  }
  if (h.mode == 2) return loss;

  // Pass 2: each block's logits (kept, or computed again), dz = (p - y) * gradScale, backpropagate, update the rows.
  for (uint32_t i = 0; i < ldn; ++i) scale[i] = i < n ? h.gradScale : 0.0f;
  net::fork_join(T, [&](uint32_t t) {
    net::Scratch::Part& pt = s.parts[t];
    uint32_t lo, hi;
    net::split_range(o, T, t, RA, lo, hi);
    float* zt = grow(pt.zt, size_t(RB) * ldn);
    float* dzt = grow(pt.dzt, size_t(RB) * ldn);
    float* g = grow(pt.g, size_t(RB) * ldx);
    float* gb = grow(pt.gb, RB);
    float* pdAt = t == 0 ? dAt : grow(pt.dAt, size_t(d) * ldn);
    std::memset(pdAt, 0, sizeof(float) * size_t(d) * ldn);
    nk::AdamCorrection corr;
    corr.init(h.beta1, h.beta2);
    size_t pp = firstPair(lo), wp = firstTerm(lo);
    for (uint32_t j0 = lo; j0 < hi; j0 += RB) {
      const uint32_t R = std::min(RB, hi - j0);
      const float* Wb = L.W + size_t(j0) * d;
      const size_t wBlock = wp;
      if (zAll) {
        zt = zAll + size_t(j0) * ldn;
        net::wide_skip_block(s.wide, wp, j0, R);
      } else {
        nk::blk_forward(zt, Wb, d, L.b + j0, Xt, R, ldn);
        net::wide_add_block(zt, ldn, L, s.wide, wp, j0, R);
      }
      nk::softmax_scaled(dzt, zt, lse, scale, R, ldn);
      for (; pp < nPairs && (pairs[pp] >> 32) < j0 + R; ++pp) {
        const uint32_t i = uint32_t(pairs[pp]);
        dzt[size_t((pairs[pp] >> 32) - j0) * ldn + i] -= h.gradScale / static_cast<float>(sl.labelsOf(i));
      }
      for (size_t q = wBlock; q < wp; ++q) net::wide_step(L, wt[q], dzt[size_t(wt[q].label - j0) * ldn + wt[q].sample], h);
      nk::blk_grad(g, gb, dzt, X, R, n, ldn, ldx);
      nk::blk_dx(pdAt, Wb, d, dzt, R, ldn);
      update_rows(L, k, j0, R, g, ldx, gb, h, corr);
    }
  });
  for (uint32_t t = 1; t < T; ++t) nk::add(dAt, s.parts[t].dAt.data(), d * ldn);
  return loss;
}

// Backward of a sampled layer k from dz (P active entries, in buf's active-set order): updates the active
// neurons' rows (Adam or gradient accumulation) and writes dL/dX^T into dXt (inDim, ldn), padding zeroed
// (accumulate: adds it to dXt instead). X: the layer's input (n, ldx). Shared by the sampled output and
// sampled hidden layers.
void sampled_backward(const NetLayer& L, uint32_t k, const TrainHyper& h, net::LayerBuf& buf, const float* dz,
                      uint32_t P, const float* X, uint32_t ldx, uint32_t n, uint32_t ldn, float* dXt,
                      net::Scratch& s, bool accumulate = false) {
  const uint32_t d = L.inDim;
  float* dX = grow(s.dX, size_t(n) * ldx);
  std::memset(dX, 0, sizeof(float) * size_t(n) * ldx);
  float* g = grow(s.g, ldx);
  float* coef = grow(buf.index.coef, P);
  nk::gather(coef, dz, buf.index.entPos.data(), P);
  nk::rowlist_backward(buf.index.view(), coef, X, ldx, d, dX, ldx, row_update(L, k, h, true), g);
  if (accumulate) {
    for (uint32_t r = 0; r < d; ++r)
      for (uint32_t i = 0; i < n; ++i) dXt[size_t(r) * ldn + i] += dX[size_t(i) * ldx + r];
    return;
  }
  nk::transpose(dXt, ldn, dX, ldx, n, d);
  for (uint32_t r = 0; r < d; ++r) std::memset(dXt + size_t(r) * ldn + n, 0, sizeof(float) * (ldn - n));
}

constexpr uint32_t kExtraBit = 0x80000000u;

// Wide part of a shared-set slice: adds each active term x_f u[e] to its logit (zS (|S|, ldn) for labels in S,
// z at the sample's extras otherwise; terms of inactive labels are dropped, as the sampled softmax drops
// their logits) and keeps the active terms in s.wide with their targets in s.wideTarget (zS index, or
// kExtraBit | position in z) for the backward pass.
// The walk meets every (feature, label) pair of a sample's nonzeros, and most of their labels are inactive
// (debian-deps-11k: a few hundred active of 11,604): a bit per label (s.wideActive: S for the slice, the
// sample's extras while it is walked; 1.5 KB at 11,604 labels, in L1) rejects those without touching the
// label maps (labelMark, posInShared, extraPos: 4 bytes a label each, in L2), and the first lines of the
// sample's lists are requested before the walk, as in wide_scores, so that their misses overlap. The terms
// and their order are those of the walk without either: the logits are the same to the bit.
void wide_shared_forward(const NetLayer& L, const Slice& sl, uint32_t nS, float* zS, float* z, const uint32_t* off,
                         const uint32_t* actIds, net::Scratch& s) {
  const CsrView& data = *sl.data;
  const uint32_t ldn = sl.ldn, N = L.outDim;
  if (s.extraPos.size() < N) s.extraPos.assign(N, -1);
  int32_t* extraPos = s.extraPos.data();
  s.wideActive.assign((size_t(N) + 63) / 64, 0);
  uint64_t* act = s.wideActive.data();
  for (uint32_t r = 0; r < nS; ++r)
    act[s.shared[r] >> 6] |= uint64_t(1) << (s.shared[r] & 63);
  const uint32_t* wOff = L.wideOff;
  const uint32_t* lab = L.wideLab;
  const float* wW = L.wideW;
  s.wide.clear();
  s.wideTarget.clear();
  for (uint32_t i = 0; i < sl.n; ++i) {
    const uint32_t r = sl.rows[i];
    const uint32_t q0 = data.offsets[r], q1 = data.offsets[r + 1];
    for (uint32_t q = q0; q < q1; ++q) {
      const uint32_t e0 = wOff[data.indices[q]], e1 = wOff[data.indices[q] + 1];
      for (uint32_t e = e0; e < e1 && e < e0 + 64; e += 16) {
        __builtin_prefetch(lab + e);
        __builtin_prefetch(wW + e);
      }
    }
    for (uint32_t p = off[i]; p < off[i + 1]; ++p) {
      extraPos[actIds[p]] = static_cast<int32_t>(p);
      act[actIds[p] >> 6] |= uint64_t(1) << (actIds[p] & 63);
    }
    for (uint32_t q = q0; q < q1; ++q) {
      const uint32_t f = data.indices[q];
      const float x = data.values[q];
      for (uint32_t e = wOff[f], e1 = wOff[f + 1]; e < e1; ++e) {
        const uint32_t j = lab[e];
        if (j >= N) continue;  // never stored (checked when built and loaded); no wild write if it were
        if (!((act[j >> 6] >> (j & 63)) & 1u)) continue;
        uint32_t t;
        if (s.labelMark[j] == s.labelEpoch) {
          t = s.posInShared[j] * ldn + i;
          zS[t] += x * wW[e];
        } else if (extraPos[j] >= 0) {
          t = kExtraBit | static_cast<uint32_t>(extraPos[j]);
          z[extraPos[j]] += x * wW[e];
        } else {
          continue;
        }
        s.wide.push_back({j, i, e, x});
        s.wideTarget.push_back(t);
      }
    }
    for (uint32_t p = off[i]; p < off[i + 1]; ++p) {
      const uint32_t j = actIds[p];
      extraPos[j] = -1;
      if (s.labelMark[j] != s.labelEpoch) act[j >> 6] &= ~(uint64_t(1) << (j & 63));  // S's bits stay
    }
  }
}

// Hard negatives from the wide part (training, shared-set path): appends to each sample's extras (its labels
// outside S, and table candidates if any) the L.wideNegatives labels that its wide part scores highest
// among those outside S and outside its extras. A uniform shared set almost never holds the few labels that
// compete with a sample's own, so without them the network's logits are trained apart from easy labels only
// and add noise where the ranking is decided. They join with inclusion probability 1 (no logQ term), as the
// sampled softmax's correction asks for ids that are always included.
void append_wide_negatives(net::LayerBuf& buf, const NetLayer& L, const Slice& sl, net::Scratch& s) {
  const uint32_t n = sl.n, N = L.outDim, want = L.wideNegatives;
  const CsrView& data = *sl.data;
  s.negOff.assign(buf.actOff.begin(), buf.actOff.begin() + n + 1);
  s.negIds.assign(buf.actIds.begin(), buf.actIds.begin() + s.negOff[n]);
  if (s.negActive.size() < N) s.negActive.assign(N, 0);
  uint8_t* active = s.negActive.data();
  std::vector<uint32_t>& touched = s.wideTouched;
  uint32_t* off = buf.actOff.data();
  uint32_t P = 0;
  for (uint32_t i = 0; i < n; ++i) {
    const uint32_t e0 = s.negOff[i], e1 = s.negOff[i + 1];
    for (uint32_t e = e0; e < e1; ++e) active[s.negIds[e]] = 1;  // already active: not a candidate
    const size_t count = net::wide_scores(L, data, sl.rows[i], s, [&](uint32_t j) { return active[j] || s.labelMark[j] == s.labelEpoch; });
    const size_t take = std::min<size_t>(want, count);
    net::wide_top(touched.data(), s.wideSum.data(), count, take);
    uint32_t* out = grow(buf.actIds, size_t(P) + (e1 - e0) + take) + P;
    off = buf.actOff.data();
    std::copy(s.negIds.begin() + e0, s.negIds.begin() + e1, out);
    std::copy(touched.begin(), touched.begin() + take, out + (e1 - e0));
    off[i] = P;
    P += (e1 - e0) + static_cast<uint32_t>(take);
    for (size_t t = 0; t < count; ++t) net::wide_unmark(s, touched[t]);
    for (uint32_t e = e0; e < e1; ++e) active[s.negIds[e]] = 0;
  }
  off[n] = P;
  uint32_t* sampleOf = grow(buf.sampleOf, P);
  for (uint32_t i = 0; i < n; ++i)
    for (uint32_t p = off[i]; p < off[i + 1]; ++p) sampleOf[p] = i;
}

// Sampled softmax output in training with a batch-shared set (sharedFill): sample i's active set is
// S + (its labels and LSH candidates outside S), S from shared_set. S's logits for every sample form a dense
// (|S|, n) block, computed and backpropagated with the register-blocked kernels on kRowBlock gathered rows at
// a time (a GEMM instead of |S| * n separate dot products); the per-sample extras go through the row list.
// Every row is updated once per slice (S and the extras are disjoint). Returns the loss sum.
double output_shared(const NetLayer& L, uint32_t k, const Slice& sl, const net::ForwardCtx& c,
                     const net::LayerBuf& prev, float* dAt, const TrainHyper& h, net::Scratch& s, double* active,
                     double* missed) {
  constexpr uint32_t RB = nk::kRowBlock;
  const uint32_t n = sl.n, ldn = sl.ldn, d = L.inDim, ldx = prev.lda;
  const float* X = prev.A.data();
  const float* Xt = prev.At.data();
  net::LayerBuf& buf = s.layer[k];
  const uint32_t nS = net::shared_set(L, k, *sl.data, c, s);
  net::sampled_active_sets(buf, L, k, X, ldx, c, sl.data, missed, s, true);
  if (L.hasWide && L.wideNegatives) append_wide_negatives(buf, L, sl, s);
  const uint32_t* off = buf.actOff.data();
  const uint32_t* ownExtra = s.ownExtra.data();
  const uint32_t* S = s.shared.data();
  const uint32_t P = off[n];
  *active += double(nS) * n + P;

  // (position in S, sample) of every label inside S, sorted by position: met block by block.
  s.labelPairs.clear();
  for (uint32_t i = 0; i < n; ++i) {
    const uint32_t* lab = sl.labelPtr(i);
    for (uint32_t e = 0, nl = sl.labelsOf(i); e < nl; ++e)
      if (s.labelMark[lab[e]] == s.labelEpoch) s.labelPairs.push_back(uint64_t(s.posInShared[lab[e]]) << 32 | i);
  }
  std::sort(s.labelPairs.begin(), s.labelPairs.end());
  const uint64_t* pairs = s.labelPairs.data();
  const size_t nPairs = s.labelPairs.size();

  // Forward of S: zS (nS, ldn), with a running log-sum-exp per sample.
  float* mx = grow(s.mx, ldn);
  float* sum = grow(s.sum, ldn);
  float* lse = grow(s.lse, ldn);
  float* scale = grow(s.scale, ldn);
  std::fill(mx, mx + ldn, -std::numeric_limits<float>::infinity());
  std::fill(sum, sum + ldn, 0.0f);
  float* zS = grow(s.zS, size_t(nS) * ldn);
  float* wg = grow(s.wg, size_t(RB) * d);
  float* bg = grow(s.bg, RB);
  auto gather = [&](uint32_t r0, uint32_t R) {
    for (uint32_t r = 0; r < R; ++r) {
      std::memcpy(wg + size_t(r) * d, L.W + size_t(S[r0 + r]) * d, sizeof(float) * d);
      bg[r] = L.b[S[r0 + r]] + (L.logQ ? L.logQ[S[r0 + r]] : 0.0f);
    }
  };
  for (uint32_t r0 = 0; r0 < nS; r0 += RB) {
    const uint32_t R = std::min(RB, nS - r0);
    gather(r0, R);
    nk::blk_forward(zS + size_t(r0) * ldn, wg, d, bg, Xt, R, ldn);
  }
  // Forward of the extras, merged into each sample's log-sum-exp.
  net::build_index(buf.index, buf.actIds.data(), buf.sampleOf.data(), P, L.outDim, s);
  float* z = grow(buf.z, P);
  float* dz = grow(buf.dz, P);
  nk::rowlist_forward(z, buf.index.view(), L.W, L.b, X, d, ldx);
  if (L.hasWide) wide_shared_forward(L, sl, nS, zS, z, off, buf.actIds.data(), s);
  for (uint32_t r0 = 0; r0 < nS; r0 += RB) nk::lse_update(mx, sum, zS + size_t(r0) * ldn, std::min(RB, nS - r0), ldn);
  double loss = 0;
  for (uint32_t i = 0; i < n; ++i) {
    const uint32_t nl = sl.labelsOf(i);
    scale[i] = nl ? h.gradScale : 0.0f;
    float m = mx[i];
    for (uint32_t p = off[i]; p < off[i + 1]; ++p) m = std::max(m, z[p]);
    double acc = nS ? double(sum[i]) * std::exp(double(mx[i]) - m) : 0.0;
    for (uint32_t p = off[i]; p < off[i + 1]; ++p) acc += std::exp(double(z[p]) - m);
    lse[i] = static_cast<float>(m + std::log(acc));
    if (!nl) continue;
    double zl = 0;
    for (uint32_t e = 0; e < ownExtra[i]; ++e) zl += z[off[i] + e];
    loss += lse[i] - zl / nl;  // labels inside S: subtracted below
  }
  for (size_t q = 0; q < nPairs; ++q) {
    const uint32_t i = uint32_t(pairs[q]);
    loss -= double(zS[size_t(pairs[q] >> 32) * ldn + i]) / sl.labelsOf(i);
  }
  if (h.mode == 2) return loss;
  for (uint32_t i = n; i < ldn; ++i) lse[i] = 0, scale[i] = 0;

  // Backward of S, block by block: dz = (p - y) * gradScale, row gradients, dX^T, then the rows' update.
  std::memset(dAt, 0, sizeof(float) * size_t(d) * ldn);
  float* dzt = grow(s.dzt, size_t(RB) * ldn);
  float* g = grow(s.g, size_t(RB) * ldx);
  float* gb = grow(s.gb, RB);
  nk::AdamCorrection corr;
  corr.init(h.beta1, h.beta2);
  size_t pp = 0;
  for (uint32_t r0 = 0; r0 < nS; r0 += RB) {
    const uint32_t R = std::min(RB, nS - r0);
    nk::softmax_scaled(dzt, zS + size_t(r0) * ldn, lse, scale, R, ldn);
    for (; pp < nPairs && (pairs[pp] >> 32) < r0 + R; ++pp) {
      const uint32_t i = uint32_t(pairs[pp]);
      dzt[size_t((pairs[pp] >> 32) - r0) * ldn + i] -= h.gradScale / static_cast<float>(sl.labelsOf(i));
    }
    if (L.hasWide) std::memcpy(zS + size_t(r0) * ldn, dzt, sizeof(float) * size_t(R) * ldn);  // zS now holds dz
    nk::blk_grad(g, gb, dzt, X, R, n, ldn, ldx);
    gather(r0, R);  // the rows as they are now (another worker may have moved them since the forward)
    nk::blk_dx(dAt, wg, d, dzt, R, ldn);
    update_rows(L, k, 0, R, g, ldx, gb, h, corr,
                S + r0);
  }
  // Backward of the extras, added to dX^T.
  for (uint32_t i = 0; i < n; ++i) {
    const float c0 = scale[i], li = lse[i];
    const uint32_t nl = sl.labelsOf(i);
    for (uint32_t p = off[i]; p < off[i + 1]; ++p) dz[p] = std::exp(z[p] - li) * c0;
    for (uint32_t e = 0; e < ownExtra[i]; ++e) dz[off[i] + e] -= h.gradScale / static_cast<float>(nl);
  }
  if (L.hasWide) {
    const net::WideTerm* wt = s.wide.data();
    const uint32_t* tgt = s.wideTarget.data();
    for (size_t q = 0, m = s.wide.size(); q < m; ++q)
      net::wide_step(L, wt[q], tgt[q] & kExtraBit ? dz[tgt[q] & ~kExtraBit] : zS[tgt[q]], h);
  }
  sampled_backward(L, k, h, buf, dz, P, X, ldx, n, ldn, dAt, s, true);
  return loss;
}

// Sampled softmax output layer k >= 1. Returns the loss sum; adds active-set sizes and missed labels.
double output_sampled(const NetLayer& L, uint32_t k, const Slice& sl, const net::ForwardCtx& c,
                      const net::LayerBuf& prev, float* dAt, const TrainHyper& h, net::Scratch& s, double* active,
                      double* missed) {
  const uint32_t n = sl.n, ldn = sl.ldn, d = L.inDim, ldx = prev.lda;
  const float* X = prev.A.data();
  net::LayerBuf& buf = s.layer[k];
  if (L.sharedFill && c.training) return output_shared(L, k, sl, c, prev, dAt, h, s, active, missed);
  net::sampled_active_sets(buf, L, k, X, ldx, c, sl.data, missed, s);
  const uint32_t* off = buf.actOff.data();
  const uint32_t P = off[n];
  *active += P;
  net::build_index(buf.index, buf.actIds.data(), buf.sampleOf.data(), P, L.outDim, s);
  float* z = grow(buf.z, P);
  float* dz = grow(buf.dz, P);
  nk::rowlist_forward(z, buf.index.view(), L.W, L.b, X, d, ldx);
  double loss = 0;
  for (uint32_t i = 0; i < n; ++i)
    loss += softmax_xent(z + off[i], off[i + 1] - off[i], nullptr, sl.labelsOf(i), h.mode == 2 ? nullptr : dz + off[i],
                         h.gradScale, dz + off[i]);
  if (h.mode == 2) return loss;
  sampled_backward(L, k, h, buf, dz, P, X, ldx, n, ldn, dAt, s);
  return loss;
}

// Backward of hidden layer k >= 1 from dAt = dL/dA_k^T (o, ldn); writes dL/dA_{k-1}^T into dAtPrev (d, ldn).
void backward_hidden(const NetLayer& L, uint32_t k, const Slice& sl, const float* dAt, float* dAtPrev,
                     const TrainHyper& h, net::Scratch& s) {
  const uint32_t n = sl.n, ldn = sl.ldn, d = L.inDim, o = L.outDim;
  net::LayerBuf& buf = s.layer[k];
  const net::LayerBuf& prev = s.layer[k - 1];
  const uint32_t ldx = prev.lda;
  const float* X = prev.A.data();
  const bool relu = L.act == Activation::ReLU;
  if (L.sampled) {
    const uint32_t P = buf.actOff[n];
    const uint32_t* ids = buf.actIds.data();
    const uint32_t* so = buf.sampleOf.data();
    const float* a = buf.z.data();
    float* dz = grow(buf.dz, P);
    for (uint32_t p = 0; p < P; ++p) {
      const float gin = dAt[size_t(ids[p]) * ldn + so[p]];
      dz[p] = relu ? (a[p] > 0.0f ? gin : 0.0f) : gin;
    }
    sampled_backward(L, k, h, buf, dz, P, X, ldx, n, ldn, dAtPrev, s);
    return;
  }
  const float* At = buf.At.data();
  float* dzt = grow(s.dzt, size_t(nk::kRowBlock) * ldn);
  float* g = grow(s.g, size_t(nk::kRowBlock) * ldx);
  float* gb = grow(s.gb, nk::kRowBlock);
  std::memset(dAtPrev, 0, sizeof(float) * size_t(d) * ldn);
  nk::AdamCorrection corr;
  corr.init(h.beta1, h.beta2);
  for (uint32_t j0 = 0; j0 < o; j0 += nk::kRowBlock) {
    const uint32_t R = std::min(nk::kRowBlock, o - j0);
    const size_t base = size_t(j0) * ldn, cnt = size_t(R) * ldn;
    for (size_t q = 0; q < cnt; ++q) dzt[q] = relu ? (At[base + q] > 0.0f ? dAt[base + q] : 0.0f) : dAt[base + q];
    if (L.dropout > 0.0f) {  // dropped outputs pass no gradient, kept ones scale it by 1 / (1 - dropout)
      const float* keep = buf.keep.data();
      for (uint32_t r = 0; r < R; ++r)
        for (uint32_t i = 0; i < n; ++i) dzt[size_t(r) * ldn + i] *= keep[size_t(i) * buf.lda + j0 + r];
    }
    nk::blk_grad(g, gb, dzt, X, R, n, ldn, ldx);
    nk::blk_dx(dAtPrev, L.W + size_t(j0) * d, d, dzt, R, ldn);
    update_rows(L, k, j0, R, g, ldx, gb, h, corr);
  }
}

// Backward and update of layer 0 from dz0 (n, lda0) = dL/dz_0 (rows of the slice's samples). rowOf (label-sharded
// training: layer 0 holds a slice of the features' rows): feature f's row, or -1 for the features of other ranks
// (skipped); every rowOf[f] of the slice's features is < L0.inDim (checked by the caller). Null: row f.
void backward_layer0(const NetLayer& L0, const Slice& sl, const float* dz0, uint32_t lda0, const TrainHyper& h,
                     net::Scratch& s, const int32_t* rowOf = nullptr) {
  const uint32_t n = sl.n, d0 = L0.outDim;
  const CsrView& data = *sl.data;
  // Bias gradient: sum over samples.
  float* gb = grow(s.gb, d0);
  std::memset(gb, 0, sizeof(float) * d0);
  for (uint32_t i = 0; i < n; ++i) nk::add(gb, dz0 + size_t(i) * lda0, d0);
  // Inverted index feature -> (sample, value).
  size_t P = 0;
  for (uint32_t i = 0; i < n; ++i) P += data.offsets[sl.rows[i] + 1] - data.offsets[sl.rows[i]];
  uint32_t* fr = grow(s.l0Row, P);
  uint32_t* fs = grow(s.l0Sample, P);
  float* fc = grow(s.l0Coef, P);
  size_t p = 0;
  for (uint32_t i = 0; i < n; ++i)
    for (uint32_t q = data.offsets[sl.rows[i]], q1 = data.offsets[sl.rows[i] + 1]; q < q1; ++q) {
      const int32_t row = rowOf ? rowOf[data.indices[q]] : static_cast<int32_t>(data.indices[q]);
      if (row < 0) continue;
      fr[p] = static_cast<uint32_t>(row);
      fs[p] = i;
      fc[p] = data.values[q];
      ++p;
    }
  P = p;
  net::build_index(s.l0Index, fr, fs, P, L0.inDim, s);
  float* coef = grow(s.l0Index.coef, P);
  nk::gather(coef, fc, s.l0Index.entPos.data(), P);
  // The feature rows in contiguous ranges of about equal entries, one per thread (h.threads; each row's
  // gradient and update are its own); at least 64 rows per range.
  const nk::RowList rl = s.l0Index.view();
  const nk::RowUpdate u = row_update(L0, 0, h, false);
  const uint32_t T = std::max(1u, std::min(h.threads, rl.nRows / 64));
  if (s.parts.size() < T) s.parts.resize(T);
  net::fork_join(T, [&](uint32_t t) {
    // Rows [r0, r1): the first row whose entries start at or after t / T of them.
    auto rowAt = [&](uint32_t part) {
      if (part >= T) return rl.nRows;
      const uint64_t target = uint64_t(P) * part / T;
      return static_cast<uint32_t>(std::lower_bound(rl.rowStart, rl.rowStart + rl.nRows, target,
                                                    [](uint32_t a, uint64_t v) { return a < v; }) - rl.rowStart);
    };
    const uint32_t r0 = t == 0 ? 0 : rowAt(t), r1 = rowAt(t + 1);
    if (r1 <= r0) return;
    const nk::RowList part{rl.rows + r0, rl.rowStart + r0, rl.entPos, rl.entSample, r1 - r0};
    float* g = t == 0 ? grow(s.g, d0) : grow(s.parts[t].g, d0);
    nk::rowlist_backward(part, coef, dz0, lda0, d0, nullptr, 0, u, g);
  });
  if (h.mode == 0) {
    nk::AdamCorrection corr;
    corr.init(h.beta1, h.beta2);
    corr.at(nk::bump_step(L0.biasSteps));
    const nk::AdamStep a{h.lr, h.beta1, h.beta2, h.eps, corr.ibc1, corr.ibc2};
    nk::adam_row(L0.b, L0.mb, L0.vb, gb, d0, a);
  } else if (h.mode == 3) {
    nk::GradRows& out = h.sink[0];
    out.biasVector.assign(gb, gb + d0);
    out.hasBiasVector = true;
  } else {
    nk::add(h.gradB[0], gb, d0);
  }
}

// Backward pass and update of layers kLast-1 .. 0 from s.dAt = dL/dA_{kLast-1}^T (layers[kLast].inDim,
// sl.ldn), after a forward pass of slice `sl` on this thread (s.layer): net_train_slice below the output
// layer, and net_shard_lower_backward (label-sharded training, layer 0 a feature slice: rowOf) from a dH the
// ranks summed.
void backward_lower(const NetLayer* layers, uint32_t kLast, const Slice& sl, const TrainHyper& h, net::Scratch& s,
                    const int32_t* rowOf = nullptr) {
  const uint32_t n = sl.n;
  for (uint32_t k = kLast - 1; k >= 1; --k) {
    float* dAtPrev = grow(s.dAtPrev, size_t(layers[k].inDim) * sl.ldn);
    backward_hidden(layers[k], k, sl, s.dAt.data(), dAtPrev, h, s);
    std::swap(s.dAt, s.dAtPrev);
  }
  // dz_0 = dA_0 * act'(A_0), back in sample-major layout.
  const NetLayer& L0 = layers[0];
  const uint32_t lda0 = s.layer[0].lda;
  const float* A0 = s.layer[0].A.data();
  float* dz0 = grow(s.dX, size_t(n) * lda0);
  const float* dAt = s.dAt.data();
  const bool relu = L0.act == Activation::ReLU;
  const float* keep = L0.dropout > 0.0f ? s.layer[0].keep.data() : nullptr;
  const uint32_t d0 = L0.outDim;
  // By ranges of samples, one per thread (h.threads, at least 16 samples each); the masks as selects, not
  // branches (a ReLU's sign is a coin flip to the branch predictor).
  const uint32_t T = std::max(1u, std::min(h.threads, n / 16));
  net::fork_join(T, [&](uint32_t t) {
    uint32_t lo, hi;
    net::split_range(n, T, t, 16, lo, hi);
    nk::transpose(dz0 + size_t(lo) * lda0, lda0, dAt + lo, sl.ldn, d0, hi - lo);
    for (uint32_t i = lo; i < hi; ++i) {
      float* row = dz0 + size_t(i) * lda0;
      const float* a = A0 + size_t(i) * lda0;
      const float* kr = keep ? keep + size_t(i) * lda0 : nullptr;
      // dropped outputs pass no gradient, kept ones scale it by 1 / (1 - dropout)
      if (relu || kr) nk::mask_gradient(row, a, kr, d0, relu);
      std::memset(row + d0, 0, sizeof(float) * (lda0 - d0));
    }
  });
  backward_layer0(L0, sl, dz0, lda0, h, s, rowOf);
}

}  // namespace

void net_train_slice(double* stats, const NetLayer* layers, uint32_t nLayers, const CsrView& data,
                     const uint32_t* pointIds, uint32_t nAll, const TrainHyper& h) {
  const uint32_t kLast = nLayers - 1;
  const NetLayer& last = layers[kLast];
  net::check_slice(data, pointIds, nAll, layers[0].inDim, true, last.outDim);
  net::FtzScope ftz;
  net::Scratch& s = net::scratch();
  // Points without labels contribute nothing: train on the others.
  uint32_t* rows = grow(s.rowsOfSlice, nAll);
  uint32_t* pos = grow(s.posOfSlice, nAll);
  uint32_t n = 0;
  for (uint32_t i = 0; i < nAll; ++i) {
    const uint32_t r = pointIds[i];
    if (data.labelOffsets[r + 1] > data.labelOffsets[r]) {
      rows[n] = r;
      pos[n] = i;
      ++n;
    }
  }
  stats[kStatLoss] = 0;
  stats[kStatSamples] = nAll;
  stats[kStatActive] = 0;
  stats[kStatMissed] = 0;
  if (h.mode == 3)
    for (uint32_t k = 0; k < nLayers; ++k) h.sink[k].clear();
  if (n == 0) return;

  net::ForwardCtx c;
  c.n = n;
  c.ldn = nk::pad_to(n, nk::kSamplePad);
  c.rows = rows;
  c.useSampling = true;
  c.training = true;
  c.seed = h.seed;
  c.fillSeed = h.hasFillSeed ? h.fillSeed : h.seed;
  c.positions = pos;
  c.threads = h.threads;
  const Slice sl{n, c.ldn, rows, &data};
  net::forward_hidden(layers, nLayers, data, c, s);

  double loss = 0, active = 0, missed = 0;
  const uint32_t lda0 = s.layer[0].lda;
  if (kLast == 0) {
    // Single layer: layer 0's logits are the output.
    float* A0 = s.layer[0].A.data();
    float* dz0 = grow(s.dX, size_t(n) * lda0);
    float* probs = grow(s.zlab, last.outDim);
    for (uint32_t i = 0; i < n; ++i) {
      std::memset(dz0 + size_t(i) * lda0, 0, sizeof(float) * lda0);
      loss += softmax_xent(A0 + size_t(i) * lda0, last.outDim, sl.labelPtr(i), sl.labelsOf(i),
                           dz0 + size_t(i) * lda0, h.gradScale, probs);
    }
    active = double(n) * last.outDim;
    if (h.mode != 2) backward_layer0(layers[0], sl, dz0, lda0, h, s);
  } else {
    const uint32_t dPrev = last.inDim;
    float* dAt = grow(s.dAt, size_t(dPrev) * c.ldn);
    if (last.sampled) {
      loss = output_sampled(last, kLast, sl, c, s.layer[kLast - 1], dAt, h, s, &active, &missed);
    } else {
      loss = output_dense(last, kLast, sl, s.layer[kLast - 1], dAt, h, s);
      active = double(n) * last.outDim;
    }
    if (h.mode != 2) backward_lower(layers, kLast, sl, h, s);
  }
  stats[kStatLoss] = loss;
  stats[kStatActive] = active;
  stats[kStatMissed] = missed;
}

// Label-sharded training (net_shard.cc): the backward pass and Adam update of layers kLast-1 .. 0 of the global
// batch whose forward the phases netShardInput + netShardHidden left in the calling thread's scratch
// (s.rowsOfSlice[0..n), s.layer), from dH (n, d) = dL/dA_{kLast-1} summed over the ranks, row-major with row
// stride d = layers[kLast].inDim. Layers 1 .. kLast-1 and layer 0's bias are updated as a single process does
// (every rank alike); layer 0 only in the rows it holds (rowOf: feature -> row or -1, every entry of the batch's
// features checked < layers[0].inDim by the caller). The tail of net_train_slice entered with a given dH.
void net_shard_lower_backward(const NetLayer* layers, uint32_t nLayers, const CsrView& data, uint32_t n, const float* dH,
                              const TrainHyper& h, const int32_t* rowOf) {
  if (nLayers < 2) throw ArgError("net_shard_lower_backward: the network needs a hidden layer below its output");
  if (h.mode != 0) throw ArgError("net_shard_lower_backward: mode 0 (adam) only");
  const uint32_t kLast = nLayers - 1;
  net::FtzScope ftz;
  net::Scratch& s = net::scratch();
  if (n == 0) return;
  if (s.layer.size() < nLayers || s.rowsOfSlice.size() < n) throw ArgError("net_shard_lower_backward: no forward pass of this batch on this thread");
  const uint32_t ldn = nk::pad_to(n, nk::kSamplePad);
  const Slice sl{n, ldn, s.rowsOfSlice.data(), &data};
  const uint32_t dPrev = layers[kLast].inDim;
  float* dAt = grow(s.dAt, size_t(dPrev) * ldn);
  std::memset(dAt, 0, sizeof(float) * size_t(dPrev) * ldn);
  for (uint32_t i = 0; i < n; ++i)
    for (uint32_t j = 0; j < dPrev; ++j) dAt[size_t(j) * ldn + i] = dH[size_t(i) * dPrev + j];
  backward_lower(layers, kLast, sl, h, s, rowOf);
}

}  // namespace sl
