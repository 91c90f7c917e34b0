// The re-ranker of an output layer (RerankConfig in src/network/config.ts): per label j a sparse linear
// classifier s_j(x) = v_j . x + c_j, trained after the network as a one-vs-rest L2-regularised squared-hinge
// SVM on the label's positives and its hard negatives (the training points whose network shortlist holds j
// without j being theirs), as per-label linear XC models are trained (LIBLINEAR's dual coordinate descent,
// the solver PECOS and omikuji use), but on the network's shortlist instead of a label tree. At prediction the
// network's top S candidates are re-scored by log p_j + weight x s_j.
//   rerankTrain: label-major CSR (offsets (L + 1), features (nnz), weights (nnz)) and biases (L)
//   rerankScore: s_j(x) for (point, candidate) pairs
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "modules.h"
#include "napi_util.h"
#include "net_internal.h"
#include "net_parallel.h"
#include "rng.h"

namespace sl {

// net_napi.cc: the data and the rows of a call (rows absent: every point, held in `all`).
CsrView net_parse_data(const Napi::Value& v, bool labels);
void net_parse_rows(const Napi::Value& v, uint32_t points, std::vector<uint32_t>& all, const uint32_t*& rows, size_t& n);

namespace {

constexpr uint32_t kNone = std::numeric_limits<uint32_t>::max();

struct RerankModel {
  std::vector<uint32_t> offsets, features;
  std::vector<float> weights, bias;
};

// Range of features of sample r (ids checked < D by the caller).
inline void row_range(const CsrView& d, uint32_t r, uint32_t& q0, uint32_t& q1) {
  q0 = d.offsets[r];
  q1 = d.offsets[r + 1];
}

// Checks rows[0..n) against the data and every feature id against D (once, so the solver and the scorer
// read without checks).
void check_rows(const CsrView& d, const uint32_t* rows, size_t n, uint32_t D) {
  for (size_t t = 0; t < n; ++t) {
    const uint32_t r = rows[t];
    if (r >= d.points) throw ArgError("rows holds a point id >= data.points");
    const uint32_t q0 = d.offsets[r], q1 = d.offsets[r + 1];
    if (q0 > q1 || q1 > d.nnz) throw ArgError("data.offsets are not a valid CSR layout");
    for (uint32_t q = q0; q < q1; ++q)
      if (d.indices[q] >= D) throw ArgError("data holds a feature id >= features");
  }
}

// Inverse L2 norm of sample r's feature values (0 for an empty row): the re-ranker sees every row at unit
// length, as linear XC models take tf-idf rows, so that C and the pruning threshold mean the same on any data.
inline double inv_norm(const CsrView& d, uint32_t r) {
  double s = 0;
  for (uint32_t q = d.offsets[r]; q < d.offsets[r + 1]; ++q) s += double(d.values[q]) * d.values[q];
  return s > 0 ? 1.0 / std::sqrt(s) : 0.0;
}

// w . x over the nonzeros [q0, q1) of a data row, in four independent sums: one running sum waits for
// each add in turn (about 4 cycles an element), and these dot products are most of the solver's time.
inline double sparse_dot(const double* w, const uint32_t* idx, const float* val, uint32_t q0, uint32_t q1) {
  double a0 = 0, a1 = 0, a2 = 0, a3 = 0;
  uint32_t q = q0;
  for (; q + 4 <= q1; q += 4) {
    a0 += w[idx[q]] * val[q];
    a1 += w[idx[q + 1]] * val[q + 1];
    a2 += w[idx[q + 2]] * val[q + 2];
    a3 += w[idx[q + 3]] * val[q + 3];
  }
  for (; q < q1; ++q) a0 += w[idx[q]] * val[q];
  return (a0 + a1) + (a2 + a3);
}

// The rows of one label's examples, copied next to each other (features, and values already scaled to unit
// row length): the examples are points scattered over the whole training set, and the solver reads each of
// them once per pass; read in place, every row was a cache miss, most of the solver's time (debian-tags).
struct LabelRows {
  std::vector<uint32_t> off, idx;  // (m + 1), (nnz)
  std::vector<float> val;          // (nnz)
};

// One label's dual coordinate descent (squared hinge, bias as a constant feature 1), examples ex[0..m) (index
// into rows) with signs y, rows scaled to unit length (inv: inverse norms by example index into rows); w: (D)
// zero on entry, left zero on return; the kept weights (|w_f| > prune) are appended to feats/wts, sorted by
// feature; returns the bias.
float solve_label(const CsrView& d, const uint32_t* rows, const double* inv, const uint32_t* ex, const int8_t* y,
                  uint32_t m, double C, double eps, uint32_t maxIter, double prune, uint64_t seed,
                  std::vector<double>& w, std::vector<uint8_t>& touchedMark, std::vector<uint32_t>& touched,
                  std::vector<double>& alpha, std::vector<double>& qd, std::vector<uint32_t>& order, LabelRows& lr,
                  std::vector<uint32_t>& feats, std::vector<float>& wts) {
  const double diag = 0.5 / C;
  alpha.assign(m, 0.0);
  qd.resize(m);
  order.resize(m);
  touched.clear();
  lr.off.resize(size_t(m) + 1);
  // The examples' entries counted first, so that the copy below writes through plain pointers (a push_back
  // per entry, with its capacity check, cost a tenth of the solver's time on debian-tags).
  lr.off[0] = 0;
  for (uint32_t i = 0; i < m; ++i) {
    const uint32_t r = rows[ex[i]];
    lr.off[i + 1] = lr.off[i] + (d.offsets[r + 1] - d.offsets[r]);
  }
  if (lr.idx.size() < lr.off[m]) lr.idx.resize(lr.off[m]), lr.val.resize(lr.off[m]);
  uint32_t* oi = lr.idx.data();
  float* ov = lr.val.data();
  for (uint32_t i = 0; i < m; ++i) {
    uint32_t q0, q1;
    row_range(d, rows[ex[i]], q0, q1);
    const double s = inv[ex[i]];
    // The bias feature (value 1), the unit-length row and the L2 loss's diagonal.
    qd[i] = 1.0 + (s > 0 ? 1.0 : 0.0) + diag;
    uint32_t* di = oi + lr.off[i];
    float* dv = ov + lr.off[i];
    for (uint32_t q = q0; q < q1; ++q) {
      const uint32_t f = d.indices[q];
      if (!touchedMark[f]) touchedMark[f] = 1, touched.push_back(f);
      *di++ = f;
      *dv++ = static_cast<float>(d.values[q] * s);
    }
    order[i] = i;
  }
  const uint32_t* li = lr.idx.data();
  const float* lv = lr.val.data();
  double wb = 0.0;
  SplitMix64 rng(seed);
  // LIBLINEAR's shrinking (solve_l2r_l1l2_svc): an example at alpha = 0 whose gradient lies above the largest
  // projected gradient of the previous pass is taken out of the active set (the first `active` of order):
  // most of a label's examples are shortlist negatives that end up far outside the margin, and they stop
  // costing a sparse dot product per pass. When the active set meets the tolerance, every example is checked
  // again before the solver stops, so the stopping rule is the same as without shrinking.
  uint32_t active = m;
  double pgMaxOld = std::numeric_limits<double>::infinity();
  for (uint32_t it = 0; it < maxIter;) {
    for (uint32_t i = active; i > 1; --i) std::swap(order[i - 1], order[rng.below(i)]);
    double pgMax = -std::numeric_limits<double>::infinity(), pgMin = std::numeric_limits<double>::infinity();
    for (uint32_t t = 0; t < active; ++t) {
      const uint32_t i = order[t];
      const uint32_t q0 = lr.off[i], q1 = lr.off[i + 1];
      const double g = sparse_dot(w.data(), li, lv, q0, q1) + wb;
      const double yi = y[i];
      const double G = yi * g - 1.0 + diag * alpha[i];
      double PG = G;
      if (alpha[i] == 0.0) {
        if (G > pgMaxOld) {  // shrunk: bound at 0 and expected to stay there
          std::swap(order[t], order[--active]);
          --t;
          continue;
        }
        PG = std::min(G, 0.0);
      }
      pgMax = std::max(pgMax, PG);
      pgMin = std::min(pgMin, PG);
      if (std::fabs(PG) > 1e-12) {
        const double old = alpha[i];
        alpha[i] = std::max(old - G / qd[i], 0.0);
        const double step = (alpha[i] - old) * yi;
        for (uint32_t q = q0; q < q1; ++q) w[li[q]] += step * lv[q];
        wb += step;
      }
    }
    ++it;
    if (pgMax - pgMin <= eps) {
      if (active == m) break;
      active = m;  // converged on the active set: check every example once more
      pgMaxOld = std::numeric_limits<double>::infinity();
      continue;
    }
    pgMaxOld = pgMax <= 0 ? std::numeric_limits<double>::infinity() : pgMax;
  }
  // The touched features in ascending order: sorted when they are few, else read off the marks in one pass
  // over the features (sorting thousands of ids per label cost a seventh of the solver's time on debian-tags).
  const size_t D = touchedMark.size();
  auto keep = [&](uint32_t f) {
    if (std::fabs(w[f]) > prune) {
      feats.push_back(f);
      wts.push_back(static_cast<float>(w[f]));
    }
    w[f] = 0.0;
    touchedMark[f] = 0;
  };
  if (touched.size() * 16 < D) {
    std::sort(touched.begin(), touched.end());
    for (uint32_t f : touched) keep(f);
  } else {
    for (uint32_t f = 0; f < D; ++f)
      if (touchedMark[f]) keep(f);
  }
  return static_cast<float>(wb);
}

// Per-label SVMs for labels [0, L) on points rows[0..n) (their labels from data) and the shortlist (n, S):
// shortlist[t S + q] a label of the network's top S for rows[t] (kNone: none); ids >= L ignored. only (L) or
// null: with it, only the labels j with only[j] != 0 are trained (a label-sharded rank's; the others are left
// as labels without examples), each exactly as without it.
void rerank_train(RerankModel& out, const CsrView& d, const uint32_t* rows, uint32_t n, const uint32_t* shortlist,
                  uint32_t S, uint32_t L, uint32_t D, double C, double eps, uint32_t maxIter, double prune,
                  uint32_t threads, uint64_t seed, const uint8_t* only) {
  // Examples by label (counting sort): label j's are ex[exOff[j] .. exOff[j + 1]), positives first. With
  // `only`, the other labels' are not collected (a label-sharded rank holds 1/R of them, not every rank all).
  std::vector<uint32_t> exOff(size_t(L) + 1, 0);
  auto collected = [only](uint32_t j) { return !only || only[j]; };
  auto isPositive = [&](uint32_t r, uint32_t j) {
    for (uint32_t q = d.labelOffsets[r]; q < d.labelOffsets[r + 1]; ++q)
      if (d.labelIndices[q] == j) return true;
    return false;
  };
  for (uint32_t t = 0; t < n; ++t) {
    const uint32_t r = rows[t];
    if (d.labelOffsets[r] > d.labelOffsets[r + 1] || d.labelOffsets[r + 1] > d.nLabels)
      throw ArgError("data.labelOffsets are not a valid CSR layout");
    for (uint32_t q = d.labelOffsets[r]; q < d.labelOffsets[r + 1]; ++q) {
      const uint32_t j = d.labelIndices[q];
      if (j >= L) throw ArgError("data holds a label id >= labels");
      if (collected(j)) ++exOff[j + 1];
    }
    for (uint32_t q = 0; q < S; ++q) {
      const uint32_t j = shortlist[size_t(t) * S + q];
      if (j < L && collected(j) && !isPositive(r, j)) ++exOff[j + 1];
    }
  }
  uint64_t total = 0;
  for (uint32_t j = 0; j < L; ++j) total += exOff[j + 1];
  if (total > 0xFFFFFFFFull) throw ArgError("more than 2^32 - 1 (label, point) examples: use fewer rows or a shorter shortlist");
  for (uint32_t j = 0; j < L; ++j) exOff[j + 1] += exOff[j];
  std::vector<uint32_t> ex(exOff[L]), fill(exOff.begin(), exOff.end() - 1);
  std::vector<int8_t> ey(exOff[L]);
  for (uint32_t t = 0; t < n; ++t) {  // positives first: every positive before any negative of the label
    const uint32_t r = rows[t];
    for (uint32_t q = d.labelOffsets[r]; q < d.labelOffsets[r + 1]; ++q) {
      const uint32_t j = d.labelIndices[q];
      if (collected(j)) ex[fill[j]] = t, ey[fill[j]++] = 1;
    }
  }
  for (uint32_t t = 0; t < n; ++t) {
    const uint32_t r = rows[t];
    for (uint32_t q = 0; q < S; ++q) {
      const uint32_t j = shortlist[size_t(t) * S + q];
      if (j < L && collected(j) && !isPositive(r, j)) ex[fill[j]] = t, ey[fill[j]++] = -1;
    }
  }
  // Labels in blocks, taken in turn by the threads; each thread keeps its own output and where each label's
  // entries lie in it.
  struct Part {
    std::vector<uint32_t> feats;
    std::vector<float> wts;
  };
  const uint32_t T = std::max(1u, threads);
  std::vector<double> inv(n);
  for (uint32_t t = 0; t < n; ++t) inv[t] = inv_norm(d, rows[t]);
  std::vector<Part> parts(T);
  std::vector<uint32_t> owner(L), count(L);
  std::vector<size_t> start(L);
  out.bias.assign(L, -1.0f);  // a label with no training example: scored below any trained one's margin
  std::atomic<uint32_t> next{0};
  constexpr uint32_t kBlock = 64;
  net::fork_join(T, [&](uint32_t tid) {
    std::vector<double> w(D, 0.0), alpha, qd;
    std::vector<uint8_t> mark(D, 0);
    std::vector<uint32_t> touched, order;
    LabelRows lr;
    Part& p = parts[tid];
    for (uint32_t j0; (j0 = next.fetch_add(kBlock)) < L;) {
      for (uint32_t j = j0, j1 = std::min(L, j0 + kBlock); j < j1; ++j) {
        owner[j] = tid;
        start[j] = p.feats.size();
        const uint32_t m = exOff[j + 1] - exOff[j];
        if (m > 0)
          out.bias[j] = solve_label(d, rows, inv.data(), ex.data() + exOff[j], ey.data() + exOff[j], m, C, eps, maxIter, prune,
                                    seed * 0x9E3779B97F4A7C15ull + j, w, mark, touched, alpha, qd, order, lr, p.feats, p.wts);
        count[j] = static_cast<uint32_t>(p.feats.size() - start[j]);  // at most D per label
      }
    }
  });
  out.offsets.assign(size_t(L) + 1, 0);
  uint64_t kept = 0;
  for (uint32_t j = 0; j < L; ++j) kept += count[j];
  if (kept > 0xFFFFFFFFull) throw ArgError("more than 2^32 - 1 classifier weights kept: raise prune");
  for (uint32_t j = 0; j < L; ++j) out.offsets[j + 1] = out.offsets[j] + count[j];
  out.features.resize(out.offsets[L]);
  out.weights.resize(out.offsets[L]);
  for (uint32_t j = 0; j < L; ++j) {
    const Part& p = parts[owner[j]];
    std::copy_n(p.feats.begin() + start[j], count[j], out.features.begin() + out.offsets[j]);
    std::copy_n(p.wts.begin() + start[j], count[j], out.weights.begin() + out.offsets[j]);
  }
}

struct RerankView {
  const uint32_t* offsets;  // (L + 1)
  const uint32_t* features; // (nnz), each < D
  const float* weights;     // (nnz)
  const float* bias;        // (L)
  uint32_t L;
  size_t nnz;
};

// Label j's entries [e0, e1), checked against the arrays (a damaged model throws).
inline void label_entries(const RerankView& m, uint32_t j, uint32_t& e0, uint32_t& e1) {
  e0 = m.offsets[j];
  e1 = m.offsets[j + 1];
  if (e0 > e1 || e1 > m.nnz) throw ArgError("model.offsets must not decrease");
}

// out[t S + q] = s_j(x / |x|) for j = cand[t S + q] of sample rows[t] (-inf where j is kNone).
// Throws on a label whose entries run out of its arrays or name a feature >= D (a damaged model). Scored
// label by label where a label is the candidate of several points (below), else point by point: there a
// label with many more weights than the row has features (a frequent label: thousands) is scored by looking
// each of the row's features up in its ascending list (features ascending within a label: rerankProblem
// checks stored ones) instead of reading every weight.
void rerank_score(float* out, const CsrView& d, const uint32_t* rows, uint32_t n, const uint32_t* cand, uint32_t S,
                  const RerankView& m, uint32_t D, uint32_t threads) {
  const uint32_t T = std::max(1u, std::min(threads, n / 64 + 1));
  // Labels that are the candidate of two points or more (the frequent ones, most pairs on a large call) are
  // scored label by label: their weights scattered once into a dense vector, then each of their points'
  // features looked up in it. Their lists are read once per call, not once per point (model2-200k, 5,000
  // points: 45,800 labels for 160,000 pairs), and a long list costs one pass where a point would search it.
  // The others are scored point by point below. pos[j]: kNone for a label scored point by point, else the
  // end of its pairs in byLabel once they are placed. A call of fewer pairs than an eighth of the labels
  // (a served point, a small batch) is scored point by point whole: a pass over the labels would cost more.
  const size_t P = size_t(n) * S;
  const bool grouped = P >= m.L / 8;
  std::vector<uint32_t> pos(grouped ? m.L : 0, 0);
  for (size_t e = 0; grouped && e < P; ++e)
    if (cand[e] != kNone) ++pos[cand[e]];
  std::vector<uint32_t> shared;  // labels scored label by label, ascending
  std::vector<uint32_t> first;   // (shared.size() + 1) their pairs' start in byLabel
  uint32_t placed = 0;
  for (uint32_t j = 0; grouped && j < m.L; ++j) {
    if (pos[j] < 2) {
      pos[j] = kNone;
      continue;
    }
    shared.push_back(j);
    first.push_back(placed);
    const uint32_t c = pos[j];
    pos[j] = placed;
    placed += c;
  }
  first.push_back(placed);
  std::vector<uint32_t> byLabel(placed);  // pair indices e = t S + q, grouped by label
  for (size_t e = 0; grouped && e < P; ++e) {
    const uint32_t j = cand[e];
    if (j != kNone && pos[j] != kNone) byLabel[pos[j]++] = static_cast<uint32_t>(e);
  }
  std::vector<float> scale(n);
  for (uint32_t t = 0; t < n; ++t) scale[t] = static_cast<float>(inv_norm(d, rows[t]));
  if (placed > 0) net::fork_join(T, [&](uint32_t tid) {
    // This thread's labels: those whose pairs start in its share of byLabel.
    const auto lo = std::lower_bound(first.begin(), first.end() - 1, uint32_t(uint64_t(placed) * tid / T));
    const auto hi = std::lower_bound(first.begin(), first.end() - 1, uint32_t(uint64_t(placed) * (tid + 1) / T));
    std::vector<float> w;
    if (lo != hi) w.assign(D, 0.0f);
    for (auto it = lo; it != hi; ++it) {
      const size_t g = it - first.begin();
      const uint32_t j = shared[g];
      uint32_t e0, e1;
      label_entries(m, j, e0, e1);
      for (uint32_t e = e0; e < e1; ++e) {
        const uint32_t f = m.features[e];
        if (f >= D) throw ArgError("model.features holds a feature id >= features");
        w[f] = m.weights[e];
      }
      for (uint32_t p = first[g]; p < first[g + 1]; ++p) {
        const uint32_t e = byLabel[p], t = e / S;
        uint32_t q0, q1;
        row_range(d, rows[t], q0, q1);
        const float sc = scale[t];
        float a[4] = {0, 0, 0, 0};
        uint32_t q = q0;
        for (; q + 4 <= q1; q += 4) {
          a[0] += sc * d.values[q] * w[d.indices[q]];
          a[1] += sc * d.values[q + 1] * w[d.indices[q + 1]];
          a[2] += sc * d.values[q + 2] * w[d.indices[q + 2]];
          a[3] += sc * d.values[q + 3] * w[d.indices[q + 3]];
        }
        for (; q < q1; ++q) a[0] += sc * d.values[q] * w[d.indices[q]];
        out[e] = m.bias[j] + ((a[0] + a[1]) + (a[2] + a[3]));
      }
      for (uint32_t e = e0; e < e1; ++e) w[m.features[e]] = 0.0f;
    }
  });
  net::fork_join(T, [&](uint32_t tid) {
    // The row's values, read at each weight's feature: a map from feature to a slot of a 256-float table
    // (1 byte per feature, a quarter of a dense float row, so that more of it stays cached; slot 0 holds 0)
    // for rows of at most 255 distinct features, else a dense row. Either gives the same sums.
    std::vector<uint8_t> slot;
    std::vector<float> x;
    float val[256];
    std::vector<uint32_t> xf;  // the row's distinct features, ascending
    uint32_t lo, hi;
    net::split_range(n, T, tid, 1, lo, hi);
    for (uint32_t t = lo; t < hi; ++t) {
      uint32_t q0, q1;
      row_range(d, rows[t], q0, q1);
      const float rs = scale[t];
      // The candidates' weight lists lie scattered over arrays far larger than the caches: touch each one's
      // first lines now, so that their misses overlap with each other and with the row's scatter below.
      bool any = false;  // a candidate scored here
      for (uint32_t c = 0; c < S; ++c) {
        const uint32_t j = cand[size_t(t) * S + c];
        if (j >= m.L || (grouped && pos[j] != kNone)) continue;
        any = true;
        const uint32_t e0 = m.offsets[j];
        if (e0 < m.nnz) {
          __builtin_prefetch(m.features + e0);
          __builtin_prefetch(m.weights + e0);
        }
      }
      if (!any) {
        for (uint32_t c = 0; c < S; ++c)
          if (cand[size_t(t) * S + c] == kNone) out[size_t(t) * S + c] = -std::numeric_limits<float>::infinity();
        continue;
      }
      xf.assign(d.indices + q0, d.indices + q1);
      std::sort(xf.begin(), xf.end());
      xf.erase(std::unique(xf.begin(), xf.end()), xf.end());
      const size_t nx = xf.size();
      const bool small = nx < 256;
      if (small) {
        if (slot.empty()) slot.assign(D, 0);
        val[0] = 0.0f;
        for (size_t i = 0; i < nx; ++i) {
          slot[xf[i]] = static_cast<uint8_t>(i + 1);
          val[i + 1] = 0.0f;
        }
        for (uint32_t q = q0; q < q1; ++q) val[slot[d.indices[q]]] += rs * d.values[q];
      } else {
        if (x.empty()) x.assign(D, 0.0f);
        for (uint32_t q = q0; q < q1; ++q) x[d.indices[q]] += rs * d.values[q];
      }
      // x at feature f (f < D).
      auto at = [&](uint32_t f) { return small ? val[slot[f]] : x[f]; };
      for (uint32_t c = 0; c < S; ++c) {
        const uint32_t j = cand[size_t(t) * S + c];
        if (j == kNone) {
          out[size_t(t) * S + c] = -std::numeric_limits<float>::infinity();
          continue;
        }
        if (grouped && pos[j] != kNone) continue;  // scored label by label above
        uint32_t e0, e1;
        label_entries(m, j, e0, e1);
        float s = m.bias[j];
        if (size_t(e1 - e0) > 8 * nx) {
          const uint32_t* f0 = m.features + e0;
          const uint32_t* f1 = m.features + e1;
          for (uint32_t f : xf) {
            f0 = std::lower_bound(f0, f1, f);
            if (f0 == f1) break;
            if (*f0 == f) s += m.weights[f0 - m.features] * at(f);
          }
        } else {
          // The ids checked once per label (a max, no branch per weight), then four independent sums so that
          // the reads of x overlap.
          const uint32_t* fe = m.features;
          const float* we = m.weights;
          uint32_t top = 0;
          for (uint32_t e = e0; e < e1; ++e) top = std::max(top, fe[e]);
          if (e1 > e0 && top >= D) throw ArgError("model.features holds a feature id >= features");
          float a[4] = {0, 0, 0, 0};
          auto sum4 = [&](auto get) {
            uint32_t e = e0;
            for (; e + 4 <= e1; e += 4) {
              a[0] += we[e] * get(fe[e]);
              a[1] += we[e + 1] * get(fe[e + 1]);
              a[2] += we[e + 2] * get(fe[e + 2]);
              a[3] += we[e + 3] * get(fe[e + 3]);
            }
            for (; e < e1; ++e) a[0] += we[e] * get(fe[e]);
          };
          if (small)
            sum4([&](uint32_t f) { return val[slot[f]]; });
          else
            sum4([&](uint32_t f) { return x[f]; });
          s += (a[0] + a[1]) + (a[2] + a[3]);
        }
        out[size_t(t) * S + c] = s;
      }
      if (small)
        for (uint32_t f : xf) slot[f] = 0;
      else
        for (uint32_t f : xf) x[f] = 0.0f;
    }
  });
}

// The k best of each row's S candidates (labels, probs: the network's, rows x S, kNone: none) under
// log max(p, 1e-30) + weight s (s: rerank_score's), into outL / outS (rows x k; kNone and 0 past the row's
// candidates), in double as src/network/rerank.ts's reference. The shortlist's probability mass is shared out
// by the softmax of the combined scores over the shortlist. Equal scores keep the network's order: each
// place takes the first best of those left (a scan for k <= 16, S k compares; a stable sort beyond).
void rerank_combine(const uint32_t* labels, const float* probs, const float* s, size_t rows, uint32_t S, double weight,
                    uint32_t k, uint32_t* outL, float* outS) {
  std::vector<double> comb(S);
  std::vector<uint32_t> order(S);
  std::vector<uint8_t> taken(S);
  std::vector<uint32_t> byScore(S);
  for (size_t i = 0; i < rows; ++i) {
    const size_t base = i * S;
    uint32_t n = 0;
    double mass = 0, mx = -std::numeric_limits<double>::infinity();
    for (uint32_t q = 0; q < S; ++q) {
      if (labels[base + q] == kNone) continue;
      const double p = probs[base + q];
      mass += p;
      const double c = std::log(std::max(p, 1e-30)) + weight * double(s[base + q]);
      comb[n] = c;
      order[n] = q;
      if (c > mx) mx = c;
      ++n;
    }
    double sum = 0;
    for (uint32_t t = 0; t < n; ++t) sum += std::exp(comb[t] - mx);
    std::fill(taken.begin(), taken.begin() + n, 0);
    if (k > 16) {
      for (uint32_t t = 0; t < n; ++t) byScore[t] = t;
      std::stable_sort(byScore.begin(), byScore.begin() + n, [&](uint32_t a, uint32_t b) { return comb[a] > comb[b]; });
    }
    for (uint32_t q = 0; q < k; ++q) {
      int64_t best = -1;
      if (k > 16) {
        if (q < n) best = byScore[q];
      } else {
        for (uint32_t t = 0; t < n; ++t)
          if (!taken[t] && (best < 0 || comb[t] > comb[best])) best = t;
      }
      const size_t at = i * k + q;
      if (best < 0) {
        outL[at] = kNone;
        outS[at] = 0.0f;
        continue;
      }
      taken[best] = 1;
      outL[at] = labels[base + order[best]];
      outS[at] = static_cast<float>((mass * std::exp(comb[best] - mx)) / sum);
    }
  }
}

// rerankTrain({ data (with labels), rows: Uint32Array | null, shortlist: Uint32Array (rows x S), S, labels,
//   features, C, eps, maxIter, prune, threads, seed, only?: Uint32Array (label ids to train; absent: all) })
//   -> { offsets: Uint32Array (labels + 1), features: Uint32Array (nnz), weights: Float32Array (nnz),
//        bias: Float32Array (labels) }   (fresh arrays: the count of kept weights is known only at the end)
Napi::Value RerankTrain(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  Napi::Object o = GetObject(info[0], "options");
  const CsrView d = net_parse_data(o.Get("data"), true);
  const uint32_t* rows = nullptr;
  size_t n = 0;
  std::vector<uint32_t> all;
  net_parse_rows(o.Get("rows"), d.points, all, rows, n);
  const uint32_t S = GetU32Prop(o, "S"), L = GetU32Prop(o, "labels"), D = GetU32Prop(o, "features");
  auto sl = GetArrayProp<uint32_t>(o, "shortlist");
  if (sl.size != n * size_t(S)) throw ArgError("shortlist must hold rows.length x S ids");
  const double C = GetF64Prop(o, "C"), eps = GetF64Prop(o, "eps"), prune = GetF64Prop(o, "prune");
  const uint32_t maxIter = GetU32Prop(o, "maxIter"), threads = GetU32Prop(o, "threads");
  const double seed = GetF64Prop(o, "seed");
  if (L == 0 || D == 0) throw ArgError("labels and features must be positive");
  if (!(C > 0) || !std::isfinite(C)) throw ArgError("C must be finite and > 0");
  if (!(eps > 0) || !std::isfinite(eps)) throw ArgError("eps must be finite and > 0");
  if (!(prune >= 0) || !std::isfinite(prune)) throw ArgError("prune must be finite and >= 0");
  if (maxIter == 0) throw ArgError("maxIter must be positive");
  if (threads == 0 || threads > 256) throw ArgError("threads must be in [1, 256]");
  if (!(seed >= 0 && seed <= 9007199254740991.0)) throw ArgError("seed must be a non-negative safe integer");
  check_rows(d, rows, n, D);
  // only: the labels to train (ascending ids < labels), or absent: all.
  std::vector<uint8_t> onlyMask;
  const Napi::Value ov = o.Get("only");
  if (!ov.IsUndefined() && !ov.IsNull()) {
    auto ids = GetArray<uint32_t>(ov, "only");
    onlyMask.assign(L, 0);
    for (size_t e = 0; e < ids.size; ++e) {
      if (ids.data[e] >= L) throw ArgError("only holds a label id >= labels");
      onlyMask[ids.data[e]] = 1;
    }
  }
  RerankModel m;
  rerank_train(m, d, rows, static_cast<uint32_t>(n), sl.data, S, L, D, C, eps, maxIter, prune, threads,
               static_cast<uint64_t>(seed), onlyMask.empty() ? nullptr : onlyMask.data());
  Napi::Object r = Napi::Object::New(env);
  r.Set("offsets", CopyToTypedArray(env, m.offsets));
  r.Set("features", CopyToTypedArray(env, m.features));
  r.Set("weights", CopyToTypedArray(env, m.weights));
  r.Set("bias", CopyToTypedArray(env, m.bias));
  return r;
}

// rerankScore({ data, rows: Uint32Array | null, candidates: Uint32Array (rows x S; 0xFFFFFFFF: none), S, features,
//   model: { offsets, features, weights, bias }, threads, out: Float32Array (rows x S) }) -> undefined
Napi::Value RerankScore(const Napi::CallbackInfo& info) {
  Napi::Object o = GetObject(info[0], "options");
  const CsrView d = net_parse_data(o.Get("data"), false);
  const uint32_t* rows = nullptr;
  size_t n = 0;
  std::vector<uint32_t> all;
  net_parse_rows(o.Get("rows"), d.points, all, rows, n);
  const uint32_t S = GetU32Prop(o, "S"), D = GetU32Prop(o, "features"), threads = GetU32Prop(o, "threads");
  if (threads == 0 || threads > 256) throw ArgError("threads must be in [1, 256]");
  auto cand = GetArrayProp<uint32_t>(o, "candidates");
  auto out = GetArrayProp<float>(o, "out");
  if (cand.size != n * size_t(S) || out.size != cand.size) throw ArgError("candidates and out must hold rows.length x S entries");
  Napi::Object mo = GetObject(o.Get("model"), "model");
  auto bias = GetArrayProp<float>(mo, "bias");
  const uint32_t L = static_cast<uint32_t>(std::min<size_t>(bias.size, 0xFFFFFFFEu));
  auto off = GetArrayProp<uint32_t>(mo, "offsets");
  if (off.size != size_t(L) + 1) throw ArgError("model.offsets must hold model.bias.length + 1 entries");
  auto ft = GetArrayProp<uint32_t>(mo, "features");
  auto wt = GetArrayProp<float>(mo, "weights");
  if (ft.size != wt.size) throw ArgError("model.features and model.weights must have the same length");
  if (off.data[0] != 0 || off.data[L] != ft.size) throw ArgError("model.offsets must run from 0 to features.length");
  for (size_t e = 0; e < cand.size; ++e)
    if (cand.data[e] != kNone && cand.data[e] >= L) throw ArgError("candidates holds a label id >= the model's labels");
  check_rows(d, rows, n, D);
  // The model's entries are checked where read (the labels scored), not all of them on every call.
  rerank_score(out.data, d, rows, static_cast<uint32_t>(n), cand.data, S, {off.data, ft.data, wt.data, bias.data, L, ft.size},
               D, threads);
  return info.Env().Undefined();
}

// rerankCombine({ labels: Uint32Array (rows x S), probs: Float32Array (rows x S), scores: Float32Array (rows x S),
//   S, weight, k, outLabels: Uint32Array (rows x k), outScores: Float32Array (rows x k) }) -> undefined
Napi::Value RerankCombine(const Napi::CallbackInfo& info) {
  Napi::Object o = GetObject(info[0], "options");
  const uint32_t S = GetU32Prop(o, "S"), k = GetU32Prop(o, "k");
  if (S == 0 || k == 0) throw ArgError("S and k must be positive");
  const double weight = GetF64Prop(o, "weight");
  if (!std::isfinite(weight)) throw ArgError("weight must be finite");
  auto labels = GetArrayProp<uint32_t>(o, "labels");
  auto probs = GetArrayProp<float>(o, "probs");
  auto scores = GetArrayProp<float>(o, "scores");
  if (labels.size % S != 0 || probs.size != labels.size || scores.size != labels.size)
    throw ArgError("labels, probs and scores must hold rows x S entries each");
  const size_t rows = labels.size / S;
  auto outL = GetArrayProp<uint32_t>(o, "outLabels");
  auto outS = GetArrayProp<float>(o, "outScores");
  if (outL.size != rows * k || outS.size != rows * k) throw ArgError("outLabels and outScores must hold rows x k entries");
  rerank_combine(labels.data, probs.data, scores.data, rows, S, weight, k, outL.data, outS.data);
  return info.Env().Undefined();
}

}  // namespace

void RegisterRerank(Napi::Env env, Napi::Object exports) {
  Export<RerankCombine>(env, exports, "rerankCombine");
  Export<RerankTrain>(env, exports, "rerankTrain");
  Export<RerankScore>(env, exports, "rerankScore");
}

}  // namespace sl
