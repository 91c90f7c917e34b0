#include "topk.h"

#include <algorithm>
#include <cstring>
#include <functional>
#include <limits>
#include <vector>

namespace sl {

namespace {

// A (score, id) pair as one integer whose order is the result's: the larger score first, on equal scores the
// smaller id. The score's bits are mapped so that unsigned order follows float order (negatives flipped
// whole, positives with the sign bit set; -0 counted as 0), the id's are inverted below them. Integer
// compares, where a float compare with a tie-break costs two branches and a NaN check.
// Branch-free: a score's sign is data.
inline uint64_t key_of(float v, uint32_t id) {
  uint32_t u;
  std::memcpy(&u, &v, sizeof u);
  u &= 0u - uint32_t(v != 0.0f);                        // -0 -> 0
  u ^= uint32_t(int32_t(u) >> 31) | 0x80000000u;        // negative: all bits flipped; else the sign bit set
  return (uint64_t(u) << 32) | uint32_t(~id);
}
inline float value_of(uint64_t key) {
  uint32_t u = uint32_t(key >> 32);
  u ^= uint32_t(int32_t(~u) >> 31) | 0x80000000u;       // the inverse: sign bit clear (a negative) -> all flipped
  float v;
  std::memcpy(&v, &u, sizeof v);
  return v;
}
inline uint32_t id_of(uint64_t key) { return ~uint32_t(key); }

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

// Appends the scores of x[0..n) that are not below thr to b (as keys), cutting b back to its k best
// whenever it holds cap, which raises thr to the k-th best. Returns how many b holds. The append is
// unconditional and the count advances by the compare, so that no branch depends on the scores. Past the
// floor few scores reach thr: a block of 16 none of which does is skipped after one vector compare (thr
// only rises, so the block would have appended nothing).
template <bool kIds>
size_t collect(uint64_t* b, size_t cap, size_t k, const float* x, const uint32_t* ids, size_t n, float thr) {
  size_t nb = 0;
  const auto take = [&](size_t i) {
    const float s = x[i];
    b[nb] = key_of(s, kIds ? ids[i] : static_cast<uint32_t>(i));
    nb += s >= thr;  // NaN: false
    if (nb == cap) {
      std::nth_element(b, b + (k - 1), b + nb, std::greater<uint64_t>());
      nb = k;
      thr = value_of(b[k - 1]);
    }
  };
  size_t i = 0;
  for (; i + 16 <= n; i += 16)
    if (any_reaches16(x + i, thr))
      for (size_t j = i; j < i + 16; ++j) take(j);
  for (; i < n; ++i) take(i);
  return nb;
}

// Where a heap of k pays a sift through log k levels of unpredictable compares for every score above its
// worst (most of the first few hundred of a random order; all of an ascending one), this reads the scores
// twice without a data-dependent branch:
// 1. A floor: cut the n scores into k groups and take the smallest of the groups' maxima. k scores (one
//    per group) are at or above it, so no score below it can rank among the k best. On scores in no order,
//    a few percent of them remain above it.
// 2. Keep the scores at or above the floor in a buffer of 2k + 64, cut back to its k best by nth_element
//    when it fills (which raises the floor).
// Leaves the k best (fewer when fewer are not NaN) in the thread's buffer, the k-th best at [k - 1] and
// the others before it in no order; returns how many.
size_t best_keys(const float* scores, const uint32_t* ids, size_t n, size_t k, uint64_t*& out) {
  thread_local std::vector<uint64_t> buf;
  const size_t cap = 2 * k + 64;
  if (buf.size() < cap) buf.resize(cap);  // collect stores at most at cap - 1: a full buffer is cut at once
  uint64_t* b = buf.data();
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
  if (nb >= k) {
    std::nth_element(b, b + (k - 1), b + nb, std::greater<uint64_t>());
    nb = k;
  }
  out = b;
  return nb;
}

}  // namespace

void topk_row(uint32_t* outIdx, float* outVal, const float* scores, const uint32_t* ids, size_t n, size_t k) {
  if (k == 0) return;
  uint64_t* b;
  const size_t nb = best_keys(scores, ids, n, k, b);
  std::sort(b, b + nb, std::greater<uint64_t>());
  for (size_t j = 0; j < nb; ++j) {
    outIdx[j] = id_of(b[j]);
    outVal[j] = value_of(b[j]);
  }
  for (size_t j = nb; j < k; ++j) {
    outIdx[j] = std::numeric_limits<uint32_t>::max();
    outVal[j] = -std::numeric_limits<float>::infinity();
  }
}

bool topk_kth(const float* scores, const uint32_t* ids, size_t n, size_t k, float& value, uint32_t& id) {
  if (k == 0) return false;
  uint64_t* b;
  if (best_keys(scores, ids, n, k, b) < k) return false;
  value = value_of(b[k - 1]);
  id = id_of(b[k - 1]);
  return true;
}

}  // namespace sl
