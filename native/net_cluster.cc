// The cluster index of a sampled output layer: a learned (data-dependent) hash for sampled inference.
//
// Why not the training tables: a neuron's logit is w_j . h + b_j, a maximum-inner-product problem, and the
// LSH families hash w_j alone, without b_j, and by angle, without |w_j|. On trained weights the neurons
// with the largest logits are the frequent labels with large norms and biases, which angular hashes do not
// favour (measured: the exact top-1 is among the table candidates for 25-38% of points at the 670k shape).
//
// The index: every neuron's augmented vector x_j = [w_j, b_j] (d + 1) is assigned to one of C centres
// by k-means (Lloyd's iterations on a seeded sample of rows, then one assignment pass over all rows). A
// query h is augmented to [h, 1], so x_j . [h, 1] is exactly the logit; it scores the C centres, and the
// clusters are probed from the best centre down until `budget` neurons are collected, which are then scored
// exactly. Like an LSH table, a cluster is a bucket; unlike one, the buckets follow the weights, and the
// probe order follows the inner product (faiss's IVF, used for MIPS).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <vector>

#include "napi_util.h"
#include "net_internal.h"
#include "net_parallel.h"
#include "rng.h"

namespace sl {
namespace {

using net::grow;

constexpr uint32_t kChunk = 256;  // vectors per assignment block (ldn)

// Row j's transformed vector, contiguous: out[0 .. d + 2) = [x / M, sqrt(1 - |x|^2 / M^2)] with x = [W[j], b[j]]
// and M the largest |x| (invM = 1 / M). A loop the compiler vectorises (the rows are read whole).
inline void transform_row(float* out, const float* W, const float* b, uint32_t d, uint32_t j, const double* norm2,
                          double invM) {
  const float* x = W + size_t(j) * d;
  for (uint32_t r = 0; r < d; ++r) out[r] = static_cast<float>(x[r] * invM);
  out[d] = static_cast<float>(b[j] * invM);
  out[d + 1] = static_cast<float>(std::sqrt(std::max(0.0, 1.0 - norm2[j] * invM * invM)));
}

// Fills Xt (d + 2, ldn) with the transformed vectors of rows ids[0..n) (column s: transform_row of ids[s]),
// padding 0; rowsOut (n, d + 2) keeps them row by row. Written row-major first, then transposed in blocks: a
// column written value by value stores each of its d + 2 values to another cache line.
void gather_transformed(float* Xt, uint32_t ldn, const float* W, const float* b, uint32_t d, const uint32_t* ids,
                        uint32_t n, const double* norm2, double invM, float* rowsOut) {
  const uint32_t w = d + 2;
  for (uint32_t s = 0; s < n; ++s) transform_row(rowsOut + size_t(s) * w, W, b, d, ids[s], norm2, invM);
  nk::transpose(Xt, ldn, rowsOut, w, n, w);
  if (n < ldn)
    for (uint32_t r = 0; r < w; ++r) std::memset(Xt + size_t(r) * ldn + n, 0, sizeof(float) * (ldn - n));
}

// The running maximum over one block's row of scores z[0..n): where z[s] > bestVal[s] (strictly: the first of
// equal scores stays; a NaN never wins), bestVal[s] = z[s] and best[s] = c. Without a branch, so that it runs
// as vector selects (a branch per score was taken at random).
SL_CLONES void running_max(uint32_t* __restrict best, float* __restrict bestVal, const float* __restrict z, uint32_t n, uint32_t c) {
  for (uint32_t s = 0; s < n; ++s) {
    const bool gt = z[s] > bestVal[s];
    bestVal[s] = gt ? z[s] : bestVal[s];
    best[s] = gt ? c : best[s];
  }
}

// For the columns s < n of Xt: best[s] = argmax_c cent[c] . Xt[:, s] (cent (C, w) unit rows; ties: the first).
void assign_block(uint32_t* best, const float* cent, const float* zeros, uint32_t C, uint32_t w, const float* Xt,
                  uint32_t n, uint32_t ldn, float* zt, float* bestVal) {
  std::fill(bestVal, bestVal + n, -std::numeric_limits<float>::infinity());
  std::fill(best, best + n, 0u);
  for (uint32_t c0 = 0; c0 < C; c0 += nk::kRowBlock) {
    const uint32_t R = std::min(nk::kRowBlock, C - c0);
    nk::blk_forward(zt, cent + size_t(c0) * w, w, zeros, Xt, R, ldn);
    for (uint32_t r = 0; r < R; ++r) running_max(best, bestVal, zt + size_t(r) * ldn, n, c0 + r);
  }
}

}  // namespace

void cluster_build(float* centroids, uint32_t* offsets, uint32_t* members, const float* W, const float* b, uint32_t N,
                   uint32_t d, const uint32_t* rows, uint32_t M, uint32_t C, uint32_t iters, uint32_t sample,
                   uint64_t seed, uint32_t threads) {
  if (N == 0 || d == 0) throw ArgError("cluster index: the layer is empty");
  if (M == 0 || M > N) throw ArgError("cluster index: the rows to index must number 1 to N");
  if (C == 0 || C > M) throw ArgError("cluster index: C must be in [1, rows] but is " + std::to_string(C));
  for (uint32_t i = 0; i < M; ++i)
    if (rows[i] >= N || (i > 0 && rows[i] <= rows[i - 1])) throw ArgError("cluster index: rows must be increasing ids < N");
  net::FtzScope ftz;
  const uint32_t w = d + 2;  // the augmented [w, b] (d + 1) transformed: [x / M, sqrt(1 - |x|^2 / M^2)]
  SplitMix64 rng(seed);
  // The maximum-inner-product transform (Simple-LSH): every row scaled by 1 / M onto the unit ball and lifted
  // onto the unit sphere by one more coordinate; a query [h, 1, 0] then ranks rows by cosine exactly as by
  // logit. Clustering by cosine on the sphere (spherical k-means) follows the directions that win queries.
  std::vector<double> norm2(N);
  double M2 = 0;
  for (uint32_t i = 0; i < M; ++i) {
    const uint32_t j = rows[i];
    const float* x = W + size_t(j) * d;
    double q = double(b[j]) * b[j];
    for (uint32_t r = 0; r < d; ++r) q += double(x[r]) * x[r];
    norm2[j] = q;
    M2 = std::max(M2, q);
  }
  const double invM = M2 > 0 ? 1.0 / std::sqrt(M2) : 1.0;
  // Sample rows with probability proportional to |x|^2 (systematic sampling, repeats dropped): rows with
  // large norms are the ones that win queries, and they are few (labels seen often in training); a uniform
  // sample would spend most centres on the many near-zero rows of labels that were barely trained.
  const uint32_t want = std::max(C, std::min(sample, M));
  std::vector<uint32_t> smp;
  {
    double total = 0;
    for (uint32_t i = 0; i < M; ++i) total += norm2[rows[i]];
    if (total > 0 && want < M) {
      const double step = total / want;
      double next = step * (double(rng.nextU32()) / 4294967296.0), acc = 0;
      for (uint32_t i = 0; i < M; ++i) {
        const uint32_t j = rows[i];
        acc += norm2[j];
        if (acc > next) {
          smp.push_back(j);
          while (next < acc) next += step;
        }
      }
    }
    if (smp.size() < C) {  // too few distinct heavy rows: top up uniformly
      std::vector<uint8_t> in(N, 0);
      for (uint32_t j : smp) in[j] = 1;
      std::vector<uint32_t> rest;
      for (uint32_t i = 0; i < M; ++i)
        if (!in[rows[i]]) rest.push_back(rows[i]);
      for (size_t i = 0; smp.size() < std::min<size_t>(want, M); ++i) {
        std::swap(rest[i], rest[i + rng.below(static_cast<uint32_t>(rest.size() - i))]);
        smp.push_back(rest[i]);
      }
      std::sort(smp.begin(), smp.end());
    }
  }
  const uint32_t m = static_cast<uint32_t>(smp.size());
  // Initial centres: C distinct sample rows (a partial shuffle of the sample).
  std::vector<float> cent(size_t(C) * w);
  {
    std::vector<uint32_t> pick(smp);
    for (uint32_t c = 0; c < C; ++c) std::swap(pick[c], pick[c + rng.below(m - c)]);
    for (uint32_t c = 0; c < C; ++c) transform_row(cent.data() + size_t(c) * w, W, b, d, pick[c], norm2.data(), invM);
  }
  // Assignment: blocks of kChunk rows split over `threads` parts (each with its own scratch; a row's centre
  // does not depend on the others, so the parts give what one thread gives). The centres' sums are added in
  // row order, as one thread adds them: by the one part from the values it has just transformed, or, with
  // several parts, afterwards from the rows transformed again, the centres shared out among the parts (centre
  // c to part c mod parts: each part walks the rows in order and adds those of its own centres, so every
  // centre's sum is added in row order, and each row is read by one part).
  const uint32_t T = std::max(1u, std::min(threads, (std::max(m, M) + kChunk - 1) / kChunk));
  struct Part {
    std::vector<float> Xt, zt, bestVal, rows;
  };
  std::vector<Part> parts(T);
  const std::vector<float> zeros(nk::kRowBlock, 0.0f);
  std::vector<uint32_t> assign(std::max(m, M)), count(C);
  std::vector<double> sum(size_t(C) * w);
  auto assign_rows = [&](const uint32_t* ids, uint32_t n, uint32_t* out, bool accumulate) {
    const uint32_t parts_n = std::min(T, (n + kChunk - 1) / kChunk);
    net::fork_join(parts_n, [&](uint32_t t) {
      Part& p = parts[t];
      p.Xt.resize(size_t(w) * kChunk);
      p.zt.resize(size_t(nk::kRowBlock) * kChunk);
      p.bestVal.resize(kChunk);
      p.rows.resize(size_t(kChunk) * w);
      uint32_t lo, hi;
      net::split_range(n, parts_n, t, kChunk, lo, hi);
      for (uint32_t s0 = lo; s0 < hi; s0 += kChunk) {
        const uint32_t cnt = std::min(kChunk, hi - s0);
        gather_transformed(p.Xt.data(), kChunk, W, b, d, ids + s0, cnt, norm2.data(), invM, p.rows.data());
        assign_block(out + s0, cent.data(), zeros.data(), C, w, p.Xt.data(), cnt, kChunk, p.zt.data(), p.bestVal.data());
        if (!accumulate || parts_n > 1) continue;
        for (uint32_t s = 0; s < cnt; ++s) {
          const uint32_t c = out[s0 + s];
          ++count[c];
          double* acc = sum.data() + size_t(c) * w;
          const float* x = p.rows.data() + size_t(s) * w;
          for (uint32_t r = 0; r < w; ++r) acc[r] += x[r];
        }
      }
    });
    if (!accumulate || parts_n <= 1) return;
    net::fork_join(parts_n, [&](uint32_t t) {
      float* x = parts[t].rows.data();  // kChunk x w >= w floats (sized by the pass above)
      for (uint32_t s = 0; s < n; ++s) {
        const uint32_t c = out[s];
        if (c % parts_n != t) continue;
        ++count[c];
        transform_row(x, W, b, d, ids[s], norm2.data(), invM);
        double* acc = sum.data() + size_t(c) * w;
        for (uint32_t r = 0; r < w; ++r) acc[r] += x[r];
      }
    });
  };
  for (uint32_t it = 0; it < iters; ++it) {
    std::fill(sum.begin(), sum.end(), 0.0);
    std::fill(count.begin(), count.end(), 0u);
    assign_rows(smp.data(), m, assign.data(), true);
    for (uint32_t c = 0; c < C; ++c) {
      float* cen = cent.data() + size_t(c) * w;
      double q = 0;
      for (uint32_t r = 0; r < w; ++r) q += sum[size_t(c) * w + r] * sum[size_t(c) * w + r];
      if (count[c] == 0 || q <= 0) {  // an empty cluster restarts at a random sample row
        transform_row(cen, W, b, d, smp[rng.below(m)], norm2.data(), invM);
        continue;
      }
      const double inv = 1.0 / std::sqrt(q);  // spherical k-means: the centre is the mean direction
      for (uint32_t r = 0; r < w; ++r) cen[r] = static_cast<float>(sum[size_t(c) * w + r] * inv);
    }
  }
  // Every row to its nearest centre, then the clusters' members in CSR form (ascending ids within a cluster).
  assign_rows(rows, M, assign.data(), false);
  std::fill(offsets, offsets + C + 1, 0u);
  for (uint32_t i = 0; i < M; ++i) ++offsets[assign[i] + 1];
  for (uint32_t c = 0; c < C; ++c) offsets[c + 1] += offsets[c];
  std::vector<uint32_t> cursor(offsets, offsets + C);
  for (uint32_t i = 0; i < M; ++i) members[cursor[assign[i]]++] = rows[i];
  std::memcpy(centroids, cent.data(), sizeof(float) * size_t(C) * w);
}

void cluster_norms(double* out, const float* W, const float* b, uint32_t d, const uint32_t* ids, uint32_t n) {
  for (uint32_t s = 0; s < n; ++s) {
    const uint32_t j = ids[s];
    const float* x = W + size_t(j) * d;
    double q = double(b[j]) * b[j];
    for (uint32_t r = 0; r < d; ++r) q += double(x[r]) * x[r];
    out[s] = q;
  }
}

void cluster_transform(float* out, const float* W, const float* b, uint32_t d, const uint32_t* ids, uint32_t n,
                       const double* norm2, double invM) {
  for (uint32_t s = 0; s < n; ++s) transform_row(out + size_t(s) * (d + 2), W, b, d, ids[s], norm2, invM);
}

void cluster_assign(uint32_t* best, double* sums, double* counts, const float* W, const float* b, uint32_t d,
                    const uint32_t* ids, uint32_t n, const double* norm2, double invM, const float* cent, uint32_t C) {
  if (C == 0) throw ArgError("cluster index: C must be positive");
  net::FtzScope ftz;
  const uint32_t w = d + 2;
  std::vector<float> zeros(nk::kRowBlock, 0.0f), Xt(size_t(w) * kChunk), zt(size_t(nk::kRowBlock) * kChunk), bestVal(kChunk);
  std::vector<float> rows(size_t(kChunk) * w);
  for (uint32_t s0 = 0; s0 < n; s0 += kChunk) {
    const uint32_t cnt = std::min(kChunk, n - s0);
    gather_transformed(Xt.data(), kChunk, W, b, d, ids + s0, cnt, norm2, invM, rows.data());
    assign_block(best + s0, cent, zeros.data(), C, w, Xt.data(), cnt, kChunk, zt.data(), bestVal.data());
    if (!sums) continue;
    for (uint32_t s = 0; s < cnt; ++s) {
      const uint32_t c = best[s0 + s];
      counts[c] += 1;
      double* acc = sums + size_t(c) * w;
      for (uint32_t r = 0; r < w; ++r) acc[r] += Xt[size_t(r) * kChunk + s];
    }
  }
}

namespace net {

void cluster_active_sets(LayerBuf& buf, const NetLayer& L, const LayerBuf& prev, uint32_t n, uint32_t ldn, Scratch& s) {
  const ClusterIndex& ix = L.index;
  const uint32_t d = L.inDim, w = d + 2, C = ix.C;
  // Transformed queries [h, 1, 0] (w, ldn) and the centre scores (C, ldn).
  float* Xt = grow(s.zS, size_t(w) * ldn);
  std::memcpy(Xt, prev.At.data(), sizeof(float) * size_t(d) * ldn);
  for (uint32_t i = 0; i < ldn; ++i) Xt[size_t(d) * ldn + i] = i < n ? 1.0f : 0.0f;
  std::memset(Xt + size_t(d + 1) * ldn, 0, sizeof(float) * ldn);
  float* zc = grow(s.candVal, size_t(C) * ldn);
  float* zero = grow(s.bg, nk::kRowBlock);
  std::fill(zero, zero + nk::kRowBlock, 0.0f);
  for (uint32_t c0 = 0; c0 < C; c0 += nk::kRowBlock) {
    const uint32_t R = std::min(nk::kRowBlock, C - c0);
    nk::blk_forward(zc + size_t(c0) * ldn, ix.centroids + size_t(c0) * w, w, zero, Xt, R, ldn);
  }
  uint32_t* off = grow(buf.actOff, size_t(n) + 1);
  // The centre scores sample-major (one blocked transpose): a query's scores are then read contiguously.
  float* zq = grow(s.zlab, size_t(n) * C);
  nk::transpose(zq, C, zc, ldn, C, n);
  uint32_t* order = grow(s.candIds, C);
  off[0] = 0;
  size_t P = 0;
  s.probeSample.clear();
  s.probeCluster.clear();
  s.probePos.clear();
  for (uint32_t i = 0; i < n; ++i) {
    // Clusters by descending centre score (ties: the smaller id). Few are probed (the budget over the
    // clusters' sizes): the first kScan are found by scans of the clusters not yet probed (order[q..C)), and
    // only a query that probes more sorts the rest; a sort of all of them per query, reading the scores down
    // a column, cost more than the probes' dot products. The head (scored for every query by the caller)
    // counts towards the budget.
    constexpr uint32_t kScan = 8;
    const float* zi = zq + size_t(i) * C;
    // A NaN centre score ranks last (probe_score).
    const auto score = [zi](uint32_t x) { return probe_score(zi[x]); };
    const auto before = [&score](uint32_t x, uint32_t y) {
      const float sx = score(x), sy = score(y);
      return sx > sy || (sx == sy && x < y);
    };
    std::iota(order, order + C, 0u);
    uint32_t taken = ix.nHead;
    for (uint32_t q = 0; q < C && taken < ix.budget; ++q) {
      if (q < kScan) {
        uint32_t at = q;
        for (uint32_t x = q + 1; x < C; ++x)
          if (before(order[x], order[at])) at = x;
        std::swap(order[q], order[at]);
      } else if (q == kScan) {
        std::sort(order + q, order + C, before);
      }
      const uint32_t c = order[q];
      const uint32_t b0 = ix.offsets[c], b1 = ix.offsets[c + 1];
      s.probeSample.push_back(i);
      s.probeCluster.push_back(c);
      s.probePos.push_back(static_cast<uint32_t>(P));
      uint32_t* ids = grow(buf.actIds, P + (b1 - b0));
      for (uint32_t e = b0; e < b1; ++e, ++P) ids[P] = ix.members[e];
      taken += b1 - b0;
    }
    off[i + 1] = static_cast<uint32_t>(P);
  }
}

}  // namespace net
}  // namespace sl
