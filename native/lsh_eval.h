// Exact maximum-inner-product top-k, over all rows (brute force) or over per-query candidate lists.
// Used to measure LSH recall and speed honestly: both paths share the same vectorised dot product and
// the same streaming top-k, so a speedup reflects only the work LSH avoids.
#pragma once
#include <cstddef>
#include <cstdint>

namespace sl {

// vectors (N, D) row-major, queries (q, D). For query i, scores rows candIds[candOffsets[i] ..
// candOffsets[i+1]) (all N rows when candOffsets is null) and writes the k best (descending score, ties by
// smaller id) to outIdx/outVal (q, k); missing slots get UINT32_MAX / -inf. Candidate ids must be < N
// (checked by the binding).
void inner_topk(const float* vectors, uint32_t N, uint32_t D, const float* queries, uint32_t q,
                const uint32_t* candOffsets, const uint32_t* candIds, uint32_t k, uint32_t* outIdx, float* outVal);

}  // namespace sl
