// Bindings of the LSH kernels (shapes in docs/design.md "Native functions"). One call per batch: every
// binding parses its spec objects once, re-checks lengths and ranges, then loops in C++.
//
//   lshHashDense(hash, vectors (n, D), n, t0, t1, outKeys (n, t1-t0), rowStride = D)
//   lshHashSparse(hash, offsets, indices, values, rows (r), t0, t1, outKeys (r, t1-t0))
//   lshRehash(hash, tables, vectors (N, D), t0, t1, seed)
//   lshBuild(tables, t0, t1, seed)
//   lshUpdate(tables, neuronIds (n), newKeys (n, L), seed)
//   lshQuery(tables, keys (q, L), q, query, reqOffsets (q+1) | null, reqIds | null, seed, outCounts (q),
//            outIds (q, cap), cap)
//   lshInnerTopK(vectors (N, D), N, D, queries (q, D), q, candOffsets (q+1) | null, candIds | null, k,
//                outIdx (q, k), outVal (q, k))      exact MIPS top-k, for recall/speed measurements
#include <algorithm>
#include <string>

#include "lsh.h"
#include "lsh_eval.h"
#include "lsh_napi_parse.h"
#include "modules.h"
#include "napi_util.h"

namespace sl {

namespace {

// Per-thread scratch: each worker thread calls on its own thread, so these are never shared, and they keep
// their capacity across calls (no allocation in steady state).
thread_local HashScratch tHashScratch;
thread_local QueryScratch tQueryScratch;

bool IsAbsent(const Napi::Value& v) { return v.IsUndefined() || v.IsNull(); }

void CheckRange(uint32_t t0, uint32_t t1, uint32_t L) {
  if (t0 >= t1 || t1 > L)
    throw ArgError("table range [" + std::to_string(t0) + ", " + std::to_string(t1) + ") must satisfy t0 < t1 <= L = " +
                   std::to_string(L));
}

Napi::Value HashDense(const Napi::CallbackInfo& info) {
  HashParams p = ParseHashParams(GetObject(info[0], "hash"));
  uint32_t n = GetU32(info[2], "n"), t0 = GetU32(info[3], "t0"), t1 = GetU32(info[4], "t1");
  CheckRange(t0, t1, p.L);
  // Optional row stride (padded rows, as the network's activations): vector i = vectors[i * stride ..][0, dim).
  uint32_t stride = p.dim;
  if (info.Length() > 6 && !IsAbsent(info[6])) {
    stride = GetU32(info[6], "rowStride");
    if (stride < p.dim) throw ArgError("rowStride must be >= hash.dim");
  }
  auto vectors = GetArray<float>(info[1], "vectors", n == 0 ? 0 : size_t(n - 1) * stride + p.dim);
  const uint32_t w = t1 - t0;
  auto out = GetArray<uint32_t>(info[5], "outKeys", size_t(n) * w);
  hash_dense_batch(p, vectors.data, stride, n, t0, t1, out.data, w, tHashScratch);
  return info.Env().Undefined();
}

Napi::Value HashSparse(const Napi::CallbackInfo& info) {
  HashParams p = ParseHashParams(GetObject(info[0], "hash"));
  auto offsets = GetArray<uint32_t>(info[1], "offsets", 1);
  auto indices = GetArray<uint32_t>(info[2], "indices");
  auto values = GetArray<float>(info[3], "values", indices.size);
  auto rows = GetArray<uint32_t>(info[4], "rows");
  uint32_t t0 = GetU32(info[5], "t0"), t1 = GetU32(info[6], "t1");
  CheckRange(t0, t1, p.L);
  const uint32_t w = t1 - t0;
  auto out = GetArray<uint32_t>(info[7], "outKeys", rows.size * w);
  const size_t nRows = offsets.size - 1;
  for (size_t i = 0; i < rows.size; ++i) {
    uint32_t r = rows[i];
    if (r >= nRows) throw ArgError("rows[" + std::to_string(i) + "] = " + std::to_string(r) + " is not a row of offsets");
    if (offsets[r + 1] < offsets[r] || offsets[r + 1] > indices.size) throw ArgError("offsets are not a valid CSR index");
  }
  HashScratch& s = tHashScratch;
  for (size_t i = 0; i < rows.size; ++i) {
    uint32_t r = rows[i], b = offsets[r];
    // hash_sparse checks indices < dim itself (throws before touching its scratch).
    hash_sparse(p, indices.data + b, values.data + b, offsets[r + 1] - b, t0, t1, out.data + i * w, s);
  }
  return info.Env().Undefined();
}

Napi::Value Rehash(const Napi::CallbackInfo& info) {
  HashParams p = ParseHashParams(GetObject(info[0], "hash"));
  Tables t = ParseTables(GetObject(info[1], "tables"));
  CheckHashMatchesTables(p, t);
  auto vectors = GetArray<float>(info[2], "vectors", size_t(t.N) * p.dim);
  uint32_t t0 = GetU32(info[3], "t0"), t1 = GetU32(info[4], "t1");
  CheckRange(t0, t1, t.L);
  tables_rehash(t, p, vectors.data, t0, t1, GetSeed(info[5], "seed"));
  return info.Env().Undefined();
}

Napi::Value Build(const Napi::CallbackInfo& info) {
  Tables t = ParseTables(GetObject(info[0], "tables"));
  uint32_t t0 = GetU32(info[1], "t0"), t1 = GetU32(info[2], "t1");
  CheckRange(t0, t1, t.L);
  tables_build(t, t0, t1, GetSeed(info[3], "seed"));
  return info.Env().Undefined();
}

Napi::Value Update(const Napi::CallbackInfo& info) {
  Tables t = ParseTables(GetObject(info[0], "tables"));
  auto ids = GetArray<uint32_t>(info[1], "neuronIds");
  auto keys = GetArray<uint32_t>(info[2], "newKeys", ids.size * t.L);
  if (ids.size > 0xFFFFFFFFu) throw ArgError("neuronIds is too long");
  tables_update(t, ids.data, keys.data, static_cast<uint32_t>(ids.size), GetSeed(info[3], "seed"));
  return info.Env().Undefined();
}

Napi::Value Query(const Napi::CallbackInfo& info) {
  Tables t = ParseTables(GetObject(info[0], "tables"));
  uint32_t q = GetU32(info[2], "q");
  auto keys = GetArray<uint32_t>(info[1], "keys", size_t(q) * t.L);
  QueryOptions o = ParseQuery(GetObject(info[3], "query"));
  Span<uint32_t> reqOffsets, reqIds;
  const bool hasReq = !IsAbsent(info[4]);
  if (hasReq) {
    reqOffsets = GetArray<uint32_t>(info[4], "reqOffsets", size_t(q) + 1);
    reqIds = GetArray<uint32_t>(info[5], "reqIds");
    for (uint32_t i = 0; i < q; ++i)
      if (reqOffsets[i + 1] < reqOffsets[i]) throw ArgError("reqOffsets must be non-decreasing");
    if (reqOffsets[q] > reqIds.size) throw ArgError("reqOffsets points past the end of reqIds");
  }
  uint64_t seed = GetSeed(info[6], "seed");
  uint32_t cap = GetU32(info[9], "cap");
  auto outCounts = GetArray<uint32_t>(info[7], "outCounts", q);
  auto outIds = GetArray<uint32_t>(info[8], "outIds", size_t(q) * cap);
  QueryScratch& s = tQueryScratch;
  for (uint32_t i = 0; i < q; ++i) {
    const uint32_t* req = hasReq ? reqIds.data + reqOffsets[i] : nullptr;
    uint32_t nReq = hasReq ? reqOffsets[i + 1] - reqOffsets[i] : 0;
    outCounts[i] = tables_query(t, keys.data + size_t(i) * t.L, req, nReq, o, stream_seed(seed, i), s,
                                outIds.data + size_t(i) * cap, cap);
  }
  return info.Env().Undefined();
}

Napi::Value InnerTopK(const Napi::CallbackInfo& info) {
  uint32_t N = GetU32(info[1], "N"), D = GetU32(info[2], "D"), q = GetU32(info[4], "q"), k = GetU32(info[7], "k");
  if (D == 0) throw ArgError("D must be positive");
  auto vectors = GetArray<float>(info[0], "vectors", size_t(N) * D);
  auto queries = GetArray<float>(info[3], "queries", size_t(q) * D);
  const uint32_t* co = nullptr;
  const uint32_t* ci = nullptr;
  if (!IsAbsent(info[5])) {
    auto offs = GetArray<uint32_t>(info[5], "candOffsets", size_t(q) + 1);
    auto ids = GetArray<uint32_t>(info[6], "candIds");
    for (uint32_t i = 0; i < q; ++i)
      if (offs[i + 1] < offs[i]) throw ArgError("candOffsets must be non-decreasing");
    if (offs[q] > ids.size) throw ArgError("candOffsets points past the end of candIds");
    for (size_t j = offs[0]; j < offs[q]; ++j)
      if (ids[j] >= N) throw ArgError("candIds holds an id >= N");
    co = offs.data;
    ci = ids.data;
  }
  auto outIdx = GetArray<uint32_t>(info[8], "outIdx", size_t(q) * k);
  auto outVal = GetArray<float>(info[9], "outVal", size_t(q) * k);
  inner_topk(vectors.data, N, D, queries.data, q, co, ci, k, outIdx.data, outVal.data);
  return info.Env().Undefined();
}

// lshSimdLevel(cap?): caps the hash kernels' SIMD level (0 scalar, 1 AVX2, 2 AVX-512F) when given; returns the
// level in use.
Napi::Value SimdLevel(const Napi::CallbackInfo& info) {
  int cap = 2;
  if (info.Length() > 0 && !IsAbsent(info[0])) cap = static_cast<int>(std::min<uint32_t>(GetU32(info[0], "cap"), 2));
  return Napi::Number::New(info.Env(), lsh_set_simd_cap(cap));
}

}  // namespace

void RegisterLsh(Napi::Env env, Napi::Object exports) {
  Export<HashDense>(env, exports, "lshHashDense");
  Export<HashSparse>(env, exports, "lshHashSparse");
  Export<Rehash>(env, exports, "lshRehash");
  Export<Build>(env, exports, "lshBuild");
  Export<Update>(env, exports, "lshUpdate");
  Export<Query>(env, exports, "lshQuery");
  Export<InnerTopK>(env, exports, "lshInnerTopK");
  Export<SimdLevel>(env, exports, "lshSimdLevel");
}

}  // namespace sl
