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

// Appends the terms of samples rows[0..n) of data (sample i = rows[i]) to out, samples in order.
void wide_terms(std::vector<WideTerm>& out, const NetLayer& L, const CsrView& data, const uint32_t* rows, uint32_t n);

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
void wide_build(WideBuilt& out, const CsrView& data, const uint32_t* rows, uint32_t n, uint32_t inputDim,
                uint32_t numLabels, uint32_t maxPerLabel, double init, double minShare);

// Sorts terms by (label, sample) (stable: entries in collection order).
void wide_sort_by_label(std::vector<WideTerm>& t);

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
