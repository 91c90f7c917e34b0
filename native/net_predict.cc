// netPredictSlice: forward pass and top-k labels with softmax probabilities. Legend: net.h.
//   exact:   every neuron of the output layer, streamed in blocks of rows (a GEMM over the slice); each
//            sample keeps a small candidate buffer (score > its current k-th best) and an online
//            log-sum-exp, so no (n, outDim) score matrix is ever stored;
//   sampled: an LSH-sampled output layer scores only its candidates (per-sample dot products).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "napi_util.h"
#include "net_internal.h"
#include "net_parallel.h"
#include "topk.h"

namespace sl {
namespace {

using net::grow;

// Writes top-k of scores (ids optional) with probabilities exp(score - lse).
void emit_topk(uint32_t* outIdx, float* outVal, const float* scores, const uint32_t* ids, size_t m, uint32_t k,
               double lse) {
  topk_row(outIdx, outVal, scores, ids, m, k);
  for (uint32_t e = 0; e < k; ++e)
    outVal[e] = outIdx[e] == std::numeric_limits<uint32_t>::max() ? 0.0f : static_cast<float>(std::exp(outVal[e] - lse));
}

double log_sum_exp(const float* z, size_t m, float* tmp) {
  float mx = -std::numeric_limits<float>::infinity();
  for (size_t j = 0; j < m; ++j) mx = std::max(mx, z[j]);
  nk::exp_shift(tmp, z, mx, static_cast<uint32_t>(m));
  double sum = 0;
  for (size_t j = 0; j < m; ++j) sum += tmp[j];
  return mx + std::log(sum);
}

// The k best of sample i's m candidates ids[0..m) under each of the S logit scales: score = scale x z (the
// network's logit) + zw (the wide part's, or none when zw is null), with probabilities over the m; into
// out*[(i S + si) k ..]. comb, tmp: (m) scratch.
void emit_scaled(uint32_t* outIdx, float* outVal, uint32_t i, const float* z, const float* zw, const uint32_t* ids,
                 size_t m, uint32_t k, const float* scales, uint32_t S, float* comb, float* tmp) {
  for (uint32_t si = 0; si < S; ++si) {
    const float x = scales[si];
    if (zw)
      for (size_t p = 0; p < m; ++p) comb[p] = x * z[p] + zw[p];
    else
      for (size_t p = 0; p < m; ++p) comb[p] = x * z[p];
    const double lse = m ? log_sum_exp(comb, m, tmp) : 0.0;
    const size_t at = (size_t(i) * S + si) * k;
    emit_topk(outIdx + at, outVal + at, comb, ids, m, k, lse);
  }
}


// Exact top-k over every neuron of output layer L (k >= 1) for the slice's samples, the network's logits
// multiplied by `scale` before the wide part's scores are added; sample i's k into out*[i stride ..].
void predict_dense(uint32_t* outIdx, float* outVal, size_t stride, const NetLayer& L, const net::LayerBuf& prev,
                   uint32_t n, uint32_t ldn, uint32_t k, net::Scratch& s, const CsrView& data, const uint32_t* rows,
                   float scale) {
  const uint32_t d = L.inDim, o = L.outDim;
  const uint32_t C = k + 128;  // candidate buffer per sample; compacted back to k when full
  uint32_t* cIds = grow(s.candIds, size_t(n) * C);
  float* cVal = grow(s.candVal, size_t(n) * C);
  uint32_t* cCnt = grow(s.candCount, n);
  float* thr = grow(s.thr, n);
  uint32_t* tIdx = grow(s.tmpIdx, k);
  float* tVal = grow(s.tmpVal, k);
  float* mx = grow(s.mx, ldn);
  float* sum = grow(s.sum, ldn);
  float* zt = grow(s.zt, size_t(nk::kRowBlock) * ldn);
  std::fill(cCnt, cCnt + n, 0u);
  std::fill(thr, thr + n, -std::numeric_limits<float>::infinity());
  std::fill(mx, mx + ldn, -std::numeric_limits<float>::infinity());
  std::fill(sum, sum + ldn, 0.0f);
  s.wide.clear();
  if (L.hasWide) {
    net::wide_terms(s.wide, L, data, rows, n);
    net::wide_sort_by_label(s.wide);
  }
  size_t wp = 0;
  for (uint32_t j0 = 0; j0 < o; j0 += nk::kRowBlock) {
    const uint32_t R = std::min(nk::kRowBlock, o - j0);
    nk::blk_forward(zt, L.W + size_t(j0) * d, d, L.b + j0, prev.At.data(), R, ldn);
    if (scale != 1.0f)
      for (size_t q = 0, e = size_t(R) * ldn; q < e; ++q) zt[q] *= scale;
    net::wide_add_block(zt, ldn, L, s.wide, wp, j0, R);
    nk::lse_update(mx, sum, zt, R, ldn);
    for (uint32_t r = 0; r < R; ++r) {
      const float* zr = zt + size_t(r) * ldn;
      for (uint32_t i = 0; i < n; ++i) {
        // Rows arrive in increasing id order, so a score equal to the k-th best loses its tie: strict >.
        if (!(zr[i] > thr[i])) continue;
        const size_t base = size_t(i) * C;
        cIds[base + cCnt[i]] = j0 + r;
        cVal[base + cCnt[i]] = zr[i];
        if (++cCnt[i] == C) {
          topk_row(tIdx, tVal, cVal + base, cIds + base, C, k);
          std::memcpy(cIds + base, tIdx, sizeof(uint32_t) * k);
          std::memcpy(cVal + base, tVal, sizeof(float) * k);
          cCnt[i] = k;
          thr[i] = tVal[k - 1];
        }
      }
    }
  }
  for (uint32_t i = 0; i < n; ++i)
    emit_topk(outIdx + size_t(i) * stride, outVal + size_t(i) * stride, cVal + size_t(i) * C, cIds + size_t(i) * C,
              cCnt[i], k, double(mx[i]) + std::log(double(sum[i])));
}

// net_predict_slice on a checked slice (k >= 1, S >= 1, scales set), in the calling thread.
double predict_checked(uint32_t* outIdx, float* outVal, const NetLayer* layers, uint32_t nLayers, const CsrView& data,
                       const uint32_t* pointIds, uint32_t n, uint32_t k, bool sampled, const float* scales, uint32_t S) {
  if (n == 0) return 0;
  net::FtzScope ftz;
  net::Scratch& s = net::scratch();
  uint32_t* rows = grow(s.rowsOfSlice, n);
  std::memcpy(rows, pointIds, sizeof(uint32_t) * n);
  net::ForwardCtx c;
  c.n = n;
  c.ldn = nk::pad_to(n, nk::kSamplePad);
  c.rows = rows;
  c.useSampling = sampled;
  c.training = false;
  net::forward_hidden(layers, nLayers, data, c, s);

  const uint32_t kLast = nLayers - 1;
  const NetLayer& last = layers[kLast];
  if (kLast == 0) {
    const net::LayerBuf& b0 = s.layer[0];
    float* tmp = grow(s.candVal, last.outDim);
    float* comb = grow(s.tmpVal, last.outDim);
    for (uint32_t i = 0; i < n; ++i)
      emit_scaled(outIdx, outVal, i, b0.A.data() + size_t(i) * b0.lda, nullptr, nullptr, last.outDim, k, scales, S, comb, tmp);
    return double(n) * last.outDim;
  }
  const net::LayerBuf& prev = s.layer[kLast - 1];
  if (!(last.sampled && sampled)) {
    for (uint32_t si = 0; si < S; ++si)
      predict_dense(outIdx + size_t(si) * k, outVal + size_t(si) * k, size_t(S) * k, last, prev, n, c.ldn, k, s, data, rows,
                    scales[si]);
    return double(n) * last.outDim;
  }
  net::LayerBuf& buf = s.layer[kLast];
  if (last.hasIndex) {
    // Cluster index. The head, shared by every query, is a dense (nHead, n) block computed with the blocked
    // kernels on gathered rows; the clusters' members are scored cluster by cluster, each member's row read
    // once for all the queries that probed its cluster. Both are merged per query for the top-k and the
    // log-sum-exp.
    const ClusterIndex& ix = last.index;
    const uint32_t d = last.inDim, H = ix.nHead, ldn = c.ldn;
    float* zH = grow(s.zHead, size_t(H) * ldn);
    float* wg = grow(s.wg, size_t(nk::kRowBlock) * d);
    float* bg = grow(s.bg, nk::kRowBlock);
    for (uint32_t r0 = 0; r0 < H; r0 += nk::kRowBlock) {
      const uint32_t R = std::min(nk::kRowBlock, H - r0);
      for (uint32_t r = 0; r < R; ++r) {
        std::memcpy(wg + size_t(r) * d, last.W + size_t(ix.head[r0 + r]) * d, sizeof(float) * d);
        bg[r] = last.b[ix.head[r0 + r]];
      }
      nk::blk_forward(zH + size_t(r0) * ldn, wg, d, bg, prev.At.data(), R, ldn);
    }
    net::cluster_active_sets(buf, last, prev, n, ldn, s);
    const uint32_t* off = buf.actOff.data();
    const size_t P = off[n];
    for (size_t p = 0; p < P; ++p)
      if (buf.actIds[p] >= last.outDim) throw ArgError("sampling.index.members holds an id >= outDim");
    float* z = grow(buf.z, P);
    {
      // Probes grouped by cluster (counting sort, stable: samples ascending within a cluster).
      const size_t nProbes = s.probeCluster.size();
      uint32_t* start = grow(s.cluStart, size_t(ix.C) + 1);
      uint32_t* order = grow(s.probeOrder, nProbes);
      std::fill(start, start + ix.C + 1, 0u);
      for (size_t q = 0; q < nProbes; ++q) ++start[s.probeCluster[q] + 1];
      for (uint32_t cl = 0; cl < ix.C; ++cl) start[cl + 1] += start[cl];
      for (size_t q = 0; q < nProbes; ++q) order[start[s.probeCluster[q]]++] = static_cast<uint32_t>(q);
      for (uint32_t cl = ix.C; cl > 0; --cl) start[cl] = start[cl - 1];
      start[0] = 0;
      const float* A = prev.A.data();
      for (uint32_t cl = 0; cl < ix.C; ++cl) {
        if (start[cl] == start[cl + 1]) continue;
        for (uint32_t e = ix.offsets[cl]; e < ix.offsets[cl + 1]; ++e) {
          // Members ascend but skip: the next one's weight row is requested while this one's is scored.
          if (e + 1 < ix.offsets[cl + 1]) {
            const char* nx = reinterpret_cast<const char*>(last.W + size_t(ix.members[e + 1]) * d);
            for (size_t b = 0; b < sizeof(float) * d; b += 64) __builtin_prefetch(nx + b);
          }
          const uint32_t j = ix.members[e], rel = e - ix.offsets[cl];
          const float* wj = last.W + size_t(j) * d;
          const float bj = last.b[j];
          for (uint32_t t = start[cl]; t < start[cl + 1]; ++t) {
            const uint32_t q = order[t];
            z[s.probePos[q] + rel] = bj + nk::dot(wj, A + size_t(s.probeSample[q]) * prev.lda, d);
          }
        }
      }
    }
    size_t most = 0;
    for (uint32_t i = 0; i < n; ++i) most = std::max<size_t>(most, off[i + 1] - off[i]);
    // The wide part proposes up to a sixteenth of the budget more candidates per sample.
    const size_t wideExtra = last.hasWide ? std::max<size_t>(k, ix.budget / 16) : 0;
    most += wideExtra;
    float* zs = grow(buf.dz, H + most);
    uint32_t* idsOf = grow(s.tmpIdx, std::max<size_t>(k, H + most));
    float* tmp = grow(s.tmpVal, std::max<size_t>(k, H + most));
    float* zw = last.hasWide ? grow(s.thr, H + most) : nullptr;
    float* comb = grow(s.zlab, H + most);
    // Head scores sample-major (one blocked transpose instead of a strided read per sample).
    float* zHs = grow(s.candVal, size_t(n) * std::max<uint32_t>(H, 1));
    if (H) nk::transpose(zHs, H, zH, ldn, H, n);
    double scored = 0;
    for (uint32_t i = 0; i < n; ++i) {
      const uint32_t m0 = off[i + 1] - off[i];
      std::memcpy(zs, zHs + size_t(i) * H, sizeof(float) * H);
      std::memcpy(zs + H, z + off[i], sizeof(float) * m0);
      std::memcpy(idsOf, ix.head, sizeof(uint32_t) * H);
      std::memcpy(idsOf + H, buf.actIds.data() + off[i], sizeof(uint32_t) * m0);
      size_t m = H + m0;
      if (last.hasWide) {
        const size_t before = m;
        m = net::wide_candidates(last, data, rows[i], prev.A.data() + size_t(i) * prev.lda, idsOf, zs, zw, m, wideExtra, s);
        scored += double(m - before);
      }
      emit_scaled(outIdx, outVal, i, zs, zw, idsOf, m, k, scales, S, comb, tmp);
    }
    return double(P) + double(H) * n + scored;
  }
  net::sampled_active_sets(buf, last, kLast, prev.A.data(), prev.lda, c, nullptr, nullptr, s);
  const uint32_t* off = buf.actOff.data();
  const uint32_t* ids = buf.actIds.data();
  float* z = grow(buf.z, off[n]);
  const uint32_t d = last.inDim;
  double scored = double(off[n]);
  for (uint32_t i = 0; i < n; ++i) {
    const float* x = prev.A.data() + size_t(i) * prev.lda;
    for (uint32_t p = off[i]; p < off[i + 1]; ++p) z[p] = last.b[ids[p]] + nk::dot(last.W + size_t(ids[p]) * d, x, d);
    const uint32_t m = off[i + 1] - off[i];
    // Candidates and (with a wide part) the wide part's own proposals, gathered per sample.
    const size_t extra = last.hasWide ? std::max<size_t>(k, m / 4) : 0;
    float* comb = grow(s.tmpVal, m + extra);
    float* tmp = grow(s.zlab, m + extra);
    if (last.hasWide) {
      uint32_t* wIds = grow(s.candIds, m + extra);
      float* wz = grow(s.candVal, m + extra);
      float* zw = grow(s.thr, m + extra);
      std::memcpy(wIds, ids + off[i], sizeof(uint32_t) * m);
      std::memcpy(wz, z + off[i], sizeof(float) * m);
      const size_t mm = net::wide_candidates(last, data, rows[i], x, wIds, wz, zw, m, extra, s);
      scored += double(mm - m);
      emit_scaled(outIdx, outVal, i, wz, zw, wIds, mm, k, scales, S, comb, tmp);
      continue;
    }
    emit_scaled(outIdx, outVal, i, z + off[i], nullptr, ids + off[i], m, k, scales, S, comb, tmp);
  }
  return scored;
}

}  // namespace

double net_predict_slice(uint32_t* outIdx, float* outVal, const NetLayer* layers, uint32_t nLayers, const CsrView& data,
                         const uint32_t* pointIds, uint32_t n, uint32_t k, bool sampled, const float* scales,
                         uint32_t S, uint32_t threads) {
  if (k == 0) throw ArgError("k must be positive");
  static const float kOne = 1.0f;
  if (S == 0 || !scales) scales = &kOne, S = 1;
  net::check_slice(data, pointIds, n, layers[0].inDim, false, 0);
  // Exact prediction only: sampled prediction's candidate sets may be drawn for the slice as a whole. Ranges
  // of at least 32 samples (one kSamplePad block), so that no range pads a block mostly with zeros.
  const uint32_t T = sampled ? 1u : std::max(1u, std::min(threads, n / nk::kSamplePad));
  if (T <= 1) return predict_checked(outIdx, outVal, layers, nLayers, data, pointIds, n, k, sampled, scales, S);
  std::vector<double> part(T, 0.0);
  net::fork_join(T, [&](uint32_t t) {
    uint32_t lo, hi;
    net::split_range(n, T, t, nk::kSamplePad, lo, hi);
    const size_t at = size_t(lo) * S * k;
    part[t] = predict_checked(outIdx + at, outVal + at, layers, nLayers, data, pointIds + lo, hi - lo, k, sampled, scales, S);
  });
  double scored = 0;
  for (uint32_t t = 0; t < T; ++t) scored += part[t];
  return scored;
}

// net::wide_candidates (net_internal.h; the wide part: net_wide.h). The row's sums are kept densely, a float per label (s.wideDense, 4 N bytes: in L2 at 10^4-10^5 labels),
// by wide_dense_add, 16 list entries at a time: no place map, no branch on whether a label was seen. Each
// sum adds its terms in the order of the row's nonzeros, as wide_scores does, so the scores are the same.
size_t net::wide_candidates(const NetLayer& L, const CsrView& data, uint32_t row, const float* h, uint32_t* ids, float* z,
                            float* zw, size_t m, size_t extra, net::Scratch& s) {
  const uint32_t d = L.inDim, N = L.outDim;
  float untouched;
  std::memcpy(&untouched, &net::kWideUntouched, 4);
  if (s.wideDense.size() < N) s.wideDense.assign(N, untouched);  // every use puts the labels it touched back to this
  float* dense = s.wideDense.data();
  const uint32_t* off = L.wideOff;
  const uint32_t* lab = L.wideLab;
  const float* wt = L.wideW;
  const size_t entries = net::wide_prefetch_lists(L, data, row);
  uint32_t* touched = grow(s.wideTouched, entries + 16);
  size_t count = 0;
  for (uint32_t q = data.offsets[row], q1 = data.offsets[row + 1]; q < q1; ++q) {
    const uint32_t f = data.indices[q];
    count = net::wide_dense_add(lab, wt, off[f], off[f + 1], data.values[q], N, dense, touched, count);
  }
  const auto seen = [dense](uint32_t j) {
    uint32_t bits;
    std::memcpy(&bits, dense + j, 4);
    return bits != net::kWideUntouched;
  };
  for (size_t p = 0; p < m; ++p) {
    zw[p] = 0.0f;
    if (seen(ids[p])) {  // a candidate already (candidates are distinct): put back here
      zw[p] = dense[ids[p]];
      dense[ids[p]] = untouched;
    }
  }
  // The labels still holding a sum are not candidates: they and their sums, compact, then the best `extra`.
  float* v = grow(s.wideVals, count);
  size_t nNew = 0;
  for (size_t t = 0; t < count; ++t) {
    const uint32_t j = touched[t];
    if (seen(j)) {
      v[nNew] = dense[j];
      dense[j] = untouched;
      touched[nNew++] = j;
    }
  }
  const size_t take = std::min(extra, nNew);
  net::wide_top(touched, v, nNew, take);
  // The proposals' weight rows are scattered over W: request them all before the first dot product.
  for (size_t t = 0; t < take; ++t) {
    const char* row = reinterpret_cast<const char*>(L.W + size_t(touched[t]) * d);
    for (size_t b = 0; b < sizeof(float) * d; b += 64) __builtin_prefetch(row + b);
  }
  for (size_t t = 0; t < take; ++t) {
    const uint32_t j = touched[t];
    ids[m] = j;
    z[m] = L.b[j] + nk::dot(L.W + size_t(j) * d, h, d);
    zw[m] = v[t];
    ++m;
  }
  return m;
}

}  // namespace sl
