// Top-k selection over rows of a score matrix.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace sl {

// Whether any of x[0..16) is >= thr (a NaN never is): four 4-lane compares, no branch per score. Lets a
// selection pass over a block of scores none of which can rank.
inline bool any_reaches16(const float* x, float thr) {
  typedef float f4 __attribute__((vector_size(16)));
  typedef int32_t i4 __attribute__((vector_size(16)));
  f4 v[4];
  std::memcpy(v, x, sizeof v);
  const f4 t = {thr, thr, thr, thr};
  const i4 m = (v[0] >= t) | (v[1] >= t) | (v[2] >= t) | (v[3] >= t);
  return (m[0] | m[1] | m[2] | m[3]) != 0;
}

// For one row of `n` scores, writes the k largest (descending; ties broken by the smaller index)
// into outIdx[0..k) / outVal[0..k). If n < k, the remaining slots get index UINT32_MAX and -inf.
// `ids` (optional, may be null) maps position i to the id reported (used for sparse active sets); ties
// then go to the smaller id. NaN scores never rank; a score of -0 is reported as 0.
void topk_row(uint32_t* outIdx, float* outVal, const float* scores, const uint32_t* ids, size_t n, size_t k);

// The k-th best (score, id) of the row under topk_row's order, unsorted and without writing the others:
// exactly k of the row's (score, id) pairs rank at it or above. False when fewer than k scores are not NaN.
bool topk_kth(const float* scores, const uint32_t* ids, size_t n, size_t k, float& value, uint32_t& id);

}  // namespace sl
