// Vectorised building blocks of the network kernels (net_train.cc, net_predict.cc).
//
// Legend
//   n    samples in the slice            ldn  n rounded up to kSamplePad (sample-padded leading dim)
//   d    input width of a layer (inDim)  ldx  d rounded up to kDimPad (padded row of a per-sample matrix)
//   R    rows (neurons) in a block, 1..kRowBlock
//   X    (n, ldx)   per-sample input rows (row-major, padding zero)
//   Xt   (d, ldn)   the same, transposed: feature-major, samples contiguous (padding zero)
//   zt   (R, ldn)   pre-activations of a row block, samples contiguous
//   W    (R, d)     neuron-major weight rows, row stride d (not padded: it is the LayerState array)
//
// Two kinds of kernels:
//   * row kernels (dot, axpy, adam): short loops over one row, compiled with target_clones so that one
//     binary carries AVX-512, AVX2+FMA and baseline SSE versions (no -march=native);
//   * block kernels (dense GEMM-like blocks, softmax statistics): register-blocked micro-kernels written
//     once over GCC vector types and instantiated per ISA with the vector width that fits its register file
//     (16 lanes on AVX-512, 8 on AVX2, 4 on SSE), selected once per process from cpuid.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#if defined(__x86_64__) && defined(__linux__) && defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 12
#define SL_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#elif defined(__x86_64__) && defined(__linux__) && (defined(__GNUC__) || defined(__clang__))
#define SL_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define SL_CLONES
#endif

namespace sl {
namespace nk {

constexpr uint32_t kSamplePad = 32;  // ldn multiple (two 16-lane vectors)
constexpr uint32_t kDimPad = 32;     // ldx multiple
constexpr uint32_t kRowBlock = 4;    // rows per dense block
constexpr uint32_t kMaxRowBlock = 8; // most rows one block-kernel call takes (blk_forward, blk_grad, blk_dx)

inline uint32_t pad_to(uint32_t x, uint32_t m) { return (x + m - 1) / m * m; }

// ---- Adam ------------------------------------------------------------------------------------------------
// One Adam step of a row whose step counter became t (bias corrections 1 - beta^t precomputed in double).
struct AdamStep {
  float lr, b1, b2, eps;
  float ibc1, ibc2;  // 1 / (1 - b1^t), 1 / (1 - b2^t)
};

// Bias-correction factors for step t (1 / (1 - beta^t), computed in double), from a direct-mapped cache of
// the calling thread that lives as long as the thread: the rows of a batch have many distinct step counts
// (a first layer's feature rows are as old as their features are frequent), and two expm1 per distinct count
// per call showed in profiles (2% of a debian-tags batch) when the cache was rebuilt on every call.
struct AdamCorrection {
  double logB1 = 0, logB2 = 0;
  float ibc1 = 1, ibc2 = 1;
  void* cache = nullptr;  // the thread's cache (set by init: a thread_local lookup once per call, not per row)
  void init(double b1, double b2);
  void at(uint32_t t);  // sets ibc1/ibc2 for step t (t >= 1; t = 0 is treated as 1)
};

// Step counter of a row: ++*c without a locked instruction. A lock prefix drains the store buffer, which
// holds the previous row's Adam stores, on every row; under HOGWILD two threads may rarely lose an
// increment (the row's bias correction then uses a count one lower), like any other racy update.
// The counter saturates at 2^32 - 1 instead of wrapping to 0: step 0 has no bias correction (1 / (1 - beta^0)
// is infinite), and at any count near 2^32 the correction is exactly 1 in float, so staying there is exact.
// (A checkpoint may hold any count: a crafted one with 0xffffffff once produced NaN weights.)
inline uint32_t bump_step(uint32_t* c) {
  const uint32_t old = __atomic_load_n(c, __ATOMIC_RELAXED);
  const uint32_t t = old == UINT32_MAX ? old : old + 1;
  __atomic_store_n(c, t, __ATOMIC_RELAXED);
  return t;
}

// ---- row kernels (target_clones) -------------------------------------------------------------------------
float dot(const float* a, const float* b, uint32_t n);
// y[0..n) += a * x[0..n)
void axpy(float* y, float a, const float* x, uint32_t n);
// y[0..n) += x[0..n)
void add(float* y, const float* x, uint32_t n);
// w, m, v, g: (n). m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2; w -= lr (m ibc1) / (sqrt(v ibc2) + eps).
void adam_row(float* w, float* m, float* v, const float* g, uint32_t n, const AdamStep& s);

// Gradient through an activation and a dropout mask: row[j] = 0 where relu and !(a[j] > 0), else
// row[j] * keep[j] (keep null: row[j]), j < n.
void mask_gradient(float* row, const float* a, const float* keep, uint32_t n, bool relu);

// Inverted-index ("row list") passes over the rows touched by a slice. Row t of the list is neuron
// rows[t]; its entries are e in [rowStart[t], rowStart[t+1]), each naming a position p = entPos[e] (an
// element of the slice's CSR active sets, or of its input nonzeros for layer 0) of sample entSample[e].
// Per-entry data is kept in entry order so that the row passes read it sequentially.
struct RowList {
  const uint32_t* rows;       // (nRows) neuron (or feature) ids, distinct, ascending
  const uint32_t* rowStart;   // (nRows + 1)
  const uint32_t* entPos;     // (entries) positions, grouped by row
  const uint32_t* entSample;  // (entries) sample of each entry
  uint32_t nRows;
};

// Forward of a sampled layer: z[entPos[e]] = bias[j] + W[j,:] . X[entSample[e], :] for every entry e of
// every row j. W: (rows, d) neuron-major; X: (n, ldx).
void rowlist_forward(float* z, const RowList& rl, const float* W, const float* bias, const float* X, uint32_t d,
                     uint32_t ldx);

// Gradient rows of one layer collected by a sparse-gradient pass (training mode 3): row ids[e]'s gradient is
// rows[e * width .. (e + 1) * width) and, for a neuron-major layer, its bias gradient rowBias[e]. Each row
// appears at most once per slice. biasVector: an input-major layer's bias gradient (outDim) when the slice
// trained at least one sample.
struct GradRows {
  std::vector<uint32_t> ids;
  std::vector<float> rows, rowBias, biasVector;
  bool hasBiasVector = false;
  void clear() {
    ids.clear();
    rows.clear();
    rowBias.clear();
    biasVector.clear();
    hasBiasVector = false;
  }
  void add(uint32_t j, const float* g, uint32_t width, const float* gb) {
    ids.push_back(j);
    rows.insert(rows.end(), g, g + width);
    if (gb) rowBias.push_back(*gb);
  }
};

// Update target of a row-list backward pass. mode 0: Adam on W/bias rows (lazy, per-row step counts);
// mode 1: add the gradient into gW/gBias; mode 3: append the row's gradient to `sink`.
struct RowUpdate {
  int mode = 0;
  float* W = nullptr;  // (rows, width)
  float* mW = nullptr;
  float* vW = nullptr;
  uint32_t* rowSteps = nullptr;  // (rows)
  float* bias = nullptr;         // (rows) or null (layer 0: bias handled by the caller)
  float* mB = nullptr;
  float* vB = nullptr;
  float* gW = nullptr;  // mode 1
  float* gBias = nullptr;
  GradRows* sink = nullptr;  // mode 3
  float lr = 0, b1 = 0, b2 = 0, eps = 0;
  double logB1 = 0, logB2 = 0;
};

// Backward of the rows of a row list, coef in entry order (coef[e]). For row j, with s = entSample[e]:
//   g = sum_e coef[e] * V[s, 0..width)          (V: (n, ldv))
//   gb = sum_e coef[e]                          (when u.bias)
//   dX[s, 0..width) += coef[e] * W[j, :]        (when dX; uses the pre-update row)
//   then the row update (Adam with t = ++rowSteps[j], or gradient accumulation).
// gScratch: (width) floats.
void rowlist_backward(const RowList& rl, const float* coef, const float* V, uint32_t ldv, uint32_t width, float* dX,
                      uint32_t ldx, const RowUpdate& u, float* gScratch);

// out[e] = in[idx[e]], e < n (entry-order copy of position-order data).
void gather(float* out, const float* in, const uint32_t* idx, size_t n);

// a (n, lda) = bias + sum over the CSR nonzeros of each sample's input row of x_f * W0[f, :]  (W0: (D, d0)
// input-major). rows[i] is sample i's dataset row.
void sparse_forward(float* A, uint32_t lda, const float* W0, const float* bias, uint32_t d0, const uint32_t* rows,
                    uint32_t n, const uint32_t* offsets, const uint32_t* indices, const float* values);

// Label-sharded training (net_shard.cc): Z (n, ldz) = sum over the CSR nonzeros f of each sample's input row
// with rowOf[f] >= 0 of x_f * W0[rowOf[f], :] (W0: (rows held, d0) input-major, a slice of the features' rows;
// no bias; columns d0 .. ldz zero). The caller checks every rowOf[f] it meets against the rows held.
void sparse_partial_forward(float* Z, uint32_t ldz, const float* W0, uint32_t d0, const uint32_t* rows, uint32_t n,
                            const uint32_t* offsets, const uint32_t* indices, const float* values, const int32_t* rowOf);

// out (cols, ldo) = transpose of in (rows, ldi) restricted to rows x cols.
void transpose(float* out, uint32_t ldo, const float* in, uint32_t ldi, uint32_t rows, uint32_t cols);

// ---- block kernels (ISA-dispatched) ----------------------------------------------------------------------
// zt (R, ldn) = bias[r] + W[r, :] . Xt[:, s]    for r < R, s < ldn.
void blk_forward(float* zt, const float* W, uint32_t d, const float* bias, const float* Xt, uint32_t R, uint32_t ldn);
// g (R, ldx) = sum_s dzt[r, s] X[s, :]   (s < n);   gb[r] = sum_s dzt[r, s].
void blk_grad(float* g, float* gb, const float* dzt, const float* X, uint32_t R, uint32_t n, uint32_t ldn,
              uint32_t ldx);
// dXt (d, ldn) += sum_r W[r, i] dzt[r, :]
void blk_dx(float* dXt, const float* W, uint32_t d, const float* dzt, uint32_t R, uint32_t ldn);
// Online log-sum-exp over rows: with mx = max(mx, max_r zt[r, s]), sum = sum * exp(old mx - mx) +
// sum_r exp(zt[r, s] - mx). mx starts at -inf and sum at 0.
void lse_update(float* mx, float* sum, const float* zt, uint32_t R, uint32_t ldn);
// dzt (R, ldn) = exp(zt - lse[s]) * scale[s]
void softmax_scaled(float* dzt, const float* zt, const float* lse, const float* scale, uint32_t R, uint32_t ldn);
// out[i] = exp(in[i] - shift), i < n (any n).
void exp_shift(float* out, const float* in, float shift, uint32_t n);
// Name of the selected block-kernel ISA ("avx512", "avx2", "sse").
const char* block_isa();

}  // namespace nk
}  // namespace sl
