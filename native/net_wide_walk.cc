// The inner walk of sampled prediction's wide part over one feature's list (net_wide.h: wide_dense_add),
// 16 list entries at a time with AVX-512 where the block kernels run AVX-512 (nk::block_isa(); tests select
// the scalar loop with wide_walk_vector(false) or SUBLINEAR_BLOCK_ISA=avx2), one at a time otherwise. A feature's list names each label
// at most once (its pairs are distinct), so the 16 lanes of a step never touch one label twice: a gather,
// the arithmetic and a scatter give what the scalar loop gives, entry after entry (a step whose lanes do
// repeat a label, which no checked list has, is taken by the scalar loop: AVX-512CD's conflict test).
#include <algorithm>
#include <atomic>
#include <cstring>

#include "net_kernels.h"
#include "net_wide.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define SL_WIDE_AVX512 1
#endif

namespace sl {
namespace net {
namespace {

size_t dense_add_scalar(const uint32_t* lab, const float* wt, uint32_t e0, uint32_t e1, float x, uint32_t N,
                        float* dense, uint32_t* touched, size_t nt) {
  for (uint32_t e = e0; e < e1; ++e) {
    const uint32_t j = lab[e];
    if (j >= N) continue;
    const float v = x * wt[e];
    uint32_t bits;
    std::memcpy(&bits, dense + j, 4);
    if (bits == kWideUntouched) {
      dense[j] = v;
      touched[nt++] = j;
    } else {
      dense[j] += v;
    }
  }
  return nt;
}

#ifdef SL_WIDE_AVX512
__attribute__((target("avx512f,avx512cd"))) size_t dense_add_avx512(const uint32_t* lab, const float* wt, uint32_t e0, uint32_t e1,
                                                            float x, uint32_t N, float* dense, uint32_t* touched,
                                                            size_t nt) {
  const __m512i vN = _mm512_set1_epi32(int(N)), untouched = _mm512_set1_epi32(int(kWideUntouched));
  const __m512 vx = _mm512_set1_ps(x);
  for (uint32_t e = e0; e < e1; e += 16) {
    const __mmask16 in = e1 - e >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << (e1 - e)) - 1);
    const __m512i j = _mm512_maskz_loadu_epi32(in, lab + e);
    const __mmask16 ok = _mm512_mask_cmplt_epu32_mask(in, j, vN);
    // A list names a label once (loaders check it), but the kernel does not rely on it: a step whose lanes
    // repeat a label is taken one entry at a time.
    if (_mm512_mask_cmpneq_epi32_mask(ok, _mm512_maskz_conflict_epi32(ok, j), _mm512_setzero_si512())) {
      nt = dense_add_scalar(lab, wt, e, std::min(e + 16, e1), x, N, dense, touched, nt);
      continue;
    }
    const __m512 v = _mm512_mul_ps(vx, _mm512_maskz_loadu_ps(in, wt + e));
    const __m512 old = _mm512_mask_i32gather_ps(_mm512_setzero_ps(), ok, j, dense, 4);
    const __mmask16 fresh = _mm512_mask_cmpeq_epi32_mask(ok, _mm512_castps_si512(old), untouched);
    // fresh: v itself (as the scalar loop stores it); else old + v.
    const __m512 sum = _mm512_mask_mov_ps(_mm512_add_ps(old, v), fresh, v);
    _mm512_mask_i32scatter_ps(dense, ok, j, sum, 4);
    if (fresh) {
      _mm512_storeu_si512(touched + nt, _mm512_maskz_compress_epi32(fresh, j));
      nt += size_t(__builtin_popcount(fresh));
    }
  }
  return nt;
}
#endif

std::atomic<bool> gVectorAllowed{true};  // wide_walk_vector(false): the scalar loops (tests)

bool use_avx512() {
#ifdef SL_WIDE_AVX512
  static const bool cpu = std::strcmp(nk::block_isa(), "avx512") == 0 && __builtin_cpu_supports("avx512cd");
  return cpu && gVectorAllowed.load(std::memory_order_relaxed);
#else
  return false;
#endif
}

}  // namespace

bool wide_walk_vector(bool allow) {
  gVectorAllowed.store(allow, std::memory_order_relaxed);
  return use_avx512();
}

size_t wide_dense_add(const uint32_t* lab, const float* wt, uint32_t e0, uint32_t e1, float x, uint32_t N, float* dense,
                      uint32_t* touched, size_t nt) {
#ifdef SL_WIDE_AVX512
  if (use_avx512()) return dense_add_avx512(lab, wt, e0, e1, x, N, dense, touched, nt);
#endif
  return dense_add_scalar(lab, wt, e0, e1, x, N, dense, touched, nt);
}

}  // namespace net
}  // namespace sl
