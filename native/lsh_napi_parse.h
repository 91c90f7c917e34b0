// JS spec objects (HashSpec / TablesSpec / QuerySpec of docs/design.md) -> native views, with the cheap
// second-line checks: types, lengths, and the values that would otherwise index out of bounds.
// Shared by lsh_napi.cc and the network bindings (a sampled layer's `sampling: { hash, tables, query }`).
//
// Cost: ParseHashParams scans the parameter arrays once (O(K*L*binSize) for DWTA/WTA, O(projection
// entries) for SimHash, O(D) for MinHash); ParseTables and ParseQuery are O(1). Table contents (offsets,
// fill, ids) are not scanned here; the kernels bounds-check them where they read them.
#pragma once
#include <string>

#include "lsh.h"
#include "napi_util.h"

namespace sl {

namespace lsh_parse_detail {
inline bool IsPresent(const Napi::Object& o, const char* key) {
  Napi::Value v = o.Get(key);
  return !v.IsUndefined() && !v.IsNull();
}
inline void AllBelow(const uint32_t* a, size_t n, uint64_t bound, const char* what) {
  for (size_t i = 0; i < n; ++i)
    if (a[i] >= bound)
      throw ArgError(std::string(what) + " holds " + std::to_string(a[i]) + " at " + std::to_string(i) +
                     ", expected < " + std::to_string(bound));
}
// offs[0] == 0, non-decreasing, offs[n] <= total.
inline void CheckOffsets(const uint32_t* offs, size_t n, size_t total, const char* what) {
  if (offs[0] != 0) throw ArgError(std::string(what) + "[0] must be 0");
  for (size_t i = 0; i < n; ++i)
    if (offs[i + 1] < offs[i]) throw ArgError(std::string(what) + " must be non-decreasing");
  if (offs[n] > total) throw ArgError(std::string(what) + " points past the end of its data array");
}
}  // namespace lsh_parse_detail

// HashSpec -> HashParams. Pointers stay valid while the JS arrays are alive (the caller holds the spec).
inline HashParams ParseHashParams(const Napi::Object& o) {
  using namespace lsh_parse_detail;
  HashParams p;
  uint32_t family = GetU32Prop(o, "family");
  if (family > 3) throw ArgError("hash.family must be 0 (simhash), 1 (dwta), 2 (wta) or 3 (minhash)");
  p.family = static_cast<HashFamily>(family);
  p.K = GetU32Prop(o, "K");
  p.L = GetU32Prop(o, "L");
  p.dim = GetU32Prop(o, "dim");
  p.bitsPerHash = GetU32Prop(o, "bitsPerHash");
  p.rangeBits = GetU32Prop(o, "rangeBits");
  p.binSize = GetU32Prop(o, "binSize");
  p.seed = GetU32Prop(o, "seed");
  if (p.K == 0 || p.L == 0 || p.dim == 0) throw ArgError("hash.K, hash.L and hash.dim must be positive");
  if (p.L > 65535) throw ArgError("hash.L must be <= 65535");
  if (p.bitsPerHash == 0 || uint64_t(p.K) * p.bitsPerHash > 32) throw ArgError("hash.K * hash.bitsPerHash must be in 1..32");
  if (p.rangeBits == 0 || p.rangeBits > 24) throw ArgError("hash.rangeBits must be in 1..24");
  const uint64_t M = uint64_t(p.K) * p.L;
  if (M > 0xFFFFFFFFull / 64) throw ArgError("hash.K * hash.L is too large");
  switch (p.family) {
    case HashFamily::SimHash: {
      if (p.bitsPerHash != 1) throw ArgError("hash.bitsPerHash must be 1 for simhash");
      auto offs = GetArrayProp<uint32_t>(o, "projOffsets", M + 1);
      auto dims = GetArrayProp<uint32_t>(o, "projDims");
      auto signs = GetArrayProp<float>(o, "projSigns", dims.size);
      CheckOffsets(offs.data, M, dims.size, "hash.projOffsets");
      AllBelow(dims.data, offs[M], p.dim, "hash.projDims");
      p.projOffsets = offs.data;
      p.projDims = dims.data;
      p.projSigns = signs.data;
      // Sorted dims are part of the SimHash sum order (lsh.h).
      for (uint64_t m = 0; m < M; ++m)
        for (uint32_t i = offs[m] + 1; i < offs[m + 1]; ++i)
          if (dims[i] <= dims[i - 1]) throw ArgError("hash.projDims must be strictly increasing within a projection");
      if (IsPresent(o, "projMatrix")) p.projMatrix = GetArrayProp<int8_t>(o, "projMatrix", M * p.dim).data;
      break;
    }
    case HashFamily::DWTA:
    case HashFamily::WTA: {
      if (p.binSize < 2 || (p.binSize & (p.binSize - 1)) != 0 || (1u << p.bitsPerHash) != p.binSize)
        throw ArgError("hash.binSize must be a power of two >= 2 equal to 2^bitsPerHash");
      auto bins = GetArrayProp<uint32_t>(o, "binDims", M * p.binSize);
      AllBelow(bins.data, M * p.binSize, p.dim, "hash.binDims");
      p.binDims = bins.data;
      // The inverse map is only needed for sparse DWTA input; absent is fine for dense-only users.
      if (p.family == HashFamily::DWTA && IsPresent(o, "dimBinOffsets")) {
        auto dbo = GetArrayProp<uint32_t>(o, "dimBinOffsets", size_t(p.dim) + 1);
        auto db = GetArrayProp<uint32_t>(o, "dimBins");
        CheckOffsets(dbo.data, p.dim, db.size, "hash.dimBinOffsets");
        AllBelow(db.data, dbo[p.dim], M * p.binSize, "hash.dimBins");
        p.dimBinOffsets = dbo.data;
        p.dimBins = db.data;
      }
      break;
    }
    case HashFamily::MinHash: {
      auto perm = GetArrayProp<uint32_t>(o, "perm", p.dim);
      AllBelow(perm.data, p.dim, p.dim, "hash.perm");
      p.perm = perm.data;
      break;
    }
  }
  return p;
}

// TablesSpec -> Tables (views; the kernels write into the JS arrays).
inline Tables ParseTables(const Napi::Object& o) {
  Tables t;
  t.L = GetU32Prop(o, "L");
  t.N = GetU32Prop(o, "N");
  t.rangeBits = GetU32Prop(o, "rangeBits");
  t.bucketSize = GetU32Prop(o, "bucketSize");
  t.slack = GetU32Prop(o, "slack");
  uint32_t policy = GetU32Prop(o, "policy");
  if (policy > 1) throw ArgError("tables.policy must be 0 (fifo) or 1 (reservoir)");
  t.policy = static_cast<BucketPolicy>(policy);
  if (t.L == 0 || t.N == 0) throw ArgError("tables.L and tables.N must be positive");
  if (t.L > 65535) throw ArgError("tables.L must be <= 65535");
  if (t.rangeBits == 0 || t.rangeBits > 24) throw ArgError("tables.rangeBits must be in 1..24");
  if (t.bucketSize == 0) throw ArgError("tables.bucketSize must be positive");
  double cap = GetF64Prop(o, "tableCapacity");
  const uint64_t B = t.buckets();
  t.tableCapacity = uint64_t(t.N) + B * t.slack;
  if (cap != double(t.tableCapacity)) throw ArgError("tables.tableCapacity must equal N + 2^rangeBits * slack");
  // Offsets are 32-bit: a table's capacity must fit.
  if (t.tableCapacity > 0xFFFFFFFFull) throw ArgError("tables.tableCapacity exceeds 2^32 - 1");
  const size_t L = t.L;
  t.offsets = GetArrayProp<uint32_t>(o, "offsets", L * (B + 1)).data;
  t.fill = GetArrayProp<uint32_t>(o, "fill", L * B).data;
  t.seen = GetArrayProp<uint32_t>(o, "seen", L * B).data;
  t.ids = GetArrayProp<uint32_t>(o, "ids", L * t.tableCapacity).data;
  t.keys = GetArrayProp<uint32_t>(o, "keys", L * size_t(t.N)).data;
  return t;
}

inline QueryOptions ParseQuery(const Napi::Object& o) {
  QueryOptions q;
  uint32_t mode = GetU32Prop(o, "mode");
  if (mode > 2) throw ArgError("query.mode must be 0 (union), 1 (topk) or 2 (threshold)");
  q.mode = static_cast<QueryMode>(mode);
  q.budget = GetU32Prop(o, "budget");
  q.minFreq = GetU32Prop(o, "minFreq");
  q.minActive = GetU32Prop(o, "minActive");
  return q;
}

// Hash and tables must describe the same L tables and bucket range.
inline void CheckHashMatchesTables(const HashParams& p, const Tables& t) {
  if (p.L != t.L) throw ArgError("hash.L (" + std::to_string(p.L) + ") differs from tables.L (" + std::to_string(t.L) + ")");
  if (p.rangeBits != t.rangeBits)
    throw ArgError("hash.rangeBits (" + std::to_string(p.rangeBits) + ") differs from tables.rangeBits (" +
                   std::to_string(t.rangeBits) + ")");
}

// A non-negative integer seed passed from JS as a number (exact up to 2^53).
inline uint64_t GetSeed(const Napi::Value& v, const char* what) {
  double d = GetF64(v, what);
  if (!(d >= 0 && d <= 9007199254740991.0) || d != static_cast<double>(static_cast<uint64_t>(d)))
    throw ArgError(std::string("Expected non-negative integer (< 2^53) for ") + what);
  return static_cast<uint64_t>(d);
}

}  // namespace sl
