// Hash families (SimHash, DWTA, WTA, densified one-permutation MinHash) turning a vector into L keys of
// K sub-hashes each. Semantics are fixed by lsh.h; test/lsh/reference.ts re-implements them with plain
// loops and the tests demand identical keys, so any change here must be mirrored there.
//
// Work per vector: only the bins of the requested tables [t0, t1) are computed, except that
// densification may probe any bin (computed on demand for dense input) and the sparse DWTA/MinHash paths
// compute every bin (their cost is driven by the nonzeros, not by the bins).
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <limits>

#if defined(__x86_64__) || defined(__i386__)
// GCC 12 warns inside its own avx512fintrin.h (_mm512_undefined_ps); the warning is a known false positive.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#endif

#include "lsh.h"
#include "napi_util.h"

namespace sl {

namespace {

constexpr uint32_t kNone = 0xFFFFFFFFu;  // "no position yet" for a bin
// Per-bin state in HashScratch::empty (dense DWTA computes bins lazily).
constexpr uint8_t kUnknown = 0, kFull = 1, kEmpty = 2;

template <typename T> inline T* ensure(std::vector<T>& v, size_t n) {
  if (v.size() < n) v.resize(n);
  return v.data();
}

// DWTA bin over dense x: first position of the max over nonzero entries, kNone if every entry is zero.
// -inf never wins (it is not > the initial -inf) and NaN never wins (comparisons are false); the TS
// reference mirrors both. Hot loop of table rebuilds: binSize is almost always 8, so give the compiler
// a fixed trip count there.
inline uint32_t dwta_bin(const float* x, const uint32_t* dims, uint32_t binSize) {
  float best = -std::numeric_limits<float>::infinity();
  uint32_t bp = kNone;
  if (binSize == 8) {
    for (uint32_t q = 0; q < 8; ++q) {
      float v = x[dims[q]];
      if (v != 0.0f && v > best) { best = v; bp = q; }
    }
    return bp;
  }
  for (uint32_t q = 0; q < binSize; ++q) {
    float v = x[dims[q]];
    if (v != 0.0f && v > best) { best = v; bp = q; }
  }
  return bp;
}

// WTA bin: first position of the max over all entries (zeros included). Never empty.
inline uint32_t wta_bin(const float* x, const uint32_t* dims, uint32_t binSize) {
  float best = x[dims[0]];
  uint32_t bp = 0;
  for (uint32_t q = 1; q < binSize; ++q) {
    float v = x[dims[q]];
    if (v > best) { best = v; bp = q; }
  }
  return bp;
}

// One signed random projection, summed in the lane order of lsh.h: the term of dim d goes to float lane
// d % 8. Entries arrive in increasing dim order (projDims sorted), so each lane sums in increasing d.
inline float lanes_combine(const float* l) {
  return ((l[0] + l[4]) + (l[2] + l[6])) + ((l[1] + l[5]) + (l[3] + l[7]));
}

inline uint32_t simhash_bit(const float* x, const uint32_t* dims, const float* signs, uint32_t n) {
  float l[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  for (uint32_t i = 0; i < n; ++i) l[dims[i] & 7] += signs[i] * x[dims[i]];
  return lanes_combine(l) >= 0.0f ? 1u : 0u;
}

// Dense SimHash of projections [m0, m1) as a mat-vec with the (M, D) int8 sign matrix. A lane-d%8 sum over
// all dims equals the sparse sum over the projection's dims (the extra terms are 0 * x = +-0, which leave a
// float sum unchanged for finite x). int8 keeps the matrix at a quarter of the L2 traffic of floats, which
// is what bounds this loop; the int8 -> float conversion is exact.
void simhash_matrix_scalar(const int8_t* P, const float* x, uint32_t D, uint32_t m0, uint32_t m1, uint32_t* h) {
  for (uint32_t m = m0; m < m1; ++m) {
    const int8_t* r = P + size_t(m) * D;
    float l[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    for (uint32_t d = 0; d < D; ++d) l[d & 7] += static_cast<float>(r[d]) * x[d];
    h[m] = lanes_combine(l) >= 0.0f ? 1u : 0u;
  }
}

#if defined(__x86_64__) || defined(__i386__)
// Sign bit of one projection's 8 lanes (plus the scalar tail dims [D8, D) of row r) in lanes_combine's order:
// t = (l0+l4, l1+l5, l2+l6, l3+l7), u0 = t0+t2, u1 = t1+t3, sum = u0+u1. Vector form when there is no
// tail: a few instructions instead of a store, eight reloads and seven dependent scalar adds.
template <typename Row>
__attribute__((target("avx2,fma"), always_inline)) inline uint32_t finish_bit(__m256 a, const Row* r, const float* x,
                                                                               uint32_t D8, uint32_t D) {
  if (D8 == D) {
    __m128 t = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
    __m128 u = _mm_add_ps(t, _mm_movehl_ps(t, t));
    return _mm_cvtss_f32(_mm_add_ss(u, _mm_movehdup_ps(u))) >= 0.0f ? 1u : 0u;
  }
  alignas(32) float l[8];
  _mm256_store_ps(l, a);
  for (uint32_t d = D8; d < D; ++d) l[d & 7] += static_cast<float>(r[d]) * x[d];  // r[d] in {-1,0,1}: exact
  return lanes_combine(l) >= 0.0f ? 1u : 0u;
}

// Eight projections run interleaved so that the adds are throughput-bound rather than waiting on one lane
// chain's latency. One ymm register = the 8 lanes of one projection, so AVX-512 has nothing to add here.
template <int G>
__attribute__((target("avx2,fma"), always_inline)) inline void simhash_group_avx2(const int8_t* r, const float* x,
                                                                              uint32_t D, uint32_t* h) {
  const uint32_t D8 = D & ~7u;
  __m256 a[G];
  for (int g = 0; g < G; ++g) a[g] = _mm256_setzero_ps();
  for (uint32_t d = 0; d < D8; d += 8) {
    __m256 xv = _mm256_loadu_ps(x + d);
    for (int g = 0; g < G; ++g) {
      __m128i b = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(r + size_t(g) * D + d));
      a[g] = _mm256_add_ps(a[g], _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(b)), xv));
    }
  }
  for (int g = 0; g < G; ++g) h[g] = finish_bit(a[g], r + size_t(g) * D, x, D8, D);
}

__attribute__((target("avx2,fma"))) void simhash_matrix_avx2(const int8_t* P, const float* x, uint32_t D, uint32_t m0,
                                                         uint32_t m1, uint32_t* h) {
  uint32_t m = m0;
  for (; m + 8 <= m1; m += 8) simhash_group_avx2<8>(P + size_t(m) * D, x, D, h + m);
  for (; m < m1; ++m) simhash_group_avx2<1>(P + size_t(m) * D, x, D, h + m);
}

// Batch variant over a float copy of the matrix (made once per batch call): one FMA with a memory operand
// per 8 terms instead of load + sign-extend + convert + mul + add. fma(s, x, l) == l + s * x exactly here
// because s is -1, 0 or +1 (the product is exact), so the result is bit-identical to the other paths.
template <int G>
__attribute__((target("avx2,fma"), always_inline)) inline void simhash_group_fma(const float* r, const float* x,
                                                                                uint32_t D, uint32_t* h) {
  const uint32_t D8 = D & ~7u;
  __m256 a[G];
  for (int g = 0; g < G; ++g) a[g] = _mm256_setzero_ps();
  for (uint32_t d = 0; d < D8; d += 8) {
    __m256 xv = _mm256_loadu_ps(x + d);
    for (int g = 0; g < G; ++g) a[g] = _mm256_fmadd_ps(_mm256_loadu_ps(r + size_t(g) * D + d), xv, a[g]);
  }
  for (int g = 0; g < G; ++g) h[g] = finish_bit(a[g], r + size_t(g) * D, x, D8, D);
}

// Bits of `rows` projections for nb vectors X (nb, D) into H (nb, rows). The loop runs over blocks of 8
// projections outside and vectors inside, so a block of the matrix (8 x D floats) stays in L1 while all nb
// vectors use it: the matrix streams from L2 once per nb vectors instead of once per vector (which made
// the per-vector loop L2-bandwidth-bound).
__attribute__((target("avx2,fma"))) void simhash_batch_fma(const float* P, uint32_t rows, const float* X, size_t xStride,
                                                           uint32_t nb, uint32_t D, uint32_t* H) {
  uint32_t m = 0;
  for (; m + 8 <= rows; m += 8)
    for (uint32_t i = 0; i < nb; ++i) simhash_group_fma<8>(P + size_t(m) * D, X + i * xStride, D, H + size_t(i) * rows + m);
  for (; m < rows; ++m)
    for (uint32_t i = 0; i < nb; ++i) simhash_group_fma<1>(P + size_t(m) * D, X + i * xStride, D, H + size_t(i) * rows + m);
}
#endif

// DWTA over bins [m0, m1) of dense x: h[m] = winner position and st[m] = kFull, or st[m] = kEmpty.
// Returns whether any bin was empty. The SIMD versions handle binSize 8 (the default, SLIDE's) with gathers:
// invalid lanes (zero, NaN, -inf: exactly the entries the scalar loop can never pick) become -inf, the bin
// max is broadcast by shuffles, and the first lane equal to it is the scalar loop's "first max".
bool dwta_bins_scalar(const float* x, const uint32_t* binDims, uint32_t binSize, uint32_t m0, uint32_t m1, uint32_t* h,
                      uint8_t* st) {
  bool anyEmpty = false;
  for (uint32_t m = m0; m < m1; ++m) {
    uint32_t q = dwta_bin(x, binDims + size_t(m) * binSize, binSize);
    if (q == kNone) { st[m] = kEmpty; anyEmpty = true; } else { h[m] = q; st[m] = kFull; }
  }
  return anyEmpty;
}

#if defined(__x86_64__) || defined(__i386__)
__attribute__((target("avx2"))) bool dwta_bins8_avx2(const float* x, const uint32_t* binDims, uint32_t m0, uint32_t m1,
                                                     uint32_t* h, uint8_t* st) {
  const __m256 zero = _mm256_setzero_ps(), ninf = _mm256_set1_ps(-std::numeric_limits<float>::infinity());
  bool anyEmpty = false;
  for (uint32_t m = m0; m < m1; ++m) {
    __m256i idx = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(binDims + size_t(m) * 8));
    __m256 v = _mm256_i32gather_ps(x, idx, 4);
    __m256 valid = _mm256_and_ps(_mm256_cmp_ps(v, zero, _CMP_NEQ_OQ), _mm256_cmp_ps(v, ninf, _CMP_GT_OQ));
    v = _mm256_blendv_ps(ninf, v, valid);
    __m256 t = _mm256_max_ps(v, _mm256_permute2f128_ps(v, v, 1));
    t = _mm256_max_ps(t, _mm256_shuffle_ps(t, t, _MM_SHUFFLE(1, 0, 3, 2)));
    t = _mm256_max_ps(t, _mm256_shuffle_ps(t, t, _MM_SHUFFLE(2, 3, 0, 1)));
    int mask = _mm256_movemask_ps(_mm256_and_ps(_mm256_cmp_ps(v, t, _CMP_EQ_OQ), valid));
    if (mask == 0) { st[m] = kEmpty; anyEmpty = true; } else { h[m] = __builtin_ctz(mask); st[m] = kFull; }
  }
  return anyEmpty;
}

// Two bins per 16-lane gather; the shuffles stay within each 256-bit half (one bin).
__attribute__((target("avx512f"))) bool dwta_bins8_avx512(const float* x, const uint32_t* binDims, uint32_t m0,
                                                          uint32_t m1, uint32_t* h, uint8_t* st) {
  const __m512 zero = _mm512_setzero_ps(), ninf = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  bool anyEmpty = false;
  uint32_t m = m0;
  for (; m + 2 <= m1; m += 2) {
    __m512i idx = _mm512_loadu_si512(binDims + size_t(m) * 8);
    __m512 v = _mm512_i32gather_ps(idx, x, 4);
    __mmask16 valid = _mm512_cmp_ps_mask(v, zero, _CMP_NEQ_OQ) & _mm512_cmp_ps_mask(v, ninf, _CMP_GT_OQ);
    v = _mm512_mask_blend_ps(valid, ninf, v);
    __m512 t = _mm512_max_ps(v, _mm512_shuffle_f32x4(v, v, _MM_SHUFFLE(2, 3, 0, 1)));
    t = _mm512_max_ps(t, _mm512_permute_ps(t, _MM_SHUFFLE(1, 0, 3, 2)));
    t = _mm512_max_ps(t, _mm512_permute_ps(t, _MM_SHUFFLE(2, 3, 0, 1)));
    unsigned mask = _mm512_mask_cmp_ps_mask(valid, v, t, _CMP_EQ_OQ);
    unsigned lo = mask & 0xFFu, hi = mask >> 8;
    if (lo == 0) { st[m] = kEmpty; anyEmpty = true; } else { h[m] = __builtin_ctz(lo); st[m] = kFull; }
    if (hi == 0) { st[m + 1] = kEmpty; anyEmpty = true; } else { h[m + 1] = __builtin_ctz(hi); st[m + 1] = kFull; }
  }
  if (m < m1) anyEmpty |= dwta_bins8_avx2(x, binDims, m, m1, h, st);
  return anyEmpty;
}

// DWTA over a block of W vectors transposed to XT (D, W): lane i of every vector register follows vector i,
// so a bin costs binSize contiguous loads instead of gathers. Per lane the update is exactly the scalar
// loop's `if (v != 0 && v > best)` (ordered compares: NaN never wins). H (bins, W): winner position, or
// kNone for an empty bin.
__attribute__((target("avx2"))) void dwta_block8_avx2(const float* XT, const uint32_t* binDims, uint32_t binSize,
                                                      uint32_t m0, uint32_t m1, uint32_t* H) {
  const __m256 zero = _mm256_setzero_ps(), ninf = _mm256_set1_ps(-std::numeric_limits<float>::infinity());
  for (uint32_t m = m0; m < m1; ++m) {
    const uint32_t* dims = binDims + size_t(m) * binSize;
    __m256 best = ninf;
    __m256i pos = _mm256_set1_epi32(-1);
    for (uint32_t q = 0; q < binSize; ++q) {
      __m256 v = _mm256_loadu_ps(XT + size_t(dims[q]) * 8);
      __m256 k = _mm256_and_ps(_mm256_cmp_ps(v, zero, _CMP_NEQ_OQ), _mm256_cmp_ps(v, best, _CMP_GT_OQ));
      best = _mm256_blendv_ps(best, v, k);
      pos = _mm256_castps_si256(
          _mm256_blendv_ps(_mm256_castsi256_ps(pos), _mm256_castsi256_ps(_mm256_set1_epi32(int(q))), k));
    }
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(H + size_t(m - m0) * 8), pos);
  }
}

__attribute__((target("avx512f"))) void dwta_block16_avx512(const float* XT, const uint32_t* binDims, uint32_t binSize,
                                                            uint32_t m0, uint32_t m1, uint32_t* H) {
  const __m512 zero = _mm512_setzero_ps(), ninf = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  for (uint32_t m = m0; m < m1; ++m) {
    const uint32_t* dims = binDims + size_t(m) * binSize;
    __m512 best = ninf;
    __m512i pos = _mm512_set1_epi32(-1);
    for (uint32_t q = 0; q < binSize; ++q) {
      __m512 v = _mm512_loadu_ps(XT + size_t(dims[q]) * 16);
      __mmask16 k = _mm512_cmp_ps_mask(v, zero, _CMP_NEQ_OQ) & _mm512_cmp_ps_mask(v, best, _CMP_GT_OQ);
      best = _mm512_mask_blend_ps(k, best, v);
      pos = _mm512_mask_blend_epi32(k, pos, _mm512_set1_epi32(int(q)));
    }
    _mm512_storeu_si512(H + size_t(m - m0) * 16, pos);
  }
}

// 0 scalar, 1 AVX2 + FMA, 2 AVX-512F: the best the running CPU supports (never the build host's), capped by
// lsh_set_simd_cap (tests run every path against the reference on one machine).
std::atomic<int> gSimdCap{2};

int cpu_simd_level() {
  static const int level = [] {
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f")) return 2;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return 1;
    return 0;
  }();
  return level;
}

int simd_level() { return std::min(cpu_simd_level(), gSimdCap.load(std::memory_order_relaxed)); }
#else
std::atomic<int> gSimdCap{0};
[[maybe_unused]] int cpu_simd_level() { return 0; }
int simd_level() { return 0; }
#endif

bool dwta_bins(const float* x, const uint32_t* binDims, uint32_t binSize, uint32_t m0, uint32_t m1, uint32_t* h,
               uint8_t* st) {
#if defined(__x86_64__) || defined(__i386__)
  if (binSize == 8) {
    int level = simd_level();
    if (level == 2) return dwta_bins8_avx512(x, binDims, m0, m1, h, st);
    if (level == 1) return dwta_bins8_avx2(x, binDims, m0, m1, h, st);
  }
#endif
  return dwta_bins_scalar(x, binDims, binSize, m0, m1, h, st);
}

inline uint32_t pack_key(const uint32_t* h, uint32_t K, uint32_t bits, uint32_t rangeBits) {
  uint32_t raw = 0;
  for (uint32_t j = 0; j < K; ++j) raw |= h[j] << (j * bits);  // (K-1)*bits < 32: no UB
  if (K * bits <= rangeBits) return raw;
  return static_cast<uint32_t>((static_cast<uint64_t>(raw) * 0x9E3779B97F4A7C15ull) >> (64 - rangeBits));
}

void check_call(const HashParams& p, uint32_t t0, uint32_t t1) {
  if (p.K == 0 || p.L == 0 || p.dim == 0) throw ArgError("hash: K, L and dim must be positive");
  if (p.bitsPerHash == 0 || uint64_t(p.K) * p.bitsPerHash > 32) throw ArgError("hash: K * bitsPerHash must be in 1..32");
  if (p.rangeBits == 0 || p.rangeBits > 24) throw ArgError("hash: rangeBits must be in 1..24");
  if (t0 > t1 || t1 > p.L) throw ArgError("hash: table range [t0, t1) must satisfy t0 <= t1 <= L");
}

// Resolves every empty bin in [m0, m1) by the densification rule of lsh.h. `state(m)` returns kFull or
// kEmpty for any bin (computing it if needed), h[m] holds the sub-hash of every kFull bin. Densified bins
// keep their kEmpty state so that later probes never copy a borrowed value.
template <typename StateFn>
void densify(uint32_t* h, uint32_t M, uint32_t seed, uint32_t m0, uint32_t m1, const uint8_t* st, StateFn&& state) {
  bool allEmpty = false;  // set once a full wrap-around scan found nothing
  for (uint32_t m = m0; m < m1; ++m) {
    if (st[m] != kEmpty) continue;
    if (allEmpty) { h[m] = 0; continue; }
    bool found = false;
    for (uint32_t a = 1; a <= 64; ++a) {
      uint32_t m2 = mix32(m ^ (a * 0x9E3779B9u) ^ seed) % M;
      if (state(m2) == kFull) { h[m] = h[m2]; found = true; break; }
    }
    if (found) continue;
    for (uint32_t step = 1; step < M; ++step) {
      uint32_t m2 = m + step < M ? m + step : m + step - M;
      if (state(m2) == kFull) { h[m] = h[m2]; found = true; break; }
    }
    if (!found) { allEmpty = true; h[m] = 0; }
  }
}

// MinHash after the min offsets are in h (kNone = empty bin): keeps bitsPerHash low bits of every full
// bin, marks the states, and densifies the empty bins of [m0, m1). Shared by dense and sparse input.
void finish_minhash(const HashParams& p, uint32_t* h, uint8_t* st, uint32_t M, uint32_t m0, uint32_t m1) {
  const uint32_t mask = p.bitsPerHash >= 32 ? 0xFFFFFFFFu : (1u << p.bitsPerHash) - 1;
  bool anyEmpty = false;
  for (uint32_t m = 0; m < M; ++m) {
    if (h[m] == kNone) { st[m] = kEmpty; anyEmpty = anyEmpty || (m >= m0 && m < m1); }
    else { h[m] &= mask; st[m] = kFull; }
  }
  if (anyEmpty) densify(h, M, p.seed, m0, m1, st, [&](uint32_t m2) { return st[m2]; });
}

// Sub-hashes of bins [m0, m1) for dense x into s.sub (length >= M); densified where needed.
void sub_dense(const HashParams& p, const float* x, uint32_t m0, uint32_t m1, HashScratch& s) {
  const uint32_t M = p.K * p.L;
  uint32_t* h = ensure(s.sub, M);
  switch (p.family) {
    case HashFamily::SimHash: {
      if (p.projMatrix) {
#if defined(__x86_64__) || defined(__i386__)
        if (simd_level() >= 1) { simhash_matrix_avx2(p.projMatrix, x, p.dim, m0, m1, h); return; }
#endif
        simhash_matrix_scalar(p.projMatrix, x, p.dim, m0, m1, h);
        return;
      }
      for (uint32_t m = m0; m < m1; ++m) {
        uint32_t b = p.projOffsets[m], e = p.projOffsets[m + 1];
        h[m] = simhash_bit(x, p.projDims + b, p.projSigns + b, e - b);
      }
      return;
    }
    case HashFamily::WTA: {
      for (uint32_t m = m0; m < m1; ++m) h[m] = wta_bin(x, p.binDims + size_t(m) * p.binSize, p.binSize);
      return;
    }
    case HashFamily::DWTA: {
      uint8_t* st = ensure(s.empty, M);
      if (!dwta_bins(x, p.binDims, p.binSize, m0, m1, h, st)) return;
      std::memset(st, kUnknown, m0);
      std::memset(st + m1, kUnknown, M - m1);
      densify(h, M, p.seed, m0, m1, st, [&](uint32_t m2) -> uint8_t {
        if (st[m2] == kUnknown) {
          uint32_t q = dwta_bin(x, p.binDims + size_t(m2) * p.binSize, p.binSize);
          if (q == kNone) st[m2] = kEmpty; else { h[m2] = q; st[m2] = kFull; }
        }
        return st[m2];
      });
      return;
    }
    case HashFamily::MinHash: {
      // Every bin is needed for probing and the cost is one pass over D anyway.
      uint8_t* st = ensure(s.empty, M);
      for (uint32_t m = 0; m < M; ++m) h[m] = kNone;
      const uint32_t w = (p.dim + M - 1) / M;
      for (uint32_t d = 0; d < p.dim; ++d) {
        if (x[d] == 0.0f) continue;
        uint32_t r = p.perm[d], b = r / w, o = r - b * w;
        if (o < h[b]) h[b] = o;
      }
      finish_minhash(p, h, st, M, m0, m1);
      return;
    }
  }
  throw ArgError("hash: unknown family");
}

void write_keys(const HashParams& p, uint32_t t0, uint32_t t1, uint32_t* keys, const uint32_t* h) {
  for (uint32_t t = t0; t < t1; ++t) keys[t - t0] = pack_key(h + size_t(t) * p.K, p.K, p.bitsPerHash, p.rangeBits);
}

}  // namespace

void hash_dense(const HashParams& p, const float* x, uint32_t t0, uint32_t t1, uint32_t* keys, HashScratch& s) {
  check_call(p, t0, t1);
  if (t0 == t1) return;
  sub_dense(p, x, t0 * p.K, t1 * p.K, s);
  write_keys(p, t0, t1, keys, s.sub.data());
}

void hash_sparse(const HashParams& p, const uint32_t* idx, const float* val, uint32_t nnz, uint32_t t0, uint32_t t1,
                 uint32_t* keys, HashScratch& s) {
  check_call(p, t0, t1);
  if (t0 == t1) return;
  for (uint32_t i = 0; i < nnz; ++i)
    if (idx[i] >= p.dim) throw ArgError("hash: sparse index out of range (>= dim)");
  const uint32_t M = p.K * p.L, m0 = t0 * p.K, m1 = t1 * p.K;
  switch (p.family) {
    case HashFamily::SimHash:
    case HashFamily::WTA: {
      // Both read arbitrary dims of x: scatter into a zero buffer, hash densely, restore the zeros.
      // The buffer is all zeros between calls, so a sparse call costs O(nnz + work), never O(D).
      float* dense = ensure(s.dense, p.dim);
      for (uint32_t i = 0; i < nnz; ++i) dense[idx[i]] = val[i];
      sub_dense(p, dense, m0, m1, s);
      for (uint32_t i = 0; i < nnz; ++i) dense[idx[i]] = 0.0f;
      break;
    }
    case HashFamily::DWTA: {
      if (!p.dimBinOffsets || !p.dimBins) throw ArgError("hash: DWTA sparse hashing needs dimBinOffsets and dimBins");
      uint32_t* h = ensure(s.sub, M);
      float* best = ensure(s.binMax, M);
      uint8_t* st = ensure(s.empty, M);
      for (uint32_t m = 0; m < M; ++m) { h[m] = kNone; best[m] = -std::numeric_limits<float>::infinity(); }
      const uint32_t shift = p.bitsPerHash, posMask = p.binSize - 1;
      for (uint32_t i = 0; i < nnz; ++i) {
        float v = val[i];
        if (v == 0.0f) continue;
        uint32_t d = idx[i];
        for (uint32_t e = p.dimBinOffsets[d], end = p.dimBinOffsets[d + 1]; e < end; ++e) {
          uint32_t code = p.dimBins[e], m = code >> shift, q = code & posMask;
          // Max value, smallest position on ties == the dense scan's "first max" whatever the input order.
          if (v > best[m] || (v == best[m] && h[m] != kNone && q < h[m])) { best[m] = v; h[m] = q; }
        }
      }
      bool anyEmpty = false;
      for (uint32_t m = 0; m < M; ++m) {
        if (h[m] == kNone) { st[m] = kEmpty; anyEmpty = anyEmpty || (m >= m0 && m < m1); } else st[m] = kFull;
      }
      if (anyEmpty) densify(h, M, p.seed, m0, m1, st, [&](uint32_t m2) { return st[m2]; });
      break;
    }
    case HashFamily::MinHash: {
      uint32_t* h = ensure(s.sub, M);
      uint8_t* st = ensure(s.empty, M);
      for (uint32_t m = 0; m < M; ++m) h[m] = kNone;
      const uint32_t w = (p.dim + M - 1) / M;
      for (uint32_t i = 0; i < nnz; ++i) {
        if (val[i] == 0.0f) continue;
        uint32_t r = p.perm[idx[i]], b = r / w, o = r - b * w;
        if (o < h[b]) h[b] = o;
      }
      finish_minhash(p, h, st, M, m0, m1);
      break;
    }
    default:
      throw ArgError("hash: unknown family");
  }
  write_keys(p, t0, t1, keys, s.sub.data());
}

void hash_dense_batch(const HashParams& p, const float* X, size_t xStride, size_t n, uint32_t t0, uint32_t t1,
                      uint32_t* keys, size_t keyStride, HashScratch& s) {
  check_call(p, t0, t1);
  if (t0 == t1 || n == 0) return;
  if (xStride < p.dim) throw ArgError("hash: xStride must be >= dim");
#if defined(__x86_64__) || defined(__i386__)
  const uint32_t m0 = t0 * p.K, m1 = t1 * p.K, D = p.dim;
  const size_t entries = size_t(m1 - m0) * D;
  // Worth a float copy of the matrix rows when it is amortised over several vectors.
  if (p.family == HashFamily::SimHash && p.projMatrix && simd_level() >= 1 && n >= 4) {
    float* Pf = ensure(s.matrix, entries);
    const int8_t* src = p.projMatrix + size_t(m0) * D;
    for (size_t i = 0; i < entries; ++i) Pf[i] = static_cast<float>(src[i]);
    constexpr uint32_t kVectors = 16;  // 16 x 512 B of 128-dim vectors + an 8-row matrix block fit in L1
    const uint32_t rows = m1 - m0;
    uint32_t* H = ensure(s.batch, size_t(kVectors) * rows);
    for (size_t i0 = 0; i0 < n; i0 += kVectors) {
      const uint32_t nb = static_cast<uint32_t>(std::min<size_t>(kVectors, n - i0));
      simhash_batch_fma(Pf, rows, X + i0 * xStride, xStride, nb, D, H);
      for (uint32_t i = 0; i < nb; ++i)
        for (uint32_t t = t0; t < t1; ++t)
          keys[(i0 + i) * keyStride + (t - t0)] =
              pack_key(H + size_t(i) * rows + size_t(t - t0) * p.K, p.K, p.bitsPerHash, p.rangeBits);
    }
    return;
  }
  if (p.family == HashFamily::DWTA && simd_level() >= 1 && n >= 4) {
    const uint32_t W = simd_level() == 2 ? 16 : 8, rows = m1 - m0, K = p.K;
    float* XT = ensure(s.matrix, size_t(D) * W);
    uint32_t* H = ensure(s.batch, size_t(rows) * W);
    for (size_t i0 = 0; i0 < n; i0 += W) {
      const uint32_t nb = static_cast<uint32_t>(std::min<size_t>(W, n - i0));
      // Transpose row by row: each row is read sequentially (prefetcher-friendly, the rows come from a matrix
      // far larger than the caches) and the strided writes land in the L1-resident block.
      for (uint32_t i = 0; i < nb; ++i) {
        const float* x = X + (i0 + i) * xStride;
        for (uint32_t d = 0; d < D; ++d) XT[size_t(d) * W + i] = x[d];
      }
      for (uint32_t i = nb; i < W; ++i)  // idle lanes: all bins empty, never read
        for (uint32_t d = 0; d < D; ++d) XT[size_t(d) * W + i] = 0.0f;
      if (W == 16) dwta_block16_avx512(XT, p.binDims, p.binSize, m0, m1, H);
      else dwta_block8_avx2(XT, p.binDims, p.binSize, m0, m1, H);
      // Keys of all W lanes at once (lane loops over the (bins, W) layout vectorise); a lane with an empty
      // bin is redone by the per-vector path, whose densification needs the other bins (same result).
      uint32_t empty[16] = {0}, raw[16];
      for (uint32_t r = 0; r < rows; ++r)
        for (uint32_t i = 0; i < 16; ++i) empty[i] |= i < W && H[size_t(r) * W + i] == kNone;
      const bool fold = K * p.bitsPerHash > p.rangeBits;
      for (uint32_t t = t0; t < t1; ++t) {
        for (uint32_t i = 0; i < 16; ++i) raw[i] = 0;
        for (uint32_t j = 0; j < K; ++j) {
          const uint32_t* Hj = H + size_t((t - t0) * K + j) * W;
          for (uint32_t i = 0; i < W; ++i) raw[i] |= Hj[i] << (j * p.bitsPerHash);
        }
        for (uint32_t i = 0; i < nb; ++i)
          keys[(i0 + i) * keyStride + (t - t0)] =
              fold ? static_cast<uint32_t>((uint64_t(raw[i]) * 0x9E3779B97F4A7C15ull) >> (64 - p.rangeBits)) : raw[i];
      }
      for (uint32_t i = 0; i < nb; ++i)
        if (empty[i]) hash_dense(p, X + (i0 + i) * xStride, t0, t1, keys + (i0 + i) * keyStride, s);
    }
    return;
  }
#endif
  for (size_t i = 0; i < n; ++i) hash_dense(p, X + i * xStride, t0, t1, keys + i * keyStride, s);
}

int lsh_set_simd_cap(int cap) {
  gSimdCap.store(std::max(0, std::min(cap, 2)), std::memory_order_relaxed);
  return simd_level();
}

}  // namespace sl
