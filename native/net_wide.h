// The sparse "wide" part of an output layer (WideConfig in src/network/config.ts): next to the network's
// logit w_j . h + b_j, each label j has its own sparse linear model over the input features,
//   z_j += sum_{f in nnz(x)} x_f u[f, j],
// with weights only for the (feature, label) pairs chosen from the training data (the features that carry
// most of each label's mass, as linear XC models keep them). A label seen once keeps that point's evidence
// instead of squeezing it through the hidden layer. Stored feature-major (CSR over the input features), so a
// sample reaches its entries through its own nonzeros; trained by the same softmax loss, with Adagrad
// (per-entry rates: an entry is updated only when its feature occurs with its label active).
#pragma once
#include <cmath>
#include <cstdint>
#include <vector>

#include "net.h"

namespace sl {
namespace net {

// One term x_f u[e] of sample `sample`'s logit for label `label` (e indexes the wide arrays).
struct WideTerm {
  uint32_t label, sample, entry;
  float x;
};

// Appends the terms of samples rows[0..n) of data (sample i = rows[i]) whose label keep(label) accepts to out,
// samples in order, each sample's terms in the order of its nonzeros and their lists.
template <typename Keep>
void wide_terms(std::vector<WideTerm>& out, const NetLayer& L, const CsrView& data, const uint32_t* rows, uint32_t n,
                Keep keep) {
  for (uint32_t i = 0; i < n; ++i) {
    const uint32_t r = rows[i];
    for (uint32_t q = data.offsets[r], q1 = data.offsets[r + 1]; q < q1; ++q) {
      const uint32_t f = data.indices[q];  // < D: check_slice
      const float x = data.values[q];
      for (uint32_t e = L.wideOff[f], e1 = L.wideOff[f + 1]; e < e1; ++e)
        if (L.wideLab[e] < L.outDim && keep(L.wideLab[e])) out.push_back({L.wideLab[e], i, e, x});  // < outDim: always (checked when built)
    }
  }
}

// Every term of samples rows[0..n) (wide_terms above, no label rejected).
inline void wide_terms(std::vector<WideTerm>& out, const NetLayer& L, const CsrView& data, const uint32_t* rows, uint32_t n) {
  wide_terms(out, L, data, rows, n, [](uint32_t) { return true; });
}

// The pairs of a wide part chosen from training data (WideConfig; src/network/wide.ts buildWide): for every
// label, the maxPerLabel features with the largest sums of |value| over the label's training points (rows
// rows[0..n) of data; ties by the smaller feature id), of those the ones holding at least minShare of the
// label's centroid norm (its strongest feature always stays), weighted init x the label's unit centroid over
// the kept features. Out: feature-major CSR, labels ascending within a feature. Sums in f64 in the order
// the TypeScript reference sums them (test/network/wide.test.ts compares the two).
//   offsets (inputDim + 1), labels (nnz), weights (nnz)
struct WideBuilt {
  std::vector<uint32_t> offsets, labels;
  std::vector<float> weights;
};
// slice (nSlice ascending label ids, or null for every label): only those labels' pairs, label slice[e]
// stored as e (label-sharded training). threads: the labels split over that many threads (the same pairs
// on any number).
void wide_build(WideBuilt& out, const CsrView& data, const uint32_t* rows, uint32_t n, uint32_t inputDim,
                uint32_t numLabels, uint32_t maxPerLabel, double init, double minShare, const uint32_t* slice = nullptr,
                uint32_t nSlice = 0, uint32_t threads = 1);

// The inner loop of sampled prediction's wide walk over one feature's list, entries e0 .. e1 of lab (labels)
// and wt (weights), vectorised where the CPU allows (net_wide_walk.cc); it gives what the plain loop in its
// comment gives.
// The bit pattern of a label not yet touched in wide_dense_add's dense sums (a signalling NaN, which no
// arithmetic returns: a NaN they compute is quiet).
constexpr uint32_t kWideUntouched = 0x7F800001u;

// wide_dense_add: adds x wt[e] to dense[lab[e]] for the entries whose label is < N; a label whose sum holds
// kWideUntouched gets x wt[e] itself and is appended to touched[nt..]. Returns the new count. touched needs
// room for nt + (e1 - e0) + 16 entries.
//   for (e = e0; e < e1; ++e) if (lab[e] < N)
//     if (dense[lab[e]] is kWideUntouched) dense[lab[e]] = x wt[e], touched[nt++] = lab[e]; else dense[lab[e]] += x wt[e];
size_t wide_dense_add(const uint32_t* lab, const float* wt, uint32_t e0, uint32_t e1, float x, uint32_t N, float* dense,
                      uint32_t* touched, size_t nt);

// Whether wide_dense_add may use its vector loop (it does where the CPU allows; tests compare both on one
// machine). Returns whether it now does.
bool wide_walk_vector(bool allow);

// Sorts terms by (label, sample) (stable: entries in collection order).
void wide_sort_by_label(std::vector<WideTerm>& t);

// Adds the terms t[wp..) whose labels are < j0 + R (t sorted by label, wide_sort_by_label) to the logits zt
// (R, ldn) of labels j0 .. j0 + R (row label - j0, column the term's sample) and advances wp past them: a block
// of a dense pass over the labels meets its terms.
inline void wide_add_block(float* zt, uint32_t ldn, const NetLayer& L, const std::vector<WideTerm>& t, size_t& wp,
                           uint32_t j0, uint32_t R) {
  for (const size_t m = t.size(); wp < m && t[wp].label < j0 + R; ++wp)
    zt[size_t(t[wp].label - j0) * ldn + t[wp].sample] += t[wp].x * L.wideW[t[wp].entry];
}

// Moves wp past the terms of rows [j0, j0 + R) without adding them (their logits were kept from an earlier pass).
inline void wide_skip_block(const std::vector<WideTerm>& t, size_t& wp, uint32_t j0, uint32_t R) {
  for (const size_t m = t.size(); wp < m && t[wp].label < j0 + R; ++wp) {
  }
}

// Gradient step of one term: g = dz * x on entry t.entry (mode 0: Adagrad; mode 1: added to h.gradWide).
inline void wide_step(const NetLayer& L, const WideTerm& t, float dz, const TrainHyper& h) {
  const float g = dz * t.x;
  if (h.mode == 1) {
    h.gradWide[t.entry] += g;
  } else if (h.mode == 0) {
    float& acc = L.wideAcc[t.entry];
    acc += g * g;
    L.wideW[t.entry] -= h.wideLr * g / (std::sqrt(acc) + 1e-6f);
  }
}

}  // namespace net
}  // namespace sl
