// Top-k selection over rows of a score matrix.
#pragma once
#include <cstddef>
#include <cstdint>

namespace sl {

// For one row of `n` scores, writes the k largest (descending; ties broken by the smaller index)
// into outIdx[0..k) / outVal[0..k). If n < k, the remaining slots get index UINT32_MAX and -inf.
// `ids` (optional, may be null) maps position i to the id reported (used for sparse active sets); ties
// then go to the smaller id. NaN scores never rank; a score of -0 is reported as 0.
void topk_row(uint32_t* outIdx, float* outVal, const float* scores, const uint32_t* ids, size_t n, size_t k);

// The k-th best (score, id) of the row under topk_row's order, unsorted and without writing the others:
// exactly k of the row's (score, id) pairs rank at it or above. False when fewer than k scores are not NaN.
bool topk_kth(const float* scores, const uint32_t* ids, size_t n, size_t k, float& value, uint32_t& id);

}  // namespace sl
