// Shared parts of the network kernels: per-thread scratch, slice validation, the forward pass of the hidden
// layers and LSH active sets. Legend: net.h, net_kernels.h.
#include <algorithm>
#include <cstring>
#include <string>

#include "napi_util.h"
#include "net_internal.h"
#include "net_parallel.h"
#include "rng.h"

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace sl {
namespace net {

Scratch& scratch() {
  static thread_local Scratch s;
  return s;
}

void build_index(RowIndex& idx, const uint32_t* ids, const uint32_t* sampleOf, size_t P, uint32_t maxId, Scratch& s) {
  if (s.slotOf.size() < maxId) s.slotOf.resize(maxId, -1);
  int32_t* slot = s.slotOf.data();
  uint32_t* rows = grow(idx.rows, P);
  uint32_t* cnt = grow(idx.cursor, P);
  uint32_t* start = grow(idx.rowStart, P + 1);
  uint32_t* ent = grow(idx.entPos, P);
  uint32_t* entS = grow(idx.entSample, P);
  // Distinct rows, then ascending order: the row passes then stream through W and the Adam moments
  // (a batch of a sampled 670K-neuron layer touches a large fraction of the rows) instead of jumping.
  uint32_t nRows = 0;
  for (size_t p = 0; p < P; ++p) {
    const uint32_t j = ids[p];
    if (slot[j] < 0) {
      slot[j] = 0;
      rows[nRows++] = j;
    }
  }
  if (size_t(nRows) * 16 >= maxId) {
    nRows = 0;
    for (uint32_t j = 0; j < maxId; ++j)
      if (slot[j] >= 0) rows[nRows++] = j;
  } else {
    std::sort(rows, rows + nRows);
  }
  for (uint32_t t = 0; t < nRows; ++t) {
    slot[rows[t]] = static_cast<int32_t>(t);
    cnt[t] = 0;
  }
  for (size_t p = 0; p < P; ++p) ++cnt[slot[ids[p]]];
  start[0] = 0;
  for (uint32_t t = 0; t < nRows; ++t) {
    start[t + 1] = start[t] + cnt[t];
    cnt[t] = start[t];
  }
  for (size_t p = 0; p < P; ++p) {
    const uint32_t e = cnt[slot[ids[p]]]++;
    ent[e] = static_cast<uint32_t>(p);
    entS[e] = sampleOf[p];
  }
  for (uint32_t t = 0; t < nRows; ++t) slot[rows[t]] = -1;  // leave the map clean for the next index
  idx.nRows = nRows;
}

void check_slice(const CsrView& d, const uint32_t* pointIds, uint32_t n, uint32_t D, bool needLabels,
                 uint32_t numLabels) {
  for (uint32_t i = 0; i < n; ++i) {
    const uint32_t r = pointIds[i];
    if (r >= d.points)
      throw ArgError("pointIds[" + std::to_string(i) + "] = " + std::to_string(r) + " is out of range (the dataset has " +
                     std::to_string(d.points) + " points)");
    const uint32_t q0 = d.offsets[r], q1 = d.offsets[r + 1];
    if (q1 < q0 || q1 > d.nnz)
      throw ArgError("data.offsets of point " + std::to_string(r) + " are corrupt ([" + std::to_string(q0) + ", " +
                     std::to_string(q1) + ") with " + std::to_string(d.nnz) + " stored nonzeros)");
    for (uint32_t q = q0; q < q1; ++q)
      if (d.indices[q] >= D)
        throw ArgError("feature id " + std::to_string(d.indices[q]) + " of point " + std::to_string(r) +
                       " is >= the network's input dimension " + std::to_string(D));
    if (!needLabels) continue;
    const uint32_t l0 = d.labelOffsets[r], l1 = d.labelOffsets[r + 1];
    if (l1 < l0 || l1 > d.nLabels)
      throw ArgError("data.labelOffsets of point " + std::to_string(r) + " are corrupt");
    for (uint32_t q = l0; q < l1; ++q) {
      if (d.labelIndices[q] >= numLabels)
        throw ArgError("label id " + std::to_string(d.labelIndices[q]) + " of point " + std::to_string(r) +
                       " is >= the last layer's size " + std::to_string(numLabels));
      if (q > l0 && d.labelIndices[q] <= d.labelIndices[q - 1])
        throw ArgError("labels of point " + std::to_string(r) + " are not strictly increasing");
    }
  }
}

namespace {
// The ranges this thread has advised (advise_huge_pages), newest last.
std::vector<std::pair<uintptr_t, size_t>>& advised_ranges() {
  static thread_local std::vector<std::pair<uintptr_t, size_t>> advised;
  return advised;
}
}  // namespace

void advise_huge_pages(const void* p, size_t bytes) {
#if defined(__linux__)
  constexpr size_t kMin = size_t(16) << 20, kHuge = size_t(2) << 20;
  if (bytes < kMin) return;
  auto& advised = advised_ranges();
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  for (const auto& r : advised)
    if (r.first == a && r.second == bytes) return;
  if (advised.size() >= 64) advised.erase(advised.begin());
  advised.emplace_back(a, bytes);
  const uintptr_t lo = (a + kHuge - 1) & ~(kHuge - 1), hi = (a + bytes) & ~(kHuge - 1);
  if (hi <= lo) return;
  madvise(reinterpret_cast<void*>(lo), hi - lo, MADV_HUGEPAGE);
#if defined(MADV_COLLAPSE)
  madvise(reinterpret_cast<void*>(lo), hi - lo, MADV_COLLAPSE);
#else
  madvise(reinterpret_cast<void*>(lo), hi - lo, 25 /* MADV_COLLAPSE */);
#endif
#else
  (void)p;
  (void)bytes;
#endif
}

void advise_small_pages(const void* p, size_t bytes) {
#if defined(__linux__)
  constexpr size_t kHuge = size_t(2) << 20;
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  auto& advised = advised_ranges();
  for (size_t i = 0; i < advised.size(); ++i)
    if (advised[i].first == a && advised[i].second == bytes) {
      advised.erase(advised.begin() + long(i));  // a later advise_huge_pages on this thread advises again
      break;
    }
  const uintptr_t lo = (a + kHuge - 1) & ~(kHuge - 1), hi = (a + bytes) & ~(kHuge - 1);
  if (hi <= lo) return;
  madvise(reinterpret_cast<void*>(lo), hi - lo, MADV_NOHUGEPAGE);
#else
  (void)p;
  (void)bytes;
#endif
}

size_t populate(void* p, size_t bytes) {
  if (bytes == 0) return 0;
#if defined(__linux__)
  constexpr uintptr_t kPage = 4096;
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  const uintptr_t lo = a & ~(kPage - 1), hi = (a + bytes + kPage - 1) & ~(kPage - 1);
#if defined(MADV_POPULATE_WRITE)
  const int populateWrite = MADV_POPULATE_WRITE;
#else
  const int populateWrite = 23;  // MADV_POPULATE_WRITE, Linux >= 5.14
#endif
  if (madvise(reinterpret_cast<void*>(lo), hi - lo, populateWrite) == 0) return bytes;
#endif
  // Older kernels: rewrite one byte per page with its own value (nothing else runs on these arrays yet).
  volatile unsigned char* c = static_cast<volatile unsigned char*>(p);
  for (size_t i = 0; i < bytes; i += 4096) c[i] = c[i];
  c[bytes - 1] = c[bytes - 1];
  return bytes;
}

size_t release_pages(void* p, size_t bytes) {
  if (bytes == 0) return 0;
  unsigned char* c = static_cast<unsigned char*>(p);
#if defined(__linux__)
  constexpr uintptr_t kPage = 4096;
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  const uintptr_t lo = (a + kPage - 1) & ~(kPage - 1), hi = (a + bytes) & ~(kPage - 1);
  if (hi > lo && madvise(reinterpret_cast<void*>(lo), hi - lo, MADV_DONTNEED) == 0) {
    std::memset(c, 0, lo - a);
    std::memset(reinterpret_cast<unsigned char*>(hi), 0, a + bytes - hi);
    return hi - lo;
  }
#endif
  std::memset(c, 0, bytes);
  return 0;
}

void apply_activation(float* x, size_t n, Activation a) {
  if (a != Activation::ReLU) return;
  for (size_t i = 0; i < n; ++i) x[i] = x[i] > 0.0f ? x[i] : 0.0f;
}

// Zeroes columns [n, ldn) of a (rows, ldn) matrix.
static void zero_pad_columns(float* M, uint32_t rows, uint32_t n, uint32_t ldn) {
  if (n == ldn) return;
  for (uint32_t r = 0; r < rows; ++r) std::memset(M + size_t(r) * ldn + n, 0, sizeof(float) * (ldn - n));
}

// True if `id` is stored in the bucket that query key `key` selects in table t (with the same bounds checks
// as tables_query: a corrupt bucket counts as not containing it).
static bool bucket_contains(const Tables& T, uint32_t t, uint32_t key, uint32_t id) {
  const uint32_t B = T.buckets();
  if (key >= B) return false;
  const uint32_t* off = T.offsets + size_t(t) * (B + 1) + key;
  const uint32_t len = T.fill[size_t(t) * B + key];
  if (off[1] < off[0] || off[1] > T.tableCapacity || len > off[1] - off[0]) return false;
  const uint32_t* ids = T.ids + size_t(t) * T.tableCapacity + off[0];
  for (uint32_t i = 0; i < len; ++i)
    if (ids[i] == id) return true;
  return false;
}

// Labels of a slice that are stored in none of their L query buckets (the tables would have missed them).
static double count_missed(const Tables& T, const uint32_t* keys, const uint32_t* lab, uint32_t nl) {
  double missed = 0;
  for (uint32_t e = 0; e < nl; ++e) {
    bool found = false;
    for (uint32_t t = 0; t < T.L && !found; ++t)
      if (T.keys[size_t(t) * T.N + lab[e]] == keys[t]) found = bucket_contains(T, t, keys[t], lab[e]);
    if (!found) missed += 1;
  }
  return missed;
}

// Starts a new marking generation of s.labelMark (sized to N): afterwards no id is marked.
static void new_mark_epoch(Scratch& s, uint32_t N) {
  if (s.labelMark.size() < N) s.labelMark.assign(N, 0);
  if (s.posInShared.size() < N) s.posInShared.resize(N);
  if (++s.labelEpoch == 0) {
    std::fill(s.labelMark.begin(), s.labelMark.end(), 0);
    s.labelEpoch = 1;
  }
}

// Appends the slice's distinct labels (first-seen order) to out[0..) unless marked; marks them. Returns the count.
static uint32_t collect_batch_labels(const CsrView& labels, const ForwardCtx& c, uint32_t N, Scratch& s,
                                     std::vector<uint32_t>& out, uint32_t n0) {
  uint32_t n = n0;
  for (uint32_t i = 0; i < c.n; ++i) {
    const uint32_t r = c.rows[i];
    for (uint32_t e = labels.labelOffsets[r]; e < labels.labelOffsets[r + 1]; ++e) {
      const uint32_t id = labels.labelIndices[e];
      if (id >= N) throw ArgError("label id " + std::to_string(id) + " >= layer size " + std::to_string(N));
      if (s.labelMark[id] == s.labelEpoch) continue;
      s.labelMark[id] = s.labelEpoch;
      grow(out, size_t(n) + 1)[n] = id;
      ++n;
    }
  }
  return n - n0;
}

uint32_t shared_set(const NetLayer& layer, uint32_t k, const CsrView& labels, const ForwardCtx& c, Scratch& s) {
  const uint32_t N = layer.outDim;
  new_mark_epoch(s, N);
  uint32_t nS = layer.batchNegatives ? collect_batch_labels(labels, c, N, s, s.shared, 0) : 0;
  const uint32_t target = std::min(layer.query.minActive, N);
  if (nS < target) {
    if (uint64_t(target) * 2 > N) {
      // A fill of more than half the layer: every id (rejection sampling would slow down near the end).
      for (uint32_t id = 0; id < N; ++id)
        if (s.labelMark[id] != s.labelEpoch) {
          s.labelMark[id] = s.labelEpoch;
          grow(s.shared, size_t(nS) + 1)[nS] = id;
          ++nS;
        }
    } else {
      SplitMix64 rng(net_query_seed(uint64_t(c.fillSeed) << 32, k));
      uint32_t* out = grow(s.shared, target);
      while (nS < target) {
        const uint32_t id = rng.below(N);
        if (s.labelMark[id] == s.labelEpoch) continue;
        s.labelMark[id] = s.labelEpoch;
        out[nS++] = id;
      }
    }
  }
  std::sort(s.shared.begin(), s.shared.begin() + nS);
  for (uint32_t p = 0; p < nS; ++p) s.posInShared[s.shared[p]] = p;
  return nS;
}

// buf.sampleOf[p] = the sample whose active list holds position p (from buf.actOff over n samples).
static void fill_sample_of(LayerBuf& buf, uint32_t n) {
  const uint32_t* off = buf.actOff.data();
  uint32_t* sampleOf = grow(buf.sampleOf, off[n]);
  for (uint32_t i = 0; i < n; ++i)
    for (uint32_t p = off[i]; p < off[i + 1]; ++p) sampleOf[p] = i;
}

void sampled_active_sets(LayerBuf& buf, const NetLayer& layer, uint32_t k, const float* X, uint32_t ldx,
                         const ForwardCtx& c, const CsrView* labels, double* missed, Scratch& s, bool excludeShared) {
  if (s.hashS.size() <= k) s.hashS.resize(k + 1);
  if (s.queryS.size() <= k) s.queryS.resize(k + 1);
  HashScratch& hs = s.hashS[k];
  QueryScratch& qs = s.queryS[k];
  const Tables& T = layer.tables;
  const uint32_t L = T.L, N = T.N;
  if (excludeShared && layer.query.budget == 0 && labels) {
    // No table candidates (budget 0): a sample's extras are its own labels outside the shared set, which is
    // what the query would return; the tables are neither hashed nor probed (no label-recall count).
    uint32_t* off = grow(buf.actOff, size_t(c.n) + 1);
    uint32_t* ownExtra = grow(s.ownExtra, c.n);
    off[0] = 0;
    for (uint32_t i = 0; i < c.n; ++i) {
      const uint32_t r = c.rows[i];
      const uint32_t* own = labels->labelIndices + labels->labelOffsets[r];
      const uint32_t nOwn = labels->labelOffsets[r + 1] - labels->labelOffsets[r];
      uint32_t* out = grow(buf.actIds, size_t(off[i]) + nOwn) + off[i];
      uint32_t kept = 0;
      for (uint32_t e = 0; e < nOwn; ++e)
        if (s.labelMark[own[e]] != s.labelEpoch) out[kept++] = own[e];
      ownExtra[i] = kept;
      off[i + 1] = off[i] + kept;
    }
    fill_sample_of(buf, c.n);
    return;
  }
  // Keys of every sample at once: the batched hash is several times faster per vector than one call each.
  uint32_t* allKeys = grow(s.keys, size_t(c.n) * L);
  hash_dense_batch(layer.hash, X, ldx, c.n, 0, L, allKeys, L, hs);
  QueryOptions q = layer.query;
  if (excludeShared) q.minActive = 0;  // the shared set is the fill
  const uint64_t fromTables = std::min<uint64_t>(q.budget, uint64_t(L) * T.bucketSize);
  // Per-sample fill with in-batch negatives: the slice's labels become required ids after each sample's own.
  uint32_t nBatch = 0;
  if (labels && layer.batchNegatives && !excludeShared) {
    new_mark_epoch(s, N);
    nBatch = collect_batch_labels(*labels, c, N, s, s.batchLabels, 0);
  }
  uint32_t* off = grow(buf.actOff, size_t(c.n) + 1);
  uint32_t* ownExtra = excludeShared ? grow(s.ownExtra, c.n) : nullptr;
  off[0] = 0;
  for (uint32_t i = 0; i < c.n; ++i) {
    const uint32_t* req = nullptr;
    const uint32_t* own = nullptr;
    uint32_t nReq = 0, nOwn = 0;
    if (labels) {
      const uint32_t r = c.rows[i];
      own = req = labels->labelIndices + labels->labelOffsets[r];
      nOwn = nReq = labels->labelOffsets[r + 1] - labels->labelOffsets[r];
      if (nBatch) {
        // Own labels first (the targets), then the slice's labels; tables_query drops the repeats.
        uint32_t* rq = grow(s.required, size_t(nOwn) + nBatch);
        std::copy(own, own + nOwn, rq);
        std::copy(s.batchLabels.data(), s.batchLabels.data() + nBatch, rq + nOwn);
        req = rq;
        nReq = nOwn + nBatch;
      }
    }
    const uint32_t cap = static_cast<uint32_t>(std::min<uint64_t>(N, std::max<uint64_t>(nReq + fromTables, q.minActive)));
    uint32_t* out = grow(buf.actIds, size_t(off[i]) + cap) + off[i];
    const uint32_t* keys = allKeys + size_t(i) * L;
    const uint64_t key = c.training ? (uint64_t(c.seed) << 32 | (layer.sharedFill ? 0u : c.positions[i])) : uint64_t(c.rows[i]);
    uint32_t cnt = tables_query(T, keys, req, nReq, q, net_query_seed(key, k), qs, out, cap);
    if (cnt < nOwn) throw ArgError("internal: the query dropped required ids");
    for (uint32_t e = 0; e < nOwn; ++e)
      if (out[e] != own[e]) throw ArgError("internal: the query reordered required ids");
    if (missed) *missed += count_missed(T, keys, own, nOwn);
    if (excludeShared) {
      // Keep what is not in the shared set, in order: the sample's own labels outside it come first.
      uint32_t kept = 0, keptOwn = 0;
      for (uint32_t e = 0; e < cnt; ++e) {
        if (s.labelMark[out[e]] == s.labelEpoch) continue;
        out[kept++] = out[e];
        if (e < nOwn) ++keptOwn;
      }
      cnt = kept;
      ownExtra[i] = keptOwn;
    }
    off[i + 1] = off[i] + cnt;
  }
  fill_sample_of(buf, c.n);
}

// apply_dropout on samples [lo, hi) of buf.keep, already grown to (n, lda).
static void dropout_rows(const NetLayer& L, uint32_t k, LayerBuf& buf, uint32_t width, const ForwardCtx& c, uint32_t lo,
                         uint32_t hi) {
  const uint32_t lda = buf.lda;
  float* keep = buf.keep.data();
  float* A = buf.A.data();
  const float scale = 1.0f / (1.0f - L.dropout);
  // Keep a unit when its 24-bit uniform draw is at least dropout * 2^24.
  const uint32_t cut = static_cast<uint32_t>(double(L.dropout) * 16777216.0);
  for (uint32_t i = lo; i < hi; ++i) {
    SplitMix64 rng(net_query_seed((uint64_t(c.seed) << 32) | c.positions[i], 1000 + k));
    float* kr = keep + size_t(i) * lda;
    float* ar = A + size_t(i) * lda;
    for (uint32_t j = 0; j < width; ++j) {
      const uint32_t u = static_cast<uint32_t>(rng.next() >> 40);
      kr[j] = u >= cut ? scale : 0.0f;
      ar[j] *= kr[j];
    }
    std::memset(kr + width, 0, sizeof(float) * (lda - width));
  }
}

static bool has_dropout(const NetLayer& L, const ForwardCtx& c) { return L.dropout > 0.0f && c.training; }

bool apply_dropout(const NetLayer& L, uint32_t k, LayerBuf& buf, uint32_t width, const ForwardCtx& c) {
  if (!has_dropout(L, c)) return false;
  grow(buf.keep, size_t(c.n) * buf.lda);
  dropout_rows(L, k, buf, width, c, 0, c.n);
  return true;
}

// finish_layer0 on samples [lo, hi): b0.At and (with dropout) b0.keep already grown. Each sample's dropout
// draws come from its own stream, so any split of the samples gives the same result.
static void finish_layer0_rows(const NetLayer& L0, LayerBuf& b0, const ForwardCtx& c, uint32_t lo, uint32_t hi) {
  const uint32_t ldn = c.ldn, d0 = L0.outDim, lda = b0.lda;
  float* A = b0.A.data();
  apply_activation(A + size_t(lo) * lda, size_t(hi - lo) * lda, L0.act);
  if (has_dropout(L0, c)) dropout_rows(L0, 0, b0, d0, c, lo, hi);
  nk::transpose(b0.At.data() + lo, ldn, A + size_t(lo) * lda, lda, hi - lo, d0);
}

static void prepare_layer0(const NetLayer& L0, LayerBuf& b0, const ForwardCtx& c) {
  grow(b0.At, size_t(L0.outDim) * c.ldn);
  if (has_dropout(L0, c)) grow(b0.keep, size_t(c.n) * b0.lda);
}

void finish_layer0(const NetLayer& L0, LayerBuf& b0, const ForwardCtx& c) {
  prepare_layer0(L0, b0, c);
  finish_layer0_rows(L0, b0, c, 0, c.n);
  zero_pad_columns(b0.At.data(), L0.outDim, c.n, c.ldn);
}

void forward_hidden(const NetLayer* layers, uint32_t nLayers, const CsrView& data, const ForwardCtx& c, Scratch& s) {
  const uint32_t n = c.n;
  if (s.layer.size() < nLayers) s.layer.resize(nLayers);
  // Layer 0: input-major rows of the sample's features.
  const NetLayer& L0 = layers[0];
  LayerBuf& b0 = s.layer[0];
  const uint32_t d0 = L0.outDim;
  b0.lda = nk::pad_to(d0, nk::kDimPad);
  float* A = grow(b0.A, size_t(n) * b0.lda);
  // Each part also finishes its samples (activation, dropout, their columns of At): no serial pass between
  // the sparse forward and the next layer. Parts of 16 samples (a cache line of At's columns) each.
  const uint32_t T = std::max(1u, std::min(c.threads, n / 16));  // at least 16 samples per thread
  const bool finish = nLayers > 1;  // else layer 0 is the output: A holds its logits
  if (finish) prepare_layer0(L0, b0, c);
  fork_join(T, [&](uint32_t t) {
    uint32_t lo, hi;
    split_range(n, T, t, 16, lo, hi);
    nk::sparse_forward(A + size_t(lo) * b0.lda, b0.lda, L0.W, L0.b, d0, c.rows + lo, hi - lo, data.offsets,
                       data.indices, data.values);
    if (finish) finish_layer0_rows(L0, b0, c, lo, hi);
  });
  if (!finish) return;
  zero_pad_columns(b0.At.data(), d0, n, c.ldn);
  forward_upper(layers, nLayers, c, s);
}

void forward_upper(const NetLayer* layers, uint32_t nLayers, const ForwardCtx& c, Scratch& s) {
  const uint32_t n = c.n, ldn = c.ldn;
  if (s.layer.size() < nLayers) s.layer.resize(nLayers);
  for (uint32_t k = 1; k + 1 < nLayers; ++k) {
    const NetLayer& Lk = layers[k];
    const LayerBuf& prev = s.layer[k - 1];
    LayerBuf& buf = s.layer[k];
    const uint32_t d = Lk.inDim, o = Lk.outDim;
    buf.lda = nk::pad_to(o, nk::kDimPad);
    float* A = grow(buf.A, size_t(n) * buf.lda);
    float* At = grow(buf.At, size_t(o) * ldn);
    if (Lk.sampled && c.useSampling) {
      sampled_active_sets(buf, Lk, k, prev.A.data(), prev.lda, c, nullptr, nullptr, s);
      const uint32_t P = buf.actOff[n];
      build_index(buf.index, buf.actIds.data(), buf.sampleOf.data(), P, o, s);
      float* z = grow(buf.z, P);
      nk::rowlist_forward(z, buf.index.view(), Lk.W, Lk.b, prev.A.data(), d, prev.lda);
      apply_activation(z, P, Lk.act);
      std::memset(A, 0, sizeof(float) * size_t(n) * buf.lda);
      std::memset(At, 0, sizeof(float) * size_t(o) * ldn);
      const uint32_t* ids = buf.actIds.data();
      const uint32_t* so = buf.sampleOf.data();
      for (uint32_t p = 0; p < P; ++p) {
        A[size_t(so[p]) * buf.lda + ids[p]] = z[p];
        At[size_t(ids[p]) * ldn + so[p]] = z[p];
      }
    } else {
      for (uint32_t j0 = 0; j0 < o; j0 += nk::kRowBlock) {
        const uint32_t R = std::min(nk::kRowBlock, o - j0);
        nk::blk_forward(At + size_t(j0) * ldn, Lk.W + size_t(j0) * d, d, Lk.b + j0, prev.At.data(), R, ldn);
      }
      apply_activation(At, size_t(o) * ldn, Lk.act);
      zero_pad_columns(At, o, n, ldn);
      nk::transpose(A, buf.lda, At, ldn, o, n);
      for (uint32_t i = 0; i < n; ++i) std::memset(A + size_t(i) * buf.lda + o, 0, sizeof(float) * (buf.lda - o));
      if (apply_dropout(Lk, k, buf, o, c)) nk::transpose(At, ldn, A, buf.lda, n, o);
    }
  }
}

}  // namespace net

void net_check_layers(const NetLayer* layers, uint32_t nLayers) {
  if (nLayers == 0) throw ArgError("net.layers must hold at least one layer");
  for (uint32_t k = 0; k < nLayers; ++k) {
    const NetLayer& L = layers[k];
    const std::string where = "net.layers[" + std::to_string(k) + "]";
    if (L.inDim == 0 || L.outDim == 0) throw ArgError(where + ": inDim and outDim must be positive");
    if ((k == 0) != L.inputMajor)
      throw ArgError(where + ".inputMajor must be " + (k == 0 ? "1 (layer 0 reads the sparse input)" : "0"));
    if (k > 0 && L.inDim != layers[k - 1].outDim)
      throw ArgError(where + ".inDim = " + std::to_string(L.inDim) + " differs from the previous layer's outDim " +
                     std::to_string(layers[k - 1].outDim));
    const bool last = k + 1 == nLayers;
    if (last && L.act != Activation::Softmax) throw ArgError(where + ".activation must be 1 (softmax) on the last layer");
    if (!last && L.act == Activation::Softmax) throw ArgError(where + ".activation: softmax is only allowed on the last layer");
    if (L.sampled) {
      if (k == 0) throw ArgError(where + ".sampling: layer 0 cannot be sampled");
      if (L.hash.dim != L.inDim)
        throw ArgError(where + ".sampling.hash.dim = " + std::to_string(L.hash.dim) + " differs from inDim " +
                       std::to_string(L.inDim));
      if (L.hasTables && L.tables.N != L.outDim)
        throw ArgError(where + ".sampling.tables.N = " + std::to_string(L.tables.N) + " differs from outDim " +
                       std::to_string(L.outDim));
      if (L.hasTables && (L.hash.L != L.tables.L || L.hash.rangeBits != L.tables.rangeBits))
        throw ArgError(where + ".sampling: hash and tables differ in L or rangeBits");
    }
    if (L.hasWide) {
      if (!last || k == 0) throw ArgError(where + ".wide: only the output layer of a network with a hidden layer has a wide part");
      if (L.sampled && !L.sharedFill) throw ArgError(where + ".wide: a sampled output layer needs sharedFill for its wide part");
      if (L.wideD != layers[0].featureDim)
        throw ArgError(where + ".wide.inputDim = " + std::to_string(L.wideD) + " differs from the network's input features " +
                       std::to_string(layers[0].featureDim));
    }
  }
}

}  // namespace sl
