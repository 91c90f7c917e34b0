#include "topk.h"

#include <algorithm>
#include <limits>
#include <vector>

namespace sl {

namespace {

struct Ranked {
  float v;
  uint32_t id;
};

// The order of the result: the larger value first, on equal values the smaller id. A strict total order on
// distinct ids (NaN never gets here).
inline bool better(const Ranked& a, const Ranked& b) { return a.v > b.v || (a.v == b.v && a.id < b.id); }

// The largest of x[0..n) that is not NaN (-inf when there is none). Eight running maxima, so that the compiler
// can keep them in one vector register and no compare waits on the one before.
inline float max_of(const float* x, size_t n) {
  float m[8];
  for (float& v : m) v = -std::numeric_limits<float>::infinity();
  size_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int l = 0; l < 8; ++l) m[l] = x[i + l] > m[l] ? x[i + l] : m[l];
  for (; i < n; ++i) m[0] = x[i] > m[0] ? x[i] : m[0];
  float r = m[0];
  for (int l = 1; l < 8; ++l) r = m[l] > r ? m[l] : r;
  return r;
}

// Appends the scores of x[0..n) that are not below thr to b (with their ids), cutting b back to its k best
// whenever it holds cap, which raises thr to the k-th best. Returns how many b holds. The append is
// unconditional and the count advances by the compare, so that no branch depends on the scores.
template <bool kIds>
size_t collect(Ranked* b, size_t cap, size_t k, const float* x, const uint32_t* ids, size_t n, float thr) {
  size_t nb = 0;
  for (size_t i = 0; i < n; ++i) {
    const float s = x[i];
    b[nb] = {s, kIds ? ids[i] : static_cast<uint32_t>(i)};
    nb += s >= thr;  // NaN: false
    if (nb == cap) {
      std::nth_element(b, b + (k - 1), b + nb, better);
      nb = k;
      thr = b[k - 1].v;
    }
  }
  return nb;
}

}  // namespace

// Where a heap of k pays a sift through log k levels of unpredictable compares for every score above its
// worst (most of the first few hundred of a random order; all of an ascending one), this reads the scores
// twice without a data-dependent branch:
// 1. A floor: cut the n scores into k groups and take the smallest of the groups' maxima. k scores (one
//    per group) are at or above it, so no score below it can rank among the k best. On scores in no order,
//    a few percent of them remain above it.
// 2. Keep the scores at or above the floor in a buffer of 2k + 64, cut back to its k best by nth_element
//    when it fills (which raises the floor), and sort the k best at the end.
// The result is the same set in the same order as any exact top-k: scores equal to the floor are kept, and
// the final order decides them by id.
void topk_row(uint32_t* outIdx, float* outVal, const float* scores, const uint32_t* ids, size_t n, size_t k) {
  if (k == 0) return;
  thread_local std::vector<Ranked> buf;
  const size_t cap = 2 * k + 64;
  if (buf.size() < cap) buf.resize(cap);  // collect stores at most at cap - 1: a full buffer is cut at once
  Ranked* b = buf.data();
  float floor = -std::numeric_limits<float>::infinity();
  if (n >= 4 * k) {
    const size_t g = n / k;  // k groups of g scores, the last one with the remainder
    floor = std::numeric_limits<float>::infinity();
    for (size_t q = 0; q < k; ++q) {
      const size_t at = q * g;
      floor = std::min(floor, max_of(scores + at, q + 1 == k ? n - at : g));
    }
  }
  size_t nb = ids ? collect<true>(b, cap, k, scores, ids, n, floor) : collect<false>(b, cap, k, scores, ids, n, floor);
  if (nb > k) {
    std::nth_element(b, b + (k - 1), b + nb, better);
    nb = k;
  }
  std::sort(b, b + nb, better);
  for (size_t j = 0; j < nb; ++j) {
    outIdx[j] = b[j].id;
    outVal[j] = b[j].v;
  }
  for (size_t j = nb; j < k; ++j) {
    outIdx[j] = std::numeric_limits<uint32_t>::max();
    outVal[j] = -std::numeric_limits<float>::infinity();
  }
}

}  // namespace sl
