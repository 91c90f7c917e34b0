#include "lsh_eval.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <vector>

// Function multi-versioning where the toolchain supports it (GCC/Clang on x86 ELF); elsewhere (arm64, macOS)
// the portable vector-extension code is compiled once for the baseline target.
#if defined(__x86_64__) && defined(__ELF__)
#define SL_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define SL_CLONES
#endif

namespace sl {

namespace {

// 8-lane dot product with GCC vector extensions: two independent accumulators per call, a fixed lane
// order and a fixed reduction tree, so the brute-force scan and the candidate scoring (which both inline
// it) compute bit-identical scores, on every target clone. Inlined into target_clones functions, the
// vector type is lowered to AVX-512/AVX2/SSE per clone (none of these clone targets enables FMA, so no
// clone contracts a * b + acc differently). Dimensions past the last multiple of 16 are summed by a scalar
// tail.
typedef float v8f __attribute__((vector_size(32)));

__attribute__((always_inline)) inline float dot(const float* a, const float* b, uint32_t n) {
  v8f acc0 = {0, 0, 0, 0, 0, 0, 0, 0}, acc1 = acc0;
  uint32_t i = 0;
  for (; i + 16 <= n; i += 16) {
    v8f a0, a1, b0, b1;  // unaligned loads (rows of odd-length vectors are not 32-byte aligned)
    std::memcpy(&a0, a + i, sizeof a0);
    std::memcpy(&a1, a + i + 8, sizeof a1);
    std::memcpy(&b0, b + i, sizeof b0);
    std::memcpy(&b1, b + i + 8, sizeof b1);
    acc0 += a0 * b0;
    acc1 += a1 * b1;
  }
  v8f acc = acc0 + acc1;
  float s = ((acc[0] + acc[4]) + (acc[2] + acc[6])) + ((acc[1] + acc[5]) + (acc[3] + acc[7]));
  for (; i < n; ++i) s += a[i] * b[i];
  return s;
}

// Streaming top-k as a min-heap whose root is the worst kept (smaller score, or equal score and larger id).
struct Heap {
  uint32_t* id = nullptr;
  float* val = nullptr;
  uint32_t k = 0, n = 0;
  static bool worse(float va, uint32_t ia, float vb, uint32_t ib) { return va < vb || (va == vb && ia > ib); }
  void down(uint32_t i, uint32_t size) {
    for (;;) {
      uint32_t l = 2 * i + 1, r = l + 1, m = i;
      if (l < size && worse(val[l], id[l], val[m], id[m])) m = l;
      if (r < size && worse(val[r], id[r], val[m], id[m])) m = r;
      if (m == i) return;
      std::swap(val[i], val[m]);
      std::swap(id[i], id[m]);
      i = m;
    }
  }
  void push(float s, uint32_t x) {
    if (s != s) return;  // NaN never ranks
    if (n < k) {
      uint32_t j = n++;
      val[j] = s; id[j] = x;
      while (j > 0) {
        uint32_t p = (j - 1) / 2;
        if (!worse(val[j], id[j], val[p], id[p])) break;
        std::swap(val[j], val[p]);
        std::swap(id[j], id[p]);
        j = p;
      }
    } else if (worse(val[0], id[0], s, x)) {
      val[0] = s; id[0] = x;
      down(0, n);
    }
  }
  void finish() {  // heap sort into descending order, pad the rest
    for (uint32_t end = n; end > 1; --end) {
      std::swap(val[0], val[end - 1]);
      std::swap(id[0], id[end - 1]);
      down(0, end - 1);
    }
    for (uint32_t j = n; j < k; ++j) { id[j] = 0xFFFFFFFFu; val[j] = -std::numeric_limits<float>::infinity(); }
  }
};

}  // namespace

// Candidate rows are scattered over a matrix far larger than the caches: prefetch the row kAhead candidates
// ahead so that its misses overlap the scoring of the current ones. Measured on the 2-core Zen4 box (670k x
// 128 matrix, 200 random candidates per query, min of 12 runs): no prefetch ~190 ns/candidate, 4 ahead ~110,
// 8 ahead ~110, 16 ahead ~100.
constexpr uint32_t kAhead = 16;

SL_CLONES
static void topk_candidates(const float* V, uint32_t D, const float* Q, uint32_t q, const uint32_t* candOffsets,
                            const uint32_t* candIds, uint32_t k, uint32_t* outIdx, float* outVal) {
  for (uint32_t i = 0; i < q; ++i) {
    Heap h{outIdx + size_t(i) * k, outVal + size_t(i) * k, k};
    const float* a = Q + size_t(i) * D;
    const uint32_t b = candOffsets[i], e = candOffsets[i + 1];
    for (uint32_t c = b; c < e; ++c) {
      if (c + kAhead < e) {
        const char* nx = reinterpret_cast<const char*>(V + size_t(candIds[c + kAhead]) * D);
        for (uint32_t off = 0; off < D * sizeof(float); off += 64) __builtin_prefetch(nx + off);
      }
      uint32_t id = candIds[c];
      h.push(dot(a, V + size_t(id) * D, D), id);
    }
    h.finish();
  }
}

// Brute force: blocks of 16 queries share each pass over the matrix (each row is read from memory once per
// block and reused from L1), so the scan is compute-bound rather than bandwidth-bound.
SL_CLONES
static void topk_all(const float* V, uint32_t N, uint32_t D, const float* Q, uint32_t q, uint32_t k, uint32_t* outIdx,
                     float* outVal) {
  constexpr uint32_t kBlock = 16;
  Heap heaps[kBlock];
  for (uint32_t i0 = 0; i0 < q; i0 += kBlock) {
    const uint32_t nq = std::min(kBlock, q - i0);
    for (uint32_t b = 0; b < nq; ++b) heaps[b] = Heap{outIdx + size_t(i0 + b) * k, outVal + size_t(i0 + b) * k, k};
    const float* Qb = Q + size_t(i0) * D;
    for (uint32_t r = 0; r < N; ++r) {
      const float* row = V + size_t(r) * D;
      for (uint32_t b = 0; b < nq; ++b) {
        float sc = dot(Qb + size_t(b) * D, row, D);
        Heap& h = heaps[b];
        if (h.n == k && !(sc > h.val[0])) {  // cheap reject; an equal score with a larger id also loses
          continue;
        }
        h.push(sc, r);
      }
    }
    for (uint32_t b = 0; b < nq; ++b) heaps[b].finish();
  }
}

void inner_topk(const float* V, uint32_t N, uint32_t D, const float* Q, uint32_t q, const uint32_t* candOffsets,
                const uint32_t* candIds, uint32_t k, uint32_t* outIdx, float* outVal) {
  if (k == 0) return;
  if (candOffsets) topk_candidates(V, D, Q, q, candOffsets, candIds, k, outIdx, outVal);
  else topk_all(V, N, D, Q, q, k, outIdx, outVal);
}

}  // namespace sl
