// Vectorised building blocks of the network kernels. Shapes and legend: net_kernels.h.
//
// Row kernels are plain loops that GCC auto-vectorises inside each target_clones version (the dot
// product keeps 16 independent partial sums so that no reassociation flag is needed). Block kernels are
// written once over GCC vector types (`V`, lanes = sizeof(V) / 4) and instantiated per ISA, because the
// register blocking (4 rows x 2 vectors of samples) must match the vector width: 16-lane vectors on an
// AVX2 machine would spill every accumulator.
#pragma GCC diagnostic ignored "-Wpsabi"  // vector types in always-inline helpers; never crosses an ABI boundary
#include "net_kernels.h"

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <type_traits>

#if defined(__aarch64__) && defined(__linux__)
#include <asm/hwcap.h>
#include <sys/auxv.h>
#endif

namespace sl {
namespace nk {

#define SL_INLINE static inline __attribute__((always_inline))

// ---- Adam bias correction ---------------------------------------------------------------------------------

namespace {
// The calling thread's bias corrections for one (beta1, beta2): slot t % kSlots holds step cacheT's.
struct CorrectionCache {
  static constexpr uint32_t kSlots = 4096;
  double logB1 = 0, logB2 = 0;
  bool set = false;
  uint32_t cacheT[kSlots];
  float cache1[kSlots], cache2[kSlots];
};
CorrectionCache& thread_correction_cache() {
  static thread_local CorrectionCache c;
  return c;
}
// c, holding the corrections of (logB1, logB2) (emptied first when it held another pair's).
CorrectionCache& correction_cache(CorrectionCache& c, double logB1, double logB2) {
  // Compared as bits: log 0 = -inf (beta = 0) equals itself; a NaN beta would never match and only recompute.
  if (!c.set || std::memcmp(&c.logB1, &logB1, sizeof(double)) != 0 || std::memcmp(&c.logB2, &logB2, sizeof(double)) != 0) {
    c.logB1 = logB1;
    c.logB2 = logB2;
    c.set = true;
    for (uint32_t i = 0; i < CorrectionCache::kSlots; ++i) c.cacheT[i] = 0;  // t >= 1 never matches 0
  }
  return c;
}
}  // namespace

void AdamCorrection::init(double b1, double b2) {
  logB1 = std::log(b1);
  logB2 = std::log(b2);
  cache = &thread_correction_cache();
}

void AdamCorrection::at(uint32_t t) {
  // Every slot's cacheT starts at 0, which would match t = 0 and read an unset cache entry; bump_step never
  // returns 0, but a caller's 0 must not read uninitialised memory either.
  if (t == 0) t = 1;
  if (!cache) cache = &thread_correction_cache();  // init not called: the log betas stay 0, as before
  CorrectionCache& c = correction_cache(*static_cast<CorrectionCache*>(cache), logB1, logB2);
  const uint32_t slot = t % CorrectionCache::kSlots;
  if (c.cacheT[slot] != t) {
    // 1 - beta^t in double: for beta2 = 0.999 and t = 1 this is 1e-3, which float pow would round badly.
    // beta = 0 gives log 0 = -inf and a correction of exactly 1.
    c.cacheT[slot] = t;
    c.cache1[slot] = static_cast<float>(1.0 / -std::expm1(t * logB1));
    c.cache2[slot] = static_cast<float>(1.0 / -std::expm1(t * logB2));
  }
  ibc1 = c.cache1[slot];
  ibc2 = c.cache2[slot];
}

// ---- row kernels ------------------------------------------------------------------------------------------

// Row kernels use explicit 8-lane vectors: one YMM register on AVX2/AVX-512 (Zen 4 executes 512-bit FMAs
// as two 256-bit halves anyway), two XMM registers on SSE; GCC's auto-vectoriser handles neither the dot
// reduction (no reassociation flag) nor these short loops reliably.
typedef float f8 __attribute__((vector_size(32)));
SL_INLINE f8 ld8(const float* p) {
  f8 v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}
SL_INLINE void st8(float* p, f8 v) { std::memcpy(p, &v, sizeof(v)); }

SL_INLINE float dot_inl(const float* __restrict a, const float* __restrict b, uint32_t n) {
  f8 s0 = {}, s1 = {}, s2 = {}, s3 = {};
  uint32_t i = 0;
  for (; i + 32 <= n; i += 32) {
    s0 += ld8(a + i) * ld8(b + i);
    s1 += ld8(a + i + 8) * ld8(b + i + 8);
    s2 += ld8(a + i + 16) * ld8(b + i + 16);
    s3 += ld8(a + i + 24) * ld8(b + i + 24);
  }
  for (; i + 8 <= n; i += 8) s0 += ld8(a + i) * ld8(b + i);
  float tail = 0;
  for (; i < n; ++i) tail += a[i] * b[i];
  const f8 s = (s0 + s1) + (s2 + s3);
  return (((s[0] + s[4]) + (s[1] + s[5])) + ((s[2] + s[6]) + (s[3] + s[7]))) + tail;
}

SL_INLINE void axpy_inl(float* __restrict y, float a, const float* __restrict x, uint32_t n) {
  uint32_t i = 0;
  for (; i + 16 <= n; i += 16) {
    st8(y + i, ld8(y + i) + a * ld8(x + i));
    st8(y + i + 8, ld8(y + i + 8) + a * ld8(x + i + 8));
  }
  for (; i + 8 <= n; i += 8) st8(y + i, ld8(y + i) + a * ld8(x + i));
  for (; i < n; ++i) y[i] += a * x[i];
}

SL_INLINE void scale_inl(float* __restrict y, float a, const float* __restrict x, uint32_t n) {
  uint32_t i = 0;
  for (; i + 8 <= n; i += 8) st8(y + i, a * ld8(x + i));
  for (; i < n; ++i) y[i] = a * x[i];
}

SL_INLINE void adam_inl(float* __restrict w, float* __restrict m, float* __restrict v, const float* __restrict g,
                        uint32_t n, float lr, float b1, float b2, float eps, float ibc1, float ibc2) {
  const float c1 = 1.0f - b1, c2 = 1.0f - b2;
  for (uint32_t i = 0; i < n; ++i) {
    const float gi = g[i];
    const float mi = b1 * m[i] + c1 * gi;
    const float vi = b2 * v[i] + c2 * gi * gi;
    m[i] = mi;
    v[i] = vi;
    w[i] -= lr * (mi * ibc1) / (std::sqrt(vi * ibc2) + eps);
  }
}

SL_INLINE void prefetch_row(const float* p, uint32_t n) {
  for (uint32_t i = 0; i < n; i += 16) __builtin_prefetch(p + i, 0, 3);
}

SL_CLONES float dot(const float* a, const float* b, uint32_t n) { return dot_inl(a, b, n); }

SL_CLONES void axpy(float* y, float a, const float* x, uint32_t n) { axpy_inl(y, a, x, n); }

SL_CLONES void add(float* y, const float* x, uint32_t n) { axpy_inl(y, 1.0f, x, n); }

SL_CLONES void adam_row(float* w, float* m, float* v, const float* g, uint32_t n, const AdamStep& s) {
  adam_inl(w, m, v, g, n, s.lr, s.b1, s.b2, s.eps, s.ibc1, s.ibc2);
}

SL_CLONES void mask_gradient(float* __restrict row, const float* __restrict a, const float* __restrict keep, uint32_t n,
                             bool relu) {
  typedef int32_t i8 __attribute__((vector_size(32)));
  uint32_t j = 0;
  for (; j + 8 <= n; j += 8) {
    f8 r = ld8(row + j);
    if (keep) r *= ld8(keep + j);
    if (relu) r = (f8)((i8)r & (ld8(a + j) > f8{}));  // the comparison's lanes are all ones or zero
    st8(row + j, r);
  }
  for (; j < n; ++j) {
    float r = keep ? row[j] * keep[j] : row[j];
    row[j] = relu && !(a[j] > 0.0f) ? 0.0f : r;
  }
}

SL_CLONES void rowlist_forward(float* z, const RowList& rl, const float* W, const float* bias, const float* X,
                               uint32_t d, uint32_t ldx) {
  constexpr uint32_t kAhead = 8;  // rows ascend but skip: prefetch the weight row needed kAhead rows later
  for (uint32_t t = 0; t < rl.nRows; ++t) {
    if (t + kAhead < rl.nRows) {
      prefetch_row(W + size_t(rl.rows[t + kAhead]) * d, d);
      __builtin_prefetch(bias + rl.rows[t + kAhead], 0, 3);
    }
    const uint32_t j = rl.rows[t];
    const float* Wj = W + size_t(j) * d;
    const float bj = bias[j];
    for (uint32_t e = rl.rowStart[t]; e < rl.rowStart[t + 1]; ++e)
      z[rl.entPos[e]] = bj + dot_inl(Wj, X + size_t(rl.entSample[e]) * ldx, d);
  }
}

SL_CLONES void rowlist_backward(const RowList& rl, const float* coef, const float* V, uint32_t ldv, uint32_t width,
                                float* dX, uint32_t ldx, const RowUpdate& u, float* g) {
  constexpr uint32_t kAhead = 6;
  AdamCorrection corr;
  if (u.mode == 0) corr.init(u.b1, u.b2);
  for (uint32_t t = 0; t < rl.nRows; ++t) {
    if (t + kAhead < rl.nRows) {
      const uint32_t jn = rl.rows[t + kAhead];
      const size_t o = size_t(jn) * width;
      prefetch_row(u.W + o, width);
      if (u.mode == 0) {
        prefetch_row(u.mW + o, width);
        prefetch_row(u.vW + o, width);
        __builtin_prefetch(u.rowSteps + jn, 1, 3);
        if (u.bias) {
          __builtin_prefetch(u.bias + jn, 1, 3);
          __builtin_prefetch(u.mB + jn, 1, 3);
          __builtin_prefetch(u.vB + jn, 1, 3);
        }
      } else if (u.mode == 1) {
        prefetch_row(u.gW + o, width);
      }
    }
    const uint32_t j = rl.rows[t];
    float* Wj = u.W + size_t(j) * width;
    // The first entry writes g, the others add to it (no pass that zeroes g first).
    const uint32_t eb = rl.rowStart[t], ee = rl.rowStart[t + 1];
    if (eb == ee) std::memset(g, 0, sizeof(float) * width);
    else scale_inl(g, coef[eb], V + size_t(rl.entSample[eb]) * ldv, width);
    float gb = 0;
    for (uint32_t e = eb; e < ee; ++e) {
      const float c = coef[e];
      const uint32_t s = rl.entSample[e];
      gb += c;
      if (e != eb) axpy_inl(g, c, V + size_t(s) * ldv, width);
      if (dX) axpy_inl(dX + size_t(s) * ldx, c, Wj, width);
    }
    if (u.mode == 0) {
      const uint32_t step = bump_step(u.rowSteps + j);
      corr.at(step);
      adam_inl(Wj, u.mW + size_t(j) * width, u.vW + size_t(j) * width, g, width, u.lr, u.b1, u.b2, u.eps, corr.ibc1,
               corr.ibc2);
      if (u.bias) adam_inl(u.bias + j, u.mB + j, u.vB + j, &gb, 1, u.lr, u.b1, u.b2, u.eps, corr.ibc1, corr.ibc2);
    } else if (u.mode == 3) {
      u.sink->add(j, g, width, u.bias ? &gb : nullptr);
    } else {
      axpy_inl(u.gW + size_t(j) * width, 1.0f, g, width);
      if (u.gBias) u.gBias[j] += gb;
    }
  }
}

SL_CLONES void sparse_forward(float* A, uint32_t lda, const float* W0, const float* bias, uint32_t d0,
                              const uint32_t* rows, uint32_t n, const uint32_t* offsets, const uint32_t* indices,
                              const float* values) {
  for (uint32_t i = 0; i < n; ++i) {
    float* a = A + size_t(i) * lda;
    std::memcpy(a, bias, sizeof(float) * d0);
    std::memset(a + d0, 0, sizeof(float) * (lda - d0));
    const uint32_t r = rows[i];
    const uint32_t q0 = offsets[r], q1 = offsets[r + 1];
    for (uint32_t q = q0; q < q1; ++q) {
      if (q + 4 < q1) prefetch_row(W0 + size_t(indices[q + 4]) * d0, d0);
      axpy_inl(a, values[q], W0 + size_t(indices[q]) * d0, d0);
    }
  }
}

SL_CLONES void sparse_partial_forward(float* Z, uint32_t ldz, const float* W0, uint32_t d0, const uint32_t* rows,
                                      uint32_t n, const uint32_t* offsets, const uint32_t* indices, const float* values,
                                      const int32_t* rowOf) {
  for (uint32_t i = 0; i < n; ++i) {
    float* z = Z + size_t(i) * ldz;
    std::memset(z, 0, sizeof(float) * ldz);
    const uint32_t r = rows[i];
    const uint32_t q0 = offsets[r], q1 = offsets[r + 1];
    for (uint32_t q = q0; q < q1; ++q) {
      if (q + 4 < q1 && rowOf[indices[q + 4]] >= 0) prefetch_row(W0 + size_t(rowOf[indices[q + 4]]) * d0, d0);
      const int32_t f = rowOf[indices[q]];
      if (f >= 0) axpy_inl(z, values[q], W0 + size_t(f) * d0, d0);
    }
  }
}

void gather(float* out, const float* in, const uint32_t* idx, size_t n) {
  for (size_t e = 0; e < n; ++e) out[e] = in[idx[e]];
}

void transpose(float* out, uint32_t ldo, const float* in, uint32_t ldi, uint32_t rows, uint32_t cols) {
  constexpr uint32_t B = 16;
  for (uint32_t r0 = 0; r0 < rows; r0 += B)
    for (uint32_t c0 = 0; c0 < cols; c0 += B) {
      const uint32_t r1 = r0 + B < rows ? r0 + B : rows, c1 = c0 + B < cols ? c0 + B : cols;
      for (uint32_t c = c0; c < c1; ++c)
        for (uint32_t r = r0; r < r1; ++r) out[size_t(c) * ldo + r] = in[size_t(r) * ldi + c];
    }
}

// ---- block kernels ----------------------------------------------------------------------------------------

typedef float v16f __attribute__((vector_size(64)));
typedef int32_t v16i __attribute__((vector_size(64)));
typedef float v8f __attribute__((vector_size(32)));
typedef int32_t v8i __attribute__((vector_size(32)));
typedef float v4f __attribute__((vector_size(16)));
typedef int32_t v4i __attribute__((vector_size(16)));
typedef float v1f __attribute__((vector_size(4)));   // one lane: the scalar kernels
typedef int32_t v1i __attribute__((vector_size(4)));

template <class V> struct VecInt;
template <> struct VecInt<v16f> { typedef v16i type; };
template <> struct VecInt<v8f> { typedef v8i type; };
template <> struct VecInt<v4f> { typedef v4i type; };
template <> struct VecInt<v1f> { typedef v1i type; };

template <class V> SL_INLINE V vld(const float* p) {
  V v;
  std::memcpy(&v, p, sizeof(V));
  return v;
}
template <class V> SL_INLINE void vst(float* p, V v) { std::memcpy(p, &v, sizeof(V)); }
template <class V> SL_INLINE V vset(float x) { return V{} + x; }
// mask ? a : b, with mask from a vector comparison (all bits set where true).
template <class V, class M> SL_INLINE V vsel(M mask, V a, V b) {
  typedef typename VecInt<V>::type I;
  return (V)(((I)a & mask) | ((I)b & ~mask));
}
template <class V> SL_INLINE V vmax(V a, V b) { return vsel(a > b, a, b); }

// exp(x) for x in float range; exactly 0 below -87 (so softmax tails never produce denormals), NaN stays
// NaN. Cephes expf polynomial, about 1 ulp.
template <class V> SL_INLINE V vexp(V x) {
  typedef typename VecInt<V>::type I;
  const V lo = vset<V>(-87.0f), hi = vset<V>(88.0f);
  V xc = vsel(x < lo, lo, x);
  xc = vsel(xc > hi, hi, xc);
  const V fx = xc * 1.44269504088896341f + 0.5f;
  V nf = __builtin_convertvector(__builtin_convertvector(fx, I), V);
  nf = vsel(nf > fx, nf - 1.0f, nf);  // floor
  V r = xc - nf * 0.693359375f;
  r = r - nf * -2.12194440e-4f;
  const V r2 = r * r;
  V y = vset<V>(1.9875691500e-4f);
  y = y * r + 1.3981999507e-3f;
  y = y * r + 8.3334519073e-3f;
  y = y * r + 4.1665795894e-2f;
  y = y * r + 1.6666665459e-1f;
  y = y * r + 5.0000001201e-1f;
  y = y * r2 + r + 1.0f;
  const I bits = (__builtin_convertvector(nf, I) + 127) << 23;
  y = y * (V)bits;
  return vsel(x < lo, V{}, y);
}

template <class V, uint32_t R>
SL_INLINE void blk_forward_body(float* __restrict zt, const float* __restrict W, uint32_t d,
                                const float* __restrict bias, const float* __restrict Xt, uint32_t ldn) {
  constexpr uint32_t Ln = sizeof(V) / 4, NV = 2;
  for (uint32_t s = 0; s < ldn; s += Ln * NV) {
    V acc[R][NV];
    for (uint32_t r = 0; r < R; ++r)
      for (uint32_t v = 0; v < NV; ++v) acc[r][v] = vset<V>(bias[r]);
    const float* xp = Xt + s;
    for (uint32_t i = 0; i < d; ++i, xp += ldn) {
      V x[NV];
      for (uint32_t v = 0; v < NV; ++v) x[v] = vld<V>(xp + v * Ln);
      for (uint32_t r = 0; r < R; ++r) {
        const float w = W[size_t(r) * d + i];
        for (uint32_t v = 0; v < NV; ++v) acc[r][v] += w * x[v];
      }
    }
    for (uint32_t r = 0; r < R; ++r)
      for (uint32_t v = 0; v < NV; ++v) vst<V>(zt + size_t(r) * ldn + s + v * Ln, acc[r][v]);
  }
}

template <class V, uint32_t R>
SL_INLINE void blk_grad_body(float* __restrict g, float* __restrict gb, const float* __restrict dzt,
                             const float* __restrict X, uint32_t n, uint32_t ldn, uint32_t ldx) {
  constexpr uint32_t Ln = sizeof(V) / 4, NV = 2;
  for (uint32_t i = 0; i < ldx; i += Ln * NV) {
    V acc[R][NV];
    for (uint32_t r = 0; r < R; ++r)
      for (uint32_t v = 0; v < NV; ++v) acc[r][v] = V{};
    for (uint32_t s = 0; s < n; ++s) {
      V x[NV];
      for (uint32_t v = 0; v < NV; ++v) x[v] = vld<V>(X + size_t(s) * ldx + i + v * Ln);
      for (uint32_t r = 0; r < R; ++r) {
        const float c = dzt[size_t(r) * ldn + s];
        for (uint32_t v = 0; v < NV; ++v) acc[r][v] += c * x[v];
      }
    }
    for (uint32_t r = 0; r < R; ++r)
      for (uint32_t v = 0; v < NV; ++v) vst<V>(g + size_t(r) * ldx + i + v * Ln, acc[r][v]);
  }
  for (uint32_t r = 0; r < R; ++r) {
    V acc = V{};
    for (uint32_t s = 0; s < ldn; s += Ln) acc += vld<V>(dzt + size_t(r) * ldn + s);
    float t = 0;
    for (uint32_t l = 0; l < Ln; ++l) t += acc[l];
    gb[r] = t;
  }
}

template <class V, uint32_t R>
SL_INLINE void blk_dx_body(float* __restrict dXt, const float* __restrict W, uint32_t d, const float* __restrict dzt,
                           uint32_t ldn) {
  constexpr uint32_t Ln = sizeof(V) / 4, NV = 2;
  for (uint32_t s = 0; s < ldn; s += Ln * NV) {
    V dz[R][NV];
    for (uint32_t r = 0; r < R; ++r)
      for (uint32_t v = 0; v < NV; ++v) dz[r][v] = vld<V>(dzt + size_t(r) * ldn + s + v * Ln);
    float* xp = dXt + s;
    for (uint32_t i = 0; i < d; ++i, xp += ldn) {
      V acc[NV];
      for (uint32_t v = 0; v < NV; ++v) acc[v] = vld<V>(xp + v * Ln);
      for (uint32_t r = 0; r < R; ++r) {
        const float w = W[size_t(r) * d + i];
        for (uint32_t v = 0; v < NV; ++v) acc[v] += w * dz[r][v];
      }
      for (uint32_t v = 0; v < NV; ++v) vst<V>(xp + v * Ln, acc[v]);
    }
  }
}

template <class V>
SL_INLINE void lse_update_body(float* __restrict mx, float* __restrict sum, const float* __restrict zt, uint32_t R,
                               uint32_t ldn) {
  constexpr uint32_t Ln = sizeof(V) / 4;
  for (uint32_t s = 0; s < ldn; s += Ln) {
    const V m0 = vld<V>(mx + s);
    V m = m0;
    for (uint32_t r = 0; r < R; ++r) m = vmax(m, vld<V>(zt + size_t(r) * ldn + s));
    V acc = vld<V>(sum + s) * vexp(m0 - m);
    for (uint32_t r = 0; r < R; ++r) acc += vexp(vld<V>(zt + size_t(r) * ldn + s) - m);
    vst<V>(mx + s, m);
    vst<V>(sum + s, acc);
  }
}

template <class V>
SL_INLINE void softmax_scaled_body(float* __restrict dzt, const float* __restrict zt, const float* __restrict lse,
                                   const float* __restrict scale, uint32_t R, uint32_t ldn) {
  constexpr uint32_t Ln = sizeof(V) / 4;
  for (uint32_t s = 0; s < ldn; s += Ln) {
    const V l = vld<V>(lse + s), c = vld<V>(scale + s);
    for (uint32_t r = 0; r < R; ++r)
      vst<V>(dzt + size_t(r) * ldn + s, vexp(vld<V>(zt + size_t(r) * ldn + s) - l) * c);
  }
}

template <class V>
SL_INLINE void exp_shift_body(float* __restrict out, const float* __restrict in, float shift, uint32_t n) {
  constexpr uint32_t Ln = sizeof(V) / 4;
  uint32_t i = 0;
  for (; i + Ln <= n; i += Ln) vst<V>(out + i, vexp(vld<V>(in + i) - shift));
  if (i < n) {
    float tmp[Ln];
    for (uint32_t l = 0; l < Ln; ++l) tmp[l] = i + l < n ? in[i + l] : 0.0f;
    vst<V>(tmp, vexp(vld<V>(tmp) - shift));
    for (uint32_t l = 0; i + l < n; ++l) out[i + l] = tmp[l];
  }
}

struct BlockOps {
  void (*forward)(float*, const float*, uint32_t, const float*, const float*, uint32_t, uint32_t);
  void (*grad)(float*, float*, const float*, const float*, uint32_t, uint32_t, uint32_t, uint32_t);
  void (*dx)(float*, const float*, uint32_t, const float*, uint32_t, uint32_t);
  void (*lse)(float*, float*, const float*, uint32_t, uint32_t);
  void (*softmax)(float*, const float*, const float*, const float*, uint32_t, uint32_t);
  void (*exps)(float*, const float*, float, uint32_t);
  const char* name;
};

// R rows in blocks of at most MAXR (what fits the register file: 8 rows x 2 vectors of accumulators in
// AVX-512's 32 registers, 4 rows in the 16 of AVX2 and SSE), each block's R a template argument so that the
// accumulators stay in registers. Splitting rows into smaller blocks gives the same bits: every output element
// is the same sequence of multiply-adds (forward and grad sum over the inner dimension within a row; dx adds
// the rows in row order). Written out per kernel (no lambda: a lambda would not inherit the ISA's target).
#define SL_ROW_SWITCH(MAXR, CALL)                  \
  constexpr uint32_t kMaxR = MAXR;                 \
  for (uint32_t r0 = 0; r0 < R;) {                 \
    const uint32_t r = R - r0 < kMaxR ? R - r0 : kMaxR; \
    switch (r) {                                   \
      case 8: CALL(8); break;                      \
      case 7: CALL(7); break;                      \
      case 6: CALL(6); break;                      \
      case 5: CALL(5); break;                      \
      case 4: CALL(4); break;                      \
      case 3: CALL(3); break;                      \
      case 2: CALL(2); break;                      \
      default: CALL(1); break;                     \
    }                                              \
    r0 += r;                                       \
  }
// One block of K rows from row r0 (K clamped to MAXR so that no block wider than the ISA's is instantiated).
#define SL_K(K) ((K) <= kMaxR ? (K) : 1)
#define SL_FWD_CALL(K) blk_forward_body<VT, SL_K(K)>(zt + size_t(r0) * ldn, W + size_t(r0) * d, d, bias + r0, Xt, ldn)
#define SL_GRAD_CALL(K) blk_grad_body<VT, SL_K(K)>(g + size_t(r0) * ldx, gb + r0, dzt + size_t(r0) * ldn, X, n, ldn, ldx)
#define SL_DX_CALL(K) blk_dx_body<VT, SL_K(K)>(dXt, W + size_t(r0) * d, d, dzt + size_t(r0) * ldn, ldn)

// One set of entry points per ISA; each takes R up to kMaxRowBlock rows.
#define SL_DEFINE_ISA(NAME, ATTR, V, MAXR)                                                                      \
  ATTR static void forward_##NAME(float* zt, const float* W, uint32_t d, const float* bias, const float* Xt,     \
                                  uint32_t R, uint32_t ldn) {                                                  \
    typedef V VT;                                                                                              \
    SL_ROW_SWITCH(MAXR, SL_FWD_CALL)                                                                           \
  }                                                                                                            \
  ATTR static void grad_##NAME(float* g, float* gb, const float* dzt, const float* X, uint32_t R, uint32_t n,    \
                               uint32_t ldn, uint32_t ldx) {                                                   \
    typedef V VT;                                                                                              \
    SL_ROW_SWITCH(MAXR, SL_GRAD_CALL)                                                                          \
  }                                                                                                            \
  ATTR static void dx_##NAME(float* dXt, const float* W, uint32_t d, const float* dzt, uint32_t R, uint32_t ldn) { \
    typedef V VT;                                                                                              \
    SL_ROW_SWITCH(MAXR, SL_DX_CALL)                                                                            \
  }                                                                                                            \
  ATTR static void lse_##NAME(float* mx, float* sum, const float* zt, uint32_t R, uint32_t ldn) {               \
    lse_update_body<V>(mx, sum, zt, R, ldn);                                                                   \
  }                                                                                                            \
  ATTR static void softmax_##NAME(float* dzt, const float* zt, const float* lse, const float* scale, uint32_t R, \
                                  uint32_t ldn) {                                                              \
    softmax_scaled_body<V>(dzt, zt, lse, scale, R, ldn);                                                       \
  }                                                                                                            \
  ATTR static void exps_##NAME(float* out, const float* in, float shift, uint32_t n) {                          \
    exp_shift_body<V>(out, in, shift, n);                                                                      \
  }

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
SL_DEFINE_ISA(avx512, __attribute__((target("avx512f,avx2,fma"))), v16f, 8)
SL_DEFINE_ISA(avx2, __attribute__((target("avx2,fma"))), v8f, 4)
#endif
// 4 lanes: SSE on x86-64, Advanced SIMD (NEON) on AArch64, whatever 128-bit vectors the target has elsewhere.
SL_DEFINE_ISA(generic, , v4f, 4)
#if defined(__aarch64__)
// One lane, vectorisers off: the baseline the NEON kernels are tested against (SUBLINEAR_BLOCK_ISA=scalar).
#define SL_SCALAR_ATTR __attribute__((optimize("no-tree-vectorize", "no-tree-slp-vectorize")))
SL_DEFINE_ISA(scalar, SL_SCALAR_ATTR, v1f, 4)

// Whether the CPU has Advanced SIMD (Linux: HWCAP_ASIMD in the auxiliary vector).
static bool cpu_has_neon() {
#if defined(__linux__)
  return (getauxval(AT_HWCAP) & HWCAP_ASIMD) != 0;
#else
  return true;
#endif
}
#endif

// The best ISA the CPU supports; SUBLINEAR_BLOCK_ISA selects a lower one (tests compare them): avx2|sse on
// x86-64, scalar on AArch64.
static BlockOps select_ops() {
  const char* env = std::getenv("SUBLINEAR_BLOCK_ISA");
  const std::string want = env ? env : "";
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && (want.empty() || want == "avx512"))
    return {forward_avx512, grad_avx512, dx_avx512, lse_avx512, softmax_avx512, exps_avx512, "avx512"};
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && want != "sse")
    return {forward_avx2, grad_avx2, dx_avx2, lse_avx2, softmax_avx2, exps_avx2, "avx2"};
  return {forward_generic, grad_generic, dx_generic, lse_generic, softmax_generic, exps_generic, "sse"};
#elif defined(__aarch64__)
  // Advanced SIMD is part of ARMv8-A; without it (or when asked), the scalar kernels.
  if (cpu_has_neon() && want != "scalar")
    return {forward_generic, grad_generic, dx_generic, lse_generic, softmax_generic, exps_generic, "neon"};
  return {forward_scalar, grad_scalar, dx_scalar, lse_scalar, softmax_scalar, exps_scalar, "scalar"};
#else
  (void)want;
  return {forward_generic, grad_generic, dx_generic, lse_generic, softmax_generic, exps_generic, "generic"};
#endif
}

// Chosen once per process (thread-safe static initialisation); read-only afterwards.
static const BlockOps& ops() {
  static const BlockOps o = select_ops();
  return o;
}

void blk_forward(float* zt, const float* W, uint32_t d, const float* bias, const float* Xt, uint32_t R, uint32_t ldn) {
  ops().forward(zt, W, d, bias, Xt, R, ldn);
}
void blk_grad(float* g, float* gb, const float* dzt, const float* X, uint32_t R, uint32_t n, uint32_t ldn,
              uint32_t ldx) {
  ops().grad(g, gb, dzt, X, R, n, ldn, ldx);
}
void blk_dx(float* dXt, const float* W, uint32_t d, const float* dzt, uint32_t R, uint32_t ldn) {
  ops().dx(dXt, W, d, dzt, R, ldn);
}
void lse_update(float* mx, float* sum, const float* zt, uint32_t R, uint32_t ldn) { ops().lse(mx, sum, zt, R, ldn); }
void softmax_scaled(float* dzt, const float* zt, const float* lse, const float* scale, uint32_t R, uint32_t ldn) {
  ops().softmax(dzt, zt, lse, scale, R, ldn);
}
void exp_shift(float* out, const float* in, float shift, uint32_t n) { ops().exps(out, in, shift, n); }
const char* block_isa() { return ops().name; }

}  // namespace nk
}  // namespace sl
